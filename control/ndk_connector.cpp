// NDK_CONNECTOR (rocedp/connector.hpp): Connect / Accept / CompleteConnect / Reject /
// Disconnect over the CM agent's connections, QP moves through the QP's owning core.
// Control thread only.

#include <algorithm>
#include <cstring>
#include <new>

#include "control/cm_agent.hpp"
#include "control/ndk_internal.hpp"
#include "dataplane/core_rdma.hpp"

namespace rocedp {

using ndk_detail::Access;

using control::agent_of;
using control::CmAgent;
using control::CmEvent;
using control::CmEventType;
using control::ConnEntry;
using control::ConnPhase;
using control::FourTuple;
using control::ip_of;
using control::sockaddr_of;

namespace {

struct AsyncRef {
  std::shared_ptr<bool> alive;
  CmAgent* agent;
  uint64_t id;
};

// First PSNs: any 24-bit value works (IBTA §9.7.1); spread them so two connections of one QPN
// in a row do not reuse the same sequence space, and so the two ends of one connection (which may
// have equal comm IDs and QPNs) announce different values.
uint32_t initial_psn(uint32_t comm_id, uint64_t ca_guid, uint64_t now) {
  uint64_t v = (uint64_t{comm_id} * 2654435761u) ^ (now >> 10) ^ (ca_guid * 0x9E3779B97F4A7C15ull);
  v ^= v >> 29;
  v ^= v >> 17;
  return static_cast<uint32_t>(v) & 0xFFFFFF;
}

void fire_request(Connector* c, NTSTATUS status) {
  auto& s = *Access::state(*c);
  NdkRequestCompletion cb = s.request;
  void* ctx = s.request_context;
  s.request = nullptr;
  s.request_context = nullptr;
  if (cb == nullptr) return;
  s.agent->defer(
      s.id, [cb, ctx, status] { cb(ctx, status); }, /*request=*/true);
}

void fire_disconnect(Connector* c, NTSTATUS reason) {
  auto& s = *Access::state(*c);
  if (s.disconnect != nullptr) {
    auto cb = s.disconnect;
    void* ctx = s.disconnect_context;
    s.agent->defer(s.id, [cb, ctx] { cb(ctx); });
  } else if (s.disconnect_ex != nullptr) {
    auto cb = s.disconnect_ex;
    void* ctx = s.disconnect_context;
    s.agent->defer(s.id, [cb, ctx, reason] { cb(ctx, reason); });
  }
  s.disconnect = nullptr;
  s.disconnect_ex = nullptr;
}

// NdkFlush by QPN on the owning core (the Qp object may be closed already: an unknown QPN is
// ignored by the engine). Outstanding work completes with STATUS_CANCELLED.
void flush_qp(Connector* c) {
  auto& s = *Access::state(*c);
  if (s.qpn == 0 || s.qp_flushed) return;
  s.qp_flushed = true;
  Adapter::Impl& im = impl_of(*Access::adapter(*c));
  (void)im.call(s.qp_core, &dataplane::CoreRdma::on_flush_qp,
                dataplane::QpTarget{im.rdma_on(s.qp_core), s.qpn}, nullptr, nullptr);
}

uint32_t effective_irl(const Connector::State& s, uint32_t max) {
  uint32_t v = std::min(s.peer_orl, max);
  return s.have_own_limits ? std::min(v, s.irl) : v;
}
uint32_t effective_orl(const Connector::State& s, uint32_t max) {
  uint32_t v = std::min(s.peer_irl, max);
  return s.have_own_limits ? std::min(v, s.orl) : v;
}

NdkQpConnectParams qp_params(const Connector::State& s, CmAgent& a) {
  NdkQpConnectParams p;
  p.remote_qpn = s.remote_qpn;
  if (s.peer.ipv6) {
    std::memcpy(p.remote_ip6, s.peer.ip6.data(), 16);  // RoCEv2 over IPv6
  } else {
    p.remote_ip = s.peer.ip;
  }
  std::memcpy(p.remote_mac, s.remote_mac.data(), 6);
  p.path_mtu = std::min(control::mtu_bytes(s.path_mtu_code), a.max_path_mtu());
  p.local_psn = s.sq_psn;   // the peer's Starting PSN: what its receive queue expects first
  p.remote_psn = s.rq_psn;  // ours, announced in our REQ/REP
  // IBTA §12.7.27/§12.7.38: the REQ's (passive) and REP's (active, RNR only) retry counts say how
  // often the peer wants us to retry; Linux programs its QPs the same way (cm.c
  // cm_init_qp_rts_attr). Our own configuration applies where the peer said nothing.
  p.retry_count = s.peer_retry_count != 0xFF ? s.peer_retry_count : a.setup().retry_count;
  p.rnr_retry = s.peer_rnr_retry != 0xFF ? s.peer_rnr_retry : a.setup().rnr_retry;
  // Passive: never time out faster than the active side's own Local ACK Timeout (Linux derives
  // the passive QP's timeout from it).
  p.local_ack_timeout = a.setup().local_ack_timeout;
  if (s.peer_ack_timeout != 0xFF && s.peer_ack_timeout > p.local_ack_timeout)
    p.local_ack_timeout = std::min<uint8_t>(s.peer_ack_timeout, 31);
  p.inbound_read_limit = effective_irl(s, a.max_read_limit());
  p.outbound_read_limit = effective_orl(s, a.max_read_limit());
  // A port with a DSCP marks every connection (0 here: Qp::connect takes the port's); an unmarked
  // port's passive side follows the REQ's traffic class, as Linux's CM programs its QP.
  p.traffic_class = a.local_tos() != 0 ? 0 : s.peer_traffic_class;
  return p;
}

void snapshot_peer(Connector::State& s, const control::CmConnection& cm) {
  s.have_peer_data = true;
  const auto pd = cm.peer_private_data();
  s.peer_pd_len = static_cast<uint32_t>(std::min(pd.size(), s.peer_pd.size()));
  std::memcpy(s.peer_pd.data(), pd.data(), s.peer_pd_len);
  s.peer_irl = cm.peer_responder_resources();
  s.peer_orl = cm.peer_initiator_depth();
  s.remote_qpn = cm.remote_qpn();
  s.sq_psn = cm.remote_starting_psn();
  s.peer_retry_count = cm.peer_retry_count();
  s.peer_traffic_class = cm.peer_traffic_class();
  s.peer_rnr_retry = cm.peer_rnr_retry_count();
  s.peer_ack_timeout = cm.peer_local_ack_timeout();
  if (cm.path_mtu() != 0) s.path_mtu_code = cm.path_mtu();
}

void detach_conn(Connector* c, uint64_t now) {
  auto& s = *Access::state(*c);
  if (s.conn == nullptr) return;
  ConnEntry* e = s.conn;
  e->owner = nullptr;
  s.conn = nullptr;
  e->cm.close(now);  // REJ before establishment, DREQ after; only kReleased follows
}

// ---- Connect ---------------------------------------------------------------------------------

NTSTATUS start_req(Connector* c, const wire::MacAddr& mac) {
  auto& s = *Access::state(*c);
  CmAgent& a = *s.agent;
  const uint64_t now = a.now_ns();
  control::FourTuple t{ip_of(s.local), s.local.port, ip_of(s.peer), s.peer.port};
  a.resolving_tuples.erase(t);
  const NTSTATUS r = a.registry().reserve_tuple(t, now);
  if (r != STATUS_SUCCESS) return r;
  ConnEntry* e = a.new_connection();
  e->owner = c;
  e->remote_ip = ip_of(s.peer);
  e->remote_mac = mac;
  e->tuple = t;
  e->tuple_reserved = true;
  s.conn = e;
  s.remote_mac = mac;
  s.rq_psn = initial_psn(e->local_comm_id, a.ca_guid(), now);
  control::CmConnectParams p;
  p.local_comm_id = e->local_comm_id;
  p.local_ca_guid = a.ca_guid();
  p.local_qpn = s.qpn;
  p.starting_psn = s.rq_psn;
  p.src_ip = ip_of(s.local);
  p.dst_ip = ip_of(s.peer);
  p.src_port = s.local.port;
  p.dst_port = s.peer.port;
  p.responder_resources = static_cast<uint8_t>(s.irl);
  p.initiator_depth = static_cast<uint8_t>(s.orl);
  p.path_mtu = control::mtu_code(a.max_path_mtu());
  p.retry_count = a.setup().retry_count;
  p.rnr_retry_count = a.setup().rnr_retry;
  p.local_ack_timeout = a.setup().local_ack_timeout;
  p.cm_response_timeout = a.setup().cm_response_timeout;
  p.max_cm_retries = a.setup().max_cm_retries;
  p.traffic_class = a.local_tos();
  p.private_data = s.connect_pd;
  s.phase = ConnPhase::kConnecting;
  const NTSTATUS st = e->cm.connect(p, now);
  if (st != STATUS_PENDING) {
    s.conn = nullptr;
    e->owner = nullptr;
    a.release(e);
    s.phase = ConnPhase::kFailed;
  }
  return st;
}

NTSTATUS connect_common(Connector* c, Qp* qp, NdkSockAddr src, SharedEndpoint* sep,
                        const NdkSockAddr& dst, uint32_t irl, uint32_t orl, const void* pd,
                        uint32_t pd_len, NdkRequestCompletion cb, void* ctx) {
  auto& s = *Access::state(*c);
  CmAgent& a = *s.agent;
  if (Access::closing(*c) || qp == nullptr || cb == nullptr || Access::closing(*qp) ||
      Access::adapter(*qp) != Access::adapter(*c) || pd_len > wire::kMaxCallerData ||
      (pd_len != 0 && pd == nullptr) || irl > a.max_read_limit() || orl > a.max_read_limit() ||
      irl > 255 || orl > 255) {
    return STATUS_INVALID_PARAMETER;
  }
  if (s.phase != ConnPhase::kIdle) return STATUS_CONNECTION_ACTIVE;
  const wire::IpAddress dst_ip = ip_of(dst);
  // The source is of the destination's family: the port's address of it for the wildcard (none
  // for IPv6 on a port without an IPv6 address: INVALID_ADDRESS).
  if (ip_of(src).is_any()) src = sockaddr_of(a.local_ip_for(dst_ip), src.port);
  const wire::IpAddress src_ip = ip_of(src);
  if (src_ip.is_v4() != dst_ip.is_v4() || src_ip.is_any()) return STATUS_INVALID_ADDRESS;
  bool own = false;
  if (sep == nullptr) {
    uint16_t port = 0;
    const NTSTATUS st =
        a.registry().bind(src_ip, src.port, control::BindingOwner::kConnector, &port);
    if (st != STATUS_SUCCESS) return st;
    src.port = port;
    own = true;
  }
  auto undo = [&] {
    if (own) a.registry().unbind(src_ip, src.port);
  };
  const control::FourTuple t{src_ip, src.port, dst_ip, dst.port};
  if (a.registry().tuple_in_use(t, a.now_ns()) || a.resolving_tuples.count(t) != 0) {
    undo();
    return STATUS_ADDRESS_ALREADY_EXISTS;
  }
  a.resolving_tuples.insert(t);
  s.active = true;
  s.local = src;
  s.peer = dst;
  s.have_local = true;
  s.own_binding = own;
  s.endpoint = sep;
  if (sep != nullptr) ++Access::users(*sep);
  s.irl = irl;
  s.orl = orl;
  s.have_own_limits = true;
  s.qp = qp;
  s.qpn = qp->qpn();
  s.qp_core = qp->core();
  s.connect_pd.assign(static_cast<const uint8_t*>(pd), static_cast<const uint8_t*>(pd) + pd_len);
  s.phase = ConnPhase::kResolving;

  struct Inline {
    bool in_call = true;
    bool reachable = false;
    wire::MacAddr mac{};
  };
  auto il = std::make_shared<Inline>();
  std::shared_ptr<bool> alive = a.alive;
  const uint64_t id = s.id;
  CmAgent* ap = &a;
  const bool done = a.resolve(dst_ip, [il, alive, ap, id](bool ok, const wire::MacAddr& mac) {
    if (il->in_call) {
      il->reachable = ok;
      il->mac = mac;
      return;
    }
    if (!*alive) return;
    Connector* cc = ap->connector(id);
    if (cc == nullptr || Access::state(*cc)->phase != ConnPhase::kResolving) return;
    // ARP gave up: NdkConnect's STATUS_HOST_UNREACHABLE, asynchronously.
    auto& cs = *Access::state(*cc);
    ap->resolving_tuples.erase(
        FourTuple{ip_of(cs.local), cs.local.port, ip_of(cs.peer), cs.peer.port});
    const NTSTATUS st = ok ? start_req(cc, mac) : STATUS_HOST_UNREACHABLE;
    if (st != STATUS_PENDING) {
      Access::state(*cc)->phase = ConnPhase::kFailed;
      fire_request(cc, st);
    }
  });
  il->in_call = false;
  s.request = cb;
  s.request_context = ctx;
  if (!done) return STATUS_PENDING;
  const NTSTATUS st = il->reachable ? start_req(c, il->mac) : STATUS_HOST_UNREACHABLE;
  if (st != STATUS_PENDING) {
    // Inline failure: no callback, and the connector may be used again.
    a.resolving_tuples.erase(t);
    s.request = nullptr;
    s.request_context = nullptr;
    s.phase = ConnPhase::kIdle;
    s.have_local = false;
    if (sep != nullptr) --Access::users(*sep);
    s.endpoint = nullptr;
    undo();
    s.own_binding = false;
  }
  return st;
}

// ---- QP moves --------------------------------------------------------------------------------

void complete_qp_done(void* context, NTSTATUS status) {
  std::unique_ptr<AsyncRef> ref(static_cast<AsyncRef*>(context));
  if (!*ref->alive) return;
  CmAgent& a = *ref->agent;
  Connector* c = a.connector(ref->id);
  if (c == nullptr) return;  // closed meanwhile: nothing fires
  auto& s = *Access::state(*c);
  if (s.phase != ConnPhase::kCompleting) return;
  NTSTATUS st = status;
  if (st != STATUS_SUCCESS) {
    // The QP could not be connected by the time the request ran on its core (flushed, in
    // error, already connected, closed): seed 000's asynchronous STATUS_CONNECTION_INVALID.
    // The peer's pending Accept ends with our REJ.
    st = STATUS_CONNECTION_INVALID;
    detach_conn(c, a.now_ns());
  } else if (s.conn == nullptr || s.abort_status != STATUS_SUCCESS) {
    // The peer abandoned the establishment while our QP moved (seed 000: async
    // CONNECTION_ABORTED / IO_TIMEOUT).
    st = s.abort_status != STATUS_SUCCESS ? s.abort_status : STATUS_CONNECTION_ABORTED;
  } else {
    st = s.conn->cm.complete_connect(a.now_ns());  // sends the RTU
  }
  if (st == STATUS_SUCCESS) {
    s.phase = ConnPhase::kEstablished;
    s.next_probe_ns = a.now_ns() + a.setup().qp_probe_interval_ns;
  } else {
    s.phase = ConnPhase::kFailed;
    s.disconnect = nullptr;
    s.disconnect_ex = nullptr;
    flush_qp(c);
  }
  fire_request(c, st);
  a.run_deferred();
}

void accept_qp_done(void* context, NTSTATUS status) {
  std::unique_ptr<AsyncRef> ref(static_cast<AsyncRef*>(context));
  if (!*ref->alive) return;
  CmAgent& a = *ref->agent;
  Connector* c = a.connector(ref->id);
  if (c == nullptr) return;
  auto& s = *Access::state(*c);
  if (s.phase != ConnPhase::kAccepting) return;
  NTSTATUS st = status;
  if (st == STATUS_SUCCESS) {
    if (s.conn == nullptr || s.abort_status != STATUS_SUCCESS) {
      st = STATUS_CONNECTION_ABORTED;
    } else {
      control::CmAcceptParams p;
      p.local_qpn = s.qpn;
      p.starting_psn = s.rq_psn;
      p.responder_resources = static_cast<uint8_t>(effective_irl(s, a.max_read_limit()));
      p.initiator_depth = static_cast<uint8_t>(effective_orl(s, a.max_read_limit()));
      p.rnr_retry_count = a.setup().rnr_retry;
      p.private_data = s.connect_pd;
      st = s.conn->cm.accept(p, a.now_ns());  // sends the REP; the RTU completes the Accept
    }
  }
  if (st != STATUS_PENDING) {
    s.phase = ConnPhase::kFailed;
    s.disconnect = nullptr;
    s.disconnect_ex = nullptr;
    flush_qp(c);
    fire_request(c, st == STATUS_SUCCESS ? STATUS_CONNECTION_ABORTED : st);
  }
  a.run_deferred();
}

NTSTATUS complete_common(Connector* c, NdkDisconnectEventCallback d,
                         NdkDisconnectEventCallbackEx dex, void* dctx, NdkRequestCompletion cb,
                         void* ctx) {
  auto& s = *Access::state(*c);
  CmAgent& a = *s.agent;
  if (cb == nullptr) return STATUS_INVALID_PARAMETER;
  if (Access::closing(*c) || !s.active) return STATUS_CONNECTION_INVALID;
  if (s.phase == ConnPhase::kFailed && s.abort_status != STATUS_SUCCESS) return s.abort_status;
  if (s.phase != ConnPhase::kConnected || s.conn == nullptr) return STATUS_CONNECTION_INVALID;
  if (s.conn->cm.state() != control::CmState::kRepRcvd) {
    // Let the state machine say why (aborted / timed out / invalid).
    return s.conn->cm.complete_connect(a.now_ns());
  }
  // The QP given to Connect may have been closed (and freed) since: it is looked up by identity
  // and QPN among the adapter's live QPs before it is touched.
  if (!ndk_detail::qp_alive(*Access::adapter(*c), s.qp, s.qpn) || Access::closing(*s.qp))
    return STATUS_CONNECTION_INVALID;
  auto* ref = new AsyncRef{a.alive, &a, s.id};
  const NTSTATUS st = s.qp->connect(qp_params(s, a), &complete_qp_done, ref);
  if (st != STATUS_PENDING) {
    delete ref;
    return st == STATUS_INVALID_PARAMETER ? STATUS_CONNECTION_INVALID : st;
  }
  s.phase = ConnPhase::kCompleting;
  s.disconnect = d;
  s.disconnect_ex = dex;
  s.disconnect_context = dctx;
  s.request = cb;
  s.request_context = ctx;
  return STATUS_PENDING;
}

NTSTATUS accept_common(Connector* c, Qp* qp, uint32_t irl, uint32_t orl, const void* pd,
                       uint32_t pd_len, NdkDisconnectEventCallback d,
                       NdkDisconnectEventCallbackEx dex, void* dctx, NdkRequestCompletion cb,
                       void* ctx) {
  auto& s = *Access::state(*c);
  CmAgent& a = *s.agent;
  if (qp == nullptr || cb == nullptr || Access::closing(*qp) ||
      Access::adapter(*qp) != Access::adapter(*c) || pd_len > wire::kMaxCalleeData ||
      (pd_len != 0 && pd == nullptr) || irl > a.max_read_limit() || orl > a.max_read_limit()) {
    return STATUS_INVALID_PARAMETER;
  }
  if (Access::closing(*c) || s.active) return STATUS_CONNECTION_INVALID;
  if (s.phase == ConnPhase::kFailed && s.abort_status != STATUS_SUCCESS)
    return STATUS_CONNECTION_ABORTED;
  if (s.phase != ConnPhase::kRequest || s.conn == nullptr) return STATUS_CONNECTION_INVALID;
  s.irl = irl;
  s.orl = orl;
  s.have_own_limits = true;
  s.qp = qp;
  s.qpn = qp->qpn();
  s.qp_core = qp->core();
  s.rq_psn = initial_psn(s.conn->local_comm_id, a.ca_guid(), a.now_ns());
  s.connect_pd.assign(static_cast<const uint8_t*>(pd), static_cast<const uint8_t*>(pd) + pd_len);
  auto* ref = new AsyncRef{a.alive, &a, s.id};
  // IBTA §12.9.7 / rdma_cm: the passive QP is ready to receive (RTR) and send (RTS) before its
  // REP leaves, so the peer may send as soon as it has sent the RTU.
  const NTSTATUS st = qp->connect(qp_params(s, a), &accept_qp_done, ref);
  if (st != STATUS_PENDING) {
    delete ref;
    s.qpn = 0;
    return st;
  }
  s.phase = ConnPhase::kAccepting;
  s.disconnect = d;
  s.disconnect_ex = dex;
  s.disconnect_context = dctx;
  s.request = cb;
  s.request_context = ctx;
  return STATUS_PENDING;
}

NTSTATUS copy_address(const NdkSockAddr& from, bool have, NdkSockAddr* to, uint32_t* size) {
  if (size == nullptr) return STATUS_INVALID_PARAMETER;
  const uint32_t need = sizeof(NdkSockAddr);
  const bool fits = *size >= need && to != nullptr;
  *size = need;
  if (!have) return STATUS_CONNECTION_INVALID;
  if (!fits) return STATUS_BUFFER_TOO_SMALL;
  *to = from;
  return STATUS_SUCCESS;
}

Connector* new_connector(Adapter& adapter, CmAgent& a) {
  auto* c = new (std::nothrow) Connector();
  auto* s = new (std::nothrow) Connector::State();
  if (c == nullptr || s == nullptr) {
    delete c;
    delete s;
    return nullptr;
  }
  ndk_detail::init_header(*c, Connector::kType, &adapter);
  Access::state(*c) = s;
  s->agent = &a;
  s->id = a.add_connector(c);
  ++Access::children(adapter);
  return c;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public API

NTSTATUS create_connector(Adapter& adapter, NdkCreateCompletion, void*, Connector** out) {
  ROCEDP_ON_CONTROL(&adapter, create_connector(adapter, nullptr, nullptr, out));
  if (out == nullptr) return STATUS_INVALID_PARAMETER;
  CmAgent* a = agent_of(adapter);
  if (a == nullptr || Access::closing(adapter)) return STATUS_INVALID_DEVICE_STATE;
  if (a->open_connectors >= impl_of(adapter).setup.limits.max_connectors)
    return STATUS_INSUFFICIENT_RESOURCES;
  Connector* c = new_connector(adapter, *a);
  if (c == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
  *out = c;
  return STATUS_SUCCESS;
}

NTSTATUS Connector::connect(Qp* qp, const NdkSockAddr& source, const NdkSockAddr& destination,
                            uint32_t irl, uint32_t orl, const void* pd, uint32_t pd_len,
                            NdkRequestCompletion completion, void* context) {
  ROCEDP_ON_CONTROL(this,
                    connect(qp, source, destination, irl, orl, pd, pd_len, completion, context));
  const NTSTATUS st = connect_common(this, qp, source, nullptr, destination, irl, orl, pd, pd_len,
                                     completion, context);
  state_->agent->run_deferred();
  return st;
}

NTSTATUS Connector::connect_with_shared_endpoint(Qp* qp, SharedEndpoint* endpoint,
                                                 const NdkSockAddr& destination, uint32_t irl,
                                                 uint32_t orl, const void* pd, uint32_t pd_len,
                                                 NdkRequestCompletion completion, void* context) {
  ROCEDP_ON_CONTROL(this, connect_with_shared_endpoint(qp, endpoint, destination, irl, orl, pd,
                                                       pd_len, completion, context));
  if (endpoint == nullptr || endpoint->closing || endpoint->adapter != adapter)
    return STATUS_INVALID_PARAMETER;
  const NTSTATUS st = connect_common(this, qp, Access::address(*endpoint), endpoint, destination,
                                     irl, orl, pd, pd_len, completion, context);
  state_->agent->run_deferred();
  return st;
}

NTSTATUS Connector::complete_connect(NdkDisconnectEventCallback d, void* dctx,
                                     NdkRequestCompletion cb, void* ctx) {
  ROCEDP_ON_CONTROL(this, complete_connect(d, dctx, cb, ctx));
  return complete_common(this, d, nullptr, dctx, cb, ctx);
}

NTSTATUS Connector::complete_connect_ex(NdkDisconnectEventCallbackEx d, void* dctx,
                                        NdkRequestCompletion cb, void* ctx) {
  ROCEDP_ON_CONTROL(this, complete_connect_ex(d, dctx, cb, ctx));
  return complete_common(this, nullptr, d, dctx, cb, ctx);
}

NTSTATUS Connector::accept(Qp* qp, uint32_t irl, uint32_t orl, const void* pd, uint32_t pd_len,
                           NdkDisconnectEventCallback d, void* dctx, NdkRequestCompletion cb,
                           void* ctx) {
  ROCEDP_ON_CONTROL(this, accept(qp, irl, orl, pd, pd_len, d, dctx, cb, ctx));
  return accept_common(this, qp, irl, orl, pd, pd_len, d, nullptr, dctx, cb, ctx);
}

NTSTATUS Connector::accept_ex(Qp* qp, uint32_t irl, uint32_t orl, const void* pd, uint32_t pd_len,
                              NdkDisconnectEventCallbackEx d, void* dctx, NdkRequestCompletion cb,
                              void* ctx) {
  ROCEDP_ON_CONTROL(this, accept_ex(qp, irl, orl, pd, pd_len, d, dctx, cb, ctx));
  return accept_common(this, qp, irl, orl, pd, pd_len, nullptr, d, dctx, cb, ctx);
}

NTSTATUS Connector::reject(const void* pd, uint32_t pd_len) {
  ROCEDP_ON_CONTROL(this, reject(pd, pd_len));
  auto& s = *state_;
  if (pd_len > wire::kMaxCalleeData || (pd_len != 0 && pd == nullptr))
    return STATUS_INVALID_PARAMETER;
  if ((s.phase == ConnPhase::kRequest || s.phase == ConnPhase::kConnected) && s.conn != nullptr) {
    const NTSTATUS st = s.conn->cm.reject(
        std::span<const uint8_t>(static_cast<const uint8_t*>(pd), pd_len), s.agent->now_ns());
    if (st == STATUS_SUCCESS) s.phase = ConnPhase::kFailed;
    return st;
  }
  if (s.phase == ConnPhase::kFailed && s.abort_status != STATUS_SUCCESS)
    return STATUS_CONNECTION_ABORTED;
  return STATUS_CONNECTION_INVALID;
}

NTSTATUS Connector::get_connection_data(uint32_t* irl, uint32_t* orl, void* pd,
                                        uint32_t* pd_len) const {
  ROCEDP_ON_CONTROL(this, get_connection_data(irl, orl, pd, pd_len));
  const auto& s = *state_;
  if (pd_len == nullptr) return STATUS_INVALID_PARAMETER;
  if (!s.have_peer_data) return STATUS_CONNECTION_INVALID;
  const uint32_t max = s.agent->max_read_limit();
  if (irl != nullptr) *irl = effective_irl(s, max);
  if (orl != nullptr) *orl = effective_orl(s, max);
  const uint32_t need = s.peer_pd_len;
  if (pd == nullptr && *pd_len == 0) {
    *pd_len = need;  // a size query
    return STATUS_SUCCESS;
  }
  if (pd == nullptr || *pd_len < need) {
    *pd_len = need;
    return STATUS_BUFFER_TOO_SMALL;
  }
  std::memcpy(pd, s.peer_pd.data(), need);
  *pd_len = need;
  return STATUS_SUCCESS;
}

NTSTATUS Connector::get_local_address(NdkSockAddr* address, uint32_t* size) const {
  ROCEDP_ON_CONTROL(this, get_local_address(address, size));
  return copy_address(state_->local, state_->have_local, address, size);
}
NTSTATUS Connector::get_peer_address(NdkSockAddr* address, uint32_t* size) const {
  ROCEDP_ON_CONTROL(this, get_peer_address(address, size));
  return copy_address(state_->peer, state_->have_local, address, size);
}

NTSTATUS Connector::disconnect(NdkRequestCompletion cb, void* ctx) {
  ROCEDP_ON_CONTROL(this, disconnect(cb, ctx));
  auto& s = *state_;
  if (cb == nullptr) return STATUS_INVALID_PARAMETER;
  if (s.phase == ConnPhase::kDisconnected) {
    // The peer disconnected first (its event did not flush): NdkDisconnect flushes now.
    flush_qp(this);
    return STATUS_SUCCESS;
  }
  if (s.phase != ConnPhase::kEstablished) return STATUS_CONNECTION_INVALID;
  // NdkDisconnect: "the provider must then implicitly flush the QP".
  s.disconnect = nullptr;
  s.disconnect_ex = nullptr;
  if (s.conn == nullptr) {
    s.phase = ConnPhase::kDisconnected;
    flush_qp(this);
    return STATUS_SUCCESS;
  }
  const NTSTATUS st = s.conn->cm.disconnect(s.agent->now_ns());
  flush_qp(this);
  if (st == STATUS_PENDING) {
    s.phase = ConnPhase::kDisconnecting;
    s.request = cb;
    s.request_context = ctx;
    return STATUS_PENDING;
  }
  s.phase = ConnPhase::kDisconnected;
  return st;
}

NTSTATUS Connector::disconnect_ex(bool abortive, NdkRequestCompletion cb, void* ctx) {
  ROCEDP_ON_CONTROL(this, disconnect_ex(abortive, cb, ctx));
  if (!abortive) return disconnect(cb, ctx);
  auto& s = *state_;
  if (cb == nullptr) return STATUS_INVALID_PARAMETER;
  if (s.phase != ConnPhase::kEstablished && s.phase != ConnPhase::kDisconnecting &&
      s.phase != ConnPhase::kDisconnected) {
    return STATUS_CONNECTION_INVALID;
  }
  s.disconnect = nullptr;
  s.disconnect_ex = nullptr;
  const bool graceful_pending = s.phase == ConnPhase::kDisconnecting;
  // The CM connection is handed over: it sends its DREQ (if none went yet) and finishes alone
  // (TimeWait); no event of it reaches this connector any more.
  detach_conn(this, s.agent->now_ns());
  flush_qp(this);
  s.phase = ConnPhase::kDisconnected;
  if (graceful_pending) fire_request(this, STATUS_SUCCESS);
  s.agent->run_deferred();
  return STATUS_SUCCESS;
}

NTSTATUS Connector::close(NdkCloseCompletion completion, void* context) {
  ROCEDP_ON_CONTROL(this, close(completion, context));
  if (closing) return STATUS_INVALID_PARAMETER;
  closing = true;
  auto& s = *state_;
  CmAgent& a = *s.agent;
  const ConnPhase was = s.phase;
  // NDKPI object lifetime: a close does not complete before every pending request on the object
  // has: the pending Connect/Accept/CompleteConnect/Disconnect completes STATUS_CANCELLED, a
  // completion already decided (queued) keeps its status, then the CloseCompletion runs.
  const NdkRequestCompletion pending = s.request;
  void* const pending_context = s.request_context;
  s.request = nullptr;
  s.request_context = nullptr;
  const bool owed = a.take_owed(s.id);
  if (was == ConnPhase::kResolving)
    a.resolving_tuples.erase(FourTuple{ip_of(s.local), s.local.port, ip_of(s.peer), s.peer.port});
  detach_conn(this, a.now_ns());
  if (was == ConnPhase::kEstablished || was == ConnPhase::kAccepting ||
      was == ConnPhase::kCompleting || was == ConnPhase::kDisconnecting)
    flush_qp(this);
  if (s.listener != nullptr) {
    auto& ls = *Access::state(*s.listener);
    ls.spawned.erase(std::remove(ls.spawned.begin(), ls.spawned.end(), this), ls.spawned.end());
  }
  if (s.own_binding) a.registry().unbind(ip_of(s.local), s.local.port);
  SharedEndpoint* sep = s.endpoint;
  a.remove_connector(this);
  Adapter* ad = adapter;
  delete state_;
  delete this;
  if (sep != nullptr) {
    --Access::users(*sep);
    control::shared_endpoint_maybe_free(sep);
  }
  if (pending == nullptr && !owed) {
    ndk_detail::release_child(ad);
    a.run_deferred();
    return STATUS_SUCCESS;  // nothing was pending: closed inline, `completion` not called
  }
  if (pending != nullptr) {
    a.complete_later([pending, pending_context] { pending(pending_context, STATUS_CANCELLED); });
  }
  ++a.closes_pending;
  CmAgent* ap = &a;
  a.complete_later([ap, ad, completion, context] {
    --ap->closes_pending;
    if (completion != nullptr) completion(context);
    ndk_detail::release_child(ad);
  });
  a.run_deferred();
  return STATUS_PENDING;
}

// ---------------------------------------------------------------------------------------------
// Agent side: events and passive requests

namespace control {

void CmAgent::on_connection_event(Connector* c, const CmEvent& ev) {
  auto& s = *Access::state(*c);
  switch (ev.type) {
    case CmEventType::kConnectComplete:
      if (s.conn != nullptr) snapshot_peer(s, s.conn->cm);
      s.phase = ev.status == STATUS_SUCCESS ? ConnPhase::kConnected : ConnPhase::kFailed;
      fire_request(c, ev.status);
      break;
    case CmEventType::kAcceptComplete:
      if (ev.status == STATUS_SUCCESS) {
        s.phase = ConnPhase::kEstablished;
        s.next_probe_ns = now_ns() + setup_.qp_probe_interval_ns;
        if (s.listener != nullptr) {
          auto& sp = Access::state(*s.listener)->spawned;
          sp.erase(std::remove(sp.begin(), sp.end(), c), sp.end());
          s.listener = nullptr;
        }
      } else {
        s.phase = ConnPhase::kFailed;
        s.disconnect = nullptr;
        s.disconnect_ex = nullptr;
        flush_qp(c);
      }
      fire_request(c, ev.status);
      break;
    case CmEventType::kAborted:
      s.abort_status = ev.status;
      if (s.conn != nullptr && s.active) snapshot_peer(s, s.conn->cm);  // the REJ's private data
      if (s.phase == ConnPhase::kConnected || s.phase == ConnPhase::kRequest)
        s.phase = ConnPhase::kFailed;
      if (!s.active && !s.delivered) {
        // Never handed out: forget it once this step returned.
        const uint64_t id = s.id;
        defer(0, [this, id] {
          if (Connector* cc = connector(id)) drop_undelivered(cc);
        });
      }
      break;
    case CmEventType::kDisconnected:
      if (s.phase == ConnPhase::kEstablished || s.phase == ConnPhase::kDisconnecting) {
        const bool ours_pending = s.phase == ConnPhase::kDisconnecting;
        if (!ours_pending) s.phase = ConnPhase::kDisconnected;
        // No flush here: the NDK disconnect event pages say the provider should not flush
        // outstanding work when it indicates a disconnect from the peer; the consumer flushes
        // (Qp::flush, or Disconnect, which flushes). A QP whose transport gave up (peer death)
        // is in error already and has flushed itself.
        fire_disconnect(c, ev.status == STATUS_SUCCESS ? STATUS_SUCCESS : ev.status);
      }
      break;
    case CmEventType::kDisconnectComplete:
      s.phase = ConnPhase::kDisconnected;
      fire_request(c, ev.status);
      break;
    case CmEventType::kReleased:
      break;
  }
}

void CmAgent::on_request(Listener* l, const wire::CmMad& m, const wire::MacAddr& src_mac,
                         const wire::IpAddress& src_ip) {
  const auto& req = std::get<wire::CmReq>(m.body);
  if (open_connectors >= impl_of(adapter_).setup.limits.max_connectors ||
      Access::closing(adapter_)) {
    send_mad(src_ip, src_mac, CmConnection::rej_for(m, wire::CmRejReason::kNoResources),
             mad_tos(req.primary.traffic_class));
    return;
  }
  ConnEntry* e = new_connection();
  e->remote_ip = src_ip;
  e->remote_mac = src_mac;
  if (e->cm.on_request(m, e->local_comm_id, ca_guid_, now_ns()) != STATUS_SUCCESS) {
    // Not RC, or no rdma_cm IPv4 header: nothing a listener can take.
    send_mad(src_ip, src_mac, CmConnection::rej_for(m, wire::CmRejReason::kConsumerDefined),
             mad_tos(req.primary.traffic_class));
    release(e);
    return;
  }
  Connector* c = new_connector(adapter_, *this);
  if (c == nullptr) {
    e->cm.close(now_ns());
    return;
  }
  index_remote(e, req.local_ca_guid, req.local_comm_id, req.local_qpn);
  e->owner = c;
  auto& s = *Access::state(*c);
  s.conn = e;
  s.active = false;
  s.listener = l;
  s.phase = ConnPhase::kRequest;
  const wire::CmaHeader& h = e->cm.peer_addresses();
  s.local = sockaddr_of(h.dst_ip, wire::rdma_cm_port(req.service_id));
  s.peer = sockaddr_of(h.src_ip.is_any() ? src_ip : h.src_ip, h.src_port);
  s.have_local = true;
  s.remote_mac = src_mac;
  snapshot_peer(s, e->cm);
  s.path_mtu_code = std::min<uint8_t>(req.path_mtu, mtu_code(max_path_mtu()));
  Access::state(*l)->spawned.push_back(c);
  deliver(l, c);
}

void CmAgent::deliver(Listener* l, Connector* c) {
  const uint64_t id = Access::state(*c)->id;
  defer(id, [this, l, id] {
    Connector* cc = connector(id);
    auto& ls = listeners_;
    if (cc == nullptr || std::find(ls.begin(), ls.end(), l) == ls.end() || Access::closing(*l))
      return;
    Access::state(*cc)->delivered = true;
    Access::state(*l)->connect_event(Access::state(*l)->connect_event_context, cc);
  });
}

void drop_undelivered(Connector* c) {
  Access::state(*c)->listener = nullptr;  // the listener's lists are being dismantled by the caller
  c->close(nullptr, nullptr);             // REJ if the request is still pending
}

void abandon_by_listener(Connector* c) {
  auto& s = *Access::state(*c);
  s.listener = nullptr;
  if (!s.delivered) {
    drop_undelivered(c);
    return;
  }
  if (s.phase != ConnPhase::kRequest && s.phase != ConnPhase::kAccepting) return;
  const bool accepting = s.phase == ConnPhase::kAccepting;
  detach_conn(c, s.agent->now_ns());
  s.abort_status = STATUS_CONNECTION_ABORTED;
  s.phase = ConnPhase::kFailed;
  if (accepting) {
    s.disconnect = nullptr;
    s.disconnect_ex = nullptr;
    flush_qp(c);
    fire_request(c, STATUS_CONNECTION_ABORTED);
  }
}

}  // namespace control
}  // namespace rocedp
