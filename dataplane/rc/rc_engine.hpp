#pragma once
// The RC transport of one polling core: owns that core's queue pairs and runs their requester,
// responder and completer when the core polls it. Pure C++ over byte buffers (no DPDK), so the
// protocol runs in deterministic unit tests; the polling core plugs in mbufs through FrameSink.
//
// How a polling core drives it, once per loop iteration (all on the owning core, the _st methods):
//   1. rx_burst_st(frames, now)   the RoCEv2 frames of one RX burst for this core's QPNs (after
//                                 the polling core's classifier); each is parsed and ICRC-checked,
//                                 its QP prefetched, then they are executed in order. No frame is
//                                 kept: the caller frees its mbufs after. The same call serves the
//                                 daemon, the tests and bench_rc_engine.
//   2. poll_st(now)               timers (ACK timeout, RNR wait), then per QP: pending READ
//                                 responses and the coalesced ACK/NAK, new request packets
//                                 (new WQEs from the send-queue doorbells), completions into
//                                 the CQs, flushes of QPs in ERROR. Frames leave through the
//                                 sink; when the sink refuses (no mbuf / TX ring full) the
//                                 engine rolls back and continues on a later poll.
//
// Per-poll work is proportional to the QPs that have something to do, not to the QPs that
// exist: poll_st visits only the run list. A QP joins it when
//   - a consumer publishes to its send queue (the queue rings the core's Doorbell: a lock-free
//     multi-producer stack of QP slots, one flag per slot; poll_st takes it with one exchange),
//     or to its receive queue while the QP is in ERROR (those receives complete flushed);
//   - a frame for it arrives (rx_burst_st);
//   - its earliest timer expires (a timing wheel of deadlines, timer_wheel.hpp; ACK progress only
//     moves the QP's own deadline, and the wheel's entry, when it fires early, re-arms at the
//     real deadline);
//   - a control request (flush) or a CQ overrun of a CQ it shares needs it.
// A QP stays on the list while it does work (or the sink refused it a buffer) and leaves after
// the first poll in which it does nothing: an idle QP costs nothing per poll.
//   Both return whether they did work (item 1). `now` is any monotonic nanosecond clock
//   (rte_get_tsc_cycles scaled); tests pass virtual time.
// Control requests (create, connect, flush, destroy) arrive through the core's ring and run
// between polls on the same core.

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dataplane/qpn_map.hpp"
#include "dataplane/rc/queue_pair.hpp"
#include "dataplane/rc/receive.hpp"
#include "dataplane/rc/timer_wheel.hpp"
#include "dataplane/rc/work_queue.hpp"

namespace rocedp::rc {

struct RcEngineConfig {
  uint32_t core = 0;        ///< polling core index: the high byte of every QPN it owns
  uint32_t max_qps = 1024;  ///< QPs this core can hold (<= 65534)
  uint32_t tx_budget = 64;  ///< packets per QP per poll for each of requester / responder
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
  QueuePair* find_qp(uint32_t qpn) const {
    if (dataplane::qpn_core(qpn) != config_.core) return nullptr;
    const uint32_t local = dataplane::qpn_local(qpn);
    return local < qps_.size() ? qps_[local].get() : nullptr;
  }
  /// Moves the QP to RTS (QueuePair::connect) and gives it the round trip estimate of its peer's
  /// path. STATUS_INVALID_PARAMETER if unknown, else QueuePair::connect's status.
  NTSTATUS connect_qp(uint32_t qpn, const QpConnectParams& params);
  /// NdkFlush: the QP moves to ERROR and every pending request completes with STATUS_CANCELLED
  /// on the next poll_st. The ACK its responder owes is sent first (responder_settle_st).
  NTSTATUS flush_qp(uint32_t qpn);

  // ---- data path ----

  /// Parses and executes a burst of received frames. Returns the frames that passed the codec:
  /// every one of them is then in counters() (executed, dropped by the QP, or not RC), every
  /// other one in the wire drop counters, so a frame is never in none or in two.
  uint32_t rx_burst_st(std::span<const wire::Bytes> frames, uint64_t now_ns);
  /// Before the engine runs: count frames the codec refuses in `counters` (indexed by
  /// wire::DropReason; a polling core's drop table starts with these) instead of wire_drops().
  void count_wire_drops_in(uint64_t* counters) { wire_drop_sink_ = counters; }
  /// Owning core, between polls: replaces the sink's `send` (FrameSink; null: none).
  void set_sink_send_st(void (*send)(void* ctx, void* handle, size_t len)) {
    finish_frames_st();
    ctx_.sink.send = send;
  }
  /// Owning core: writes the ICRCs the engine still owes the frames of its call. The sink calls
  /// it before it transmits in the middle of one (a full TX buffer); every call of the engine
  /// does at its end.
  void finish_frames_st();
  /// Timers, transmit and completions. True if anything happened.
  bool poll_st(uint64_t now_ns);

  const RcCounters& counters() const { return counters_; }
  /// Scheduling statistics (the scale test and the benchmarks read them): polls run, QP visits
  /// made by those polls, QPs on the run list now.
  uint64_t polls() const { return polls_; }
  uint64_t qp_visits() const { return visits_; }
  size_t scheduled_qps() const { return run_.size(); }
  size_t qp_count() const { return qp_count_; }
  /// Frames the codec refused, by wire::DropReason (unless count_wire_drops_in moved them).
  const WireDropCounters& wire_drops() const { return wire_drops_; }
  uint32_t core() const { return config_.core; }
  /// The round trip estimate of the path to `qp`'s peer.
  const PathEstimate& path_of(const QueuePair& qp) const {
    return paths_.at(qp.comp.path != PathTable::kUnassigned ? qp.comp.path
                                                            : paths_.find(qp.path_key()));
  }
  /// The RTO of the path to `qp`'s peer, the floor of the QP's retransmission timer (0: no
  /// sample yet).
  uint64_t path_rto_ns(const QueuePair& qp) const { return path_of(qp).rto_ns; }
  /// The round trip estimates by peer.
  const PathTable& paths() const { return paths_; }

 private:
  RcEngineConfig config_;
  RcContext ctx_;
  RcCounters counters_;
  PathTable paths_;
  WireDropCounters wire_drops_{};
  uint64_t* wire_drop_sink_ = wire_drops_.data();
  uint16_t ip_id_ = 0;
  std::vector<std::unique_ptr<QueuePair>> qps_;  // by per-core number
  // By per-core number: 1 while the QP is on the run list (dense: the doorbell's drain reads
  // this, not the QP).
  std::vector<uint8_t> scheduled_;
  // Per-core numbers not in use, a FIFO (ring of max_qps entries): a number freed is taken
  // again only after every other free one, so a peer's late packets for a closed QP, or a peer
  // that still holds the old connection (its DREQ lost), do not meet a new QP under that number
  // at once (IBTA §12.9.8.4's QPN TimeWait; Linux rxe allocates QPNs cyclically too).
  std::vector<uint32_t> free_;
  uint32_t free_head_ = 0;   // next number to take
  uint32_t free_count_ = 0;  // numbers in the ring
  size_t qp_count_ = 0;
  Doorbell doorbell_;            // slots = per-core numbers
  std::vector<QueuePair*> run_;  // the run list (capacity reserved: no allocation)
  TimerWheel timers_;   // QP deadlines (lazy: an entry not matching QpSchedule::timer_at is stale)
  bool sweep_ = false;  // visit every QP once (a CQ overran)
  bool busy_ = false;   // the current poll did work
  // Frames received since the last poll. A burst of at most kHoldAckMaxFrames is a
  // request-response exchange (ping-pong), where the ACKs it asks for wait one poll for the
  // consumer's answer; hold_acks_ is that answer, taken once per poll for all its visits.
  uint32_t rx_frames_ = 0;
  bool hold_acks_ = false;
  static constexpr uint32_t kHoldAckMaxFrames = 2;
  uint64_t polls_ = 0;
  uint64_t visits_ = 0;
  static constexpr size_t kRxChunk = 16;
  std::array<wire::RcRxPacket, kRxChunk> rx_pkts_;
  std::array<QueuePair*, kRxChunk> rx_qps_{};

  void schedule(QueuePair* qp) { schedule_at(qp->sched.slot, qp); }
  /// The QP of per-core number `slot` on the run list; false if it was on it already.
  bool schedule_at(uint32_t slot, QueuePair* qp) {
    if (scheduled_[slot]) return false;
    scheduled_[slot] = 1;
    run_.push_back(qp);
    return true;
  }
  bool run_qp(QueuePair& qp, uint64_t now_ns);
  void sync_timer(QueuePair& qp);
  void drain_doorbell();
  void fire_timers(uint64_t now_ns);
  void add_timer(uint64_t deadline, uint32_t slot);
  void flush_counters();
  void end_call_st();
  void send_cnps(uint64_t now_ns);
};

}  // namespace rocedp::rc
