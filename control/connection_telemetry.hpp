#pragma once
// Rows for /rocedp/connections and /rocedp/qps (control/connection_rows.hpp), gathered without
// breaking ownership: connector state is read on the control thread (which owns it), QP state
// by a request to each polling core, which reads its own QPs and answers through its ring.

#include <functional>
#include <string>
#include <vector>

#include "control/connection_rows.hpp"

namespace rocedp {
class Adapter;
class Connector;
}  // namespace rocedp

namespace rocedp::control {

/// Control thread: one row per open connector of `adapter`'s connection manager (none if no
/// manager is attached). `service_of` (may be empty) names the service a connector serves.
std::vector<ConnectionRow> connection_rows(
    Adapter& adapter, const std::function<std::string(const Connector*)>& service_of);

/// The connections and the QPs of one snapshot, consistent with each other: every connection
/// listed as established has its QP among `qps` (unless the QP's core moved it on its own, e.g.
/// to ERROR when its retries ran out).
struct ConnectionSnapshot {
  std::vector<ConnectionRow> connections;
  std::vector<QpRow> qps;          // ordered by QPN
  std::vector<EngineRow> engines;  // one per core, by core index
};

/// Control thread: reads the connection rows now, then asks every core of `adapter` for the rows
/// of its QPs and its engine's counters; `done` runs once on the control thread after every core
/// answered. The connection rows are taken before the requests leave: whatever made a connection
/// established (its QP created and moved to RTS, by requests to the QP's core) was then answered
/// already, so the QP-table request, behind them on that core's ring, sees the QP. Rows read when
/// the last core answers would not be: a core that answered early could have missed a QP that was
/// created, and its connection established, while another core was still busy. ok = false (and the
/// rows incomplete) when a core's ring was full.
void collect_connection_snapshot(Adapter& adapter,
                                 const std::function<std::string(const Connector*)>& service_of,
                                 std::function<void(bool ok, ConnectionSnapshot)> done);

/// Control thread: asks every core for its engine's counters alone (no QP rows); `done` runs once
/// on the control thread with one row per core, by core index (ok = false: a core's ring was full).
void collect_engine_rows(Adapter& adapter,
                         std::function<void(bool ok, std::vector<EngineRow>)> done);

}  // namespace rocedp::control
