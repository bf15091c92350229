#pragma once
// One connection's IB CM state machine (IBTA Vol 1 §12.9, Figures 130-133),
// active and passive side, with the NTSTATUS outcomes NDK defines for
// Connect, Accept, CompleteConnect(Ex), Reject and Disconnect (DESIGN.md §3,
// ../shared/reference/NDK.md).
//
// Pure: it consumes decoded CM messages, consumer calls and time (`now_ns`),
// and produces CM messages to send plus events through a CmSink. No threads,
// no clock, no DPDK, no allocation after construction. The owner (the NDK
// connector/listener layer on the control thread) routes incoming MADs to the
// right connection, calls on_timer() once now_ns >= next_timeout_ns(), and
// turns events into NDK callbacks.
//
// States (CONVENTIONS.md item 8: enum + name table + one step function per
// state for messages and timer):
//
//   active:  IDLE -connect()-> REQ_SENT -MRA-> MRA_RCVD -REP-> REP_RCVD
//            -complete_connect() sends RTU-> ESTABLISHED
//   passive: (on_request) REQ_RCVD [-send_mra() or dup REQ-> MRA_SENT]
//            -accept() sends REP-> REP_SENT -RTU-> ESTABLISHED
//   both:    ESTABLISHED -disconnect()-> DREQ_SENT -DREP-> TIMEWAIT
//            ESTABLISHED -DREQ (DREP sent)-> TIMEWAIT
//            TIMEWAIT -timewait_ns-> CLOSED
//            any pre-established state -REJ / timeout / reject() / close()-> CLOSED

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

#include "dataplane/wire/cm_messages.hpp"
#include "rocedp/status.hpp"

namespace rocedp::control {

#define ROCEDP_CM_STATES(X)      \
  X(kIdle, "IDLE")               \
  X(kReqSent, "REQ_SENT")        \
  X(kMraRcvd, "MRA_RCVD")        \
  X(kRepRcvd, "REP_RCVD")        \
  X(kReqRcvd, "REQ_RCVD")        \
  X(kMraSent, "MRA_SENT")        \
  X(kRepSent, "REP_SENT")        \
  X(kEstablished, "ESTABLISHED") \
  X(kDreqSent, "DREQ_SENT")      \
  X(kTimeWait, "TIMEWAIT")       \
  X(kClosed, "CLOSED")

enum class CmState : std::uint8_t {
#define ROCEDP_X(e, n) e,
  ROCEDP_CM_STATES(ROCEDP_X)
#undef ROCEDP_X
      kCount
};
std::string_view cm_state_name(CmState s);

/// What the NDK layer hears about. Consumer-visible ones map 1:1 to NDK callbacks.
enum class CmEventType : std::uint8_t {
  kConnectComplete,  ///< active: Connect's completion. SUCCESS (REP arrived: CompleteConnect
                     ///< allowed), CONNECTION_REFUSED (REJ; rej_reason + peer private data),
                     ///< IO_TIMEOUT
  kAcceptComplete,   ///< passive: Accept's completion. SUCCESS (RTU), CONNECTION_ABORTED (REJ/DREQ
                     ///< before RTU), IO_TIMEOUT (REP retries exhausted: peer never completed)
  kAborted,          ///< establishment ended while the consumer had no call pending (active in
                     ///< REP_RCVD, passive before Accept): the peer REJected / DREQed
                     ///< (CONNECTION_ABORTED) or we waited too long (IO_TIMEOUT); the next
                     ///< CompleteConnect / Accept returns this status
  kDisconnected,  ///< peer DREQ (or stale) after establishment: the disconnect callback; flush the
                  ///< QP
  kDisconnectComplete,  ///< our Disconnect: SUCCESS (DREP or crossing DREQ) or IO_TIMEOUT (no DREP)
  kReleased,            ///< reached CLOSED: free the object, hold QPN / 4-tuple in the registry
};
std::string_view cm_event_name(CmEventType t);

struct CmEvent {
  CmEventType type{};
  NTSTATUS status = STATUS_SUCCESS;
  std::uint16_t rej_reason = 0;  ///< for REJ-caused outcomes
};

/// The connection's outputs. Called synchronously from inside the call that caused them.
class CmSink {
 public:
  virtual ~CmSink() = default;
  virtual void cm_send(const wire::CmMad& mad) = 0;
  virtual void cm_event(const CmEvent& ev) = 0;
};

struct CmConfig {
  std::uint32_t tid_hi =
      1;  ///< high half of our transaction IDs (the MAD agent's, cm.c cm_form_tid)
  std::uint8_t mra_service_timeout = 20;  ///< announced in our MRAs: 4.096 µs × 2^20 ≈ 4.3 s
  std::uint64_t timewait_ns = 1'000'000'000;
};

/// Active side: what NdkConnect gives us plus what the adapter fills in.
struct CmConnectParams {
  std::uint32_t local_comm_id = 0;  ///< unique among our live connections (the owner allocates)
  std::uint64_t local_ca_guid = 0;
  std::uint32_t local_qpn = 0;
  std::uint32_t starting_psn = 0;
  wire::IpAddress src_ip, dst_ip;  ///< both IPv4 or both IPv6
  std::uint16_t src_port = 0, dst_port = 0;
  std::uint8_t responder_resources = 0;  ///< InboundReadLimit
  std::uint8_t initiator_depth = 0;      ///< OutboundReadLimit
  std::uint8_t path_mtu = 3;             ///< 1024: 1500-byte Ethernet, as Linux picks
  std::uint8_t retry_count = 7;
  std::uint8_t rnr_retry_count = 7;
  std::uint8_t local_ack_timeout = 19;
  std::uint8_t cm_response_timeout = 20;  ///< both ways, as rdma_cm (CMA_CM_RESPONSE_TIMEOUT)
  std::uint8_t max_cm_retries = 15;       ///< CMA_MAX_CM_RETRIES
  std::uint8_t traffic_class = 0;
  std::uint8_t hop_limit = 64;
  std::span<const std::uint8_t> private_data;  ///< ≤ kMaxCallerData (56)
};

/// Passive side: what NdkAccept gives us.
struct CmAcceptParams {
  std::uint32_t local_qpn = 0;
  std::uint32_t starting_psn = 0;
  std::uint8_t responder_resources = 0;  ///< InboundReadLimit
  std::uint8_t initiator_depth = 0;      ///< OutboundReadLimit
  std::uint8_t target_ack_delay = 15;
  std::uint8_t rnr_retry_count = 7;
  std::span<const std::uint8_t> private_data;  ///< ≤ kMaxCalleeData (148)
};

class CmConnection {
 public:
  CmConnection(CmSink& sink, const CmConfig& cfg);

  // --- consumer calls (the NDK layer) ---------------------------------------
  /// Active: sends the REQ. STATUS_PENDING (kConnectComplete follows),
  /// STATUS_CONNECTION_INVALID (not IDLE), STATUS_INVALID_PARAMETER (private data > 56).
  NTSTATUS connect(const CmConnectParams& p, std::uint64_t now_ns);
  /// Passive: a REQ matched a listener. STATUS_SUCCESS, STATUS_CONNECTION_INVALID
  /// (not IDLE), STATUS_INVALID_PARAMETER (not a REQ, not RC, or no rdma_cm IPv4 header).
  NTSTATUS on_request(const wire::CmMad& req, std::uint32_t local_comm_id,
                      std::uint64_t local_ca_guid, std::uint64_t now_ns);
  /// Passive: sends the REP. STATUS_PENDING (kAcceptComplete follows), STATUS_CONNECTION_ABORTED
  /// (the peer already gave up), STATUS_CONNECTION_INVALID (no pending request),
  /// STATUS_INVALID_PARAMETER.
  NTSTATUS accept(const CmAcceptParams& p, std::uint64_t now_ns);
  /// Passive before accept, or active after the REP (NDK allows both): REJ with
  /// reason 28 and private data (≤ 148). STATUS_SUCCESS, STATUS_CONNECTION_ABORTED
  /// (the peer already gave up), STATUS_CONNECTION_INVALID, STATUS_INVALID_PARAMETER.
  NTSTATUS reject(std::span<const std::uint8_t> private_data, std::uint64_t now_ns);
  /// Passive: tell the peer we need more time (IBTA §12.6.6). STATUS_SUCCESS or CONNECTION_INVALID.
  NTSTATUS send_mra(std::uint64_t now_ns);
  /// Active: sends the RTU. STATUS_SUCCESS (ESTABLISHED), STATUS_CONNECTION_INVALID (no REP yet,
  /// already connected, closed), STATUS_CONNECTION_ABORTED (the peer REJected or DREQed after its
  /// REP), STATUS_IO_TIMEOUT (we took longer than the peer waits for an RTU).
  NTSTATUS complete_connect(std::uint64_t now_ns);
  /// Sends the DREQ. STATUS_PENDING (kDisconnectComplete follows), STATUS_SUCCESS (already
  /// disconnected by the peer), STATUS_CONNECTION_INVALID (never established).
  NTSTATUS disconnect(std::uint64_t now_ns);
  /// The connector is closed: REJ before establishment, DREQ after; no consumer event fires
  /// afterwards (NDK lifetime rules), only kReleased once the CM exchange is over.
  void close(std::uint64_t now_ns);
  /// The passive side saw traffic on the QP before the RTU (IBTA §12.9.7.1: the RTU
  /// was lost; "communication established"). Same as an RTU.
  void communication_established(std::uint64_t now_ns);
  /// A new REQ from the peer's QP arrived while this connection is live (IBTA
  /// §12.9.8.3.1): the peer restarted; tear this one down. The owner REJects the
  /// new REQ with kStaleConn (stale_rej()).
  void stale(std::uint64_t now_ns);

  // --- wire and time ---------------------------------------------------------
  /// A CM message addressed to this connection (the owner matched its comm IDs).
  /// Messages for another connection, or unexpected in this state, are ignored.
  void on_message(const wire::CmMad& m, std::uint64_t now_ns);
  /// Call when now_ns >= next_timeout_ns().
  void on_timer(std::uint64_t now_ns);
  std::uint64_t next_timeout_ns() const { return deadline_ns_; }
  static constexpr std::uint64_t kNoTimeout = std::numeric_limits<std::uint64_t>::max();

  // --- what the NDK layer reads ------------------------------------------------
  CmState state() const { return state_; }
  bool active() const { return active_; }
  std::uint32_t local_comm_id() const { return local_comm_id_; }
  std::uint32_t remote_comm_id() const { return remote_comm_id_; }
  std::uint64_t remote_ca_guid() const { return remote_ca_guid_; }
  std::uint32_t remote_qpn() const { return remote_qpn_; }
  /// The Starting PSN of the peer's REQ (passive) or REP (active). Linux ib_cm reads it as the
  /// PSN the peer's receive queue expects first, so it seeds OUR send queue (see
  /// ndk_connector.cpp).
  std::uint32_t remote_starting_psn() const { return remote_psn_; }
  /// Passive: the REQ's Retry Count and RNR Retry Count, which IBTA §12.7.27/§12.7.38 define as how
  /// often the REQ sender wants the receiver (us) to retry. Active: the REP's RNR Retry Count (the
  /// REP has no Retry Count; 0xFF means "not given").
  std::uint8_t peer_retry_count() const { return peer_retry_count_; }
  std::uint8_t peer_rnr_retry_count() const { return peer_rnr_retry_; }
  /// Passive: the REQ's Primary Local ACK Timeout (Linux's passive side derives its QP timeout
  /// from it). 0xFF when not given.
  std::uint8_t peer_local_ack_timeout() const { return peer_ack_timeout_; }
  /// Passive: the Traffic Class of the REQ's primary path (0 on the active side).
  std::uint8_t peer_traffic_class() const { return peer_traffic_class_; }
  std::uint8_t path_mtu() const { return path_mtu_; }
  std::uint8_t peer_responder_resources() const { return peer_resp_res_; }
  std::uint8_t peer_initiator_depth() const { return peer_init_depth_; }
  /// The peer's private data: REQ 56 bytes (after the rdma_cm header), REP 196, REJ 148.
  /// IB CM carries no length, so this is the whole field (as rdma_cm reports it).
  std::span<const std::uint8_t> peer_private_data() const {
    return {peer_pd_.data(), peer_pd_len_};
  }
  const wire::CmaHeader& peer_addresses() const { return cma_; }  ///< passive: from the REQ
  std::uint32_t retries() const { return retries_; }

  /// A REJ answering `incoming` when no connection takes it (IBTA §12.6.7): no listener
  /// for a REQ's service ID -> kInvalidServiceId; a REQ for a QP with a live connection ->
  /// kStaleConn.
  static wire::CmMad rej_for(const wire::CmMad& incoming, wire::CmRejReason reason);

 private:
  CmState step(const wire::CmMad* m, std::uint64_t now_ns);

  // One step function per state: m == nullptr means the timer fired.
  CmState step_idle(const wire::CmMad* m, std::uint64_t now_ns);
  CmState step_req_sent(const wire::CmMad* m, std::uint64_t now_ns);  // REQ_SENT and MRA_RCVD
  CmState step_rep_rcvd(const wire::CmMad* m, std::uint64_t now_ns);
  CmState step_req_rcvd(const wire::CmMad* m, std::uint64_t now_ns);  // REQ_RCVD and MRA_SENT
  CmState step_rep_sent(const wire::CmMad* m, std::uint64_t now_ns);
  CmState step_established(const wire::CmMad* m, std::uint64_t now_ns);
  CmState step_dreq_sent(const wire::CmMad* m, std::uint64_t now_ns);
  CmState step_timewait(const wire::CmMad* m, std::uint64_t now_ns);
  CmState step_closed(const wire::CmMad* m, std::uint64_t now_ns);

  void run(const wire::CmMad* m, std::uint64_t now_ns);
  void enter(CmState s, std::uint64_t now_ns);
  void emit(CmEventType t, NTSTATUS st, std::uint16_t reason = 0);
  void send(std::uint64_t tid, const wire::CmBody& body);
  // REJ as cm.c cm_format_rej fills it for the current state (local comm ID 0
  // in REQ_RCVD; message rejected REQ / REP / other).
  void send_rej(std::uint64_t tid, wire::CmRejReason reason, std::span<const std::uint8_t> pd = {});
  void send_dreq();
  void send_drep(std::uint64_t tid);
  void send_rtu();
  void arm(std::uint64_t now_ns, std::uint64_t after_ns) { deadline_ns_ = now_ns + after_ns; }
  void disarm() { deadline_ns_ = kNoTimeout; }
  bool from_peer(const wire::CmMad& m) const;  // comm IDs match this connection
  void save_peer_pd(std::span<const std::uint8_t> pd);
  // TID of the messages we originate (REQ, DREQ): cm.c cm_form_tid.
  std::uint64_t own_tid() const { return (std::uint64_t{cfg_.tid_hi} << 32) | local_comm_id_; }

  CmSink& sink_;
  CmConfig cfg_;
  CmState state_ = CmState::kIdle;
  bool active_ = false;
  bool closed_by_consumer_ = false;  // no consumer events after close()
  NTSTATUS abort_status_ =
      STATUS_SUCCESS;  // why REP_RCVD / REQ_RCVD ended before the consumer acted
  std::uint64_t deadline_ns_ = kNoTimeout;
  std::uint32_t retries_ = 0;
  std::uint8_t max_retries_ = 15;
  std::uint64_t retry_timeout_ns_ = 0;  // per attempt of the message we retransmit

  std::uint32_t local_comm_id_ = 0;
  std::uint32_t remote_comm_id_ = 0;
  std::uint64_t remote_ca_guid_ = 0;
  std::uint32_t remote_qpn_ = 0;
  std::uint32_t remote_psn_ = 0;
  std::uint8_t path_mtu_ = 0;
  std::uint8_t peer_resp_res_ = 0;
  std::uint8_t peer_init_depth_ = 0;
  std::uint8_t peer_retry_count_ = 0xFF;
  std::uint8_t peer_rnr_retry_ = 0xFF;
  std::uint8_t peer_ack_timeout_ = 0xFF;
  std::uint8_t peer_traffic_class_ = 0;
  std::uint32_t local_qpn_ = 0;
  std::uint64_t conn_tid_ = 0;       // the REQ's TID: REP, RTU, MRA and REJ of the setup reuse it
  std::uint64_t peer_dreq_tid_ = 0;  // for duplicate DREQs in TIMEWAIT
  std::uint64_t local_ca_guid_ = 0;
  // Active: our REQ's local CM response timeout (the peer waits that long per REP for our RTU);
  // passive: the REQ's local CM response timeout (how long we wait per REP for the RTU).
  std::uint8_t answer_timeout_code_ = 0;
  bool disconnected_by_peer_ = false;

  wire::CmMad last_sent_{};  // REQ / REP / MRA / DREQ for retransmission and duplicates
  bool have_mra_ = false;
  wire::CmMad last_mra_{};
  std::array<std::uint8_t, wire::kCmRtuPrivateLen> peer_pd_{};
  std::size_t peer_pd_len_ = 0;
  wire::CmaHeader cma_{};
};

}  // namespace rocedp::control
