#pragma once
// rocedpd's built-in services behind the YAML `listeners:` (config::ListenerConfig), consumers
// of the NDK API like any other (DESIGN.md §5):
//
//  * echo:   every incoming connection gets a CQ and a QP on a polling core (round robin), with
//            queue_depth receives of message_bytes posted before the Accept. Each SEND that
//            arrives goes back on the same connection as a SEND of the same bytes, straight from
//            the receive buffer; the buffer is posted again once that SEND completed.
//  * memory: one zeroed region of memory_bytes per listener, registered for remote READ and
//            WRITE. Every connection's Accept carries a MemoryServiceInfo in its private data
//            (public: rocedp/memory_service.hpp), so the client can WRITE and READ it right after
//            CompleteConnect.
//
//  * perftest: answers Linux perftest's rdma_cm clients (ib_{write,read,send,atomic}_bw -R,
//            ib_{write,read,send,atomic}_lat -R; perftest_service.cpp) and, with tcp_exchange,
//            its clients without -R, whose set-up runs over TCP (perftest_tcp.cpp: the same
//            messages on a kernel socket, each key making a data QP connected out of band). A
//            client's first connection is its control connection: the service answers each of its
//            set-up messages (rocedp/perftest.hpp) as perftest's server does, and takes the
//            client's data connections (those from the same address between the two 56-byte zero
//            messages). Every data connection's key names the listener's region (memory_bytes),
//            which the client's WRITEs, READs and atomics use; each has queue_depth receives of
//            message_bytes, whose SENDs it takes (sends: sink) or answers with the same bytes
//            (sends: echo) on its core, as the echo does. With writes: echo a data connection
//            plays ib_write_lat's server: once the client's key names its buffer, it writes
//            first (message_bytes long: the client never tells its size), then its core answers
//            each WRITE that landed (Qp::report_remote_writes) with the next count in as many
//            bytes. The control connection ends the session: its end (the client's DREQ, a
//            failed keepalive, a message perftest never sends) ends the data connections too.
//
// Echo knobs for peers' tests: receive_delay_ms posts the receives only that long after the
// connection is established (the peer meets RNR NAKs); disconnect_after N makes the service send
// the DREQ after N echoes.
//
// Peers that vanish without a DREQ (a crashed host, a killed process) must not hold their slots
// for ever. An echo that fails (its SEND's retries ran out) ends the connection; an echo
// connection that completes no echo for idle_timeout_ms is disconnected. A memory connection
// sees nothing of its peer's one-sided operations, so the service sends a zero-length RDMA WRITE
// every keepalive_ms (no R_Key or memory is involved, IBTA C9-88; rxe and rocedp answer it with an
// ACK); once one fails (its retries ran out) the connection ends.
//
// A reload (update()) stops the listeners no longer configured one by one, as stop() stops them
// all: the listener closes, its connections end, its region closes once they are gone, and then
// the listener is forgotten; new entries start; the rest keep their connections.
//
// Connections beyond max_connections, and every request once stopping, are rejected (REJ reason
// 28, consumer defined, no private data). A peer's disconnect, or the peer's death, closes the
// connection's connector, QP and CQ.
//
// Threads: connection set-up and teardown run on the control thread (the NDK callbacks
// ConnectEvent, Create/Close/Request completions, DisconnectEvent, and poll(), which posts
// delayed receives, starts disconnect_after and idle disconnects, runs the memory connections'
// keepalives and answers perftest's control connections: it is the only thread that posts to or
// reads their queues). The echo's data path (and perftest's data connections') runs on the
// polling core that owns the connection's CQ: each CQ is armed, and its notification callback
// (NDK runs it on the owning core) drains the CQ with GetCqResultsEx, posts the echoes and the
// receives, and arms again. So an echo costs no hand-over to the control thread,
// which may nap. The control thread posts the first receives and arms once; from then on only the
// core touches the QP's queues and the CQ, so posts stay serialized per queue as NDK requires.
// Before teardown starts, the control thread sets Conn::core_stop; a notification that sees it
// touches nothing (the close requests reach the core after it, so no callback can use a closed QP).
//
// Services use only the public API in include/rocedp/.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"
#include "control/connection_rows.hpp"
#include "rocedp/adapter.hpp"
#include "rocedp/connector.hpp"
#include "rocedp/memory_service.hpp"
#include "rocedp/status.hpp"

namespace rocedp::perf {
struct PerftestKey;
}

namespace rocedp::control {

/// Appends `why` to the "; "-separated list of failures in *errors.
inline void add_error(std::string* errors, const std::string& why) {
  *errors += (errors->empty() ? "" : "; ") + why;
}

class Services {
 public:
  /// Control thread: a PD and one listening Listener per entry (IP wildcard, ND port
  /// `nd_port`) on `adapter`, whose connection manager is attached. Memory regions are
  /// allocated and registered here. STATUS_SUCCESS; otherwise the failing call's status,
  /// *error says which listener, and *out holds the services already stopping: what was created
  /// closes asynchronously (a region's close completes on the cores), so the caller keeps them
  /// until stopped(), as at shutdown.
  static NTSTATUS start(Adapter& adapter, const std::vector<config::ListenerConfig>& listeners,
                        std::unique_ptr<Services>* out, std::string* error);
  ~Services();
  Services(const Services&) = delete;
  Services& operator=(const Services&) = delete;

  /// Control thread, once per loop pass: posts delayed receives, starts disconnect_after and
  /// idle disconnects, sends and checks the memory connections' keepalives, ends connections
  /// whose CQ overran or whose peer stopped answering. Echoes run on the cores, not here.
  /// Returns work done.
  unsigned poll();
  /// Control thread: stop accepting (listeners closed), end every connection (connector close:
  /// DREQ or REJ; QP and CQ closed), then close the regions and the PD. stopped() turns true
  /// when everything is closed (any thread may read it).
  void stop();
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }

  /// Control thread (rocedpd's reload): serve `listeners` from now on. A listener of ours whose
  /// entry is not among them (compared whole: a changed entry is another listener) stops as at
  /// stop(), alone: no new connection, its connections end, its region closes. An entry not
  /// served yet starts. Listeners in both keep their connections. STATUS_SUCCESS, or the first
  /// failing listener's status with *error naming each that failed (the other entries apply);
  /// STATUS_INVALID_DEVICE_STATE once stopping.
  NTSTATUS update(const std::vector<config::ListenerConfig>& listeners, std::string* error);
  /// Control thread: the entries served now, not those stopping, in the order they started.
  std::vector<config::ListenerConfig> serving() const;

  /// Control thread: "echo" / "memory" / "perftest" for a connector a listener of ours handed
  /// out, else "".
  std::string service_of(const Connector* c) const;
  /// Control thread: one row per listening service, in configuration order (the echo counts
  /// include the open connections', read from the cores' relaxed counters).
  std::vector<ServiceRow> rows() const;
  size_t open_connections() const { return conns_.size(); }
  size_t open_sessions() const { return sessions_.size(); }  ///< perftest clients' sessions

  struct Listening;
  struct Conn;
  struct Session;

 private:
  explicit Services(Adapter& adapter);
  NTSTATUS listen(const config::ListenerConfig& cfg, std::string* error);
  void retire(Listening* l);
  void reap();
  static void on_connect_event(void* context, NdkConnector* connector);
  static void on_cq_created(void* context, NTSTATUS status, NdkObjectHeader* object);
  static void on_qp_created(void* context, NTSTATUS status, NdkObjectHeader* object);
  static void on_accepted(void* context, NTSTATUS status);
  static void on_disconnected(void* context, NTSTATUS reason);
  static void on_connector_closed(void* context);
  static void on_region_closed(void* context);
  static void on_qp_closed(void* context);
  static void on_cq_closed(void* context);
  void accept(Conn* c);
  uint32_t max_inbound_reads() const;  ///< the adapter's inbound read limit (NdkQueryAdapterInfo)
  void teardown(Conn* c);
  void fail_setup(Conn* c, const char* step, NTSTATUS st);
  void close_next(Conn* c);
  template <class T>
  bool close_one(Conn* c, T*& obj, NdkCloseCompletion done);
  static void on_cq_notify(void* context, NTSTATUS status);
  NTSTATUS post_receives(Conn* c);
  void start_echo(Conn* c);
  NTSTATUS start_writes(Conn* c, uint64_t to, uint32_t token);
  static NTSTATUS answer_write(Conn* c, uint32_t len);
  static void on_disconnect_done(void* context, NTSTATUS status);
  /// A connection's client as "IP:port" ("?" if its connector cannot tell).
  static std::string peer_text(const Connector* connector);
  /// Why its QP entered the error state (Qp::error_reason), "none" if it has not: the logs of
  /// a connection's end name a peer's refused request (refused_access: a WRITE or READ outside
  /// the region) or a peer gone silent (retry_exceeded).
  static std::string qp_error_text(const Conn* c);
  NTSTATUS poll_memory(Conn* c, std::chrono::steady_clock::time_point now);
  NTSTATUS keepalive(Conn* c, std::chrono::steady_clock::time_point now);
  NTSTATUS create_objects(Conn* c, const char** step);  // buffers, CQ; then the QP
  // perftest (perftest_service.cpp)
  void join_session(Conn* c, const NdkSockAddr& peer);
  void leave_session(Conn* c);
  NTSTATUS post_control_receives(Conn* c);
  NTSTATUS poll_control(Conn* c, std::chrono::steady_clock::time_point now);
  NTSTATUS answer(Conn* c, uint32_t slot, uint32_t len);
  perf::PerftestKey service_key(const Conn* d) const;
  void answer_common(Session& s, const uint8_t* in, size_t len, uint8_t* out, std::string* refused,
                     const std::string& peer);
  Conn* data_for_key(Session& s, uint32_t qpn);
  // perftest over TCP (perftest_tcp.cpp)
  NTSTATUS listen_tcp(Listening* l, std::string* error);
  unsigned poll_tcp();
  void serve_tcp(Session& s);
  void serve_tcp_pass(Session& s);
  enum class TcpStep { kAnswered, kWait, kRefused };
  TcpStep tcp_message(Session& s, const uint8_t* in, size_t len, std::string* refused);
  bool new_tcp_data(Session& s, const perf::PerftestKey& key, std::string* refused);
  void encode_tcp_key(const Conn* c, uint8_t out[]) const;
  void tcp_key_ready(Conn* c);
  void oob_connect(Conn* c);
  static void on_oob_connected(void* context, NTSTATUS status);
  void end_tcp(Session* s);  // closes the exchange, ends its data connections; may free s

  Adapter& adapter_;
  Pd* pd_ = nullptr;
  std::vector<std::unique_ptr<Listening>> listening_;
  std::unordered_map<Conn*, std::unique_ptr<Conn>> conns_;
  std::unordered_map<const Connector*, const Listening*> by_connector_;
  std::vector<std::unique_ptr<Session>> sessions_;  // perftest clients
  // Tells a neighbour resolution's callback, which may come after the services are gone, to drop.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  uint64_t next_serial_ = 0;
  uint32_t next_core_ = 0;
  bool stopping_ = false;
  std::atomic<bool> stopped_{false};
};

}  // namespace rocedp::control
