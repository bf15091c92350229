#pragma once
// Attaching a connection manager to an adapter and driving it: the provider side of
// rocedp/connection_manager.hpp. control::Runtime (so rocedp::open_adapter) and the CM tests
// use it; consumers get a connection manager from open_adapter.

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "rocedp/adapter.hpp"
#include "rocedp/config.hpp"
#include "rocedp/connection_manager.hpp"
#include "rocedp/status.hpp"

namespace rocedp {

namespace pmd {
class RxDispatch;
}

/// How the connection manager of one adapter runs.
struct ConnectionManagerSetup {
  /// Where QP1 (CM) and ARP frames for the control path come from: poll_connections() drains
  /// the dispatch's control target. Null: the owner hands them over with cm_receive_frame().
  pmd::RxDispatch* dispatch = nullptr;
  uint32_t tx_core = 0;         ///< the polling core whose TX queue carries CM and ARP frames
  uint32_t arp_retry_ms = 200;  ///< control.arp_retry_ms
  uint32_t arp_retries = 5;     ///< control.arp_retries: then Connect fails HOST_UNREACHABLE
  std::vector<config::StaticNeighbour> neighbours;
  /// Optional: resolve peers' MACs through the owner's neighbour table instead of the CM's own
  /// (rocedpd: the control thread's table, so the CM, the cores' caches and telemetry see one
  /// source of truth; the owner then keeps ARP frames and hands only CM frames to
  /// cm_receive_frame). `resolve(ip, done)` returns true when `done` already ran inline; else
  /// `done` runs exactly once later on the control thread. `mac` (6 bytes) is valid when
  /// `reachable`. When set, arp_retry_ms / arp_retries / neighbours above are not used.
  using ResolveDone = std::function<void(bool reachable, const uint8_t* mac)>;
  std::function<bool(uint32_t ip, ResolveDone done)> resolve;
  /// The same for IPv6 peers (neighbour discovery); unset: IPv6 peers are unreachable.
  std::function<bool(const std::array<uint8_t, 16>& ip, ResolveDone done)> resolve6;
  uint64_t timewait_ns = 1'000'000'000;  ///< IBTA §12.9.8.4 TimeWait of a QPN / 4-tuple
  uint8_t cm_response_timeout = 20;      ///< 4.096 µs × 2^t per CM attempt (rdma_cm's 20)
  uint8_t max_cm_retries = 15;           ///< CM retransmissions (rdma_cm's 15)
  uint8_t local_ack_timeout = 14;        ///< QP ACK timeout announced in the REQ / used at RTS
  uint8_t retry_count = 7;               ///< QP transport retries (then the peer is dead)
  uint8_t rnr_retry = 7;
  /// How often an established connection's QP is checked for "retries exhausted" (peer death).
  /// 0 = on every poll_connections().
  uint64_t qp_probe_interval_ns = 10'000'000;
  /// The CM clock in nanoseconds (monotonic). Null: std::chrono::steady_clock. Tests inject one.
  uint64_t (*clock)(void* context) = nullptr;
  void* clock_context = nullptr;
  /// Optional tap on every CM frame sent (outgoing = true) or received, whole Ethernet frames.
  void (*cm_tap)(void* context, const uint8_t* frame, size_t len, bool outgoing) = nullptr;
  void* cm_tap_context = nullptr;
};

/// Gives `adapter` a connection manager (CA GUID from the port MAC, address registry with the
/// port's IP, neighbour table, CM agent). STATUS_SUCCESS; STATUS_INVALID_DEVICE_STATE (already
/// attached); STATUS_INSUFFICIENT_RESOURCES. Control thread.
NTSTATUS attach_connection_manager(Adapter& adapter, const ConnectionManagerSetup& setup);

/// Removes it. STATUS_SUCCESS; STATUS_INVALID_DEVICE_STATE while a listener, connector or
/// shared endpoint of the adapter is open (close them first), or none attached. Connections in
/// TimeWait are dropped. Call before closing the adapter.
NTSTATUS detach_connection_manager(Adapter& adapter);

/// The control loop's turn for connections: reads control-path frames (when a dispatch was
/// given), runs CM and ARP timers, probes established QPs, frees released connections. All
/// connection callbacks run from here (or from the consumer call that caused them). Returns
/// the number of things done (0 = idle).
uint32_t poll_connections(Adapter& adapter);

/// Hands one received control-path frame (QP1 CM MAD or ARP) to the connection manager.
/// False if it was neither or not for this adapter. Control thread.
bool cm_receive_frame(Adapter& adapter, const uint8_t* frame, size_t len);

}  // namespace rocedp
