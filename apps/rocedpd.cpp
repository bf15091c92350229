// rocedpd: the rocedp daemon. Brings up EAL, the packet pool, the ports (one queue pair per polling
// core), the polling lcores and the control thread from a YAML configuration (control/runtime.hpp
// assembles them), serves DPDK telemetry, and shuts down cleanly on SIGINT/SIGTERM.
//
//   rocedpd --config FILE.yaml        run
//   rocedpd --check-config FILE.yaml  validate only (exit 0 if valid)
//
// Exit status: 0 clean shutdown (or valid config), 1 start-up failure, 2 invalid configuration or
// usage (the ConfigError "file:line:column: key: reason" goes to stderr).

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "control/runtime.hpp"
#include "pmd/log.hpp"

namespace {

using rocedp::pmd::LogLevel;
using rocedp::pmd::log;

// The signal handler only stores the signal number; main() watches it.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "async-signal-safe flag");

extern "C" void on_signal(int sig) { g_signal.store(sig, std::memory_order_relaxed); }

void usage(FILE* out) {
  std::fprintf(out,
               "usage: rocedpd --config FILE.yaml\n"
               "       rocedpd --check-config FILE.yaml\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  bool check_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--config" || a == "--check-config") && i + 1 < argc) {
      path = argv[++i];
      check_only = a == "--check-config";
    } else if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (path.empty()) {
    usage(stderr);
    return 2;
  }

  rocedp::config::Config cfg;
  try {
    cfg = rocedp::config::load_file(path);
  } catch (const rocedp::config::ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  if (check_only) {
    std::printf("%s: configuration is valid\n", path.c_str());
    return 0;
  }
  rocedp::pmd::log_configure(rocedp::pmd::log_level_from_config(cfg.logging.level), cfg.logging.file.value_or(""));

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  log(LogLevel::kInfo, "starting", {{"config", path}, {"pid", std::to_string(getpid())}});
  std::string error;
  rocedp::control::RuntimeOptions options;
  options.program = "rocedpd";
  // Listeners need the NDK adapter of the first port and its connection manager; without
  // listeners the daemon stays a plain data plane.
  options.open_adapter = options.connection_manager = !cfg.listeners.empty();
  auto rt = rocedp::control::Runtime::start(std::move(cfg), options, &error);
  if (!rt) {
    log(LogLevel::kError, "start_failed", {{"error", error}});
    return 1;
  }
  log(LogLevel::kInfo, "running", {{"cores", std::to_string(rt->core_count())}, {"ports", std::to_string(rt->port_count())}});

  while (g_signal.load(std::memory_order_relaxed) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int sig = g_signal.load();
  log(LogLevel::kInfo, "signal_received", {{"signal", sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : std::to_string(sig)}});
  rt->stop();
  log(LogLevel::kInfo, "exit", {{"status", "0"}});
  return 0;
}
