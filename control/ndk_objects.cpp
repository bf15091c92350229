// PD, MR, CQ, SRQ and QP of the NDK object layer (include/rocedp/adapter.hpp). Creation and
// close run on the control thread; posts and CQ polling only touch the queue's lock-free ring.

#include <cassert>
#include <cstring>
#include <new>

#include "control/ndk_internal.hpp"
#include "dataplane/rc/completion_queue.hpp"
#include "dataplane/rc/work_queue.hpp"
#include "dataplane/wire/eth.hpp"
#include "dataplane/wire/ipv4.hpp"
#include "dataplane/wire/ipv6.hpp"
#include "pmd/port.hpp"

namespace rocedp {

using dataplane::CoreMessage;
using dataplane::CoreRdma;
using dataplane::CoreResult;
using namespace ndk_detail;

namespace {

bool cq_usable(const Cq* cq, const Adapter* adapter) {
  return cq != nullptr && cq->header.object_type == NdkObjectType::kCq &&
         Access::adapter(*cq) == adapter && !Access::closing(*cq) && Access::attached(*cq);
}

void request_done(const CoreMessage& msg) {
  auto* o = static_cast<RequestOp*>(msg.done_ctx);
  NTSTATUS st = msg.result.status;
  // NDKPI object lifetime: a request still pending when its object is closed completes
  // STATUS_CANCELLED, before the close does (the close request queues behind it on the same
  // core ring, so the object is alive here).
  if (o->object != nullptr && Access::closing(*o->object)) st = STATUS_CANCELLED;
  if (o->request_completion != nullptr) o->request_completion(o->context, st);
  NdkObjectBase* child_of = o->holds_child ? o->object : nullptr;
  delete o;
  release_child(child_of);  // a close that waited for this request finishes now
}

// Sends `op`'s request to `core`: `run(request)` on the core, then the consumer's
// RequestCompletion with the core's status on the control thread. PENDING, or
// INSUFFICIENT_RESOURCES (and `op` freed) when the core's ring is full.
template <typename Request>
NTSTATUS post_request(Adapter::Impl& im, uint32_t core,
                      typename dataplane::CoreCall<Request>::RunFn run, const Request& request,
                      RequestOp* op) {
  if (!im.call(core, run, request, &request_done, op)) {
    delete op;
    return STATUS_INSUFFICIENT_RESOURCES;
  }
  return STATUS_PENDING;
}

RequestOp* new_request_op(NdkRequestCompletion completion, void* context) {
  auto* op = new (std::nothrow) RequestOp();
  if (op == nullptr) return nullptr;
  op->request_completion = completion;
  op->context = context;
  return op;
}

}  // namespace

namespace {
// Deregistration barrier of an MR or MW (defined with the MR below).
bool rings_have_room(Adapter::Impl& im);
bool start_barrier(NdkObjectBase* object, uint32_t* counter, NdkRequestCompletion cb, void* ctx);
}  // namespace

// ---------------------------------------------------------------------------------------------
// PD

NTSTATUS Pd::create_mr(bool fast_register, NdkCreateCompletion, void*, Mr** out) {
  ROCEDP_ON_CONTROL(this, create_mr(fast_register, nullptr, nullptr, out));
  if (out == nullptr || closing) return STATUS_INVALID_PARAMETER;
  Adapter::Impl& im = impl_of(*adapter);
  if (im.mrs_open >= im.setup.limits.max_mrs) return STATUS_INSUFFICIENT_RESOURCES;
  Mr* mr = new (std::nothrow) Mr();
  if (mr == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
  init_header(*mr, Mr::kType, adapter);
  Access::pd(*mr) = this;
  Access::fast_register(*mr) = fast_register;
  ++im.mrs_open;
  ++children;
  *out = mr;
  return STATUS_SUCCESS;
}

NTSTATUS Pd::create_srq(uint32_t depth, uint32_t max_sge, uint32_t notify_threshold,
                        NdkSrqNotificationCallback notification, void* notification_context,
                        uint32_t core_affinity, NdkCreateCompletion, void*, Srq** out) {
  ROCEDP_ON_CONTROL(this, create_srq(depth, max_sge, notify_threshold, notification,
                                     notification_context, core_affinity, nullptr, nullptr, out));
  Adapter::Impl& im = impl_of(*adapter);
  const config::LimitsConfig& l = im.setup.limits;
  if (out == nullptr || closing || depth == 0 || depth > l.max_srq_depth || max_sge > l.max_sge ||
      max_sge > rc::kMaxWqeSge || notify_threshold > depth || core_affinity >= im.rdma.size()) {
    return STATUS_INVALID_PARAMETER;
  }
  if (im.srqs >= l.max_srqs) return STATUS_INSUFFICIENT_RESOURCES;
  NTSTATUS status = STATUS_SUCCESS;
  auto ring =
      rc::SharedReceiveQueue::create(depth, max_sge, notification, notification_context, &status);
  if (!ring) return status;
  // The limit is armed before any QP can take from the SRQ: no core reads it yet.
  if (notify_threshold != 0) ring->modify_st(depth, notify_threshold);
  Srq* srq = new (std::nothrow) Srq();
  if (srq == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
  init_header(*srq, Srq::kType, adapter);
  Access::pd(*srq) = this;
  Access::core(*srq) = core_affinity;
  Access::srq(*srq) = std::move(ring);
  ++im.srqs;
  ++children;
  *out = srq;
  return STATUS_SUCCESS;
}

namespace {

NTSTATUS create_qp_common(Pd* pd, Cq* rcq, Cq* icq, Srq* srq, void* qp_context, uint32_t rq_depth,
                          uint32_t iq_depth, uint32_t rq_sge, uint32_t iq_sge, uint32_t inline_size,
                          NdkCreateCompletion completion, void* context, Qp** out) {
  Adapter* ad = Access::adapter(*pd);
  Adapter::Impl& im = impl_of(*ad);
  const config::LimitsConfig& l = im.setup.limits;
  const uint32_t max_sge = std::min<uint32_t>(l.max_sge, rc::kMaxWqeSge);
  if (Access::closing(*pd) || completion == nullptr || !cq_usable(rcq, ad) || !cq_usable(icq, ad) ||
      iq_depth == 0 || iq_depth > l.max_qp_depth || iq_sge > max_sge ||
      inline_size > std::min(l.max_inline_data, rc::kMaxInlineData)) {
    return STATUS_INVALID_PARAMETER;
  }
  if (srq == nullptr && (rq_depth == 0 || rq_depth > l.max_qp_depth || rq_sge > max_sge)) {
    return STATUS_INVALID_PARAMETER;
  }
  if (srq != nullptr && (Access::closing(*srq) || Access::adapter(*srq) != ad ||
                         Access::pd(*srq) != pd || srq->core() != rcq->core())) {
    return STATUS_INVALID_PARAMETER;
  }
  // The QP lives on the core of its CQs; completions never cross cores (DESIGN §1), so both
  // CQs must share that core.
  if (rcq->core() != icq->core()) return STATUS_INVALID_PARAMETER;
  if (im.qps >= l.max_qps) return STATUS_INSUFFICIENT_RESOURCES;

  NTSTATUS status = STATUS_SUCCESS;
  std::unique_ptr<Qp> owned(new (std::nothrow) Qp());
  if (!owned) return STATUS_INSUFFICIENT_RESOURCES;
  rc::SendQueue* sq = rc::SendQueue::create_at(Access::send_queue_storage(*owned), iq_depth, iq_sge,
                                               inline_size, &status);
  if (sq == nullptr) return status;
  Access::sq(*owned).reset(sq);
  std::unique_ptr<rc::ReceiveQueue> rq;
  if (srq == nullptr) {
    rq = rc::ReceiveQueue::create(rq_depth, rq_sge, &status);
    if (!rq) return status;
  }
  auto* op = new (std::nothrow) RequestOp();
  if (op == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
  Qp* qp = owned.release();
  init_header(*qp, Qp::kType, ad);
  Access::pd(*qp) = pd;
  Access::receive_cq(*qp) = rcq;
  Access::initiator_cq(*qp) = icq;
  Access::srq(*qp) = srq;
  Access::qp_context(*qp) = qp_context;
  Access::core(*qp) = rcq->core();
  Access::rq(*qp) = std::move(rq);
  op->adapter = ad;
  op->object = qp;
  op->create_completion = completion;
  op->context = context;
  rc::QpCreateParams& p = op->create;
  p.pd = pd->id();
  p.qp_context = qp_context;
  p.sq = Access::sq(*qp).get();
  p.rq = Access::rq(*qp).get();
  p.srq = srq != nullptr ? Access::srq(*srq).get() : nullptr;
  p.send_cq = Access::cq(*icq).get();
  p.recv_cq = Access::cq(*rcq).get();
  p.max_inbound_read_limit = l.max_read_limit;
  auto done = [](const CoreMessage& msg) {
    auto* o = static_cast<RequestOp*>(msg.done_ctx);
    Qp* q = static_cast<Qp*>(o->object);
    const dataplane::QpCreated* created = msg.result.get<dataplane::QpCreated>();
    NTSTATUS st = msg.result.status;
    if (st == STATUS_SUCCESS && created == nullptr) st = STATUS_INTERNAL_ERROR;  // no QPN back
    if (st == STATUS_SUCCESS) {
      Access::qpn(*q) = created->qpn;
      Access::created(*q) = true;
      o->create_completion(o->context, STATUS_SUCCESS, &q->header);
    } else {
      Adapter* owner = Access::adapter(*q);
      Pd* qpd = Access::pd(*q);
      Cq* r = Access::receive_cq(*q);
      Cq* i = Access::initiator_cq(*q);
      Srq* s = Access::srq(*q);
      impl_of(*owner).live_qps.erase(q);
      delete q;
      --impl_of(*owner).qps;
      release_child(r);
      release_child(i);
      release_child(s);
      release_child(qpd);
      o->create_completion(o->context, st, nullptr);
    }
    delete o;
  };
  if (!im.call(qp->core(), &CoreRdma::on_create_qp,
               dataplane::QpCreate{im.rdma_on(qp->core()), &op->create}, done, op)) {
    delete qp;
    delete op;
    return STATUS_INSUFFICIENT_RESOURCES;
  }
  ++im.qps;
  im.live_qps.insert(qp);
  ++Access::children(*pd);
  ++Access::children(*rcq);
  ++Access::children(*icq);
  if (srq != nullptr) ++Access::children(*srq);
  if (out != nullptr) *out = nullptr;  // the QP comes with the CreateCompletion
  return STATUS_PENDING;
}

}  // namespace

NTSTATUS Pd::create_qp(Cq* receive_cq, Cq* initiator_cq, void* qp_context,
                       uint32_t receive_queue_depth, uint32_t initiator_queue_depth,
                       uint32_t max_receive_sge, uint32_t max_initiator_sge,
                       uint32_t inline_data_size, NdkCreateCompletion completion, void* context,
                       Qp** out) {
  ROCEDP_ON_CONTROL(this, create_qp(receive_cq, initiator_cq, qp_context, receive_queue_depth,
                                    initiator_queue_depth, max_receive_sge, max_initiator_sge,
                                    inline_data_size, completion, context, out));
  return create_qp_common(this, receive_cq, initiator_cq, nullptr, qp_context, receive_queue_depth,
                          initiator_queue_depth, max_receive_sge, max_initiator_sge,
                          inline_data_size, completion, context, out);
}

NTSTATUS Pd::create_qp_with_srq(Cq* receive_cq, Cq* initiator_cq, Srq* srq, void* qp_context,
                                uint32_t initiator_queue_depth, uint32_t max_initiator_sge,
                                uint32_t inline_data_size, NdkCreateCompletion completion,
                                void* context, Qp** out) {
  ROCEDP_ON_CONTROL(
      this, create_qp_with_srq(receive_cq, initiator_cq, srq, qp_context, initiator_queue_depth,
                               max_initiator_sge, inline_data_size, completion, context, out));
  if (srq == nullptr || srq->header.object_type != NdkObjectType::kSrq)
    return STATUS_INVALID_PARAMETER;
  return create_qp_common(this, receive_cq, initiator_cq, srq, qp_context, 0, initiator_queue_depth,
                          0, max_initiator_sge, inline_data_size, completion, context, out);
}

NTSTATUS Pd::create_mw(NdkCreateCompletion, void*, Mw** out) {
  ROCEDP_ON_CONTROL(this, create_mw(nullptr, nullptr, out));
  if (out == nullptr || closing) return STATUS_INVALID_PARAMETER;
  Adapter::Impl& im = impl_of(*adapter);
  if (im.mrs_open >= im.setup.limits.max_mrs) return STATUS_INSUFFICIENT_RESOURCES;
  Mw* mw = new (std::nothrow) Mw();
  if (mw == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
  const NTSTATUS st = im.mrs->create_window(id(), &Access::token(*mw));
  if (st != STATUS_SUCCESS) {
    delete mw;
    return st;
  }
  init_header(*mw, Mw::kType, adapter);
  Access::pd(*mw) = this;
  ++im.mrs_open;
  ++children;
  *out = mw;
  return STATUS_SUCCESS;
}

NTSTATUS Pd::get_privileged_memory_region_token(uint32_t* token) {
  ROCEDP_ON_CONTROL(this, get_privileged_memory_region_token(token));
  if (token == nullptr || closing) return STATUS_INVALID_PARAMETER;
  if (privileged_token_ == 0) {
    const NTSTATUS st = impl_of(*adapter).mrs->register_privileged(id(), &privileged_token_);
    if (st != STATUS_SUCCESS) return st;
  }
  *token = privileged_token_;
  return STATUS_SUCCESS;
}

NTSTATUS Mw::close(NdkCloseCompletion completion, void* context) {
  ROCEDP_ON_CONTROL(this, close(completion, context));
  if (closing) return STATUS_INVALID_PARAMETER;
  Adapter::Impl& im = impl_of(*adapter);
  if (!rings_have_room(im)) return STATUS_INSUFFICIENT_RESOURCES;
  // The token stops working at once; the window's slot is freed now (its generation moves on,
  // so the old token can never match again), and the close completes once every core let go.
  (void)im.mrs->deregister(token_);
  token_ = 0;
  closing = true;
  close_completion = completion;
  close_context = context;
  (void)start_barrier(this, &barriers_, nullptr, nullptr);
  return STATUS_PENDING;
}

NTSTATUS Pd::close(NdkCloseCompletion completion, void* context) {
  ROCEDP_ON_CONTROL(this, close(completion, context));
  if (closing) return STATUS_INVALID_PARAMETER;
  closing = true;
  close_completion = completion;
  close_context = context;
  if (children != 0) return STATUS_PENDING;
  Adapter* ad = adapter;
  close_completion = nullptr;  // inline success: no callback (NDK)
  finish_close(this);
  (void)ad;
  return STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// MR

NTSTATUS Mr::register_mr(const void* address, uint64_t length, uint32_t mr_flags,
                         NdkRequestCompletion, void*) {
  ROCEDP_ON_CONTROL(this, register_mr(address, length, mr_flags, nullptr, nullptr));
  if (registered_ || fast_register_ || closing) return STATUS_INVALID_PARAMETER;
  rc::MrTokens tokens;
  const NTSTATUS st =
      impl_of(*adapter).mrs->register_mr(pd_->id(), address, length, mr_flags, &tokens);
  if (st != STATUS_SUCCESS) return st;
  registered_ = true;
  local_token_ = tokens.local;
  remote_token_ = tokens.remote;
  return STATUS_SUCCESS;
}

namespace {

// A deregistration's barrier: the tokens stopped working in the table; every polling core
// answers a request once, which it runs between two loop iterations, so no packet it checked
// against the old region is still being copied. After the last answer nothing touches the
// memory again and the RequestCompletion / CloseCompletion runs (control thread).
struct MrBarrier {
  NdkObjectBase* object = nullptr;  // an Mr or an Mw
  uint32_t* counter = nullptr;      // its barriers_
  uint32_t remaining = 0;
  NdkRequestCompletion request = nullptr;
  void* request_context = nullptr;
};

void barrier_run(const dataplane::NoArgs&, CoreResult& result, void*) {
  result.status = STATUS_SUCCESS;
}

void barrier_done(const CoreMessage& msg) {
  auto* b = static_cast<MrBarrier*>(msg.done_ctx);
  if (--b->remaining != 0) return;
  NdkObjectBase* object = b->object;
  uint32_t* counter = b->counter;
  const NdkRequestCompletion cb = b->request;
  void* ctx = b->request_context;
  delete b;
  --*counter;
  if (cb != nullptr) cb(ctx, STATUS_SUCCESS);
  if (Access::closing(*object) && *counter == 0) finish_close(object);
}

bool rings_have_room(Adapter::Impl& im) {
  for (uint32_t i = 0; i < im.rdma.size(); ++i)
    if (im.setup.channels[i]->in_flight() >= im.setup.channels[i]->capacity()) return false;
  return true;
}

// Starts the barrier on every core, all or none: false (nothing posted) if a core's ring is
// full.
bool start_barrier(NdkObjectBase* object, uint32_t* counter, NdkRequestCompletion cb, void* ctx) {
  Adapter::Impl& im = impl_of(*Access::adapter(*object));
  const auto n = static_cast<uint32_t>(im.rdma.size());
  if (!rings_have_room(im)) return false;
  auto* b = new (std::nothrow) MrBarrier{object, counter, n, cb, ctx};
  if (b == nullptr) return false;
  ++*counter;
  for (uint32_t i = 0; i < n; ++i) {
    // Room was checked above and only this thread posts control requests.
    (void)im.call(i, &barrier_run, dataplane::NoArgs{}, &barrier_done, b);
  }
  return true;
}

}  // namespace

NTSTATUS Mr::deregister_mr(NdkRequestCompletion completion, void* context) {
  ROCEDP_ON_CONTROL(this, deregister_mr(completion, context));
  if (!registered_ || completion == nullptr || closing) return STATUS_INVALID_PARAMETER;
  Adapter::Impl& im = impl_of(*adapter);
  for (uint32_t i = 0; i < im.rdma.size(); ++i)
    if (im.setup.channels[i]->in_flight() >= im.setup.channels[i]->capacity())
      return STATUS_INSUFFICIENT_RESOURCES;
  // The tokens stop working at once: every later check on every core fails.
  const NTSTATUS st = im.mrs->deregister(local_token_);
  registered_ = false;
  local_token_ = remote_token_ = 0;
  if (st != STATUS_SUCCESS) return st;
  if (!start_barrier(this, &barriers_, completion, context)) return STATUS_INSUFFICIENT_RESOURCES;
  return STATUS_PENDING;
}

NTSTATUS Mr::initialize_fast_register_mr(uint32_t page_count, bool allow_remote_access,
                                         NdkRequestCompletion, void*) {
  ROCEDP_ON_CONTROL(this,
                    initialize_fast_register_mr(page_count, allow_remote_access, nullptr, nullptr));
  if (!fast_register_ || registered_ || closing) return STATUS_INVALID_PARAMETER;
  rc::MrTokens tokens;
  const NTSTATUS st = impl_of(*adapter).mrs->create_fast_register(pd_->id(), page_count,
                                                                  allow_remote_access, &tokens);
  if (st != STATUS_SUCCESS) return st;
  registered_ = true;
  local_token_ = tokens.local;
  remote_token_ = tokens.remote;
  return STATUS_SUCCESS;
}

NTSTATUS Mr::close(NdkCloseCompletion completion, void* context) {
  ROCEDP_ON_CONTROL(this, close(completion, context));
  if (closing) return STATUS_INVALID_PARAMETER;
  Adapter::Impl& im = impl_of(*adapter);
  if (registered_) {
    for (uint32_t i = 0; i < im.rdma.size(); ++i)
      if (im.setup.channels[i]->in_flight() >= im.setup.channels[i]->capacity())
        return STATUS_INSUFFICIENT_RESOURCES;
    (void)im.mrs->deregister(local_token_);
    registered_ = false;
    local_token_ = remote_token_ = 0;
    // Room was checked: the barrier starts (the cores' rings only drain meanwhile).
    (void)start_barrier(this, &barriers_, nullptr, nullptr);
  }
  closing = true;
  close_completion = completion;
  close_context = context;
  if (barriers_ != 0) return STATUS_PENDING;  // CloseCompletion once the cores let go
  close_completion = nullptr;                 // inline success: no callback (NDK)
  finish_close(this);
  return STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// CQ

uint32_t Cq::get_results(NdkResult* results, uint32_t n) {
  return cq_->get_results(results, n);
}
uint32_t Cq::get_results_ex(NdkResultEx* results, uint32_t n) {
  return cq_->get_results_ex(results, n);
}
void Cq::arm(NdkCqNotifyType type) {
  cq_->arm(type);
}
uint32_t Cq::depth() const {
  return cq_->depth();
}
bool Cq::overrun() const {
  return cq_->overrun();
}

NTSTATUS Cq::resize(uint32_t depth, NdkRequestCompletion completion, void* context) {
  ROCEDP_ON_CONTROL(this, resize(depth, completion, context));
  Adapter::Impl& im = impl_of(*adapter);
  if (completion == nullptr || depth == 0 || depth > im.setup.limits.max_cq_depth || closing) {
    return STATUS_INVALID_PARAMETER;
  }
  RequestOp* op = new_request_op(completion, context);
  if (op == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
  op->object = this;
  return post_request(im, core_, &CoreRdma::on_resize_cq, dataplane::CqResize{cq_.get(), depth},
                      op);
}

NTSTATUS Cq::control_interrupt_moderation(uint32_t, uint32_t) {
  return STATUS_NOT_SUPPORTED;
}

NTSTATUS Cq::close(NdkCloseCompletion completion, void* context) {
  ROCEDP_ON_CONTROL(this, close(completion, context));
  if (closing) return STATUS_INVALID_PARAMETER;
  closing = true;
  close_completion = completion;
  close_context = context;
  if (children == 0) finish_close(this);
  return STATUS_PENDING;
}

// ---------------------------------------------------------------------------------------------
// SRQ

namespace {

// A post's scatter/gather list into its WQE. One entry is the common post and gets a plain
// 16-byte copy: the general loop compiles to `rep movsq`, whose start-up cost more than the rest
// of Qp::write in a profile of a 64 B WRITE stream (n <= kMaxWqeSge, checked by the caller).
inline void copy_sges(NdkSge* to, const NdkSge* from, uint32_t n) {
  if (n == 1) [[likely]] {
    to[0] = from[0];
    return;
  }
  for (uint32_t i = 0; i < n; ++i) to[i] = from[i];
}

// An NDK scatter/gather list a work request can carry.
bool valid_sgl(const NdkSge* sgl, uint32_t n) {
  return n <= rc::kMaxWqeSge && (n == 0 || sgl != nullptr);
}

// A receive request from an NDK scatter/gather list. False for a bad list.
bool init_receive(rc::RecvWqe& w, void* request_context, const NdkSge* sgl, uint32_t n) {
  if (!valid_sgl(sgl, n)) return false;
  w.request_context = request_context;
  w.sge_count = n;
  copy_sges(w.sge, sgl, n);
  return true;
}

}  // namespace

NTSTATUS Srq::receive(void* request_context, const NdkSge* sgl, uint32_t n_sge) {
  rc::RecvWqe w;
  if (!init_receive(w, request_context, sgl, n_sge)) return STATUS_INVALID_PARAMETER;
  return srq_->post(w);
}

NTSTATUS Srq::modify(uint32_t depth, uint32_t notify_threshold, NdkRequestCompletion completion,
                     void* context) {
  ROCEDP_ON_CONTROL(this, modify(depth, notify_threshold, completion, context));
  if (completion == nullptr || closing) return STATUS_INVALID_PARAMETER;
  RequestOp* op = new_request_op(completion, context);
  if (op == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
  // The core works on the SRQ itself: a close meanwhile waits for it (CloseCompletion after this
  // request's completion, which is then STATUS_CANCELLED).
  op->object = this;
  op->holds_child = true;
  ++children;
  const NTSTATUS st = post_request(impl_of(*adapter), core_, &CoreRdma::on_modify_srq,
                                   dataplane::SrqModify{srq_.get(), depth, notify_threshold}, op);
  if (st != STATUS_PENDING) --children;
  return st;
}

NTSTATUS Srq::close(NdkCloseCompletion completion, void* context) {
  ROCEDP_ON_CONTROL(this, close(completion, context));
  if (closing) return STATUS_INVALID_PARAMETER;
  closing = true;
  close_completion = completion;
  close_context = context;
  if (children != 0) return STATUS_PENDING;
  close_completion = nullptr;  // inline success: no callback
  finish_close(this);
  return STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// QP: posts

namespace {

// A send-queue post refused before it reaches its queue: the requests deferred before it are
// handed on all the same, as when the queue itself refuses one (NDK: an inline post failure
// flushes earlier deferred requests).
NTSTATUS refuse_post(rc::SendQueue& sq) {
  sq.flush_deferred();
  return STATUS_INVALID_PARAMETER;
}

// The fields every send-queue request shares. False for a bad scatter/gather list.
bool init_send(rc::SendWqe& w, rc::SendOpcode opcode, void* request_context, const NdkSge* sgl,
               uint32_t n, uint32_t flags) {
  if (!valid_sgl(sgl, n)) return false;
  w.sge_count = static_cast<uint8_t>(n);
  copy_sges(w.sge, sgl, n);
  w.request_context = request_context;
  w.flags = flags;
  w.opcode = opcode;
  return true;
}

// An INLINE request: staged whole, then post() copies the data from the caller's SGEs. Out of
// line, so that the plain post's path needs no stack frame for the staged request.
template <typename Fill>
[[gnu::noinline]] NTSTATUS post_inline(rc::SendQueue& sq, rc::SendOpcode opcode,
                                       void* request_context, const NdkSge* sgl, uint32_t n,
                                       uint32_t flags, Fill fill) {
  rc::SendWqe w;
  if (!init_send(w, opcode, request_context, sgl, n, flags)) return refuse_post(sq);
  fill(w);
  return sq.post(w);
}

// A send-queue request written straight into its ring slot: with at most one SGE built in
// registers and stored as one line (SendQueue::post_head), otherwise field by field
// (SendQueue::claim_in_place); INLINE requests go through post_inline. `fill` writes the
// opcode's own fields (into a SendWqeHead or a SendWqe).
template <typename Fill>
NTSTATUS post_in_place(rc::SendQueue& sq, rc::SendOpcode opcode, void* request_context,
                       const NdkSge* sgl, uint32_t n, uint32_t flags, Fill fill) {
  if ((flags & NDK_OP_FLAG_INLINE) != 0) [[unlikely]]
    return post_inline(sq, opcode, request_context, sgl, n, flags, fill);
  if (!valid_sgl(sgl, n)) return refuse_post(sq);  // before a slot is claimed
  if (n <= 1) [[likely]] {
    rc::SendWqeHead h;
    h.request_context = request_context;
    h.flags = flags;
    h.opcode = opcode;
    fill(h);
    return sq.post_head(h, sgl, n);
  }
  NTSTATUS status = STATUS_SUCCESS;
  rc::SendWqe* w = sq.claim_in_place(n, &status);
  if (w == nullptr) return status;
  init_send(*w, opcode, request_context, sgl, n, flags);
  fill(*w);
  sq.commit_in_place(flags);
  return STATUS_SUCCESS;
}

}  // namespace

// ---- QP: the object and its send queue in one allocation ----

namespace {
constexpr std::size_t kSendQueueOffset =
    (sizeof(Qp) + alignof(rc::SendQueue) - 1) / alignof(rc::SendQueue) * alignof(rc::SendQueue);
constexpr std::align_val_t kQpAlign{alignof(rc::SendQueue)};
}  // namespace

void* Qp::operator new(std::size_t size, const std::nothrow_t& tag) noexcept {
  assert(size == sizeof(Qp));
  (void)size;
  return ::operator new(kSendQueueOffset + sizeof(rc::SendQueue), kQpAlign, tag);
}
void Qp::operator delete(void* p) noexcept {
  ::operator delete(p, kQpAlign);
}
void Qp::operator delete(void* p, const std::nothrow_t& /*tag*/) noexcept {
  ::operator delete(p, kQpAlign);
}
void Qp::SendQueueInPlace::operator()(rc::SendQueue* q) const {
  q->~SendQueue();
}
void* Qp::send_queue_storage() {
  return reinterpret_cast<char*>(this) + kSendQueueOffset;
}
const void* Qp::send_queue_storage() const {
  return reinterpret_cast<const char*>(this) + kSendQueueOffset;
}

NTSTATUS Qp::post_send(const void* wqe) {
  return send_queue().post(*static_cast<const rc::SendWqe*>(wqe));
}

void Qp::prefetch_post(uint32_t n) {
  send_queue().prefetch_post(n);
}

std::string_view Qp::error_reason() const {
  return rc::qp_error_reason_name(static_cast<rc::QpErrorReason>(send_queue().error_reason()));
}

NTSTATUS Qp::send(void* request_context, const NdkSge* sgl, uint32_t n_sge, uint32_t flags) {
  return post_in_place(send_queue(), rc::SendOpcode::kSend, request_context, sgl, n_sge, flags,
                       [](auto&) {});
}

NTSTATUS Qp::send_with_immediate(void* request_context, const NdkSge* sgl, uint32_t n_sge,
                                 uint32_t immediate, uint32_t flags) {
  return post_in_place(send_queue(), rc::SendOpcode::kSend, request_context, sgl, n_sge, flags,
                       [immediate](auto& w) {
                         w.has_immediate = true;
                         w.immediate = immediate;
                       });
}

NTSTATUS Qp::send_and_invalidate(void* request_context, const NdkSge* sgl, uint32_t n_sge,
                                 uint32_t remote_token, uint32_t flags) {
  return post_in_place(send_queue(), rc::SendOpcode::kSendAndInvalidate, request_context, sgl,
                       n_sge, flags,
                       [remote_token](auto& w) { w.invalidate_token = remote_token; });
}

NTSTATUS Qp::receive(void* request_context, const NdkSge* sgl, uint32_t n_sge) {
  rc::RecvWqe w;
  if (rq_ == nullptr || !init_receive(w, request_context, sgl, n_sge))
    return STATUS_INVALID_PARAMETER;
  return rq_->post(w);
}

NTSTATUS Qp::write(void* request_context, const NdkSge* sgl, uint32_t n_sge,
                   uint64_t remote_address, uint32_t remote_token, uint32_t flags) {
  return post_in_place(send_queue(), rc::SendOpcode::kWrite, request_context, sgl, n_sge, flags,
                       [remote_address, remote_token](auto& w) {
                         w.remote_address = remote_address;
                         w.remote_token = remote_token;
                       });
}

NTSTATUS Qp::write_with_immediate(void* request_context, const NdkSge* sgl, uint32_t n_sge,
                                  uint64_t remote_address, uint32_t remote_token,
                                  uint32_t immediate, uint32_t flags) {
  return post_in_place(send_queue(), rc::SendOpcode::kWrite, request_context, sgl, n_sge, flags,
                       [remote_address, remote_token, immediate](auto& w) {
                         w.remote_address = remote_address;
                         w.remote_token = remote_token;
                         w.has_immediate = true;
                         w.immediate = immediate;
                       });
}

NTSTATUS Qp::read(void* request_context, const NdkSge* sgl, uint32_t n_sge, uint64_t remote_address,
                  uint32_t remote_token, uint32_t flags) {
  if ((flags & NDK_OP_FLAG_INLINE) != 0) return refuse_post(send_queue());
  return post_in_place(send_queue(), rc::SendOpcode::kRead, request_context, sgl, n_sge, flags,
                       [remote_address, remote_token](auto& w) {
                         w.remote_address = remote_address;
                         w.remote_token = remote_token;
                       });
}

NTSTATUS Qp::compare_swap(void* request_context, const NdkSge& result, uint64_t remote_address,
                          uint32_t remote_token, uint64_t compare, uint64_t swap, uint32_t flags) {
  rc::SendWqe w;
  if (result.length != 8 || (flags & NDK_OP_FLAG_INLINE) != 0) return refuse_post(send_queue());
  init_send(w, rc::SendOpcode::kCompareSwap, request_context, &result, 1, flags);
  w.remote_address = remote_address;
  w.remote_token = remote_token;
  w.compare = compare;
  w.swap_or_add = swap;
  return post_send(&w);
}

NTSTATUS Qp::fetch_add(void* request_context, const NdkSge& result, uint64_t remote_address,
                       uint32_t remote_token, uint64_t add, uint32_t flags) {
  rc::SendWqe w;
  if (result.length != 8 || (flags & NDK_OP_FLAG_INLINE) != 0) return refuse_post(send_queue());
  init_send(w, rc::SendOpcode::kFetchAdd, request_context, &result, 1, flags);
  w.remote_address = remote_address;
  w.remote_token = remote_token;
  w.swap_or_add = add;
  return post_send(&w);
}

NTSTATUS Qp::fast_register(void* request_context, Mr* mr, uint64_t address, uint64_t length,
                           uint32_t mr_flags, uint32_t flags) {
  if (mr == nullptr) return refuse_post(send_queue());
  rc::SendWqe w;
  w.request_context = request_context;
  w.flags = flags & ~NDK_OP_FLAG_INLINE;
  w.opcode = rc::SendOpcode::kFastRegister;
  w.local_token = mr->get_local_token();
  w.fr_address = address;
  w.fr_length = length;
  w.fr_access = mr_flags;
  return post_send(&w);
}

NTSTATUS Qp::invalidate(void* request_context, Mr* mr, uint32_t flags) {
  if (mr == nullptr) return refuse_post(send_queue());
  rc::SendWqe w;
  w.request_context = request_context;
  w.flags = flags & ~NDK_OP_FLAG_INLINE;
  w.opcode = rc::SendOpcode::kInvalidate;
  w.local_token = mr->get_local_token();
  return post_send(&w);
}

NTSTATUS Qp::invalidate(void* request_context, Mw* mw, uint32_t flags) {
  if (mw == nullptr) return refuse_post(send_queue());
  rc::SendWqe w;
  w.request_context = request_context;
  w.flags = flags & ~NDK_OP_FLAG_INLINE;
  w.opcode = rc::SendOpcode::kInvalidate;
  w.local_token = mw->get_remote_token();
  return post_send(&w);
}

NTSTATUS Qp::bind(void* request_context, Mr* mr, Mw* mw, const void* address, uint64_t length,
                  uint32_t mr_flags, uint32_t flags) {
  if (mr == nullptr || mw == nullptr) return refuse_post(send_queue());
  rc::SendWqe w;
  w.request_context = request_context;
  w.flags = flags & ~NDK_OP_FLAG_INLINE;
  w.opcode = rc::SendOpcode::kBind;
  w.local_token = mw->get_remote_token();
  w.bind_mr_token = mr->get_local_token();
  w.fr_address = reinterpret_cast<uintptr_t>(address);
  w.fr_length = length;
  w.fr_access = mr_flags;
  return post_send(&w);
}

// ---------------------------------------------------------------------------------------------
// QP: control requests

void Qp::flush() {
  ROCEDP_ON_CONTROL_VOID(this, flush());
  if (!created_ || closing) return;
  // NdkFlush is VOID: a full ring only delays it (the consumer sees it as "not flushed yet").
  Adapter::Impl& im = impl_of(*adapter);
  (void)im.call(core_, &CoreRdma::on_flush_qp, dataplane::QpTarget{im.rdma_on(core_), qpn_},
                nullptr, nullptr);
}

NTSTATUS Qp::connect(const NdkQpConnectParams& params, NdkRequestCompletion completion,
                     void* context) {
  ROCEDP_ON_CONTROL(this, connect(params, completion, context));
  Adapter::Impl& im = impl_of(*adapter);
  if (completion == nullptr || !created_ || closing || params.path_mtu > im.max_path_mtu ||
      params.inbound_read_limit > im.setup.limits.max_read_limit ||
      params.outbound_read_limit > im.setup.limits.max_read_limit) {
    return STATUS_INVALID_PARAMETER;
  }
  // The peer: an IPv4 address, or an IPv6 one (from the port's IPv6 address), or IPv4-mapped.
  wire::Ipv6Addr remote6{};
  std::memcpy(remote6.data(), params.remote_ip6, 16);
  uint32_t remote_ip = params.remote_ip;
  std::optional<config::Ipv6Address> local6;
  if (remote_ip == 0 && remote6 != wire::Ipv6Addr{} && !wire::is_ipv4_mapped(remote6, &remote_ip)) {
    local6 = im.setup.port->address6();
    if (!local6) return STATUS_INVALID_PARAMETER;
  }
  RequestOp* op = new_request_op(completion, context);
  if (op == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
  op->object = this;
  connect_called_ = true;
  rc::QpConnectParams& c = op->connect;
  c.report_remote_writes = report_remote_writes_;
  c.remote_qpn = params.remote_qpn;
  c.local_ip = im.setup.port->address().value;
  c.remote_ip = remote_ip;
  if (local6) {
    c.ipv6 = true;
    c.local_ip6 = local6->bytes;
    std::memcpy(c.remote_ip6.data(), params.remote_ip6, 16);
  }
  const config::MacAddress mac = im.setup.port->mac();
  std::memcpy(c.local_mac.data(), mac.bytes.data(), 6);
  std::memcpy(c.remote_mac.data(), params.remote_mac, 6);
  c.path_mtu = params.path_mtu;
  c.sq_psn = params.local_psn;
  c.rq_psn = params.remote_psn;
  c.retry_count = params.retry_count;
  c.rnr_retry = params.rnr_retry;
  c.local_ack_timeout = params.local_ack_timeout;
  c.min_rnr_timer = params.min_rnr_timer;
  c.inbound_read_limit = params.inbound_read_limit;
  c.outbound_read_limit = params.outbound_read_limit;
  const pmd::Port& port = *im.setup.port;
  c.tos = params.traffic_class != 0 ? params.traffic_class : static_cast<uint8_t>(port.dscp() << 2);
  // An ECN port's QPs send ECT(0) unless the consumer chose the ECN bits (rc/congestion.hpp).
  if (port.ecn() && (c.tos & wire::kEcnMask) == 0) c.tos |= wire::kEcnEct0;
  c.cnp_tos = static_cast<uint8_t>(port.cnp_dscp() << 2);
  c.line_rate_mbps = port.link().speed_mbps;
  if (port.tags_frames()) c.vlan_tag_bytes = wire::kVlanTagLen;
  c.dcqcn = &port.dcqcn();
  return post_request(im, core_, &CoreRdma::on_connect_qp,
                      dataplane::QpConnect{im.rdma_on(core_), qpn_, &op->connect}, op);
}

NTSTATUS Qp::report_remote_writes() {
  ROCEDP_ON_CONTROL(this, report_remote_writes());
  if (connect_called_) return STATUS_INVALID_DEVICE_STATE;
  report_remote_writes_ = true;
  return STATUS_SUCCESS;
}

namespace ndk_detail {

// The core answers STATUS_PENDING while the flushed requests are still being completed; the
// close goes round again until the core destroyed the QP.
void close_qp_done(const CoreMessage& msg) {
  auto* q = static_cast<Qp*>(msg.done_ctx);
  if (msg.result.status == STATUS_PENDING) {
    post_close_qp(q);
    return;
  }
  Adapter* owner = Access::adapter(*q);
  Pd* qpd = Access::pd(*q);
  Cq* r = Access::receive_cq(*q);
  Cq* i = Access::initiator_cq(*q);
  Srq* s = Access::srq(*q);
  const NdkCloseCompletion cb = Access::close_completion(*q);
  void* ctx = Access::close_context(*q);
  impl_of(*owner).live_qps.erase(q);
  delete q;  // the core destroyed its side: nobody reads the queues any more
  --impl_of(*owner).qps;
  fire_close(cb, ctx);
  release_child(r);
  release_child(i);
  release_child(s);
  release_child(qpd);
}

void post_close_qp(Qp* q) {
  Adapter::Impl& im = impl_of(*Access::adapter(*q));
  if (!im.call(q->core(), &CoreRdma::on_close_qp,
               dataplane::QpTarget{im.rdma_on(q->core()), q->qpn()}, &close_qp_done, q)) {
    im.retry_close.push_back(q);  // poll_control tries again
  }
}

}  // namespace ndk_detail

NTSTATUS Qp::close(NdkCloseCompletion completion, void* context) {
  ROCEDP_ON_CONTROL(this, close(completion, context));
  if (closing || !created_) return STATUS_INVALID_PARAMETER;
  closing = true;
  close_completion = completion;
  close_context = context;
  sq_->set_connected(false);  // posts fail from now on (the core flushes what is queued)
  post_close_qp(this);
  return STATUS_PENDING;
}

}  // namespace rocedp
