#include "dataplane/core_rdma.hpp"

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <algorithm>

#include "dataplane/polling_core.hpp"
#include "dataplane/rc/completion_queue.hpp"
#include "dataplane/rc/queue_pair.hpp"
#include "dataplane/rc/work_queue.hpp"

namespace rocedp::dataplane {

CoreRdma::CoreRdma(PollingCore& core, uint16_t port_id, rte_mempool* pool,
                   const rc::RcEngineConfig& config, rc::MemoryRegionTable* mrs, uint32_t max_cqs)
    : core_(core), port_id_(port_id), pool_(pool), max_cqs_(max_cqs) {
  rc::FrameSink sink;
  sink.alloc = &CoreRdma::sink_alloc;
  sink.send = nullptr;  // sink_alloc queues each buffer for transmit; a tap adds sink_tap
  sink.ctx = this;
  engine_ = std::make_unique<rc::RcEngine>(config, mrs, sink);
  // Frames the codec refuses are counted by reason in the core's own drop table.
  engine_->count_wire_drops_in(core.wire_drop_counters_st());
  cqs_.reserve(max_cqs);
  const uint64_t hz = rte_get_tsc_hz();
  ns_per_cycle_ = hz == 0 ? 1.0 : 1e9 / static_cast<double>(hz);
}

CoreRdma::~CoreRdma() {
  if (tx_stash_n_ != 0)
    rte_mempool_put_bulk(pool_, reinterpret_cast<void* const*>(tx_stash_.data()), tx_stash_n_);
}

uint16_t CoreRdma::index() const {
  return core_.index();
}

uint64_t CoreRdma::ns_of(uint64_t tsc) const {
  return static_cast<uint64_t>(static_cast<double>(tsc) * ns_per_cycle_);
}

uint32_t CoreRdma::rx_burst_st(std::span<const wire::Bytes> frames, uint64_t tsc) {
  return engine_->rx_burst_st(frames, ns_of(tsc));
}

bool CoreRdma::poll_st(uint64_t tsc) {
  bool busy = engine_->poll_st(ns_of(tsc));
  // Every CQ each loop: fires notifications an ArmCq found already due, frees retired rings.
  for (rc::CompletionQueue* cq : cqs_) busy |= cq->poll_st();
  return busy;
}

// `m`, the stash's last mbuf, queued for transmit: it leaves the stash, set up for `len` bytes.
inline uint8_t* CoreRdma::take_tx_mbuf_st(rte_mbuf* m, size_t len, void** handle) {
  --tx_stash_n_;
  // What rte_pktmbuf_reset sets that a transmit reads. A pooled mbuf already has one segment,
  // no next and one reference: the pool's own invariant (rte_mbuf_raw_free); a received one may
  // still carry its RX flags.
  m->data_off = RTE_PKTMBUF_HEADROOM;
  m->ol_flags &= RTE_MBUF_F_EXTERNAL;  // as rte_pktmbuf_reset
  m->tx_offload = 0;
  m->packet_type = 0;
  m->vlan_tci = 0;
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = static_cast<uint32_t>(len);
  *handle = m;
  return rte_pktmbuf_mtod(m, uint8_t*);
}

// The engine asks for a contiguous buffer: one mbuf from the port's pool (through a stash the
// pool refills a burst at a time), data starting after the headroom. Null (no mbuf, or a frame
// larger than one segment) makes the engine roll back. The mbuf goes into the core's TX buffer
// at once, with the length asked for: the engine always finishes a frame it got a buffer for,
// and the buffer leaves at the end of the poll (flush_tx_st), after the engine's turn, so no
// second call per frame hands it over.
// The common case calls nothing (a call would make this function save and restore
// registers on every frame: 18 of its 60 instructions per 64-byte WRITE, callgrind); an empty
// stash, a frame longer than the mbuf or a full TX buffer go to sink_alloc_slow (a tail call).
uint8_t* CoreRdma::sink_alloc(void* ctx, size_t len, void** handle) {
  auto& self = *static_cast<CoreRdma*>(ctx);
  if (self.tx_stash_n_ == 0) [[unlikely]]
    return sink_alloc_slow(ctx, len, handle);
  rte_mbuf* m = self.tx_stash_[self.tx_stash_n_ - 1];
  if (len + RTE_PKTMBUF_HEADROOM > m->buf_len || !self.core_.try_queue_tx_st(self.port_id_, m))
      [[unlikely]]
    return sink_alloc_slow(ctx, len, handle);
  return self.take_tx_mbuf_st(m, len, handle);
}

uint8_t* CoreRdma::sink_alloc_slow(void* ctx, size_t len, void** handle) {
  auto& self = *static_cast<CoreRdma*>(ctx);
  if (self.tx_stash_n_ == 0 && !self.refill_tx_stash_st()) {
    ++self.tx_no_mbuf_;
    return nullptr;
  }
  rte_mbuf* m = self.tx_stash_[self.tx_stash_n_ - 1];
  if (len + RTE_PKTMBUF_HEADROOM > m->buf_len) {
    ++self.tx_no_mbuf_;  // the mbuf stays in the stash
    return nullptr;
  }
  // No room in the core's TX buffer (the TX ring is full), or no TX queue: refuse before the
  // engine commits the packet, so it rolls back (rxe save_state/rollback_state) instead of
  // losing a frame it counted. queue_tx_st may transmit the buffer first: the frames in it get
  // the ICRCs the engine still owes them.
  self.engine_->finish_frames_st();
  if (!self.core_.queue_tx_st(self.port_id_, m)) {
    ++self.tx_no_room_;  // the mbuf stays in the stash
    return nullptr;
  }
  return self.take_tx_mbuf_st(m, len, handle);
}

// A burst from the pool at once (rte_mempool_get_bulk takes all or none), else the last few.
bool CoreRdma::refill_tx_stash_st() {
  void** objs = reinterpret_cast<void**>(tx_stash_.data());
  if (rte_mempool_get_bulk(pool_, objs, kTxStash) == 0) {
    tx_stash_n_ = kTxStash;
    return true;
  }
  if (rte_mempool_get_bulk(pool_, objs, 1) == 0) {
    tx_stash_n_ = 1;
    return true;
  }
  return false;
}

// With a tap installed: the finished frame, as it will leave.
void CoreRdma::sink_tap(void* ctx, void* handle, size_t len) {
  auto& self = *static_cast<CoreRdma*>(ctx);
  self.tap_(self.tap_context_, rte_pktmbuf_mtod(static_cast<rte_mbuf*>(handle), const uint8_t*),
            len);
}

// ---- request handlers ----

void CoreRdma::on_install(const RdmaTarget& req, CoreResult& result, void* core) {
  result.status = static_cast<PollingCore*>(core)->set_roce_handler_st(req.rdma->port_id_, req.rdma)
                      ? STATUS_SUCCESS
                      : STATUS_INSUFFICIENT_RESOURCES;
}

void CoreRdma::on_uninstall(const RdmaTarget& req, CoreResult& result, void* core) {
  auto* pc = static_cast<PollingCore*>(core);
  if (pc->roce_handler_st(req.rdma->port_id_) == req.rdma)
    pc->set_roce_handler_st(req.rdma->port_id_, nullptr);
  result.status = STATUS_SUCCESS;
}

void CoreRdma::on_attach_cq(const CqTarget& req, CoreResult& result, void*) {
  CoreRdma& self = *req.rdma;
  if (self.cqs_.size() >= self.max_cqs_) {
    result.status = STATUS_INSUFFICIENT_RESOURCES;
    return;
  }
  self.cqs_.push_back(req.cq);
  result.status = STATUS_SUCCESS;
}

void CoreRdma::on_detach_cq(const CqTarget& req, CoreResult& result, void*) {
  CoreRdma& self = *req.rdma;
  auto it = std::find(self.cqs_.begin(), self.cqs_.end(), req.cq);
  if (it == self.cqs_.end()) {
    result.status = STATUS_INVALID_PARAMETER;
    return;
  }
  self.cqs_.erase(it);
  result.status = STATUS_SUCCESS;
}

void CoreRdma::on_resize_cq(const CqResize& req, CoreResult& result, void*) {
  result.status = req.cq->resize_st(req.depth);
}

void CoreRdma::on_create_qp(const QpCreate& req, CoreResult& result, void*) {
  NTSTATUS status = STATUS_SUCCESS;
  rc::QueuePair* qp = req.rdma->engine_->create_qp(*req.params, &status);
  result.status = status;
  if (qp != nullptr) result.value = QpCreated{qp->qpn()};
}

void CoreRdma::on_connect_qp(const QpConnect& req, CoreResult& result, void*) {
  result.status = req.rdma->engine_->connect_qp(req.qpn, *req.params);
}

void CoreRdma::on_flush_qp(const QpTarget& req, CoreResult& result, void*) {
  result.status = req.rdma->engine_->flush_qp(req.qpn);
}

void CoreRdma::on_close_qp(const QpTarget& req, CoreResult& result, void*) {
  CoreRdma& self = *req.rdma;
  rc::QueuePair* qp = self.engine_->find_qp(req.qpn);
  if (qp == nullptr) {
    result.status = STATUS_INVALID_PARAMETER;
    return;
  }
  if (qp->state() != rc::QpState::kError) {
    // Close with work pending: everything outstanding completes with STATUS_CANCELLED first,
    // so the consumer gets every request back before the close completes.
    self.engine_->flush_qp(req.qpn);
    result.status = STATUS_PENDING;
    return;
  }
  const rc::QpCreateParams& p = qp->params();
  const bool sq_empty = p.sq->ring().readable_st() == 0;
  const bool rq_empty = p.rq == nullptr || p.rq->ring().readable_st() == 0;
  if (!sq_empty || !rq_empty || qp->resp.have_recv) {
    result.status = STATUS_PENDING;  // the next poll_st produces the flush completions
    return;
  }
  result.status = self.engine_->destroy_qp(req.qpn);
}

void CoreRdma::on_modify_srq(const SrqModify& req, CoreResult& result, void*) {
  result.status = req.srq->modify_st(req.depth, req.threshold);
}

}  // namespace rocedp::dataplane
