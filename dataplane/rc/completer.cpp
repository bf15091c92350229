#include "dataplane/rc/completer.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "dataplane/rc/ib_timers.hpp"
#include "dataplane/rc/requester.hpp"
#include "dataplane/wire/psn.hpp"

namespace rocedp::rc {
namespace {

using namespace wire::opcode;
using wire::psn_forward;
using wire::psn_gt;
using wire::psn_le;
using wire::psn_lt;

// WQEs that may have PSNs: every readable one (the loops stop at the first not started). Not
// req.cur.wqe: after a go-back-N the requester cursor sits before WQEs already sent.
uint32_t started_limit(QueuePair& qp) {
  return qp.sq_readable();
}

// Where the scans for the first unfinished WQE start (comp.scan_from: those before it are
// finished and would only be skipped). A start behind the head or past `lim` is not trusted: the
// scan then starts at the head, as it would without it.
uint32_t scan_start(const QueuePair& qp, uint32_t lim) {
  const uint32_t d = qp.comp.scan_from - static_cast<uint32_t>(qp.comp.sq_head);
  return d <= lim ? d : 0;
}

// A scan found the WQE at `i` unfinished (or none started at `i`): everything before is.
void scan_stopped_at(QueuePair& qp, uint32_t i) {
  qp.comp.scan_from = static_cast<uint32_t>(qp.comp.sq_head) + i;
}

// The RTO under a local ACK timeout of `full` nanoseconds.
uint64_t rto_under(const CompleterState& c, uint64_t full) {
  uint64_t base = kRtoInitialNs;
  if (c.srtt_ns != 0) {
    base = std::max<uint64_t>(
        {kRtoMinNs, uint64_t{3} * c.srtt_ns, uint64_t{c.srtt_ns} + uint64_t{4} * c.rttvar_ns});
  }
  const uint64_t rto = c.backoff >= 40 ? full : base << c.backoff;
  return rto < full ? rto : full;
}

// Computes comp.rto_ns again; false under an infinite local ACK timeout.
bool refresh_rto(QueuePair& qp) {
  const auto full = local_ack_timeout_ns(qp.local_ack_timeout());
  if (!full) return false;
  const uint64_t rto = rto_under(qp.comp, *full);
  qp.comp.rto_ns = rto;  // never 0: at least min(kRtoMinNs, the shortest local ACK timeout)
  return true;
}

// What the timer waits: the QP's own RTO (at most `full`, the local ACK timeout), raised to its
// path's (RcContext::paths), but never past `full`, which the QP's peer agreed to. A wait of
// `full` is a full timeout: it consumes a retry.
uint64_t timer_wait(uint64_t own, uint64_t full, uint64_t path_rto_ns) {
  return std::min(std::max(own, path_rto_ns), full);
}

// The estimate of the QP's peer. A QP that RcEngine::connect_qp did not connect takes its slot
// here, once (RcEngine::destroy_qp gives it back).
PathEstimate& path_of(QueuePair& qp, RcContext& ctx) {
  if (qp.comp.path == PathTable::kUnassigned) [[unlikely]]
    qp.comp.path = ctx.paths->acquire(qp.path_key());
  return ctx.paths->at(qp.comp.path);
}

// arm_retransmit_timer_st, inline here: every response that makes progress re-arms.
inline void restart_timer(QueuePair& qp, RcContext& ctx, uint64_t now_ns) {
  CompleterState& c = qp.comp;
  if (c.unacked_psn == qp.req.max_psn_sent) {
    c.timer_armed = false;
    return;
  }
  if (c.rto_ns == 0 && !refresh_rto(qp)) return;
  const uint64_t full = local_ack_timeout_ns(qp.local_ack_timeout()).value_or(UINT64_MAX);
  const uint64_t wait = timer_wait(c.rto_ns, full, path_of(qp, ctx).rto_ns);
  c.timer_armed = true;
  c.timer_full = wait >= full;
  c.ack_deadline_ns = now_ns + wait;
}

// RFC 6298 smoothing in integer nanoseconds, of one estimate.
void smooth(uint32_t& srtt, uint32_t& rttvar, uint64_t sample_ns) {
  const uint32_t s = static_cast<uint32_t>(sample_ns < (1u << 28) ? sample_ns : (1u << 28));
  if (srtt == 0) {
    srtt = s == 0 ? 1 : s;
    rttvar = s / 2;
    return;
  }
  const uint32_t err = s > srtt ? s - srtt : srtt - s;
  rttvar = rttvar - rttvar / 4 + err / 4;
  srtt = srtt - srtt / 8 + s / 8;
  if (srtt == 0) srtt = 1;
}

// A path's RTO from its estimate (RFC 6298's, no backoff), after the estimate changed.
void refresh_path_rto(PathEstimate& p) {
  p.rto_ns = std::max<uint64_t>(kRtoMinNs, uint64_t{p.srtt_ns} + uint64_t{4} * p.rttvar_ns);
}

// A QP's sample feeds its own estimate and its path's (the path's RTO: RFC 6298's, no backoff).
void rtt_sample(QueuePair& qp, RcContext& ctx, uint64_t sample_ns) {
  smooth(qp.comp.srtt_ns, qp.comp.rttvar_ns, sample_ns);
  PathEstimate& p = path_of(qp, ctx);
  smooth(p.srtt_ns, p.rttvar_ns, sample_ns);
  refresh_path_rto(p);
}

// A spurious timeout's ACK came `qp.stall_ns` after the last packet it confirms left, and the
// probe's own answer came after it, so that ACK was late (a stalled peer), not the answer to
// the probe (a lost ACK looks the same, but nothing follows it). As Eifel's response (RFC 4015)
// the estimate takes the delay (the smoothed RTT at least the sample, its variation at least
// half), so the same stall does not expire the timer again; later samples bring it down as the
// peer speeds up.
[[gnu::noinline, gnu::cold]] void learn_stall(QueuePair& qp, RcContext& ctx) {
  const uint32_t s = std::min<uint32_t>(qp.stall_ns, 1u << 28);
  qp.comp.stall_pending = false;
  auto take = [s](uint32_t& srtt, uint32_t& rttvar) {
    srtt = std::max(srtt, s);
    rttvar = std::max(rttvar, s / 2);
  };
  take(qp.comp.srtt_ns, qp.comp.rttvar_ns);
  PathEstimate& p = path_of(qp, ctx);
  take(p.srtt_ns, p.rttvar_ns);
  refresh_path_rto(p);
  qp.comp.rto_ns = 0;
  ctx.counters->add(RcCounter::kStallsLearned);
}

// Additive increase: one PSN per window of PSNs acknowledged.
void window_on_ack(CompleterState& c, uint32_t acked, uint32_t max_window) {
  if (c.window >= max_window) return;
  c.window_acc += acked;
  while (c.window_acc >= c.window && c.window < max_window) {
    c.window_acc -= c.window;
    ++c.window;
  }
}

// Multiplicative decrease, once per loss episode: a loss at or before recover_psn belongs to the
// episode that already halved the window.
void window_on_loss(QueuePair& qp, uint32_t psn) {
  CompleterState& c = qp.comp;
  if (psn_lt(psn, c.recover_psn)) return;
  c.window = c.window / 2 > kMinWindow ? c.window / 2 : kMinWindow;
  if (c.window > qp.params().max_unacked_psns) c.window = qp.params().max_unacked_psns;
  c.window_acc = 0;
  c.recover_psn = qp.req.max_psn_sent;
}

// Progress while a timeout's probe is out: the requester resent only the oldest packet and
// stopped, so its cursor is just past what the probe's answer can confirm (the probe's PSN, or a
// READ's last response), or still at the probe if it has not left yet.
[[gnu::noinline, gnu::cold]] void after_probe(QueuePair& qp, RcContext& ctx, uint32_t new_unacked,
                                              uint64_t now_ns) {
  if (!psn_lt(new_unacked, qp.req.max_psn_sent)) {
    // Everything is confirmed: only ACKs were lost or late, and nothing more is resent.
    qp.comp.probing = false;
    ctx.counters->add(RcCounter::kSpuriousTimeouts);
    // Late or the probe's answer: the probe's answer, if it comes after this, tells (learn_stall).
    const uint64_t since = now_ns - qp.comp.rtt_start_ns;
    qp.stall_ns = static_cast<uint32_t>(std::min<uint64_t>(since, UINT32_MAX));
    qp.comp.stall_pending = true;
    if (psn_lt(qp.req.cur.psn, new_unacked)) requester_seek_st(qp, new_unacked);
  } else if (psn_gt(new_unacked, qp.req.cur.psn)) {
    // This confirms PSNs past the probe's reach, which only their first transmission carried.
    // It is the probe's answer, and the rest was lost; or an ACK the responder sent before
    // the probe arrived, still on its way with more behind it (the peer or a core stalled:
    // the expiry was spurious). Probe again at the new oldest PSN, one packet, rather than
    // resend the window for what may be late ACKs (F-RTO, RFC 5682, waits for the next ACK
    // in the same way): lost, it is answered at once; arrived, it is a duplicate.
    requester_go_back_st(qp, ctx, new_unacked);
  } else if (psn_lt(new_unacked, qp.req.cur.psn)) {
    // A READ probe's responses, still coming (a one-packet probe's answer reaches the cursor at
    // once): its answer is the last one, which reaches the cursor.
    return;
  } else {
    // The probe's answer. Sent after every outstanding packet, it was answered after them:
    // what it does not cover was lost (the responder dropped what followed the gap), so go
    // back to it now.
    qp.comp.probing = false;
    window_on_loss(qp, new_unacked);
    requester_go_back_st(qp, ctx, new_unacked);
    qp.comp.retried_here = true;
  }
}

// Forward progress: PSNs up to (excluding) `new_unacked` are confirmed.
void advance(QueuePair& qp, RcContext& ctx, uint32_t new_unacked, uint64_t now_ns) {
  if (!psn_gt(new_unacked, qp.comp.unacked_psn)) return;
  window_on_ack(qp.comp, psn_forward(qp.comp.unacked_psn, new_unacked),
                qp.params().max_unacked_psns);
  qp.comp.unacked_psn = new_unacked;
  qp.comp.retry_left = qp.retry_count();
  qp.comp.rnr_retry_left = qp.rnr_retry();
  qp.comp.retried_here = false;
  // Progress steps the backoff down (ConnectX); a fresh RTT sample ends it.
  if (qp.comp.backoff != 0) {
    --qp.comp.backoff;
    qp.comp.rto_ns = 0;
  }
  if (qp.comp.rtt_timing && psn_gt(new_unacked, qp.comp.rtt_psn)) {
    // A fresh sample ends the backoff (RFC 6298 §5.7 keeps it until then, so a timer that
    // proved too short for a queue that grew is not reused at once).
    qp.comp.rtt_timing = false;
    qp.comp.backoff = 0;
    qp.comp.stall_pending = false;  // what a probe's answer would tell is older than this
    rtt_sample(qp, ctx, now_ns - qp.comp.rtt_start_ns);
    qp.comp.rto_ns = 0;
  }
  if (qp.comp.probing) [[unlikely]] {
    after_probe(qp, ctx, new_unacked, now_ns);
  } else if (psn_lt(qp.req.cur.psn, new_unacked)) {
    // The requester may be resending packets that turned out to have arrived (reordering):
    // skip it forward to the first unconfirmed PSN.
    requester_seek_st(qp, new_unacked);
  }
  restart_timer(qp, ctx, now_ns);
}

[[gnu::noinline]] void go_back(QueuePair& qp, RcContext& ctx, uint32_t psn) {
  if (qp.comp.retried_here && qp.comp.unacked_psn == psn) return;  // already resending from there
  qp.comp.retried_here = psn == qp.comp.unacked_psn;
  requester_go_back_st(qp, ctx, psn);
}

}  // namespace

uint64_t current_rto_ns(const QueuePair& qp, uint64_t path_rto_ns) {
  const auto full = local_ack_timeout_ns(qp.local_ack_timeout());
  if (!full) return UINT64_MAX;
  return timer_wait(rto_under(qp.comp, *full), *full, path_rto_ns);
}

void arm_retransmit_timer_st(QueuePair& qp, RcContext& ctx, uint64_t now_ns) {
  restart_timer(qp, ctx, now_ns);
}

namespace {

// Index of the first unfinished WQE whose PSN range holds `psn`, or -1.
int wqe_for_psn(QueuePair& qp, uint32_t psn) {
  const uint32_t lim = started_limit(qp);
  for (uint32_t i = 0; i < lim; ++i) {
    WqeMeta& m = qp.meta_at(i);
    if (!m.started) break;
    if (m.done || m.local) continue;
    if (psn_le(m.first_psn, psn) && psn_le(psn, m.last_psn)) return static_cast<int>(i);
  }
  return -1;
}

[[gnu::noinline, gnu::cold]] void fail_wqe(QueuePair& qp, RcContext& ctx, uint32_t psn,
                                           WcError err) {
  int i = wqe_for_psn(qp, psn);
  if (i < 0) {  // no WQE at that PSN: blame the oldest unfinished one
    const uint32_t lim = started_limit(qp);
    for (uint32_t k = 0; k < lim && i < 0; ++k) {
      const WqeMeta& m = qp.meta_at(k);
      if (m.started && !m.done && !m.local) i = static_cast<int>(k);
    }
  }
  if (i >= 0) qp.meta_at(static_cast<uint32_t>(i)).error = err;
  enter_error(qp, ctx, err);
}

// The PSN a READ resumes at: the first response not yet received.
uint32_t read_resume_psn(const WqeMeta& m, uint32_t mtu) {
  return wire::psn_add(m.first_psn, m.read_bytes / mtu);
}

// Cumulative acknowledgement of every PSN up to and including `psn`.
void ack_through(QueuePair& qp, RcContext& ctx, uint32_t psn, uint64_t now_ns) {
  const uint32_t lim = started_limit(qp);
  uint32_t i = scan_start(qp, lim);
  for (; i < lim; ++i) {
    WqeMeta& m = qp.meta_at(i);
    if (!m.started) break;
    if (m.done || m.local) continue;
    if (m.rd_atomic) {
      if (psn_le(m.first_psn, psn)) {
        scan_stopped_at(qp, i);
        // IBTA §9.7.5.1.3 / rxe: an ACK past a READ/atomic whose response is missing means the
        // response was lost: confirm up to it and ask again.
        const uint32_t resume = qp.sq_at(i).opcode == SendOpcode::kRead
                                    ? read_resume_psn(m, qp.path_mtu())
                                    : m.first_psn;
        advance(qp, ctx, resume, now_ns);
        go_back(qp, ctx, resume);
        return;
      }
      break;
    }
    if (psn_le(m.last_psn, psn)) {
      m.done = true;
      continue;
    }
    break;
  }
  scan_stopped_at(qp, i);
  advance(qp, ctx, wire::psn_next(psn), now_ns);
}

void handle_aeth(QueuePair& qp, RcContext& ctx, uint32_t psn, uint8_t syndrome, uint64_t now_ns) {
  switch (syndrome & wire::kAethTypeMask) {
    case wire::kAethAck:
      ctx.counters->add(RcCounter::kAcksReceived);
      // An ACK that confirms nothing new after a spurious timeout: the probe's answer.
      if (qp.comp.stall_pending && !psn_gt(wire::psn_next(psn), qp.comp.unacked_psn)) [[unlikely]]
        learn_stall(qp, ctx);
      ack_through(qp, ctx, psn, now_ns);
      return;
    case wire::kAethRnrNak: {
      ctx.counters->add(RcCounter::kRnrNaksReceived);
      ack_through(qp, ctx, wire::psn_sub(psn, 1), now_ns);
      // An earlier READ/atomic response is missing: ack_through already went back there.
      if (qp.state() != QpState::kRts || qp.comp.rnr_wait || qp.comp.unacked_psn != psn) return;
      if (qp.rnr_retry() != kRnrRetryInfinite) {
        if (qp.comp.rnr_retry_left == 0) {
          fail_wqe(qp, ctx, psn, WcError::kRnrRetryExceeded);
          return;
        }
        --qp.comp.rnr_retry_left;
      }
      // IBTA §9.7.5.2.8: wait at least the advertised time, then resend from the NAK'd PSN.
      ++qp.stats.rnr_waits;
      qp.comp.probing = false;
      qp.comp.rnr_wait = true;
      qp.comp.rnr_deadline_ns = now_ns + uint64_t{rnr_timer_us(syndrome & 0x1F)} * 1000;
      qp.comp.rnr_psn = psn;
      qp.comp.timer_armed = false;
      return;
    }
    case wire::kAethNak:
      break;
    default:
      return;  // reserved syndrome: ignore
  }
  ctx.counters->add(RcCounter::kNaksReceived);
  ++qp.stats.naks_received;
  ack_through(qp, ctx, wire::psn_sub(psn, 1), now_ns);
  if (qp.state() != QpState::kRts) return;
  switch (syndrome) {
    case wire::kAethNakPsnSeqError:
      // unacked != psn: an earlier READ/atomic response is missing and ack_through already
      // went back to it; the NAK adds nothing.
      if (qp.comp.unacked_psn != psn || qp.comp.retried_here) return;
      if (qp.comp.retry_left == 0) {
        fail_wqe(qp, ctx, psn, WcError::kRetryExceeded);
        return;
      }
      --qp.comp.retry_left;
      window_on_loss(qp, psn);
      go_back(qp, ctx, psn);
      restart_timer(qp, ctx, now_ns);
      return;
    case wire::kAethNakInvalidRequest:
      fail_wqe(qp, ctx, psn, WcError::kRemoteInvalidRequest);
      return;
    case wire::kAethNakRemoteAccess:
      fail_wqe(qp, ctx, psn, WcError::kRemoteAccess);
      return;
    default:
      fail_wqe(qp, ctx, psn, WcError::kRemoteOperational);
      return;
  }
}

// response_target's answer for a response past an unfinished READ/atomic, handled there.
constexpr int kPastALostResponse = -2;

// The READ/atomic WQE a response at `psn` belongs to; SEND/WRITEs before it are implicitly
// acknowledged (IBTA §9.7.5.2.1). -1 if the response matches nothing; kPastALostResponse if it
// belongs past the first unfinished READ/atomic, whose response was then lost (the responder
// answers in PSN order): confirmed up to it and asked again at once, as an ACK past it is
// (ack_through; rxe's check_psn retries too), not left to the timeout.
int response_target(QueuePair& qp, RcContext& ctx, uint32_t psn, uint64_t now_ns) {
  const uint32_t lim = started_limit(qp);
  uint32_t i = scan_start(qp, lim);
  for (; i < lim; ++i) {
    WqeMeta& m = qp.meta_at(i);
    if (!m.started) break;
    if (m.done || m.local) continue;
    scan_stopped_at(qp, i);
    if (!m.rd_atomic) {
      if (psn_lt(m.last_psn, psn)) {
        m.done = true;
        advance(qp, ctx, wire::psn_next(m.last_psn), now_ns);
        continue;
      }
      return -1;
    }
    if (psn_lt(m.last_psn, psn)) {
      const uint32_t resume =
          qp.sq_at(i).opcode == SendOpcode::kRead ? read_resume_psn(m, qp.path_mtu()) : m.first_psn;
      advance(qp, ctx, resume, now_ns);
      go_back(qp, ctx, resume);
      return kPastALostResponse;
    }
    return psn_le(m.first_psn, psn) ? static_cast<int>(i) : -1;
  }
  scan_stopped_at(qp, i);
  return -1;
}

// response_target without its loop for the in-order case: the WQE the scans start at is an
// unfinished READ/atomic holding `psn` (what the scan's first step would answer).
int response_target_fast(QueuePair& qp, RcContext& ctx, uint32_t psn, uint64_t now_ns) {
  const uint32_t lim = started_limit(qp);
  const uint32_t i = scan_start(qp, lim);
  if (i < lim) {
    const WqeMeta& m = qp.meta_at(i);
    if (m.started && !m.done && m.rd_atomic && psn_le(m.first_psn, psn) && psn_le(psn, m.last_psn))
      return static_cast<int>(i);
  }
  return response_target(qp, ctx, psn, now_ns);
}

[[gnu::noinline]] void handle_read_response(QueuePair& qp, RcContext& ctx,
                                            const wire::RcRxPacket& pkt, uint64_t now_ns) {
  const uint32_t psn = pkt.psn;
  const int idx = response_target_fast(qp, ctx, psn, now_ns);
  if (idx == kPastALostResponse) return;
  if (idx < 0 || qp.sq_at(static_cast<uint32_t>(idx)).opcode != SendOpcode::kRead) {
    ctx.counters->add(RcCounter::kRxGhostResponse);
    return;
  }
  WqeMeta& m = qp.meta_at(static_cast<uint32_t>(idx));
  const uint32_t mtu = qp.path_mtu();
  const uint32_t expected = read_resume_psn(m, mtu);
  if (psn != expected) {
    if (psn_gt(psn, expected)) {
      // A response went missing: confirm what came before and ask again from there.
      advance(qp, ctx, expected, now_ns);
      go_back(qp, ctx, expected);
    } else {
      ctx.counters->add(RcCounter::kRxDuplicate);
      ++qp.stats.duplicates;
    }
    return;
  }
  const uint32_t remaining = m.length - m.read_bytes;
  const bool last = remaining <= mtu;
  // A READ retried mid-message is a new request: its responses start again with FIRST/ONLY
  // (IBTA §9.7.5.1.3), so only "last or not" is checked against what is still missing.
  const wire::Position pos = pkt.op->position;
  const bool pkt_last = pos == wire::Position::kLast || pos == wire::Position::kOnly;
  const bool pos_ok = pkt_last == last;
  const uint32_t want = last ? remaining : mtu;
  if (!pos_ok || pkt.payload_len != want) {
    ctx.counters->add(RcCounter::kRxGhostResponse);
    return;
  }
  const SendWqe& w = qp.sq_at(static_cast<uint32_t>(idx));
  scatter_to_sges(w.sge, w.sge_count, m.read_bytes, pkt.payload(), want);
  m.read_bytes += want;
  if (last) {
    m.done = true;
    --qp.req.rd_atomic_outstanding;
    // The scans start at the first unfinished WQE (response_target stopped here): the next one.
    scan_stopped_at(qp, static_cast<uint32_t>(idx) + 1);
  }
  advance(qp, ctx, wire::psn_next(psn), now_ns);
}

[[gnu::noinline]] void handle_atomic_ack(QueuePair& qp, RcContext& ctx, const wire::RcRxPacket& pkt,
                                         uint64_t now_ns) {
  const uint32_t psn = pkt.psn;
  const int idx = response_target(qp, ctx, psn, now_ns);
  if (idx == kPastALostResponse) return;
  if (idx < 0) {
    ctx.counters->add(RcCounter::kRxGhostResponse);
    return;
  }
  const SendWqe& w = qp.sq_at(static_cast<uint32_t>(idx));
  if (w.opcode != SendOpcode::kCompareSwap && w.opcode != SendOpcode::kFetchAdd) {
    ctx.counters->add(RcCounter::kRxGhostResponse);
    return;
  }
  if ((pkt.aeth_syndrome() & wire::kAethTypeMask) != wire::kAethAck) {
    handle_aeth(qp, ctx, psn, pkt.aeth_syndrome(), now_ns);
    return;
  }
  WqeMeta& m = qp.meta_at(static_cast<uint32_t>(idx));
  m.atomic_orig = pkt.atomic_ack_orig();
  // The original value lands in the 8-byte local sink in host byte order.
  uint8_t bytes[8];
  std::memcpy(bytes, &m.atomic_orig, 8);
  scatter_to_sges(w.sge, w.sge_count, 0, bytes, 8);
  m.done = true;
  --qp.req.rd_atomic_outstanding;
  advance(qp, ctx, wire::psn_next(psn), now_ns);
}

// NdkOperationType by SendOpcode.
constexpr std::array<NdkOperationType, 9> kOpTypes = {
    NdkOperationType::kSend,         NdkOperationType::kSend,        NdkOperationType::kWrite,
    NdkOperationType::kRead,         NdkOperationType::kCompareSwap, NdkOperationType::kFetchAdd,
    NdkOperationType::kFastRegister, NdkOperationType::kInvalidate,  NdkOperationType::kBind};
static_assert(kOpTypes[static_cast<size_t>(SendOpcode::kBind)] == NdkOperationType::kBind);

NdkOperationType op_type(SendOpcode op) {
  const auto i = static_cast<size_t>(op);
  return i < kOpTypes.size() ? kOpTypes[i] : NdkOperationType::kSend;
}

// One CQE, written straight from the WQE into the CQ's slot and staged (the caller publishes);
// false if the CQ overran (it is then dead, and so is the QP).
// Inline: retiring a run calls it per WQE, and a success (the common case) needs no table.
[[gnu::always_inline]] inline bool produce(QueuePair& qp, CompletionQueue& cq, RcContext& ctx,
                                           const SendWqe& w, const WqeMeta& m, WcError err) {
  if (err == WcError::kSuccess && (w.flags & NDK_OP_FLAG_SILENT_SUCCESS) != 0) return true;
  ++ctx.completions;
  NdkResultEx* r = cq.claim_st();
  if (r == nullptr) [[unlikely]]
    return false;
  if (err == WcError::kSuccess) [[likely]] {
    r->status = STATUS_SUCCESS;
    r->bytes_transferred = m.length;
    r->provider_error_code = 0;
  } else {
    const WcErrorInfo& info = wc_error_info(err);
    r->status = info.status;
    r->bytes_transferred = 0;
    r->provider_error_code = info.provider_code;
  }
  r->qp_context = qp.params().qp_context;
  r->request_context = w.request_context;
  r->type = op_type(w.opcode);
  r->type_specific_completion_output = static_cast<uintptr_t>(m.atomic_orig);
  cq.stage_st(err != WcError::kSuccess, false);
  return true;
}

}  // namespace

void completer_receive_st(QueuePair& qp, RcContext& ctx, const wire::RcRxPacket& pkt,
                          uint64_t now_ns) {
  if (qp.state() != QpState::kRts) {
    ctx.counters->add(RcCounter::kRxDropState);
    return;
  }
  const uint32_t psn = pkt.psn;
  // A response for a PSN never sent is a ghost (IBTA §9.7.5.2.x: silently dropped), and so is one
  // far older than anything outstanding. What is outstanding is measured from the oldest
  // unacknowledged PSN, not from the last one sent: one READ reserves a PSN per response packet,
  // far more than the window (a 64 MiB READ at MTU 1024: 65,536).
  const uint32_t outstanding = psn_forward(qp.comp.unacked_psn, qp.req.max_psn_sent);
  if (!psn_lt(psn, qp.req.max_psn_sent) ||
      psn_forward(psn, qp.req.max_psn_sent) >
          outstanding + qp.params().max_unacked_psns + (1u << 16)) {
    ctx.counters->add(RcCounter::kRxGhostResponse);
    return;
  }
  switch (pkt.opcode()) {
    case kRcAck:
      handle_aeth(qp, ctx, psn, pkt.aeth_syndrome(), now_ns);
      return;
    case kRcAtomicAck:
      handle_atomic_ack(qp, ctx, pkt, now_ns);
      return;
    case kRcReadRespFirst:
    case kRcReadRespLast:
    case kRcReadRespOnly:
      if ((pkt.aeth_syndrome() & wire::kAethTypeMask) != wire::kAethAck) {
        handle_aeth(qp, ctx, psn, pkt.aeth_syndrome(), now_ns);
        return;
      }
      [[fallthrough]];
    case kRcReadRespMiddle:
      handle_read_response(qp, ctx, pkt, now_ns);
      return;
    default:
      ctx.counters->add(RcCounter::kRxGhostResponse);
      return;
  }
}

void completer_timers_st(QueuePair& qp, RcContext& ctx, uint64_t now_ns) {
  if (qp.state() != QpState::kRts) return;
  if (qp.comp.rnr_wait && now_ns >= qp.comp.rnr_deadline_ns) {
    qp.comp.rnr_wait = false;
    requester_go_back_st(qp, ctx, qp.comp.rnr_psn);
    qp.comp.retried_here = qp.comp.rnr_psn == qp.comp.unacked_psn;
    restart_timer(qp, ctx, now_ns);
  }
  if (!qp.comp.timer_armed || now_ns < qp.comp.ack_deadline_ns) return;
  if (qp.comp.unacked_psn == qp.req.max_psn_sent) {
    qp.comp.timer_armed = false;
    return;
  }
  ctx.counters->add(RcCounter::kAckTimeouts);
  ++qp.stats.timeouts;
  const uint64_t idle = now_ns > qp.comp.last_tx_ns ? now_ns - qp.comp.last_tx_ns : 0;
  qp.stats.timeout_wait_ns += idle;
  ctx.counters->add(RcCounter::kTimeoutWaitUs, idle / 1000);
  if (!qp.comp.timer_full) {
    // An early (adaptive) expiry: a probe, free of the retry budget; the next timer is longer.
    ctx.counters->add(RcCounter::kRtoProbes);
  } else {
    if (qp.comp.retry_left == 0) {
      fail_wqe(qp, ctx, qp.comp.unacked_psn, WcError::kRetryExceeded);
      return;
    }
    --qp.comp.retry_left;
  }
  if (qp.comp.backoff < 40) {
    ++qp.comp.backoff;
    qp.comp.rto_ns = 0;
  }
  // Resend the oldest unacknowledged packet only, with AckReq (a tail-loss probe): a spurious
  // expiry (a peer that was merely slow) then costs one duplicate, not a window; the answer
  // starts the go-back-N when something was really lost (advance above).
  requester_go_back_st(qp, ctx, qp.comp.unacked_psn);
  qp.comp.probing = true;
  qp.comp.retried_here = true;
  // While probing nothing is timed (Karn: the go-back above ended any timing, and only the probe
  // leaves): rtt_start_ns keeps when the packets the probe stands for last left (after_probe).
  qp.comp.rtt_start_ns = qp.comp.last_tx_ns;
  qp.comp.stall_pending = false;
  restart_timer(qp, ctx, now_ns);
}

namespace {
[[gnu::noinline]] uint32_t retire_st(QueuePair& qp, RcContext& ctx, uint32_t avail) {
  SendRing& ring = qp.sq_ring();
  CompletionQueue& cq = *qp.params().send_cq;
  stage_on_st(ctx, &cq);  // the poll publishes its visits' completions at once (poll_st)
  uint32_t n = 0;
  // admit() fills the rest of a slot's meta when its next WQE starts; what is read before that
  // (the flush path, the go-back-N scans) is `started`, `error` and, in a flushed CQE, the
  // atomic result. The head moves and the slots are released after the loop.
  const auto clear = [](WqeMeta& m) {
    m.started = false;
    m.error = WcError::kSuccess;
    m.atomic_orig = 0;
  };
  if (qp.state() != QpState::kError) [[likely]] {
    // The run of finished WQEs at the head.
    for (; n < avail; ++n) {
      WqeMeta& m = qp.meta_at(n);
      if (!m.started || !m.done) break;
      if (!produce(qp, cq, ctx, qp.sq_at(n), m, m.error))
        enter_error(qp, ctx, WcError::kFlushed, QpErrorReason::kCqFull);
      clear(m);
    }
  } else {
    // Everything: finished WQEs ahead of the failure still complete successfully, the failing
    // WQE keeps its status, everything after it is cancelled.
    bool failed = false;  // a WQE before this one did not finish successfully
    for (; n < avail; ++n) {
      WqeMeta& m = qp.meta_at(n);
      WcError err = m.error;
      if (failed || !(m.started && m.done && err == WcError::kSuccess)) {
        if (err == WcError::kSuccess) err = WcError::kFlushed;
        failed = true;
      }
      produce(qp, cq, ctx, qp.sq_at(n), m, err);  // a CQ that overran: the QP is in ERROR already
      clear(m);
    }
  }
  qp.comp.sq_head += n;
  // The scans' start never falls behind the head (one left behind 2^32 WQEs would look valid).
  if (static_cast<int32_t>(qp.comp.scan_from - static_cast<uint32_t>(qp.comp.sq_head)) < 0)
    qp.comp.scan_from = static_cast<uint32_t>(qp.comp.sq_head);
  qp.req.cur.wqe -= std::min(qp.req.cur.wqe, n);
  ring.release_to_st(qp.comp.sq_head);  // once for the whole run: one release store
  return n;
}
}  // namespace

// Most visits have nothing to retire (an empty send queue, or its oldest WQE still in flight):
// that answer costs a few loads here, not the prologue of the retiring loop.
uint32_t completer_retire_st(QueuePair& qp, RcContext& ctx) {
  const uint32_t avail = qp.sq_readable();
  if (avail == 0) return 0;
  if (qp.state() != QpState::kError) {
    const WqeMeta& m = qp.meta_at(0);
    if (!m.started || !m.done) return 0;
  }
  return retire_st(qp, ctx, avail);
}

}  // namespace rocedp::rc
