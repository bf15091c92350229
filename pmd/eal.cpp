#include "pmd/eal.hpp"

#include <rte_alarm.h>
#include <rte_eal.h>
#include <rte_errno.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "pmd/log.hpp"

namespace rocedp::pmd {
namespace {

// Set once a driver left callbacks on EAL's interrupt thread that point into freed memory.
std::atomic<bool> g_keep_interrupt_sources{false};

// DPDK's numeric log level: numbers are accepted by every EAL version, names changed spelling
// across releases.
std::string dpdk_log_level_arg(config::LoggingConfig::Level level) {
  return std::to_string(dpdk_log_level(log_level_from_config(level)));
}

std::mutex g_mutex;
bool g_attempted = false;
std::atomic<bool> g_initialised{false};
// rte_eal_init keeps pointers into argv (and permutes it): the strings live for the process.
std::vector<std::string>* g_arg_storage = nullptr;
std::vector<char*>* g_argv = nullptr;

}  // namespace

std::vector<std::string> eal_arguments(const config::Config& cfg, const std::string& program) {
  std::vector<std::string> args{program};

  std::vector<unsigned> lcores = cfg.eal.lcores;
  if (cfg.control.lcore) lcores.push_back(*cfg.control.lcore);
  std::sort(lcores.begin(), lcores.end());
  lcores.erase(std::unique(lcores.begin(), lcores.end()), lcores.end());
  // Every lcore runs on the CPU of its number (-l), unless the main lcore is moved: then the
  // whole map goes to --lcores (lcore@cpu).
  const bool moved = cfg.eal.main_lcore_cpu.has_value();
  std::string list;
  for (unsigned c : lcores) {
    if (!list.empty()) list.push_back(',');
    list += std::to_string(c);
    if (moved) {
      list += '@';
      list += std::to_string(c == cfg.eal.main_lcore ? *cfg.eal.main_lcore_cpu : c);
    }
  }
  args.insert(args.end(), {moved ? "--lcores" : "-l", list, "--main-lcore",
                           std::to_string(cfg.eal.main_lcore)});
  // -m also with --no-huge: it sizes the anonymous memory EAL maps instead of hugepages.
  args.insert(args.end(), {"-m", std::to_string(cfg.eal.memory_mb)});
  if (!cfg.eal.hugepages) args.emplace_back("--no-huge");
  args.insert(args.end(), {"--file-prefix", cfg.eal.file_prefix});
  args.insert(args.end(), {"--log-level", dpdk_log_level_arg(cfg.logging.level)});
  args.insert(args.end(), cfg.eal.extra_args.begin(), cfg.eal.extra_args.end());
  return args;
}

bool eal_init(const config::Config& cfg, const std::string& program, std::string* error) {
  std::lock_guard lock(g_mutex);
  if (g_attempted) {
    if (error) *error = "EAL already initialised in this process (rte_eal_init runs once)";
    return false;
  }
  g_attempted = true;
  g_arg_storage = new std::vector<std::string>(eal_arguments(cfg, program));
  g_argv = new std::vector<char*>();
  for (std::string& s : *g_arg_storage) g_argv->push_back(s.data());
  g_argv->push_back(nullptr);

  std::string joined;
  for (const std::string& s : *g_arg_storage) {
    if (!joined.empty()) joined.push_back(' ');
    joined += s;
  }
  log(LogLevel::kInfo, "eal_init", {{"args", joined}});

  int rc = rte_eal_init(static_cast<int>(g_argv->size() - 1), g_argv->data());
  if (rc < 0) {
    std::string reason = rte_strerror(rte_errno);
    if (error) *error = "rte_eal_init failed: " + reason + " (args: " + joined + ")";
    log(LogLevel::kError, "eal_init_failed", {{"reason", reason}});
    return false;
  }
  g_initialised = true;
  return true;
}

bool eal_initialised() {
  return g_initialised.load();
}

void eal_keep_at_exit() {
  g_keep_interrupt_sources.store(true);
}

bool interrupt_thread_barrier(std::chrono::milliseconds timeout) {
  // The alarm's argument is a static counter, so a cancelled or late alarm never touches a
  // dead stack frame.
  static std::atomic<uint64_t> passes{0};
  const auto pass = [](void* arg) {
    static_cast<std::atomic<uint64_t>*>(arg)->fetch_add(1, std::memory_order_release);
  };
  const uint64_t before = passes.load(std::memory_order_acquire);
  if (rte_eal_alarm_set(1, pass, &passes) != 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (passes.load(std::memory_order_acquire) == before) {
    if (std::chrono::steady_clock::now() >= deadline) {
      rte_eal_alarm_cancel(pass, &passes);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

bool eal_cleanup() {
  std::lock_guard lock(g_mutex);
  if (!g_initialised) return false;
  if (g_keep_interrupt_sources.load()) {
    // The process is about to exit: leaving EAL as it is loses nothing (the kernel takes the
    // memory back); cleaning up would unmap memory that the interrupt thread still walks.
    g_initialised = false;
    log(LogLevel::kInfo, "eal_cleanup_skipped", {{"reason", "net_memif left interrupt sources"}});
    return false;
  }
  rte_eal_cleanup();
  g_initialised = false;
  log(LogLevel::kInfo, "eal_cleanup");
  return true;
}

}  // namespace rocedp::pmd
