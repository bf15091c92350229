#include "dataplane/rc/congestion.hpp"

#include <algorithm>
#include <cstring>

#include "dataplane/rc/transmit.hpp"
#include "dataplane/wire/ipv4.hpp"

namespace rocedp::rc {
namespace {

using CS = CongestionState;
using config::DcqcnConfig;

constexpr uint64_t kNsPerUs = 1000;

// What a frame takes of the line beyond frame_bytes(): its FCS (4), the preamble and start
// delimiter (8) and the inter-frame gap (12). Rc is a line rate, so the clock charges them too.
constexpr uint64_t kWireOverheadBytes = 24;

void set_rate(CS& c, const DcqcnConfig& d, uint32_t mbps) {
  c.rate_mbps = std::max(mbps, d.min_rate_mbps);
}

// One rate-increase step (the timer's or the byte counter's): fast recovery towards the target
// while both counters are below F, then the target grows additively, then hyper-additively.
void increase(QueuePair& qp) {
  CS& c = qp.cc;
  const DcqcnConfig& d = *qp.conn().dcqcn;
  const uint32_t lo = std::min(c.timer_steps, c.byte_steps);
  const uint32_t hi = std::max(c.timer_steps, c.byte_steps);
  const uint32_t line = qp.conn().line_rate_mbps;
  if (lo > d.fast_recovery) {
    c.target_mbps += static_cast<uint32_t>(
        std::min<uint64_t>(uint64_t{lo - d.fast_recovery} * d.hai_rate_mbps, line));
  } else if (hi > d.fast_recovery) {
    c.target_mbps += d.ai_rate_mbps;
  }
  c.target_mbps = std::min(c.target_mbps, line);
  const uint32_t rate = (c.target_mbps + c.rate_mbps + 1) / 2;
  if (rate >= line) {  // recovered: unlimited again
    qp.cc_flags.paced = false;
    c.rate_mbps = 0;
    return;
  }
  set_rate(c, d, rate);
}

// alpha after `n` periods without a CNP: alpha · (keep / 1024)^n (16-bit fixed point, by
// squaring: a QP idle for a long time costs a few multiplications).
uint32_t decayed(uint32_t alpha, uint64_t n, uint32_t keep) {
  uint64_t f = (uint64_t{keep} << 16) / 1024;
  uint64_t r = uint64_t{1} << 16;
  while (n != 0 && r != 0) {
    if ((n & 1) != 0) r = (r * f) >> 16;
    f = (f * f) >> 16;
    n >>= 1;
  }
  return static_cast<uint32_t>((uint64_t{alpha} * r) >> 16);
}

// Brings alpha up to `now_ns`: every whole period since alpha_at_ns passed without a CNP.
void update_alpha(CS& c, const DcqcnConfig& d, uint64_t now_ns) {
  if (now_ns < c.alpha_at_ns) return;
  const uint64_t period = d.alpha_period_us * kNsPerUs;
  const uint64_t n = (now_ns - c.alpha_at_ns) / period + 1;
  c.alpha = decayed(c.alpha, n, d.alpha_keep);
  c.alpha_at_ns += n * period;
}

// Steps of a period that elapsed while nobody looked (an idle QP) are applied at once, up to this
// many; beyond it the QP has been quiet long enough to be unlimited again.
constexpr uint64_t kMaxCatchUp = 1024;

// The timer's rate-increase steps due by `now_ns`: the hardware's timer runs whether the QP
// sends or not, so they are applied when the QP next looks (a send, or a CNP before its cut).
void timer_increases(QueuePair& qp, uint64_t now_ns) {
  CS& c = qp.cc;
  if (now_ns < c.increase_at_ns) return;
  const uint64_t period = qp.conn().dcqcn->time_reset_us * kNsPerUs;
  const uint64_t n = (now_ns - c.increase_at_ns) / period + 1;
  c.increase_at_ns += n * period;
  if (n > kMaxCatchUp) {
    qp.cc_flags.paced = false;
    c.rate_mbps = 0;
  }
  for (uint64_t i = 0; i < n && qp.cc_flags.paced; ++i) {
    ++c.timer_steps;
    increase(qp);
  }
}

}  // namespace

bool congestion_send_cnp_st(QueuePair& qp, RcContext& ctx, uint64_t now_ns) {
  qp.cc_flags.cnp_due = false;
  if (qp.state() != QpState::kRts && qp.state() != QpState::kRtr) return false;
  TxBth h;
  h.opcode = wire::opcode::kCnp;
  h.psn = 0;
  // BTH (BECN set, the peer's QP from the template), 16 reserved bytes (Annex A17.9.3). The ToS
  // and resv8a are masked out of the ICRC, so they may change here, before it is computed.
  const bool sent = transmit_frame(qp, ctx, h, wire::kCnpReservedLen, [&](uint8_t*, uint8_t* pl) {
    std::memset(pl, 0, wire::kCnpReservedLen);
    uint8_t* bth = pl - wire::kBthLen;
    bth[wire::bth_off::kResv8a] |= wire::bth_bits::kBecn;
    if (qp.ipv6())
      wire::set_ipv6_traffic_class(bth - wire::kUdpHdrLen - wire::kIpv6HdrLen, qp.conn().cnp_tos);
    else
      wire::set_ipv4_tos(bth - wire::kUdpHdrLen - wire::kIpv4MinHdrLen, qp.conn().cnp_tos);
  });
  if (!sent) return false;
  qp.cc.last_cnp_ns = now_ns;
  ++qp.cc.cnps_sent;
  ctx.counters->add(RcCounter::kTxCnp);
  return true;
}

bool congestion_on_cnp_st(QueuePair& qp, RcContext& ctx, uint64_t now_ns) {
  CS& c = qp.cc;
  ++c.cnps_received;
  if (!congestion_ecn_capable(qp)) return false;
  const DcqcnConfig& d = *qp.conn().dcqcn;
  // The increases due since the QP last sent come first: a cut takes the rate they reached (or
  // a QP they brought back to the line rate starts a new episode).
  if (qp.cc_flags.paced) timer_increases(qp, now_ns);
  const bool cut =
      !qp.cc_flags.paced || now_ns - c.last_cut_ns >= d.rate_reduce_period_us * kNsPerUs;
  if (!qp.cc_flags.paced) {  // a new episode starts from the line rate (or the first-CNP rate)
    const uint32_t line = qp.conn().line_rate_mbps;
    set_rate(c, d, d.first_cnp_rate_mbps != 0 ? std::min(d.first_cnp_rate_mbps, line) : line);
    c.alpha = CS::kAlphaOne;
    c.next_tx_ns = now_ns;
    c.bytes = 0;
  } else {
    update_alpha(c, d, now_ns);
  }
  if (cut) {
    c.target_mbps = c.rate_mbps;
    const uint64_t keep = 2 * uint64_t{CS::kAlphaOne} - c.alpha;  // 1 - alpha/2, times 2·one
    set_rate(c, d, static_cast<uint32_t>(c.rate_mbps * keep / (2 * uint64_t{CS::kAlphaOne})));
    c.timer_steps = c.byte_steps = 0;
    c.bytes = 0;  // the byte counter restarts with the timer (DCQCN resets both on a cut)
    c.last_cut_ns = now_ns;
    c.increase_at_ns = now_ns + d.time_reset_us * kNsPerUs;
    ++c.rate_cuts;
    ctx.counters->add(RcCounter::kRateCuts);
  }
  // The period of this CNP moves alpha towards 1 instead of decaying it.
  c.alpha = static_cast<uint32_t>(
      (uint64_t{c.alpha} * d.alpha_keep + uint64_t{CS::kAlphaOne} * (1024 - d.alpha_keep)) / 1024);
  c.alpha_at_ns = now_ns + d.alpha_period_us * kNsPerUs;
  qp.cc_flags.paced = true;
  return cut;
}

bool congestion_may_send_st(QueuePair& qp, uint64_t now_ns) {
  CS& c = qp.cc;
  const DcqcnConfig& d = *qp.conn().dcqcn;
  update_alpha(c, d, now_ns);
  timer_increases(qp, now_ns);
  if (!qp.cc_flags.paced) return true;
  // A pause leaves at most kPaceSlackNs of credit.
  if (c.next_tx_ns + kPaceSlackNs < now_ns) c.next_tx_ns = now_ns - kPaceSlackNs;
  if (c.next_tx_ns <= now_ns) return true;
  qp.cc_flags.pace_wait = true;  // the engine's timer wakes the QP when the clock allows
  return false;
}

void congestion_charge_st(QueuePair& qp, uint32_t bytes) {
  CS& c = qp.cc;
  // 8 bits at Rc·10^6 bit/s, in picoseconds; what is left of a nanosecond carries to the next
  // frame (whole nanoseconds alone sped a paced QP up by up to one a frame).
  const uint64_t line_bytes = bytes + kWireOverheadBytes + qp.conn().vlan_tag_bytes;
  const uint64_t ps = line_bytes * 8'000'000 / c.rate_mbps + c.pace_remainder_ps;
  c.next_tx_ns += ps / 1000;
  c.pace_remainder_ps = static_cast<uint32_t>(ps % 1000);
  c.bytes += bytes;
  // A step per byte_reset bytes (a frame may hold several when B is small).
  const uint32_t step = qp.conn().dcqcn->byte_reset;
  while (c.bytes >= step && qp.cc_flags.paced) {
    c.bytes -= step;
    ++c.byte_steps;
    increase(qp);
  }
}

}  // namespace rocedp::rc
