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

/// Control thread: asks every core of `adapter` for the rows of its QPs; `done` runs once on
/// the control thread with all rows (ordered by QPN) after every core answered (a core whose
/// ring was full contributes none).
void collect_qp_rows(Adapter& adapter, std::function<void(std::vector<QpRow>)> done);

}  // namespace rocedp::control
