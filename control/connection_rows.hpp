#pragma once
// What telemetry shows of connections and queue pairs (/rocedp/connections, /rocedp/qps).
// Plain rows, filled on the control thread (connections) and on the owning polling core (QPs)
// during one snapshot round, then published immutable with the rest of the Snapshot.

#include <cstdint>
#include <string>

#include "dataplane/engine_row.hpp"
#include "dataplane/qp_row.hpp"
#include "dataplane/wire/ip_address.hpp"

namespace rocedp::control {

/// One connector of the adapter's connection manager.
struct ConnectionRow {
  wire::IpAddress local_ip, remote_ip;  // 0.0.0.0 = not known yet
  uint16_t local_port = 0, remote_port = 0;
  std::string state;    // ConnPhase name: idle, resolving, connecting, ..., established, ...
  bool active = false;  // we sent the REQ
  uint32_t qpn = 0, peer_qpn = 0;
  uint32_t core = 0;    // the core of its QP
  std::string service;  // echo / memory for the daemon's listeners; "" for others
  std::string port;     // the port of its adapter (config ports[].name)
};

/// One listening service of the daemon (control/services.hpp): its connections since it started,
/// by outcome, and the echo's and perftest's traffic (closed connections' and open ones').
struct ServiceRow {
  std::string port;  // config ports[].name
  uint16_t nd_port = 0;
  // Open now: from the client's request until the connection's close completed. A listener a
  // reload replaced counts its own until they end; they are not this row's.
  uint64_t connections = 0;
  uint64_t accepted = 0;  // Accept completed
  uint64_t rejected = 0;  // REJ sent: over max_connections, or the service stopping
  uint64_t failed = 0;    // its CQ, QP, buffers or Accept could not be made, or its QP failed
  uint64_t closed = 0;    // closed again: accepted, failed, or its Accept cancelled by a stop
  uint64_t echo_messages = 0, echo_bytes = 0;
  uint64_t received_messages = 0, received_bytes = 0;  // SENDs perftest's sink took
  uint64_t sessions = 0, reports = 0;  // perftest: clients' sessions; bandwidth reports received
  // perftest: data connections a key moved to its own client's session from another session of
  // the same address (two clients of one address setting up at once)
  uint64_t data_moved = 0;
};

/// One RC queue pair, read on its owning core (dataplane/qp_row.hpp).
using QpRow = dataplane::QpRow;
/// One core's RC engine counters, read on that core (dataplane/engine_row.hpp).
using EngineRow = dataplane::EngineRow;

}  // namespace rocedp::control
