// rocedpd: the rocedp daemon. Brings up EAL, the packet pool, the ports (one queue pair per polling
// core), the polling lcores and the control thread from a YAML configuration, serves DPDK
// telemetry, and shuts down cleanly on SIGINT/SIGTERM.
//
//   rocedpd --config FILE.yaml        run
//   rocedpd --check-config FILE.yaml  validate only (exit 0 if valid)
//
// Exit status: 0 clean shutdown (or valid config), 1 start-up failure, 2 invalid configuration or
// usage (the ConfigError "file:line:column: key: reason" goes to stderr).

#include <rte_eal.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include <algorithm>
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
#include "control/control_thread.hpp"
#include "control/telemetry.hpp"
#include "dataplane/core_channel.hpp"
#include "dataplane/polling_core.hpp"
#include "pmd/eal.hpp"
#include "pmd/log.hpp"
#include "pmd/packet_pool.hpp"
#include "pmd/port.hpp"
#include "pmd/rx_dispatch.hpp"

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

// Everything the daemon brings up, torn down in reverse order by stop().
struct Daemon {
  rocedp::config::Config cfg;
  std::unique_ptr<rocedp::pmd::PacketPool> pool;
  std::vector<std::unique_ptr<rocedp::pmd::Port>> ports;
  std::unique_ptr<rocedp::pmd::RxDispatch> dispatch;
  std::vector<std::unique_ptr<rocedp::dataplane::CoreChannel>> channels;
  std::vector<std::unique_ptr<rocedp::dataplane::PollingCore>> cores;
  std::vector<bool> launched;
  std::unique_ptr<rocedp::control::ControlThread> control;
  bool eal = false;

  bool start(std::string* error);
  void stop();
  void stop_cores_without_control();
};

bool Daemon::start(std::string* error) {
  if (!rocedp::pmd::eal_init(cfg, "rocedpd", error)) return false;
  eal = true;
  log(LogLevel::kInfo, "eal_ready", {{"file_prefix", cfg.eal.file_prefix}, {"main_lcore", std::to_string(rte_lcore_id())}});

  const auto n_cores = static_cast<uint16_t>(cfg.dataplane.lcores.size());
  uint16_t max_mtu = 0;
  for (const auto& p : cfg.ports) max_mtu = std::max(max_mtu, p.mtu);
  pool = rocedp::pmd::PacketPool::create("rdp_pool", cfg.dataplane.mbuf_count, cfg.dataplane.mbuf_cache_size,
                                         rocedp::pmd::PacketPool::data_room_for_mtu(max_mtu), SOCKET_ID_ANY, error);
  if (!pool) return false;
  log(LogLevel::kInfo, "mempool_created", {{"mbufs", std::to_string(pool->size())}, {"data_room", std::to_string(pool->data_room())}});

  for (const auto& pc : cfg.ports) {
    auto port = rocedp::pmd::Port::open(pc, n_cores, *pool, cfg.dataplane, error);
    if (!port) {
      *error = "port " + pc.name + ": " + *error;
      return false;
    }
    log(LogLevel::kInfo, "port_opened", {{"port", port->name()}, {"id", std::to_string(port->id())},
                                          {"queues", std::to_string(port->queue_count())}});
    ports.push_back(std::move(port));
  }

  try {
    dispatch = std::make_unique<rocedp::pmd::RxDispatch>(n_cores, cfg.dataplane.control_ring_size);
  } catch (const std::exception& e) {
    *error = std::string("rx dispatch: ") + e.what();
    return false;
  }
  for (uint16_t i = 0; i < n_cores; ++i) {
    auto ch = rocedp::dataplane::CoreChannel::create(i, cfg.dataplane.control_ring_size, error);
    if (!ch) return false;
    channels.push_back(std::move(ch));
    cores.push_back(std::make_unique<rocedp::dataplane::PollingCore>(
        i, cfg.dataplane.lcores[i], cfg.dataplane.burst_size, *dispatch, *channels.back()));
  }
  launched.assign(n_cores, false);
  for (uint16_t i = 0; i < n_cores; ++i) {
    const unsigned lcore = cfg.dataplane.lcores[i];
    const int rc = rte_eal_remote_launch(&rocedp::dataplane::PollingCore::lcore_main, cores[i].get(), lcore);
    if (rc != 0) {
      *error = "rte_eal_remote_launch on lcore " + std::to_string(lcore) + ": " + std::strerror(-rc);
      return false;
    }
    launched[i] = true;
    log(LogLevel::kInfo, "core_launched", {{"core", std::to_string(i)}, {"lcore", std::to_string(lcore)}});
  }

  rocedp::control::ControlThread::Setup setup;
  setup.cfg = &cfg;
  for (auto& p : ports) setup.ports.push_back(p.get());
  for (auto& c : channels) setup.channels.push_back(c.get());
  setup.dispatch = dispatch.get();
  setup.pool = pool.get();
  control = std::make_unique<rocedp::control::ControlThread>(std::move(setup));
  if (!control->start(error)) {
    control.reset();
    return false;
  }
  if (cfg.telemetry.enabled) {
    auto* ct = control.get();
    if (!rocedp::control::telemetry_install([ct] { return ct->latest(); }, error)) return false;
    log(LogLevel::kInfo, "telemetry_ready",
        {{"socket", "/var/run/dpdk/" + cfg.eal.file_prefix + "/dpdk_telemetry.v2"}});
  }
  return control->start_ports(error);
}

// Start-up failed before the control thread ran: main plays control for the stop requests.
void Daemon::stop_cores_without_control() {
  for (size_t i = 0; i < cores.size(); ++i) {
    if (!launched[i]) continue;
    auto& ch = *channels[i];
    if (!rocedp::dataplane::core_requests::stop(ch, nullptr, nullptr)) continue;
    while (ch.in_flight() > 0) {
      ch.poll_completions(16);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (auto& p : ports) p->stop();
}

void Daemon::stop() {
  rocedp::control::telemetry_uninstall();
  if (control && control->running()) {
    std::string error;
    if (!control->shutdown(&error)) log(LogLevel::kWarning, "shutdown_incomplete", {{"error", error}});
  } else {
    stop_cores_without_control();
  }
  for (size_t i = 0; i < cores.size(); ++i) {
    if (!launched[i]) continue;
    rte_eal_wait_lcore(cfg.dataplane.lcores[i]);
    const unsigned freed = cores[i]->drain_after_stop();
    log(LogLevel::kInfo, "core_joined", {{"core", std::to_string(i)}, {"lcore", std::to_string(cfg.dataplane.lcores[i])},
                                         {"frames_freed", std::to_string(freed)}});
  }
  control.reset();
  cores.clear();
  for (auto& p : ports) {
    const std::string name = p->name();
    p.reset();
    log(LogLevel::kInfo, "port_closed", {{"port", name}});
  }
  ports.clear();
  dispatch.reset();  // frees frames still in handoff rings
  channels.clear();
  if (pool) {
    const uint32_t available = pool->available(), size = pool->size();
    pool.reset();
    log(LogLevel::kInfo, "mempool_freed", {{"mbufs", std::to_string(size)}, {"were_free", std::to_string(available)}});
  }
  if (eal) {
    rocedp::pmd::eal_cleanup();
    log(LogLevel::kInfo, "eal_cleaned_up");
  }
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

  Daemon d;
  try {
    d.cfg = rocedp::config::load_file(path);
  } catch (const rocedp::config::ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  if (check_only) {
    std::printf("%s: configuration is valid\n", path.c_str());
    return 0;
  }
  rocedp::pmd::log_configure(rocedp::pmd::log_level_from_config(d.cfg.logging.level), d.cfg.logging.file.value_or(""));

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  log(LogLevel::kInfo, "starting", {{"config", path}, {"pid", std::to_string(getpid())}});
  std::string error;
  if (!d.start(&error)) {
    log(LogLevel::kError, "start_failed", {{"error", error}});
    d.stop();
    return 1;
  }
  log(LogLevel::kInfo, "running", {{"cores", std::to_string(d.cores.size())}, {"ports", std::to_string(d.ports.size())}});

  while (g_signal.load(std::memory_order_relaxed) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int sig = g_signal.load();
  log(LogLevel::kInfo, "signal_received", {{"signal", sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : std::to_string(sig)}});
  d.stop();
  log(LogLevel::kInfo, "exit", {{"status", "0"}});
  return 0;
}
