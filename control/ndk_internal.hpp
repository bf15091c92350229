#pragma once
// Provider internals shared by the control-side NDK object files (control/ndk_*.cpp).
// Control thread only.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_set>
#include <vector>

#include "control/adapter_setup.hpp"
#include "control/ndk_test_hooks.hpp"
#include "dataplane/core_channel.hpp"
#include "dataplane/core_rdma.hpp"
#include "dataplane/rc/memory_region.hpp"
#include "dataplane/rc/queue_pair.hpp"
#include "pmd/control_wake.hpp"
#include "rocedp/adapter.hpp"
#include "rocedp/connector.hpp"
#include "rocedp/listener.hpp"
#include "rocedp/shared_endpoint.hpp"

namespace rocedp {

/// One request on its way to a core and back (control-owned, freed in the completion).
struct RequestOp {
  Adapter* adapter = nullptr;
  NdkObjectBase* object = nullptr;
  NdkCreateCompletion create_completion = nullptr;
  NdkRequestCompletion request_completion = nullptr;
  void* context = nullptr;
  /// The request counts as a child of `object` until it completes, so that the object, closed
  /// meanwhile, outlives the core's work on it (an SRQ's modify).
  bool holds_child = false;
  rc::QpCreateParams create{};
  rc::QpConnectParams connect{};
};

struct Adapter::Impl {
  AdapterSetup setup;
  std::unique_ptr<rc::MemoryRegionTable> mrs;
  std::vector<std::unique_ptr<dataplane::CoreRdma>> rdma;
  uint32_t max_path_mtu = 1024;
  uint32_t pds = 0, cqs = 0, qps = 0, srqs = 0, mrs_open = 0;
  uint32_t next_pd = 1;
  uint32_t uninstalls_pending = 0;
  std::vector<Qp*> retry_close;            ///< QP closes whose re-post found the ring full
  std::unordered_set<const Qp*> live_qps;  ///< every Qp object not yet freed (qp_alive)
  CqRingAllocatorHook cq_allocator{};      ///< test hook (control/ndk_test_hooks.hpp)

  // ---- calls from any thread (the only state here other threads touch) ----
  /// The thread that runs the control loop: the opener until poll_control() first runs, then
  /// the thread that runs it. A public call made on another thread is handed to it (inbox) and
  /// waits for its result.
  std::atomic<std::thread::id> control_thread{std::this_thread::get_id()};
  struct Task {
    std::function<void()> fn;
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
  };
  std::mutex inbox_mutex;
  std::deque<std::shared_ptr<Task>> inbox;
  std::atomic<uint32_t> inbox_size{0};  ///< lets an idle poll_control skip the mutex
  std::atomic<bool> polling{false};     ///< debug check: one control loop at a time
  bool on_control_thread() const {
    return control_thread.load(std::memory_order_acquire) == std::this_thread::get_id();
  }
  /// Runs `fn` on the control thread (from its next poll_control()) and waits for it.
  void run_on_control(std::function<void()> fn) {
    auto t = std::make_shared<Task>();
    t->fn = std::move(fn);
    {
      std::lock_guard<std::mutex> g(inbox_mutex);
      inbox.push_back(t);
      inbox_size.fetch_add(1, std::memory_order_release);
    }
    if (setup.control_wake != nullptr) setup.control_wake->wake();
    std::unique_lock<std::mutex> l(t->m);
    t->cv.wait(l, [&] { return t->done; });
  }
  /// The control loop's turn at the inbox: every call handed over so far, in arrival order.
  uint32_t run_inbox() {
    if (inbox_size.load(std::memory_order_acquire) == 0) return 0;
    std::deque<std::shared_ptr<Task>> batch;
    {
      std::lock_guard<std::mutex> g(inbox_mutex);
      batch.swap(inbox);
      inbox_size.store(0, std::memory_order_release);
    }
    for (auto& t : batch) {
      t->fn();
      std::lock_guard<std::mutex> g(t->m);
      t->done = true;
      t->cv.notify_one();
    }
    return static_cast<uint32_t>(batch.size());
  }
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);  // false once the Adapter is freed

  /// The RDMA objects (engine, CQs) of polling core `core`; RDMA requests name them.
  dataplane::CoreRdma* rdma_on(uint32_t core) const { return rdma[core].get(); }
  /// alloc + fill + post on `core`'s channel (CoreChannel::call).
  template <typename Request>
  bool call(uint32_t core, typename dataplane::CoreCall<Request>::RunFn run, const Request& request,
            dataplane::CoreMessage::DoneFn done, void* done_ctx) {
    return setup.channels[core]->call(run, request, done, done_ctx);
  }
};

namespace ndk_detail {
/// The provider's way to the private parts of the public objects (include/rocedp/ declares it a
/// friend of each): the adapter's Impl and every object's bookkeeping and internals, by
/// reference. Control thread, like the members themselves.
struct Access {
  static Adapter::Impl& impl(Adapter& a) { return *a.impl_; }
  static Adapter* create() { return new (std::nothrow) Adapter(); }

  // Every object (NdkObjectBase).
  static Adapter*& adapter(NdkObjectBase& o) { return o.adapter; }
  static uint32_t& children(NdkObjectBase& o) { return o.children; }
  static bool& closing(NdkObjectBase& o) { return o.closing; }
  static NdkCloseCompletion& close_completion(NdkObjectBase& o) { return o.close_completion; }
  static void*& close_context(NdkObjectBase& o) { return o.close_context; }
  static Adapter* adapter(const NdkObjectBase& o) { return o.adapter; }
  static bool closing(const NdkObjectBase& o) { return o.closing; }

  static uint32_t& id(Pd& o) { return o.id_; }
  static uint32_t& privileged_token(Pd& o) { return o.privileged_token_; }
  static uint32_t& token(Mw& o) { return o.token_; }
  static bool& fast_register(Mr& o) { return o.fast_register_; }
  static Pd*& pd(Mw& o) { return o.pd_; }
  static Pd*& pd(Mr& o) { return o.pd_; }
  static Pd*& pd(Srq& o) { return o.pd_; }
  static Pd*& pd(Qp& o) { return o.pd_; }
  static uint32_t& core(Cq& o) { return o.core_; }
  static uint32_t& core(Srq& o) { return o.core_; }
  static uint32_t& core(Qp& o) { return o.core_; }
  static bool& attached(Cq& o) { return o.attached_; }
  static bool attached(const Cq& o) { return o.attached_; }
  static std::unique_ptr<rc::CompletionQueue>& cq(Cq& o) { return o.cq_; }
  static std::unique_ptr<rc::SharedReceiveQueue>& srq(Srq& o) { return o.srq_; }
  static Cq*& receive_cq(Qp& o) { return o.receive_cq_; }
  static Cq*& initiator_cq(Qp& o) { return o.initiator_cq_; }
  static Srq*& srq(Qp& o) { return o.srq_; }
  static void*& qp_context(Qp& o) { return o.qp_context_; }
  static uint32_t& qpn(Qp& o) { return o.qpn_; }
  static bool& created(Qp& o) { return o.created_; }
  static auto& sq(Qp& o) { return o.sq_; }
  static void* send_queue_storage(Qp& o) { return o.send_queue_storage(); }
  static std::unique_ptr<rc::ReceiveQueue>& rq(Qp& o) { return o.rq_; }

  static Connector::State*& state(Connector& o) { return o.state_; }
  static Listener::State*& state(Listener& o) { return o.state_; }
  static NdkSockAddr& address(SharedEndpoint& o) { return o.address_; }
  static uint32_t& users(SharedEndpoint& o) { return o.users_; }
};
}  // namespace ndk_detail

/// The provider state of `adapter`.
inline Adapter::Impl& impl_of(Adapter& adapter) {
  return ndk_detail::Access::impl(adapter);
}

namespace ndk_detail {

/// Every public control-path call starts with this: on the control thread it runs on; on any
/// other thread the whole call is handed to the control thread, which runs it from its next
/// poll_control() while the caller waits, and its result is returned (DESIGN.md: one thread
/// owns the objects; other threads reach it through its inbox). Callbacks therefore always run
/// on the control thread. `R` is the call's return type.
template <typename R, typename F>
bool handed_to_control(const NdkObjectBase* object, R* result, F&& call) {
  if (object == nullptr || Access::adapter(*object) == nullptr) return false;
  Adapter::Impl& im = impl_of(*Access::adapter(*object));
  if (im.on_control_thread()) return false;
  im.run_on_control([&] { *result = call(); });
  return true;
}
template <typename F>
bool handed_to_control_void(const NdkObjectBase* object, F&& call) {
  if (object == nullptr || Access::adapter(*object) == nullptr) return false;
  Adapter::Impl& im = impl_of(*Access::adapter(*object));
  if (im.on_control_thread()) return false;
  im.run_on_control([&] { call(); });
  return true;
}

void init_header(NdkObjectBase& o, NdkObjectType type, Adapter* adapter);
/// A child of `parent` closed; a parent waiting in close finishes when it was the last.
void release_child(NdkObjectBase* parent);
/// The object's children are gone: tear it down and fire its CloseCompletion.
void finish_close(NdkObjectBase* object);
void fire_close(NdkCloseCompletion cb, void* ctx);
/// Posts (again) the close request of a QP to its core.
void post_close_qp(Qp* qp);
void close_qp_done(const dataplane::CoreMessage& msg);
/// True if `qp` is a QP object of `adapter` that is not freed and still has QPN `qpn`.
inline bool qp_alive(Adapter& adapter, const Qp* qp, uint32_t qpn) {
  return qp != nullptr && impl_of(adapter).live_qps.count(qp) != 0 && qp->qpn() == qpn;
}
}  // namespace ndk_detail

}  // namespace rocedp

/// The prologue of a public control-path call (see ndk_detail::handed_to_control): `call` is the
/// same call again, which the control thread then runs directly.
#define ROCEDP_ON_CONTROL(object, call)                                                         \
  do {                                                                                          \
    decltype(call) handed_result_{};                                                            \
    if (::rocedp::ndk_detail::handed_to_control(object, &handed_result_, [&] { return call; })) \
      return handed_result_;                                                                    \
  } while (0)
#define ROCEDP_ON_CONTROL_VOID(object, call)                                         \
  do {                                                                               \
    if (::rocedp::ndk_detail::handed_to_control_void(object, [&] { call; })) return; \
  } while (0)
