// rocedpd's echo, memory and perftest services (control/services.hpp): set-up and teardown on the
// control thread; the echo data path in the CQ notification, on the connection's polling core.
// perftest's sessions are in perftest_service.cpp.

#include "control/services.hpp"

#include "control/service_state.hpp"
#include "control/sock_addr.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "pmd/log.hpp"
#include "rocedp/listener.hpp"

namespace rocedp::control {

using pmd::LogLevel;

NTSTATUS Services::start(Adapter& adapter, const std::vector<config::ListenerConfig>& listeners,
                         std::unique_ptr<Services>* out, std::string* error) {
  std::unique_ptr<Services> s(new Services(adapter));
  NTSTATUS st = adapter.create_pd(nullptr, nullptr, &s->pd_);
  if (st != STATUS_SUCCESS) {
    *error = "services: CreatePd: " + std::string(status_name(st));
    return st;
  }
  for (const auto& cfg : listeners) {
    st = s->listen(cfg, error);
    if (st != STATUS_SUCCESS) {
      // Freed before their regions' closes complete, they would be written after their end.
      s->stop();
      break;
    }
  }
  *out = std::move(s);
  return st;
}

// One listener: its region (memory, perftest), its Listener listening on nd_port. A failure
// leaves it retiring, so that what it created closes (reap()).
NTSTATUS Services::listen(const config::ListenerConfig& cfg, std::string* error) {
  auto owned = std::make_unique<Listening>();
  Listening* l = owned.get();
  l->owner = this;
  l->cfg = cfg;
  l->counts.port = cfg.port;
  l->counts.nd_port = cfg.nd_port;
  listening_.push_back(std::move(owned));
  const std::string what = std::string(config::to_string(cfg.service)) + " listener on nd_port " +
                           std::to_string(cfg.nd_port);
  NTSTATUS st = STATUS_SUCCESS;
  if (!l->echo()) {
    l->region.reset(new (std::nothrow) uint8_t[cfg.memory_bytes]());
    st =
        l->region ? pd_->create_mr(false, nullptr, nullptr, &l->mr) : STATUS_INSUFFICIENT_RESOURCES;
    if (st == STATUS_SUCCESS)
      st = l->mr->register_mr(l->region.get(), cfg.memory_bytes,
                              NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                                  NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                              nullptr, nullptr);
    if (st != STATUS_SUCCESS) {
      *error = what + ": region of " + std::to_string(cfg.memory_bytes) +
               " bytes: " + std::string(status_name(st));
    }
  }
  if (st == STATUS_SUCCESS) {
    st = create_listener(adapter_, &Services::on_connect_event, l, nullptr, nullptr, &l->listener);
    if (st == STATUS_SUCCESS)
      st = l->listener->listen(NdkSockAddr{0, cfg.nd_port}, nullptr, nullptr);
    if (st != STATUS_SUCCESS) *error = what + ": " + std::string(status_name(st));
  }
  if (st == STATUS_SUCCESS && cfg.tcp_exchange) st = listen_tcp(l, error);
  if (st != STATUS_SUCCESS) {
    retire(l);
    reap();
    return st;
  }
  pmd::log(LogLevel::kInfo, "service_listening",
           {{"port", cfg.port},
            {"service", std::string(config::to_string(cfg.service))},
            {"nd_port", std::to_string(cfg.nd_port)},
            {"bytes", std::to_string(l->echo() ? cfg.message_bytes : cfg.memory_bytes)}});
  return STATUS_SUCCESS;
}

NTSTATUS Services::update(const std::vector<config::ListenerConfig>& listeners,
                          std::string* error) {
  if (stopping_) return STATUS_INVALID_DEVICE_STATE;
  // Those no longer wanted first: their nd_ports are free again for the new entries.
  std::vector<Listening*> gone;
  for (const auto& l : listening_) {
    if (!l->retiring && std::find(listeners.begin(), listeners.end(), l->cfg) == listeners.end())
      gone.push_back(l.get());
  }
  for (Listening* l : gone) {
    pmd::log(LogLevel::kInfo, "service_stopping",
             {{"port", l->cfg.port},
              {"service", std::string(config::to_string(l->cfg.service))},
              {"nd_port", std::to_string(l->cfg.nd_port)},
              {"connections", std::to_string(l->connections)}});
    retire(l);
  }
  reap();
  const std::vector<config::ListenerConfig> now = serving();
  NTSTATUS first = STATUS_SUCCESS;
  for (const auto& cfg : listeners) {
    if (std::find(now.begin(), now.end(), cfg) != now.end()) continue;
    std::string why;
    const NTSTATUS st = listen(cfg, &why);
    if (st == STATUS_SUCCESS) continue;
    if (first == STATUS_SUCCESS) first = st;
    add_error(error, why);
  }
  return first;
}

std::vector<config::ListenerConfig> Services::serving() const {
  std::vector<config::ListenerConfig> out;
  for (const auto& l : listening_)
    if (!l->retiring) out.push_back(l->cfg);
  return out;
}

Services::Services(Adapter& adapter) : adapter_(adapter) {}

Services::~Services() {
  // stop() must have completed (the runtime waits for stopped()); objects still open belong to
  // an adapter that is going away with them.
  *alive_ = false;
  for (const auto& l : listening_)
    if (l->tcp_fd >= 0) ::close(l->tcp_fd);
  for (const auto& s : sessions_)
    if (s->tcp_fd >= 0) ::close(s->tcp_fd);
}

std::string Services::service_of(const Connector* c) const {
  auto it = by_connector_.find(c);
  return it == by_connector_.end() ? std::string()
                                   : std::string(config::to_string(it->second->cfg.service));
}

// ---- connection set-up: ConnectEvent -> CQ -> QP -> (receives) -> Accept ----------------------

void Services::on_connect_event(void* context, NdkConnector* nc) {
  auto* l = static_cast<Listening*>(context);
  Services& self = *l->owner;
  Connector* connector = Connector::from(nc);
  if (l->retiring || l->connections >= l->cfg.max_connections) {
    // NdkReject: REJ reason 28 (consumer defined); the connector is ours to close.
    connector->reject(nullptr, 0);
    connector->close(nullptr, nullptr);
    ++l->counts.rejected;
    return;
  }
  auto owned = std::make_unique<Conn>();
  Conn* c = owned.get();
  c->owner = &self;
  c->svc = l;
  c->connector = connector;
  c->core = self.next_core_++ % std::max<uint32_t>(1, self.adapter_.core_count());
  self.conns_[c] = std::move(owned);
  self.by_connector_[connector] = l;
  ++l->connections;
  if (l->perftest()) {
    NdkSockAddr peer;
    uint32_t size = sizeof(peer);
    connector->get_peer_address(&peer, &size);
    self.join_session(c, peer);
  }

  const char* step = "buffers";
  if (const NTSTATUS st = self.create_objects(c, &step);
      st != STATUS_SUCCESS && st != STATUS_PENDING)
    self.fail_setup(c, step, st);
}

// A connection's buffers (echo, perftest), registered, then its CQ on its core: STATUS_PENDING
// while the CQ's creation completes later (on_cq_created makes the QP), STATUS_SUCCESS once it
// went on inline, or the failing call's status (the caller fails the connection; *step names it).
NTSTATUS Services::create_objects(Conn* c, const char** step) {
  const Listening* l = c->svc;
  const uint32_t depth = l->cfg.queue_depth;
  NTSTATUS st = STATUS_SUCCESS;
  if (l->echo() || l->perftest()) {
    // `writes: echo`: one more slot, what the connection's WRITEs carry.
    const uint64_t bytes =
        c->is_control() ? uint64_t{control_slots::kAll} * control_slots::kBytes
                        : uint64_t{depth + (l->writes_echo() ? 1 : 0)} * l->cfg.message_bytes;
    // Zeroed: an echo never sends bytes an earlier connection left in the heap.
    c->buf.reset(new (std::nothrow) uint8_t[bytes]());
    st = c->buf ? pd_->create_mr(false, nullptr, nullptr, &c->mr) : STATUS_INSUFFICIENT_RESOURCES;
    if (st == STATUS_SUCCESS)
      st = c->mr->register_mr(c->buf.get(), bytes, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, nullptr, nullptr);
    if (st != STATUS_SUCCESS) return st;
  }
  // Echo and perftest's data: room for every receive and every echo SEND; perftest's control:
  // its receives, replies and keepalive; memory: remote operations produce no completion here
  // (a keepalive's does).
  const uint32_t cq_depth = c->is_control() ? 2 * control_slots::kAll : l->memory() ? 4 : 2 * depth;
  *step = "cq";
  Cq* cq = nullptr;
  c->creating = true;
  st = adapter_.create_cq(cq_depth, &Services::on_cq_notify, c, c->core, &Services::on_cq_created,
                          c, &cq);
  if (st == STATUS_SUCCESS) {
    on_cq_created(c, STATUS_SUCCESS, &cq->header);
    return STATUS_SUCCESS;
  }
  if (st != STATUS_PENDING) c->creating = false;
  return st;
}

// A connection whose set-up failed at `step`: logged, counted, closed (the client gets a REJ).
void Services::fail_setup(Conn* c, const char* step, NTSTATUS st) {
  pmd::log(LogLevel::kWarning, "service_setup_failed",
           {{"service", std::string(config::to_string(c->svc->cfg.service))},
            {"nd_port", std::to_string(c->svc->cfg.nd_port)},
            {"step", step},
            {"status", std::string(status_name(st))}});
  ++c->svc->counts.failed;
  teardown(c);
}

void Services::on_cq_created(void* context, NTSTATUS status, NdkObjectHeader* object) {
  auto* c = static_cast<Conn*>(context);
  Services& self = *c->owner;
  c->creating = false;
  if (status == STATUS_SUCCESS) c->cq = ndk_object_cast<Cq>(object);
  if (c->closing) {
    self.close_next(c);
    return;
  }
  if (status != STATUS_SUCCESS) {
    self.fail_setup(c, "cq", status);
    return;
  }
  const uint32_t depth = c->is_control()    ? control_slots::kAll
                         : c->svc->memory() ? 1
                                            : c->svc->cfg.queue_depth;
  Qp* qp = nullptr;
  c->creating = true;
  const NTSTATUS st =
      self.pd_->create_qp(c->cq, c->cq, c, depth, depth, 1, 1, 0, &Services::on_qp_created, c, &qp);
  if (st == STATUS_SUCCESS) {
    on_qp_created(c, STATUS_SUCCESS, &qp->header);
  } else if (st != STATUS_PENDING) {
    c->creating = false;
    self.fail_setup(c, "qp", st);
  }
}

void Services::on_qp_created(void* context, NTSTATUS status, NdkObjectHeader* object) {
  auto* c = static_cast<Conn*>(context);
  Services& self = *c->owner;
  c->creating = false;
  if (status == STATUS_SUCCESS) c->qp = ndk_object_cast<Qp>(object);
  if (c->closing) {
    self.close_next(c);
    return;
  }
  if (status != STATUS_SUCCESS) {
    self.fail_setup(c, "qp", status);
    return;
  }
  self.accept(c);
}

void Services::accept(Conn* c) {
  const Listening& l = *c->svc;
  NTSTATUS st = STATUS_SUCCESS;
  uint8_t pd[MemoryServiceInfo::kWireSize];
  uint32_t pd_len = 0;
  if (c->is_control()) {
    st = post_control_receives(c);  // polled by the control thread (poll_control), never armed
  } else if (l.memory()) {
    MemoryServiceInfo info;
    info.address = reinterpret_cast<uint64_t>(l.region.get());
    info.length = l.cfg.memory_bytes;
    info.token = l.mr->get_remote_token();
    info.encode(pd);
    pd_len = sizeof(pd);
  } else if (l.writes_echo()) {
    // ib_write_lat: the client's WRITEs complete on the CQ. The core takes the queues once the
    // client's key named its buffer and the first WRITE left (start_writes).
    st = c->qp->report_remote_writes();
    if (st == STATUS_SUCCESS) st = post_receives(c);
  } else if (l.perftest() || l.cfg.receive_delay_ms == 0) {
    st = post_receives(c);
    if (st == STATUS_SUCCESS) start_echo(c);
  }
  // perftest over TCP: our key goes back now; the QP connects out of band after it.
  if (st == STATUS_SUCCESS && c->oob) {
    tcp_key_ready(c);
    return;
  }
  // Inbound reads: as many as the adapter allows (the memory and perftest services are read by
  // their clients); we issue none.
  if (st == STATUS_SUCCESS)
    st = c->connector->accept_ex(c->qp, max_inbound_reads(), 0, pd_len != 0 ? pd : nullptr, pd_len,
                                 &Services::on_disconnected, c, &Services::on_accepted, c);
  if (st != STATUS_PENDING && st != STATUS_SUCCESS) {
    fail_setup(c, "accept", st);
    return;
  }
  if (st == STATUS_SUCCESS) on_accepted(c, STATUS_SUCCESS);
}

uint32_t Services::max_inbound_reads() const {
  NdkAdapterInfo info{};
  size_t info_size = sizeof(info);
  (void)adapter_.query_adapter_info(&info, &info_size);
  return info.max_inbound_read_limit;
}

void Services::on_accepted(void* context, NTSTATUS status) {
  auto* c = static_cast<Conn*>(context);
  Services& self = *c->owner;
  if (status != STATUS_SUCCESS) {
    // Ended by the service itself: its stop (closing the listener abandons the Accepts still
    // waiting for their RTU) or its teardown. Closed, not failed.
    if (c->closing || c->svc->retiring) {
      self.teardown(c);
      return;
    }
    self.fail_setup(c, "accept", status);  // also a client that went away before the RTU
    return;
  }
  c->established = true;
  const auto now = std::chrono::steady_clock::now();
  c->post_receives_at = now + std::chrono::milliseconds(c->svc->cfg.receive_delay_ms);
  c->active_at = now;
  c->next_probe = now + std::chrono::milliseconds(c->svc->cfg.keepalive_ms);
  ++c->svc->counts.accepted;
  NdkSockAddr peer;
  uint32_t size = sizeof(peer);
  c->connector->get_peer_address(&peer, &size);
  pmd::log(LogLevel::kInfo, "service_connected",
           {{"service", std::string(config::to_string(c->svc->cfg.service))},
            {"peer", wire::to_string(control::ip_of(peer)) + ":" + std::to_string(peer.port)},
            {"qpn", std::to_string(c->qp->qpn())},
            {"core", std::to_string(c->core)}});
}

std::string Services::peer_text(const Connector* connector) {
  NdkSockAddr peer;
  uint32_t size = sizeof(peer);
  if (connector == nullptr || connector->get_peer_address(&peer, &size) != STATUS_SUCCESS)
    return "?";
  return wire::to_string(ip_of(peer)) + ":" + std::to_string(peer.port);
}

std::string Services::qp_error_text(const Conn* c) {
  const std::string_view why = c->qp != nullptr ? c->qp->error_reason() : std::string_view();
  return why.empty() ? "none" : std::string(why);
}

void Services::on_disconnected(void* context, NTSTATUS reason) {
  auto* c = static_cast<Conn*>(context);
  pmd::log(LogLevel::kInfo, "service_disconnected",
           {{"reason", std::string(status_name(reason))},
            {"service", std::string(config::to_string(c->svc->cfg.service))},
            {"peer", peer_text(c->connector)},
            {"qpn", c->qp != nullptr ? std::to_string(c->qp->qpn()) : "?"},
            {"qp_error", qp_error_text(c)}});
  c->owner->teardown(c);
}

// ---- teardown: connector (DREQ/REJ, QP flushed) -> QP -> CQ -> buffer MR -> freed -----------

void Services::teardown(Conn* c) {
  if (c->closing) return;
  c->closing = true;
  // Before any close request goes to the core: a notification after this touches nothing.
  c->core_stop.store(true, std::memory_order_release);
  // perftest: the control connection's end is the session's (a data connection closing inline
  // leaves the session, so not while iterating its list).
  if (c->is_control()) {
    const std::vector<Conn*> data = c->session->data;
    for (Conn* d : data) teardown(d);
  }
  // perftest over TCP: a data connection's end is its session's; poll_tcp ends the others.
  if (c->oob && c->session != nullptr) {
    c->session->ending = true;
    if (c->session->waiting_for == c) c->session->waiting_for = nullptr;
  }
  close_next(c);
}

// One object's close: true once it is closed; false while it completes later (its callback calls
// close_next again) or must be tried again (a core's request ring was full, nothing changed:
// poll() retries, so neither the object nor the buffers it guards are lost).
template <class T>
bool Services::close_one(Conn* c, T*& obj, NdkCloseCompletion done) {
  c->closing_obj = true;
  const NTSTATUS st = obj->close(done, c);
  if (st == STATUS_INSUFFICIENT_RESOURCES) {
    c->closing_obj = false;
    c->close_retry = true;
    return false;
  }
  obj = nullptr;
  if (st == STATUS_PENDING) return false;
  c->closing_obj = false;
  return true;
}

void Services::close_next(Conn* c) {
  if (c->creating || c->closing_obj) return;  // its completion calls again
  c->close_retry = false;
  // First: the connector stops probing and using the QP before the QP goes away. A pending
  // Accept completes (CANCELLED) before the close does: the close waits for it, so that callback
  // still finds this Conn.
  if (c->connector != nullptr) {
    by_connector_.erase(c->connector);
    if (!close_one(c, c->connector, &Services::on_connector_closed)) return;
  }
  if (c->qp != nullptr && !close_one(c, c->qp, &Services::on_qp_closed)) return;
  if (c->cq != nullptr && !close_one(c, c->cq, &Services::on_cq_closed)) return;
  // The buffers are freed with the Conn: only once no core touches them (MR close barrier).
  if (c->mr != nullptr && !close_one(c, c->mr, &Services::on_cq_closed)) return;
  --c->svc->connections;
  ++c->svc->counts.closed;
  c->svc->counts.echo_messages += c->echo_messages.load(std::memory_order_relaxed);
  c->svc->counts.echo_bytes += c->echo_bytes.load(std::memory_order_relaxed);
  c->svc->counts.received_messages += c->received_messages.load(std::memory_order_relaxed);
  c->svc->counts.received_bytes += c->received_bytes.load(std::memory_order_relaxed);
  leave_session(c);
  conns_.erase(c);  // frees c
  reap();
}

void Services::on_region_closed(void* context) {
  auto* l = static_cast<Listening*>(context);
  l->region_closing = false;
  l->owner->reap();
}

void Services::on_connector_closed(void* context) {
  auto* c = static_cast<Conn*>(context);
  c->closing_obj = false;
  c->owner->close_next(c);
}

void Services::on_qp_closed(void* context) {
  auto* c = static_cast<Conn*>(context);
  c->closing_obj = false;
  c->owner->close_next(c);
}

void Services::on_cq_closed(void* context) {
  auto* c = static_cast<Conn*>(context);
  c->closing_obj = false;
  c->owner->close_next(c);
}

void Services::stop() {
  if (stopping_) return;
  stopping_ = true;
  std::vector<Listening*> all;
  for (auto& l : listening_) all.push_back(l.get());
  for (Listening* l : all) retire(l);
  reap();
}

// A listener leaves: no ConnectEvent after this, its connections end (DREQ or REJ); reap()
// closes its region once they are gone.
void Services::retire(Listening* l) {
  if (l->retiring) return;
  l->retiring = true;
  if (l->listener != nullptr) {
    l->listener->close(nullptr, nullptr);
    l->listener = nullptr;
  }
  if (l->tcp_fd >= 0) {
    ::close(l->tcp_fd);
    l->tcp_fd = -1;
  }
  std::vector<Session*> tcp;
  for (const auto& s : sessions_)
    if (s->svc == l && s->tcp_fd >= 0) tcp.push_back(s.get());
  for (Session* s : tcp) end_tcp(s);
  std::vector<Conn*> mine;
  for (auto& [c, owned] : conns_)
    if (c->svc == l) mine.push_back(c);
  // A perftest control connection's teardown takes its data connections along.
  for (Conn* c : mine)
    if (conns_.contains(c)) teardown(c);
}

// Closes the regions of retiring listeners without connections and, once a region is closed,
// forgets its listener (a stopped service keeps its listeners' rows for the last snapshot).
// When the service stops and nothing is left open, closes the PD: stopped().
void Services::reap() {
  if (stopped_.load(std::memory_order_relaxed)) return;
  // Retiring, no connection left, region closed: nothing of the listener is in use.
  auto done = [](const auto& l) {
    return l->retiring && l->connections == 0 && l->mr == nullptr && !l->region_closing;
  };
  for (auto& l : listening_) {
    if (!l->retiring || l->connections != 0 || l->mr == nullptr) continue;
    // The region is freed with the listener: only once no core touches it. A full ring changes
    // nothing: poll() tries again.
    const NTSTATUS st = l->mr->close(&Services::on_region_closed, l.get());
    if (st == STATUS_INSUFFICIENT_RESOURCES) continue;
    l->mr = nullptr;
    l->region_closing = st == STATUS_PENDING;
  }
  if (!stopping_) {
    std::erase_if(listening_, done);
    return;
  }
  if (!conns_.empty() || !std::all_of(listening_.begin(), listening_.end(), done)) return;
  if (pd_ != nullptr) {
    // Every MR and QP of the PD is closed now: the close is inline.
    pd_->close(nullptr, nullptr);
    pd_ = nullptr;
  }
  stopped_.store(true, std::memory_order_release);
}

// ---- echo data path ---------------------------------------------------------------------------

std::vector<ServiceRow> Services::rows() const {
  // The listeners served (a stopped service's too); not those a reload is removing.
  std::vector<ServiceRow> out;
  std::unordered_map<const Listening*, size_t> row_of;
  for (const auto& l : listening_) {
    if (l->retiring && !stopping_) continue;
    row_of[l.get()] = out.size();
    out.push_back(l->counts);
    out.back().connections = l->connections;
  }
  for (const auto& [c, owned] : conns_) {
    const auto at = row_of.find(c->svc);
    if (at == row_of.end()) continue;
    ServiceRow& r = out[at->second];
    r.echo_messages += c->echo_messages.load(std::memory_order_relaxed);
    r.echo_bytes += c->echo_bytes.load(std::memory_order_relaxed);
    r.received_messages += c->received_messages.load(std::memory_order_relaxed);
    r.received_bytes += c->received_bytes.load(std::memory_order_relaxed);
  }
  return out;
}

NTSTATUS Services::post_receives(Conn* c) {
  const Listening& l = *c->svc;
  NTSTATUS st = STATUS_SUCCESS;
  for (uint32_t i = 0; i < l.cfg.queue_depth && st == STATUS_SUCCESS; ++i) {
    NdkSge sge{c->buf.get() + uint64_t{i} * l.cfg.message_bytes, l.cfg.message_bytes,
               c->mr->get_local_token()};
    st = c->qp->receive(slot_context(i, false), &sge, 1);
  }
  c->receives_posted = st == STATUS_SUCCESS;
  return st;
}

// Control thread, once the receives are posted: hands the connection's queues to its core. From
// the first arm on, only on_cq_notify (on the core) posts and drains.
void Services::start_echo(Conn* c) {
  c->core_qp = c->qp;
  c->core_cq = c->cq;
  c->local_token = c->mr->get_local_token();
  c->cq->arm(NdkCqNotifyType::kAny);
}

// perftest `writes: echo`, control thread, once the client's key named its buffer (`to`,
// `token`): perftest's server writes first, and its client waits for the last byte of its
// message size to count 1. That size is never sent, so the first WRITE is message_bytes long,
// every byte 1; the core answers each WRITE that lands with the next count, in as many bytes as
// it carried (on_cq_notify). Then the core takes the queues. A connection with an error has
// failed already (its status reaches poll() as core_failed).
NTSTATUS Services::start_writes(Conn* c, uint64_t to, uint32_t token) {
  const uint32_t msg = c->svc->cfg.message_bytes;
  uint8_t* data = c->write_data();
  std::memset(data, 1, msg);
  c->write_to = to;
  c->write_token = token;
  c->writing = true;
  NdkSge sge{data, msg, c->mr->get_local_token()};
  const NTSTATUS st = c->qp->write(slot_context(c->svc->cfg.queue_depth, true), &sge, 1, to, token,
                                   NDK_OP_FLAG_SILENT_SUCCESS);
  if (st == STATUS_SUCCESS) start_echo(c);
  return st;
}

void Services::on_disconnect_done(void* context, NTSTATUS status) {
  auto* c = static_cast<Conn*>(context);
  pmd::log(LogLevel::kInfo, "service_disconnected",
           {{"by", "service"},
            {"status", std::string(status_name(status))},
            {"service", std::string(config::to_string(c->svc->cfg.service))},
            {"peer", peer_text(c->connector)},
            {"qpn", c->qp != nullptr ? std::to_string(c->qp->qpn()) : "?"},
            {"qp_error", qp_error_text(c)}});
  c->owner->teardown(c);
}

// memory: drains the keepalive's completion and sends the next one when it is due. Not
// STATUS_SUCCESS once a keepalive failed: its retries ran out, the peer is gone. A flushed one
// (STATUS_CANCELLED: the connection is ending anyway) sends no more.
NTSTATUS Services::poll_memory(Conn* c, std::chrono::steady_clock::time_point now) {
  if (c->svc->cfg.keepalive_ms == 0) return STATUS_SUCCESS;
  NdkResultEx results[4];
  uint32_t n;
  while ((n = c->cq->get_results_ex(results, 4)) != 0) {
    for (uint32_t i = 0; i < n; ++i) {
      const NTSTATUS st = results[i].status;
      if (st == STATUS_SUCCESS)
        c->probe_outstanding = false;
      else if (st != STATUS_CANCELLED)
        return st;
    }
  }
  return keepalive(c, now);
}

// memory, perftest's control: a zero-length RDMA WRITE (request context null) when one is due.
NTSTATUS Services::keepalive(Conn* c, std::chrono::steady_clock::time_point now) {
  const uint32_t every = c->svc->cfg.keepalive_ms;
  if (every == 0 || c->probe_outstanding || now < c->next_probe) return STATUS_SUCCESS;
  const NTSTATUS st = c->qp->write(nullptr, nullptr, 0, 0, 0, 0);
  if (st != STATUS_SUCCESS) return st;
  c->probe_outstanding = true;
  c->next_probe = now + std::chrono::milliseconds(every);
  return STATUS_SUCCESS;
}

unsigned Services::poll() {
  unsigned work = poll_tcp();
  const auto now = std::chrono::steady_clock::now();
  // teardown() and a disconnect that completes inline may free a Conn: not while iterating conns_.
  std::vector<std::pair<Conn*, NTSTATUS>> failed;
  std::vector<std::pair<Conn*, const char*>> disconnect;
  std::vector<Conn*> close_again;
  for (auto& [c, owned] : conns_) {
    if (c->close_retry) close_again.push_back(c);
    if (!c->established || c->closing || c->cq == nullptr) continue;
    if (c->core_failed.load(std::memory_order_acquire)) {
      failed.emplace_back(c, c->core_error.load(std::memory_order_relaxed));
      continue;
    }
    const config::ListenerConfig& cfg = c->svc->cfg;
    if (c->svc->memory() || c->is_control()) {
      const NTSTATUS st = c->is_control() ? poll_control(c, now) : poll_memory(c, now);
      if (st != STATUS_SUCCESS) failed.emplace_back(c, st);
      continue;
    }
    if (c->svc->perftest()) continue;  // a data connection: its core does the work
    if (!c->receives_posted && now >= c->post_receives_at) {
      if (const NTSTATUS st = post_receives(c); st != STATUS_SUCCESS) {
        failed.emplace_back(c, st);
        continue;
      }
      start_echo(c);
      c->active_at = now;
      ++work;
    }
    if (c->disconnecting) continue;
    const uint64_t done = c->echoes_done.load(std::memory_order_relaxed);
    if (done != c->idle_seen) {
      c->idle_seen = done;
      c->active_at = now;
    }
    if (cfg.disconnect_after != 0 && done >= cfg.disconnect_after) {
      disconnect.emplace_back(c, "disconnect_after");
    } else if (cfg.idle_timeout_ms != 0 && c->receives_posted &&
               now - c->active_at >= std::chrono::milliseconds(cfg.idle_timeout_ms)) {
      disconnect.emplace_back(c, "idle_timeout");
    }
  }
  for (auto [c, why] : disconnect) {
    pmd::log(LogLevel::kInfo, "service_disconnecting",
             {{"service", "echo"}, {"qpn", std::to_string(c->qp->qpn())}, {"why", why}});
    c->disconnecting = true;
    const NTSTATUS st = c->connector->disconnect(&Services::on_disconnect_done, c);
    if (st != STATUS_PENDING) on_disconnect_done(c, st);
  }
  for (auto [c, st] : failed) {
    // A perftest session's failed control connection took its data connections down with it: one
    // of them later in the list is ending already (or gone).
    if (!conns_.contains(c) || c->closing) continue;
    pmd::log(LogLevel::kWarning, "service_connection_failed",
             {{"service", std::string(config::to_string(c->svc->cfg.service))},
              {"peer", peer_text(c->connector)},
              {"qpn", c->qp ? std::to_string(c->qp->qpn()) : "?"},
              {"status", std::string(status_name(st))},
              {"qp_error", qp_error_text(c)}});
    ++c->svc->counts.failed;
    teardown(c);
  }
  for (Conn* c : close_again) close_next(c);
  if (std::any_of(listening_.begin(), listening_.end(), [](const auto& l) { return l->retiring; }))
    reap();  // a region's close may wait for a retry
  return work + static_cast<unsigned>(disconnect.size() + failed.size() + close_again.size());
}

// The CQ's notification, on the polling core that owns the CQ and the QP. Drains the CQ: each
// SEND that arrived goes back from its receive buffer, each echo that left re-posts its buffer.
// Then arms again (a completion that landed meanwhile fires at once).
void Services::on_cq_notify(void* context, NTSTATUS status) {
  auto* c = static_cast<Conn*>(context);
  if (c->core_stop.load(std::memory_order_acquire)) return;  // teardown: no more posts, no arm
  if (status != STATUS_SUCCESS) {
    // The CQ overran: it and the QP are dead; the control thread ends the connection.
    c->mark_failed(status);
    return;
  }
  const uint32_t msg = c->svc->cfg.message_bytes;
  const bool answer =
      !c->svc->perftest() || c->svc->cfg.sends == config::ListenerConfig::Sends::kEcho;
  NdkResultEx results[32];
  uint32_t n;
  while ((n = c->core_cq->get_results_ex(results, 32)) != 0) {
    for (uint32_t i = 0; i < n; ++i) {
      const NdkResultEx& r = results[i];
      if (r.status != STATUS_SUCCESS) {
        if (r.status == STATUS_CANCELLED) continue;  // flushed: the connection is ending
        // An echo or a receive failed (e.g. the SEND's retries ran out: the peer is gone). The
        // QP is in error; the control thread ends the connection.
        c->mark_failed(r.status);
        return;
      }
      if (r.type == NdkOperationType::kRemoteWrite) {
        if (const NTSTATUS st = answer_write(c, r.bytes_transferred); st != STATUS_SUCCESS) {
          c->mark_failed(st);
          return;
        }
        continue;
      }
      const auto ctx = reinterpret_cast<uintptr_t>(r.request_context);
      const auto slot = static_cast<uint32_t>(ctx >> 1);
      uint8_t* data = c->buf.get() + uint64_t{slot} * msg;
      const bool arrived = (ctx & 1) == 0;
      if (arrived && !answer) {
        // perftest's sink: counted, and the buffer takes the next SEND.
        if (r.bytes_transferred <= msg) {
          bump(c->received_messages, 1);
          bump(c->received_bytes, r.bytes_transferred);
        }
      } else if (arrived && r.bytes_transferred <= msg) {
        // A SEND arrived: the same bytes go back from the same buffer.
        NdkSge sge{data, r.bytes_transferred, c->local_token};
        const NTSTATUS st =
            c->core_qp->send(slot_context(slot, true), &sge, r.bytes_transferred != 0 ? 1 : 0, 0);
        if (st == STATUS_SUCCESS) {
          bump(c->echo_messages, 1);
          bump(c->echo_bytes, r.bytes_transferred);
        }
        continue;
      }
      // The echo left; or a receive completed with more bytes than its buffer, which only an
      // RDMA WRITE with immediate does (its bytes went to the peer's target, e.g. a memory
      // service region in the same PD): nothing of it is here to echo; or perftest's sink took
      // a SEND. Either way the buffer takes the next SEND.
      if (!arrived) bump(c->echoes_done, 1);
      NdkSge sge{data, msg, c->local_token};
      c->core_qp->receive(slot_context(slot, false), &sge, 1);
    }
  }
  c->core_cq->arm(NdkCqNotifyType::kAny);
}

// perftest `writes: echo`, on the core: the client's WRITE of `len` bytes landed (its last byte
// holds its count): the next count goes back in as many bytes, the last one (where the client
// waits) included. Nothing for an empty one. STATUS_BUFFER_TOO_SMALL when it is longer than
// the WRITE slot (message_bytes): the client would wait for a byte we cannot reach.
NTSTATUS Services::answer_write(Conn* c, uint32_t len) {
  const uint32_t msg = c->svc->cfg.message_bytes;
  if (len == 0) return STATUS_SUCCESS;
  if (len > msg) return STATUS_BUFFER_TOO_SMALL;
  bump(c->received_messages, 1);
  bump(c->received_bytes, len);
  uint8_t* data = c->write_data();
  // Our first WRITE counted 1; the answer to the client's n-th counts n + 1 (perftest's counts
  // are one byte, and so is its comparison).
  std::memset(data, static_cast<uint8_t>(++c->writes_seen + 1), len);
  NdkSge sge{data, len, c->local_token};
  const NTSTATUS st = c->core_qp->write(slot_context(c->svc->cfg.queue_depth, true), &sge, 1,
                                        c->write_to, c->write_token, NDK_OP_FLAG_SILENT_SUCCESS);
  if (st == STATUS_SUCCESS) {
    bump(c->echo_messages, 1);
    bump(c->echo_bytes, len);
  }
  return st;
}

}  // namespace rocedp::control
