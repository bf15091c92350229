#pragma once
// The connection manager of one adapter (control thread only): IB CM agent on QP1 and the
// provider state behind rocedp's Listener, Connector and SharedEndpoint (DESIGN.md §3).
//
//  * CA GUID = EUI-64 of the port MAC (as rxe), comm IDs allocated unique and non-zero.
//  * Incoming QP1 MADs are routed: REQ -> duplicate / stale / listener by
//    rdma_cm port / REJ "invalid service ID"; everything else by our comm ID (a Timeout REJ with
//    remote ID 0 by the peer's comm ID + CA GUID).
//  * Each CM connection (CmConnection, pure) lives in a ConnEntry owned here, so it can finish
//    its exchange (TimeWait, DREQ after close) after the consumer closed its connector.
//  * Consumer callbacks are never made from inside a CmConnection step: connection events only
//    update provider state and queue the callback, which runs once the step returned (and only
//    if the object is still open: nothing fires after close).
//  * Frames leave through core `tx_core`'s request ring (core_requests::transmit), like ARP.

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "control/address_registry.hpp"
#include "control/cm_connection.hpp"
#include "control/connection_manager_setup.hpp"
#include "control/neighbour_table.hpp"
#include "control/sock_addr.hpp"
#include "dataplane/wire/cm_messages.hpp"
#include "dataplane/wire/ipv4.hpp"
#include "rocedp/connection_manager.hpp"
#include "rocedp/connector.hpp"
#include "rocedp/listener.hpp"
#include "rocedp/shared_endpoint.hpp"

namespace rocedp::control {

class CmAgent;

/// One CM connection and where its messages go. Agent-owned.
struct ConnEntry final : public CmSink {
  ConnEntry(CmAgent& a, const CmConfig& cfg) : agent(a), cm(*this, cfg) {}
  void cm_send(const wire::CmMad& mad) override;
  void cm_event(const CmEvent& ev) override;

  CmAgent& agent;
  CmConnection cm;
  Connector* owner = nullptr;  ///< null once the consumer closed its connector
  uint32_t local_comm_id = 0;
  wire::IpAddress remote_ip;
  wire::MacAddr remote_mac{};
  uint64_t remote_guid = 0;  ///< keys of the agent's duplicate / stale tables
  uint32_t remote_comm_id = 0;
  uint32_t remote_qpn = 0;
  bool remote_indexed = false;  ///< in those tables (a peer's CA GUID may be 0)
  FourTuple tuple{};
  bool tuple_reserved = false;
  bool released = false;
};

/// Phases of a connector (its CmConnection may already be gone).
enum class ConnPhase : uint8_t {
  kIdle,        // created, nothing asked
  kResolving,   // Connect: ARP for the destination
  kConnecting,  // Connect: REQ sent
  kConnected,   // Connect completed SUCCESS (REP): CompleteConnect or Reject next
  kCompleting,  // CompleteConnect: QP moving to RTS, RTU after
  kRequest,     // passive: a REQ waits for Accept / Reject
  kAccepting,   // Accept: QP to RTS then REP, waiting for the RTU
  kEstablished,
  kDisconnecting,  // our DREQ is out
  kDisconnected,   // ended after establishment
  kFailed,         // ended before establishment
};

}  // namespace rocedp::control

namespace rocedp {

struct Connector::State {
  control::CmAgent* agent = nullptr;
  uint64_t id = 0;  ///< liveness key for asynchronous answers
  control::ConnEntry* conn = nullptr;
  control::ConnPhase phase = control::ConnPhase::kIdle;
  bool active = false;
  Qp* qp = nullptr;               ///< dereferenced only while Connect/Accept/CompleteConnect run
  uint32_t qpn = 0, qp_core = 0;  ///< what later flushes and probes use (the QP may be closed)
  bool have_own_limits = false;
  Listener* listener = nullptr;  ///< passive: where the REQ came in (null once it closed)
  SharedEndpoint* endpoint = nullptr;
  bool delivered = false;  ///< passive: the ConnectEvent handed it out
  NdkSockAddr local{}, peer{};
  bool have_local = false;
  bool own_binding = false;             ///< unbind `local` at close
  uint32_t irl = 0, orl = 0;            ///< ours (Connect/Accept)
  uint32_t peer_irl = 0, peer_orl = 0;  ///< the peer's responder resources / initiator depth
  bool have_peer_data = false;
  std::array<uint8_t, wire::kCmRtuPrivateLen> peer_pd{};
  uint32_t peer_pd_len = 0;
  uint32_t remote_qpn = 0;
  // PSNs as Linux ib_cm means them (cm.c: the REQ's Starting PSN becomes the active side's
  // rq_psn, the REP's its sq_psn; the passive side mirrors that): the Starting PSN a side puts in
  // its own REQ or REP is the first PSN it RECEIVES. So `rq_psn` is what we announced and
  // `sq_psn` is what the peer announced.
  uint32_t rq_psn = 0, sq_psn = 0;
  // How the peer asked us to retry (REQ: Retry Count, RNR Retry Count, Local ACK Timeout; REP:
  // RNR Retry Count); 0xFF where its message carries no such field.
  uint8_t peer_retry_count = 0xFF, peer_rnr_retry = 0xFF, peer_ack_timeout = 0xFF;
  uint8_t peer_traffic_class = 0;  ///< the REQ's primary path (passive side)
  uint8_t path_mtu_code = 3;
  wire::MacAddr remote_mac{};
  NTSTATUS abort_status = STATUS_SUCCESS;  ///< why the establishment ended without a call pending
  NdkRequestCompletion request = nullptr;  ///< the pending Connect/Accept/Complete/Disconnect
  void* request_context = nullptr;
  NdkDisconnectEventCallback disconnect = nullptr;
  NdkDisconnectEventCallbackEx disconnect_ex = nullptr;
  void* disconnect_context = nullptr;
  std::vector<uint8_t> connect_pd;  ///< private data kept while ARP resolves
  uint64_t next_probe_ns = 0;
  bool probe_in_flight = false;
  bool qp_flushed = false;
};

struct Listener::State {
  control::CmAgent* agent = nullptr;
  NdkConnectEventCallback connect_event = nullptr;
  void* connect_event_context = nullptr;
  bool listening = false;
  NdkSockAddr local{};
  bool paused = false;  ///< ControlConnectEvents(pause): requests are refused as if not listening
  std::vector<Connector*> spawned;  ///< connectors handed out, not yet established
};

}  // namespace rocedp

namespace rocedp::control {

class CmAgent {
 public:
  CmAgent(Adapter& adapter, const ConnectionManagerSetup& setup);
  ~CmAgent();

  uint64_t now_ns() const;
  uint32_t poll();
  bool receive_frame(const uint8_t* frame, size_t len);

  // ---- used by the object files (ndk_connector.cpp, ndk_listener.cpp, ndk_shared_endpoint.cpp)
  Adapter& adapter() { return adapter_; }
  const ConnectionManagerSetup& setup() const { return setup_; }
  AddressRegistry& registry() { return registry_; }
  /// The port's address of `peer`'s family (an IPv6 peer of a port without IPv6: ::, which no
  /// bind accepts but the wildcard's).
  wire::IpAddress local_ip_for(const wire::IpAddress& peer) const {
    return peer.is_v4() ? wire::IpAddress(ip_) : ip6_;
  }
  bool has_ip6() const { return !ip6_.is_any(); }
  /// The port's DSCP << 2 (0: unmarked).
  uint8_t local_tos() const { return tos_; }
  /// The ToS of the MADs of a connection whose REQ asked for `peer_traffic_class` (0: none, or
  /// the active side): a marked port's DSCP; else the REQ's DSCP, as the passive QP follows the
  /// REQ's class (and Linux's CM sends its MADs on the REQ's path). MADs are not ECN-capable.
  uint8_t mad_tos(uint8_t peer_traffic_class) const {
    return tos_ != 0 ? tos_ : static_cast<uint8_t>(peer_traffic_class & ~wire::kEcnMask);
  }
  uint64_t ca_guid() const { return ca_guid_; }
  uint32_t max_path_mtu() const;
  uint32_t max_read_limit() const;
  CmConfig cm_config() const { return cm_cfg_; }

  /// A new connection entry with a fresh comm ID (registered for routing).
  ConnEntry* new_connection();
  /// The peer's keys became known (REQ received / REP received): duplicate + stale routing.
  void index_remote(ConnEntry* e, uint64_t guid, uint32_t comm_id, uint32_t qpn);
  void unindex_remote(ConnEntry* e);
  /// kReleased: the entry leaves the tables; freed on the next poll.
  void release(ConnEntry* e);

  /// Resolve the peer's MAC (static / ARP; IPv6: neighbour discovery). The callback runs on the
  /// control thread, inline when the answer is known (return true) or later from poll().
  bool resolve(const wire::IpAddress& ip,
               std::function<void(bool reachable, const wire::MacAddr& mac)> cb);
  /// One MAD to `dst_ip` with ToS (traffic class) `tos` (ConnEntry::cm_send picks a
  /// connection's), from the port's address of `dst_ip`'s family.
  void send_mad(const wire::IpAddress& dst_ip, const wire::MacAddr& dst_mac, const wire::CmMad& mad,
                uint8_t tos);

  /// Queue a consumer callback; runs after the current CM step, if `connector_id` (0 = none)
  /// is still open. `request` marks a RequestCompletion: it is owed to the consumer even if the
  /// connector closes first (close moves it to the close's completions, see take_owed).
  void defer(uint64_t connector_id, std::function<void()> fn, bool request = false);
  void run_deferred();
  /// Connector close: moves the RequestCompletions still queued for `connector_id` to the
  /// completions run by the next poll(). True if there was one.
  bool take_owed(uint64_t connector_id);
  /// A callback for the next poll() (never inline from the call that queued it): the completions
  /// of a close that pended (NDKPI: each pending request completes, then the close).
  void complete_later(std::function<void()> fn) { completions_.push_back(std::move(fn)); }
  /// Closes that pended and have not fired their CloseCompletion yet (detach waits for them).
  uint32_t closes_pending = 0;

  // Object registry (liveness for asynchronous answers, limits).
  uint64_t add_connector(Connector* c);
  void remove_connector(Connector* c);
  Connector* connector(uint64_t id) const;
  /// Every open connector by liveness id (telemetry walks it on the control thread).
  const std::unordered_map<uint64_t, Connector*>& connectors() const { return connectors_; }
  std::vector<Listener*>& listeners() { return listeners_; }
  uint32_t open_listeners = 0, open_endpoints = 0, open_connectors = 0;
  /// 4-tuples of Connects still resolving the peer's MAC (not yet reserved in the registry),
  /// so a second Connect on the same tuple fails ADDRESS_ALREADY_EXISTS inline.
  std::set<FourTuple> resolving_tuples;

  /// The connection event of an entry that still has an owner.
  void on_connection_event(Connector* c, const CmEvent& ev);
  /// A REQ for a listening port: make the passive connector and deliver (or hold) it.
  void on_request(Listener* l, const wire::CmMad& req, const wire::MacAddr& src_mac,
                  const wire::IpAddress& src_ip);
  void deliver(Listener* l, Connector* c);

  ConnectionManagerCounters counters{};
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);

 private:
  void route(const wire::CmMad& m, const wire::MacAddr& src_mac, const wire::IpAddress& src_ip,
             const wire::IpAddress& dst_ip);
  void send_raw_rej(const wire::CmMad& incoming, wire::CmRejReason reason, const wire::MacAddr& mac,
                    const wire::IpAddress& ip);
  void run_timers(uint64_t now);
  void probe_qps(uint64_t now);
  Listener* listener_for(const wire::IpAddress& dst_ip, uint16_t port) const;

  Adapter& adapter_;
  ConnectionManagerSetup setup_;
  CmConfig cm_cfg_;
  AddressRegistry registry_;
  std::unique_ptr<NeighbourTable> neighbours_;
  uint32_t ip_ = 0;                                ///< the port's IPv4 address
  wire::IpAddress ip6_ = wire::IpAddress::v6({});  ///< its IPv6 address (:: when none)
  uint8_t tos_ = 0;  ///< the port's DSCP << 2: the ToS of our MADs and REQs' traffic class
  wire::MacAddr mac_{};
  uint16_t port_id_ = 0;
  uint64_t ca_guid_ = 0;
  uint32_t next_comm_id_ = 1;  ///< a random start (constructor)
  uint32_t qp1_psn_ = 0;
  uint16_t ip_id_ = 0;
  std::unordered_map<uint32_t, std::unique_ptr<ConnEntry>> conns_;  // by local comm ID
  std::map<std::pair<uint64_t, uint32_t>, ConnEntry*> by_remote_comm_;
  std::map<std::pair<uint64_t, uint32_t>, ConnEntry*> by_remote_qpn_;
  std::vector<std::unique_ptr<ConnEntry>> graveyard_;
  std::vector<Listener*> listeners_;
  std::unordered_map<uint64_t, Connector*> connectors_;
  uint64_t next_connector_id_ = 1;
  struct Deferred {
    uint64_t id;
    std::function<void()> fn;
    bool request;
  };
  std::deque<Deferred> deferred_;
  std::deque<std::function<void()>> completions_;
  // Timer scan (run_timers): a connection's deadline only moves when it sends or receives a MAD
  // or fires a timer, so the scan over every connection runs only after one of those (dirty) or
  // once the earliest known deadline is due; not on every idle poll.
  bool timers_dirty_ = true;
  uint64_t next_timer_ns_ = 0;
  uint64_t next_sweep_ns_ = 0;   // registry TimeWait garbage collection, a few times per TimeWait
  std::vector<ConnEntry*> due_;  // run_timers scratch (capacity kept)
  bool running_deferred_ = false;
};

void shared_endpoint_maybe_free(SharedEndpoint* sep);
/// Frees a passive connector that was never handed to the consumer (REJ sent if still pending).
void drop_undelivered(Connector* c);
/// The listener is going away: the connector loses it; establishment not finished is abandoned.
void abandon_by_listener(Connector* c);

/// The agent of `adapter`, or null (none attached, or the adapter is gone).
CmAgent* agent_of(const Adapter& adapter);

/// IB path MTU code <-> bytes (IBTA Table 180: 1=256 ... 5=4096).
constexpr uint32_t mtu_bytes(uint8_t code) {
  return code >= 1 && code <= 5 ? 128u << code : 1024u;
}
constexpr uint8_t mtu_code(uint32_t bytes) {
  uint8_t c = 1;
  while (c < 5 && (128u << (c + 1)) <= bytes) ++c;
  return c;
}

}  // namespace rocedp::control
