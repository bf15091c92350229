#pragma once
// The RC transport of one polling core: owns that core's queue pairs and runs their requester,
// responder and completer when the core polls it. Pure C++ over byte buffers (no DPDK), so the
// protocol runs in deterministic unit tests; the polling core plugs in mbufs through FrameSink.
//
// How a polling core drives it, once per loop iteration (all on the owning core, item 5's _lc):
//   1. rx_burst_lc(frames, now)   every RoCEv2 frame for this core's QPNs (from rte_eth_rx_burst,
//                                 after the classifier); each is parsed, ICRC-checked and
//                                 executed. No frame is kept: the caller frees its mbufs after.
//   2. poll_lc(now)               timers (ACK timeout, RNR wait), then per QP: pending READ
//                                 responses and the coalesced ACK/NAK, new request packets
//                                 (new WQEs from the send-queue doorbells), completions into
//                                 the CQs, flushes of QPs in ERROR. Frames leave through the
//                                 sink; when the sink refuses (no mbuf / TX ring full) the
//                                 engine rolls back and continues on a later poll.
//   Both return whether they did work (item 1). `now` is any monotonic nanosecond clock
//   (rte_get_tsc_cycles scaled); tests pass virtual time.
// Control requests (create, connect, flush, destroy) arrive through the core's ring and run
// between polls on the same core.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dataplane/rc/queue_pair.hpp"
#include "dataplane/rc/receive.hpp"

namespace rocedp::rc {

struct RcEngineConfig {
  uint32_t core = 0;           ///< polling core index: the high byte of every QPN it owns
  uint32_t max_qps = 1024;     ///< QPs this core can hold (<= 65534)
  uint32_t tx_budget = 64;     ///< packets per QP per poll for each of requester / responder
};

class RcEngine {
 public:
  /// `mrs`: the adapter's MR table (shared by all cores, lock-free reads).
  RcEngine(const RcEngineConfig& config, MemoryRegionTable* mrs, const FrameSink& sink);
  ~RcEngine();
  RcEngine(const RcEngine&) = delete;
  RcEngine& operator=(const RcEngine&) = delete;

  // ---- control requests, executed on the owning core ----

  /// Creates a QP in INIT with the next free QPN of this core. STATUS_SUCCESS,
  /// STATUS_INVALID_PARAMETER, STATUS_INSUFFICIENT_RESOURCES (max_qps reached).
  QueuePair* create_qp(const QpCreateParams& params, NTSTATUS* status);
  /// Removes a QP (its queues must be drained first). STATUS_INVALID_PARAMETER if unknown.
  NTSTATUS destroy_qp(uint32_t qpn);
  QueuePair* find_qp(uint32_t qpn) const;
  /// NdkFlush: the QP moves to ERROR and every pending request completes with STATUS_CANCELLED
  /// on the next poll_lc.
  NTSTATUS flush_qp(uint32_t qpn);

  // ---- data path ----

  /// Parses and executes a burst of received frames. Returns frames accepted.
  uint32_t rx_burst_lc(std::span<const wire::Bytes> frames, uint64_t now_ns);
  /// Executes one frame the core already parsed (ICRC verified).
  void rx_parsed_lc(const wire::ParsedPacket& pkt, uint64_t now_ns);
  /// Timers, transmit and completions. True if anything happened.
  bool poll_lc(uint64_t now_ns);

  const RcCounters& counters() const { return counters_; }
  const WireDropCounters& wire_drops() const { return wire_drops_; }
  uint32_t core() const { return config_.core; }

 private:
  RcEngineConfig config_;
  RcContext ctx_;
  RcCounters counters_;
  WireDropCounters wire_drops_{};
  uint16_t ip_id_ = 0;
  std::vector<std::unique_ptr<QueuePair>> qps_;  // by per-core number
  std::vector<QueuePair*> active_;               // iteration order of poll_lc
  wire::ParsedPacket scratch_;
};

}  // namespace rocedp::rc
