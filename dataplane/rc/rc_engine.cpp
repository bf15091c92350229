#include "dataplane/rc/rc_engine.hpp"

#include <algorithm>
#include <cassert>

#include "dataplane/qpn_map.hpp"
#include "dataplane/rc/completer.hpp"
#include "dataplane/rc/congestion.hpp"
#include "dataplane/rc/receive.hpp"
#include "dataplane/rc/requester.hpp"
#include "dataplane/rc/responder.hpp"
#include "dataplane/rc/transmit.hpp"

namespace rocedp::rc {

namespace {
// Per-core numbers 0 and 1 are never handed out: on core 0 they would be QP0/QP1 (DESIGN §4).
constexpr uint32_t kFirstLocalQpn = 2;

uint32_t clamp_max_qps(uint32_t max_qps) {
  return std::min<uint32_t>(max_qps, dataplane::kQpnLocalMask + 1 - kFirstLocalQpn);
}
}  // namespace

RcEngine::RcEngine(const RcEngineConfig& config, MemoryRegionTable* mrs, const FrameSink& sink)
    : config_(config),
      doorbell_(clamp_max_qps(config.max_qps) + kFirstLocalQpn),
      // Room for a stale entry beside every live one: the compaction in add_timer (a pass over
      // every entry) then runs once per max_qps additions at most.
      timers_(2 * clamp_max_qps(config.max_qps) + 64) {
  config_.max_qps = clamp_max_qps(config_.max_qps);
  ctx_.sink = sink;
  ctx_.mrs = mrs;
  ctx_.counters = &counters_;
  ctx_.ip_id = &ip_id_;
  ctx_.paths = &paths_;
  qps_.resize(config_.max_qps + kFirstLocalQpn);
  scheduled_.resize(qps_.size(), 0);
  // Every number free, lowest first; freed numbers go to the back.
  free_.resize(config_.max_qps);
  for (uint32_t i = 0; i < config_.max_qps; ++i) free_[i] = kFirstLocalQpn + i;
  free_count_ = config_.max_qps;
  run_.reserve(config_.max_qps);
}

// The queues may already be gone (their owners close them first), so they are not detached
// here: a consumer must not post to a queue whose engine is destroyed (its QP is closed first).
RcEngine::~RcEngine() = default;

QueuePair* RcEngine::create_qp(const QpCreateParams& params, NTSTATUS* status) {
  if (free_count_ == 0 || !doorbell_.ok() || !timers_.ok()) {
    *status = STATUS_INSUFFICIENT_RESOURCES;
    return nullptr;
  }
  const uint32_t local = free_[free_head_];
  auto qp = QueuePair::create(dataplane::make_qpn(config_.core, local), params, status);
  if (!qp) return nullptr;
  free_head_ = free_head_ + 1 == free_.size() ? 0 : free_head_ + 1;
  --free_count_;
  QueuePair* raw = qp.get();
  raw->sched.slot = local;
  qps_[local] = std::move(qp);
  ++qp_count_;
  // Before the QP can reach RTS, so before any post can ring.
  params.sq->attach_doorbell_st(&doorbell_, local);
  if (params.rq != nullptr) params.rq->attach_doorbell_st(&doorbell_, local);
  return raw;
}

NTSTATUS RcEngine::destroy_qp(uint32_t qpn) {
  QueuePair* qp = find_qp(qpn);
  if (qp == nullptr) return STATUS_INVALID_PARAMETER;
  qp->params().sq->set_connected(false);
  qp->params().sq->attach_doorbell_st(nullptr, 0);
  if (qp->params().rq != nullptr) qp->params().rq->attach_doorbell_st(nullptr, 0);
  const uint32_t local = qp->sched.slot;
  if (scheduled_[local]) run_.erase(std::find(run_.begin(), run_.end(), qp));
  scheduled_[local] = 0;
  // A doorbell entry or timer entry of this slot may still be queued: both look the slot up
  // again when they fire, so they find nothing (or a later QP, which merely gets a visit).
  paths_.release(qp->comp.path);
  qps_[local].reset();
  --qp_count_;
  free_[(free_head_ + free_count_) % free_.size()] = local;
  ++free_count_;
  return STATUS_SUCCESS;
}

// The path's slot is looked up here, on the control path, not by the QP's first timer (the
// completer's fallback for a QP connected directly).
NTSTATUS RcEngine::connect_qp(uint32_t qpn, const QpConnectParams& params) {
  QueuePair* qp = find_qp(qpn);
  if (qp == nullptr) return STATUS_INVALID_PARAMETER;
  const NTSTATUS s = qp->connect(params);
  if (s == STATUS_SUCCESS) qp->comp.path = paths_.acquire(qp->path_key());
  return s;
}

NTSTATUS RcEngine::flush_qp(uint32_t qpn) {
  QueuePair* qp = find_qp(qpn);
  if (qp == nullptr) return STATUS_INVALID_PARAMETER;
  // The ACK it owes leaves first (responder_settle_st), finished at once as a call's frames are.
  if (responder_settle_st(*qp, ctx_) != 0) end_call_st();
  enter_error(*qp, ctx_, WcError::kFlushed);
  schedule(qp);
  return STATUS_SUCCESS;
}

// Two passes per chunk: parse every frame (ICRC included) and prefetch the QP it is for, then
// execute them; the QPs' cache misses overlap with the parsing instead of following it.
uint32_t RcEngine::rx_burst_st(std::span<const wire::Bytes> frames, uint64_t now_ns) {
  uint32_t accepted = 0;
  rx_frames_ += static_cast<uint32_t>(frames.size());
  for (size_t start = 0; start < frames.size(); start += kRxChunk) {
    const size_t end = std::min(frames.size(), start + kRxChunk);
    uint32_t n = 0;
    const QueuePair* last = nullptr;  // a burst often holds many frames of one QP
    for (size_t i = start; i < end; ++i) {
      const RxParse r = receive_parse_st(frames[i], rx_pkts_[n], counters_, wire_drop_sink_);
      if (r != RxParse::kExecute) [[unlikely]] {
        if (r == RxParse::kCnp)
          receive_cnp_st(find_qp(rx_pkts_[n].dqpn), ctx_, rx_pkts_[n], now_ns);
        accepted += r != RxParse::kCodecDrop;  // taken: the engine's own counters have it
        continue;
      }
      QueuePair* qp = find_qp(rx_pkts_[n].dqpn);
      if (qp != last && qp != nullptr) qp->prefetch();
      last = qp;
      rx_qps_[n++] = qp;
    }
    for (uint32_t i = 0; i < n; ++i) {
      receive_dispatch_st(rx_qps_[i], ctx_, rx_pkts_[i], now_ns);
      if (rx_qps_[i] != nullptr) schedule(rx_qps_[i]);
    }
    accepted += n;
  }
  end_call_st();  // the burst's receive completions at once
  return accepted;
}

// The drain reads no QP object: whether a slot is on the run list is a byte of a dense table,
// and the QP's pointer is another (at many QPs a QP's lines are cold misses; read here, one after
// the other, the drain waited for each). Only the QP's first line is prefetched, for the visit.
void RcEngine::drain_doorbell() {
  uint32_t slot = doorbell_.take_all_st();
  if (slot == Doorbell::kEmpty) return;
  while (slot != Doorbell::kEmpty) {
    const uint32_t next = doorbell_.next_st(slot);
    doorbell_.clear_st(slot);
    QueuePair* qp = qps_[slot].get();
    if (qp != nullptr && schedule_at(slot, qp)) __builtin_prefetch(qp);
    slot = next;
  }
  Doorbell::cleared_st();  // before any queue is read (see Doorbell)
}

void RcEngine::add_timer(uint64_t deadline, uint32_t slot) {
  if (timers_.add(deadline, slot)) [[likely]]
    return;
  // Every entry in use: drop those that no longer match their QP's deadline, then file it. At
  // most two entries match a QP's deadline (an old one can hold the same value only if time
  // brought it round again), so half the room is always freed.
  timers_.drop_if([this](uint32_t s, uint64_t d) {
    const QueuePair* qp = qps_[s].get();
    return qp == nullptr || qp->sched.timer_at != d;
  });
  [[maybe_unused]] const bool added = timers_.add(deadline, slot);
  assert(added);
}

void RcEngine::fire_timers(uint64_t now_ns) {
  timers_.expire(now_ns, [this](uint32_t slot, uint64_t deadline) {
    QueuePair* qp = qps_[slot].get();
    if (qp == nullptr || qp->sched.timer_at != deadline) return;  // stale
    qp->sched.timer_at = QpSchedule::kNoTimer;
    schedule(qp);
  });
}

// The QP's earliest deadline goes into the wheel only if it is earlier than the entry it already
// has: an ACK that pushes the deadline back costs nothing here, the early entry fires, finds the
// deadline not reached, and this function re-arms it.
void RcEngine::sync_timer(QueuePair& qp) {
  if (qp.state() != QpState::kRts) return;
  uint64_t dl = QpSchedule::kNoTimer;
  if (qp.comp.timer_armed) dl = qp.comp.ack_deadline_ns;
  if (qp.comp.rnr_wait && qp.comp.rnr_deadline_ns < dl) dl = qp.comp.rnr_deadline_ns;
  if (qp.resp.ack_due_ns != 0 && qp.resp.ack_due_ns < dl) dl = qp.resp.ack_due_ns;
  // A limited QP whose requester stopped for its pacing clock wakes when the clock allows the next
  // packet (once: a requester waiting for ACKs instead is woken by them).
  if (qp.cc_flags.pace_wait) [[unlikely]] {
    qp.cc_flags.pace_wait = false;
    if (qp.cc.next_tx_ns < dl) dl = qp.cc.next_tx_ns;
  }
  if (dl == QpSchedule::kNoTimer || qp.sched.timer_at <= dl) return;
  qp.sched.timer_at = dl;
  add_timer(dl, qp.sched.slot);
}

// One visit. Returns whether the QP must be visited again on the next poll.
bool RcEngine::run_qp(QueuePair& qp, uint64_t now_ns) {
  ++visits_;
  qp.sched.tx_stalled = false;
  const QpCreateParams& p = qp.params();
  // A CQ that overran is dead, and so is every QP completing into it (NDK).
  if (qp.state() != QpState::kError && (p.send_cq->overrun() || p.recv_cq->overrun()))
      [[unlikely]] {
    enter_error(qp, ctx_, WcError::kFlushed, QpErrorReason::kCqOverrun);
  }
  if (completer_timer_due(qp, now_ns)) completer_timers_st(qp, ctx_, now_ns);
  responder_ack_timer_st(qp, now_ns);
  // The requester goes first, so that an answer the consumer already posted (from a
  // completion callback during the receive burst) leaves before the ACK. In a request-response
  // exchange (a receive burst of one or two frames) an ACK that burst asked for, with no answer
  // posted yet, waits one poll: the consumer answers after this poll, and the answer and the
  // ACK then go in one transmit burst, the ACK off the round trip's path. Under load (larger
  // bursts) ACKs leave at once. A NAK, READ responses and atomics never wait.
  const uint32_t requests = requester_run_st(qp, ctx_, now_ns, config_.tx_budget);
  // (A fatal NAK, which error_after_ctl marks, is a NAK syndrome: never held.)
  const bool hold = hold_acks_ && qp.resp.ack_fresh && requests == 0 && qp.resources_pending == 0 &&
                    (qp.resp.ctl_syndrome & wire::kAethTypeMask) == wire::kAethAck;
  qp.resp.ack_fresh = false;
  const uint32_t responses = hold ? 0 : responder_tx_st(qp, ctx_, config_.tx_budget, now_ns);
  const uint32_t retired = completer_retire_st(qp, ctx_);
  uint32_t work = responses + requests + retired;
  // Another visit only where this one worked and left something that nothing else announces:
  // responses still owed, or posted requests not yet sent. Everything else that creates work
  // schedules the QP itself (a post rings, a frame arrives, a timer fires), so the visit that
  // merely confirms "nothing left" is saved (at many QPs, one per QP and message).
  // A QP that stopped for its pacing clock is woken by the timer (sync_timer), not every poll.
  bool again = qp.sched.tx_stalled || hold;
  const bool clocked = qp.cc_flags.pace_wait;
  if (responses != 0 && (qp.resp.ctl_pending || qp.resources_pending != 0) && !clocked)
    again = true;
  if ((requests != 0 || retired != 0) && qp.req.cur.wqe < qp.sq_readable() && !clocked)
    again = true;
  if (qp.state() == QpState::kError) [[unlikely]] {
    work += responder_flush_st(qp, ctx_);
    again |= work != 0;
    if (!qp.sched.overrun_seen && (p.send_cq->overrun() || p.recv_cq->overrun())) {
      // Other QPs of that CQ may be idle: visit every QP once so that they die too.
      qp.sched.overrun_seen = true;
      sweep_ = true;
    }
    if (!qp.sched.rq_armed && p.rq != nullptr) {
      // From now on receive posts ring; one more visit catches any posted before the arming.
      p.rq->arm_doorbell_st();
      qp.sched.rq_armed = true;
      again = true;
    }
  }
  sync_timer(qp);
  if (work != 0 || hold) busy_ = true;  // a held ACK leaves on the next poll, not after a nap
  return again;
}

// The CNPs the last receive bursts asked for: their QPs are on the run list (every QP a frame
// arrived for is), so one pass over it per poll that needs one, instead of a test in every visit.
void RcEngine::send_cnps(uint64_t now_ns) {
  ctx_.cnps_due = 0;
  for (QueuePair* qp : run_) {
    if (qp->cc_flags.cnp_due && congestion_send_cnp_st(*qp, ctx_, now_ns)) busy_ = true;
  }
}

void RcEngine::finish_frames_st() {
  rc::finish_frames_st(ctx_);
}

// How every call of the engine that ran the roles ends: the completions it staged published, its
// frames' ICRCs written, its counters added.
void RcEngine::end_call_st() {
  publish_staged_st(ctx_);
  rc::finish_frames_st(ctx_);
  flush_counters();
}

void RcEngine::flush_counters() {
  counters_.add(RcCounter::kTxPackets, ctx_.tx_packets);
  counters_.add(RcCounter::kCompletions, ctx_.completions);
  counters_.add(RcCounter::kRxPackets, ctx_.rx_packets);
  ctx_.tx_packets = ctx_.completions = ctx_.rx_packets = 0;
}

bool RcEngine::poll_st(uint64_t now_ns) {
  ++polls_;
  busy_ = false;
  drain_doorbell();
  fire_timers(now_ns);
  if (sweep_) [[unlikely]] {
    sweep_ = false;
    for (auto& qp : qps_) {
      if (qp) schedule(qp.get());
    }
  }
  if (ctx_.cnps_due != 0) [[unlikely]]
    send_cnps(now_ns);
  hold_acks_ = rx_frames_ != 0 && rx_frames_ <= kHoldAckMaxFrames;
  rx_frames_ = 0;
  // Visit the run list, compacting it in place: QPs that need no more visits leave it.
  const size_t n = run_.size();
  size_t kept = 0;
  // Prefetch pipeline (CONVENTIONS.md 12): the QP object two visits ahead, and the send ring of
  // the next one (its address is in the QP object prefetched on the previous step).
  for (size_t i = 0; i < n && i < 2; ++i) run_[i]->prefetch();
  for (size_t i = 0; i < n; ++i) {
    QueuePair* qp = run_[i];
    if (i + 2 < n) run_[i + 2]->prefetch();
    if (i + 1 < n) {
      run_[i + 1]->sq_ring().prefetch_st();
      __builtin_prefetch(&run_[i + 1]->meta_at(run_[i + 1]->req.cur.wqe));
    }
    if (run_qp(*qp, now_ns)) {
      run_[kept++] = qp;
    } else {
      scheduled_[qp->sched.slot] = 0;
    }
  }
  for (size_t i = n; i < run_.size(); ++i) run_[kept++] = run_[i];  // scheduled meanwhile
  run_.resize(kept);
  // The visits' send completions at once: one release store and one fence per poll, not per
  // QP (a fence waits for the stores before it, at many QPs each a cold line).
  end_call_st();
  return busy_;
}

}  // namespace rocedp::rc
