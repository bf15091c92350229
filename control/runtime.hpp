#pragma once
// One process's data plane, assembled in one place (rocedp::open_adapter, rocedp/runtime.hpp, is
// its public face): EAL -> packet pool -> ports -> RX dispatch
// and core channels -> polling cores -> control thread -> ports started -> (optionally) an NDK
// adapter on every port, whose poll_control() runs in a control-thread poll hook. rocedpd and tests
// use it instead of repeating the sequence (rocedp-perf through open_adapter and, for --raw,
// control/raw_port.hpp); stop() tears it down in the reverse order, also after a partial start.
//
// Two ways to run the polling cores:
//  * launched (rocedpd, the default): each core runs PollingCore::run_st on its own EAL worker
//    lcore (config dataplane.lcores).
//  * inline: no worker lcore; the thread that started the runtime (the EAL main lcore) drives
//    every core with poll() between its own work, like an SPDK reactor running the application's
//    pollers. rocedp-perf runs so, one CPU per process carrying both the engine and the
//    benchmark loop. Every blocking call below keeps polling the inline cores while it waits, so
//    control-thread requests to them complete.
//
// Threads: start/stop/run_on_control/wait_until and poll() on the thread that called start()
// (the main lcore). The adapter is opened, used for object management, and closed on the control
// thread (adapter.hpp); reach it from other threads with run_on_control().

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "rocedp/runtime.hpp"

namespace rocedp {
class Adapter;
namespace pmd {
class PacketPool;
class Port;
class RxDispatch;
}  // namespace pmd
namespace dataplane {
class CoreChannel;
class PollingCore;
}  // namespace dataplane
}  // namespace rocedp

namespace rocedp::control {

class ControlThread;
class DaemonConnections;

struct RuntimeOptions {
  std::string program = "rocedp";  ///< argv[0] given to EAL
  /// false: inline cores driven by poll() on the calling thread (dataplane.lcores is then only
  /// the number of cores; they run on the main lcore).
  bool launch_cores = true;
  bool open_adapter = false;  ///< open an NDK adapter on every port (limits from cfg.limits)
  /// With open_adapter: attach a connection manager to each adapter (CM frames and ARP through
  /// the control thread, the port's neighbour table) and serve cfg.listeners on their ports
  /// (control/daemon_connections.hpp).
  bool connection_manager = false;
  bool telemetry = true;  ///< install the DPDK telemetry commands when cfg.telemetry.enabled
  /// Raw mode (control/raw_port.hpp, rocedp-perf --raw): EAL, pool and started ports only; no
  /// core, no control thread. The caller moves frames with Port::rx_burst/tx_burst on queue 0.
  bool ports_only = false;
};

class Runtime {
 public:
  /// Brings everything up. On failure returns null with *error set, after tearing down what was
  /// built (logged like a normal stop).
  static std::unique_ptr<Runtime> start(config::Config cfg, const RuntimeOptions& options,
                                        std::string* error);
  ~Runtime();  // stop()
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// Closes the adapter (waits up to 10 s for its CloseCompletion: the consumer closes its
  /// objects first), runs the control thread's shutdown sequence, joins the lcores, closes the
  /// ports, frees the pool and cleans up EAL. Idempotent. False if a step failed (logged).
  bool stop();

  /// Every core stops polling every port (the ports stay started and linked). For links whose
  /// PMD must not be polled while the peer goes away (DPDK 22.11 memif unmaps the shared
  /// regions on its interrupt thread when the peer disconnects). False if a core did not answer
  /// within 2 s. Raw mode: true (the caller polls the ports itself).
  bool detach_ports();

  /// Inline mode: every core polls once; true if any did work. Launched/raw mode: false.
  bool poll();
  /// Runs `fn` on the control thread and waits until it returned (polling inline cores).
  /// False if the control thread is not running.
  bool run_on_control(std::function<void()> fn);
  /// rocedpd's reload: the services of every port serve `listeners` from now on
  /// (DaemonConnections::update_listeners_st, on the control thread): listeners no longer listed
  /// stop and end their connections, new entries start, the others keep theirs. Returns the
  /// entries served afterwards, in the order of `listeners`; *error names each entry that could
  /// not start: its port is not one of this runtime's, or starting it failed. A runtime started
  /// without adapters (rocedpd without listeners) opens them and their connection managers first
  /// (open_adapter); one whose adapters have no connection managers serves none.
  std::vector<config::ListenerConfig> update_listeners(
      const std::vector<config::ListenerConfig>& listeners, std::string* error);
  /// Asks every core for its counters now and waits until the snapshot is published (polling
  /// inline cores); then control()->latest() holds it. False and *error if that failed.
  bool refresh_snapshot(std::string* error);
  /// Polls (inline) or naps until pred() holds or `timeout` passed; returns pred().
  bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

  const config::Config& config() const { return cfg_; }
  bool inline_cores() const { return !options_.launch_cores; }
  pmd::PacketPool& pool() { return *pool_; }
  pmd::Port& port(size_t i = 0) { return *ports_.at(i); }
  size_t port_count() const { return ports_.size(); }
  size_t core_count() const { return cores_.size(); }
  dataplane::PollingCore& core(size_t i) { return *cores_.at(i); }
  ControlThread* control() { return control_.get(); }
  /// The adapter of port i (null unless options.open_adapter, and after stop()). Control thread
  /// only.
  Adapter* adapter(size_t port = 0) { return port < adapters_.size() ? adapters_[port] : nullptr; }

 private:
  Runtime(config::Config cfg, const RuntimeOptions& options);
  bool start_all(std::string* error);
  bool open_adapter(std::string* error);
  bool close_adapter();
  bool stop_connections();
  /// Runs op (which blocks until the control thread answered) while this thread polls the
  /// inline cores; launched mode: just op().
  bool blocking(const std::function<bool()>& op);
  void stop_cores_without_control();

  config::Config cfg_;
  RuntimeOptions options_;
  bool eal_ = false;
  bool stopped_ = false;
  std::unique_ptr<pmd::PacketPool> pool_;
  std::vector<std::unique_ptr<pmd::Port>> ports_;
  std::unique_ptr<pmd::RxDispatch> dispatch_;
  std::vector<std::unique_ptr<dataplane::CoreChannel>> channels_;
  std::vector<std::unique_ptr<dataplane::PollingCore>> cores_;
  std::vector<bool> launched_;
  std::unique_ptr<ControlThread> control_;
  std::vector<Adapter*> adapters_;  // by port index; control thread
  uint64_t adapter_hook_ = 0;
  std::vector<std::unique_ptr<DaemonConnections>> connections_;  // by port index; control thread
  bool telemetry_ = false;
};

}  // namespace rocedp::control

namespace rocedp {
namespace ndk_detail {
struct RuntimeAccess {
  static control::Runtime& runtime(AdapterRuntime& r) { return *r.runtime_; }
};
}  // namespace ndk_detail
namespace control {
/// The assembly behind a public AdapterRuntime (rocedpd's services and telemetry reach the
/// control thread through it).
Runtime& runtime_of(AdapterRuntime& rt);
/// Port i of a runtime as the public API describes it (AdapterRuntime::port, RawPort::port).
PortInfo port_info(Runtime& rt, size_t i = 0);
}  // namespace control
}  // namespace rocedp
