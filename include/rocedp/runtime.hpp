#pragma once
// Opening an adapter: the one call a consumer makes before the NDK-shaped API
// (rocedp/adapter.hpp and the connection objects). open_adapter brings up, in order, DPDK's EAL,
// the packet pool, the ports of the configuration, the polling cores, the control thread and an
// NDK adapter on every port, each with its connection manager (as an RDMA NIC has one device per
// port); AdapterRuntime::stop() (or the destructor) tears them down in reverse order. One
// AdapterRuntime per process: EAL does not start twice.
//
// Two ways to run the polling cores (OpenOptions::launch_cores):
//  * launched (default): each core polls on its own EAL worker lcore (config dataplane.lcores).
//  * inline: the thread that called open_adapter drives every core with poll() between its own
//    work (one CPU carries the engine and the application). Every blocking call below keeps
//    polling the inline cores while it waits.
//
// Threads: open_adapter, stop(), poll(), run_on_control() and wait_until() on the thread that
// called open_adapter. Calls on the adapter and its objects may come from any thread (see
// rocedp/adapter.hpp); their callbacks run on the control thread.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rocedp/adapter.hpp"
#include "rocedp/config.hpp"

namespace rocedp {

namespace control {
class Runtime;
}
class AdapterRuntime;
namespace ndk_detail {
struct RuntimeAccess;  // the daemon's way to the assembly behind it (control/runtime.hpp)
}

/// How open_adapter runs what it builds.
struct OpenOptions {
  std::string program = "rocedp";  ///< argv[0] given to EAL (shows in its logs)
  /// false: no worker lcore; the opening thread drives the cores with AdapterRuntime::poll()
  /// (dataplane.lcores then only counts the cores).
  bool launch_cores = true;
  /// Attach the IB connection manager (listeners, connectors, shared endpoints) and serve the
  /// configuration's `listeners` (built-in echo/memory services).
  bool connection_manager = true;
  bool telemetry = true;  ///< DPDK telemetry commands when config telemetry.enabled
};

/// The port an adapter runs on, as the configuration and the device settled it.
struct PortInfo {
  std::string name;
  std::array<uint8_t, 6> mac{};
  uint32_t ip = 0;  ///< IPv4, host order
  uint8_t prefix_len = 0;
  std::array<uint8_t, 16> ip6{};  ///< IPv6 address (config ports[].ipv6), valid when has_ip6
  bool has_ip6 = false;
  uint16_t mtu = 0;
};

/// A running adapter and everything under it.
class AdapterRuntime {
 public:
  ~AdapterRuntime();  // stop()
  AdapterRuntime(const AdapterRuntime&) = delete;
  AdapterRuntime& operator=(const AdapterRuntime&) = delete;

  /// The NDK adapter of port `port` (0 = the first; below port_count(); valid until stop()). Each
  /// port's adapter has its own objects, QPN space and connection manager: its QPs send and
  /// receive on that port alone, and its listeners and connectors use that port's addresses.
  Adapter& adapter(size_t port = 0);
  /// The configuration it runs with (after validation).
  const config::Config& config() const;
  /// Port `i` (config ports[i]), the port of adapter(i).
  PortInfo port(size_t i = 0) const;
  size_t port_count() const;
  /// Whether port `port` has link now (a memif port has it once its peer connected); false after
  /// stop().
  bool link_up(size_t port = 0) const;
  size_t core_count() const;
  bool inline_cores() const;

  /// Inline mode: every core polls once; true if any did work. Launched mode: false.
  bool poll();
  /// Runs `fn` on the control thread and waits until it returned (polling inline cores).
  /// False if the control thread is not running.
  bool run_on_control(std::function<void()> fn);
  /// Polls (inline) or naps until pred() holds or `timeout` passed; returns pred().
  bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout);
  /// The MAC of the IPv4 address `ip` (host order) on port `port`: a static or cached
  /// neighbour at once, otherwise by ARP (config control.arp_retry_ms and arp_retries). For a
  /// consumer that connects a QP out of band (Qp::connect wants the peer's MAC). Waits like
  /// wait_until; false when the address did not answer, or `timeout` passed first.
  bool resolve_neighbour(uint32_t ip, std::array<uint8_t, 6>* mac,
                         std::chrono::milliseconds timeout, size_t port = 0);
  /// The MAC of the IPv6 address `ip` (16 bytes, network order) on port `port`, which
  /// needs an IPv6 address (config ports[].ipv6): a cached neighbour at once, otherwise by
  /// Neighbor Solicitations to the address's solicited-node group (RFC 4861 7.2.2; retries as
  /// for ARP, control.arp_retry_ms and arp_retries), answered by a Neighbor Advertisement. Waits
  /// like wait_until; false when the port has no IPv6 address, the address cannot be a
  /// neighbour (::, ::1, multicast, ours), it did not answer, or `timeout` passed first.
  bool resolve_neighbour6(const std::array<uint8_t, 16>& ip, std::array<uint8_t, 6>* mac,
                          std::chrono::milliseconds timeout, size_t port = 0);

  /// One named counter: of a polling core's RC engine, or of the frames dropped before it.
  struct EngineCounter {
    std::string name;  ///< as README "RC transport engine" names it; last: "tx_no_room"
    uint64_t value = 0;
  };
  /// The RC engine counters of polling core `core` for the adapter of port `port` (loss
  /// recovery, retransmissions, drops by reason), then the frames it could not send for want of
  /// TX room. The core reads them at the control thread's request (inline cores while this call
  /// polls them; waits up to 2 s). Empty for a core or port that does not exist, or a core that
  /// did not answer.
  std::vector<EngineCounter> engine_counters(size_t core, size_t port = 0);

  /// What became of frames that never reached an engine, from a fresh snapshot (waits up to the
  /// control thread's answer): the frames every core dropped, by reason, zeros included (the
  /// names and order of /rocedp/drops: bad_icrc, unknown_qpn, ...), then what the fault stages of
  /// the ports did, summed over the ports (fault_dropped, fault_duplicated, fault_corrupted,
  /// fault_ce_marked, fault_reordered, fault_delayed; per port in /rocedp/ports). Empty if no
  /// snapshot could be taken.
  std::vector<EngineCounter> drop_counters();

  /// Every core stops polling the ports (they stay up). For links whose PMD must not be polled
  /// while the peer goes away (DPDK 22.11 memif). False if a core did not answer within 2 s.
  bool detach_ports();
  /// Closes the adapters (close your objects first: it waits up to 10 s for their
  /// CloseCompletions), stops the control thread and the cores, closes the ports and cleans up EAL.
  /// Idempotent. False if a step failed (logged).
  bool stop();

 private:
  friend struct ndk_detail::RuntimeAccess;
  friend std::unique_ptr<AdapterRuntime> open_adapter(const config::Config&, const OpenOptions&,
                                                      std::string*);
  explicit AdapterRuntime(std::unique_ptr<control::Runtime> runtime);
  std::unique_ptr<control::Runtime> runtime_;
};

/// Brings up an adapter from `cfg`, used as given (the YAML form below is validated key by key;
/// here a bad value surfaces as the failing step's error). Null on failure with *error set
/// (what was built is torn down again).
std::unique_ptr<AdapterRuntime> open_adapter(const config::Config& cfg, const OpenOptions& options,
                                             std::string* error);
/// The same from a YAML configuration file (README "Configuration"); a file that does not
/// validate gives "file:line:column: key: reason" in *error.
std::unique_ptr<AdapterRuntime> open_adapter_from_file(const std::string& yaml_path,
                                                       const OpenOptions& options,
                                                       std::string* error);
/// Reads and validates a YAML configuration file into *out without opening anything, so a
/// program can adjust it before open_adapter. False with one "file:line:column: key: reason"
/// line per problem in *error.
bool load_config_file(const std::string& yaml_path, config::Config* out, std::string* error);

/// Sets the process's log threshold and destination (unset file: stderr). rocedp writes one
/// key=value line per control-path event; open_adapter does not read the configuration's
/// `logging`, so a program calls this first (rocedpd does it from its file). Any thread.
void configure_logging(const config::LoggingConfig& logging);

}  // namespace rocedp
