#include "apps/perf/options.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "apps/perf/perf_util.hpp"

namespace rocedp::perf {

const char* op_name(Op op) {
  return op == Op::kWrite  ? "write"
         : op == Op::kRead ? "read"
         : op == Op::kSend ? "send"
                           : "atomic";
}

namespace {

using Level = config::LoggingConfig::Level;

// What both grammars share: --version, and every option may be repeated with the last one
// counting (scripts append overrides to a common set).
void prepare(CLI::App& app) {
  app.set_version_flag("--version", std::string("rocedp-perf ") + ROCEDP_VERSION);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

// The endpoint's options. Native mode (`native`) adds --lcore-mode and the fault stage; the
// perftest and rping modes add --counters (native mode prints the counters with --json).
void add_endpoint_options(CLI::App& app, EndpointOptions* e, bool native) {
  const std::string g = "Endpoint";
  app.add_option("--config", e->config_file,
                 "YAML configuration (one port of it; polls on eal.main_lcore unless --lcore-mode)")
      ->group(g);
  app.add_option(
         "--config-port", e->config_port,
         "the port of --config to use, by name (default: its first; the others stay closed)")
      ->group(g);
  app.add_option("--port-devargs", e->devargs, "the port: a vdev, e.g. net_memif0,role=server,...")
      ->group(g);
  app.add_option("--ip", e->ip_cidr, "the port's address A.B.C.D/NN")->group(g);
  app.add_option("--ip6", e->ip6,
                 "the port's IPv6 address (RoCEv2 over IPv6: --perftest and --rc-pingpong give it "
                 "as their GID)")
      ->group(g);
  app.add_option("--mac", e->mac, "the port's MAC (default: the device's)")->group(g);
  app.add_option("--mtu", e->mtu, "the port's MTU (default 1500)")->group(g);
  app.add_option("--vlan", e->vlan, "802.1Q VLAN ID of the port's frames (default: untagged)")
      ->check(CLI::Range(1, 4094))
      ->group(g);
  app.add_option("--vlan-priority", e->vlan_priority,
                 "802.1Q priority of the frames sent (default 0; without --vlan: priority-tagged)")
      ->check(CLI::Range(0, 7))
      ->group(g);
  app.add_option("--dscp", e->dscp, "DSCP of the port's RoCEv2 frames (default 0: unmarked)")
      ->check(CLI::Range(0, 63))
      ->group(g);
  app.add_flag(
         "--ecn", e->ecn,
         "ECN-capable QPs: frames carry ECT(0), the send rate follows the peer's CNPs (DCQCN)")
      ->group(g);
  app.add_option("--cnp-dscp", e->cnp_dscp,
                 "DSCP of the CNPs sent for CE-marked packets (default 48)")
      ->check(CLI::Range(0, 63))
      ->group(g);
  app.add_option_function<std::vector<std::string>>(
         "--dcqcn",
         [e](const std::vector<std::string>& items) {
           for (const std::string& item : items) {
             const size_t eq = item.find('=');
             std::string problem = "expected KEY=VALUE, got '" + item + "'";
             if (eq == std::string::npos ||
                 !config::set_dcqcn_parameter(&e->dcqcn, std::string_view(item).substr(0, eq),
                                              std::string_view(item).substr(eq + 1), &problem)) {
               throw CLI::ValidationError("--dcqcn", problem);
             }
           }
         },
         "a DCQCN parameter, KEY=VALUE (the keys of ports[].dcqcn; repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false)
      ->group(g);
  app.add_option("--lcore", e->lcore, "EAL main lcore, which polls (default 0)")->group(g);
  if (native)
    app.add_option("--lcore-mode", e->worker_lcore,
                   "poll on its own EAL worker lcore W instead of the main lcore")
        ->type_name("W")
        ->check(CLI::NonNegativeNumber)
        ->group(g);
  app.add_option("--file-prefix", e->file_prefix, "EAL file prefix (default: per process)")
      ->group(g);
  app.add_option("--memory-mb", e->memory_mb, "EAL memory (default 512)")->group(g);
  app.add_option_function<std::string>(
         "--log-level",
         [e](const std::string& v) {
           e->log_level = v == "error"   ? Level::kError
                          : v == "info"  ? Level::kInfo
                          : v == "debug" ? Level::kDebug
                                         : Level::kWarning;
         },
         "error|warning|info|debug (default warning)")
      ->check(CLI::IsMember({"error", "warning", "info", "debug"}))
      ->group(g);
  if (!native) {
    app.add_flag("--counters", e->counters,
                 "after the run, print the engine's counters and the frames dropped, by reason "
                 "(JSON lines rc_counters and drops)")
        ->group(g);
    return;
  }
  app.add_option("--fault-drop", e->fault_drop_pct,
                 "drop PCT % of the frames this endpoint receives")
      ->type_name("PCT")
      ->check(CLI::Range(0.0, 100.0))
      ->group("Faults");
  app.add_option("--fault-ce", e->fault_ce_pct,
                 "mark CE on PCT % of the ECN-capable frames this endpoint receives (a congested "
                 "switch)")
      ->type_name("PCT")
      ->check(CLI::Range(0.0, 100.0))
      ->group("Faults");
  app.add_option("--fault-seed", e->fault_seed, "seed of the drops (default: per process)")
      ->group("Faults");
}

bool endpoint_complete(const EndpointOptions& e) {
  return !e.config_file.empty() || (!e.devargs.empty() && !e.ip_cidr.empty());
}

// A command line CLI11 accepted but that does not make sense: the reason, exit status 2.
int bad(const char* who, const std::string& why) {
  std::fprintf(stderr, "%s: %s\nRun with --help for more information.\n", who, why.c_str());
  return 2;
}

// An InfiniBand path MTU (what -m of the Linux tools takes).
bool is_ib_mtu(uint32_t m) {
  return m == 256 || m == 512 || m == 1024 || m == 2048 || m == 4096;
}

// What every grammar asks of the endpoint: a configuration, or a port and its address (exit
// status 2 if not), and an EAL file prefix of its own (default PREFIX-PID). -1 when ready.
int endpoint_ready(EndpointOptions& e, const char* me, const char* prefix) {
  if (!endpoint_complete(e))
    return bad(me, "the endpoint needs --config FILE, or --port-devargs and --ip");
  if (!e.config_port.empty() && e.config_file.empty())
    return bad(me, "--config-port names a port of --config FILE");
  if (e.file_prefix.empty()) e.file_prefix = std::string(prefix) + "-" + std::to_string(getpid());
  return -1;
}

// CLI11's verdict on a parse error: help and version print and give 0, anything else 2.
// -1 when the words parsed; otherwise the exit status: 0 after --help or --version, 2 for an
// error (CLI11 printed it).
template <typename... Words>
int parse_words(CLI::App& app, Words&&... words) {
  try {
    app.parse(std::forward<Words>(words)...);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return -1;
}

// `--client HOST` takes the next word as HOST only when it looks like an address, so
// `--client write bw` still means the default host: rewritten here as --client=VALUE, which
// CLI11 can parse without guessing.
std::vector<std::string> client_host_args(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a != "--client") {
      args.push_back(a);
    } else if (i + 1 < argc && argv[i + 1][0] != '-' && std::strchr(argv[i + 1], '.') != nullptr) {
      args.push_back("--client=" + std::string(argv[++i]));
    } else {
      args.push_back("--client=127.0.0.1");
    }
  }
  std::reverse(args.begin(), args.end());  // CLI11 parses a vector from its back
  return args;
}

// Whether one of the words after the program's name is `word` (which grammar argv asks for).
bool has_word(int argc, char** argv, const char* word) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], word) == 0) return true;
  return false;
}

}  // namespace

bool wants_perftest(int argc, char** argv) {
  return has_word(argc, argv, "--perftest");
}

bool wants_rping(int argc, char** argv) {
  return has_word(argc, argv, "--rping");
}

bool wants_ops_check(int argc, char** argv) {
  return has_word(argc, argv, "--ops-check");
}
bool wants_cm_check(int argc, char** argv) {
  return has_word(argc, argv, "--cm-check");
}

bool wants_rc_pingpong(int argc, char** argv) {
  return has_word(argc, argv, "--rc-pingpong");
}

int parse_options(int argc, char** argv, Options* out) {
  Options& o = *out;
  CLI::App app{
      "rocedp-perf: a perftest-style benchmark and check tool for rocedp; one process is one "
      "endpoint.\n"
      "  rocedp-perf --server [endpoint] [--oob-port N]\n"
      "  rocedp-perf --client [HOST] [endpoint] write|read|send bw|lat [test options]\n"
      "  rocedp-perf --listen PORT [endpoint]                (IB CM; the client picks the test)\n"
      "  rocedp-perf --connect IP:PORT [endpoint] write|read|send bw|lat [test options]\n"
      "      (IB CM to a --listen peer, or to rocedpd's memory (write|read) / echo (send) "
      "service)\n"
      "  rocedp-perf --perftest [HOST] [endpoint] write|read|send|atomic bw|lat [perftest "
      "options]\n"
      "      (one end of a Linux perftest pair: rocedp-perf --perftest --help)\n"
      "  rocedp-perf --rping -s|-c [-a ADDR] [endpoint] [rping options]\n"
      "      (one end of a Linux rping pair: rocedp-perf --rping --help)\n"
      "  rocedp-perf --rc-pingpong [HOST] [endpoint] [ibv_rc_pingpong options]\n"
      "  rocedp-perf --ops-check -s|-c [-a ADDR] [endpoint] [-p PORT]\n"
      "      (immediate data, memory windows, SEND with Invalidate: rocedp-perf --ops-check "
      "--help)\n"
      "  rocedp-perf --cm-check -s|-c [-a ADDR] [endpoint] [-p PORT] [--expect|--answer KIND]\n"
      "      (connections refused, rejected, abandoned: rocedp-perf --cm-check --help)\n"
      "endpoint: --config FILE | --port-devargs DEVARGS --ip A.B.C.D/NN [--mac MAC] ...\n"
      "Exit status: 0 success, 1 failure, 2 usage, 3 time limit (--timeout) reached.",
      "rocedp-perf"};
  prepare(app);
  std::string connect;
  std::vector<std::string> words;
  bool size_set = false, tx_depth_set = false;
  const std::string m = "Mode", t = "Test";
  app.add_flag("--server", o.server, "out-of-band server: adopts the client's test")->group(m);
  app.add_option("--client", o.host, "out-of-band client of the server at HOST (127.0.0.1)")
      ->type_name("[HOST]")
      ->group(m);
  app.add_option("--listen", o.listen_port, "accept a test through the IB CM on ND port PORT")
      ->type_name("PORT")
      ->check(CLI::Range(1, 65535))
      ->group(m);
  app.add_option("--connect", connect, "run the test through the IB CM against IP:PORT")
      ->type_name("IP:PORT")
      ->group(m);
  app.add_option("--oob-port", o.oob_port, "TCP port of the out-of-band exchange (18515)")
      ->group(m);
  add_endpoint_options(app, &o.endpoint, true);
  app.add_option("words", words, "write|read|send bw|lat")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("TEST");
  app.add_option("-s,--size", o.size, "message size (default 65536 bw, 2 lat)")->group(t);
  app.add_option("-n,--iters", o.test.iters, "messages per QP (default 5000 bw, 1000 lat)")
      ->group(t);
  app.add_option("-D,--duration", o.test.duration_s, "run SECONDS instead of -n")->group(t);
  app.add_option("-q,--qp", o.test.qps, "QPs (connections)")->group(t);
  app.add_option("-t,--tx-depth", o.test.tx_depth, "requests in flight per QP (128)")->group(t);
  app.add_option("--cq-mod", o.test.cq_mod,
                 "bw: a completion every N requests per QP at most (100, as perftest; 1: each)")
      ->group(t);
  app.add_flag("-a,--all", o.all_sizes, "every size from 2 bytes")->group(t);
  app.add_flag("--report_gbits", o.report_gbits, "bandwidth in Gb/s")->group(t);
  app.add_flag("--raw", o.test.raw, "baseline: the same frames over the same port, no RDMA")
      ->group(t);
  std::string reflector;
  app.add_option("--reflector", reflector,
                 "--raw lat against a frame reflector at MAC (dpdk-testpmd macswap), no peer "
                 "rocedp-perf")
      ->type_name("MAC")
      ->group(t);
  app.add_flag("--verify", o.test.verify, "check every byte of every message")->group(t);
  app.add_option("--verify-seed", o.verify_seed,
                 "--verify with this process's pattern changed (must fail)")
      ->group(t);
  app.add_flag("--json", o.json, "one JSON object per result line on stdout")->group(t);
  app.add_option("--timeout", o.timeout_s, "whole run, SECONDS (default 60)")->group(t);
  app.add_flag("--peer-echoes", o.peer_echoes,
               "--connect: the peer answers each SEND with a SEND (e.g. Linux rdma_server)")
      ->group(t);
  app.add_option("--recv-delay-ms", o.recv_delay_ms,
                 "SEND lat: post each reply's receive N ms after our SEND completed (RNR)")
      ->group(t);
  if (const int status = parse_words(app, client_host_args(argc, argv)); status >= 0) return status;
  const char* me = "rocedp-perf";
  o.client = app.count("--client") != 0;
  o.listen = app.count("--listen") != 0;
  size_set = app.count("--size") != 0;
  tx_depth_set = app.count("--tx-depth") != 0;
  if (app.count("--verify-seed") != 0) o.test.verify = true;
  if (!connect.empty()) {
    // A.B.C.D:PORT, or [IPv6]:PORT.
    const auto colon = connect.rfind(':');
    std::string host = colon == std::string::npos ? connect : connect.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    const auto ip = parse_address(host);
    uint64_t port = 0;
    if (colon == std::string::npos || !ip || !parse_u64(connect.c_str() + colon + 1, &port) ||
        port == 0 || port > 65535)
      return bad(me, "--connect wants IP:PORT or [IPv6]:PORT, got " + connect);
    o.connect = true;
    o.connect_to = *ip;
    o.connect_to.port = static_cast<uint16_t>(port);
    o.connect_port = o.connect_to.port;
  }
  for (const auto& w : words) {
    if (w == "write")
      o.test.op = Op::kWrite;
    else if (w == "read")
      o.test.op = Op::kRead;
    else if (w == "send")
      o.test.op = Op::kSend;
    else if (w == "bw")
      o.test.kind = Kind::kBw;
    else if (w == "lat")
      o.test.kind = Kind::kLat;
    else
      return bad(me, "unknown test word '" + w + "' (write|read|send and bw|lat)");
  }
  if (!reflector.empty()) {
    o.reflector = parse_mac(reflector);
    if (!o.reflector) return bad(me, "--reflector wants a MAC address, got " + reflector);
    if (!o.test.raw || o.test.kind != Kind::kLat)
      return bad(me, "--reflector is a --raw lat test (the reflector only bounces frames)");
    if (o.server || o.connect || o.listen)
      return bad(me, "--reflector is the only peer: no --server, --listen or --connect");
    o.client = true;  // the timing side; no out-of-band peer
  }
  if (int{o.server} + int{o.client} + int{o.connect} + int{o.listen} != 1)
    return bad(me, "give one of --server, --client, --listen and --connect");
  if ((o.connect || o.listen) && o.test.raw)
    return bad(me, "--raw has no connection: use it with --server/--client");
  if (o.test.verify && o.test.duration_s != 0)
    return bad(me, "--verify checks a known number of messages: use -n, not -D");
  // rocedpd's echo service keeps queue_depth (default 64) receives per connection: a deeper
  // window would only collect RNR NAKs.
  if (o.connect && o.test.op == Op::kSend && !tx_depth_set) o.test.tx_depth = 64;
  if (const int status = endpoint_ready(o.endpoint, me, "rocedp-perf"); status >= 0) return status;
  if (!size_set && o.test.kind == Kind::kLat) o.size = 2;
  if (o.test.iters == 0) o.test.iters = o.test.bw() ? 5000 : 1000;
  if (o.test.qps == 0 || o.test.tx_depth == 0 || o.test.cq_mod == 0)
    return bad(me, "-q, -t and --cq-mod must be at least 1");
  if (o.size == 0 || o.size > (1ull << 30)) return bad(me, "-s must be 1 .. 1073741824 bytes");
  if (o.test.kind == Kind::kLat && o.test.qps != 1)
    return bad(me, "latency tests use one QP (as perftest)");
  if (o.all_sizes && o.test.verify) return bad(me, "-a and --verify do not combine");
  // --verify keeps every message of a bandwidth run in a slot of its own (native_mode.cpp): said
  // here, not once the link is up (the server, which adopts the client's test, ends then).
  if (o.client && o.test.verify && o.test.bw() &&
      o.test.qps * o.test.iters * o.size > (uint64_t{1} << 30))
    return bad(me, "--verify needs a slot per message: -q x -n x -s must stay within 1 GiB");
  o.test.size = o.all_sizes ? 0 : o.size;
  return -1;
}

int parse_perftest_options(int argc, char** argv, PerftestOptions* out) {
  PerftestOptions& o = *out;
  CLI::App app{
      "rocedp-perf --perftest: one end of a Linux perftest 4.5 pair (ib_{write,read,send,atomic}_"
      "{bw,lat}),\nover perftest's TCP exchange or rdma_cm (-R).\n"
      "  rocedp-perf --perftest [HOST] [endpoint] write|read|send|atomic bw|lat [perftest "
      "options]\n"
      "  without HOST: the server (like ib_write_bw with no host); with HOST: the client\n"
      "Exit status: 0 success, 1 failure, 2 usage, 3 time limit (--timeout) reached.",
      "rocedp-perf --perftest"};
  prepare(app);
  std::vector<std::string> words;
  std::string ignored;
  bool ignored_flag = false;
  const std::string p = "perftest", r = "rocedp";
  app.add_flag("--perftest", ignored_flag, "this grammar")->group(p);
  std::string atomic_type = "FETCH_AND_ADD";
  app.add_option("words", words, "[HOST] write|read|send|atomic bw|lat")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("TEST");
  app.add_flag("-R,--rdma_cm", o.rdma_cm, "connect through rdma_cm")->group(p);
  app.add_option("-p,--port", o.port, "TCP port or rdma_cm port (18515)")->group(p);
  app.add_option("-s,--size", o.size, "message size (65536 bw, 2 lat)")->group(p);
  app.add_option("-n,--iters", o.iters, "iterations (5000 bw, 1000 lat)")->group(p);
  app.add_option("-D,--duration", o.duration_s, "run SECONDS instead of -n")->group(p);
  app.add_option("-q,--qp", o.qps, "QPs")->group(p);
  app.add_option("-t,--tx-depth", o.tx_depth, "TX depth (128 bw, 1 lat)")->group(p);
  app.add_flag("-a,--all", o.all_sizes, "every size from 2 bytes")->group(p);
  app.add_option("-A,--atomic_type", atomic_type, "atomic: FETCH_AND_ADD or CMP_AND_SWAP")
      ->check(CLI::IsMember({"FETCH_AND_ADD", "CMP_AND_SWAP"}))
      ->group(p);
  app.add_flag("--report_gbits", o.report_gbits, "bandwidth in Gb/s")->group(p);
  app.add_flag("--use-srq", o.use_srq, "SEND tests: receive through one shared receive queue")
      ->group(p);
  // -m only: --mtu is the endpoint's port MTU.
  app.add_option("-m", o.mtu,
                 "path MTU at most: 256, 512, 1024, 2048 or 4096 (the port's); without -R the "
                 "QPs' path MTU, with -R only what the exchange reports (rdma_cm sets the QPs')")
      ->group(p);
  std::string connection = "RC";
  app.add_option("-c,--connection", connection, "connection type: RC (the only one rocedp has)")
      ->group(p);
  app.add_flag("-F", ignored_flag, "accepted, not needed (CPU frequency check)")->group(p);
  for (const char* name : {"-d,--ib-dev", "-x,--gid-index", "-i,--ib-port"})
    app.add_option(name, ignored, "accepted, not needed (the endpoint's port and address)")
        ->group(p);
  app.add_option("--timeout", o.timeout_s, "whole run, SECONDS (default 120)")->group(r);
  app.add_option("--dump-recv", o.dump_file, "write the received region to FILE after the run")
      ->group(r);
  add_endpoint_options(app, &o.endpoint, false);
  if (const int status = parse_words(app, argc, argv); status >= 0) return status;
  const char* me = "rocedp-perf --perftest";
  bool have_op = false, have_kind = false;
  for (const auto& w : words) {
    if (w == "write" || w == "read" || w == "send" || w == "atomic") {
      o.op = w == "write"  ? Op::kWrite
             : w == "read" ? Op::kRead
             : w == "send" ? Op::kSend
                           : Op::kAtomic;
      have_op = true;
    } else if (w == "bw" || w == "lat") {
      o.kind = w == "bw" ? Kind::kBw : Kind::kLat;
      have_kind = true;
    } else if (o.host.empty()) {
      o.host = w;
      o.server = false;
    } else {
      return bad(me, "unknown argument " + w);
    }
  }
  if (!have_op || !have_kind) return bad(me, "name the test: write|read|send|atomic and bw|lat");
  if (connection != "RC") {
    for (const char* known : {"UC", "UD", "XRC", "DC", "SRD"})
      if (connection == known)
        return bad(me, "-c " + connection + ": rocedp has RC connections only");
    return bad(me, "-c must be RC, UC, UD, XRC, DC or SRD (rocedp has RC only), got " + connection);
  }
  if (app.count("-m") != 0 && !is_ib_mtu(o.mtu))
    return bad(me, "-m must be 256, 512, 1024, 2048 or 4096");
  if (const int status = endpoint_ready(o.endpoint, me, "rocedp-perftest"); status >= 0)
    return status;
  if (!o.server && !parse_ipv4(o.host))
    return bad(me, "HOST must be an IPv4 address, got " + o.host);
  const bool bw = o.kind == Kind::kBw;
  if (o.op == Op::kAtomic) {
    // As perftest: an atomic moves 8 bytes, whatever -s says; -a has nothing to vary.
    if (o.all_sizes) return bad(me, "-a does not apply to atomic tests");
    o.size = 8;
    o.cmp_swap = atomic_type == "CMP_AND_SWAP";
  } else if (app.count("--atomic_type") != 0) {
    return bad(me, "-A applies to atomic tests only");
  }
  if (o.use_srq && o.op != Op::kSend) return bad(me, "--use-srq applies to send tests only");
  if (app.count("--size") == 0 && o.op != Op::kAtomic) o.size = bw ? 65536 : 2;
  if (o.iters == 0) o.iters = bw ? 5000 : 1000;
  if (o.tx_depth == 0) o.tx_depth = bw ? 128 : 1;
  if (o.qps == 0) return bad(me, "-q must be at least 1");
  if (o.size == 0 || o.size > (1u << 23)) return bad(me, "-s must be 1 .. 8388608 bytes");
  if (!bw && o.qps != 1) return bad(me, "latency tests use one QP (as perftest)");
  if (o.all_sizes && bw && o.op == Op::kSend) return bad(me, "-a with send bw is not supported");
  return -1;
}

int parse_rping_options(int argc, char** argv, RpingOptions* out) {
  RpingOptions& o = *out;
  CLI::App app{
      "rocedp-perf --rping: one end of a Linux rping pair (librdmacm's example), through rdma_cm.\n"
      "  rocedp-perf --rping -s [endpoint] [-p PORT]                 the server\n"
      "  rocedp-perf --rping -c -a ADDR [endpoint] [-p PORT] [-C COUNT] [-S SIZE] [-V] [-v]\n"
      "Exit status: 0 success, 1 failure, 2 usage, 3 time limit (--timeout) reached.",
      "rocedp-perf --rping"};
  prepare(app);
  bool ignored_flag = false, server = false, client = false;
  std::string addr, ignored;
  const std::string p = "rping", r = "rocedp";
  app.add_flag("--rping", ignored_flag, "this grammar")->group(p);
  app.add_flag("-s", server, "server side")->group(p);
  app.add_flag("-c", client, "client side")->group(p);
  app.add_option("-a", addr, "address: the server's (client); ignored by the server")->group(p);
  app.add_option("-p", o.port, "port (7174)")->group(p);
  app.add_option("-C", o.count, "ping count (client; default: until --timeout)")->group(p);
  app.add_option("-S", o.size, "ping data size (64; 25 .. 65535)")->group(p);
  app.add_flag("-V", o.validate, "validate ping data")->group(p);
  app.add_flag("-v", o.verbose, "display ping data")->group(p);
  app.add_flag("-d", ignored_flag, "accepted, not needed (debug prints)")->group(p);
  app.add_option("-I", ignored, "accepted, not needed (the endpoint's address is the source)")
      ->group(p);
  app.add_option("--timeout", o.timeout_s, "whole run, SECONDS (default 60)")->group(r);
  add_endpoint_options(app, &o.endpoint, false);
  if (const int status = parse_words(app, argc, argv); status >= 0) return status;
  const char* me = "rocedp-perf --rping";
  if (server == client) return bad(me, "name the side: -s (server) or -c (client)");
  o.server = server;
  if (const int status = endpoint_ready(o.endpoint, me, "rocedp-rping"); status >= 0) return status;
  if (client) {
    const auto ip = parse_address(addr);
    if (!ip) return bad(me, "-c needs -a ADDR, an IPv4 or IPv6 address, got '" + addr + "'");
    o.addr = *ip;
  }
  // rping's own bounds: room for "rdma-ping-%d: " with any count, below its 64 KiB buffer.
  if (o.size < 25 || o.size > 65535) return bad(me, "-S must be 25 .. 65535 bytes");
  return -1;
}

int parse_rc_pingpong_options(int argc, char** argv, RcPingpongOptions* out) {
  RcPingpongOptions& o = *out;
  CLI::App app{
      "rocedp-perf --rc-pingpong: one end of a Linux ibv_rc_pingpong pair (libibverbs' example):\n"
      "SEND ping-pong on one RC QP, connected through its TCP exchange of LID:QPN:PSN:GID.\n"
      "  rocedp-perf --rc-pingpong [HOST] [endpoint] [-p PORT] [-s SIZE] [-m MTU] [-r RX_DEPTH] "
      "[-n ITERS]\n"
      "  without HOST: the server; with HOST: the client\n"
      "Exit status: 0 success, 1 failure, 2 usage, 3 time limit (--timeout) reached.",
      "rocedp-perf --rc-pingpong"};
  prepare(app);
  std::vector<std::string> words;
  std::string ignored;
  bool ignored_flag = false;
  const std::string p = "ibv_rc_pingpong", r = "rocedp";
  app.add_flag("--rc-pingpong", ignored_flag, "this grammar")->group(p);
  app.add_option("host", words, "HOST: the server's address (the client)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("-p,--port", o.port, "TCP port of the exchange (18515)")->group(p);
  app.add_option("-s,--size", o.size, "message size (4096)")->group(p);
  // -m only: --mtu is the endpoint's port MTU.
  app.add_option("-m", o.mtu, "path MTU: 256, 512, 1024, 2048 or 4096 (1024)")->group(p);
  app.add_option("-r,--rx-depth", o.rx_depth, "receives posted at a time (500)")->group(p);
  app.add_option("-n,--iters", o.iters, "messages each way (1000)")->group(p);
  app.add_flag("-e,--events", ignored_flag, "accepted, not needed (rocedp polls)")->group(p);
  for (const char* name : {"-d,--ib-dev", "-i,--ib-port", "-l,--sl", "-g,--gid-idx"})
    app.add_option(name, ignored, "accepted, not needed")->group(p);
  app.add_flag("--verify", o.verify,
               "check that every message received is SIZE bytes of 0x7b (what ibv_rc_pingpong "
               "sends)")
      ->group(r);
  app.add_option("--timeout", o.timeout_s, "whole run, SECONDS (default 60)")->group(r);
  add_endpoint_options(app, &o.endpoint, false);
  if (const int status = parse_words(app, argc, argv); status >= 0) return status;
  const char* me = "rocedp-perf --rc-pingpong";
  if (words.size() > 1) return bad(me, "one HOST at most, got '" + words[1] + "'");
  if (!words.empty()) {
    if (!parse_ipv4(words[0]))
      return bad(me, "HOST must be an IPv4 address, got '" + words[0] + "'");
    o.host = words[0];
  }
  if (const int status = endpoint_ready(o.endpoint, me, "rocedp-rc-pingpong"); status >= 0)
    return status;
  if (!is_ib_mtu(o.mtu)) return bad(me, "-m must be 256, 512, 1024, 2048 or 4096");
  if (o.size == 0 || o.size > (1u << 24)) return bad(me, "-s must be 1 .. 16777216 bytes");
  if (o.rx_depth < 2) return bad(me, "-r must be at least 2");
  if (o.iters == 0) return bad(me, "-n must be at least 1");
  return -1;
}

int parse_ops_check_options(int argc, char** argv, OpsCheckOptions* out) {
  OpsCheckOptions& o = *out;
  CLI::App app{
      "rocedp-perf --ops-check: one end of the ops check (apps/perf/ops_check_mode.hpp), through\n"
      "rdma_cm: the client SENDs and WRITEs with immediate data, WRITEs through the server's\n"
      "memory window, invalidates it with a SEND and WRITEs through it once more, which the "
      "server\n"
      "must refuse; the server checks every byte, immediate and token. The other end is\n"
      "tests/interop/ops_check_peer (Linux verbs) or another rocedp-perf.\n"
      "  rocedp-perf --ops-check -s [endpoint] [-p PORT] [--fast-register]   the server\n"
      "  rocedp-perf --ops-check -c -a ADDR [endpoint] [-p PORT]     the client\n"
      "Exit status: 0 every check held, 1 failure, 2 usage, 3 time limit (--timeout) reached.",
      "rocedp-perf --ops-check"};
  prepare(app);
  bool ignored_flag = false, server = false, client = false;
  std::string addr;
  const std::string p = "ops check";
  app.add_flag("--ops-check", ignored_flag, "this grammar")->group(p);
  app.add_flag("-s", server, "server side")->group(p);
  app.add_flag("-c", client, "client side")->group(p);
  app.add_option("-a", addr, "the server's address (client)")->group(p);
  app.add_option("-p", o.port, "port (7475)")->group(p);
  app.add_flag("--fast-register", o.fast_register,
               "server: offer a fast-registered region (FastRegister) instead of a memory window")
      ->group(p);
  app.add_flag("--lossy", o.lossy,
               "on a lossy link: the client's refused WRITE may end in a retry timeout "
               "(STATUS_IO_TIMEOUT), as when the server's NAK is lost; the server's second "
               "go-ahead may end flushed (STATUS_CANCELLED), as when its ACK is lost")
      ->group(p);
  app.add_option("--timeout", o.timeout_s, "whole run, SECONDS (default 60)")->group(p);
  add_endpoint_options(app, &o.endpoint, false);
  if (const int status = parse_words(app, argc, argv); status >= 0) return status;
  const char* me = "rocedp-perf --ops-check";
  if (server == client) return bad(me, "name the side: -s (server) or -c (client)");
  o.server = server;
  if (const int status = endpoint_ready(o.endpoint, me, "rocedp-ops-check"); status >= 0)
    return status;
  if (client) {
    const auto ip = parse_address(addr);
    if (!ip) return bad(me, "-c needs -a ADDR, an IPv4 or IPv6 address, got '" + addr + "'");
    o.addr = *ip;
    if (o.fast_register) return bad(me, "--fast-register is the server's choice (-s)");
  }
  return -1;
}

int parse_cm_check_options(int argc, char** argv, CmCheckOptions* out) {
  CmCheckOptions& o = *out;
  CLI::App app{
      "rocedp-perf --cm-check: one end of the CM check (apps/perf/cm_check_mode.hpp): connections\n"
      "that do not come about, through rdma_cm. The other end is tests/interop/cm_check_peer\n"
      "(Linux librdmacm) or another rocedp-perf.\n"
      "  rocedp-perf --cm-check -c -a ADDR --expect refused|aborted|cancelled|connected\n"
      "      [endpoint] [-p PORT] [--peer-data TEXT] [--wait-ms MS]           the client\n"
      "  rocedp-perf --cm-check -s --answer reject|abandon|silent|late [endpoint] [-p PORT]\n"
      "      [--peer-data TEXT] [--wait-ms MS] [--requests N]                the server\n"
      "Exit status: 0 every check held, 1 failure, 2 usage, 3 time limit (--timeout) reached.",
      "rocedp-perf --cm-check"};
  prepare(app);
  bool ignored_flag = false, server = false, client = false;
  std::string addr, expect, answer;
  const std::string p = "CM check";
  app.add_flag("--cm-check", ignored_flag, "this grammar")->group(p);
  app.add_flag("-s", server, "server side")->group(p);
  app.add_flag("-c", client, "client side")->group(p);
  app.add_option("-a", addr, "the server's address (client)")->group(p);
  app.add_option("-p", o.port, "port (7476)")->group(p);
  app.add_option("--expect", expect,
                 "client: refused (Connect ends STATUS_CONNECTION_REFUSED), aborted (Connect "
                 "succeeds, CompleteConnect ends STATUS_CONNECTION_ABORTED), cancelled (no "
                 "answer: the connector is closed, Connect ends STATUS_CANCELLED) or connected "
                 "(however late the answer: connected, then the server disconnects)")
      ->group(p);
  app.add_option("--answer", answer,
                 "server: reject (NdkReject with private data), abandon (accept, then close "
                 "the connector before the RTU), silent (no answer for --wait-ms, then a late "
                 "accept must fail) or late (accept after --wait-ms: the client's REQ comes "
                 "again, our MRA answers it; then disconnect)")
      ->group(p);
  app.add_option("--peer-data", o.peer_data,
                 "the peer's private data (the client: its REJ's; the server: the request's) "
                 "must begin with TEXT")
      ->group(p);
  app.add_option("--wait-ms", o.wait_ms,
                 "the wait before CompleteConnect (aborted), the close (cancelled) or the "
                 "server's accept (silent, late), MS (2000)")
      ->group(p);
  app.add_option("--requests", o.requests,
                 "server, reject: reject N requests, each as the first (a client whose REJ was "
                 "lost sends its REQ again, a new request to the listener) (1)")
      ->group(p);
  app.add_option("--timeout", o.timeout_s, "whole run, SECONDS (default 60)")->group(p);
  add_endpoint_options(app, &o.endpoint, false);
  if (const int status = parse_words(app, argc, argv); status >= 0) return status;
  const char* me = "rocedp-perf --cm-check";
  if (server == client) return bad(me, "name the side: -s (server) or -c (client)");
  o.server = server;
  if (const int status = endpoint_ready(o.endpoint, me, "rocedp-cm-check"); status >= 0)
    return status;
  if (client) {
    const auto ip = parse_address(addr);
    if (!ip) return bad(me, "-c needs -a ADDR, an IPv4 or IPv6 address, got '" + addr + "'");
    o.addr = *ip;
    if (!answer.empty()) return bad(me, "--answer is the server's (-s)");
    if (o.requests != 1) return bad(me, "--requests is the server's (-s)");
    if (expect == "refused")
      o.expect = CmCheckOptions::Expect::kRefused;
    else if (expect == "aborted")
      o.expect = CmCheckOptions::Expect::kAborted;
    else if (expect == "cancelled")
      o.expect = CmCheckOptions::Expect::kCancelled;
    else if (expect == "connected")
      o.expect = CmCheckOptions::Expect::kConnected;
    else
      return bad(me,
                 "--expect must be refused, aborted, cancelled or connected, got '" + expect + "'");
    if (!o.peer_data.empty() && o.expect != CmCheckOptions::Expect::kRefused)
      return bad(me, "--peer-data on the client checks a REJ's: only with --expect refused");
  } else {
    if (!expect.empty()) return bad(me, "--expect is the client's (-c)");
    if (answer == "reject")
      o.answer = CmCheckOptions::Answer::kReject;
    else if (answer == "abandon")
      o.answer = CmCheckOptions::Answer::kAbandon;
    else if (answer == "silent")
      o.answer = CmCheckOptions::Answer::kSilent;
    else if (answer == "late")
      o.answer = CmCheckOptions::Answer::kLate;
    else
      return bad(me, "--answer must be reject, abandon, silent or late, got '" + answer + "'");
    if (o.requests == 0) return bad(me, "--requests must be 1 or more");
    if (o.requests > 1 && o.answer != CmCheckOptions::Answer::kReject)
      return bad(me, "--requests above 1 needs --answer reject");
  }
  if (o.wait_ms == 0 || o.wait_ms >= o.timeout_s * 1000)
    return bad(me, "--wait-ms must be above 0 and below --timeout");
  return -1;
}

}  // namespace rocedp::perf
