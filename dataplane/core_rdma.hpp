#pragma once
// The RDMA objects one polling core owns (DESIGN.md §1): its RC engine (QPs), the CQs whose
// owner it is, and the FrameSink through which the engine's frames leave as mbufs on the core's
// TX buffer. The control layer (control/ndk_adapter.cpp) creates one CoreRdma per core and
// reaches it only through the request handlers below, posted on the core's CoreChannel.
//
// Per-packet path (rx_burst_st, poll_st, the sink): no allocation, no lock, no system call. CQ and
// QP create/destroy run as control requests on the core; they may allocate (control path).
//
// Time: the engine's clock is the TSC the polling core read when the poll began (one read per
// poll), scaled to nanoseconds (rte_get_tsc_hz at construction).

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "dataplane/core_channel.hpp"
#include "dataplane/engine_row.hpp"
#include "dataplane/rc/rc_engine.hpp"
#include "dataplane/roce_handler.hpp"

struct rte_mempool;

namespace rocedp::dataplane {

class PollingCore;

/// A tap on every frame the engine of a core transmits (tests, captures). Runs on that core.
using TxTap = void (*)(void* context, const uint8_t* frame, size_t len);

class CoreRdma final : public RoceHandler {
 public:
  /// `core`: the polling core; `port_id`: the port whose queue that core serves (the engine's
  /// frames go out there); `pool`: where TX mbufs come from; `mrs`: the adapter's MR table.
  CoreRdma(PollingCore& core, uint16_t port_id, rte_mempool* pool, const rc::RcEngineConfig& config,
           rc::MemoryRegionTable* mrs, uint32_t max_cqs);
  ~CoreRdma() override;

  uint32_t rx_burst_st(std::span<const wire::Bytes> frames, uint64_t tsc) override;
  bool poll_st(uint64_t tsc) override;

  rc::RcEngine& engine_st() { return *engine_; }
  uint16_t index() const;
  /// Before installation only (or from a request on the core).
  void set_tx_tap(TxTap tap, void* context) {
    tap_ = tap;
    tap_context_ = context;
    engine_->set_sink_send_st(tap != nullptr ? &CoreRdma::sink_tap : nullptr);
  }
  uint64_t tx_no_mbuf() const { return tx_no_mbuf_; }
  /// The engine's counters with the two this object keeps for it (owning core, or a request on
  /// it: telemetry's snapshot round, rocedp-perf between runs).
  EngineRow counters_st() {
    EngineRow r;
    r.core = engine_->core();
    r.counters = engine_->counters().v;
    r.tx_no_mbuf = tx_no_mbuf_;
    r.tx_no_room = tx_no_room_;
    return r;
  }
  /// Frames the engine held back because the core's TX buffer was full, or the core had no TX
  /// queue on the port (it resends them later).
  uint64_t tx_no_room() const { return tx_no_room_; }

  // ---- request handlers (CoreCall::RunFn); the request names the CoreRdma. result.status is
  // an NTSTATUS.
  static void on_install(const RdmaTarget& req, CoreResult& result, void* core);
  static void on_uninstall(const RdmaTarget& req, CoreResult& result, void* core);
  /// INSUFFICIENT_RESOURCES: max_cqs attached already.
  static void on_attach_cq(const CqTarget& req, CoreResult& result, void* core);
  /// INVALID_PARAMETER: the CQ is not attached here.
  static void on_detach_cq(const CqTarget& req, CoreResult& result, void* core);
  static void on_resize_cq(const CqResize& req, CoreResult& result, void* core);
  /// On success result.value holds QpCreated.
  static void on_create_qp(const QpCreate& req, CoreResult& result, void* core);
  /// INVALID_PARAMETER: no such QP.
  static void on_connect_qp(const QpConnect& req, CoreResult& result, void* core);
  static void on_flush_qp(const QpTarget& req, CoreResult& result, void* core);
  /// Flushes the QP (if not yet in ERROR); destroys it once every request completed.
  /// STATUS_PENDING while completions are still being produced: the caller posts it again.
  static void on_close_qp(const QpTarget& req, CoreResult& result, void* core);
  static void on_modify_srq(const SrqModify& req, CoreResult& result, void* core);

 private:
  static uint8_t* sink_alloc(void* ctx, size_t len, void** handle);
  [[gnu::noinline]] static uint8_t* sink_alloc_slow(void* ctx, size_t len, void** handle);
  uint8_t* take_tx_mbuf_st(rte_mbuf* m, size_t len, void** handle);
  static void sink_tap(void* ctx, void* handle, size_t len);
  [[gnu::noinline]] bool refill_tx_stash_st();
  uint64_t ns_of(uint64_t tsc) const;

  PollingCore& core_;
  const uint16_t port_id_;
  rte_mempool* pool_;
  std::unique_ptr<rc::RcEngine> engine_;
  std::vector<rc::CompletionQueue*> cqs_;  // capacity reserved at construction
  uint32_t max_cqs_;
  double ns_per_cycle_ = 1.0;
  TxTap tap_ = nullptr;
  void* tap_context_ = nullptr;
  uint64_t tx_no_mbuf_ = 0;
  uint64_t tx_no_room_ = 0;
  // Transmit mbufs taken from the pool a burst at a time (sink_alloc); returned on destruction.
  static constexpr uint32_t kTxStash = 32;
  uint32_t tx_stash_n_ = 0;
  std::array<rte_mbuf*, kTxStash> tx_stash_{};
};

}  // namespace rocedp::dataplane
