// The NDK object layer on the control thread (include/rocedp/adapter.hpp): object bookkeeping,
// limits, the parent/child close protocol, and the requests that carry CQ/QP/SRQ work to the
// owning polling core over its CoreChannel (dataplane/core_rdma.hpp). Everything here runs on
// the control thread except the post functions and the CQ consumer calls, which only touch the
// lock-free rings of their queue.

#include <algorithm>
#include <cassert>
#include <cstring>
#include <new>

#include "control/ndk_internal.hpp"
#include "dataplane/core_channel.hpp"
#include "dataplane/core_rdma.hpp"
#include "dataplane/polling_core.hpp"
#include "dataplane/qpn_map.hpp"
#include "dataplane/rc/completion_queue.hpp"
#include "dataplane/rc/memory_region.hpp"
#include "dataplane/rc/queue_pair.hpp"
#include "dataplane/rc/work_queue.hpp"
#include "pmd/packet_pool.hpp"
#include "pmd/port.hpp"
#include "rocedp/adapter.hpp"

namespace rocedp {

using dataplane::CoreMessage;
using dataplane::CoreRdma;

namespace {
// Path MTU the port carries (DESIGN §4: 1024 on a 1500-byte Ethernet MTU, as Linux does):
// the largest IB MTU whose packet (payload + 14 Eth + 20 IP + 8 UDP + 12 BTH + 16 RETH + 4 ICRC
// + 4 ImmDt) fits.
uint32_t max_path_mtu_for(uint16_t eth_mtu) {
  uint32_t mtu = 4096;
  while (mtu > 256 && mtu + 20 + 8 + 12 + 16 + 4 + 4 > eth_mtu) mtu /= 2;
  return mtu;
}
constexpr uint32_t kDefaultVendorId = 0x000000;  // no OUI of our own
constexpr uint32_t kControlBatch = 64;
}  // namespace

// ---------------------------------------------------------------------------------------------
// Lifetime: children, close completion.

namespace ndk_detail {

void init_header(NdkObjectBase& o, NdkObjectType type, Adapter* adapter) {
  o.header.version = kNdkVersion;
  o.header.object_type = type;
  Access::adapter(o) = adapter;
}

/// A child of `parent` is gone: a parent waiting in close finishes when it was the last.
void release_child(NdkObjectBase* parent) {
  if (parent == nullptr) return;
  --Access::children(*parent);
  if (Access::closing(*parent) && Access::children(*parent) == 0) finish_close(parent);
}

/// Fires the close completion (if any) after the object is gone. The callback may close more.
void fire_close(NdkCloseCompletion cb, void* ctx) {
  if (cb != nullptr) cb(ctx);
}

}  // namespace ndk_detail
using namespace ndk_detail;

// ---------------------------------------------------------------------------------------------
// Adapter

Adapter::Adapter() : impl_(std::make_unique<Impl>()) {
  init_header(*this, kType, this);
}
Adapter::~Adapter() {
  *impl_->alive = false;
}

NTSTATUS open_adapter_on(const AdapterSetup& setup, Adapter** out) {
  if (out == nullptr || setup.port == nullptr || setup.pool == nullptr || setup.cores.empty() ||
      setup.cores.size() != setup.channels.size() || setup.cores.size() > dataplane::kMaxQpnCores) {
    return STATUS_INVALID_PARAMETER;
  }
  std::unique_ptr<Adapter> a(Access::create());
  if (!a) return STATUS_INSUFFICIENT_RESOURCES;
  Adapter::Impl& im = impl_of(*a);
  im.setup = setup;
  im.max_path_mtu = max_path_mtu_for(setup.port->mtu() != 0 ? setup.port->mtu() : 1500);
  const config::LimitsConfig& l = setup.limits;
  im.mrs = rc::MemoryRegionTable::create(std::min(l.max_mrs, rc::kMrMaxEntries - 1),
                                         l.max_registration_size, l.frmr_page_count);
  if (!im.mrs) return STATUS_INSUFFICIENT_RESOURCES;
  for (size_t i = 0; i < setup.cores.size(); ++i) {
    rc::RcEngineConfig ec;
    ec.core = setup.cores[i]->index();
    ec.max_qps = std::min<uint32_t>(l.max_qps, dataplane::kQpnLocalMask - 1);
    im.rdma.push_back(std::make_unique<CoreRdma>(*setup.cores[i], setup.port->id(),
                                                 setup.pool->get(), ec, im.mrs.get(), l.max_cqs));
  }
  // Installation travels on each core's ring; every later request queues behind it.
  for (uint32_t i = 0; i < im.rdma.size(); ++i) {
    if (!im.call(i, &CoreRdma::on_install, dataplane::RdmaTarget{im.rdma_on(i)}, nullptr, nullptr))
      return STATUS_INSUFFICIENT_RESOURCES;
  }
  *out = a.release();
  return STATUS_SUCCESS;
}

NTSTATUS Adapter::query_adapter_info(NdkAdapterInfo* info, size_t* size) const {
  if (info == nullptr || size == nullptr) return STATUS_INVALID_PARAMETER;
  if (*size < sizeof(NdkAdapterInfo)) {
    *size = sizeof(NdkAdapterInfo);
    return STATUS_BUFFER_TOO_SMALL;
  }
  const config::LimitsConfig& l = impl_->setup.limits;
  NdkAdapterInfo i;
  i.version = kNdkVersion;
  i.vendor_id = impl_->setup.vendor_id != 0 ? impl_->setup.vendor_id : kDefaultVendorId;
  i.device_id = impl_->setup.device_id;
  i.max_registration_size = static_cast<size_t>(l.max_registration_size);
  i.max_window_size =
      static_cast<size_t>(l.max_registration_size);  // a window spans at most a region
  i.frmr_page_count = l.frmr_page_count;
  const uint32_t sge = std::min<uint32_t>(l.max_sge, rc::kMaxWqeSge);
  i.max_initiator_request_sge = sge;
  i.max_receive_request_sge = sge;
  i.max_read_request_sge = sge;
  i.max_transfer_length =
      static_cast<uint32_t>(std::min<uint64_t>(l.max_transfer_length, rc::kMaxMessageBytes));
  i.max_inline_data_size = std::min<uint32_t>(l.max_inline_data, rc::kMaxInlineData);
  i.max_inbound_read_limit = l.max_read_limit;
  i.max_outbound_read_limit = l.max_read_limit;
  i.max_receive_queue_depth = l.max_qp_depth;
  i.max_initiator_queue_depth = l.max_qp_depth;
  i.max_srq_depth = l.max_srq_depth;
  i.max_cq_depth = l.max_cq_depth;
  i.large_request_threshold = impl_->max_path_mtu;  // above one packet, a request costs more
  i.max_caller_data = 56;   // IB CM REQ private data with the rdma_cm header (92 - 36)
  i.max_callee_data = 148;  // REP private data
  i.adapter_flags = NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED |
                    NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED |
                    NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED | NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED;
  i.rdma_technology = NdkRdmaTechnology::kRoceV2;
  *info = i;
  *size = sizeof(NdkAdapterInfo);
  return STATUS_SUCCESS;
}

NTSTATUS Adapter::create_pd(NdkCreateCompletion, void*, Pd** out) {
  ROCEDP_ON_CONTROL(this, create_pd(nullptr, nullptr, out));
  if (out == nullptr || closing) return STATUS_INVALID_PARAMETER;
  if (impl_->pds >= impl_->setup.limits.max_pds) return STATUS_INSUFFICIENT_RESOURCES;
  Pd* pd = new (std::nothrow) Pd();
  if (pd == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
  init_header(*pd, Pd::kType, this);
  Access::id(*pd) = impl_->next_pd++;
  ++impl_->pds;
  ++children;
  *out = pd;
  return STATUS_SUCCESS;
}

NTSTATUS Adapter::create_cq(uint32_t depth, NdkCqNotificationCallback notification,
                            void* notification_context, uint32_t core_affinity,
                            NdkCreateCompletion completion, void* context, Cq** out) {
  ROCEDP_ON_CONTROL(this, create_cq(depth, notification, notification_context, core_affinity,
                                    completion, context, out));
  Impl& im = *impl_;
  if (closing || completion == nullptr || depth == 0 || depth > im.setup.limits.max_cq_depth ||
      core_affinity >= im.rdma.size()) {
    return STATUS_INVALID_PARAMETER;
  }
  if (im.cqs >= im.setup.limits.max_cqs) return STATUS_INSUFFICIENT_RESOURCES;
  rc::CqConfig cfg;
  cfg.depth = depth;
  cfg.max_cq_depth = im.setup.limits.max_cq_depth;
  cfg.notification = notification;
  cfg.notification_context = notification_context;
  cfg.allocator.allocate = impl_->cq_allocator.allocate;
  cfg.allocator.release = impl_->cq_allocator.release;
  cfg.allocator.context = impl_->cq_allocator.context;
  NTSTATUS status = STATUS_SUCCESS;
  auto ring = rc::CompletionQueue::create(cfg, &status);
  if (!ring) return status;
  Cq* cq = new (std::nothrow) Cq();
  auto* op = new (std::nothrow) RequestOp();
  if (cq == nullptr || op == nullptr) {
    delete cq;
    delete op;
    return STATUS_INSUFFICIENT_RESOURCES;
  }
  init_header(*cq, Cq::kType, this);
  Access::core(*cq) = core_affinity;
  Access::cq(*cq) = std::move(ring);
  op->adapter = this;
  op->object = cq;
  op->create_completion = completion;
  op->context = context;
  auto done = [](const CoreMessage& msg) {
    auto* o = static_cast<RequestOp*>(msg.done_ctx);
    Cq* c = static_cast<Cq*>(o->object);
    const auto st = msg.result.status;
    if (st == STATUS_SUCCESS && c->adapter->closing) {
      // The adapter was closed while this CreateCq was pending (NDKPI object lifetime): the
      // request completes STATUS_CANCELLED before the adapter's close. The core drops the CQ
      // first, then the completion runs and the adapter's close may proceed.
      auto detached = [](const CoreMessage& m) {
        auto* op2 = static_cast<RequestOp*>(m.done_ctx);
        Cq* cq2 = static_cast<Cq*>(op2->object);
        Adapter* ad = cq2->adapter;
        delete cq2;
        --ad->impl_->cqs;
        op2->create_completion(op2->context, STATUS_CANCELLED, nullptr);
        delete op2;
        release_child(ad);
      };
      if (c->adapter->impl_->call(
              c->core(), &CoreRdma::on_detach_cq,
              dataplane::CqTarget{c->adapter->impl_->rdma_on(c->core()), Access::cq(*c).get()},
              detached, o))
        return;
      // A full ring at adapter close is a consumer bug (the control loop stopped polling); the
      // CQ stays attached and its memory is leaked rather than freed under the core.
      o->create_completion(o->context, STATUS_CANCELLED, nullptr);
      Adapter* ad = c->adapter;
      --ad->impl_->cqs;
      delete o;
      release_child(ad);
      return;
    }
    if (st == STATUS_SUCCESS) {
      Access::attached(*c) = true;
      o->create_completion(o->context, STATUS_SUCCESS, &c->header);
    } else {
      Adapter* ad = c->adapter;
      delete c;
      --ad->impl_->cqs;
      release_child(ad);
      o->create_completion(o->context, st, nullptr);
    }
    delete o;
  };
  if (!im.call(core_affinity, &CoreRdma::on_attach_cq,
               dataplane::CqTarget{im.rdma_on(core_affinity), Access::cq(*cq).get()}, done, op)) {
    delete cq;
    delete op;
    return STATUS_INSUFFICIENT_RESOURCES;
  }
  ++im.cqs;
  ++children;
  if (out != nullptr) *out = nullptr;  // the CQ comes with the CreateCompletion
  return STATUS_PENDING;
}

uint32_t Adapter::poll_control() {
  Impl& im = *impl_;
  // Whoever runs the control loop is the control thread; calls from other threads wait in the
  // inbox for it. One loop at a time (a second thread polling concurrently is a consumer bug).
  im.control_thread.store(std::this_thread::get_id(), std::memory_order_release);
#ifndef NDEBUG
  const bool was_polling = im.polling.exchange(true);
  assert(!was_polling && "Adapter::poll_control runs on one thread at a time");
  struct Clear {
    std::atomic<bool>* flag;
    std::shared_ptr<bool> alive;
    ~Clear() {
      if (*alive) flag->store(false);
    }
  } clear{&im.polling, im.alive};
#endif
  uint32_t n = 0;
  if (im.inbox_size.load(std::memory_order_acquire) != 0) {
    const std::shared_ptr<bool> live = im.alive;  // a handed-over call may close the adapter
    n = im.run_inbox();
    if (!*live) return n;
  }
  // A completion may close the adapter (which frees impl_): `alive` outlives it. No copy of
  // the channel list, so an idle control loop allocates nothing.
  const size_t n_channels = im.setup.channels.size();
  bool* alive = im.alive.get();
  std::shared_ptr<bool> keep;  // taken only when some completion is pending (rare)
  for (size_t i = 0; i < n_channels; ++i) {
    dataplane::CoreChannel* ch = im.setup.channels[i];
    if (ch->in_flight() == 0) continue;
    if (!keep) keep = im.alive;
    alive = keep.get();
    n += ch->poll_completions(kControlBatch);
    if (!*alive) return n;  // a completion closed the adapter
  }
  if (!closing && !im.retry_close.empty()) {
    std::vector<Qp*> again;
    again.swap(im.retry_close);
    for (Qp* q : again) post_close_qp(q);
  }
  return n;
}

NTSTATUS Adapter::build_lam(const void* address, size_t length, NdkRequestCompletion, void*,
                            NdkLogicalAddressMapping* lam, uint32_t* lam_size,
                            uint32_t* first_byte_offset) {
  const auto va = reinterpret_cast<uintptr_t>(address);
  if (address == nullptr || length == 0 || lam_size == nullptr || first_byte_offset == nullptr ||
      va + length < va || length > impl_->setup.limits.max_registration_size) {
    return STATUS_INVALID_PARAMETER;
  }
  constexpr uint64_t kPage = rc::kFrmrPageSize;
  const uint64_t first = va & ~(kPage - 1);
  const uint64_t pages = ((va + length - 1) & ~(kPage - 1)) / kPage - first / kPage + 1;
  const size_t need = ndk_lam_size(static_cast<uint32_t>(pages));
  if (lam == nullptr || *lam_size < need) {
    *lam_size = static_cast<uint32_t>(need);
    return STATUS_BUFFER_TOO_SMALL;
  }
  lam->adapter_page_count = static_cast<uint32_t>(pages);
  for (uint64_t p = 0; p < pages; ++p) lam->adapter_page_array[p] = first + p * kPage;
  *lam_size = static_cast<uint32_t>(need);
  *first_byte_offset = static_cast<uint32_t>(va - first);
  return STATUS_SUCCESS;
}

void Adapter::release_lam(NdkLogicalAddressMapping*) {}

uint32_t Adapter::core_count() const {
  return static_cast<uint32_t>(impl_->setup.cores.size());
}

void test_hooks::set_cq_ring_allocator(Adapter& adapter, const CqRingAllocatorHook& hook) {
  impl_of(adapter).cq_allocator = hook;
}
dataplane::CoreRdma& test_hooks::core_rdma(Adapter& adapter, uint32_t core) {
  return *impl_of(adapter).rdma.at(core);
}

void test_hooks::set_tx_tap(Adapter& adapter, void (*tap)(void*, const uint8_t*, size_t),
                            void* context) {
  for (auto& r : impl_of(adapter).rdma) r->set_tx_tap(tap, context);
}

NTSTATUS Adapter::close(NdkCloseCompletion completion, void* context) {
  ROCEDP_ON_CONTROL(this, close(completion, context));
  if (closing) return STATUS_INVALID_PARAMETER;
  closing = true;
  close_completion = completion;
  close_context = context;
  if (children == 0) finish_close(this);
  return STATUS_PENDING;
}

// ---------------------------------------------------------------------------------------------
// Close completion of each kind, once its children are gone.

namespace ndk_detail {

void finish_close(NdkObjectBase* object) {
  switch (object->header.object_type) {
    case NdkObjectType::kAdapter: {
      auto* a = static_cast<Adapter*>(object);
      Adapter::Impl& im = impl_of(*a);
      im.uninstalls_pending = static_cast<uint32_t>(im.rdma.size());
      auto done = [](const CoreMessage& msg) {
        auto* ad = static_cast<Adapter*>(msg.done_ctx);
        if (--impl_of(*ad).uninstalls_pending != 0) return;
        // Every core dropped the handler: nothing of this adapter runs any more.
        const NdkCloseCompletion cb = Access::close_completion(*ad);
        void* ctx = Access::close_context(*ad);
        delete ad;
        fire_close(cb, ctx);
      };
      for (uint32_t i = 0; i < im.rdma.size(); ++i) {
        // The ring holds as many messages as it has slots; a full ring at adapter close means
        // the control loop stopped polling, which is a consumer bug.
        (void)im.call(i, &CoreRdma::on_uninstall, dataplane::RdmaTarget{im.rdma_on(i)}, done, a);
      }
      break;
    }
    case NdkObjectType::kPd: {
      auto* pd = static_cast<Pd*>(object);
      Adapter* ad = Access::adapter(*pd);
      // No QP of the PD is left, so no core uses its privileged token any more.
      if (Access::privileged_token(*pd) != 0)
        (void)impl_of(*ad).mrs->deregister(Access::privileged_token(*pd));
      const NdkCloseCompletion cb = Access::close_completion(*pd);
      void* ctx = Access::close_context(*pd);
      delete pd;
      --impl_of(*ad).pds;
      fire_close(cb, ctx);
      release_child(ad);
      break;
    }
    case NdkObjectType::kCq: {
      auto* cq = static_cast<Cq*>(object);
      Adapter* ad = Access::adapter(*cq);
      auto done = [](const CoreMessage& msg) {
        auto* c = static_cast<Cq*>(msg.done_ctx);
        Adapter* owner = Access::adapter(*c);
        const NdkCloseCompletion cb = Access::close_completion(*c);
        void* ctx = Access::close_context(*c);
        delete c;  // the core no longer polls it; the consumer closed it
        --impl_of(*owner).cqs;
        fire_close(cb, ctx);
        release_child(owner);
      };
      Adapter::Impl& owner_im = impl_of(*ad);
      (void)owner_im.call(cq->core(), &CoreRdma::on_detach_cq,
                          dataplane::CqTarget{owner_im.rdma_on(cq->core()), Access::cq(*cq).get()},
                          done, cq);
      break;
    }
    case NdkObjectType::kMw: {
      auto* mw = static_cast<Mw*>(object);
      Adapter* ad = Access::adapter(*mw);
      Pd* pd = Access::pd(*mw);
      const NdkCloseCompletion cb = Access::close_completion(*mw);
      void* ctx = Access::close_context(*mw);
      delete mw;  // no core touches memory through it any more
      --impl_of(*ad).mrs_open;
      fire_close(cb, ctx);
      release_child(pd);
      break;
    }
    case NdkObjectType::kMr: {
      auto* mr = static_cast<Mr*>(object);
      Adapter* ad = Access::adapter(*mr);
      Pd* pd = Access::pd(*mr);
      const NdkCloseCompletion cb = Access::close_completion(*mr);
      void* ctx = Access::close_context(*mr);
      delete mr;  // no core touches its memory any more (deregistration barrier)
      --impl_of(*ad).mrs_open;
      fire_close(cb, ctx);
      release_child(pd);
      break;
    }
    case NdkObjectType::kSrq: {
      auto* srq = static_cast<Srq*>(object);
      Adapter* ad = Access::adapter(*srq);
      Pd* pd = Access::pd(*srq);
      const NdkCloseCompletion cb = Access::close_completion(*srq);
      void* ctx = Access::close_context(*srq);
      delete srq;  // no QP uses it any more, so no core reads it
      --impl_of(*ad).srqs;
      fire_close(cb, ctx);
      release_child(pd);
      break;
    }
    default:
      break;
  }
}

}  // namespace ndk_detail

}  // namespace rocedp
