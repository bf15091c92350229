#include "control/connection_telemetry.hpp"

#include <algorithm>
#include <memory>

#include "control/cm_agent.hpp"
#include "control/ndk_internal.hpp"
#include "dataplane/qpn_map.hpp"
#include "dataplane/rc/completer.hpp"

namespace rocedp::control {

using ndk_detail::Access;

namespace {

const char* phase_name(ConnPhase p) {
  switch (p) {
    case ConnPhase::kIdle:
      return "idle";
    case ConnPhase::kResolving:
      return "resolving";
    case ConnPhase::kConnecting:
      return "connecting";
    case ConnPhase::kConnected:
      return "connected";
    case ConnPhase::kCompleting:
      return "completing";
    case ConnPhase::kRequest:
      return "request";
    case ConnPhase::kAccepting:
      return "accepting";
    case ConnPhase::kEstablished:
      return "established";
    case ConnPhase::kDisconnecting:
      return "disconnecting";
    case ConnPhase::kDisconnected:
      return "disconnected";
    case ConnPhase::kFailed:
      return "failed";
  }
  return "?";
}

// One collection round over the cores; freed by the last answer.
struct QpGather {
  std::vector<std::vector<QpRow>> per_core;
  std::vector<EngineRow> engines;          // one per core
  std::vector<ConnectionRow> connections;  // taken before the requests left
  size_t outstanding = 0;
  bool complete = true;  // false: a core's ring was full, its rows are missing
  std::function<void(bool, ConnectionSnapshot)> done;

  void finish_one() {
    if (--outstanding != 0) return;
    ConnectionSnapshot snap;
    snap.connections = std::move(connections);
    snap.engines = std::move(engines);
    for (auto& v : per_core) snap.qps.insert(snap.qps.end(), v.begin(), v.end());
    std::sort(snap.qps.begin(), snap.qps.end(),
              [](const QpRow& a, const QpRow& b) { return a.qpn < b.qpn; });
    auto fn = std::move(done);
    const bool ok = complete;
    delete this;
    fn(ok, std::move(snap));
  }
};

// On the owning core: the engine's counters and (unless `out` is null) every QP of this core's
// engine. Snapshot rounds are rare (telemetry interval), so walking the slot numbers until every
// live QP was seen is cheap enough.
void qp_rows_run(const dataplane::QpTableRead& req, dataplane::CoreResult& result, void*) {
  std::vector<QpRow>* out = req.out;
  rc::RcEngine& engine = req.rdma->engine_st();
  if (req.engine != nullptr) *req.engine = req.rdma->counters_st();
  if (out == nullptr) return;
  const size_t live = engine.qp_count();
  out->reserve(live);
  for (uint32_t local = 0; local <= dataplane::kQpnLocalMask && out->size() < live; ++local) {
    rc::QueuePair* qp = engine.find_qp(dataplane::make_qpn(engine.core(), local));
    if (qp == nullptr) continue;
    QpRow r;
    r.qpn = qp->qpn();
    r.core = engine.core();
    r.state = std::string(rc::qp_state_name(qp->state()));
    const auto& conn = qp->conn();
    const bool connected = qp->state() != rc::QpState::kReset && qp->state() != rc::QpState::kInit;
    r.peer_qpn = connected ? conn.remote_qpn : 0;
    r.path_mtu = connected ? conn.path_mtu : 0;
    r.tos = connected ? conn.tos : 0;
    if (rc::SendQueue* sq = qp->params().sq) {
      r.sq_depth = sq->ring().depth();
      r.sq_in_use = sq->ring().readable_st();
      r.error =
          std::string(rc::qp_error_reason_name(static_cast<rc::QpErrorReason>(sq->error_reason())));
    }
    if (rc::ReceiveQueue* rq = qp->params().rq) {
      r.rq_depth = rq->ring().depth();
      r.rq_in_use = rq->ring().readable_st();
    }
    r.next_psn = qp->req.cur.psn;
    r.unacked_psn = qp->comp.unacked_psn;
    r.expected_psn = qp->resp.psn;
    if (connected) {
      r.retries_used =
          conn.retry_count >= qp->comp.retry_left ? conn.retry_count - qp->comp.retry_left : 0;
      r.rnr_retries_used = conn.rnr_retry < 7 && conn.rnr_retry >= qp->comp.rnr_retry_left
                               ? conn.rnr_retry - qp->comp.rnr_retry_left
                               : 0;
    }
    const rc::QpStats& st = qp->stats;
    r.retransmits = st.retransmits;
    r.timeouts = st.timeouts;
    r.naks_sent = st.naks_sent;
    r.naks_received = st.naks_received;
    r.duplicates = st.duplicates;
    r.rnr_waits = st.rnr_waits;
    r.timeout_wait_us = st.timeout_wait_ns / 1000;
    r.srtt_ns = qp->comp.srtt_ns;
    r.path_srtt_ns = engine.path_of(*qp).srtt_ns;
    const rc::CongestionState& cc = qp->cc;
    r.rate_mbps = qp->cc_flags.paced ? cc.rate_mbps : 0;
    r.ce_received = cc.ce_received;
    r.cnps_sent = cc.cnps_sent;
    r.cnps_received = cc.cnps_received;
    r.rate_cuts = cc.rate_cuts;
    if (connected) {
      const uint64_t rto = rc::current_rto_ns(*qp, engine.path_rto_ns(*qp));
      r.rto_us = rto == UINT64_MAX ? 0 : rto / 1000;
    }
    out->push_back(std::move(r));
  }
  result.status = STATUS_SUCCESS;
}

void qp_rows_done(const dataplane::CoreMessage& msg) {
  static_cast<QpGather*>(msg.done_ctx)->finish_one();
}

}  // namespace

std::vector<ConnectionRow> connection_rows(
    Adapter& adapter, const std::function<std::string(const Connector*)>& service_of) {
  std::vector<ConnectionRow> rows;
  CmAgent* agent = agent_of(adapter);
  if (agent == nullptr) return rows;
  for (const auto& [id, c] : agent->connectors()) {
    const Connector::State& s = *Access::state(*c);
    ConnectionRow r;
    r.local_ip = s.have_local ? control::ip_of(s.local) : wire::IpAddress();
    r.local_port = s.have_local ? s.local.port : 0;
    r.remote_ip = control::ip_of(s.peer);
    r.remote_port = s.peer.port;
    r.state = phase_name(s.phase);
    r.active = s.active;
    r.qpn = s.qpn;
    r.peer_qpn = s.remote_qpn;
    r.core = s.qp_core;
    if (service_of) r.service = service_of(c);
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(), [](const ConnectionRow& a, const ConnectionRow& b) {
    return std::tie(a.local_port, a.remote_ip, a.remote_port, a.qpn) <
           std::tie(b.local_port, b.remote_ip, b.remote_port, b.qpn);
  });
  return rows;
}

namespace {

// One round of QP-table requests, one per core; `qp_rows` false asks for the engines' counters
// alone.
void gather(Adapter& adapter, std::vector<ConnectionRow> connections, bool qp_rows,
            std::function<void(bool ok, ConnectionSnapshot)> done) {
  auto* g = new QpGather;
  g->connections = std::move(connections);
  const uint32_t n = adapter.core_count();
  g->per_core.resize(n);  // never resized again: the cores write into them
  g->engines.resize(n);
  g->done = std::move(done);
  g->outstanding = 1;  // held until every request is posted
  Adapter::Impl& im = impl_of(adapter);
  for (uint32_t c = 0; c < n; ++c) {
    if (im.call(c, &qp_rows_run,
                dataplane::QpTableRead{im.rdma_on(c), qp_rows ? &g->per_core[c] : nullptr,
                                       &g->engines[c]},
                &qp_rows_done, g))
      ++g->outstanding;
    else
      g->complete = false;
  }
  g->finish_one();
}

}  // namespace

void collect_connection_snapshot(Adapter& adapter,
                                 const std::function<std::string(const Connector*)>& service_of,
                                 std::function<void(bool ok, ConnectionSnapshot)> done) {
  gather(adapter, connection_rows(adapter, service_of), true, std::move(done));
}

void collect_engine_rows(Adapter& adapter,
                         std::function<void(bool ok, std::vector<EngineRow>)> done) {
  gather(adapter, {}, false, [done = std::move(done)](bool ok, ConnectionSnapshot snap) {
    done(ok, std::move(snap.engines));
  });
}

}  // namespace rocedp::control
