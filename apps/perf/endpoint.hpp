#pragma once
// The endpoint of one rocedp-perf process: its configuration, the adapter runtime (one port, one
// polling core driven inline by the main thread unless --lcore-mode), and the NDK objects of a
// run: PD, one CQ, QPs and one registered buffer. Object management goes to the control thread
// (run_on_control) and waits for its completions, polling the inline core meanwhile.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "apps/perf/options.hpp"
#include "rocedp/adapter.hpp"
#include "rocedp/config.hpp"
#include "rocedp/connector.hpp"
#include "rocedp/listener.hpp"
#include "rocedp/runtime.hpp"

namespace rocedp::perf {

/// Start-up of two processes may be slow on a loaded machine; a memif link comes up once both
/// EALs run, so the wait is generous (the run's own --timeout still bounds everything).
constexpr uint32_t kStartupWaitS = 30;

/// Waits (kStartupWaitS at most) for the port's link: empty once it is up, else what to report.
/// For the AdapterRuntime and the --raw RawBaseline alike (the same two calls).
template <typename R>
std::string wait_link(R& rt) {
  if (rt.wait_until([&] { return rt.link_up(); }, std::chrono::seconds(kStartupWaitS))) return {};
  return "link of port " + rt.port().name + " did not come up in " + std::to_string(kStartupWaitS) +
         " s";
}

/// This endpoint's configuration: the --config file, or one port from the command line. Either
/// way one polling core (inline on the main lcore, or on --lcore-mode's worker), no listeners
/// (a daemon's services in a shared file are not ours), no telemetry, the fault stage of
/// --fault-drop. False with *err set (a file that does not validate, a bad --ip or --mac).
bool build_config(const EndpointOptions& e, config::Config* cfg, std::string* err);

/// A memif client port fails to start while the server's socket does not exist yet; the two
/// processes start together, so the client side waits (bounded) for the socket file.
void wait_memif_socket(const config::Config& cfg, uint32_t timeout_s);

/// open_adapter for `cfg` (after wait_memif_socket): inline cores unless --lcore-mode.
std::unique_ptr<AdapterRuntime> open_endpoint(const config::Config& cfg, const EndpointOptions& e,
                                              bool connection_manager, uint32_t timeout_s,
                                              std::string* err);

/// build_config and open_endpoint for the modes with no peer to tell about a failure: the error
/// printed as "WHO: ...". Null with *status set: 2 for the configuration, 1 for the start-up.
std::unique_ptr<AdapterRuntime> open_configured(const EndpointOptions& e, bool connection_manager,
                                                uint32_t timeout_s, const char* who, int* status);

/// The frame of a mode that runs one session: open_configured (with the IB CM), the run's time
/// limit armed, the link awaited (up to kStartupWaitS, and within the time limit); then `body`'s
/// exit status (3 once the time limit was reached in a failed run, also while awaiting the link),
/// and the ports detached and the runtime stopped (1 if stopping failed).
int run_endpoint(const EndpointOptions& e, uint32_t timeout_s, const char* who,
                 const std::function<int(AdapterRuntime&)>& body);

/// Polls the inline cores a little (up to 64 passes while they find work); naps when the cores
/// run on their own lcores. What every wait for the peer does between its checks.
void keep_polling(AdapterRuntime& rt);

/// One create, connect, request or close completion.
struct Pending {
  std::atomic<int> done{0};
  std::atomic<NTSTATUS> status{STATUS_PENDING};
  NdkObjectHeader* object = nullptr;
  bool owed = false;  ///< call_and_wait's start returned STATUS_PENDING: a completion comes here
};
void on_created(void* ctx, NTSTATUS status, NdkObjectHeader* object);  // ctx: Pending
void on_request(void* ctx, NTSTATUS status);                           // ctx: Pending
void on_closed(void* ctx);                                             // ctx: Pending

/// Runs start() on the control thread; when it returned STATUS_PENDING (p.owed), waits (bounded)
/// for `p` to complete. The inline status, p's status, or STATUS_IO_TIMEOUT: then the request is
/// still pending, and `p` must outlive its completion (close_connector_settled).
NTSTATUS call_and_wait(AdapterRuntime& rt, Pending& p, const std::function<NTSTATUS()>& start,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10));

/// Closes connector `c` on the control thread and waits for the completions still owed to `pend`
/// (owed, not done yet): the close cancels the connector's pending request, and that completion
/// (CANCELLED) runs after the close returned, into memory the caller holds.
void close_connector_settled(AdapterRuntime& rt, Connector* c,
                             std::initializer_list<Pending*> pend);

/// Runs start(i) for i in [0, n) on the control thread, kBatch at a time (a core's request ring
/// holds 1024), waiting for each batch's completions in pend[i]. start returns the inline status
/// (STATUS_PENDING: a completion follows). False with *err naming `what` and the item.
constexpr uint32_t kBatch = 256;
bool batched(AdapterRuntime& rt, size_t n, std::vector<Pending>& pend,
             const std::function<NTSTATUS(size_t)>& start, const char* what, std::string* err);

/// IB CM, active side: connects `qp` to `to` (both read limits `read_limit`) and completes the
/// connection with the disconnect callback. A refused connection (the server does not listen
/// yet) is tried again every 200 ms, up to 50 times or the run's time limit. The last status;
/// on success the connector in *out.
NTSTATUS connect_retrying(AdapterRuntime& rt, Qp* qp, const NdkSockAddr& to, uint32_t read_limit,
                          NdkDisconnectEventCallbackEx on_disconnect, void* disconnect_ctx,
                          Connector** out);
/// IB CM, passive side: accepts connector `c` onto `qp` and waits for the RTU (or the peer's first
/// packet). `p` must outlive a late completion.
NTSTATUS accept_connection(AdapterRuntime& rt, Connector* c, Qp* qp, uint32_t read_limit,
                           NdkDisconnectEventCallbackEx on_disconnect, void* disconnect_ctx,
                           Pending& p);

/// The one rdma_cm connection of a scripted mode (--rping, --ops-check), either side. The server's
/// listener takes the first request (later ones are rejected); `gone` is set when the peer
/// disconnects.
struct CmLink {
  Listener* listener = nullptr;
  Connector* conn = nullptr;
  std::atomic<NdkConnector*> incoming{nullptr};
  std::atomic<int> gone{0};
  Pending accepted;
};
/// A disconnect callback (ctx: CmLink): sets link.gone.
void cm_on_disconnect(void* ctx, NTSTATUS status);
/// The server: listens on `port`, prints "WHO: listening on port PORT" and waits (up to
/// timeout_s and the run's time limit) for a request: its connector in link.conn, not answered
/// yet. False with *err.
bool cm_await_request(AdapterRuntime& rt, CmLink& link, uint16_t port, uint32_t timeout_s,
                      const char* who, std::string* err);
/// The server, listening: waits (up to timeout_s and the run's time limit) for a request while
/// link.incoming is empty (the listener rejects requests while it holds one): its connector in
/// link.conn. False with *err.
bool cm_next_request(AdapterRuntime& rt, CmLink& link, uint32_t timeout_s, std::string* err);
/// cm_await_request, then accepts the request onto `qp`. False with *err.
bool cm_accept_one(AdapterRuntime& rt, CmLink& link, uint16_t port, Qp* qp, uint32_t timeout_s,
                   const char* who, std::string* err);
/// The client: connect_retrying to addr (IPv4 or IPv6), port `port`. False with *err.
bool cm_connect(AdapterRuntime& rt, CmLink& link, Qp* qp, NdkSockAddr addr, uint16_t port,
                std::string* err);
/// How long a disconnect may wait for the peer's DREP before the connector is closed anyway: long
/// enough for the CM to send a lost DREQ twice more (every 4.3 s). A process that closed sooner
/// would leave a peer whose DREQ was lost connected to nothing.
inline constexpr std::chrono::seconds kDisconnectWait{10};
/// How long a connect or an accept may wait for the CM to establish the connection or give up on
/// it: longer than the passive side's REP retries (4 sends 4.3 s apart) with an MRA's wait on top,
/// so the CM decides and not this wait. Found in interop_chaos: with the first REP and the RTU
/// lost, Linux's RTU to the third REP came 14.8 s after the REQ, past the 10 s accept once waited.
inline constexpr std::chrono::seconds kEstablishWait{30};
/// Disconnects (waits up to kDisconnectWait), closes the connector and the listener, and lets the
/// DREP and the last ACKs leave.
void cm_close(AdapterRuntime& rt, CmLink& link);
/// Disconnects every connector of `conns` whose `disconnect[i]` is set, all at once, waits up to
/// kDisconnectWait for their DREPs, then closes every connector (and runs `close_more` in the
/// same control turn) and waits for the disconnects the close cancelled. Each one's status
/// (STATUS_SUCCESS where it was not asked; STATUS_IO_TIMEOUT where no answer came).
std::vector<NTSTATUS> disconnect_and_close(AdapterRuntime& rt, const std::vector<Connector*>& conns,
                                           const std::vector<bool>& disconnect,
                                           const std::function<void()>& close_more = {});

/// Out of band (no CM, as perftest's TCP exchange and ibv_rc_pingpong): finds the MAC of
/// p.remote_ip by ARP and moves `qp` to RTS with `p`. False with *err (no IPv4 address, no ARP
/// answer, the connect's status).
bool connect_out_of_band(AdapterRuntime& rt, Qp* qp, NdkQpConnectParams p, std::string* err);

/// A CQ on polling core 0; `notification` (with `context`) is its ArmCq callback, if any.
bool create_cq(AdapterRuntime& rt, uint32_t depth, Cq** out, std::string* err,
               NdkCqNotificationCallback notification = nullptr, void* context = nullptr);
/// n QPs on `cq` (send and receive), QP i with context i; with `srq` their receives come from it
/// (rx_depth unused).
bool create_qps(AdapterRuntime& rt, Pd* pd, Cq* cq, size_t n, uint32_t rx_depth, uint32_t tx_depth,
                std::vector<Qp*>* out, std::string* err, Srq* srq = nullptr);
/// A shared receive queue of `depth` one-SGE receives on polling core 0 (the CQs' core).
bool create_srq(AdapterRuntime& rt, Pd* pd, uint32_t depth, Srq** out, std::string* err);
/// A region registered for local write and remote READ and WRITE.
bool register_buffer(AdapterRuntime& rt, Pd* pd, void* data, size_t len, Mr** out,
                     std::string* err);
/// Closes the QPs, then the SRQs, the CQs, then the regions (once their completion came, no core
/// touches the buffers any more), then the PD; null entries are skipped. Failures are printed.
void close_objects(AdapterRuntime& rt, const std::vector<Qp*>& qps, const std::vector<Cq*>& cqs,
                   const std::vector<Mr*>& mrs, Pd* pd, const std::vector<Srq*>& srqs = {});

/// The objects of a native or IB CM run: one CQ for every QP's send and receive completions, and
/// one buffer of message slots, registered for remote access.
struct Endpoint {
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Mr* mr = nullptr;
  std::vector<Qp*> qps;
  std::vector<uint8_t> buf;
  uint32_t cq_depth = 0;
  uint32_t qp_depth = 0;
  uint32_t rx_depth = 0;
  uint64_t rss_per_qp = 0;  ///< process RSS growth per QP while creating them
};

/// t.qps QPs of depth min(t.tx_depth, the adapter's limit); SEND runs get as many receives.
bool create_endpoint(AdapterRuntime& rt, const Test& t, uint64_t buf_len, Endpoint* ep,
                     std::string* err);
void close_endpoint(AdapterRuntime& rt, Endpoint& ep);

}  // namespace rocedp::perf
