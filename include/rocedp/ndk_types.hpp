#pragma once
// The data types of rocedp's NDK-shaped API: completion results, scatter/gather entries,
// operation types, flags, adapter information and the consumer callbacks.
//
// Shapes and values follow Microsoft's ndkpi.h / ndkinfo.h (see ../shared/reference/NDK.md).
// Types use the house CamelCase/snake_case style; constants NDK defines keep their NDK
// spelling (NDK_OP_FLAG_*, NDK_MR_FLAG_*, ...) so they can be checked against ndkpi.h.
// No DPDK type appears here: a consumer compiles without DPDK headers.

#include <cstddef>
#include <cstdint>

#include "rocedp/status.hpp"

namespace rocedp {

// ---------------------------------------------------------------------------------------------
// Objects

/// NDK_OBJECT_TYPE (ndkpi.h): what an object header belongs to.
enum class NdkObjectType : uint32_t {
  kAdapter = 1,
  kQp = 2,
  kCq = 3,
  kMr = 4,
  kMw = 5,
  kPd = 6,
  kSharedEndpoint = 7,
  kConnector = 8,
  kListener = 9,
  kSrq = 10,
};

/// NDK_VERSION: the NDKPI version an object or adapter implements.
struct NdkVersion {
  uint16_t major = 0;
  uint16_t minor = 0;
};

/// NDK_OBJECT_HEADER: the first member of every rocedp object, so a callback that hands out
/// "an object" (CreateCompletion) can say which kind it is.
struct NdkObjectHeader {
  NdkVersion version;
  NdkObjectType object_type = NdkObjectType::kAdapter;
};

/// GUID: names an extension interface (NdkQueryExtensionInterface).
struct NdkGuid {
  uint32_t data1 = 0;
  uint16_t data2 = 0;
  uint16_t data3 = 0;
  uint8_t data4[8] = {};
};

/// NDK_EXTENSION_INTERFACE: the dispatch table of an extension interface.
struct NdkExtensionInterface {
  const void* dispatch = nullptr;
};

/// A connector object (defined by the control layer). ConnectEvent hands one to the consumer.
struct NdkConnector;

// ---------------------------------------------------------------------------------------------
// Work requests and completions

/// NDK_OPERATION_TYPE (ndkpi.h): which kind of request a completion belongs to
/// (NdkResultEx::type).
enum class NdkOperationType : uint32_t {
  kReceive = 1,
  kSend = 2,
  kFastRegister = 4,
  kBind = 8,
  kInvalidate = 16,
  kRead = 32,
  kWrite = 64,
  /// A receive that also invalidated a local token (the peer used SendAndInvalidate);
  /// TypeSpecificCompletionOutput carries the token. Also returned by the non-Ex GetCqResults.
  kReceiveAndInvalidate = 32769,
  /// rocedp extensions (NDK has no atomics); values outside NDK's range.
  kCompareSwap = 0x10000,
  kFetchAdd = 0x10001,
  /// rocedp extension: the peer's RDMA WRITE (without immediate) completed into memory, on a QP
  /// that asked for it (Qp::report_remote_writes); a receive completion that consumed no receive.
  /// bytes_transferred: its length; type_specific_completion_output: the address of its first
  /// byte; request_context: null.
  kRemoteWrite = 0x10002,
};

/// NDK_SGE: one scatter/gather element of a work request. `virtual_address` lies inside the
/// memory region whose local token is `memory_region_token`.
struct NdkSge {
  void* virtual_address = nullptr;
  uint32_t length = 0;
  uint32_t memory_region_token = 0;
};

/// NDK_RESULT: one completion as NdkGetCqResults returns it.
struct NdkResult {
  NTSTATUS status = STATUS_SUCCESS;  ///< Status
  uint32_t bytes_transferred = 0;    ///< BytesTransferred; valid only for receives (NDK)
  void* qp_context = nullptr;        ///< QPContext given at QP creation
  void* request_context = nullptr;   ///< RequestContext given when the request was posted
};

/// NDK_RESULT_EX: NDK_RESULT plus the operation type and its type-specific output
/// (the invalidated token for kReceiveAndInvalidate, the original value for atomics).
struct NdkResultEx {
  NTSTATUS status = STATUS_SUCCESS;
  uint32_t bytes_transferred = 0;
  void* qp_context = nullptr;
  void* request_context = nullptr;
  NdkOperationType type = NdkOperationType::kSend;  ///< Type
  uint32_t provider_error_code = 0;               ///< ProviderErrorCode (2024 docs; in the padding)
  uintptr_t type_specific_completion_output = 0;  ///< TypeSpecificCompletionOutput
};

/// The NdkResult view of an NdkResultEx (what the non-Ex GetCqResults returns).
constexpr NdkResult to_result(const NdkResultEx& ex) {
  return NdkResult{ex.status, ex.bytes_transferred, ex.qp_context, ex.request_context};
}

// NDK_OP_FLAG_* (ndkpi.h): flags of a posted work request and of QP/MW access.
inline constexpr uint32_t NDK_OP_FLAG_SILENT_SUCCESS = 0x00000001;  ///< no CQE on success
inline constexpr uint32_t NDK_OP_FLAG_READ_FENCE = 0x00000002;      ///< wait for earlier READs
inline constexpr uint32_t NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT = 0x00000004;  ///< BTH SE bit
inline constexpr uint32_t NDK_OP_FLAG_ALLOW_REMOTE_READ = 0x00000008;
inline constexpr uint32_t NDK_OP_FLAG_ALLOW_LOCAL_WRITE = 0x00000010;
/// Includes ALLOW_LOCAL_WRITE (0x10): remote write needs local write (ndkpi.h).
inline constexpr uint32_t NDK_OP_FLAG_ALLOW_REMOTE_WRITE = 0x00000030;
inline constexpr uint32_t NDK_OP_FLAG_INLINE = 0x00000040;  ///< data copied at post time
inline constexpr uint32_t NDK_OP_FLAG_RDMA_READ_SINK = 0x00000080;
/// 0x100 as in ndkpi.h; the NdkRead DDI page wrongly shows 0x200 (which is DEFER).
inline constexpr uint32_t NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE = 0x00000100;
/// Hint: the request need not reach the engine until a later non-deferred post.
inline constexpr uint32_t NDK_OP_FLAG_DEFER = 0x00000200;

// NDK_MR_FLAG_* (ndkpi.h): access rights of a registered memory region. These look like
// enumerated values but compose as bits: REMOTE_WRITE (5) contains LOCAL_WRITE (1), because
// IBTA requires local write access for remote write; a region is usually registered with
// LOCAL_WRITE | REMOTE_READ | REMOTE_WRITE (= 7). Local read is always allowed.
inline constexpr uint32_t NDK_MR_FLAG_ALLOW_LOCAL_READ = 0x00000000;
inline constexpr uint32_t NDK_MR_FLAG_ALLOW_LOCAL_WRITE = 0x00000001;
inline constexpr uint32_t NDK_MR_FLAG_ALLOW_REMOTE_READ = 0x00000002;
inline constexpr uint32_t NDK_MR_FLAG_ALLOW_REMOTE_WRITE = 0x00000005;
inline constexpr uint32_t NDK_MR_FLAG_RDMA_READ_SINK = 0x00000008;

/// NDK_CQ_NOTIFY_* (ndkpi.h): what an ArmCq waits for. Several arms before a notification
/// merge to the widest: ANY > SOLICITED > ERRORS (NDKPI completion rules).
enum class NdkCqNotifyType : uint32_t {
  kErrors = 0,     ///< NDK_CQ_NOTIFY_ERRORS: only a completion with an error status
  kAny = 1,        ///< NDK_CQ_NOTIFY_ANY: any completion
  kSolicited = 2,  ///< NDK_CQ_NOTIFY_SOLICITED: a solicited receive, or an error
};
inline constexpr uint32_t NDK_CQ_NOTIFY_ERRORS = 0;
inline constexpr uint32_t NDK_CQ_NOTIFY_ANY = 1;
inline constexpr uint32_t NDK_CQ_NOTIFY_SOLICITED = 2;

// ---------------------------------------------------------------------------------------------
// Adapter information

/// NDK_RDMA_TECHNOLOGY (ndkinfo.h).
enum class NdkRdmaTechnology : uint32_t {
  kUndefined = 0,
  kIwarp = 1,
  kInfiniBand = 2,
  kRoce = 3,
  kRoceV2 = 4,  ///< what rocedp reports
};

/// NDK_LOGICAL_ADDRESS_MAPPING (ndkpi.h), the LAM BuildLam fills: the adapter logical address
/// of every page a buffer touches. On rocedp an adapter logical address is the virtual address
/// (the polling cores reach the consumer's memory directly; there is no IOMMU mapping), and a
/// page is 4096 bytes. Variable size: `adapter_page_count` entries follow.
struct NdkLogicalAddressMapping {
  uint32_t adapter_page_count = 0;
  uint64_t adapter_page_array[1] = {};
};
/// Bytes a LAM of `pages` pages takes.
constexpr size_t ndk_lam_size(uint32_t pages) {
  return offsetof(NdkLogicalAddressMapping, adapter_page_array) +
         size_t{pages == 0 ? 1 : pages} * sizeof(uint64_t);
}

// NDK_ADAPTER_FLAG_* (ndkinfo.h): AdapterFlags bits.
inline constexpr uint32_t NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED = 0x00000001;
inline constexpr uint32_t NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED = 0x00000002;
inline constexpr uint32_t NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED = 0x00000004;
inline constexpr uint32_t NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED = 0x00000008;
inline constexpr uint32_t NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED = 0x00000010;
inline constexpr uint32_t NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED = 0x00000100;
inline constexpr uint32_t NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED = 0x00010000;

/// NDK_ADAPTER_INFO (ndkinfo.h): the adapter's identity and limits, as NdkQueryAdapterInfo
/// returns them. rocedp fills the limits from the YAML configuration.
struct NdkAdapterInfo {
  NdkVersion version;                      ///< Version: NDKPI version implemented
  uint32_t vendor_id = 0;                  ///< VendorId (IEEE OUI)
  uint32_t device_id = 0;                  ///< DeviceId
  size_t max_registration_size = 0;        ///< MaxRegistrationSize: bytes per memory region
  size_t max_window_size = 0;              ///< MaxWindowSize: bytes per memory window
  uint32_t frmr_page_count = 0;            ///< FRMRPageCount: pages per fast-register MR (>= 16)
  uint32_t max_initiator_request_sge = 0;  ///< MaxInitiatorRequestSge
  uint32_t max_receive_request_sge = 0;    ///< MaxReceiveRequestSge
  uint32_t max_read_request_sge = 0;       ///< MaxReadRequestSge
  uint32_t max_transfer_length = 0;        ///< MaxTransferLength: bytes per request
  uint32_t max_inline_data_size = 0;       ///< MaxInlineDataSize
  uint32_t max_inbound_read_limit = 0;     ///< MaxInboundReadLimit
  uint32_t max_outbound_read_limit = 0;    ///< MaxOutboundReadLimit
  uint32_t max_receive_queue_depth = 0;    ///< MaxReceiveQueueDepth
  uint32_t max_initiator_queue_depth = 0;  ///< MaxInitiatorQueueDepth
  uint32_t max_srq_depth = 0;              ///< MaxSrqDepth; 0 means no SRQ support
  uint32_t max_cq_depth = 0;               ///< MaxCqDepth (CreateCq/ResizeCq limit)
  uint32_t large_request_threshold = 0;    ///< LargeRequestThreshold
  uint32_t max_caller_data = 0;            ///< MaxCallerData: connect private data bytes
  uint32_t max_callee_data = 0;            ///< MaxCalleeData: accept/reject private data
  uint32_t adapter_flags = 0;              ///< AdapterFlags: NDK_ADAPTER_FLAG_*
  NdkRdmaTechnology rdma_technology = NdkRdmaTechnology::kRoceV2;  ///< RdmaTechnology
};

// ---------------------------------------------------------------------------------------------
// Consumer callbacks. Each takes the context the consumer supplied with the request.
// A callback must not block: those that run on a polling core stall every queue of that core.

/// NDK_FN_REQUEST_COMPLETION: an asynchronous request (one that returned STATUS_PENDING:
/// ResizeCq, RegisterMr, Connect, Accept, ...) finished with `status`.
/// Runs on the control thread, also for requests a polling core carried out (ResizeCq,
/// ModifySrq, QP connect): the core answers through its completion ring and the control
/// thread runs the callback, so a consumer may close objects from inside it.
using NdkRequestCompletion = void (*)(void* context, NTSTATUS status);

/// NDK_FN_CREATE_COMPLETION: an object creation that returned STATUS_PENDING finished;
/// `object` is the new object on success, null otherwise. Runs on the control thread.
using NdkCreateCompletion = void (*)(void* context, NTSTATUS status, NdkObjectHeader* object);

/// NDK_FN_CLOSE_COMPLETION: a close that returned STATUS_PENDING finished. Nothing about the
/// object fires after it (NDKPI object lifetime rules). Runs on the control thread.
using NdkCloseCompletion = void (*)(void* context);

/// NDK_FN_CQ_NOTIFICATION_CALLBACK: an armed CQ has a completion matching the arm
/// (cq_status STATUS_SUCCESS), or the CQ overran (STATUS_BUFFER_OVERFLOW: the CQ and every QP
/// using it are dead), or failed (STATUS_INTERNAL_ERROR). Once per arm.
/// Runs on the CQ's owning polling core; calls for one CQ never overlap.
using NdkCqNotificationCallback = void (*)(void* context, NTSTATUS cq_status);

/// NDK_FN_SRQ_NOTIFICATION_CALLBACK: the SRQ's posted receives fell below the limit set with
/// ModifySrq (status STATUS_SUCCESS), or the SRQ failed. Fires once per limit setting.
/// Runs on the SRQ's owning polling core.
using NdkSrqNotificationCallback = void (*)(void* context, NTSTATUS srq_status);

/// NDK_FN_CONNECT_EVENT_CALLBACK: a connection request reached a listener; `connector` is the
/// new connector to Accept or Reject. Runs on the control thread.
using NdkConnectEventCallback = void (*)(void* context, NdkConnector* connector);

/// NDK_FN_DISCONNECT_EVENT_CALLBACK: the peer disconnected an established connection.
/// Runs on the control thread.
using NdkDisconnectEventCallback = void (*)(void* context);

}  // namespace rocedp
