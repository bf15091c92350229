#include "control/telemetry.hpp"

#include <rte_telemetry.h>

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <map>
#include <mutex>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "control/telemetry_page.hpp"

namespace rocedp::control {
namespace {

std::mutex g_mutex;  // guards g_source; taken by telemetry handlers and install/uninstall only
SnapshotSource g_source;
bool g_registered = false;
DaemonInfo g_info;  // guarded by g_mutex
bool g_have_info = false;
const char* g_state = "running";  // a string literal; guarded by g_mutex

std::shared_ptr<const Snapshot> current() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_source ? g_source() : nullptr;
}

// One array container per column; `keep` = 0 hands ownership to the parent dict. `rows`: a vector
// or a span of it (a page).
template <typename Rows, typename Fn>
void add_u64_column(rte_tel_data* d, const char* name, const Rows& rows, Fn fn) {
  rte_tel_data* col = rte_tel_data_alloc();
  if (col == nullptr) return;
  rte_tel_data_start_array(col, RTE_TEL_U64_VAL);
  for (const auto& r : rows) rte_tel_data_add_array_u64(col, fn(r));
  rte_tel_data_add_dict_container(d, name, col, 0);
}

template <typename Rows, typename Fn>
void add_string_column(rte_tel_data* d, const char* name, const Rows& rows, Fn fn) {
  rte_tel_data* col = rte_tel_data_alloc();
  if (col == nullptr) return;
  rte_tel_data_start_array(col, RTE_TEL_STRING_VAL);
  for (const auto& r : rows) rte_tel_data_add_array_string(col, fn(r).c_str());
  rte_tel_data_add_dict_container(d, name, col, 0);
}

// A column of a paged table: its name, and how a row's value reads (a number or a string).
template <typename Row>
struct TableColumn {
  const char* name;
  std::function<uint64_t(const Row&)> u64;
  std::function<std::string(const Row&)> text;
};

// The reply may hold this many bytes of JSON (the socket's max_output_len, 16 KiB, less room for
// the command's name and the numbers of the page).
constexpr size_t kReplyBudget = 16384 - 512;

// A table in columns, from row `from` on, as many rows as fit one reply (telemetry_page.hpp):
// count (all rows), first and returned (this page's), then the columns.
template <typename Row>
void write_table(rte_tel_data* d, const std::vector<Row>& rows, size_t from,
                 std::span<const TableColumn<Row>> columns) {
  size_t fixed = 0;
  for (const auto& c : columns) fixed += std::string_view(c.name).size() + 6;  // "name":[],
  const RowPage pg =
      page_rows(rows.size(), from, fixed, kReplyBudget, RTE_TEL_MAX_ARRAY_ENTRIES, [&](size_t i) {
        size_t bytes = 0;
        for (const auto& c : columns)
          bytes += c.u64 ? json_u64_bytes(c.u64(rows[i])) : json_string_bytes(c.text(rows[i]));
        return bytes;
      });
  const std::span<const Row> page(rows.data() + pg.first, pg.end - pg.first);
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "count", rows.size());
  rte_tel_data_add_dict_u64(d, "first", pg.first);
  rte_tel_data_add_dict_u64(d, "returned", pg.end - pg.first);
  for (const auto& c : columns) {
    if (c.u64)
      add_u64_column(d, c.name, page, c.u64);
    else
      add_string_column(d, c.name, page, c.text);
  }
}

// The parameters of a table command: none (the first page) or "from=N". False for anything else
// (a command's one-row form, or a refusal).
bool table_page(const char* params, size_t* from) {
  *from = 0;
  return params == nullptr || *params == '\0' || parse_page_param(params, from);
}

// Port fields, shared by the column form and the one-port form.
struct PortField {
  const char* name;
  uint64_t (*get)(const PortSnapshot&);
};
const PortField kPortFields[] = {
    {"id", [](const PortSnapshot& p) -> uint64_t { return p.id; }},
    {"prefix_len", [](const PortSnapshot& p) -> uint64_t { return p.prefix_len; }},
    {"mtu", [](const PortSnapshot& p) -> uint64_t { return p.mtu; }},
    {"vlan", [](const PortSnapshot& p) -> uint64_t { return p.vlan; }},
    {"vlan_priority", [](const PortSnapshot& p) -> uint64_t { return p.vlan_priority; }},
    {"dscp", [](const PortSnapshot& p) -> uint64_t { return p.dscp; }},
    {"ecn", [](const PortSnapshot& p) -> uint64_t { return p.ecn; }},
    {"cnp_dscp", [](const PortSnapshot& p) -> uint64_t { return p.cnp_dscp; }},
    {"queues", [](const PortSnapshot& p) -> uint64_t { return p.queues; }},
    {"started", [](const PortSnapshot& p) -> uint64_t { return p.started; }},
    {"link_up", [](const PortSnapshot& p) -> uint64_t { return p.link.up; }},
    {"link_speed_mbps", [](const PortSnapshot& p) -> uint64_t { return p.link.speed_mbps; }},
    {"rx_packets", [](const PortSnapshot& p) { return p.stats.rx_packets; }},
    {"rx_bytes", [](const PortSnapshot& p) { return p.stats.rx_bytes; }},
    {"tx_packets", [](const PortSnapshot& p) { return p.stats.tx_packets; }},
    {"tx_bytes", [](const PortSnapshot& p) { return p.stats.tx_bytes; }},
    {"rx_missed", [](const PortSnapshot& p) { return p.stats.rx_missed; }},
    {"rx_errors", [](const PortSnapshot& p) { return p.stats.rx_errors; }},
    {"tx_errors", [](const PortSnapshot& p) { return p.stats.tx_errors; }},
    {"rx_nombuf", [](const PortSnapshot& p) { return p.stats.rx_nombuf; }},
    {"rx_vlan_dropped", [](const PortSnapshot& p) { return p.stats.rx_vlan_dropped; }},
    {"tx_vlan_dropped", [](const PortSnapshot& p) { return p.stats.tx_vlan_dropped; }},
    {"fault_dropped", [](const PortSnapshot& p) { return p.stats.fault.dropped; }},
    {"fault_duplicated", [](const PortSnapshot& p) { return p.stats.fault.duplicated; }},
    {"fault_corrupted", [](const PortSnapshot& p) { return p.stats.fault.corrupted; }},
    {"fault_ce_marked", [](const PortSnapshot& p) { return p.stats.fault.ce_marked; }},
    {"fault_reordered", [](const PortSnapshot& p) { return p.stats.fault.reordered; }},
    {"fault_delayed", [](const PortSnapshot& p) { return p.stats.fault.delayed; }},
};

// A DCQCN parameter as a port field: its `ports[].dcqcn` key after "dcqcn_".
std::string dcqcn_name(const config::DcqcnField& f) {
  return "dcqcn_" + std::string(f.key);
}

std::string port_ip(const PortSnapshot& p) {
  return config::format_ipv4(p.address);
}
// The port's IPv6 address, or "" without one.
std::string port_ip6(const PortSnapshot& p) {
  return p.address6 ? config::format_ipv6(*p.address6) : std::string();
}
std::string port_mac(const PortSnapshot& p) {
  return config::format_mac(p.mac);
}

struct CoreField {
  const char* name;
  uint64_t (*get)(const dataplane::CoreStats&);
};
const CoreField kCoreFields[] = {
    {"core", [](const dataplane::CoreStats& c) -> uint64_t { return c.core_index; }},
    {"lcore", [](const dataplane::CoreStats& c) -> uint64_t { return c.lcore_id; }},
    {"busy_cycles", [](const dataplane::CoreStats& c) { return c.busy_cycles; }},
    {"idle_cycles", [](const dataplane::CoreStats& c) { return c.idle_cycles; }},
    {"polls", [](const dataplane::CoreStats& c) { return c.polls; }},
    {"busy_polls", [](const dataplane::CoreStats& c) { return c.busy_polls; }},
    {"rx_packets", [](const dataplane::CoreStats& c) { return c.rx_packets; }},
    {"rx_bytes", [](const dataplane::CoreStats& c) { return c.rx_bytes; }},
    {"tx_packets", [](const dataplane::CoreStats& c) { return c.tx_packets; }},
    {"tx_bytes", [](const dataplane::CoreStats& c) { return c.tx_bytes; }},
    {"handoff_in", [](const dataplane::CoreStats& c) { return c.handoff_in; }},
    {"handoff_out", [](const dataplane::CoreStats& c) { return c.handoff_out; }},
    {"to_control", [](const dataplane::CoreStats& c) { return c.to_control; }},
    {"roce_to_engine", [](const dataplane::CoreStats& c) { return c.roce_to_engine; }},
    {"requests", [](const dataplane::CoreStats& c) { return c.requests; }},
    {"rx_pool_empty", [](const dataplane::CoreStats& c) { return c.rx_pool_empty; }},
    {"arp_replies", [](const dataplane::CoreStats& c) { return c.arp_icmp.arp_replies; }},
    {"echo_replies", [](const dataplane::CoreStats& c) { return c.arp_icmp.echo_replies; }},
    {"na_sent", [](const dataplane::CoreStats& c) { return c.ndp.na_sent; }},
    {"echo6_replies", [](const dataplane::CoreStats& c) { return c.ndp.echo_replies; }},
    {"drops", [](const dataplane::CoreStats& c) { return c.total_drops(); }},
    {"attached_queues",
     [](const dataplane::CoreStats& c) -> uint64_t { return c.attached_queues; }},
    {"neighbours", [](const dataplane::CoreStats& c) -> uint64_t { return c.neighbours; }},
};

// QP fields, shared by the column form and the one-QP form (state, a string, is added by hand).
struct QpField {
  const char* name;
  uint64_t (*get)(const QpRow&);
};
const QpField kQpFields[] = {
    {"qpn", [](const QpRow& r) -> uint64_t { return r.qpn; }},
    {"core", [](const QpRow& r) -> uint64_t { return r.core; }},
    {"peer_qpn", [](const QpRow& r) -> uint64_t { return r.peer_qpn; }},
    {"path_mtu", [](const QpRow& r) -> uint64_t { return r.path_mtu; }},
    {"tos", [](const QpRow& r) -> uint64_t { return r.tos; }},
    {"sq_depth", [](const QpRow& r) -> uint64_t { return r.sq_depth; }},
    {"sq_in_use", [](const QpRow& r) -> uint64_t { return r.sq_in_use; }},
    {"rq_depth", [](const QpRow& r) -> uint64_t { return r.rq_depth; }},
    {"rq_in_use", [](const QpRow& r) -> uint64_t { return r.rq_in_use; }},
    {"next_psn", [](const QpRow& r) -> uint64_t { return r.next_psn; }},
    {"unacked_psn", [](const QpRow& r) -> uint64_t { return r.unacked_psn; }},
    {"expected_psn", [](const QpRow& r) -> uint64_t { return r.expected_psn; }},
    {"retries_used", [](const QpRow& r) -> uint64_t { return r.retries_used; }},
    {"rnr_retries_used", [](const QpRow& r) -> uint64_t { return r.rnr_retries_used; }},
    {"retransmits", [](const QpRow& r) -> uint64_t { return r.retransmits; }},
    {"timeouts", [](const QpRow& r) -> uint64_t { return r.timeouts; }},
    {"naks_sent", [](const QpRow& r) -> uint64_t { return r.naks_sent; }},
    {"naks_received", [](const QpRow& r) -> uint64_t { return r.naks_received; }},
    {"duplicates", [](const QpRow& r) -> uint64_t { return r.duplicates; }},
    {"rnr_waits", [](const QpRow& r) -> uint64_t { return r.rnr_waits; }},
    {"timeout_wait_us", [](const QpRow& r) -> uint64_t { return r.timeout_wait_us; }},
    {"srtt_ns", [](const QpRow& r) -> uint64_t { return r.srtt_ns; }},
    {"rto_us", [](const QpRow& r) -> uint64_t { return r.rto_us; }},
    {"path_srtt_ns", [](const QpRow& r) -> uint64_t { return r.path_srtt_ns; }},
    {"rate_mbps", [](const QpRow& r) -> uint64_t { return r.rate_mbps; }},
    {"ce_received", [](const QpRow& r) -> uint64_t { return r.ce_received; }},
    {"cnps_sent", [](const QpRow& r) -> uint64_t { return r.cnps_sent; }},
    {"cnps_received", [](const QpRow& r) -> uint64_t { return r.cnps_received; }},
    {"rate_cuts", [](const QpRow& r) -> uint64_t { return r.rate_cuts; }},
};

int no_data(rte_tel_data* d) {
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_string(d, "error", "no snapshot yet (daemon starting or stopping)");
  return 0;
}

int cmd_ports(const char*, const char* params, rte_tel_data* d) {
  auto s = current();
  return s ? telemetry_format_ports(*s, params, d) : no_data(d);
}
int cmd_cores(const char*, const char* params, rte_tel_data* d) {
  auto s = current();
  return s ? telemetry_format_cores(*s, params, d) : no_data(d);
}
int cmd_rdma(const char*, const char* params, rte_tel_data* d) {
  auto s = current();
  return s ? telemetry_format_rdma(*s, params, d) : no_data(d);
}
int cmd_drops(const char*, const char*, rte_tel_data* d) {
  auto s = current();
  return s ? telemetry_format_drops(*s, d) : no_data(d);
}
int cmd_neighbours(const char*, const char* params, rte_tel_data* d) {
  auto s = current();
  return s ? telemetry_format_neighbours(*s, params, d) : no_data(d);
}
int cmd_control(const char*, const char*, rte_tel_data* d) {
  auto s = current();
  return s ? telemetry_format_control(*s, d) : no_data(d);
}

int cmd_connections(const char*, const char* params, rte_tel_data* d) {
  auto s = current();
  return s ? telemetry_format_connections(*s, params, d) : no_data(d);
}
int cmd_qps(const char*, const char* params, rte_tel_data* d) {
  auto s = current();
  return s ? telemetry_format_qps(*s, params, d) : no_data(d);
}
int cmd_listeners(const char*, const char* params, rte_tel_data* d) {
  auto s = current();
  if (!s) return no_data(d);
  DaemonInfo info;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    info = g_info;
  }
  return telemetry_format_listeners(*s, info, params, d);
}
int cmd_status(const char*, const char*, rte_tel_data* d) {
  DaemonInfo info;
  const char* state;
  bool have;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    info = g_info;
    state = g_source ? g_state : "stopping";
    have = g_have_info;
  }
  auto s = current();
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_string(d, "program", have ? info.program.c_str() : "rocedp");
  rte_tel_data_add_dict_string(d, "version", info.version.c_str());
  rte_tel_data_add_dict_u64(d, "pid", static_cast<uint64_t>(getpid()));
  rte_tel_data_add_dict_string(d, "state", state);
  const auto up = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::system_clock::now() - info.started);
  rte_tel_data_add_dict_u64(d, "uptime_s", have ? static_cast<uint64_t>(up.count()) : 0);
  rte_tel_data_add_dict_string(d, "config", info.config_path.c_str());
  uint64_t ports = 0, up_ports = 0, established = 0;
  if (s) {
    for (const auto& p : s->ports) {
      ++ports;
      up_ports += p.link.up ? 1 : 0;
    }
    for (const auto& c : s->connections) established += c.state == "established" ? 1 : 0;
  }
  rte_tel_data_add_dict_u64(d, "ports", ports);
  rte_tel_data_add_dict_u64(d, "ports_link_up", up_ports);
  rte_tel_data_add_dict_u64(d, "cores", s ? s->cores.size() : 0);
  rte_tel_data_add_dict_u64(d, "listeners", info.listeners.size());
  rte_tel_data_add_dict_u64(d, "connections", s ? s->connections.size() : 0);
  rte_tel_data_add_dict_u64(d, "connections_established", established);
  rte_tel_data_add_dict_u64(d, "qps", s ? s->qps.size() : 0);
  return 0;
}

// Parameter: a number (index/id) or a name.
bool match(const char* params, const std::string& name, uint64_t id) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(params, &end, 10);
  if (end != params && *end == '\0') return v == id;
  return name == params;
}

// "ID[,PORT]" of /rocedp/qps and /rocedp/rdma: the QPN or core, then optionally the port (name or
// id) whose row it is. Each port has its own adapter, so QPNs and engine rows repeat across ports.
struct RowSelector {
  std::string id;
  std::string port;  // empty: the first port that has the row
};
RowSelector split_selector(const char* params) {
  const std::string_view all(params);
  const size_t comma = all.find(',');
  if (comma == std::string_view::npos) return {std::string(all), {}};
  return {std::string(all.substr(0, comma)), std::string(all.substr(comma + 1))};
}
bool on_port(const Snapshot& s, const RowSelector& sel, const std::string& row_port) {
  if (sel.port.empty()) return true;
  for (const auto& p : s.ports)
    if (p.name == row_port) return match(sel.port.c_str(), p.name, p.id);
  return false;
}

}  // namespace

bool parse_page_param(std::string_view params, size_t* first) {
  constexpr std::string_view kFrom = "from=";
  if (!params.starts_with(kFrom)) return false;
  const std::string_view n = params.substr(kFrom.size());
  const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), *first);
  return ec == std::errc() && end == n.data() + n.size() && !n.empty();
}

std::vector<std::pair<std::string_view, uint64_t>> drops_by_reason(
    const std::vector<dataplane::CoreStats>& cores) {
  std::vector<std::pair<std::string_view, uint64_t>> out;
  auto add = [&out](std::string_view name, uint64_t v) {
    for (auto& [n, total] : out)
      if (n == name) {
        total += v;
        return;
      }
    out.emplace_back(name, v);
  };
  for (std::size_t i = 0; i < dataplane::kDropCounterCount; ++i) {
    if (!dataplane::drop_counter_is_failure(i)) continue;
    uint64_t v = 0;
    for (const auto& c : cores) v += c.drops[i];
    add(dataplane::drop_counter_name(i), v);
  }
  for (std::size_t i = 0; i < dataplane::kArpIcmpDropCount; ++i) {
    uint64_t v = 0;
    for (const auto& c : cores) v += c.arp_icmp.drops[i];
    add(dataplane::arp_icmp_drop_name(static_cast<dataplane::ArpIcmpDrop>(i)), v);
  }
  for (std::size_t i = 0; i < dataplane::kNdpDropCount; ++i) {
    uint64_t v = 0;
    for (const auto& c : cores) v += c.ndp.drops[i];
    add(dataplane::ndp_drop_name(static_cast<dataplane::NdpDrop>(i)), v);
  }
  return out;
}

int telemetry_format_ports(const Snapshot& s, const char* params, rte_tel_data* d) {
  rte_tel_data_start_dict(d);
  if (params != nullptr && *params != '\0') {
    for (const auto& p : s.ports) {
      if (!match(params, p.name, p.id)) continue;
      rte_tel_data_add_dict_string(d, "name", p.name.c_str());
      rte_tel_data_add_dict_string(d, "mac", port_mac(p).c_str());
      rte_tel_data_add_dict_string(d, "ip", port_ip(p).c_str());
      rte_tel_data_add_dict_string(d, "ipv6", port_ip6(p).c_str());
      for (const auto& f : kPortFields) rte_tel_data_add_dict_u64(d, f.name, f.get(p));
      for (const config::DcqcnField& f : config::dcqcn_fields())
        rte_tel_data_add_dict_u64(d, dcqcn_name(f).c_str(), p.dcqcn.*(f.member));
      return 0;
    }
    return -EINVAL;
  }
  add_string_column(d, "name", s.ports, [](const PortSnapshot& p) { return p.name; });
  add_string_column(d, "mac", s.ports, port_mac);
  add_string_column(d, "ip", s.ports, port_ip);
  add_string_column(d, "ipv6", s.ports, port_ip6);
  for (const auto& f : kPortFields) add_u64_column(d, f.name, s.ports, f.get);
  for (const config::DcqcnField& f : config::dcqcn_fields()) {
    add_u64_column(d, dcqcn_name(f).c_str(), s.ports,
                   [&f](const PortSnapshot& p) -> uint64_t { return p.dcqcn.*(f.member); });
  }
  return 0;
}

int telemetry_format_cores(const Snapshot& s, const char* params, rte_tel_data* d) {
  size_t from = 0;
  if (!table_page(params, &from)) {
    rte_tel_data_start_dict(d);
    for (const auto& c : s.cores) {
      if (!match(params, "", c.core_index)) continue;
      for (const auto& f : kCoreFields) rte_tel_data_add_dict_u64(d, f.name, f.get(c));
      rte_tel_data* drops = rte_tel_data_alloc();
      if (drops == nullptr) return 0;
      // Reasons as two parallel columns (names, counts): only non-zero ones, to stay short.
      rte_tel_data* names = rte_tel_data_alloc();
      rte_tel_data_start_array(names, RTE_TEL_STRING_VAL);
      rte_tel_data_start_array(drops, RTE_TEL_U64_VAL);
      for (const auto& [name, v] : drops_by_reason({c})) {
        if (v == 0) continue;
        rte_tel_data_add_array_string(names, std::string(name).c_str());
        rte_tel_data_add_array_u64(drops, v);
      }
      rte_tel_data_add_dict_container(d, "drop_reasons", names, 0);
      rte_tel_data_add_dict_container(d, "drop_counts", drops, 0);
      return 0;
    }
    return -EINVAL;
  }
  std::vector<TableColumn<dataplane::CoreStats>> columns;
  for (const auto& f : kCoreFields) columns.push_back({f.name, f.get, nullptr});
  write_table(d, s.cores, from, std::span<const TableColumn<dataplane::CoreStats>>(columns));
  return 0;
}

// The RC engine's counters of each core, then the two its core keeps for it.
int telemetry_format_rdma(const Snapshot& s, const char* params, rte_tel_data* d) {
  const auto one = [d](const EngineRow& e) {
    rte_tel_data_add_dict_string(d, "port", e.port.c_str());
    rte_tel_data_add_dict_u64(d, "core", e.core);
    for (size_t i = 0; i < rc::kRcCounterCount; ++i)
      rte_tel_data_add_dict_u64(d, std::string(rc::kRcCounterNames[i]).c_str(), e.counters[i]);
    rte_tel_data_add_dict_u64(d, "tx_no_mbuf", e.tx_no_mbuf);
    rte_tel_data_add_dict_u64(d, "tx_no_room", e.tx_no_room);
  };
  size_t from = 0;
  if (!table_page(params, &from)) {
    rte_tel_data_start_dict(d);
    const RowSelector sel = split_selector(params);
    for (const auto& e : s.engines) {
      if (!match(sel.id.c_str(), "", e.core) || !on_port(s, sel, e.port)) continue;
      one(e);
      return 0;
    }
    return -EINVAL;
  }
  std::vector<std::string> names;  // the columns point into these
  names.reserve(rc::kRcCounterCount);
  std::vector<TableColumn<EngineRow>> columns = {
      {"port", nullptr, [](const EngineRow& e) { return e.port; }},
      {"core", [](const EngineRow& e) -> uint64_t { return e.core; }, nullptr}};
  for (size_t i = 0; i < rc::kRcCounterCount; ++i) {
    names.emplace_back(rc::kRcCounterNames[i]);
    columns.push_back(
        {names.back().c_str(), [i](const EngineRow& e) { return e.counters[i]; }, nullptr});
  }
  columns.push_back({"tx_no_mbuf", [](const EngineRow& e) { return e.tx_no_mbuf; }, nullptr});
  columns.push_back({"tx_no_room", [](const EngineRow& e) { return e.tx_no_room; }, nullptr});
  write_table(d, s.engines, from, std::span<const TableColumn<EngineRow>>(columns));
  return 0;
}

int telemetry_format_drops(const Snapshot& s, rte_tel_data* d) {
  rte_tel_data_start_dict(d);
  for (const auto& [name, v] : drops_by_reason(s.cores))
    rte_tel_data_add_dict_u64(d, std::string(name).c_str(), v);
  return 0;
}

int telemetry_format_neighbours(const Snapshot& s, const char* params, rte_tel_data* d) {
  using R = NeighbourRow;
  size_t from = 0;
  if (!table_page(params, &from)) return -EINVAL;
  const TableColumn<R> columns[] = {
      {"port", nullptr, [](const R& r) { return r.port; }},
      {"ip", nullptr,
       [](const R& r) {
         return r.ip6 ? config::format_ipv6(*r.ip6) : config::format_ipv4(r.entry.ip);
       }},
      {"mac", nullptr, [](const R& r) { return config::format_mac(r.entry.mac); }},
      {"state", nullptr,
       [](const R& r) { return std::string(neighbour_state_name(r.entry.state)); }},
      // -1 (static) shows as 2^64-1 in a u64 column; keep it readable as a string instead.
      {"expires_in_ms", nullptr, [](const R& r) { return std::to_string(r.entry.expires_in_ms); }},
  };
  write_table(d, s.neighbours, from, std::span<const TableColumn<R>>(columns));
  return 0;
}

int telemetry_format_control(const Snapshot& s, rte_tel_data* d) {
  rte_tel_data_start_dict(d);
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - s.taken);
  rte_tel_data_add_dict_u64(d, "snapshot_sequence", s.sequence);
  rte_tel_data_add_dict_u64(d, "snapshot_age_ms", static_cast<uint64_t>(age.count()));
  rte_tel_data_add_dict_u64(d, "mbufs_available", s.mbufs_available);
  rte_tel_data_add_dict_u64(d, "frames", s.control.frames);
  rte_tel_data_add_dict_u64(d, "arp_frames", s.control.arp_frames);
  rte_tel_data_add_dict_u64(d, "ndp_frames", s.control.ndp_frames);
  rte_tel_data_add_dict_u64(d, "cm_frames", s.control.cm_frames);
  rte_tel_data_add_dict_u64(d, "other_frames", s.control.other_frames);
  rte_tel_data_add_dict_u64(d, "frames_sent", s.control.frames_sent);
  rte_tel_data_add_dict_u64(d, "send_failures", s.control.send_failures);
  rte_tel_data_add_dict_u64(d, "neighbour_updates", s.control.neighbour_updates);
  rte_tel_data_add_dict_u64(d, "snapshots", s.control.snapshots);
  rte_tel_data_add_dict_u64(d, "naps", s.control.naps);
  rte_tel_data_add_dict_u64(d, "naps_woken", s.control.naps_woken);
  rte_tel_data_add_dict_u64(d, "address_defences", s.control.address_defences);
  return 0;
}

int telemetry_format_connections(const Snapshot& s, const char* params, rte_tel_data* d) {
  using R = ConnectionRow;
  size_t from = 0;
  if (!table_page(params, &from)) return -EINVAL;
  // The state of each connection's QP as its core read it in this same snapshot ("-" when the
  // connection has no QP yet or it is gone), so one query shows a connection and its QP. Looked
  // up, not searched: a page's rows are read twice (their size, then their values).
  std::map<std::pair<std::string_view, uint32_t>, std::string_view> states;
  for (const auto& q : s.qps) states.emplace(std::pair{std::string_view(q.port), q.qpn}, q.state);
  auto qp_state = [&states](const R& r) {
    const auto it = r.qpn != 0 ? states.find({r.port, r.qpn}) : states.end();
    return std::string(it != states.end() ? it->second : "-");
  };
  const TableColumn<R> columns[] = {
      {"local_ip", nullptr, [](const R& r) { return wire::to_string(r.local_ip); }},
      {"local_port", [](const R& r) -> uint64_t { return r.local_port; }, nullptr},
      {"remote_ip", nullptr, [](const R& r) { return wire::to_string(r.remote_ip); }},
      {"remote_port", [](const R& r) -> uint64_t { return r.remote_port; }, nullptr},
      {"state", nullptr, [](const R& r) { return r.state; }},
      {"role", nullptr, [](const R& r) { return std::string(r.active ? "active" : "passive"); }},
      {"qpn", [](const R& r) -> uint64_t { return r.qpn; }, nullptr},
      {"peer_qpn", [](const R& r) -> uint64_t { return r.peer_qpn; }, nullptr},
      {"core", [](const R& r) -> uint64_t { return r.core; }, nullptr},
      {"service", nullptr, [](const R& r) { return r.service; }},
      {"port", nullptr, [](const R& r) { return r.port; }},
      {"qp_state", nullptr, qp_state},
  };
  write_table(d, s.connections, from, std::span<const TableColumn<R>>(columns));
  return 0;
}

int telemetry_format_qps(const Snapshot& s, const char* params, rte_tel_data* d) {
  const auto& rows = s.qps;
  size_t from = 0;
  if (!table_page(params, &from)) {
    rte_tel_data_start_dict(d);
    const RowSelector sel = split_selector(params);
    char* end = nullptr;
    const unsigned long qpn = std::strtoul(sel.id.c_str(), &end, 0);
    if (end == sel.id.c_str() || *end != '\0') return -EINVAL;
    for (const auto& r : rows) {
      if (r.qpn != qpn || !on_port(s, sel, r.port)) continue;
      for (const auto& f : kQpFields) {
        rte_tel_data_add_dict_u64(d, f.name, f.get(r));
        if (std::string_view(f.name) == "core") {
          rte_tel_data_add_dict_string(d, "port", r.port.c_str());
          rte_tel_data_add_dict_string(d, "state", r.state.c_str());
          rte_tel_data_add_dict_string(d, "error_reason", r.error.c_str());
        }
      }
      return 0;
    }
    return -EINVAL;
  }
  std::vector<TableColumn<QpRow>> columns;
  for (const auto& f : kQpFields) {
    columns.push_back({f.name, f.get, nullptr});
    if (std::string_view(f.name) == "core") {
      columns.push_back({"port", nullptr, [](const QpRow& r) { return r.port; }});
      columns.push_back({"state", nullptr, [](const QpRow& r) { return r.state; }});
      // Not "error": a reply with that key is a refusal (rocedpctl, dpdk-telemetry users).
      columns.push_back({"error_reason", nullptr, [](const QpRow& r) { return r.error; }});
    }
  }
  write_table(d, rows, from, std::span<const TableColumn<QpRow>>(columns));
  return 0;
}

int telemetry_format_listeners(const Snapshot& s, const DaemonInfo& info, const char* params,
                               rte_tel_data* d) {
  using L = config::ListenerConfig;
  size_t from = 0;
  if (!table_page(params, &from)) return -EINVAL;
  // Each service's open connections and the outcomes of its connections since it started (0
  // before its first round). The services' rows are the listeners served: one a reload replaced
  // has none, so its connections, while they end, are not the new entry's.
  auto count = [&s](uint64_t ServiceRow::*field) {
    return [&s, field](const L& l) -> uint64_t {
      for (const auto& r : s.services)
        if (r.port == l.port && r.nd_port == l.nd_port) return r.*field;
      return 0;
    };
  };
  const TableColumn<L> columns[] = {
      {"port", nullptr, [](const L& l) { return l.port; }},
      {"nd_port", [](const L& l) -> uint64_t { return l.nd_port; }, nullptr},
      {"service", nullptr, [](const L& l) { return std::string(config::to_string(l.service)); }},
      {"max_connections", [](const L& l) -> uint64_t { return l.max_connections; }, nullptr},
      {"connections", count(&ServiceRow::connections), nullptr},
      {"accepted", count(&ServiceRow::accepted), nullptr},
      {"rejected", count(&ServiceRow::rejected), nullptr},
      {"failed", count(&ServiceRow::failed), nullptr},
      {"closed", count(&ServiceRow::closed), nullptr},
      {"echo_messages", count(&ServiceRow::echo_messages), nullptr},
      {"echo_bytes", count(&ServiceRow::echo_bytes), nullptr},
      {"received_messages", count(&ServiceRow::received_messages), nullptr},
      {"received_bytes", count(&ServiceRow::received_bytes), nullptr},
      {"sessions", count(&ServiceRow::sessions), nullptr},
      {"reports", count(&ServiceRow::reports), nullptr},
      {"data_moved", count(&ServiceRow::data_moved), nullptr},
  };
  write_table(d, info.listeners, from, std::span<const TableColumn<L>>(columns));
  return 0;
}

void telemetry_set_daemon_info(DaemonInfo info) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_info = std::move(info);
  g_have_info = true;
}

void telemetry_set_listeners(std::vector<config::ListenerConfig> listeners) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_info.listeners = std::move(listeners);
}

void telemetry_set_state(const char* state) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_state = state;
}

bool telemetry_install(SnapshotSource source, std::string* error) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_source = std::move(source);
  if (g_registered) return true;
  struct Cmd {
    const char* name;
    telemetry_cb fn;
    const char* help;
  };
  const Cmd cmds[] = {
      {"/rocedp/ports", cmd_ports,
       "Ports: name, id, MAC, IP, MTU, queues, link, counters. Parameter: port name or id"},
      {"/rocedp/cores", cmd_cores,
       "Polling cores: lcore, busy/idle cycles, rx/tx, drops. Paged: from=N; one core: index"},
      {"/rocedp/drops", cmd_drops, "Drop totals over all cores, by reason"},
      {"/rocedp/rdma", cmd_rdma,
       "RC engine of each core and port: packets, ACKs, NAKs, resends, timeouts, drops. Paged: "
       "from=N; one: core[,port]"},
      {"/rocedp/neighbours", cmd_neighbours,
       "Neighbour tables: port, ip, mac, state, expiry. Paged: from=N"},
      {"/rocedp/control", cmd_control, "Control thread counters and snapshot age"},
      {"/rocedp/connections", cmd_connections,
       "Connections: ip and port at both ends, state, role, QPNs, core, service. Paged: from=N"},
      {"/rocedp/qps", cmd_qps,
       "Queue pairs: QPN, core, state, queues, PSNs, retries. Paged: from=N; one QP: QPN[,port]"},
      {"/rocedp/listeners", cmd_listeners,
       "Listeners: port, ND port, service, max and open connections, outcomes, traffic. Paged: "
       "from=N"},
      {"/rocedp/status", cmd_status,
       "Daemon: program, version, pid, state, uptime, config, counts"},
  };
  for (const auto& c : cmds) {
    if (rte_telemetry_register_cmd(c.name, c.fn, c.help) != 0) {
      if (error) *error = std::string("rte_telemetry_register_cmd(") + c.name + ") failed";
      return false;
    }
  }
  g_registered = true;
  return true;
}

void telemetry_uninstall() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_source = nullptr;
}

}  // namespace rocedp::control
