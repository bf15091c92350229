#pragma once
// rocedp's NDK-shaped object API: adapter, protection domain, memory region, completion queue,
// shared receive queue and queue pair, with NDK's creation, completion and close semantics
// (../shared/reference/NDK.md). No DPDK type appears here: a consumer compiles without DPDK.
//
// Threads
// -------
//  * The control thread: the thread that calls Adapter::poll_control() in its loop (the opener
//    until the loop first runs). It owns every object. Object management (every create, close,
//    RegisterMr/DeregisterMr, ResizeCq, ModifySrq, Qp::connect, Flush, CreateMw, ...) may be
//    called from ANY thread: on the control thread it runs at once; from another thread the call
//    is handed to the control thread (an inbox poll_control() drains) and the caller waits for
//    its inline status, so the control loop must be running. Every CreateCompletion,
//    CloseCompletion and RequestCompletion runs on the control thread (from poll_control()); a
//    consumer may close any object from inside one of these callbacks. poll_control() itself is
//    owner-only: a debug build asserts that no two threads run it at once.
//  * Polling cores: each CQ, QP and SRQ lives on exactly one core (a CQ on the core of its
//    affinity, a QP and an SRQ on the core of their CQs). The control thread reaches them only
//    through the core's request ring; CreateCq/CreateQp/ResizeCq/... therefore return
//    STATUS_PENDING and complete when the core answers. CQ and SRQ notification callbacks run
//    on the owning core and must not block.
//  * Consumer threads: posts (Send, Receive, Write, Read, atomics, FastRegister, Invalidate,
//    SrqReceive) and GetCqResults/ArmCq may run on any thread. As NDK requires, the consumer
//    serializes posts per queue (the send queue and the receive queue of a QP are separate
//    queues and may be posted concurrently) and GetCqResults/ArmCq per CQ. rocedp takes no lock
//    to enforce it: each queue is a single-producer ring ("doorbell") the owning core drains.
//
// Creation: STATUS_SUCCESS with the object in *out, or STATUS_PENDING and later the
// CreateCompletion(context, status, header) with the object (on success) on the control thread;
// STATUS_INVALID_PARAMETER for bad arguments and STATUS_INSUFFICIENT_RESOURCES at a limit,
// returned inline (no callback) or delivered through CreateCompletion.
// Close: STATUS_SUCCESS (closed, no callback) or STATUS_PENDING then CloseCompletion on the
// control thread. A parent's close pends until its children are closed (adapter: PDs and CQs;
// PD: MRs, SRQs, QPs; CQ and SRQ: the QPs using them). After CloseCompletion (or an inline
// STATUS_SUCCESS) nothing of that object fires again.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string_view>
#include <type_traits>
#include <vector>

#include "rocedp/ndk_types.hpp"
#include "rocedp/status.hpp"

namespace rocedp {

namespace rc {
class CompletionQueue;
class SendQueue;
class ReceiveQueue;
class SharedReceiveQueue;
}  // namespace rc
namespace ndk_detail {
struct Access;  // the provider's way in (private header control/ndk_internal.hpp)
}  // namespace ndk_detail

class Adapter;
class Pd;
class Mr;
class Cq;
class Srq;
class Qp;
class Mw;

/// NDKPI version rocedp implements (NDK_VERSION in every object header).
inline constexpr NdkVersion kNdkVersion{2, 1};

/// NDK_OBJECT_HEADER as the first member of every object (NDK's object layout): a consumer reads
/// it as NDK consumers do (version, object type). This part is standard-layout, so the
/// NdkObjectHeader* that a CreateCompletion carries converts back to the object with
/// ndk_object_cast<T>().
struct NdkObjectHead {
  NdkObjectHeader header;
};
static_assert(std::is_standard_layout_v<NdkObjectHead> && offsetof(NdkObjectHead, header) == 0,
              "NDK_OBJECT_HEADER comes first");

/// The common base of every object: the header, then the provider's lifetime bookkeeping
/// (control thread only), private to the object classes and the provider (ndk_detail::Access).
struct NdkObjectBase : NdkObjectHead {
  /// NdkQueryExtensionInterface, in every object's dispatch table: rocedp defines no extension
  /// interface (nor does NDK a standard one), so every GUID and version is STATUS_NOT_SUPPORTED,
  /// with out->dispatch null; STATUS_INVALID_PARAMETER for a null GUID or output. Any thread.
  NTSTATUS query_extension_interface(const NdkGuid* interface_id, NdkVersion version,
                                     NdkExtensionInterface* out) const {
    (void)version;
    if (interface_id == nullptr || out == nullptr) return STATUS_INVALID_PARAMETER;
    out->dispatch = nullptr;
    return STATUS_NOT_SUPPORTED;
  }

 private:
  friend struct ndk_detail::Access;
  friend class Adapter;
  friend class Pd;
  friend class Mr;
  friend class Mw;
  friend class Cq;
  friend class Srq;
  friend class Qp;
  friend class Connector;
  friend class Listener;
  friend class SharedEndpoint;
  Adapter* adapter = nullptr;
  uint32_t children = 0;  ///< open child objects (close of this one pends on them)
  bool closing = false;
  NdkCloseCompletion close_completion = nullptr;
  void* close_context = nullptr;
};

/// The object a CreateCompletion delivered, or null if `header` is null or of another type.
template <typename T>
T* ndk_object_cast(NdkObjectHeader* header) {
  if (header == nullptr || header->object_type != T::kType) return nullptr;
  return static_cast<T*>(reinterpret_cast<NdkObjectHead*>(header));
}

/// NDK_ADAPTER: the RDMA adapter of one port.
class Adapter : public NdkObjectBase {
 public:
  static constexpr NdkObjectType kType = NdkObjectType::kAdapter;

  // An adapter is opened with rocedp::open_adapter (rocedp/runtime.hpp), which assembles the
  // port, the polling cores and the control thread under it.

  /// NdkQueryAdapterInfo: every NDK_ADAPTER_INFO field, limits from config `limits`.
  /// STATUS_SUCCESS; STATUS_BUFFER_TOO_SMALL if *size < sizeof(NdkAdapterInfo) (then *size is
  /// set to the size needed); STATUS_INVALID_PARAMETER for null pointers. Any thread.
  NTSTATUS query_adapter_info(NdkAdapterInfo* info, size_t* size) const;

  /// NdkCreatePd: STATUS_SUCCESS (inline: a PD is a number) or STATUS_INSUFFICIENT_RESOURCES
  /// (limits.max_pds). `completion` is never called (kept for NDK's signature).
  NTSTATUS create_pd(NdkCreateCompletion completion, void* context, Pd** out);

  /// NdkCreateCq on polling core `core_affinity` (NDK's GROUP_AFFINITY as a core index).
  /// STATUS_PENDING: the core attaches the CQ and `completion` delivers it (or
  /// STATUS_INSUFFICIENT_RESOURCES) on the control thread. Inline: STATUS_INVALID_PARAMETER
  /// (depth 0 or > MaxCqDepth, no such core, null completion), STATUS_INSUFFICIENT_RESOURCES
  /// (limits.max_cqs, ring allocation failed, request ring full).
  /// `notification` runs on the owning core (see NdkCqNotificationCallback).
  NTSTATUS create_cq(uint32_t depth, NdkCqNotificationCallback notification,
                     void* notification_context, uint32_t core_affinity,
                     NdkCreateCompletion completion, void* context, Cq** out);

  /// NdkCloseObject(adapter): STATUS_PENDING; CloseCompletion follows once every PD and CQ is
  /// closed and every core has removed the adapter's objects. A CreateCq still pending completes
  /// first with STATUS_CANCELLED (no object; the core drops the CQ). The Adapter is freed right
  /// after the callback returns.
  NTSTATUS close(NdkCloseCompletion completion, void* context);

  /// The control loop's turn: runs the completions the cores sent back (Create/Close/Request
  /// completions). Call it on the control thread in a loop. Returns completions handled.
  uint32_t poll_control();

  /// The polling cores serving the adapter (valid core_affinity values are 0..core_count()-1).
  uint32_t core_count() const;
  /// NdkBuildLAM over [address, address+length) (rocedp takes the buffer instead of an MDL).
  /// Fills `lam` with the logical address (= the virtual address) of every 4 KiB page the buffer
  /// touches and `*first_byte_offset` with the offset of `address` in its first page.
  /// STATUS_SUCCESS inline (`completion` is never called; nothing is pinned or mapped);
  /// STATUS_BUFFER_TOO_SMALL if *lam_size < the size needed (then *lam_size is set to it, see
  /// ndk_lam_size); STATUS_INVALID_PARAMETER (null pointers, length 0, the range wraps,
  /// length > MaxRegistrationSize). Any thread.
  NTSTATUS build_lam(const void* address, size_t length, NdkRequestCompletion completion,
                     void* context, NdkLogicalAddressMapping* lam, uint32_t* lam_size,
                     uint32_t* first_byte_offset);
  /// NdkReleaseLAM: releases a LAM BuildLam filled. Nothing is held for it on rocedp, so this only
  /// exists for NDK's call sequence. Any thread.
  void release_lam(NdkLogicalAddressMapping* lam);

  ~Adapter();
  Adapter(const Adapter&) = delete;
  Adapter& operator=(const Adapter&) = delete;

  struct Impl;  // opaque: defined in the provider (control/ndk_internal.hpp)

 private:
  friend struct ndk_detail::Access;
  Adapter();
  std::unique_ptr<Impl> impl_;
};

/// NDK_PD: a protection domain.
class Pd : public NdkObjectBase {
 public:
  static constexpr NdkObjectType kType = NdkObjectType::kPd;

  /// NdkCreateMr (fast_register: for NdkInitializeFastRegisterMr + FastRegister work
  /// requests). STATUS_SUCCESS inline; STATUS_INSUFFICIENT_RESOURCES (limits.max_mrs).
  NTSTATUS create_mr(bool fast_register, NdkCreateCompletion completion, void* context, Mr** out);

  /// NdkCreateSrq on polling core `core_affinity` (QPs using it must live on the same core).
  /// STATUS_SUCCESS inline; STATUS_INVALID_PARAMETER (depth 0 or > MaxSrqDepth, max_sge >
  /// MaxReceiveRequestSge, threshold > depth, no such core); STATUS_INSUFFICIENT_RESOURCES
  /// (limits.max_srqs, allocation). `notification` runs on the owning core.
  NTSTATUS create_srq(uint32_t depth, uint32_t max_sge, uint32_t notify_threshold,
                      NdkSrqNotificationCallback notification, void* notification_context,
                      uint32_t core_affinity, NdkCreateCompletion completion, void* context,
                      Srq** out);

  /// NdkCreateQp: the QP lives on the core of its CQs. Both CQs must be on the same core
  /// (rocedp does not carry completions across cores): STATUS_INVALID_PARAMETER otherwise.
  /// STATUS_PENDING: the core creates it and `completion` delivers it (or the core's
  /// STATUS_INSUFFICIENT_RESOURCES) on the control thread. Inline: STATUS_INVALID_PARAMETER (null
  /// CQ or completion, CQ of another adapter or closing, depth 0 or above the limits, SGE count
  /// above limits, inline size above MaxInlineDataSize); STATUS_INSUFFICIENT_RESOURCES
  /// (limits.max_qps, allocation, ring full).
  NTSTATUS create_qp(Cq* receive_cq, Cq* initiator_cq, void* qp_context,
                     uint32_t receive_queue_depth, uint32_t initiator_queue_depth,
                     uint32_t max_receive_sge, uint32_t max_initiator_sge,
                     uint32_t inline_data_size, NdkCreateCompletion completion, void* context,
                     Qp** out);
  /// NdkCreateQpWithSrq: as create_qp, receives come from `srq` (same core as the CQs).
  NTSTATUS create_qp_with_srq(Cq* receive_cq, Cq* initiator_cq, Srq* srq, void* qp_context,
                              uint32_t initiator_queue_depth, uint32_t max_initiator_sge,
                              uint32_t inline_data_size, NdkCreateCompletion completion,
                              void* context, Qp** out);

  /// NdkCreateMw: a memory window of this PD, unbound (its token works once a Bind work request
  /// bound it). STATUS_SUCCESS inline (`completion` never called); STATUS_INSUFFICIENT_RESOURCES
  /// (limits.max_mrs: windows and regions share the table); STATUS_INVALID_PARAMETER (null out,
  /// closing). Control thread.
  NTSTATUS create_mw(NdkCreateCompletion completion, void* context, Mw** out);

  /// NdkGetPrivilegedMemoryRegionToken: a token for local SGEs that reaches any address (the
  /// logical addresses of BuildLAM; SMB Direct uses it for its own buffers). Local access only:
  /// a peer using it as a remote token gets a NAK remote access error. The same token for the
  /// life of the PD. STATUS_SUCCESS; STATUS_INSUFFICIENT_RESOURCES (table full);
  /// STATUS_INVALID_PARAMETER (null token, closing). Control thread.
  NTSTATUS get_privileged_memory_region_token(uint32_t* token);

  /// STATUS_SUCCESS when no MR, MW, SRQ or QP of it is open; else STATUS_PENDING and
  /// CloseCompletion once the last of them closed.
  NTSTATUS close(NdkCloseCompletion completion, void* context);

  uint32_t id() const { return id_; }

  // ---- provider internals (control thread) ----
 private:
  friend struct ndk_detail::Access;
  uint32_t id_ = 0;
  uint32_t privileged_token_ = 0;
};

/// NDK_MW: a memory window (type 1 in IB terms: bound by a Bind work request on a QP of its PD).
class Mw : public NdkObjectBase {
 public:
  static constexpr NdkObjectType kType = NdkObjectType::kMw;

  /// NdkGetRemoteTokenFromMw: the window's token (fixed for its life; it grants access only
  /// while the window is bound).
  uint32_t get_remote_token() const { return token_; }
  /// NdkCloseObject: STATUS_PENDING; the token stops working at once, CloseCompletion (control
  /// thread) once no polling core touches memory through it any more. STATUS_INSUFFICIENT_RESOURCES
  /// (a core's request ring is full; nothing changed); STATUS_INVALID_PARAMETER (closing).
  NTSTATUS close(NdkCloseCompletion completion, void* context);

  // ---- provider internals (control thread) ----
 private:
  friend struct ndk_detail::Access;
  Pd* pd_ = nullptr;
  uint32_t token_ = 0;
  uint32_t barriers_ = 0;
};

/// NDK_MR: a memory region.
class Mr : public NdkObjectBase {
 public:
  static constexpr NdkObjectType kType = NdkObjectType::kMr;

  /// NdkRegisterMr over [address, address+length) with NDK_MR_FLAG_* access. STATUS_SUCCESS
  /// inline (`completion` not called); STATUS_INVALID_PARAMETER (already registered, fast-register
  /// MR, null address, length 0 or > MaxRegistrationSize, bad flags);
  /// STATUS_INSUFFICIENT_RESOURCES (table full).
  NTSTATUS register_mr(const void* address, uint64_t length, uint32_t mr_flags,
                       NdkRequestCompletion completion, void* context);
  /// NdkDeregisterMr. The tokens stop working at once: every later check fails (a new request
  /// with STATUS_ACCESS_VIOLATION / a NAK remote access error; the middle and last packets of a
  /// WRITE in flight are NAKed, queued READ responses stop, a multi-packet SEND into a receive
  /// buffer of the region fails). STATUS_PENDING, then `completion` (control thread) with
  /// STATUS_SUCCESS once every polling core has passed a loop iteration since: from then on no
  /// byte of the memory is touched and the consumer may free it. Inline:
  /// STATUS_INVALID_PARAMETER (nothing registered, null completion, closing);
  /// STATUS_INSUFFICIENT_RESOURCES (a core's request ring is full; still registered).
  NTSTATUS deregister_mr(NdkRequestCompletion completion, void* context);
  /// NdkInitializeFastRegisterMr: STATUS_SUCCESS; STATUS_IMPLEMENTATION_LIMIT (page_count 0 or
  /// > FRMRPageCount); STATUS_INVALID_PARAMETER (not created for fast registration, or
  /// initialized already).
  NTSTATUS initialize_fast_register_mr(uint32_t page_count, bool allow_remote_access,
                                       NdkRequestCompletion completion, void* context);
  /// NdkGetLocalTokenFromMr / NdkGetRemoteTokenFromMr (0 when not registered).
  uint32_t get_local_token() const { return local_token_; }
  uint32_t get_remote_token() const { return remote_token_; }
  /// NdkCloseObject. STATUS_SUCCESS inline when nothing is registered and no deregistration is
  /// pending; otherwise deregisters (as deregister_mr) and returns STATUS_PENDING: a pending
  /// DeregisterMr completes first, then CloseCompletion (control thread) once no core touches
  /// the memory any more. STATUS_INSUFFICIENT_RESOURCES (a core's ring is full; nothing changed),
  /// STATUS_INVALID_PARAMETER (closing).
  NTSTATUS close(NdkCloseCompletion completion, void* context);

  // ---- provider internals (control thread) ----
 private:
  friend struct ndk_detail::Access;
  uint32_t barriers_ = 0;  ///< deregistration barriers still waiting for the cores
  Pd* pd_ = nullptr;
  bool fast_register_ = false;
  bool registered_ = false;
  uint32_t local_token_ = 0;
  uint32_t remote_token_ = 0;
};

/// NDK_CQ: a completion queue on one polling core.
class Cq : public NdkObjectBase {
 public:
  static constexpr NdkObjectType kType = NdkObjectType::kCq;

  /// NdkGetCqResults / NdkGetCqResultsEx: up to n completions, oldest first; 0 = empty.
  /// Consumer thread (serialized per CQ with arm()). Never blocks.
  uint32_t get_results(NdkResult* results, uint32_t n);
  uint32_t get_results_ex(NdkResultEx* results, uint32_t n);
  /// NdkArmCq: one notification for the next completion matching `type` (or one already
  /// queued); arms merge ANY > SOLICITED > ERRORS. The callback runs on the owning core.
  void arm(NdkCqNotifyType type);
  /// NdkResizeCq, executed on the owning core while traffic flows; no completion is lost or
  /// reordered. STATUS_PENDING and RequestCompletion (control thread) with STATUS_SUCCESS,
  /// STATUS_INVALID_PARAMETER (fewer than the completions held now),
  /// STATUS_INSUFFICIENT_RESOURCES (new ring not allocated) or STATUS_INVALID_DEVICE_STATE
  /// (overrun). Inline: STATUS_INVALID_PARAMETER (depth 0 or > MaxCqDepth, null completion),
  /// STATUS_INSUFFICIENT_RESOURCES (request ring full).
  NTSTATUS resize(uint32_t depth, NdkRequestCompletion completion, void* context);
  /// NdkControlCqInterruptModeration: STATUS_NOT_SUPPORTED, always (NDK's documented status when
  /// the adapter does not advertise NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED). There
  /// are no interrupts to moderate: the notification runs on the polling core that produced the
  /// completion, as soon as it is produced. Any thread.
  NTSTATUS control_interrupt_moderation(uint32_t moderation_interval, uint32_t moderation_count);
  /// STATUS_PENDING; CloseCompletion once every QP using the CQ is closed and the core has
  /// dropped it. A ResizeCq still pending completes first, with STATUS_CANCELLED. Notifications
  /// stop before CloseCompletion.
  NTSTATUS close(NdkCloseCompletion completion, void* context);

  uint32_t core() const { return core_; }
  uint32_t depth() const;
  /// True once the CQ overran (the notification reported STATUS_BUFFER_OVERFLOW).
  bool overrun() const;

  // ---- provider internals (control thread) ----
 private:
  friend struct ndk_detail::Access;
  uint32_t core_ = 0;
  bool attached_ = false;
  std::unique_ptr<rc::CompletionQueue> cq_;
};

/// NDK_SRQ: a shared receive queue on one polling core.
class Srq : public NdkObjectBase {
 public:
  static constexpr NdkObjectType kType = NdkObjectType::kSrq;

  /// NdkSrqReceive: STATUS_SUCCESS; STATUS_INSUFFICIENT_RESOURCES (full);
  /// STATUS_INVALID_PARAMETER (too many SGEs). Consumer thread, serialized per SRQ.
  NTSTATUS receive(void* request_context, const NdkSge* sgl, uint32_t n_sge);
  /// NdkModifySrq on the owning core: new depth (up to the depth given at creation) and limit
  /// threshold (0 disarms; the notification fires once when posted receives fall below it).
  /// STATUS_PENDING then RequestCompletion (control thread) with STATUS_SUCCESS,
  /// STATUS_INVALID_PARAMETER (depth below the posted count, threshold > depth) or
  /// STATUS_NOT_SUPPORTED (depth above the creation depth).
  NTSTATUS modify(uint32_t depth, uint32_t notify_threshold, NdkRequestCompletion completion,
                  void* context);
  /// STATUS_SUCCESS, or STATUS_PENDING until the QPs using it are closed.
  NTSTATUS close(NdkCloseCompletion completion, void* context);
  uint32_t core() const { return core_; }

  // ---- provider internals (control thread) ----
 private:
  friend struct ndk_detail::Access;
  Pd* pd_ = nullptr;
  uint32_t core_ = 0;
  std::unique_ptr<rc::SharedReceiveQueue> srq_;
};

/// The out-of-band connection parameters that move a QP to RTR and RTS (what ibv_rc_pingpong
/// exchanges; connection management fills them from the CM REQ/REP later).
struct NdkQpConnectParams {
  uint32_t remote_qpn = 0;
  uint32_t remote_ip = 0;  ///< IPv4, host order
  /// RoCEv2 over IPv6: the peer's IPv6 address (network order), when remote_ip is 0. The QP then
  /// sends from the port's `ipv6` address (none: STATUS_INVALID_PARAMETER). An IPv4-mapped
  /// address (::ffff:a.b.c.d, a RoCEv2 GID of an IPv4 address) means that IPv4 address.
  uint8_t remote_ip6[16] = {};
  uint8_t remote_mac[6] = {};
  uint32_t path_mtu = 1024;           ///< 256, 512, 1024, 2048 or 4096 (<= what the port carries)
  uint32_t local_psn = 0;             ///< first PSN this QP sends (24 bits)
  uint32_t remote_psn = 0;            ///< first PSN expected from the peer (the peer's local_psn)
  uint8_t retry_count = 7;            ///< 0..7
  uint8_t rnr_retry = 7;              ///< 0..7, 7 = infinite
  uint8_t local_ack_timeout = 14;     ///< 4.096 µs × 2^t (0 = infinite)
  uint8_t min_rnr_timer = 12;         ///< IBTA RNR timer code this QP's responder advertises
  uint32_t inbound_read_limit = 16;   ///< IRL, effective (<= MaxInboundReadLimit)
  uint32_t outbound_read_limit = 16;  ///< ORL, effective (<= MaxOutboundReadLimit)
  /// IPv4 ToS of the QP's frames (DSCP << 2); 0: the port's `dscp`. ECN bits ECT(0) or ECT(1)
  /// make the QP ECN-capable (its rate follows the peer's CNPs); a port with `ecn` sets ECT(0)
  /// when they are 0.
  uint8_t traffic_class = 0;
};

/// NDK_QP: a reliable-connected queue pair on one polling core.
///
/// Post functions return STATUS_SUCCESS (a completion follows unless SILENT_SUCCESS and the
/// request succeeds), STATUS_CONNECTION_INVALID (not connected, or in error),
/// STATUS_INSUFFICIENT_RESOURCES (queue full), STATUS_INVALID_PARAMETER (too many SGEs, inline
/// data above the QP's inline size, bad arguments). A failed post produces no completion
/// and hands earlier DEFERred posts to the core. Flags: NDK_OP_FLAG_SILENT_SUCCESS, READ_FENCE,
/// SEND_AND_SOLICIT_EVENT, INLINE, DEFER. Consumer thread, serialized per queue.
class Qp : public NdkObjectBase {
 public:
  static constexpr NdkObjectType kType = NdkObjectType::kQp;
  /// The provider creates and frees QPs (CreateQp, Close); these make room for the send queue.
  static void* operator new(std::size_t size, const std::nothrow_t& tag) noexcept;
  static void operator delete(void* p) noexcept;
  static void operator delete(void* p, const std::nothrow_t& tag) noexcept;

  NTSTATUS send(void* request_context, const NdkSge* sgl, uint32_t n_sge, uint32_t flags);
  /// rocedp extension: SEND with immediate data (delivered in the receive completion's
  /// TypeSpecificCompletionOutput, low 32 bits, bit 32 set).
  NTSTATUS send_with_immediate(void* request_context, const NdkSge* sgl, uint32_t n_sge,
                               uint32_t immediate, uint32_t flags);
  /// NdkSendAndInvalidate: the peer invalidates its `remote_token` (its receive completes as
  /// kReceiveAndInvalidate with the token).
  NTSTATUS send_and_invalidate(void* request_context, const NdkSge* sgl, uint32_t n_sge,
                               uint32_t remote_token, uint32_t flags);
  /// NdkReceive: STATUS_SUCCESS, STATUS_INSUFFICIENT_RESOURCES, STATUS_INVALID_PARAMETER
  /// (too many SGEs, or the QP uses an SRQ). Allowed before connecting.
  NTSTATUS receive(void* request_context, const NdkSge* sgl, uint32_t n_sge);
  NTSTATUS write(void* request_context, const NdkSge* sgl, uint32_t n_sge, uint64_t remote_address,
                 uint32_t remote_token, uint32_t flags);
  /// rocedp extension: RDMA WRITE with immediate (consumes a receive on the peer).
  NTSTATUS write_with_immediate(void* request_context, const NdkSge* sgl, uint32_t n_sge,
                                uint64_t remote_address, uint32_t remote_token, uint32_t immediate,
                                uint32_t flags);
  NTSTATUS read(void* request_context, const NdkSge* sgl, uint32_t n_sge, uint64_t remote_address,
                uint32_t remote_token, uint32_t flags);
  /// rocedp extensions: 8-byte atomics on an 8-byte-aligned remote address; `result` (one
  /// 8-byte SGE) receives the original value.
  NTSTATUS compare_swap(void* request_context, const NdkSge& result, uint64_t remote_address,
                        uint32_t remote_token, uint64_t compare, uint64_t swap, uint32_t flags);
  NTSTATUS fetch_add(void* request_context, const NdkSge& result, uint64_t remote_address,
                     uint32_t remote_token, uint64_t add, uint32_t flags);
  /// NdkFastRegister: makes `mr` (initialized for fast registration) valid at
  /// [address, address+length) with NDK_MR_FLAG_* `mr_flags`, in order with the other requests.
  NTSTATUS fast_register(void* request_context, Mr* mr, uint64_t address, uint64_t length,
                         uint32_t mr_flags, uint32_t flags);
  /// NdkInvalidate: invalidates the local token of a fast-register `mr`.
  NTSTATUS invalidate(void* request_context, Mr* mr, uint32_t flags);
  /// NdkInvalidate on a memory window: unbinds `mw` in order with the other requests; its token
  /// fails every check from then on. Completion STATUS_SUCCESS, or STATUS_ACCESS_VIOLATION
  /// (stale window).
  NTSTATUS invalidate(void* request_context, Mw* mw, uint32_t flags);
  /// NdkBind: binds window `mw` to [address, address+length) of the registered region `mr` with
  /// remote rights `mr_flags` (NDK_MR_FLAG_ALLOW_REMOTE_READ / _WRITE), in order with the other
  /// requests; the peer then uses mw->get_remote_token(). Window, region and QP must share the
  /// PD. Completion (kBind): STATUS_SUCCESS; STATUS_ACCESS_VIOLATION (another PD, range outside
  /// the region, a right the region does not grant, stale window or region);
  /// STATUS_INVALID_DEVICE_REQUEST (length 0, bad flags). Inline: as every post, and
  /// STATUS_INVALID_PARAMETER (null mr/mw).
  NTSTATUS bind(void* request_context, Mr* mr, Mw* mw, const void* address, uint64_t length,
                uint32_t mr_flags, uint32_t flags);

  /// rocedp extension, a hint that the consumer will post up to `n` requests here soon: fetches
  /// the lines those posts write, so that they do not wait for memory (at many QPs a post's
  /// lines are cold, and its doorbell waits until they arrive). `n` = 0 fetches the queue's own
  /// line without reading it; `n` > 0 reads that line to find the next `n` slots and the
  /// doorbell's entry and fetches them. A consumer posting round-robin over many QPs calls
  /// prefetch_post(0) some QPs ahead and prefetch_post(n) fewer QPs ahead (rocedp-perf: 12 and
  /// 4). Changes nothing; the thread that posts to the QP.
  void prefetch_post(uint32_t n);

  /// NdkFlush: every pending request completes with STATUS_CANCELLED and the QP moves to
  /// error. Control thread (the request travels on the owning core's ring).
  void flush();

  /// Moves the QP to RTR and RTS (out of band, as ibv_rc_pingpong; the CM connects through
  /// Connector). STATUS_PENDING, then RequestCompletion on the control thread with STATUS_SUCCESS,
  /// STATUS_INVALID_DEVICE_STATE (already connected / in error) or STATUS_INVALID_PARAMETER
  /// (MTU, retry count). Inline: STATUS_INVALID_PARAMETER (MTU above the port's, read limits
  /// above the adapter's, null completion); STATUS_INSUFFICIENT_RESOURCES (ring full).
  NTSTATUS connect(const NdkQpConnectParams& params, NdkRequestCompletion completion,
                   void* context);

  /// rocedp extension: from its connection on (connect(), or a Connector's Accept or
  /// CompleteConnect), each RDMA WRITE without immediate that the peer completes into memory also
  /// completes on the QP's receive CQ (NdkOperationType::kRemoteWrite), consuming no receive. NDK
  /// tells a responder nothing of a WRITE; a consumer that answers each one (rocedpd's perftest
  /// service for ib_write_lat) uses this. A duplicate is not reported again. Such WRITEs take
  /// the responder's general path (a few instructions more each). STATUS_SUCCESS;
  /// STATUS_INVALID_DEVICE_STATE once connect() was called. Control thread.
  NTSTATUS report_remote_writes();

  /// STATUS_PENDING: outstanding requests complete with STATUS_CANCELLED (work requests through
  /// the CQ, a pending connect() through its RequestCompletion), the core destroys the QP, then
  /// CloseCompletion runs on the control thread. Posts fail from the call on.
  NTSTATUS close(NdkCloseCompletion completion, void* context);

  /// rocedp extension: why the QP entered the error state, "" while it has not. The peer's NAK
  /// of a request of ours: remote_access, remote_invalid_request, remote_operational; our NAK of
  /// the peer's: refused_access, refused_invalid_request, refused_operation; retry_exceeded,
  /// rnr_retry_exceeded; local_length, receive_too_small, local_op, local_protection; cq_full,
  /// cq_overrun; flushed (Flush, a disconnect, a close). Set by the owning core; any thread.
  std::string_view error_reason() const;

  /// The QP number (core index in bits 23..18).
  uint32_t qpn() const { return qpn_; }
  uint32_t core() const { return core_; }

  // ---- provider internals (control thread) ----
 private:
  friend struct ndk_detail::Access;
  NTSTATUS post_send(const void* wqe);
  // The object and its send queue are one allocation: a post finds the queue at a fixed offset
  // from the object instead of through a pointer in it (at many QPs, one cache miss less).
  struct SendQueueInPlace {
    void operator()(rc::SendQueue* q) const;
  };
  void* send_queue_storage();
  const void* send_queue_storage() const;
  rc::SendQueue& send_queue() { return *static_cast<rc::SendQueue*>(send_queue_storage()); }
  const rc::SendQueue& send_queue() const {
    return *static_cast<const rc::SendQueue*>(send_queue_storage());
  }

  Pd* pd_ = nullptr;
  Cq* receive_cq_ = nullptr;
  Cq* initiator_cq_ = nullptr;
  Srq* srq_ = nullptr;
  void* qp_context_ = nullptr;
  uint32_t qpn_ = 0;
  uint32_t core_ = 0;
  bool created_ = false;
  bool connect_called_ = false;
  bool report_remote_writes_ = false;
  std::unique_ptr<rc::SendQueue, SendQueueInPlace> sq_;  // lives in send_queue_storage()
  std::unique_ptr<rc::ReceiveQueue> rq_;
};

}  // namespace rocedp
