#pragma once
// One reliable-connected queue pair (IBTA Vol 1 ch. 9-10) as the polling core sees it: its state
// machine, its connection parameters, and the private state of its three roles (requester,
// responder, completer; CONVENTIONS.md item 7). The role code lives in requester.cpp,
// responder.cpp and completer.cpp and works on the plain structs below; only the owning polling
// core ever touches a QueuePair (DESIGN.md §1), so nothing here is atomic or locked.
//
// Everything a packet needs is sized when the QP is created (WQE bookkeeping per send-queue slot,
// responder resources per inbound read), so the per-packet path never allocates.
//
// Completion statuses (NDK / NetworkDirect IND2CompletionQueue status table; the
// ProviderErrorCode of NdkResultEx carries the matching ibv_wc_status number so that two causes
// that share an NTSTATUS stay distinguishable):
//
// | event                                                        | NTSTATUS                       |
// provider code        |
// |--------------------------------------------------------------|--------------------------------|----------------------|
// | success                                                      | STATUS_SUCCESS                 |
// 0  SUCCESS           | | message longer than MaxTransferLength (2^31) / SGE sum wraps |
// STATUS_DATA_OVERRUN            | 1  LOC_LEN_ERR       | | incoming SEND longer than the receive
// WQE (receiver side)    | STATUS_BUFFER_OVERFLOW         | 1  LOC_LEN_ERR       | | local op
// error: unaligned atomic target, atomic SGE != 8 B,  | STATUS_INVALID_DEVICE_REQUEST  | 2
// LOC_QP_OP_ERR     | |   failed fast-register / invalidate work request             |   (or the MR
// table's status)   |                      | | local SGE token / bounds / access check failed |
// STATUS_ACCESS_VIOLATION        | 4  LOC_PROT_ERR      | | flushed: Flush, QP in error, another
// request failed          | STATUS_CANCELLED               | 5  WR_FLUSH_ERR      | | NAK invalid
// request (bad opcode sequence, length error, ...) | STATUS_REMOTE_ERROR 0xC000013D | 9
// REM_INV_REQ_ERR   | | NAK remote access error (rkey, bounds, access on the peer)   |
// STATUS_ACCESS_VIOLATION        | 10 REM_ACCESS_ERR    | | NAK remote operational error |
// STATUS_REMOTE_ERROR            | 11 REM_OP_ERR        | | retry count exhausted (ACK timeout /
// sequence NAKs)          | STATUS_IO_TIMEOUT              | 12 RETRY_EXC_ERR     | | RNR retry
// count exhausted                                    | STATUS_IO_TIMEOUT              | 13
// RNR_RETRY_EXC_ERR | | send/receive CQ overran: every QP of the CQ is dead          | (no entry:
// the CQ reports STATUS_BUFFER_OVERFLOW)     |
//
// After any error other than a flush, the QP moves to ERROR: the failing request completes with
// its status and every other outstanding request (send and receive queue) with STATUS_CANCELLED,
// in posting order (NetworkDirect: "The request was canceled (generally due to a previous request
// failing)").

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "dataplane/rc/completion_queue.hpp"
#include "dataplane/rc/memory_region.hpp"
#include "dataplane/rc/path_table.hpp"
#include "dataplane/rc/work_queue.hpp"
#include "dataplane/wire/eth.hpp"
#include "dataplane/wire/opcode.hpp"
#include "dataplane/wire/packet.hpp"
#include "rocedp/config.hpp"
#include "rocedp/ndk_types.hpp"
#include "rocedp/status.hpp"

namespace rocedp::rc {

// ---------------------------------------------------------------------------------------------
// QP state (IBTA §10.3.1 "QP states"; SQD/SQE are not used by NDK).

enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kError, kCount };
inline constexpr std::array<std::string_view, static_cast<size_t>(QpState::kCount)> kQpStateNames =
    {"RESET", "INIT", "RTR", "RTS", "ERROR"};
constexpr std::string_view qp_state_name(QpState s) {
  return static_cast<size_t>(s) < kQpStateNames.size() ? kQpStateNames[static_cast<size_t>(s)]
                                                       : "invalid";
}

// ---------------------------------------------------------------------------------------------
// Completion errors: one row per cause, generating the NTSTATUS mapping above (item 13).

// X(enumerator, NTSTATUS, ibv_wc_status code, "name")
#define ROCEDP_RC_WC_ERRORS(X)                                               \
  X(kSuccess, STATUS_SUCCESS, 0, "success")                                  \
  X(kLocalLength, STATUS_DATA_OVERRUN, 1, "local_length")                    \
  X(kRecvTooSmall, STATUS_BUFFER_OVERFLOW, 1, "receive_too_small")           \
  X(kLocalOp, STATUS_INVALID_DEVICE_REQUEST, 2, "local_op")                  \
  X(kLocalProtection, STATUS_ACCESS_VIOLATION, 4, "local_protection")        \
  X(kFlushed, STATUS_CANCELLED, 5, "flushed")                                \
  X(kRemoteInvalidRequest, STATUS_REMOTE_ERROR, 9, "remote_invalid_request") \
  X(kRemoteAccess, STATUS_ACCESS_VIOLATION, 10, "remote_access")             \
  X(kRemoteOperational, STATUS_REMOTE_ERROR, 11, "remote_operational")       \
  X(kRetryExceeded, STATUS_IO_TIMEOUT, 12, "retry_exceeded")                 \
  X(kRnrRetryExceeded, STATUS_IO_TIMEOUT, 13, "rnr_retry_exceeded")

enum class WcError : uint8_t {
#define ROCEDP_X(e, s, c, n) e,
  ROCEDP_RC_WC_ERRORS(ROCEDP_X)
#undef ROCEDP_X
      kCount
};
struct WcErrorInfo {
  NTSTATUS status;
  uint32_t provider_code;
  std::string_view name;
};
inline constexpr std::array<WcErrorInfo, static_cast<size_t>(WcError::kCount)> kWcErrors = {{
#define ROCEDP_X(e, s, c, n) {s, c, n},
    ROCEDP_RC_WC_ERRORS(ROCEDP_X)
#undef ROCEDP_X
}};
constexpr const WcErrorInfo& wc_error_info(WcError e) {
  return kWcErrors[static_cast<size_t>(e)];
}

// Why a QP entered the error state, as Qp::error_reason() and /rocedp/qps name it. The remote_*
// reasons are the peer's NAK of our request; refused_* our NAK of the peer's.
// X(enumerator, "name")
#define ROCEDP_RC_QP_ERROR_REASONS(X)                              \
  X(kNone, "")                                                     \
  X(kFlushed, "flushed")      /* Flush, a disconnect, a close */   \
  X(kCqOverrun, "cq_overrun") /* its send or receive CQ overran */ \
  X(kCqFull, "cq_full")       /* a completion found its CQ full */ \
  X(kLocalLength, "local_length")                                  \
  X(kRecvTooSmall, "receive_too_small")                            \
  X(kLocalOp, "local_op")                                          \
  X(kLocalProtection, "local_protection")                          \
  X(kRemoteInvalidRequest, "remote_invalid_request")               \
  X(kRemoteAccess, "remote_access")                                \
  X(kRemoteOperational, "remote_operational")                      \
  X(kRetryExceeded, "retry_exceeded")                              \
  X(kRnrRetryExceeded, "rnr_retry_exceeded")                       \
  X(kRefusedInvalidRequest, "refused_invalid_request")             \
  X(kRefusedAccess, "refused_access")                              \
  X(kRefusedOperation, "refused_operation")

enum class QpErrorReason : uint8_t {
#define ROCEDP_X(e, n) e,
  ROCEDP_RC_QP_ERROR_REASONS(ROCEDP_X)
#undef ROCEDP_X
      kCount
};
inline constexpr std::array<std::string_view, static_cast<size_t>(QpErrorReason::kCount)>
    kQpErrorReasonNames = {{
#define ROCEDP_X(e, n) n,
        ROCEDP_RC_QP_ERROR_REASONS(ROCEDP_X)
#undef ROCEDP_X
    }};
constexpr std::string_view qp_error_reason_name(QpErrorReason r) {
  return static_cast<size_t>(r) < kQpErrorReasonNames.size()
             ? kQpErrorReasonNames[static_cast<size_t>(r)]
             : "invalid";
}
/// The reason a completion error gives its QP (kFlushed for kSuccess and kFlushed).
constexpr QpErrorReason qp_error_reason_of(WcError e) {
  switch (e) {
    case WcError::kLocalLength:
      return QpErrorReason::kLocalLength;
    case WcError::kRecvTooSmall:
      return QpErrorReason::kRecvTooSmall;
    case WcError::kLocalOp:
      return QpErrorReason::kLocalOp;
    case WcError::kLocalProtection:
      return QpErrorReason::kLocalProtection;
    case WcError::kRemoteInvalidRequest:
      return QpErrorReason::kRemoteInvalidRequest;
    case WcError::kRemoteAccess:
      return QpErrorReason::kRemoteAccess;
    case WcError::kRemoteOperational:
      return QpErrorReason::kRemoteOperational;
    case WcError::kRetryExceeded:
      return QpErrorReason::kRetryExceeded;
    case WcError::kRnrRetryExceeded:
      return QpErrorReason::kRnrRetryExceeded;
    default:
      return QpErrorReason::kFlushed;
  }
}

// ---------------------------------------------------------------------------------------------
// Engine counters (item 13): one X-macro for the enum and the telemetry names.

#define ROCEDP_RC_COUNTERS(X)                                                                      \
  X(kRxPackets, "rx_packets")               /* RoCEv2 RC packets accepted by receive */            \
  X(kRxDropNotRc, "rx_drop_not_rc")         /* UD or other non-RC opcode to an RC QP */            \
  X(kRxCnp, "rx_cnp")                       /* RoCEv2 CNP (congestion notification) */             \
  X(kRxCe, "rx_ce")                         /* RC packets marked CE (congestion experienced) */    \
  X(kTxCnp, "tx_cnp")                       /* CNPs sent for CE-marked packets */                  \
  X(kRateCuts, "rate_cuts")                 /* DCQCN rate decreases (a CNP to an ECT QP) */        \
  X(kRxDropNoQp, "rx_drop_no_qp")           /* destination QPN unknown on this core */             \
  X(kRxDropState, "rx_drop_qp_state")       /* QP not in a state that accepts the packet */        \
  X(kRxDropSource, "rx_drop_source")        /* source IP is not the connected peer */              \
  X(kRxDuplicate, "rx_duplicate")           /* duplicate request (re-ACK / re-execute) */          \
  X(kRxOutOfSequence, "rx_out_of_sequence") /* request ahead of the expected PSN */                \
  X(kRxGhostResponse, "rx_ghost_response")  /* response that matches nothing outstanding */        \
  X(kTxPackets, "tx_packets")                                                                      \
  X(kTxNoBuffer, "tx_no_buffer")    /* sink refused: rolled back, retried later */                 \
  X(kTxRetransmit, "tx_retransmit") /* packets sent again after go-back-N */                       \
  X(kAcksSent, "acks_sent")                                                                        \
  X(kNaksSent, "naks_sent") /* sequence / invalid / access / operational */                        \
  X(kRnrNaksSent, "rnr_naks_sent")                                                                 \
  X(kReadResponsesSent, "read_responses_sent")                                                     \
  X(kAcksReceived, "acks_received")                                                                \
  X(kNaksReceived, "naks_received")                                                                \
  X(kRnrNaksReceived, "rnr_naks_received")                                                         \
  X(kAckTimeouts, "ack_timeouts")           /* retransmission timer fired (probes included) */     \
  X(kRtoProbes, "rto_probes")               /* early (adaptive) timeouts: no retry consumed */     \
  X(kTimeoutWaitUs, "timeout_wait_us")      /* idle time from the last packet sent to a timeout */ \
  X(kSpuriousTimeouts, "spurious_timeouts") /* answered: only ACKs were late or lost */            \
  X(kStallsLearned, "stalls_learned")       /* late, not lost: the RTT estimate took the delay */  \
  X(kGoBackN, "go_back_n")                  /* retransmission restarts */                          \
  X(kCompletions, "completions")            /* CQEs produced */                                    \
  X(kQpErrors, "qp_errors")                 /* QPs moved to ERROR */

enum class RcCounter : uint8_t {
#define ROCEDP_X(e, n) e,
  ROCEDP_RC_COUNTERS(ROCEDP_X)
#undef ROCEDP_X
      kCount
};
inline constexpr size_t kRcCounterCount = static_cast<size_t>(RcCounter::kCount);
inline constexpr std::array<std::string_view, kRcCounterCount> kRcCounterNames = {
#define ROCEDP_X(e, n) std::string_view{n},
    ROCEDP_RC_COUNTERS(ROCEDP_X)
#undef ROCEDP_X
};

struct RcCounters {
  std::array<uint64_t, kRcCounterCount> v{};
  void add(RcCounter c, uint64_t n = 1) { v[static_cast<size_t>(c)] += n; }
  uint64_t get(RcCounter c) const { return v[static_cast<size_t>(c)]; }
};

// ---------------------------------------------------------------------------------------------
// Transmit: the polling core lends frame buffers (mbufs later) through this sink.

/// alloc: a contiguous buffer of `len` bytes and an opaque handle, or null when no buffer or no
/// TX room is left (the engine then rolls back and retries on a later poll, item 10).
/// send: hands the filled buffer (`len` bytes) to the transmit path; null when alloc's buffers
/// are queued for transmit already (they leave after the engine's turn, once it wrote them).
/// Both run on the owning core.
struct FrameSink {
  uint8_t* (*alloc)(void* ctx, size_t len, void** handle) = nullptr;
  void (*send)(void* ctx, void* handle, size_t len) = nullptr;
  void* ctx = nullptr;
};

/// What the role code needs besides the QP: the sink, the adapter's MR table, the counters.
struct RcContext {
  FrameSink sink;
  MemoryRegionTable* mrs = nullptr;
  RcCounters* counters = nullptr;
  uint16_t* ip_id = nullptr;  // IPv4 identification, incremented per frame as Linux does
  // Bumped per packet here, added to `counters` once per burst (RcEngine::flush_counters;
  // CONVENTIONS.md 12).
  uint64_t tx_packets = 0;   // frames sent
  uint64_t completions = 0;  // CQEs produced (RcCounter::kCompletions)
  uint64_t rx_packets = 0;   // RC packets accepted by receive (RcCounter::kRxPackets)
  uint32_t cnps_due = 0;     // QPs that owe a CNP (CongestionFlags::cnp_due), all on the run list
  // The CQ whose completions are staged and not yet published: the receive completions of one
  // RX burst go out together, and the send completions of one poll's visits (publish_staged_st).
  CompletionQueue* staged_cq = nullptr;
  // The round trip of each peer's path (the QPs to it share the port, the wire and the peer's
  // queues): a QP's retransmission timer never runs shorter than its path's RTO (completer.cpp).
  PathTable* paths = nullptr;
  // Frames built and not yet given their ICRC (finish_frames_st), when the sink has no `send`
  // (its frames leave after the engine's call): the CRC of a frame read just after it was
  // written waited for the frame's stores (its loads span several), and each CRC's chain ran
  // alone; a run of them at the end reads committed lines and overlaps.
  struct PendingIcrc {
    uint8_t* l3;
    uint32_t len;  // IP header to the ICRC
    bool ipv6;
  };
  static constexpr uint32_t kMaxPendingIcrc = 32;
  uint32_t pending_icrcs = 0;
  PendingIcrc pending_icrc[kMaxPendingIcrc];
};

/// Publishes the staged completions (one release store, one fence, one look at the arm).
/// Whoever ran the code that staged them calls it before returning to the poll loop.
inline void publish_staged_st(RcContext& ctx) {
  if (ctx.staged_cq == nullptr) return;
  ctx.staged_cq->publish_st();
  ctx.staged_cq = nullptr;
}
/// Completions are about to be staged on `cq`: those staged on another CQ are published first,
/// so that each CQ's entries become visible in the order they were staged.
inline void stage_on_st(RcContext& ctx, CompletionQueue* cq) {
  if (ctx.staged_cq == cq) [[likely]]
    return;
  publish_staged_st(ctx);
  ctx.staged_cq = cq;
}

/// A RETH at `p` (16 bytes).
inline void write_reth(uint8_t* p, uint64_t va, uint32_t rkey, uint32_t len) {
  wire::store_be64(p + wire::reth_off::kVa, va);
  wire::store_be32(p + wire::reth_off::kRkey, rkey);
  wire::store_be32(p + wire::reth_off::kLen, len);
}

/// The per-packet BTH fields and the length of the extension headers (transmit_frame's).
struct TxBth {
  uint8_t opcode = 0;
  bool se = false;
  bool ack_req = false;
  uint8_t ext_len = 0;  ///< bytes of extension headers after the BTH (0..28)
  uint32_t psn = 0;
};
static_assert(sizeof(TxBth) == 8);

/// One packet to send: the BTH fields that change per packet and the extension headers of its
/// opcode already in wire format. The role code writes them per opcode (the set_* helpers
/// below), so no generic field-by-field encoder runs per packet.
struct TxPacket : TxBth {
  alignas(8) uint8_t ext[wire::kMaxTransportHdrLen - wire::kBthLen];  // written by set_*

  void set_reth(uint64_t va, uint32_t rkey, uint32_t len) {
    write_reth(ext, va, rkey, len);
    ext_len = wire::kRethLen;
  }
  /// ImmDt or IETH (one 32-bit word), after whatever came before it.
  void add_be32(uint32_t v) {
    wire::store_be32(ext + ext_len, v);
    ext_len = static_cast<uint8_t>(ext_len + 4);
  }
  void set_aeth(uint8_t syndrome, uint32_t msn) {
    wire::store_be32(ext, (uint32_t{syndrome} << 24) | (msn & 0xFFFFFF));
    ext_len = wire::kAethLen;
  }
  void set_atomic_eth(uint64_t va, uint32_t rkey, uint64_t swap_add, uint64_t compare) {
    wire::store_be64(ext + wire::atmeth_off::kVa, va);
    wire::store_be32(ext + wire::atmeth_off::kRkey, rkey);
    wire::store_be64(ext + wire::atmeth_off::kSwapAdd, swap_add);
    wire::store_be64(ext + wire::atmeth_off::kCompare, compare);
    ext_len = wire::kAtomicEthLen;
  }
  /// After set_aeth: the ATOMIC_ACKNOWLEDGE's original value.
  void add_atomic_ack(uint64_t orig) {
    wire::store_be64(ext + ext_len, orig);
    ext_len = static_cast<uint8_t>(ext_len + wire::kAtomicAckEthLen);
  }
};

// ---------------------------------------------------------------------------------------------
// Parameters

inline constexpr uint32_t kMinPathMtu = 256;
inline constexpr uint32_t kMaxPathMtu = 4096;
/// NDK_ADAPTER_INFO::MaxTransferLength of this engine (IBTA DMA length is 32 bits; 2^31 keeps
/// every offset computation in range).
inline constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 31;
/// The most response packets one READ may ask for. A READ reserves a PSN per response, and every
/// PSN a requester has outstanding must stay within half the 24-bit PSN space for the responses'
/// order to be decidable (IBTA §9.7.1.1); a READ starts only inside the window, so the window
/// plus one READ of 2^22 PSNs stay well inside it. At path MTU 256 this limits a READ to 1 GiB.
inline constexpr uint32_t kMaxReadPackets = uint32_t{1} << 22;

/// Default requester window in PSNs (QpCreateParams::max_unacked_psns): the most the
/// loss-adaptive window (CompleterState::window) may open to.
inline constexpr uint32_t kDefaultMaxUnackedPsns = 256;
/// The loss-adaptive window never closes below this many PSNs.
inline constexpr uint32_t kMinWindow = 8;

/// QP creation (control path; NdkCreateQp / NdkCreateQpWithSrq arguments that reach the core).
struct QpCreateParams {
  uint32_t pd = 0;
  void* qp_context = nullptr;  ///< QPContext returned in every completion
  SendQueue* sq = nullptr;
  ReceiveQueue* rq = nullptr;  ///< exactly one of rq / srq
  SharedReceiveQueue* srq = nullptr;
  CompletionQueue* send_cq = nullptr;  ///< NDK "initiator CQ"
  CompletionQueue* recv_cq = nullptr;
  uint32_t max_inbound_read_limit = 16;  ///< responder resources allocated (>= IRL at RTR)
  /// Requester window: the most PSNs in flight before waiting. Go-back-N resends everything in
  /// flight after a loss, so its goodput under random loss p is at most (1-p)/(1+(W-1)p)
  /// (shared/reference/LOSS.md): the window actually used adapts to loss (CompleterState::window)
  /// and opens up to this.
  uint32_t max_unacked_psns = kDefaultMaxUnackedPsns;
};

/// The out-of-band connection parameters (what ibv_rc_pingpong exchanges, what IB CM's
/// REQ/REP carry): enough to move a QP to RTR and RTS.
struct QpConnectParams {
  uint32_t remote_qpn = 0;
  uint32_t local_ip = 0;   ///< host order
  uint32_t remote_ip = 0;  ///< host order
  wire::MacAddr local_mac{};
  wire::MacAddr remote_mac{};
  uint32_t flow_label = 0;            ///< 0: derive the UDP source port from both QPNs, as Linux
  uint16_t udp_sport = 0;             ///< non-zero overrides the derived port
  uint32_t path_mtu = 1024;           ///< 256, 512, 1024, 2048 or 4096
  uint32_t rq_psn = 0;                ///< first PSN expected from the peer (the peer's sq_psn)
  uint32_t sq_psn = 0;                ///< first PSN this QP sends
  uint8_t retry_count = 7;            ///< 0..7 (IBTA: not infinite)
  uint8_t rnr_retry = 7;              ///< 0..7, 7 = infinite
  uint8_t local_ack_timeout = 14;     ///< 4.096 µs × 2^t, 0 = infinite
  uint8_t min_rnr_timer = 12;         ///< RNR NAK timer code this QP's responder advertises
  uint32_t inbound_read_limit = 16;   ///< IRL (effective, after negotiation)
  uint32_t outbound_read_limit = 16;  ///< ORL (effective)
  uint8_t tos = 0;                    ///< IPv4 DSCP/ECN (rxe sends 0); ECT: reacts to CNPs
  uint8_t cnp_tos = 0;                ///< IPv4 ToS of the QP's CNPs (RTR clears its ECN bits)
  uint32_t line_rate_mbps = 0;        ///< congestion recovery ends here (0 at RTR: a default)
  uint8_t vlan_tag_bytes = 0;         ///< 4 when the port tags the QP's frames: paced, not built
  /// DCQCN's parameters (the port's; they outlive the QP). Null at RTR: the defaults.
  const config::DcqcnConfig* dcqcn = nullptr;
  uint8_t ttl = 64;  ///< IPv4 TTL or IPv6 hop limit
  uint16_t pkey = wire::kDefaultPkey;
  /// RoCEv2 over IPv6: the QP's frames carry these addresses (local_ip and remote_ip unused);
  /// `tos` is the traffic class and `flow_label` the IPv6 flow label as well.
  bool ipv6 = false;
  wire::Ipv6Addr local_ip6{};
  wire::Ipv6Addr remote_ip6{};
  /// Each inbound RDMA WRITE without immediate also completes on the receive CQ (kRemoteWrite,
  /// consuming no receive): Qp::report_remote_writes.
  bool report_remote_writes = false;
};

// ---------------------------------------------------------------------------------------------
// Role state (item 8: each role's progress as plain data; item 10: RequesterCursor is what is
// saved before building a packet and restored when the sink refuses the buffer).

/// Per send-queue slot: transport progress of that WQE.
struct WqeMeta {
  uint32_t first_psn = 0;
  uint32_t last_psn = 0;
  uint32_t length = 0;       ///< message bytes
  uint32_t read_bytes = 0;   ///< READ: response bytes scattered so far
  uint64_t atomic_orig = 0;  ///< atomic: original value returned
  bool started = false;      ///< PSNs assigned (or local op executed)
  bool done = false;         ///< may complete (acked / responded / local op finished)
  bool rd_atomic = false;    ///< READ or atomic: counts against the ORL
  bool local = false;        ///< FastRegister / Invalidate / Bind: no packet
  WcError error = WcError::kSuccess;
};

struct RequesterCursor {
  uint32_t wqe = 0;     ///< index relative to the send queue head of the WQE being sent
  uint32_t psn = 0;     ///< next PSN to send
  uint32_t offset = 0;  ///< bytes of that WQE already sent
};

struct RequesterState {
  RequesterCursor cur;
  uint32_t max_psn_sent = 0;  ///< highest PSN ever sent + 1 (for retransmit accounting)
  uint32_t rd_atomic_outstanding = 0;
  MrMemo local_mr;  ///< the SGE region last checked (MemoryRegionTable::check_local)
};

// (Ordered by use. The timer fields, which every visit of the QP reads whatever
// its role, come last: in the QP they share a line with the responder's first fields.)
struct CompleterState {
  uint64_t sq_head = 0;      ///< absolute sequence of the send queue head (meta index)
  uint32_t unacked_psn = 0;  ///< oldest PSN not yet acknowledged
  // Loss-adaptive window (completer.cpp window_on_loss / window_on_ack): PSNs the requester may
  // have unacknowledged, between kMinWindow and QpCreateParams::max_unacked_psns. It halves once
  // per loss episode (a go-back-N from a NAK or a timeout whose PSN is past recover_psn) and grows
  // by one PSN per window of PSNs acknowledged, so under random loss p it settles near sqrt(2/p)
  // packets: go-back-N then resends about that many per loss instead of the whole maximum window.
  uint32_t window = 0;
  uint32_t window_acc = 0;   ///< PSNs acknowledged towards the next increase
  uint32_t recover_psn = 0;  ///< max_psn_sent when the window last halved
  // The RTO the next arming uses (0: not known; its inputs, the RTT estimate, the backoff and the
  // local ACK timeout, changed since it was computed). Every response that makes progress re-arms
  // the timer; this makes that an addition.
  uint64_t rto_ns = 0;
  // Adaptive retransmission timer (completer.cpp rto_under): smoothed RTT and its variation from
  // one timed AckReq packet at a time (Karn: never a retransmitted one), and the number of
  // timeouts since the last progress (the timer doubles with each, up to the local ACK timeout).
  uint32_t srtt_ns = 0;  ///< 0: no sample yet
  uint32_t rttvar_ns = 0;
  uint32_t rtt_psn = 0;  ///< PSN being timed
  // Low 32 bits of the absolute send queue sequence the completer's scans start at: every WQE
  // from the head up to it is finished (done or local), so a pipeline of small READs or WRITEs
  // does not walk its completed but unretired WQEs again for each response (completer.cpp).
  uint32_t scan_from = 0;
  uint64_t rtt_start_ns = 0;
  uint64_t last_tx_ns = 0;  ///< when the requester last sent a packet
  uint32_t rnr_psn = 0;
  uint8_t retry_left = 0;
  uint8_t rnr_retry_left = 0;
  bool rtt_timing = false;
  bool probing = false;  ///< a timeout resent only the oldest PSN; its answer decides the rest
  uint8_t backoff = 0;
  bool retried_here = false;  ///< a go-back-N to unacked_psn already ran with no progress since
  bool timer_full = false;    ///< the armed timer is the full local ACK timeout (consumes a retry)
  bool timer_armed = false;
  bool rnr_wait = false;  ///< requester paused until rnr_deadline_ns
  // QueuePair::stall_ns holds a delay for the probe's answer to confirm (learn_stall).
  bool stall_pending = false;
  uint16_t path = PathTable::kUnassigned;  ///< the RcContext::paths slot of the QP's peer
  uint64_t ack_deadline_ns = 0;
  uint64_t rnr_deadline_ns = 0;
};

/// Responder resources for inbound READ and atomic requests (IBTA §9.7.5.1.3 / .4: kept so a
/// duplicate can be answered without re-applying it).
struct ReadResource {
  bool valid = false;
  bool atomic = false;
  bool pending = false;    ///< responses still to transmit
  uint32_t first_psn = 0;  ///< PSN of the original request
  uint32_t last_psn = 0;
  uint32_t exec_psn = 0;   ///< PSN the current (re-)execution started at (its FIRST/ONLY)
  uint32_t tx_psn = 0;     ///< PSN of the next response packet
  uint64_t va = 0;         ///< next byte to read
  uint32_t remaining = 0;  ///< bytes still to send
  uint32_t rkey = 0;
  uint64_t atomic_orig = 0;
};

enum class InMessage : uint8_t { kNone, kSend, kWrite };

struct ResponderState {
  // (Ordered by use. What every visit reads comes first, then what a WRITE or a
  // SEND packet reads; the receive WQE, which only SENDs use, last.)
  // Delayed ACK: executed packets no AckReq asked about are acknowledged by this time at the
  // latest (0: none waiting), so a requester that paused mid-message never times out on us.
  uint64_t ack_due_ns = 0;
  // The one pending ACK/NAK (coalesced: a newer one replaces an older one).
  bool ctl_pending = false;
  uint8_t ctl_syndrome = 0;
  bool error_after_ctl = false;  ///< fatal NAK: move the QP to ERROR once it is sent
  InMessage in_msg = InMessage::kNone;
  uint32_t ctl_psn = 0;
  uint32_t psn = 0;  ///< expected PSN
  uint32_t msn = 0;  ///< messages completed (AETH MSN)
  uint32_t unacked_packets = 0;
  bool nak_outstanding = false;  ///< sequence/RNR NAK sent: drop later packets until `psn` comes
  bool ack_fresh = false;        ///< the pending ACK was asked for in this poll's receive burst
  // Receive WQE of the SEND (or WRITE-with-immediate) in progress.
  bool have_recv = false;
  bool recv_from_srq = false;
  uint32_t recv_offset = 0;
  // RDMA WRITE in progress.
  uint32_t write_rkey = 0;  ///< checked again on every later packet (deregister/invalidate)
  uint32_t write_remaining = 0;
  /// QpConnectParams::report_remote_writes: WRITEs take the general path, which reports them.
  /// (In the padding ahead of write_va: the hot fields keep their places.)
  bool report_writes = false;
  uint64_t write_va = 0;
  MrMemo remote_mr;  ///< the region a peer's request last passed (MemoryRegionTable::check_remote)
  // Read/atomic resources: a ring of `irl_capacity` entries; res_next is the slot the next
  // request takes (and, going round, the oldest one).
  uint32_t res_next = 0;
  // Bytes a WRITE with immediate moved (reported by its receive completion).
  uint32_t write_total = 0;
  RecvWqe recv{};
};

/// The engine's bookkeeping of a QP (rc_engine.cpp): whether it is on the run list, when its
/// earliest timer entry fires, and what kept it busy. Only the owning core touches it.
struct QpSchedule {
  uint32_t slot = 0;             ///< per-core number (doorbell slot, index in the engine's table)
  bool tx_stalled = false;       ///< the sink refused a buffer: try again on the next poll
  bool rq_armed = false;         ///< in ERROR: receive posts ring the doorbell
  bool overrun_seen = false;     ///< a CQ of this QP overran and the engine swept the others
  uint64_t timer_at = kNoTimer;  ///< deadline of this QP's live timer-heap entry
  static constexpr uint64_t kNoTimer = UINT64_MAX;
};

/// Loss-recovery counters of one QP (telemetry /rocedp/qps). Written on the owning core only,
/// outside the per-packet hot lines (kept at the end of the QueuePair).
struct QpStats {
  uint64_t retransmits = 0;      ///< request packets sent again (go-back-N)
  uint64_t timeouts = 0;         ///< retransmission timer expiries (probes and full timeouts)
  uint64_t naks_sent = 0;        ///< PSN sequence error NAKs this QP's responder sent
  uint64_t naks_received = 0;    ///< NAKs (any code but RNR) this QP's requester received
  uint64_t duplicates = 0;       ///< duplicate requests (responder) and responses (requester)
  uint64_t rnr_waits = 0;        ///< RNR NAKs that paused the requester
  uint64_t timeout_wait_ns = 0;  ///< idle time from the last packet sent to each timeout
};

/// What the data path tests of a QP's congestion control (in line 0's spare byte).
struct CongestionFlags {
  bool cnp_due : 1 = false;    ///< a CE-marked packet arrived: send a CNP (congestion.hpp)
  bool paced : 1 = false;      ///< a CNP cut the send rate: frames wait for the pacing clock
  bool pace_wait : 1 = false;  ///< the requester stopped for the clock: wake it (sync_timer)
};

/// Congestion control of one QP (congestion.hpp: DCQCN's notification and reaction points).
/// Cold: only a QP that receives CE-marked packets or CNPs touches it; CongestionFlags holds the
/// flags the data path tests. What the connection fixed (ECT, the CNPs' ToS, the line rate,
/// DCQCN's parameters) is read from QpConnectParams.
struct CongestionState {
  static constexpr uint32_t kAlphaOne = 1u << 16;  ///< alpha is fixed point: 1.0
  uint32_t rate_mbps = 0;                          ///< Rc, the current rate (cc_flags.paced)
  uint32_t target_mbps = 0;                        ///< Rt, where fast recovery converges
  uint32_t alpha = kAlphaOne;
  uint32_t pace_remainder_ps = 0;  ///< the pacing clock's part of a nanosecond still to charge
  uint32_t timer_steps = 0;        ///< rate increases by the timer since the last cut
  uint32_t byte_steps = 0;         ///< rate increases by the byte counter since the last cut
  uint32_t bytes = 0;              ///< sent towards the next byte step
  uint64_t next_tx_ns = 0;         ///< the pacing clock: when the next frame may leave
  uint64_t last_cut_ns = 0;
  uint64_t alpha_at_ns = 0;     ///< next alpha decay
  uint64_t increase_at_ns = 0;  ///< next timer increase
  uint64_t last_cnp_ns = 0;     ///< the last CNP sent
  // Telemetry (/rocedp/qps).
  uint64_t ce_received = 0;  ///< packets that arrived marked CE
  uint64_t cnps_sent = 0;
  uint64_t cnps_received = 0;  ///< CNPs from the peer (ECN-capable or not)
  uint64_t rate_cuts = 0;
};

/// Bytes of the prebuilt Ethernet+IPv4+UDP+BTH prefix of a QP's frames (no VLAN, no IP options:
/// 14 + 20 + 8 + 12); extension headers follow it.
inline constexpr size_t kHeaderTemplateLen = 54;
/// The same prefix of an IPv6 QP's frames (14 + 40 + 8 + 12).
inline constexpr size_t kHeaderTemplateLen6 = 74;

/// What an IPv6 QP has beyond the IPv4 ones (cold, allocated at RTR for IPv6 QPs only): its
/// frame template, whose IPv6 header holds its addresses (source ours, destination the peer's).
struct Ipv6Path {
  uint8_t hdr[kHeaderTemplateLen6]{};
  uint32_t fold = 0;  ///< wire::ipv6_fold of the peer's address: the path table's key for it
};

// ---------------------------------------------------------------------------------------------

class alignas(64) QueuePair {
 public:
  /// Control path: allocates every per-QP structure. STATUS_INVALID_PARAMETER (missing queue or
  /// CQ, both rq and srq), STATUS_INSUFFICIENT_RESOURCES. The QP starts in INIT.
  static std::unique_ptr<QueuePair> create(uint32_t qpn, const QpCreateParams& params,
                                           NTSTATUS* status);

  /// INIT -> RTR with the peer's parameters (responder live). STATUS_INVALID_DEVICE_STATE if
  /// the QP is not in INIT; STATUS_INVALID_PARAMETER for a bad MTU, retry count or IRL.
  NTSTATUS modify_to_rtr(const QpConnectParams& params);
  /// RTR -> RTS (requester live; posts accepted). STATUS_INVALID_DEVICE_STATE otherwise.
  NTSTATUS modify_to_rts();
  /// Both steps, as ibv_rc_pingpong does after its exchange.
  NTSTATUS connect(const QpConnectParams& params);

  uint32_t qpn() const { return qpn_; }
  QpState state() const { return state_; }
  const QpConnectParams& conn() const { return conn_; }
  const QpCreateParams& params() const { return params_; }
  /// conn()'s fields that packets read, kept in the hot lines (set at RTR).
  uint32_t path_mtu() const { return path_mtu_; }
  /// IPv4 addresses (host order); an IPv6 QP has wire::kIpv6DstTag and 0, as its packets parse.
  uint32_t local_ip() const { return local_ip_; }
  uint32_t remote_ip() const { return remote_ip_; }
  /// RoCEv2 over IPv6 (set at RTR): the frames come from ipv6_path().
  bool ipv6() const { return ipv6_; }
  const Ipv6Path& ipv6_path() const { return *ip6_; }
  /// Whether the IPv6 header at `ip6` is from this QP's peer to this QP (an IPv6 QP only).
  bool ipv6_matches(const uint8_t* ip6) const {
    const uint8_t* ours = ip6_->hdr + hdr_l3();  // the template's header: from us to the peer
    return std::memcmp(ip6 + wire::ipv6_off::kSrc, ours + wire::ipv6_off::kDst, 16) == 0 &&
           std::memcmp(ip6 + wire::ipv6_off::kDst, ours + wire::ipv6_off::kSrc, 16) == 0;
  }
  /// The peer, as the engine's path table knows it (IPv4 address, or an IPv6 address folded).
  uint32_t path_key() const { return ipv6_ ? ip6_->fold : remote_ip_; }
  uint8_t local_ack_timeout() const { return local_ack_timeout_; }
  uint8_t retry_count() const { return retry_count_; }
  uint8_t rnr_retry() const { return rnr_retry_; }

  // ---- owning core: used by the role code ----
  /// Send-queue requests published and not yet retired, and the i-th of them: from the
  /// completer's head (comp.sq_head moves with every release), so the ring's head line stays cold.
  uint32_t sq_readable() const { return sq_ring_->readable_from_st(comp.sq_head); }
  SendWqe& sq_at(uint32_t i) { return sq_ring_->slot_st(comp.sq_head + i); }
  /// The send queue's ring (cached: one pointer hop less per packet).
  SendRing& sq_ring() { return *sq_ring_; }
  /// Prefetches the lines the per-packet path reads (the engine calls it a few QPs ahead).
  void prefetch() const {
    const char* p = reinterpret_cast<const char*>(this);
    for (size_t off = 0; off < kHotBytes; off += 64) __builtin_prefetch(p + off);
  }
  WqeMeta& meta_at(uint32_t i) { return meta_[(comp.sq_head + i) & meta_mask_]; }
  ReadResource& resource(uint32_t i) { return resources_[i % irl_capacity_]; }
  uint32_t irl_capacity() const { return irl_capacity_; }
  /// Frame template: Ethernet/IP/UDP/BTH fields filled at RTR.
  wire::PacketFields& tmpl() { return tmpl_; }
  /// The same template as bytes (CONVENTIONS.md 11: the per-packet header build is a copy plus
  /// a few stores): Ethernet..BTH with lengths, IP id, checksum, opcode, flags and PSN to patch.
  const uint8_t* hdr_bytes() const { return hdr_bytes_; }
  /// Where the IP header begins: the template is never tagged (a port's VLAN is its own stage).
  static constexpr uint32_t hdr_l3() { return wire::kEthHdrLen; }
  /// IPv4 header checksum partial sum of the template (total length, id, checksum = 0).
  uint32_t hdr_ip_sum() const { return hdr_ip_sum_; }
  void set_state(QpState s) { state_ = s; }

  // The object is laid out by line (queue_pair.cpp checks it). At many QPs every line a message
  // touches is a cache miss, so a message reads few of them: line 0 and the two after it are
  // read by every visit and packet, the role states follow, a requester's first and a
  // responder's last, and the fields that every visit reads of both sit where they meet: a
  // WRITE reads lines 0-5 of its requester's QP and lines 0-2, 5 and 6 of its responder's.

  // ---- Line 0: every visit and packet, whatever the role. ----
 private:
  uint32_t qpn_;
  QpState state_ = QpState::kReset;
  bool ipv6_ = false;  // conn_.ipv6

 public:
  bool flush_requested = false;  ///< Flush() arrived; the next poll moves the QP to ERROR
  WcError fatal_error = WcError::kSuccess;  ///< status the failing WQE completes with

 private:
  uint8_t local_ack_timeout_ = 0;  // conn_.local_ack_timeout (each RTT sample reads it)
  uint8_t retry_count_ = 0;        // conn_.retry_count (each ACK that makes progress reads it)
  uint8_t rnr_retry_ = 0;          // conn_.rnr_retry (the same)

 public:
  CongestionFlags cc_flags;  ///< congestion control's per-visit flags (CongestionState: cold)

 private:
  uint32_t hdr_ip_sum_ = 0;

 public:
  QpSchedule sched;

 private:
  SendRing* sq_ring_ = nullptr;
  std::unique_ptr<WqeMeta[]> meta_;
  uint32_t meta_mask_ = 0;
  uint32_t local_ip_ = 0;   // conn_.local_ip
  uint32_t remote_ip_ = 0;  // conn_.remote_ip

 public:
  uint32_t resources_pending = 0;  ///< read/atomic resources with responses still to send

  // ---- Line 1: the create parameters (the CQs, the PD, the context completions carry). ----
 private:
  alignas(64) QpCreateParams params_;

  // ---- Line 2: the frame template. ----
  alignas(64) uint8_t hdr_bytes_[kHeaderTemplateLen]{};
  uint32_t path_mtu_ = 0;  // conn_.path_mtu
  uint32_t irl_capacity_ = 0;

  // ---- Lines 3-6: the roles. ----
 public:
  RequesterState req;
  CompleterState comp;  ///< its timer fields last, in line 5
  ResponderState resp;  ///< its first fields in line 5; the receive WQE (SENDs) after line 6

  // ---- Cold: control path, READ/atomic responder, frames the byte template does not cover. ----
 private:
  QueuePair(uint32_t qpn, const QpCreateParams& params) : qpn_(qpn), params_(params) {}

  void build_header_template();

  QpConnectParams conn_{};
  std::unique_ptr<ReadResource[]> resources_;  // allocated at RTR, sized by the negotiated IRL
  std::unique_ptr<Ipv6Path> ip6_;              // allocated at RTR for an IPv6 QP
  wire::PacketFields tmpl_{};

 public:
  QpStats stats;       ///< cold: loss-recovery counters (telemetry)
  CongestionState cc;  ///< cold: congestion control (congestion.hpp)
  /// Cold: after a spurious timeout, how long its ACK took since the last packet it confirms left,
  /// kept (while comp.stall_pending) until the probe's own answer (a repeated ACK) shows that ACK
  /// was late, not the answer (completer.cpp learn_stall).
  uint32_t stall_ns = 0;

  /// Bytes from the start of the object that the per-packet path reads: lines 0-6 (queue_pair.cpp
  /// checks that the hot fields end within them).
  static constexpr size_t kHotBytes = 448;
};

// ---------------------------------------------------------------------------------------------
// Shared helpers of the role code (queue_pair.cpp; transmit: transmit.hpp).

/// scatter_to_sges's loop over the list (queue_pair.cpp).
void scatter_to_sges_walk(const NdkSge* sges, uint32_t count, uint32_t offset, const uint8_t* src,
                          uint32_t len);
/// Copies `len` bytes from `src` into the gather/scatter list at byte `offset`. The SGEs have been
/// checked against the MR table when the WQE started (their addresses are this process's memory).
/// Inline for the usual sink, one SGE that holds the bytes: one copy, no call, no loop.
inline void scatter_to_sges(const NdkSge* sges, uint32_t count, uint32_t offset, const uint8_t* src,
                            uint32_t len) {
  if (count == 1 && uint64_t{offset} + len <= sges[0].length) [[likely]] {
    std::memcpy(static_cast<uint8_t*>(sges[0].virtual_address) + offset, src, len);
    return;
  }
  scatter_to_sges_walk(sges, count, offset, src, len);
}
void gather_from_sges(const NdkSge* sges, uint32_t count, uint32_t offset, uint8_t* dst,
                      uint32_t len);

/// Moves the QP to ERROR (idempotent): the requester and responder stop, the send queue is
/// disconnected, and the completer flushes every outstanding request on its next run.
void enter_error(QueuePair& qp, RcContext& ctx, WcError cause,
                 QpErrorReason reason = QpErrorReason::kNone);

/// Number of packets a message of `len` bytes takes at `mtu` (a zero-length message is 1 packet).
/// A path MTU is a power of two (checked at RTR), so this is a shift, not a division.
constexpr uint32_t packets_for(uint64_t len, uint32_t mtu) {
  return len == 0 ? 1 : static_cast<uint32_t>(((len - 1) >> std::countr_zero(mtu)) + 1);
}
static_assert(packets_for(0, 1024) == 1 && packets_for(1, 1024) == 1 &&
              packets_for(1024, 1024) == 1 && packets_for(1025, 1024) == 2 &&
              packets_for(uint64_t{1} << 31, 256) == (1u << 23));

}  // namespace rocedp::rc
