#pragma once
// Provider internals shared by the control-side NDK object files (control/ndk_*.cpp).
// Control thread only.

#include <cstdint>
#include <memory>
#include <unordered_set>
#include <vector>

#include "dataplane/core_channel.hpp"
#include "dataplane/core_rdma.hpp"
#include "dataplane/rc/memory_region.hpp"
#include "dataplane/rc/queue_pair.hpp"
#include "rocedp/adapter.hpp"

namespace rocedp {

/// One request on its way to a core and back (control-owned, freed in the completion).
struct RequestOp {
  Adapter* adapter = nullptr;
  NdkObjectBase* object = nullptr;
  NdkCreateCompletion create_completion = nullptr;
  NdkRequestCompletion request_completion = nullptr;
  void* context = nullptr;
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
  std::vector<Qp*> retry_close;
  std::unordered_set<const Qp*> live_qps;  ///< every Qp object not yet freed (qp_alive)
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);  // false once the Adapter is freed  // QP closes whose re-post found the ring full

  /// alloc + fill + post on `core`'s channel, with the CoreRdma in data[3].
  bool call(uint32_t core, dataplane::CoreMessage::RunFn run, void* arg, dataplane::CoreMessage::DoneFn done, void* done_ctx,
            uint64_t d0 = 0, uint64_t d1 = 0) {
    return setup.channels[core]->call(run, arg, done, done_ctx, d0, d1, 0,
                                      reinterpret_cast<uint64_t>(rdma[core].get()));
  }
};


namespace ndk_detail {
void init_header(NdkObjectBase& o, NdkObjectType type, Adapter* adapter);
/// A child of `parent` closed; a parent waiting in close finishes when it was the last.
void release_child(NdkObjectBase* parent);
/// The object's children are gone: tear it down and fire its CloseCompletion.
void finish_close(NdkObjectBase* object);
void fire_close(NdkCloseCompletion cb, void* ctx);
/// Posts (again) the close request of a QP to its core.
void post_close_qp(Qp* qp);
void close_qp_done(dataplane::CoreMessage& msg);
/// True if `qp` is a QP object of `adapter` that is not freed and still has QPN `qpn`.
inline bool qp_alive(Adapter& adapter, const Qp* qp, uint32_t qpn) {
  return qp != nullptr && adapter.impl().live_qps.count(qp) != 0 && qp->qpn() == qpn;
}
}  // namespace ndk_detail

}  // namespace rocedp
