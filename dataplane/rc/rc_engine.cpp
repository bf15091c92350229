#include "dataplane/rc/rc_engine.hpp"

#include <algorithm>

#include "dataplane/qpn_map.hpp"
#include "dataplane/rc/completer.hpp"
#include "dataplane/rc/requester.hpp"
#include "dataplane/rc/responder.hpp"

namespace rocedp::rc {

namespace {
// Per-core numbers 0 and 1 are never handed out: on core 0 they would be QP0/QP1 (DESIGN §4).
constexpr uint32_t kFirstLocalQpn = 2;
}  // namespace

RcEngine::RcEngine(const RcEngineConfig& config, MemoryRegionTable* mrs, const FrameSink& sink) : config_(config) {
  config_.max_qps = std::min<uint32_t>(config_.max_qps, dataplane::kQpnLocalMask + 1 - kFirstLocalQpn);
  ctx_.sink = sink;
  ctx_.mrs = mrs;
  ctx_.counters = &counters_;
  ctx_.ip_id = &ip_id_;
  qps_.resize(config_.max_qps + kFirstLocalQpn);
  active_.reserve(config_.max_qps);
}

RcEngine::~RcEngine() = default;

QueuePair* RcEngine::create_qp(const QpCreateParams& params, NTSTATUS* status) {
  uint32_t local = kFirstLocalQpn;
  while (local < qps_.size() && qps_[local]) ++local;
  if (local >= qps_.size()) {
    *status = STATUS_INSUFFICIENT_RESOURCES;
    return nullptr;
  }
  auto qp = QueuePair::create(dataplane::make_qpn(config_.core, local), params, status);
  if (!qp) return nullptr;
  QueuePair* raw = qp.get();
  qps_[local] = std::move(qp);
  active_.push_back(raw);
  return raw;
}

QueuePair* RcEngine::find_qp(uint32_t qpn) const {
  if (dataplane::qpn_core(qpn) != config_.core) return nullptr;
  const uint32_t local = dataplane::qpn_local(qpn);
  return local < qps_.size() ? qps_[local].get() : nullptr;
}

NTSTATUS RcEngine::destroy_qp(uint32_t qpn) {
  QueuePair* qp = find_qp(qpn);
  if (qp == nullptr) return STATUS_INVALID_PARAMETER;
  qp->params().sq->set_connected(false);
  active_.erase(std::find(active_.begin(), active_.end(), qp));
  qps_[dataplane::qpn_local(qpn)].reset();
  return STATUS_SUCCESS;
}

NTSTATUS RcEngine::flush_qp(uint32_t qpn) {
  QueuePair* qp = find_qp(qpn);
  if (qp == nullptr) return STATUS_INVALID_PARAMETER;
  enter_error(*qp, ctx_, WcError::kFlushed);
  return STATUS_SUCCESS;
}

uint32_t RcEngine::rx_burst_lc(std::span<const wire::Bytes> frames, uint64_t now_ns) {
  uint32_t accepted = 0;
  for (const wire::Bytes& frame : frames) {
    if (!receive_parse_lc(frame, scratch_, counters_, wire_drops_)) continue;
    rx_parsed_lc(scratch_, now_ns);
    ++accepted;
  }
  return accepted;
}

void RcEngine::rx_parsed_lc(const wire::ParsedPacket& pkt, uint64_t now_ns) {
  receive_dispatch_lc(find_qp(pkt.f.bth.dqpn), ctx_, pkt, now_ns);
}

bool RcEngine::poll_lc(uint64_t now_ns) {
  bool busy = false;
  for (QueuePair* qp : active_) {
    // A CQ that overran is dead, and so is every QP completing into it (NDK).
    if (qp->state() != QpState::kError &&
        (qp->params().send_cq->overrun() || qp->params().recv_cq->overrun())) {
      enter_error(*qp, ctx_, WcError::kFlushed);
    }
    completer_timers_lc(*qp, ctx_, now_ns);
    uint32_t work = responder_tx_lc(*qp, ctx_, config_.tx_budget);
    work += requester_run_lc(*qp, ctx_, now_ns, config_.tx_budget);
    work += completer_retire_lc(*qp, ctx_);
    work += responder_flush_lc(*qp, ctx_);
    busy |= work != 0;
  }
  return busy;
}

}  // namespace rocedp::rc
