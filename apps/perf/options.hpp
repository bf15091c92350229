#pragma once
// rocedp-perf's command lines (CLI11). Two grammars share the endpoint options:
//   * rocedp-perf's own: --server/--client (out-of-band exchange), --listen/--connect (IB CM);
//     the test is the words write|read|send and bw|lat plus perftest-like flags;
//   * --perftest: perftest 4.5's flags, so a command line reads like the Linux tool's.
// Both return, instead of exiting, so main decides the exit status: 0 after --help or --version,
// 2 for a bad command line (with a message on stderr).

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "apps/perf/perftest_exchange.hpp"
#include "rocedp/config.hpp"
#include "rocedp/connection_manager.hpp"

namespace rocedp::perf {

/// kAtomic: perftest's ib_atomic_{bw,lat} (--perftest only; rocedp's atomics extension).
enum class Op : uint32_t { kWrite = 0, kRead = 1, kSend = 2, kAtomic = 3 };
enum class Kind : uint32_t { kBw = 0, kLat = 1 };
const char* op_name(Op op);  // "write", "read", "send", "atomic"

/// The endpoint: one port and one polling core, from a configuration file or the command line.
struct EndpointOptions {
  std::string config_file;
  std::string config_port;  ///< --config-port: which of the file's ports (empty: its first)
  std::string devargs;
  std::string ip_cidr;
  std::string ip6;  ///< the port's IPv6 address (ports[].ipv6); empty: none
  std::string mac;
  uint16_t mtu = 1500;
  uint16_t vlan = 0;  ///< 802.1Q VLAN ID of the port's frames (0: untagged)
  unsigned vlan_priority = 0;
  unsigned dscp = 0;  ///< DSCP of the port's RoCEv2 frames
  bool ecn = false;   ///< ECN-capable QPs (DCQCN)
  unsigned cnp_dscp = 48;
  config::DcqcnConfig dcqcn;  ///< --dcqcn KEY=VALUE (the keys of `ports[].dcqcn`)
  unsigned lcore = 0;
  int worker_lcore = -1;  ///< --lcore-mode W: the polling core runs on worker lcore W
  std::string file_prefix;
  unsigned memory_mb = 512;
  config::LoggingConfig::Level log_level = config::LoggingConfig::Level::kWarning;
  // Fault stage on this endpoint's port, its RX side (give both ends a rate for loss both ways).
  double fault_drop_pct = 0;
  double fault_ce_pct = 0;  ///< ECN-capable frames received marked CE (a congested switch)
  uint64_t fault_seed = 0;  ///< 0: derived from the process id
  /// --perftest, --rping: print the engine's counters and the drops by reason after the run.
  bool counters = false;
};

/// What one run measures: the client's choice; the server adopts it from the exchange.
struct Test {
  Op op = Op::kWrite;
  Kind kind = Kind::kBw;
  uint64_t size = 65536;  ///< 0: every size (-a)
  uint64_t iters = 0;     ///< per QP
  uint32_t duration_s = 0;
  uint32_t qps = 1;
  uint32_t tx_depth = 128;
  /// Bandwidth: at most this many requests in a row per QP without a completion (perftest's
  /// --cq-mod); the last request of every run of posts asks for one too.
  uint32_t cq_mod = 100;
  bool raw = false;
  bool verify = false;
  bool bw() const { return kind == Kind::kBw; }
};

struct Options {
  bool server = false, client = false;
  bool connect = false, listen = false;  ///< through the IB CM instead of the exchange
  NdkSockAddr connect_to{};              ///< --connect: address and port
  uint16_t connect_port = 0, listen_port = 0;
  std::string host = "127.0.0.1";
  uint16_t oob_port = 18515;
  EndpointOptions endpoint;
  Test test;
  uint64_t size = 65536;  ///< the message size asked (test.size is 0 with -a)
  bool all_sizes = false;
  bool report_gbits = false;
  bool json = false;
  uint32_t timeout_s = 60;
  uint64_t verify_seed = 0;
  // --connect to a peer that is not rocedp (Linux rdma_server): it answers each SEND with a SEND
  // and may end the connection itself after the last one.
  bool peer_echoes = false;
  uint32_t recv_delay_ms = 0;  ///< SEND lat: post each reply's receive this long after our SEND
  /// --raw --reflector MAC: the peer is a plain frame reflector (dpdk-testpmd
  /// --forward-mode=macswap), not rocedp-perf: no out-of-band exchange; lat only.
  std::optional<std::array<uint8_t, 6>> reflector;
};

struct PerftestOptions {
  bool server = true;
  std::string host;
  bool rdma_cm = false;
  uint16_t port = kPerftestPort;
  Op op = Op::kWrite;
  Kind kind = Kind::kBw;
  uint64_t size = 0;
  uint64_t iters = 0;
  uint32_t duration_s = 0;
  uint32_t qps = 1;
  uint32_t tx_depth = 0;
  bool cmp_swap = false;  ///< atomic: -A CMP_AND_SWAP (otherwise FETCH_AND_ADD)
  bool use_srq = false;   ///< --use-srq: SEND tests receive through one SRQ shared by the QPs
  bool report_gbits = false;
  bool all_sizes = false;
  uint32_t mtu = 0;  ///< -m: the path MTU to offer at most (0: the port's), as perftest's -m
  uint32_t timeout_s = 120;
  std::string dump_file;  ///< rocedp extension: the received region after the run
  EndpointOptions endpoint;
};

struct RpingOptions {
  bool server = false;    ///< -s (else -c)
  NdkSockAddr addr{};     ///< -a: the client's server address (IPv4 or IPv6); the server ignores it
  uint16_t port = 7174;   ///< -p
  uint32_t count = 0;     ///< -C: pings (the client; 0: until --timeout ends the run)
  uint32_t size = 64;     ///< -S: ping data size, as rping: 25 .. 65535
  bool validate = false;  ///< -V: the client compares what came back with what it sent
  bool verbose = false;   ///< -v: print each ping's data
  uint32_t timeout_s = 60;
  EndpointOptions endpoint;
};

struct OpsCheckOptions {
  bool server = false;         ///< -s (else -c)
  NdkSockAddr addr{};          ///< -a: the client's server address (IPv4 or IPv6)
  uint16_t port = 7475;        ///< -p
  bool fast_register = false;  ///< --fast-register (server): the window is a fast-registered region
  /// --lossy: the client's refused WRITE may end in a retry timeout, the server's second go-ahead
  /// flushed (its ACK lost)
  bool lossy = false;
  uint32_t timeout_s = 60;
  EndpointOptions endpoint;
};

struct CmCheckOptions {
  enum class Expect { kRefused, kAborted, kCancelled, kConnected };  ///< --expect (client)
  enum class Answer { kReject, kAbandon, kSilent, kLate };           ///< --answer (server)
  bool server = false;                                               ///< -s (else -c)
  NdkSockAddr addr{};    ///< -a: the client's server address (IPv4 or IPv6)
  uint16_t port = 7476;  ///< -p
  Expect expect = Expect::kRefused;
  Answer answer = Answer::kReject;
  std::string peer_data;    ///< --peer-data: the peer's private data must begin with it
  uint32_t wait_ms = 2000;  ///< --wait-ms: before CompleteConnect, the close or a silent Accept
  uint32_t requests = 1;    ///< --requests (server, reject): how many requests to reject
  uint32_t timeout_s = 60;
  EndpointOptions endpoint;
};

struct RcPingpongOptions {
  std::string host;         ///< the server's address (the client); empty: the server
  uint16_t port = 18515;    ///< -p: the TCP exchange
  uint32_t size = 4096;     ///< -s: message size
  uint32_t mtu = 1024;      ///< -m: path MTU (at most what the port carries)
  uint32_t rx_depth = 500;  ///< -r: receives posted at a time
  uint32_t iters = 1000;    ///< -n: messages each way
  bool verify = false;      ///< rocedp: every message received is SIZE bytes of 0x7b
  uint32_t timeout_s = 60;
  EndpointOptions endpoint;
};

/// Whether argv asks for the --perftest grammar.
bool wants_perftest(int argc, char** argv);
/// Whether argv asks for the --rping grammar.
bool wants_rping(int argc, char** argv);
/// Whether argv asks for the --ops-check grammar.
bool wants_ops_check(int argc, char** argv);
/// Whether argv asks for the --cm-check grammar.
bool wants_cm_check(int argc, char** argv);
/// Whether argv asks for the --rc-pingpong grammar.
bool wants_rc_pingpong(int argc, char** argv);
/// -1: parsed, run; otherwise the exit status (help or version printed: 0; an error: 2).
int parse_options(int argc, char** argv, Options* out);
int parse_perftest_options(int argc, char** argv, PerftestOptions* out);
int parse_rping_options(int argc, char** argv, RpingOptions* out);
int parse_rc_pingpong_options(int argc, char** argv, RcPingpongOptions* out);
int parse_ops_check_options(int argc, char** argv, OpsCheckOptions* out);
int parse_cm_check_options(int argc, char** argv, CmCheckOptions* out);

}  // namespace rocedp::perf
