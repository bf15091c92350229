#include "control/cm_connection.hpp"

#include <algorithm>
#include <cstring>

namespace rocedp::control {

using namespace rocedp::wire;

namespace {

// Passive side: longest wait per REP for the RTU (4.096 µs × 2^20 = 4.3 s) and REP resends.
constexpr std::uint8_t kMaxPassiveTimeoutCode = 20;
constexpr std::uint8_t kMaxPassiveRetries = 3;

// A REJ's reason as an NDK status: the peer's CM timing out is a timeout
// (CompleteConnectEx/Accept IO_TIMEOUT); anything else is the given status.
NTSTATUS status_for_rej(std::uint16_t reason, NTSTATUS otherwise) {
  return reason == static_cast<std::uint16_t>(CmRejReason::kTimeout) ? STATUS_IO_TIMEOUT
                                                                     : otherwise;
}

// Private data into a fixed field (callers checked the size); an empty span may
// have a null data() that memcpy must not see.
void copy_pd(std::span<std::uint8_t> dst, std::span<const std::uint8_t> src) {
  if (!src.empty()) std::memcpy(dst.data(), src.data(), std::min(src.size(), dst.size()));
}

template <typename M>
std::pair<std::uint32_t, std::uint32_t> ids_of(const M& m) {
  return {m.local_comm_id, m.remote_comm_id};
}

}  // namespace

std::string_view cm_state_name(CmState s) {
  static constexpr std::string_view kNames[] = {
#define ROCEDP_X(e, n) n,
      ROCEDP_CM_STATES(ROCEDP_X)
#undef ROCEDP_X
  };
  static_assert(std::size(kNames) == static_cast<std::size_t>(CmState::kCount));
  const auto i = static_cast<std::size_t>(s);
  return i < std::size(kNames) ? kNames[i] : "?";
}

std::string_view cm_event_name(CmEventType t) {
  switch (t) {
    case CmEventType::kConnectComplete:
      return "connect complete";
    case CmEventType::kAcceptComplete:
      return "accept complete";
    case CmEventType::kAborted:
      return "aborted";
    case CmEventType::kDisconnected:
      return "disconnected";
    case CmEventType::kDisconnectComplete:
      return "disconnect complete";
    case CmEventType::kReleased:
      return "released";
  }
  return "?";
}

CmConnection::CmConnection(CmSink& sink, const CmConfig& cfg) : sink_(sink), cfg_(cfg) {}

// The per-state dispatch. A switch over every enumerator (-Wswitch checks it
// is complete); REQ_SENT/MRA_RCVD and REQ_RCVD/MRA_SENT share a step function,
// they differ only in the timer that runs.
CmState CmConnection::step(const CmMad* m, std::uint64_t now_ns) {
  switch (state_) {
    case CmState::kIdle:
      return step_idle(m, now_ns);
    case CmState::kReqSent:
    case CmState::kMraRcvd:
      return step_req_sent(m, now_ns);
    case CmState::kRepRcvd:
      return step_rep_rcvd(m, now_ns);
    case CmState::kReqRcvd:
    case CmState::kMraSent:
      return step_req_rcvd(m, now_ns);
    case CmState::kRepSent:
      return step_rep_sent(m, now_ns);
    case CmState::kEstablished:
      return step_established(m, now_ns);
    case CmState::kDreqSent:
      return step_dreq_sent(m, now_ns);
    case CmState::kTimeWait:
      return step_timewait(m, now_ns);
    case CmState::kClosed:
    case CmState::kCount:
      break;
  }
  return step_closed(m, now_ns);
}

// ---------------------------------------------------------------------------
// Plumbing

void CmConnection::emit(CmEventType t, NTSTATUS st, std::uint16_t reason) {
  // NDK lifetime rule: nothing fires after the consumer closed the object,
  // except our own "you may free me" to the owner.
  if (closed_by_consumer_ && t != CmEventType::kReleased) return;
  sink_.cm_event({t, st, reason});
}

void CmConnection::send(std::uint64_t tid, const CmBody& body) {
  sink_.cm_send(make_cm_mad(tid, body));
}

void CmConnection::send_rej(std::uint64_t tid, CmRejReason reason,
                            std::span<const std::uint8_t> pd) {
  CmRej r;
  r.local_comm_id = local_comm_id_;
  r.remote_comm_id = remote_comm_id_;
  switch (state_) {
    case CmState::kReqRcvd:
      r.local_comm_id = 0;
      r.message_rejected = CmMsgResponse::kReq;
      break;
    case CmState::kMraSent:
      r.message_rejected = CmMsgResponse::kReq;
      break;
    case CmState::kRepRcvd:
      r.message_rejected = CmMsgResponse::kRep;
      break;
    default:
      r.message_rejected = CmMsgResponse::kOther;
      break;
  }
  r.reason = static_cast<std::uint16_t>(reason);
  if (reason == CmRejReason::kTimeout) {
    // IBTA Table 109: a Timeout REJ carries the sender's CA GUID as ARI, so a
    // passive side that never told us its comm ID can still find the connection.
    store_be64(r.ari.data(), local_ca_guid_);
    r.rejected_info_length = 8;
  }
  copy_pd(r.private_data, pd);
  send(tid, r);
}

void CmConnection::send_rtu() {
  send(conn_tid_, CmRtu{local_comm_id_, remote_comm_id_, {}});
}

void CmConnection::send_dreq() {
  last_sent_ = make_cm_mad(own_tid(), CmDreq{local_comm_id_, remote_comm_id_, remote_qpn_, {}});
  sink_.cm_send(last_sent_);
}

void CmConnection::send_drep(std::uint64_t tid) {
  send(tid, CmDrep{local_comm_id_, remote_comm_id_, {}});
}

void CmConnection::save_peer_pd(std::span<const std::uint8_t> pd) {
  peer_pd_len_ = std::min(pd.size(), peer_pd_.size());
  copy_pd(peer_pd_, pd.first(peer_pd_len_));
}

bool CmConnection::from_peer(const CmMad& m) const {
  if (const auto* req = std::get_if<CmReq>(&m.body)) {
    return remote_comm_id_ != 0 && req->local_comm_id == remote_comm_id_ &&
           req->local_ca_guid == remote_ca_guid_;
  }
  const auto [local, remote] = std::visit(
      [](const auto& x) -> std::pair<std::uint32_t, std::uint32_t> {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, CmReq>) {
          return {x.local_comm_id, 0};
        } else {
          return ids_of(x);
        }
      },
      m.body);
  if (const auto* rej = std::get_if<CmRej>(&m.body); rej && remote == 0) {
    // REJ Timeout from an active side that never saw our REP: matched by its
    // comm ID and the CA GUID in the ARI (cm.c cm_acquire_rejected_id).
    return rej->reason == static_cast<std::uint16_t>(CmRejReason::kTimeout) &&
           rej->rejected_info_length >= 8 && local == remote_comm_id_ &&
           load_be64(rej->ari.data()) == remote_ca_guid_;
  }
  if (remote != local_comm_id_) return false;
  // Before the REP we do not know the peer's ID; a REJ of a REQ carries 0 (cm.c cm_format_rej).
  return remote_comm_id_ == 0 || local == remote_comm_id_ ||
         (local == 0 && std::holds_alternative<CmRej>(m.body));
}

void CmConnection::enter(CmState s, std::uint64_t now_ns) {
  state_ = s;
  switch (s) {
    case CmState::kEstablished:
      disarm();
      break;
    case CmState::kTimeWait:
      arm(now_ns, cfg_.timewait_ns);
      break;  // IBTA §12.9.8.4
    case CmState::kClosed:
      disarm();
      emit(CmEventType::kReleased, STATUS_SUCCESS);  // last: the owner may free us after this call
      break;
    default:
      break;
  }
}

void CmConnection::run(const CmMad* m, std::uint64_t now_ns) {
  if (m && !from_peer(*m)) return;
  if (!m) disarm();  // a timer step re-arms when it retransmits
  const CmState next = step(m, now_ns);
  if (next != state_) enter(next, now_ns);
}

void CmConnection::on_message(const CmMad& m, std::uint64_t now_ns) {
  run(&m, now_ns);
}

void CmConnection::on_timer(std::uint64_t now_ns) {
  if (deadline_ns_ == kNoTimeout || now_ns < deadline_ns_) return;
  run(nullptr, now_ns);
}

// ---------------------------------------------------------------------------
// Consumer calls

NTSTATUS CmConnection::connect(const CmConnectParams& p, std::uint64_t now_ns) {
  if (state_ != CmState::kIdle) return STATUS_CONNECTION_INVALID;
  if (p.private_data.size() > kMaxCallerData) return STATUS_INVALID_PARAMETER;
  active_ = true;
  local_comm_id_ = p.local_comm_id;
  local_ca_guid_ = p.local_ca_guid;
  local_qpn_ = p.local_qpn;
  CmReq r;
  r.local_comm_id = p.local_comm_id;
  r.service_id = rdma_cm_service_id(p.dst_port);
  r.local_ca_guid = p.local_ca_guid;
  r.local_qpn = p.local_qpn;
  r.responder_resources = p.responder_resources;
  r.initiator_depth = p.initiator_depth;
  r.remote_cm_response_timeout = p.cm_response_timeout;
  r.transport_service_type = 0;  // RC
  r.starting_psn = p.starting_psn;
  r.local_cm_response_timeout = p.cm_response_timeout;
  r.retry_count = p.retry_count;
  r.path_mtu = p.path_mtu;
  r.rnr_retry_count = p.rnr_retry_count;
  r.max_cm_retries = p.max_cm_retries;
  // RoCEv2 GIDs are the IP addresses (IPv4-mapped for IPv4).
  r.primary.local_gid = p.src_ip.bytes;
  r.primary.remote_gid = p.dst_ip.bytes;
  r.primary.traffic_class = p.traffic_class;
  r.primary.hop_limit = p.hop_limit;
  r.primary.local_ack_timeout = p.local_ack_timeout;
  encode_cma_header(r.private_data.data(), {0, p.src_port, p.src_ip, p.dst_ip});
  copy_pd(std::span<std::uint8_t>(r.private_data).subspan(kCmaHdrLen), p.private_data);
  path_mtu_ = p.path_mtu;
  max_retries_ = p.max_cm_retries;
  // IBTA §12.7.30: the REQ's Remote CM Response Timeout is how long the
  // passive side may take to answer; that is our per-attempt wait.
  retry_timeout_ns_ = ib_time_ns(p.cm_response_timeout);
  answer_timeout_code_ = p.cm_response_timeout;
  conn_tid_ = own_tid();
  retries_ = 0;
  last_sent_ = make_cm_mad(conn_tid_, r);
  sink_.cm_send(last_sent_);
  arm(now_ns, retry_timeout_ns_);
  enter(CmState::kReqSent, now_ns);
  return STATUS_PENDING;
}

NTSTATUS CmConnection::on_request(const CmMad& m, std::uint32_t local_comm_id,
                                  std::uint64_t local_ca_guid, std::uint64_t now_ns) {
  if (state_ != CmState::kIdle) return STATUS_CONNECTION_INVALID;
  const auto* req = std::get_if<CmReq>(&m.body);
  if (!req || req->transport_service_type != 0) return STATUS_INVALID_PARAMETER;
  CmaHeader cma;
  if (!decode_cma_header(req->private_data.data(), cma)) return STATUS_INVALID_PARAMETER;
  active_ = false;
  cma_ = cma;
  local_comm_id_ = local_comm_id;
  local_ca_guid_ = local_ca_guid;
  remote_comm_id_ = req->local_comm_id;
  remote_ca_guid_ = req->local_ca_guid;
  remote_qpn_ = req->local_qpn;
  remote_psn_ = req->starting_psn;
  path_mtu_ = req->path_mtu;
  peer_resp_res_ = req->responder_resources;
  peer_init_depth_ = req->initiator_depth;
  peer_retry_count_ = req->retry_count;
  peer_rnr_retry_ = req->rnr_retry_count;
  peer_ack_timeout_ = req->primary.local_ack_timeout;
  peer_traffic_class_ = req->primary.traffic_class;
  // The REQ's Local CM Response Timeout says how fast the active side answers our REP, and its
  // Max CM Retries how often we resend it. Both come from the peer: a REQ asking for 2^31 ×
  // 4.096 µs and 15 retries would hold the listener's slot for days. The wait for the RTU is
  // capped (4.3 s per try as Linux's rdma_cm asks, 4 tries); resending earlier or giving up
  // sooner only costs a peer that slow a REJ (timeout).
  max_retries_ = std::min<std::uint8_t>(req->max_cm_retries, kMaxPassiveRetries);
  answer_timeout_code_ =
      std::min<std::uint8_t>(req->local_cm_response_timeout, kMaxPassiveTimeoutCode);
  retry_timeout_ns_ = ib_time_ns(answer_timeout_code_);
  conn_tid_ = m.hdr.tid;
  save_peer_pd(std::span<const std::uint8_t>(req->private_data).subspan(kCmaHdrLen));
  enter(CmState::kReqRcvd, now_ns);
  return STATUS_SUCCESS;
}

NTSTATUS CmConnection::accept(const CmAcceptParams& p, std::uint64_t now_ns) {
  if (state_ != CmState::kReqRcvd && state_ != CmState::kMraSent) {
    return !active_ && abort_status_ != STATUS_SUCCESS ? STATUS_CONNECTION_ABORTED
                                                       : STATUS_CONNECTION_INVALID;
  }
  if (p.private_data.size() > kMaxCalleeData) return STATUS_INVALID_PARAMETER;
  local_qpn_ = p.local_qpn;
  CmRep r;
  r.local_comm_id = local_comm_id_;
  r.remote_comm_id = remote_comm_id_;
  r.local_qpn = p.local_qpn;
  r.starting_psn = p.starting_psn;
  r.responder_resources = p.responder_resources;
  r.initiator_depth = p.initiator_depth;
  r.target_ack_delay = p.target_ack_delay;
  r.rnr_retry_count = p.rnr_retry_count;
  r.local_ca_guid = local_ca_guid_;
  copy_pd(r.private_data, p.private_data);
  retries_ = 0;
  last_sent_ = make_cm_mad(conn_tid_, r);
  sink_.cm_send(last_sent_);
  arm(now_ns, retry_timeout_ns_);
  enter(CmState::kRepSent, now_ns);
  return STATUS_PENDING;
}

NTSTATUS CmConnection::reject(std::span<const std::uint8_t> pd, std::uint64_t now_ns) {
  if (pd.size() > kCmRejPrivateLen) return STATUS_INVALID_PARAMETER;
  if (state_ != CmState::kReqRcvd && state_ != CmState::kMraSent && state_ != CmState::kRepRcvd) {
    return abort_status_ != STATUS_SUCCESS ? STATUS_CONNECTION_ABORTED : STATUS_CONNECTION_INVALID;
  }
  send_rej(conn_tid_, CmRejReason::kConsumerDefined, pd);
  enter(CmState::kClosed, now_ns);
  return STATUS_SUCCESS;
}

NTSTATUS CmConnection::send_mra(std::uint64_t now_ns) {
  if (state_ == CmState::kMraSent) {
    sink_.cm_send(last_mra_);
    return STATUS_SUCCESS;
  }
  if (state_ != CmState::kReqRcvd) return STATUS_CONNECTION_INVALID;
  last_mra_ = make_cm_mad(
      conn_tid_,
      CmMra{local_comm_id_, remote_comm_id_, CmMsgResponse::kReq, cfg_.mra_service_timeout, {}});
  have_mra_ = true;
  sink_.cm_send(last_mra_);
  enter(CmState::kMraSent, now_ns);
  return STATUS_SUCCESS;
}

NTSTATUS CmConnection::complete_connect(std::uint64_t now_ns) {
  if (state_ == CmState::kRepRcvd) {
    send_rtu();
    enter(CmState::kEstablished, now_ns);
    return STATUS_SUCCESS;
  }
  // The establishment ended after Connect completed and before this call.
  if (active_ && abort_status_ != STATUS_SUCCESS && !closed_by_consumer_) return abort_status_;
  return STATUS_CONNECTION_INVALID;  // no REP yet, already connected, or closed
}

NTSTATUS CmConnection::disconnect(std::uint64_t now_ns) {
  if (state_ == CmState::kEstablished) {
    retries_ = 0;
    send_dreq();
    arm(now_ns, retry_timeout_ns_);
    enter(CmState::kDreqSent, now_ns);
    return STATUS_PENDING;
  }
  if (disconnected_by_peer_) return STATUS_SUCCESS;  // the peer's DREQ already ended it
  return STATUS_CONNECTION_INVALID;
}

void CmConnection::close(std::uint64_t now_ns) {
  if (closed_by_consumer_) return;
  closed_by_consumer_ = true;
  switch (state_) {
    case CmState::kIdle:
      enter(CmState::kClosed, now_ns);
      break;
    case CmState::kReqSent:
    case CmState::kMraRcvd:
      // cm.c cm_destroy_id: an abandoned REQ is rejected with reason Timeout.
      send_rej(conn_tid_, CmRejReason::kTimeout);
      enter(CmState::kClosed, now_ns);
      break;
    case CmState::kReqRcvd:
    case CmState::kMraSent:
    case CmState::kRepRcvd:
    case CmState::kRepSent:
      send_rej(conn_tid_, CmRejReason::kConsumerDefined);
      enter(CmState::kClosed, now_ns);
      break;
    case CmState::kEstablished:
      disconnect(now_ns);
      break;  // DREQ; TIMEWAIT and CLOSED follow
    case CmState::kDreqSent:
    case CmState::kTimeWait:
    case CmState::kClosed:
    case CmState::kCount:
      break;
  }
}

void CmConnection::communication_established(std::uint64_t now_ns) {
  if (state_ != CmState::kRepSent) return;
  emit(CmEventType::kAcceptComplete, STATUS_SUCCESS);
  enter(CmState::kEstablished, now_ns);
}

void CmConnection::stale(std::uint64_t now_ns) {
  if (state_ == CmState::kEstablished) {
    emit(CmEventType::kDisconnected, STATUS_CONNECTION_RESET);
    disconnected_by_peer_ = true;
    retries_ = 0;
    send_dreq();
    arm(now_ns, retry_timeout_ns_);
    enter(CmState::kDreqSent, now_ns);
  } else if (state_ == CmState::kDreqSent) {
    // Already ending, its DREQ unanswered (the peer died): the restarted peer answers a DREQ for
    // the old connection (a DREP for an unknown one), so ask again now rather than at the next
    // retry, and the peer's new REQ meets TimeWait's end instead of our retries.
    send_dreq();
    arm(now_ns, retry_timeout_ns_);
  } else if (state_ == CmState::kRepSent) {
    send_rej(conn_tid_, CmRejReason::kStaleConn);
    emit(CmEventType::kAcceptComplete, STATUS_CONNECTION_ABORTED,
         static_cast<std::uint16_t>(CmRejReason::kStaleConn));
    enter(CmState::kClosed, now_ns);
  }
}

CmMad CmConnection::rej_for(const CmMad& in, CmRejReason reason) {
  CmRej r;
  r.reason = static_cast<std::uint16_t>(reason);
  if (const auto* req = std::get_if<CmReq>(&in.body)) {
    r.remote_comm_id = req->local_comm_id;
    r.message_rejected = CmMsgResponse::kReq;
  } else {
    std::visit(
        [&r](const auto& x) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(x)>, CmReq>)
            r.remote_comm_id = x.local_comm_id;
        },
        in.body);
    r.message_rejected =
        std::holds_alternative<CmRep>(in.body) ? CmMsgResponse::kRep : CmMsgResponse::kOther;
  }
  return make_cm_mad(in.hdr.tid, r);
}

// ---------------------------------------------------------------------------
// Step functions: m == nullptr is the timer.

CmState CmConnection::step_idle(const CmMad*, std::uint64_t) {
  return state_;
}

// REQ_SENT and MRA_RCVD (IBTA Figure 130, active side).
CmState CmConnection::step_req_sent(const CmMad* m, std::uint64_t now_ns) {
  if (!m) {
    if (retries_ < max_retries_) {  // IBTA §12.9.5: resend the identical REQ
      ++retries_;
      sink_.cm_send(last_sent_);
      arm(now_ns, retry_timeout_ns_);
      return CmState::kReqSent;
    }
    send_rej(conn_tid_, CmRejReason::kTimeout);
    emit(CmEventType::kConnectComplete, STATUS_IO_TIMEOUT);
    return CmState::kClosed;
  }
  if (const auto* rep = std::get_if<CmRep>(&m->body)) {
    remote_comm_id_ = rep->local_comm_id;
    remote_ca_guid_ = rep->local_ca_guid;
    remote_qpn_ = rep->local_qpn;
    remote_psn_ = rep->starting_psn;
    peer_resp_res_ = rep->responder_resources;
    peer_init_depth_ = rep->initiator_depth;
    peer_rnr_retry_ = rep->rnr_retry_count;
    save_peer_pd(rep->private_data);
    // The passive side resends its REP (max_retries_ + 1) times, each after our
    // Local CM Response Timeout; past that it has given up on our RTU.
    arm(now_ns, (std::uint64_t{max_retries_} + 1) * ib_time_ns(answer_timeout_code_));
    emit(CmEventType::kConnectComplete, STATUS_SUCCESS);
    return CmState::kRepRcvd;
  }
  if (const auto* rej = std::get_if<CmRej>(&m->body)) {
    save_peer_pd(rej->private_data);
    emit(CmEventType::kConnectComplete, status_for_rej(rej->reason, STATUS_CONNECTION_REFUSED),
         rej->reason);
    return CmState::kClosed;
  }
  if (const auto* mra = std::get_if<CmMra>(&m->body)) {
    if (mra->message_mraed != CmMsgResponse::kReq) return state_;
    // IBTA §12.6.6: the peer needs Service Timeout more; wait that long before resending.
    arm(now_ns, ib_time_ns(mra->service_timeout) + retry_timeout_ns_);
    return CmState::kMraRcvd;
  }
  return state_;
}

CmState CmConnection::step_rep_rcvd(const CmMad* m, std::uint64_t now_ns) {
  if (!m) {  // the consumer never called CompleteConnect in time
    send_rej(conn_tid_, CmRejReason::kTimeout);
    abort_status_ = STATUS_IO_TIMEOUT;
    emit(CmEventType::kAborted, STATUS_IO_TIMEOUT);
    return CmState::kClosed;
  }
  if (const auto* rej = std::get_if<CmRej>(&m->body)) {
    save_peer_pd(rej->private_data);
    abort_status_ = status_for_rej(rej->reason, STATUS_CONNECTION_ABORTED);
    emit(CmEventType::kAborted, abort_status_, rej->reason);
    return CmState::kClosed;
  }
  if (std::holds_alternative<CmDreq>(m->body)) {
    send_drep(m->hdr.tid);
    peer_dreq_tid_ = m->hdr.tid;
    abort_status_ = STATUS_CONNECTION_ABORTED;
    emit(CmEventType::kAborted, abort_status_);
    return CmState::kTimeWait;
  }
  (void)now_ns;
  return state_;  // a duplicate REP waits for the consumer's decision
}

// REQ_RCVD and MRA_SENT (IBTA Figure 131, passive side before Accept).
CmState CmConnection::step_req_rcvd(const CmMad* m, std::uint64_t now_ns) {
  if (!m) return state_;
  if (std::holds_alternative<CmReq>(m->body)) {
    // A duplicate REQ: the active side is about to time out on us (IBTA §12.6.6).
    send_mra(now_ns);
    return state_;
  }
  if (const auto* rej = std::get_if<CmRej>(&m->body)) {
    save_peer_pd(rej->private_data);
    abort_status_ = STATUS_CONNECTION_ABORTED;
    emit(CmEventType::kAborted, abort_status_, rej->reason);
    return CmState::kClosed;
  }
  return state_;
}

CmState CmConnection::step_rep_sent(const CmMad* m, std::uint64_t now_ns) {
  if (!m) {
    if (retries_ < max_retries_) {
      ++retries_;
      sink_.cm_send(last_sent_);
      arm(now_ns, retry_timeout_ns_);
      return state_;
    }
    // The peer never completed (NdkAccept: IO_TIMEOUT).
    send_rej(conn_tid_, CmRejReason::kTimeout);
    emit(CmEventType::kAcceptComplete, STATUS_IO_TIMEOUT);
    return CmState::kClosed;
  }
  if (std::holds_alternative<CmRtu>(m->body)) {
    emit(CmEventType::kAcceptComplete, STATUS_SUCCESS);
    return CmState::kEstablished;
  }
  if (std::holds_alternative<CmReq>(m->body)) {  // our REP was lost: resend it
    sink_.cm_send(last_sent_);
    return state_;
  }
  if (const auto* rej = std::get_if<CmRej>(&m->body)) {
    save_peer_pd(rej->private_data);
    emit(CmEventType::kAcceptComplete, status_for_rej(rej->reason, STATUS_CONNECTION_ABORTED),
         rej->reason);
    return CmState::kClosed;
  }
  if (std::holds_alternative<CmDreq>(m->body)) {
    send_drep(m->hdr.tid);
    peer_dreq_tid_ = m->hdr.tid;
    emit(CmEventType::kAcceptComplete, STATUS_CONNECTION_ABORTED);
    return CmState::kTimeWait;
  }
  if (const auto* mra = std::get_if<CmMra>(&m->body)) {
    // The peer has the REP and asks for time: Linux's rdma_cm MRAs every REP it receives, for
    // 2^24 × 4.096 µs (69 s), then sends its RTU when its consumer answers. That RTU may be lost,
    // and only a REP sent again brings another: so the REP goes again after the usual wait at the
    // most (a peer still busy answers it with another MRA), within the same retries.
    if (mra->message_mraed == CmMsgResponse::kRep) {
      arm(now_ns,
          ib_time_ns(std::min(mra->service_timeout, kMaxPassiveTimeoutCode)) + retry_timeout_ns_);
    }
    return state_;
  }
  return state_;
}

CmState CmConnection::step_established(const CmMad* m, std::uint64_t) {
  if (!m) return state_;
  if (active_ && std::holds_alternative<CmRep>(m->body)) {  // our RTU was lost
    send_rtu();
    return state_;
  }
  if (std::holds_alternative<CmDreq>(m->body)) {
    send_drep(m->hdr.tid);
    peer_dreq_tid_ = m->hdr.tid;
    disconnected_by_peer_ = true;
    emit(CmEventType::kDisconnected, STATUS_SUCCESS);
    return CmState::kTimeWait;
  }
  if (const auto* rej = std::get_if<CmRej>(&m->body)) {
    // The active side's RTU never arrived and the passive side gave up on it
    // (cm.c cm_rej_handler accepts REJ in ESTABLISHED): the connection is gone.
    disconnected_by_peer_ = true;
    emit(CmEventType::kDisconnected, STATUS_CONNECTION_ABORTED, rej->reason);
    return CmState::kTimeWait;
  }
  return state_;  // duplicate RTU / REQ: nothing to do
}

CmState CmConnection::step_dreq_sent(const CmMad* m, std::uint64_t now_ns) {
  if (!m) {
    if (retries_ < max_retries_) {
      ++retries_;
      sink_.cm_send(last_sent_);
      arm(now_ns, retry_timeout_ns_);
      return state_;
    }
    emit(CmEventType::kDisconnectComplete, STATUS_IO_TIMEOUT);
    return CmState::kTimeWait;  // IBTA §12.9.6: DREQ timeout also ends in TimeWait
  }
  if (std::holds_alternative<CmDrep>(m->body)) {
    emit(CmEventType::kDisconnectComplete, STATUS_SUCCESS);
    return CmState::kTimeWait;
  }
  if (std::holds_alternative<CmDreq>(m->body)) {  // both sides disconnected at once
    send_drep(m->hdr.tid);
    peer_dreq_tid_ = m->hdr.tid;
    emit(CmEventType::kDisconnectComplete, STATUS_SUCCESS);
    return CmState::kTimeWait;
  }
  return state_;
}

CmState CmConnection::step_timewait(const CmMad* m, std::uint64_t) {
  if (!m) return CmState::kClosed;
  if (std::holds_alternative<CmDreq>(m->body)) {  // our DREP was lost
    send_drep(m->hdr.tid);
    return state_;
  }
  if (std::holds_alternative<CmReq>(m->body)) {
    // The same REQ again after we left the connection (cm.c cm_dup_req_handler):
    // the peer's view is stale.
    send_rej(m->hdr.tid, CmRejReason::kStaleConn);
    return state_;
  }
  return state_;
}

CmState CmConnection::step_closed(const CmMad*, std::uint64_t) {
  return state_;
}

}  // namespace rocedp::control
