// The per-adapter CM agent: routing of QP1 MADs, comm IDs, timers, ARP, frames out through a
// core (control/cm_agent.hpp). Control thread only.

#include "control/cm_agent.hpp"

#include <rte_mbuf.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "control/ndk_internal.hpp"
#include "dataplane/arp_icmp.hpp"
#include "dataplane/core_channel.hpp"
#include "dataplane/polling_core.hpp"
#include "dataplane/wire/parser.hpp"
#include "pmd/packet_pool.hpp"
#include "pmd/port.hpp"
#include "pmd/rx_dispatch.hpp"

namespace rocedp::control {

using ndk_detail::Access;

namespace {

struct Attached {
  std::shared_ptr<bool> adapter_alive;
  std::unique_ptr<CmAgent> agent;
};
// One process-wide table (adapters are few; looked up per consumer call). Each adapter's
// control thread uses its own entry; the mutex guards the table itself (two adapters may have
// two control threads).
std::unordered_map<const Adapter*, Attached>& agents() {
  static std::unordered_map<const Adapter*, Attached> m;
  return m;
}
std::mutex& agents_mutex() {
  static std::mutex m;
  return m;
}

uint64_t steady_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

NeighbourTime to_neighbour_time(uint64_t ns) {
  return NeighbourTime(
      std::chrono::duration_cast<NeighbourClock::duration>(std::chrono::nanoseconds(ns)));
}

void on_tx_done(const dataplane::CoreMessage& msg) {
  if (!msg.result.ok()) {
    // The core had no TX room: the CM's own retransmission covers a lost MAD.
    auto* failed = static_cast<uint64_t*>(msg.done_ctx);
    if (failed != nullptr) ++*failed;
  }
}

wire::MacAddr mac_of(const config::MacAddress& m) {
  wire::MacAddr r{};
  std::memcpy(r.data(), m.bytes.data(), 6);
  return r;
}

}  // namespace

CmAgent* agent_of(const Adapter& adapter) {
  std::lock_guard<std::mutex> g(agents_mutex());
  auto& m = agents();
  auto it = m.find(&adapter);
  if (it == m.end()) return nullptr;
  if (!*it->second.adapter_alive) {
    // The adapter was freed without detaching: its objects are gone with it.
    *it->second.agent->alive = false;
    (void)it->second.agent
        .release();  // never touch a dead adapter's objects again (leaked on purpose)
    m.erase(it);
    return nullptr;
  }
  return it->second.agent.get();
}

// ---------------------------------------------------------------------------------------------
// ConnEntry

void ConnEntry::cm_send(const wire::CmMad& mad) {
  agent.send_mad(remote_ip, remote_mac, mad, agent.mad_tos(cm.peer_traffic_class()));
}

void ConnEntry::cm_event(const CmEvent& ev) {
  if (ev.type == CmEventType::kReleased) {
    agent.release(this);
    return;
  }
  if (owner != nullptr) agent.on_connection_event(owner, ev);
}

// ---------------------------------------------------------------------------------------------
// CmAgent

CmAgent::CmAgent(Adapter& adapter, const ConnectionManagerSetup& setup)
    : adapter_(adapter), setup_(setup), registry_(AddressRegistryConfig{65536, setup.timewait_ns}) {
  Adapter::Impl& im = impl_of(adapter);
  ip_ = im.setup.port->address().value;
  mac_ = mac_of(im.setup.port->mac());
  tos_ = static_cast<uint8_t>(im.setup.port->dscp() << 2);
  port_id_ = im.setup.port->id();
  ca_guid_ = wire::ca_guid_from_mac(mac_);
  if (const auto a6 = im.setup.port->address6()) ip6_ = wire::IpAddress::v6(a6->bytes);
  const wire::IpAddress ips[2] = {ip_, ip6_};
  registry_.set_local_addresses(std::span<const wire::IpAddress>(ips, has_ip6() ? 2 : 1));
  cm_cfg_.tid_hi = static_cast<uint32_t>(ca_guid_);
  // Comm IDs start at random, as cm.c's (a random operand XORed into its allocator's IDs): our CA
  // GUID is the port's MAC, the same after a restart, and a peer that still holds a connection
  // of ours takes a REQ or REP with a (GUID, comm ID) it knows for a duplicate and drops it.
  next_comm_id_ = static_cast<uint32_t>(std::random_device{}());
  cm_cfg_.timewait_ns = setup.timewait_ns;
  qp1_psn_ = static_cast<uint32_t>(ca_guid_ & 0xFFFFFF);

  NeighbourTableOptions o;
  o.local_ip.value = ip_;
  o.prefix_len = im.setup.port->prefix_len();
  o.retry_interval = std::chrono::milliseconds(setup.arp_retry_ms);
  o.retries = setup.arp_retries;
  NeighbourTableHooks hooks;
  hooks.send_request = [this](config::Ipv4Address target) {
    Adapter::Impl& i = impl_of(adapter_);
    dataplane::LocalAddress local;
    local.mac = i.setup.port->mac();
    local.ip.value = ip_;
    local.prefix_len = i.setup.port->prefix_len();
    // A request that cannot leave (no mbuf, the core's request ring full) is counted; the
    // table's next retry tries again.
    rte_mbuf* m = dataplane::build_arp_request(i.setup.pool->get(), local, target);
    if (m == nullptr) {
      ++counters.arp_tx_failed;
      return;
    }
    if (!dataplane::core_requests::transmit(*i.setup.channels[setup_.tx_core], port_id_, m,
                                            &on_tx_done, &counters.arp_tx_failed)) {
      rte_pktmbuf_free(m);
      ++counters.arp_tx_failed;
      return;
    }
    ++counters.arp_tx;
  };
  neighbours_ = std::make_unique<NeighbourTable>(o, setup.neighbours, std::move(hooks));
}

CmAgent::~CmAgent() {
  *alive = false;
}

uint64_t CmAgent::now_ns() const {
  return setup_.clock != nullptr ? setup_.clock(setup_.clock_context) : steady_ns();
}

uint32_t CmAgent::max_path_mtu() const {
  return impl_of(adapter_).max_path_mtu;
}
uint32_t CmAgent::max_read_limit() const {
  return impl_of(adapter_).setup.limits.max_read_limit;
}

ConnEntry* CmAgent::new_connection() {
  // Comm IDs: unique among live entries, non-zero, and not one just released (cm.c uses an
  // xarray with a random start; a wrapping counter that skips live IDs does the same job here).
  uint32_t id = next_comm_id_;
  while (id == 0 || conns_.count(id) != 0) ++id;
  next_comm_id_ = id + 1;
  auto e = std::make_unique<ConnEntry>(*this, cm_cfg_);
  timers_dirty_ = true;
  e->local_comm_id = id;
  ConnEntry* p = e.get();
  conns_.emplace(id, std::move(e));
  counters.connections = conns_.size();
  return p;
}

void CmAgent::index_remote(ConnEntry* e, uint64_t guid, uint32_t comm_id, uint32_t qpn) {
  unindex_remote(e);
  e->remote_guid = guid;
  e->remote_comm_id = comm_id;
  e->remote_qpn = qpn;
  e->remote_indexed = true;
  by_remote_comm_[{guid, comm_id}] = e;
  by_remote_qpn_[{guid, qpn}] = e;
}

// Whatever the peer's CA GUID (0 included): an entry freed while a table still named it would
// be found by the peer's next REQ.
void CmAgent::unindex_remote(ConnEntry* e) {
  if (!e->remote_indexed) return;
  e->remote_indexed = false;
  auto a = by_remote_comm_.find({e->remote_guid, e->remote_comm_id});
  if (a != by_remote_comm_.end() && a->second == e) by_remote_comm_.erase(a);
  auto b = by_remote_qpn_.find({e->remote_guid, e->remote_qpn});
  if (b != by_remote_qpn_.end() && b->second == e) by_remote_qpn_.erase(b);
}

void CmAgent::release(ConnEntry* e) {
  if (e->released) return;
  e->released = true;
  const uint64_t now = now_ns();
  unindex_remote(e);
  // TimeWait is over (or the connection never got established): the tuple enters the
  // registry's own TimeWait (the QPN's is the engine's: rc_engine.hpp).
  if (e->tuple_reserved) registry_.release_tuple(e->tuple, now);
  if (e->owner != nullptr) Access::state(*e->owner)->conn = nullptr;
  e->owner = nullptr;
  auto it = conns_.find(e->local_comm_id);
  if (it != conns_.end() && it->second.get() == e) {
    graveyard_.push_back(
        std::move(it->second));  // freed on the next poll, after this call returned
    conns_.erase(it);
  }
  counters.connections = conns_.size();
}

bool CmAgent::resolve(const wire::IpAddress& ip,
                      std::function<void(bool, const wire::MacAddr&)> cb) {
  auto done = [cb = std::move(cb)](bool reachable, const uint8_t* mac) {
    wire::MacAddr m{};
    if (reachable && mac != nullptr) std::memcpy(m.data(), mac, 6);
    cb(reachable, m);
  };
  if (!ip.is_v4()) {
    // IPv6: the owner's table (rocedpd: the control thread's) solicits the peer.
    if (!setup_.resolve6 || !has_ip6()) {
      done(false, nullptr);
      return true;
    }
    return setup_.resolve6(ip.bytes, std::move(done));
  }
  if (setup_.resolve) {
    // The owner's table (rocedpd: the control thread's), one source of truth.
    return setup_.resolve(ip.v4(), std::move(done));
  }
  config::Ipv4Address a;
  a.value = ip.v4();
  const auto st = neighbours_->resolve(
      a, to_neighbour_time(now_ns()),
      [done](const ResolveResult& r) { done(r.reachable, r.mac.bytes.data()); });
  return st == NeighbourTable::ResolveStatus::kCompleted;
}

void CmAgent::send_mad(const wire::IpAddress& dst_ip, const wire::MacAddr& dst_mac,
                       const wire::CmMad& mad, uint8_t tos) {
  timers_dirty_ = true;  // every send may arm a response timeout
  Adapter::Impl& im = impl_of(adapter_);
  rte_mbuf* m = rte_pktmbuf_alloc(im.setup.pool->get());
  if (m == nullptr) {
    ++counters.cm_tx_failed;
    return;
  }
  const size_t len = dst_ip.is_v4() ? wire::kCmFrameLen : wire::kCmFrameLen6;
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(len)));
  if (p == nullptr) {
    rte_pktmbuf_free(m);
    ++counters.cm_tx_failed;
    return;
  }
  wire::CmFrameAddr a;
  a.src_mac = mac_;
  a.dst_mac = dst_mac;
  a.src_ip = local_ip_for(dst_ip);
  a.dst_ip = dst_ip;
  a.udp_src_port = 0xC000;
  a.psn = qp1_psn_;
  qp1_psn_ = (qp1_psn_ + 1) & 0xFFFFFF;
  a.ip_id = ip_id_++;
  a.tos = tos;
  const size_t n = wire::build_cm_frame(wire::MutBytes(p, len), a, mad);
  if (n == 0) {
    rte_pktmbuf_free(m);
    ++counters.cm_tx_failed;
    return;
  }
  if (setup_.cm_tap != nullptr) setup_.cm_tap(setup_.cm_tap_context, p, n, true);
  if (!dataplane::core_requests::transmit(*im.setup.channels[setup_.tx_core], port_id_, m,
                                          &on_tx_done, &counters.cm_tx_failed)) {
    rte_pktmbuf_free(m);
    ++counters.cm_tx_failed;
    return;
  }
  ++counters.cm_tx;
}

void CmAgent::send_raw_rej(const wire::CmMad& incoming, wire::CmRejReason reason,
                           const wire::MacAddr& mac, const wire::IpAddress& ip) {
  const auto* req = std::get_if<wire::CmReq>(&incoming.body);
  send_mad(ip, mac, CmConnection::rej_for(incoming, reason),
           mad_tos(req != nullptr ? req->primary.traffic_class : 0));
}

void CmAgent::defer(uint64_t connector_id, std::function<void()> fn, bool request) {
  deferred_.push_back(Deferred{connector_id, std::move(fn), request});
}

bool CmAgent::take_owed(uint64_t connector_id) {
  bool any = false;
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    if (it->id == connector_id && it->request) {
      completions_.push_back(std::move(it->fn));
      it = deferred_.erase(it);
      any = true;
    } else {
      ++it;
    }
  }
  return any;
}

void CmAgent::run_deferred() {
  if (running_deferred_) return;  // a callback's own calls queue behind it
  running_deferred_ = true;
  const std::shared_ptr<bool> live = alive;
  while (!deferred_.empty()) {
    auto [id, fn, request] = std::move(deferred_.front());
    deferred_.pop_front();
    if (id != 0 && connectors_.count(id) == 0) continue;  // closed: nothing fires after close
    fn();
    if (!*live) return;  // a callback detached the manager
  }
  running_deferred_ = false;
}

uint64_t CmAgent::add_connector(Connector* c) {
  const uint64_t id = next_connector_id_++;
  connectors_[id] = c;
  ++open_connectors;
  return id;
}

void CmAgent::remove_connector(Connector* c) {
  connectors_.erase(Access::state(*c)->id);
  --open_connectors;
}

Connector* CmAgent::connector(uint64_t id) const {
  auto it = connectors_.find(id);
  return it == connectors_.end() ? nullptr : it->second;
}

Listener* CmAgent::listener_for(const wire::IpAddress& dst_ip, uint16_t port) const {
  for (Listener* l : listeners_) {
    const auto& s = *Access::state(*l);
    const wire::IpAddress local = ip_of(s.local);
    if (s.listening && s.local.port == port && (local.is_any() || local == dst_ip)) return l;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Receive path

bool CmAgent::receive_frame(const uint8_t* frame, size_t len) {
  if (len < 14) return false;
  const uint16_t ethertype = static_cast<uint16_t>((frame[12] << 8) | frame[13]);
  if (ethertype == 0x0806) {
    // RFC 826: learn the sender; the target of the frame may create the entry.
    if (len < 42) return false;
    ++counters.arp_rx;
    config::Ipv4Address sip, tip;
    config::MacAddress smac;
    std::memcpy(smac.bytes.data(), frame + 22, 6);
    sip.value = (uint32_t{frame[28]} << 24) | (uint32_t{frame[29]} << 16) |
                (uint32_t{frame[30]} << 8) | frame[31];
    tip.value = (uint32_t{frame[38]} << 24) | (uint32_t{frame[39]} << 16) |
                (uint32_t{frame[40]} << 8) | frame[41];
    if (sip.value != 0 && sip.value != ip_) {
      neighbours_->learn(sip, smac, to_neighbour_time(now_ns()),
                         tip.value == ip_ ? LearnMode::kCreate : LearnMode::kUpdateOnly);
    }
    run_deferred();
    return true;
  }
  wire::ParsedPacket p;
  if (wire::parse(wire::Bytes(frame, len), p) != wire::DropReason::kNone) {
    ++counters.cm_rx_dropped;
    return false;
  }
  if (p.f.bth.opcode != wire::opcode::kUdSendOnly || p.f.bth.dqpn != 1 ||
      p.payload_len < wire::kMadLen) {
    ++counters.cm_rx_dropped;
    return false;
  }
  wire::CmMad mad;
  if (wire::decode_cm_mad(p.payload().first(wire::kMadLen), mad) != wire::CmDecodeStatus::kOk) {
    ++counters.cm_rx_dropped;
    return false;
  }
  if (setup_.cm_tap != nullptr) setup_.cm_tap(setup_.cm_tap_context, frame, len, false);
  ++counters.cm_rx;
  if (p.f.ipv6()) {
    route(mad, p.f.eth.src, wire::IpAddress::v6(p.f.ip6.src), wire::IpAddress::v6(p.f.ip6.dst));
  } else {
    route(mad, p.f.eth.src, p.f.ip.src, p.f.ip.dst);
  }
  run_deferred();
  return true;
}

void CmAgent::route(const wire::CmMad& m, const wire::MacAddr& src_mac,
                    const wire::IpAddress& src_ip, const wire::IpAddress& dst_ip) {
  const uint64_t now = now_ns();
  timers_dirty_ = true;  // a received message moves deadlines (DREP: TimeWait starts)
  if (const auto* req = std::get_if<wire::CmReq>(&m.body)) {
    // Duplicate REQ (IBTA §12.9.8.1): the connection it created answers (MRA / nothing).
    auto dup = by_remote_comm_.find({req->local_ca_guid, req->local_comm_id});
    if (dup != by_remote_comm_.end()) {
      ConnEntry* e = dup->second;
      // Held by a paused listener: tell the peer we need more time (MRA, IBTA §12.6.6).
      e->cm.on_message(m, now);
      return;
    }
    // A new REQ from a QP that has a live connection: the peer restarted (IBTA §12.9.8.3.1).
    auto stale = by_remote_qpn_.find({req->local_ca_guid, req->local_qpn});
    if (stale != by_remote_qpn_.end()) {
      ++counters.stale_rejected;
      stale->second->cm.stale(now);
      send_raw_rej(m, wire::CmRejReason::kStaleConn, src_mac, src_ip);
      return;
    }
    Listener* l = wire::is_rdma_cm_tcp_service(req->service_id)
                      ? listener_for(dst_ip, wire::rdma_cm_port(req->service_id))
                      : nullptr;
    // NdkControlConnectEvents(pause): a paused listener treats requests as if it did not
    // exist; the peer gets the no-listener REJ (invalid service ID) and may try again.
    if (l != nullptr && Access::state(*l)->paused) l = nullptr;
    if (l == nullptr) {
      ++counters.rej_sent_no_listener;
      send_raw_rej(m, wire::CmRejReason::kInvalidServiceId, src_mac, src_ip);
      return;
    }
    on_request(l, m, src_mac, src_ip);
    return;
  }
  // Everything else names our comm ID as its remote ID; a Timeout REJ for a REQ we never
  // answered names none, and is matched by the peer's comm ID + CA GUID (cm.c
  // cm_acquire_rejected_id).
  uint32_t ours = 0;
  std::visit(
      [&](const auto& b) {
        using T = std::decay_t<decltype(b)>;
        if constexpr (!std::is_same_v<T, wire::CmReq>) ours = b.remote_comm_id;
      },
      m.body);
  ConnEntry* e = nullptr;
  if (ours != 0) {
    auto it = conns_.find(ours);
    if (it != conns_.end()) e = it->second.get();
  } else if (const auto* rej = std::get_if<wire::CmRej>(&m.body);
             rej != nullptr && rej->rejected_info_length >= 8) {
    uint64_t guid = 0;
    for (int i = 0; i < 8; ++i) guid = (guid << 8) | rej->ari[i];
    auto it = by_remote_comm_.find({guid, rej->local_comm_id});
    if (it != by_remote_comm_.end()) e = it->second;
  }
  if (e == nullptr) {
    if (const auto* dreq = std::get_if<wire::CmDreq>(&m.body)) {
      // A DREQ for a connection gone (its TimeWait over: our DREP was lost and the peer kept
      // resending): answered all the same, as cm.c's cm_issue_drep, so the peer's disconnect
      // ends now instead of after its retries.
      wire::CmDrep drep;
      drep.local_comm_id = dreq->remote_comm_id;
      drep.remote_comm_id = dreq->local_comm_id;
      ++counters.drep_sent_unknown;
      send_mad(src_ip, src_mac, wire::make_cm_mad(m.hdr.tid, drep), tos_);
      return;
    }
    ++counters.cm_rx_dropped;
    return;
  }
  if (e->remote_mac == wire::MacAddr{}) e->remote_mac = src_mac;
  e->cm.on_message(m, now);
  if (!e->remote_indexed && !e->released) {
    // The REP told us who the peer is: index it for duplicates and stale detection.
    if (const auto* rep = std::get_if<wire::CmRep>(&m.body))
      index_remote(e, rep->local_ca_guid, rep->local_comm_id, rep->local_qpn);
  }
}

// ---------------------------------------------------------------------------------------------
// Poll

void CmAgent::run_timers(uint64_t now) {
  if (timers_dirty_ || now >= next_timer_ns_) {
    // Cleared before firing: a timer that sends (retransmission) marks it again.
    timers_dirty_ = false;
    uint64_t next = UINT64_MAX;
    due_.clear();
    for (auto& [id, e] : conns_) {
      const uint64_t t = e->cm.next_timeout_ns();
      if (t <= now)
        due_.push_back(e.get());
      else
        next = std::min(next, t);
    }
    for (ConnEntry* e : due_) {
      if (!e->released && e->cm.next_timeout_ns() <= now) e->cm.on_timer(now);
      if (!e->released) next = std::min(next, e->cm.next_timeout_ns());
    }
    next_timer_ns_ = next;
  }
  if (!setup_.resolve) neighbours_->on_timer(to_neighbour_time(now));
  // The registry's expired TimeWait entries are only garbage (reserve_tuple checks the expiry
  // itself): collect them a few times per TimeWait, not on every poll.
  if (now >= next_sweep_ns_) {
    registry_.sweep(now);
    next_sweep_ns_ = now + std::max<uint64_t>(setup_.timewait_ns / 4, 1'000'000);
  }
}

namespace {

struct ProbeRef {
  std::shared_ptr<bool> alive;
  CmAgent* agent;
  uint64_t connector_id;
};

// On the owning core: did the QP's transport give up (retries / RNR retries exhausted) without a
// flush being asked? (IBTA §9.7.5.1.2: the requester moves to the error state.) INVALID_PARAMETER
// when the QP is gone.
void probe_run(const dataplane::QpTarget& req, dataplane::CoreResult& result, void*) {
  const rc::QueuePair* qp = req.rdma->engine_st().find_qp(req.qpn);
  if (qp == nullptr) {
    result.status = STATUS_INVALID_PARAMETER;
    return;
  }
  const rc::QpConnectParams& c = qp->conn();
  result.value = dataplane::QpHealth{qp->state() == rc::QpState::kError && !qp->flush_requested,
                                     qp->resp.psn != c.rq_psn || qp->comp.unacked_psn != c.sq_psn};
}

// A passive connector whose QP is in RTS and whose REP is out: it waits for the RTU.
bool awaiting_rtu(const Connector::State& s) {
  return s.phase == ConnPhase::kAccepting && s.conn != nullptr &&
         s.conn->cm.state() == CmState::kRepSent;
}

void probe_done(const dataplane::CoreMessage& msg) {
  auto* ref = static_cast<ProbeRef*>(msg.done_ctx);
  std::unique_ptr<ProbeRef> hold(ref);
  if (!*ref->alive) return;
  Connector* c = ref->agent->connector(ref->connector_id);
  if (c == nullptr) return;
  auto& s = *Access::state(*c);
  s.probe_in_flight = false;
  const auto* health = msg.result.get<dataplane::QpHealth>();
  if (health == nullptr) return;
  if (s.phase == ConnPhase::kAccepting) {
    // Communication established (IBTA §12.9.7.1, Linux's IB_EVENT_COMM_EST): the peer sends on
    // the connection, so it is in RTS and its RTU was lost. The Accept completes now, not on the
    // RTU after the next REP (seconds later), nor fails when every RTU is lost.
    if (health->heard_from_peer && awaiting_rtu(s)) {
      ++ref->agent->counters.established_by_data;
      s.conn->cm.communication_established(ref->agent->now_ns());
      ref->agent->run_deferred();
    }
    return;
  }
  if (!health->transport_failed || s.phase != ConnPhase::kEstablished) return;
  // The peer is dead as far as the transport can tell: the connection is over.
  ++ref->agent->counters.peer_deaths;
  CmEvent ev;
  ev.type = CmEventType::kDisconnected;
  ev.status = STATUS_IO_TIMEOUT;
  ref->agent->on_connection_event(c, ev);
  if (s.conn != nullptr) {
    // Tell the peer's CM too, in case only its data path is gone (DREQ; no events follow).
    ConnEntry* e = s.conn;
    e->owner = nullptr;
    s.conn = nullptr;
    e->cm.close(ref->agent->now_ns());
  }
  ref->agent->run_deferred();
}

}  // namespace

void CmAgent::probe_qps(uint64_t now) {
  std::vector<Connector*> due;
  for (auto& [id, c] : connectors_) {
    auto& s = *Access::state(*c);
    // Established QPs: did their transport give up? A passive QP whose REP is out: has the
    // peer sent on it (its RTU lost)?
    if ((s.phase == ConnPhase::kEstablished || awaiting_rtu(s)) && !s.probe_in_flight &&
        s.qp != nullptr && !Access::closing(*s.qp) && now >= s.next_probe_ns)
      due.push_back(c);
  }
  for (Connector* c : due) {
    auto& s = *Access::state(*c);
    auto* ref = new ProbeRef{alive, this, s.id};
    Adapter::Impl& im = impl_of(adapter_);
    const uint32_t core = s.qp->core();
    if (im.call(core, &probe_run, dataplane::QpTarget{im.rdma_on(core), s.qp->qpn()}, &probe_done,
                ref)) {
      s.probe_in_flight = true;
      s.next_probe_ns = now + setup_.qp_probe_interval_ns;
    } else {
      delete ref;
    }
  }
}

uint32_t CmAgent::poll() {
  uint32_t n = 0;
  const std::shared_ptr<bool> live = alive;
  graveyard_.clear();
  if (setup_.dispatch != nullptr) {
    rte_mbuf* pkts[32];
    const uint16_t k = setup_.dispatch->receive(setup_.dispatch->control_target(), pkts, 32);
    for (uint16_t i = 0; i < k; ++i) {
      rte_mbuf* m = pkts[i];
      if (*live && m->nb_segs == 1)
        receive_frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
      rte_pktmbuf_free(m);
    }
    n += k;
    if (!*live) return n;
  }
  const uint64_t now = now_ns();
  run_timers(now);
  probe_qps(now);
  run_deferred();
  if (!*live) return n;
  if (!completions_.empty()) {
    // Completions of pended closes: each runs once, from here and never inside the call that
    // queued it. A callback may close more (queued for the next poll) or detach the manager.
    std::deque<std::function<void()>> batch;
    batch.swap(completions_);
    n += static_cast<uint32_t>(batch.size());
    for (auto& fn : batch) {
      fn();
      if (!*live) return n;
    }
  }
  return n + static_cast<uint32_t>(deferred_.size() + completions_.size());
}

}  // namespace rocedp::control

// ---------------------------------------------------------------------------------------------
// Public entry points (rocedp/connection_manager.hpp)

namespace rocedp {

using ndk_detail::Access;

using control::agent_of;
using control::CmAgent;

NTSTATUS attach_connection_manager(Adapter& adapter, const ConnectionManagerSetup& setup) {
  ROCEDP_ON_CONTROL(&adapter, attach_connection_manager(adapter, setup));
  if (agent_of(adapter) != nullptr) return STATUS_INVALID_DEVICE_STATE;
  if (Access::closing(adapter) || setup.tx_core >= adapter.core_count())
    return STATUS_INVALID_PARAMETER;
  auto agent = std::make_unique<CmAgent>(adapter, setup);
  std::lock_guard<std::mutex> g(control::agents_mutex());
  control::agents()[&adapter] = {impl_of(adapter).alive, std::move(agent)};
  return STATUS_SUCCESS;
}

NTSTATUS detach_connection_manager(Adapter& adapter) {
  ROCEDP_ON_CONTROL(&adapter, detach_connection_manager(adapter));
  CmAgent* a = agent_of(adapter);
  if (a == nullptr) return STATUS_INVALID_DEVICE_STATE;
  if (a->open_connectors != 0 || a->open_listeners != 0 || a->open_endpoints != 0 ||
      a->closes_pending != 0)
    return STATUS_INVALID_DEVICE_STATE;
  std::lock_guard<std::mutex> g(control::agents_mutex());
  control::agents().erase(&adapter);
  return STATUS_SUCCESS;
}

uint32_t poll_connections(Adapter& adapter) {
  // The control loop: it runs on the control thread (see Adapter::poll_control).
  impl_of(adapter).control_thread.store(std::this_thread::get_id(), std::memory_order_release);
  CmAgent* a = agent_of(adapter);
  return a != nullptr ? a->poll() : 0;
}

bool cm_receive_frame(Adapter& adapter, const uint8_t* frame, size_t len) {
  CmAgent* a = agent_of(adapter);
  return a != nullptr && a->receive_frame(frame, len);
}

ConnectionManagerCounters connection_manager_counters(Adapter& adapter) {
  ROCEDP_ON_CONTROL(&adapter, connection_manager_counters(adapter));
  CmAgent* a = agent_of(adapter);
  return a != nullptr ? a->counters : ConnectionManagerCounters{};
}

}  // namespace rocedp
