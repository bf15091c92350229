#pragma once
// DPDK telemetry commands of rocedpd (dpdk-telemetry.py, or the socket
// /var/run/dpdk/<file-prefix>/dpdk_telemetry.v2 directly):
//
//   /rocedp/ports[,NAME|ID]  ports: name, id, MAC, IP, MTU, queues, link, rx/tx packets/bytes,
//   errors,
//                            fault counters. Without a parameter one column (array) per field,
//                            index = port; with one, that port's fields as scalars.
//   /rocedp/cores[,INDEX]    polling cores: lcore, busy/idle TSC cycles, polls, rx/tx
//   packets/bytes,
//                            handoffs, drops. Columns, or one core with its drops by reason.
//   /rocedp/drops            drop totals over all cores, by reason name (every reason, zeros too).
//   /rocedp/neighbours       the control thread's neighbour tables: port, ip, mac, state, expiry.
//   /rocedp/control          control-thread counters, free mbufs, snapshot sequence and age.
//   /rocedp/connections      the adapter's connectors (rocedpd with listeners): local/remote ip and
//                            port, state, role, QPN, peer QPN, core, service. Columns; "count"
//                            rows.
//   /rocedp/status           program, version, pid, state, uptime, config, and counts of ports,
//                            cores, listeners, connections and QPs (needs
//                            telemetry_set_daemon_info).
//   /rocedp/listeners        configured listeners: port, nd_port, service, connections (open now).
//   /rocedp/qps[,QPN]        the adapter's RC QPs, read by their owning cores in the snapshot
//                            round: QPN, core, state, peer QPN, path MTU, SQ/RQ depth and in use,
//                            next/unacked/expected PSN, retries and RNR retries used. With a QPN
//                            that QP's fields as scalars. /rocedp/connections adds each
//                            connection's QP state (qp_state) from the same snapshot.
//
// DPDK 22.11 containers nest one level (a dict may hold arrays of scalars, not dicts), hence the
// column layout. Handlers run on DPDK's telemetry thread and only read the latest immutable
// Snapshot, fetched through the source function (ControlThread::latest(): a shared_ptr copied
// under a mutex that only control-path code takes, never the polling cores).

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "control/control_thread.hpp"

struct rte_tel_data;

namespace rocedp::control {

using SnapshotSource = std::function<std::shared_ptr<const Snapshot>()>;

/// What /rocedp/status and /rocedp/listeners show besides the snapshot (set by the daemon).
struct DaemonInfo {
  std::string program, version, config_path;
  std::chrono::system_clock::time_point started = std::chrono::system_clock::now();
  std::vector<config::ListenerConfig> listeners;
};
/// Any thread: replaces the daemon information. `state` (running, reloading, stopping) any time.
void telemetry_set_daemon_info(DaemonInfo info);
void telemetry_set_state(const char* state);
/// Any thread: the listeners served now (rocedpd's reload changed them).
void telemetry_set_listeners(std::vector<config::ListenerConfig> listeners);

/// Registers the /rocedp/* commands (once per process; DPDK cannot unregister) and points them at
/// `source`. Any thread, after EAL init. False and *error if DPDK refused a command.
bool telemetry_install(SnapshotSource source, std::string* error);
/// The commands answer with an error from now on (before the control thread goes away).
void telemetry_uninstall();

/// Drops by reason name over `cores`, in a stable order: wire reasons, core reasons, ARP/ICMP
/// reasons, zeros included (/rocedp/drops). A name in two lists (ip_bad_header in the RoCEv2
/// parser and in ARP/ICMP) means the same thing and is summed.
std::vector<std::pair<std::string_view, uint64_t>> drops_by_reason(
    const std::vector<dataplane::CoreStats>& cores);

// Formatting, exposed for tests: fill `d` from `s` as the commands do. 0, or -EINVAL for an
// unknown port/core parameter.
int telemetry_format_ports(const Snapshot& s, const char* params, rte_tel_data* d);
int telemetry_format_cores(const Snapshot& s, const char* params, rte_tel_data* d);
int telemetry_format_drops(const Snapshot& s, rte_tel_data* d);
int telemetry_format_rdma(const Snapshot& s, const char* params, rte_tel_data* d);
int telemetry_format_neighbours(const Snapshot& s, const char* params, rte_tel_data* d);
int telemetry_format_control(const Snapshot& s, rte_tel_data* d);
int telemetry_format_connections(const Snapshot& s, const char* params, rte_tel_data* d);
int telemetry_format_qps(const Snapshot& s, const char* params, rte_tel_data* d);
int telemetry_format_listeners(const Snapshot& s, const DaemonInfo& info, const char* params,
                               rte_tel_data* d);

}  // namespace rocedp::control
