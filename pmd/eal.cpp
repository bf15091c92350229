#include "pmd/eal.hpp"

#include <rte_eal.h>
#include <rte_errno.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "pmd/log.hpp"

namespace rocedp::pmd {
namespace {

// DPDK's numeric log levels (rte_log.h: RTE_LOG_ERR = 4 ... RTE_LOG_DEBUG = 8). Numbers are
// accepted by every EAL version, names changed spelling across releases.
const char* dpdk_log_level(config::LoggingConfig::Level level) {
  switch (level) {
    case config::LoggingConfig::Level::kError:
      return "4";  // RTE_LOG_ERR
    case config::LoggingConfig::Level::kWarning:
      return "5";  // RTE_LOG_WARNING
    case config::LoggingConfig::Level::kInfo:
      return "6";  // RTE_LOG_NOTICE: EAL's INFO is per-device noise
    case config::LoggingConfig::Level::kDebug:
      return "8";  // RTE_LOG_DEBUG
  }
  return "6";
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
  args.insert(args.end(), {"--log-level", dpdk_log_level(cfg.logging.level)});
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

void eal_cleanup() {
  std::lock_guard lock(g_mutex);
  if (!g_initialised) return;
  rte_eal_cleanup();
  g_initialised = false;
  log(LogLevel::kInfo, "eal_cleanup");
}

}  // namespace rocedp::pmd
