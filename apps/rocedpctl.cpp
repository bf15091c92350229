// rocedpctl: the operator's client of a running rocedpd, and a capture decoder.
//
//   rocedpctl status|ports|cores|drops|neighbours|connections|listeners [--json] [--prefix P]
//   rocedpctl qps [--qpn N] [--json] [--prefix P]
//   rocedpctl rdma [--core N] [--json] [--prefix P]
//   rocedpctl capture --port P -w FILE.pcapng [-c COUNT] [-d SECONDS] [--prefix P]
//   rocedpctl metrics [--listen [HOST:]PORT] [--prefix P]
//   rocedpctl decode [-q] FILE.pcap...
//
// The daemon commands speak DPDK's telemetry socket (apps/ctl/telemetry_client.hpp). DPDK 22.11
// cannot nest dictionaries, so the daemon answers with one column per field; this tool turns the
// columns back into rows (a table, or with --json an array of objects). `metrics` gives the
// counters to Prometheus (apps/ctl/metrics.hpp).
//
// Exit status: 0 ok, 1 the daemon is unreachable / the check failed / no such QP, 2 usage.

#include <httplib.h>
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "apps/ctl/metrics.hpp"
#include "apps/ctl/telemetry_client.hpp"
#include "dataplane/wire/decode.hpp"

#ifndef ROCEDP_VERSION
#define ROCEDP_VERSION "unknown"
#endif

namespace {

using rocedp::ctl::Json;
using rocedp::ctl::rows_of;
using rocedp::ctl::TelemetryClient;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

std::string cell(const Json& v, const std::string& key) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_unsigned() && (key == "qpn" || key == "peer_qpn")) {
    char b[16];
    std::snprintf(b, sizeof b, "0x%06llx", static_cast<unsigned long long>(v.get<uint64_t>()));
    return b;
  }
  return v.dump();
}

// A table of `rows` with the given columns (all columns of the first row when empty).
void print_table(const Json& rows, std::vector<std::string> columns) {
  if (columns.empty() && !rows.empty())
    for (const auto& [k, v] : rows[0].items()) columns.push_back(k);
  std::vector<std::vector<std::string>> cells;
  std::vector<size_t> width;
  width.reserve(columns.size());
  for (const auto& c : columns) width.push_back(c.size());
  for (const auto& r : rows) {
    std::vector<std::string> line;
    for (size_t i = 0; i < columns.size(); ++i) {
      line.push_back(r.contains(columns[i]) ? cell(r[columns[i]], columns[i]) : "-");
      width[i] = std::max(width[i], line.back().size());
    }
    cells.push_back(std::move(line));
  }
  auto print_line = [&](const std::vector<std::string>& line) {
    std::string out;
    for (size_t i = 0; i < line.size(); ++i) {
      std::string c = line[i];
      if (i + 1 < line.size()) c.resize(width[i] + 2, ' ');
      out += c;
    }
    std::cout << out << '\n';
  };
  print_line(columns);
  for (const auto& l : cells) print_line(l);
}

void print_pairs(const Json& obj, bool skip_zero) {
  size_t w = 0;
  for (const auto& [k, v] : obj.items()) w = std::max(w, k.size());
  for (const auto& [k, v] : obj.items()) {
    if (skip_zero && v.is_number() && v.get<double>() == 0) continue;
    std::string key = k + ":";
    key.resize(w + 2, ' ');
    std::cout << key << cell(v, k) << '\n';
  }
}

// ---- daemon commands -----------------------------------------------------------------------

struct DaemonOptions {
  std::string prefix = "rocedp";  // the config's eal.file_prefix default
  bool json = false;
  std::string qpn;   // qps --qpn
  std::string core;  // rdma --core
  std::string port;  // with --qpn / --core: whose QP or engine (QPNs repeat across ports)
};

// The telemetry parameter of one row: "ID" or "ID,PORT".
std::string row_param(const DaemonOptions& o, const std::string& id) {
  return o.port.empty() ? id : id + "," + o.port;
}

struct View {
  const char* command;               // telemetry command
  const char* rows_key;              // JSON key of the rows ("" = the reply is one object)
  std::vector<std::string> columns;  // table columns (empty: all)
};

int report_error(const std::string& what) {
  std::fprintf(stderr, "rocedpctl: %s\n", what.c_str());
  return kExitFailed;
}

// One telemetry command shown as a table (or with --json an object {count, rows_key: [...]}).
int run_view(const DaemonOptions& o, const View& v, const std::string& param = "") {
  TelemetryClient t;
  std::string error;
  if (!t.connect(o.prefix, &error)) return report_error(error);
  const std::string command = param.empty() ? v.command : std::string(v.command) + "," + param;
  auto value = param.empty() ? t.query_table(command, &error) : t.query(command, &error);
  if (!value) return report_error(error);
  if (value->is_null()) return report_error("the daemon refused " + command);
  if (value->contains("error")) return report_error((*value)["error"].get<std::string>());
  if (*v.rows_key == '\0' || !param.empty()) {
    if (o.json)
      std::cout << value->dump(2) << '\n';
    else
      print_pairs(*value, false);
    return kExitOk;
  }
  Json rows = rows_of(*value);
  if (o.json) {
    Json out = Json::object();
    out["count"] = rows.size();
    out[v.rows_key] = rows;
    std::cout << out.dump(2) << '\n';
    return kExitOk;
  }
  if (rows.empty()) {
    std::cout << "no " << v.rows_key << '\n';
    return kExitOk;
  }
  print_table(rows, v.columns);
  return kExitOk;
}

int cmd_drops(const DaemonOptions& o) {
  TelemetryClient t;
  std::string error;
  if (!t.connect(o.prefix, &error)) return report_error(error);
  auto value = t.query("/rocedp/drops", &error);
  if (!value) return report_error(error);
  if (value->is_null() || value->contains("error"))
    return report_error(value->is_null() ? "no /rocedp/drops"
                                         : (*value)["error"].get<std::string>());
  if (o.json) {
    std::cout << value->dump(2) << '\n';
    return kExitOk;
  }
  uint64_t total = 0;
  for (const auto& [k, v] : value->items()) total += v.get<uint64_t>();
  std::cout << "drops: " << total << " (reasons with a count below; every other reason 0)\n";
  print_pairs(*value, true);
  return kExitOk;
}

int cmd_status(const DaemonOptions& o) {
  TelemetryClient t;
  std::string error;
  if (!t.connect(o.prefix, &error)) return report_error(error);
  auto status = t.query("/rocedp/status", &error);
  if (!status) return report_error(error);
  if (status->is_null()) return report_error("the daemon has no /rocedp/status");
  Json out = Json::object();
  out["file_prefix"] = o.prefix;
  out["pid"] = t.info().value("pid", 0);
  out["dpdk"] = t.info().value("version", "");
  for (const auto& [k, v] : status->items()) out[k] = v;
  if (o.json)
    std::cout << out.dump(2) << '\n';
  else
    print_pairs(out, false);
  return kExitOk;
}

int cmd_qps(const DaemonOptions& o) {
  static const View v{"/rocedp/qps",
                      "qps",
                      {"qpn", "port", "core", "state", "error_reason", "peer_qpn", "path_mtu",
                       "sq_depth", "sq_in_use", "rq_depth", "rq_in_use", "next_psn", "unacked_psn",
                       "expected_psn", "retries_used", "rnr_retries_used"}};
  if (o.qpn.empty()) return run_view(o, v);
  char* end = nullptr;
  errno = 0;
  const unsigned long qpn = std::strtoul(o.qpn.c_str(), &end, 0);
  if (end == o.qpn.c_str() || *end != '\0' || errno != 0 || qpn > 0xFFFFFF) {
    std::fprintf(stderr, "rocedpctl qps: --qpn %s: not a QPN (decimal or 0x hex, < 2^24)\n",
                 o.qpn.c_str());
    return kExitUsage;
  }
  TelemetryClient t;
  std::string error;
  if (!t.connect(o.prefix, &error)) return report_error(error);
  auto value = t.query("/rocedp/qps," + row_param(o, std::to_string(qpn)), &error);
  if (!value) return report_error(error);
  if (value->is_null())
    return report_error("no QP " + o.qpn + (o.port.empty() ? "" : " on port " + o.port));
  if (value->contains("error")) return report_error((*value)["error"].get<std::string>());
  if (o.json)
    std::cout << value->dump(2) << '\n';
  else
    print_pairs(*value, false);
  return kExitOk;
}

// ---- capture -------------------------------------------------------------------------------

struct CaptureOptions {
  unsigned port = 0;
  std::string file;
  uint64_t count = 0;  // 0: no limit
  double seconds = 0;  // 0: until Ctrl-C (or the count)
};

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) {
  g_interrupted.store(true);
}

// The daemon writes the file (telemetry /rocedp/capture); this waits for the count, the time or
// Ctrl-C, stops it and reports what was written.
int cmd_capture(const DaemonOptions& o, const CaptureOptions& c) {
  TelemetryClient t;
  std::string error;
  if (!t.connect(o.prefix, &error)) return report_error(error);
  const std::string path =
      std::filesystem::absolute(c.file).string();  // the daemon's cwd is not ours
  auto value = t.query("/rocedp/capture,start," + std::to_string(c.port) + "," +
                           std::to_string(c.count) + "," + path,
                       &error);
  if (!value) return report_error(error);
  if (value->is_null())
    return report_error("the daemon has no /rocedp/capture (or refused the parameters)");
  if (value->value("active", 0) == 0 && !value->value("error", std::string()).empty())
    return report_error("capture: " + (*value)["error"].get<std::string>());
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(c.seconds);
  while (!g_interrupted.load() && (c.seconds <= 0 || std::chrono::steady_clock::now() < deadline)) {
    value = t.query("/rocedp/capture", &error);
    if (!value || value->is_null())
      return report_error(value ? "capture status unavailable" : error);
    if (value->value("active", 0) == 0) break;  // the count was reached, or writing failed
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  value = t.query("/rocedp/capture,stop", &error);
  if (!value || value->is_null()) return report_error(value ? "capture stop refused" : error);
  if (o.json) {
    std::cout << value->dump(2) << '\n';
  } else {
    std::cout << (*value)["written"].get<uint64_t>() << " frames written to " << path << ", "
              << (*value)["dropped"].get<uint64_t>()
              << " not captured (capture pool or ring full)\n";
  }
  const std::string err = value->value("error", std::string());
  return err.empty() ? kExitOk : report_error("capture: " + err);
}

// ---- metrics -------------------------------------------------------------------------------

// Without `listen`: the metrics once on stdout (exit 1 if the daemon does not answer). With it:
// an HTTP server that asks the daemon afresh at each GET /metrics (rocedp_up 0 while it does
// not answer) until SIGINT or SIGTERM.
int cmd_metrics(const std::string& prefix, const std::string& listen) {
  using rocedp::ctl::TelemetryViews;
  if (listen.empty()) {
    TelemetryViews v;
    std::string error;
    if (!rocedp::ctl::collect_views(prefix, &v, &error)) return report_error(error);
    std::cout << rocedp::ctl::prometheus_text(v);
    return kExitOk;
  }
  std::string host;
  int port = 0;
  if (!rocedp::ctl::parse_listen_address(listen, &host, &port)) {
    std::fprintf(stderr, "rocedpctl metrics: --listen %s: not [HOST:]PORT\n", listen.c_str());
    return kExitUsage;
  }
  httplib::Server server;
  server.Get("/metrics", [&prefix](const httplib::Request&, httplib::Response& res) {
    TelemetryViews v;
    std::string error;
    const bool up = rocedp::ctl::collect_views(prefix, &v, &error);
    if (!up) std::fprintf(stderr, "rocedpctl metrics: %s\n", error.c_str());
    res.set_content(up ? rocedp::ctl::prometheus_text(v) : rocedp::ctl::prometheus_text_down(),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("rocedpctl metrics: the metrics are at /metrics\n", "text/plain");
  });
  // SIGINT and SIGTERM are blocked in every thread (the server's inherit the mask) and taken
  // here by sigwait, which then stops the server.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  if (port == 0) {
    port = server.bind_to_any_port(host);
    if (port < 0) port = 0;
  } else if (!server.bind_to_port(host, port)) {
    port = 0;
  }
  if (port == 0)
    return report_error("metrics: cannot listen on " + listen + ": " + std::strerror(errno));
  std::thread serve([&server] { server.listen_after_bind(); });
  std::cout << "rocedpctl metrics: serving http://"
            << (host.find(':') != std::string::npos ? "[" + host + "]" : host) << ":" << port
            << "/metrics for the rocedpd of prefix " << prefix << std::endl;
  int sig = 0;
  sigwait(&stop_signals, &sig);
  server.stop();
  serve.join();
  return kExitOk;
}

// ---- decode --------------------------------------------------------------------------------

// decode FILE.pcap...: one line per frame; exit 1 if any RoCEv2 packet fails to parse, fails its
// ICRC or does not re-encode to the same bytes.
int cmd_decode(const std::vector<std::string>& files, bool quiet) {
  bool any_failed = false;
  for (const auto& f : files) {
    rocedp::wire::DecodeStats stats;
    std::string error;
    if (files.size() > 1) std::cout << "== " << f << '\n';
    if (!rocedp::wire::decode_capture(f, quiet ? nullptr : &std::cout, stats, error)) {
      std::cout.flush();
      std::fprintf(stderr, "rocedpctl decode: cannot read %s: %s\n", f.c_str(), error.c_str());
      return kExitUsage;
    }
    std::cout << f << ": " << stats.frames << " frames, " << stats.roce << " RoCEv2 packets ok, "
              << stats.failed << " failed, " << stats.skipped << " skipped (not RoCEv2)\n";
    for (const auto& [type, count] : stats.by_type)
      std::cout << "  " << count << "  " << type << '\n';
    any_failed = any_failed || stats.failed != 0;
  }
  return any_failed ? kExitFailed : kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "rocedpctl: query a running rocedpd (DPDK telemetry socket) and decode RoCEv2 captures"};
  app.set_version_flag("--version", std::string("rocedpctl ") + ROCEDP_VERSION);
  app.require_subcommand(1);

  DaemonOptions o;
  int status = kExitOk;
  // Every daemon command takes --json and --prefix.
  auto daemon_command = [&](const char* name, const char* help, const std::function<int()>& run) {
    CLI::App* sub = app.add_subcommand(name, help);
    sub->add_option("--prefix", o.prefix, "the daemon's EAL file prefix (eal.file_prefix)")
        ->capture_default_str();
    sub->add_flag("--json", o.json, "print JSON instead of a table");
    sub->callback([&status, run] { status = run(); });
    return sub;
  };
  daemon_command(
      "status",
      "the daemon: version, pid, uptime, state, config, ports, cores, listeners, connections",
      [&] { return cmd_status(o); });
  daemon_command("ports", "ports: address, link, packet and error counters", [&] {
    return run_view(o, {"/rocedp/ports",
                        "ports",
                        {"name", "id", "mac", "ip", "ipv6", "mtu", "vlan", "link_up", "rx_packets",
                         "tx_packets", "rx_bytes", "tx_bytes", "rx_missed", "rx_errors",
                         "tx_errors", "rx_nombuf"}});
  });
  daemon_command("cores", "polling cores: lcore, busy/idle cycles, packets, hand-offs, drops", [&] {
    return run_view(
        o, {"/rocedp/cores",
            "cores",
            {"core", "lcore", "busy_cycles", "idle_cycles", "polls", "rx_packets", "tx_packets",
             "handoff_in", "handoff_out", "to_control", "requests", "rx_pool_empty", "drops"}});
  });
  daemon_command("drops", "drop counters over all cores, by reason", [&] { return cmd_drops(o); });
  daemon_command("neighbours", "neighbour (ARP) tables", [&] {
    return run_view(o, {"/rocedp/neighbours", "neighbours", {}});
  });
  daemon_command("connections", "connections of the connection manager", [&] {
    return run_view(o, {"/rocedp/connections", "connections", {}});
  });
  daemon_command(
      "listeners",
      "listeners: port, ND port, service, open connections, outcomes, echo and perftest traffic",
      [&] {
        return run_view(o, {"/rocedp/listeners", "listeners", {}});
      });
  CLI::App* qps =
      daemon_command("qps", "RC queue pairs: QPN, owning core, state, queues, PSNs, retries",
                     [&] { return cmd_qps(o); });
  CLI::Option* qpn = qps->add_option("--qpn", o.qpn, "one QP (decimal or 0x hex): its fields");
  qps->add_option("--port", o.port, "with --qpn: the QP of this port (name or id)")->needs(qpn);

  CLI::App* rdma = daemon_command(
      "rdma",
      "RC engine of each core: packets, ACKs, NAKs, retransmissions, timeouts, drops by reason",
      [&] {
        return run_view(
            o,
            {"/rocedp/rdma",
             "engines",
             {"port", "core", "rx_packets", "tx_packets", "acks_sent", "naks_sent", "acks_received",
              "naks_received", "tx_retransmit", "ack_timeouts", "spurious_timeouts", "rx_duplicate",
              "rx_out_of_sequence", "rx_drop_no_qp", "rx_drop_qp_state", "rx_drop_source"}},
            o.core.empty() ? o.core : row_param(o, o.core));
      });
  CLI::Option* core = rdma->add_option("--core", o.core, "one core (its index): every counter")
                          ->check(CLI::NonNegativeNumber);
  rdma->add_option("--port", o.port, "with --core: that core's engine of this port (name or id)")
      ->needs(core);

  std::string metrics_listen;
  CLI::App* metrics = app.add_subcommand(
      "metrics",
      "the daemon's counters as Prometheus metrics (text format 0.0.4): printed once, or served "
      "over HTTP with --listen");
  metrics->add_option("--prefix", o.prefix, "the daemon's EAL file prefix (eal.file_prefix)")
      ->capture_default_str();
  metrics->add_option("--listen", metrics_listen,
                      "serve them at http://[HOST:]PORT/metrics until SIGINT or SIGTERM (HOST "
                      "127.0.0.1 if left out; PORT 0: a free port, printed)");
  metrics->callback([&] { status = cmd_metrics(o.prefix, metrics_listen); });

  CaptureOptions cap;
  CLI::App* capture =
      daemon_command("capture",
                     "write a port's received and sent frames to a pcapng file "
                     "(the daemon writes it; stops after -c frames, -d seconds or Ctrl-C)",
                     [&] { return cmd_capture(o, cap); });
  capture->add_option("--port", cap.port, "port id (see `rocedpctl ports`)")->capture_default_str();
  capture->add_option("-w,--write", cap.file, "output file (pcapng)")->required();
  capture->add_option("-c,--count", cap.count, "stop after this many frames (0: no limit)")
      ->capture_default_str();
  capture->add_option("-d,--duration", cap.seconds, "stop after this many seconds (0: no limit)")
      ->capture_default_str();

  CLI::App* decode =
      app.add_subcommand("decode",
                         "decode every RoCEv2 packet of pcap files; verify parse, ICRC "
                         "and re-encoding (exit 1 on any failure)");
  std::vector<std::string> files;
  bool quiet = false;
  decode->add_flag("-q,--quiet", quiet, "summary only");
  decode->add_option("FILE", files, "pcap files")
      ->required();  // a missing file: "cannot read", exit 2
  decode->callback([&] { status = cmd_decode(files, quiet); });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  return status;
}
