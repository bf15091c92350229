// rocedpd: the rocedp daemon. Brings up EAL, the packet pool, the ports (one queue pair per polling
// core), the polling lcores and the control thread from a YAML configuration (control/runtime.hpp
// assembles them), serves DPDK telemetry, and shuts down cleanly on SIGINT/SIGTERM.
//
//   rocedpd --config FILE.yaml        run
//   rocedpd --check-config FILE.yaml  validate only (exit 0 if valid)
//   rocedpd --print-config-reference  the README's configuration reference, from the key table
//   rocedpd --help | --version
//
// Under systemd (packaging/rocedpd.service, Type=notify) it speaks the sd_notify protocol itself:
// one datagram per state change to the unix socket named by $NOTIFY_SOCKET (a path, or "@name" in
// the abstract namespace). READY=1 once every port is started and every listener listens;
// RELOADING=1 then READY=1 around a SIGHUP reload; STOPPING=1 when a SIGINT/SIGTERM arrives. The
// protocol is a documented, stable interface (sd_notify(3), "Notify socket" in systemd's
// docs), a dozen lines here, so the daemon does not link libsystemd.
//
// Capture: `rocedpctl capture` (telemetry /rocedp/capture, control/capture.hpp) writes a port's
// frames to pcapng from inside the daemon; with eal.hugepages, dpdk-dumpcap works as well.
//
// SIGHUP: the configuration file is read and validated again; `logging` and `listeners` are
// applied at once (a listener no longer listed stops and ends its connections, a new one starts,
// the others keep theirs); any other difference needs a restart and is reported (log
// `reload_needs_restart`, STATUS=).
//
// Exit status: 0 clean shutdown (or valid config), 1 start-up failure, 2 invalid configuration or
// usage (every problem of the file, one "file:line:column: key: reason" line each, on stderr).

#include <rte_pdump.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "config/config_keys.hpp"
#include "control/capture.hpp"
#include "control/runtime.hpp"
#include "control/telemetry.hpp"
#include "pmd/log.hpp"

#ifndef ROCEDP_VERSION
#define ROCEDP_VERSION "unknown"
#endif

namespace {

using rocedp::pmd::log;
using rocedp::pmd::LogLevel;

// The signal handler only stores the signal number; main() watches it.
std::atomic<int> g_signal{0};
std::atomic<bool> g_reload{false};
static_assert(std::atomic<int>::is_always_lock_free, "async-signal-safe flag");

extern "C" void on_signal(int sig) {
  if (sig == SIGHUP)
    g_reload.store(true, std::memory_order_relaxed);
  else
    g_signal.store(sig, std::memory_order_relaxed);
}

// sd_notify(3) without libsystemd: one SOCK_DGRAM datagram of newline-separated KEY=VALUE to
// $NOTIFY_SOCKET. No socket, no-op (not started by systemd).
void notify(const std::string& message) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || *path == '\0') return;
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  const size_t len = std::strlen(path);
  if (len >= sizeof(sun.sun_path)) return;
  std::memcpy(sun.sun_path, path, len);
  if (path[0] == '@') sun.sun_path[0] = '\0';  // abstract namespace
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  const auto addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  if (sendto(fd, message.data(), message.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&sun),
             addr_len) < 0)
    log(LogLevel::kWarning, "notify_failed", {{"error", std::strerror(errno)}});
  close(fd);
}

// The entries of `a` that `b` does not hold.
size_t missing_from(const std::vector<rocedp::config::ListenerConfig>& a,
                    const std::vector<rocedp::config::ListenerConfig>& b) {
  return static_cast<size_t>(std::count_if(a.begin(), a.end(), [&](const auto& l) {
    return std::find(b.begin(), b.end(), l) == b.end();
  }));
}

// SIGHUP: re-read and validate; apply what can change live (logging, ours and DPDK's; the
// listeners), report the rest.
void reload(const std::string& path, rocedp::config::Config& current,
            rocedp::control::Runtime& rt) {
  notify("RELOADING=1\nSTATUS=reloading " + path);
  rocedp::control::telemetry_set_state("reloading");
  log(LogLevel::kInfo, "reload_begin", {{"config", path}});
  std::string status = "running";
  try {
    rocedp::config::Config next = rocedp::config::load_file(path);
    rocedp::pmd::log_configure(rocedp::pmd::log_level_from_config(next.logging.level),
                               next.logging.file.value_or(""));
    current.logging = next.logging;
    // Listeners: those no longer listed (or changed) stop and end their connections, new ones
    // start, the others keep theirs.
    if (next.listeners != current.listeners) {
      std::string failed;
      std::vector<rocedp::config::ListenerConfig> served =
          rt.update_listeners(next.listeners, &failed);
      log(LogLevel::kInfo, "listeners_reloaded",
          {{"started", std::to_string(missing_from(served, current.listeners))},
           {"stopped", std::to_string(missing_from(current.listeners, served))},
           {"listeners", std::to_string(served.size())}});
      if (!failed.empty()) {
        log(LogLevel::kError, "reload_listener_failed", {{"error", failed}});
        status += "; listeners not started: " + failed;
      }
      current.listeners = served;
      rocedp::control::telemetry_set_listeners(std::move(served));
    }
    // Everything else is built into the running data plane: say so when any of it changed
    // (compared as read, so comments and layout do not count).
    rocedp::config::Config rest_next = next, rest_now = current;
    rest_next.logging = rest_now.logging;
    rest_next.listeners.clear();
    rest_now.listeners.clear();
    const bool same = rest_next == rest_now;
    if (!same) {
      log(LogLevel::kWarning, "reload_needs_restart",
          {{"note", "logging and listeners apply without a restart"}});
      status += "; other changes to the file apply on restart";
    }
    log(LogLevel::kInfo, "reload_done", {{"restart_needed", same ? "false" : "true"}});
  } catch (const rocedp::config::ConfigError& e) {
    log(LogLevel::kError, "reload_failed", {{"error", e.what()}});
    status = std::string("running; reload failed: ") + e.what();
  }
  rocedp::control::telemetry_set_state("running");
  notify("READY=1\nSTATUS=" + status);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rocedpd: the rocedp daemon (a DPDK RoCEv2 data plane with NDK semantics)"};
  app.set_version_flag("--version", std::string("rocedpd ") + ROCEDP_VERSION);
  std::string run_path, check_path;
  auto* run_opt = app.add_option("--config", run_path, "run with this YAML configuration");
  auto* check_opt =
      app.add_option("--check-config", check_path, "validate the configuration and exit");
  bool print_reference = false;
  auto* ref_opt =
      app.add_flag("--print-config-reference", print_reference,
                   "print the configuration reference (Markdown, README.md's tables) and exit");
  run_opt->excludes(check_opt);
  ref_opt->excludes(run_opt)->excludes(check_opt);
  app.require_option(1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (print_reference) {
    std::fputs(rocedp::config::config_reference().c_str(), stdout);
    return 0;
  }
  const bool check_only = !check_path.empty();
  const std::string path = check_only ? check_path : run_path;

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
  rocedp::pmd::log_configure(rocedp::pmd::log_level_from_config(cfg.logging.level),
                             cfg.logging.file.value_or(""));

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);

  log(LogLevel::kInfo, "starting", {{"config", path}, {"pid", std::to_string(getpid())}});
  notify("STATUS=starting: EAL, ports, cores, listeners");
  rocedp::config::Config live = cfg;  // what reload compares against
  rocedp::control::DaemonInfo info;
  info.program = "rocedpd";
  info.version = ROCEDP_VERSION;
  info.config_path = path;
  info.listeners = cfg.listeners;
  rocedp::control::telemetry_set_daemon_info(std::move(info));
  std::string error;
  rocedp::control::RuntimeOptions options;
  options.program = "rocedpd";
  // Listeners need the NDK adapters of the ports and their connection managers (one per port);
  // without listeners the daemon stays a plain data plane.
  options.open_adapter = options.connection_manager = !cfg.listeners.empty();
  auto rt = rocedp::control::Runtime::start(std::move(cfg), options, &error);
  if (!rt) {
    log(LogLevel::kError, "start_failed", {{"error", error}});
    notify("STATUS=start-up failed: " + error);
    return 1;
  }
  // Capture: `rocedpctl capture` asks the daemon itself (works under --no-huge); with hugepages a
  // secondary process can attach too, so pdump serves dpdk-dumpcap and dpdk-pdump.
  if (!rocedp::control::capture_register_telemetry(&error))
    log(LogLevel::kWarning, "capture_unavailable", {{"error", error}});
  if (live.eal.hugepages && rte_pdump_init() != 0) log(LogLevel::kWarning, "pdump_init_failed", {});
  // Runtime::start returns after every port started (control thread) and, with listeners, after
  // every Listen call succeeded: only now may systemd order dependants after us.
  // Telemetry publishes a snapshot every stats interval; one taken now shows the started ports
  // to whoever is told READY=1.
  if (rt->control() != nullptr && !rt->control()->refresh(&error))
    log(LogLevel::kWarning, "snapshot_refresh_failed", {{"error", error}});
  log(LogLevel::kInfo, "running",
      {{"cores", std::to_string(rt->core_count())}, {"ports", std::to_string(rt->port_count())}});
  notify("READY=1\nSTATUS=running: " + std::to_string(rt->port_count()) + " port(s), " +
         std::to_string(rt->core_count()) + " core(s), " + std::to_string(live.listeners.size()) +
         " listener(s)\nMAINPID=" + std::to_string(getpid()));

  while (g_signal.load(std::memory_order_relaxed) == 0) {
    if (g_reload.exchange(false, std::memory_order_relaxed)) reload(path, live, *rt);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const int sig = g_signal.load();
  notify("STOPPING=1\nSTATUS=stopping");
  rocedp::control::telemetry_set_state("stopping");
  log(LogLevel::kInfo, "signal_received",
      {{"signal", sig == SIGINT    ? "SIGINT"
                  : sig == SIGTERM ? "SIGTERM"
                                   : std::to_string(sig)}});
  rocedp::control::capture_stop();  // before the ports stop
  if (live.eal.hugepages) rte_pdump_uninit();
  rt->stop();
  log(LogLevel::kInfo, "exit", {{"status", "0"}});
  return 0;
}
