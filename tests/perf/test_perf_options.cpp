// rocedp-perf's command lines (apps/perf/options.cpp): the forms the scripts and tests run
// (scripts/bench_*.py, tests/perf, tests/integration, tests/interop) parse to the same test, and
// bad ones give exit status 2.

#include "apps/perf/options.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rocedp::perf {
namespace {

// argv from words; argv[0] is the program.
struct Argv {
  std::vector<std::string> words;
  std::vector<char*> ptrs;
  explicit Argv(std::vector<std::string> w) : words(std::move(w)) {
    words.insert(words.begin(), "rocedp-perf");
    for (auto& s : words) ptrs.push_back(s.data());
  }
  int argc() { return static_cast<int>(ptrs.size()); }
  char** argv() { return ptrs.data(); }
};

int parse(std::vector<std::string> words, Options* o) {
  Argv a(std::move(words));
  return parse_options(a.argc(), a.argv(), o);
}
int parse_perftest(std::vector<std::string> words, PerftestOptions* o) {
  Argv a(std::move(words));
  return parse_perftest_options(a.argc(), a.argv(), o);
}

const std::vector<std::string> kEndpoint = {"--port-devargs", "net_memif0,role=client", "--ip",
                                            "198.18.9.2/24"};
std::vector<std::string> with_endpoint(std::vector<std::string> words) {
  words.insert(words.end(), kEndpoint.begin(), kEndpoint.end());
  return words;
}

TEST(PerfOptions, ClientTakesAHostOnlyWhenTheNextWordLooksLikeOne) {
  Options o;
  ASSERT_EQ(parse(with_endpoint({"--client", "write", "bw"}), &o), -1);
  EXPECT_TRUE(o.client);
  EXPECT_EQ(o.host, "127.0.0.1");
  EXPECT_EQ(o.test.op, Op::kWrite);
  Options p;
  ASSERT_EQ(parse(with_endpoint({"--client", "10.1.2.3", "read", "lat"}), &p), -1);
  EXPECT_EQ(p.host, "10.1.2.3");
  EXPECT_EQ(p.test.op, Op::kRead);
  EXPECT_EQ(p.test.kind, Kind::kLat);
  EXPECT_EQ(p.size, 2u);  // latency's default size
  EXPECT_EQ(p.test.iters, 1000u);
}

TEST(PerfOptions, TestsPerfMemifClientLine) {
  // tests/perf/perf_memif.sh: common options, then a case's words and flags, a repeated --timeout.
  Options o;
  ASSERT_EQ(parse({"--client",
                   "127.0.0.1",
                   "--port-devargs",
                   "net_memif0,role=client,socket=/tmp/m.sock,socket-abstract=no",
                   "--ip",
                   "198.18.9.2/24",
                   "--mac",
                   "02:00:00:00:09:02",
                   "--lcore",
                   "1",
                   "--oob-port",
                   "20007",
                   "--file-prefix",
                   "rdp-perf-1-c1",
                   "--timeout",
                   "40",
                   "--memory-mb",
                   "256",
                   "write",
                   "bw",
                   "-s",
                   "64",
                   "-n",
                   "1000000",
                   "-q",
                   "4",
                   "--verify",
                   "--fault-drop",
                   "10",
                   "--timeout",
                   "5",
                   "--lcore-mode",
                   "0"},
                  &o),
            -1);
  EXPECT_EQ(o.timeout_s, 5u);
  EXPECT_EQ(o.oob_port, 20007);
  EXPECT_EQ(o.endpoint.lcore, 1u);
  EXPECT_EQ(o.endpoint.worker_lcore, 0);
  EXPECT_EQ(o.endpoint.memory_mb, 256u);
  EXPECT_EQ(o.endpoint.mac, "02:00:00:00:09:02");
  EXPECT_EQ(o.endpoint.file_prefix, "rdp-perf-1-c1");
  EXPECT_DOUBLE_EQ(o.endpoint.fault_drop_pct, 10);
  EXPECT_EQ(o.test.size, 64u);
  EXPECT_EQ(o.test.iters, 1000000u);
  EXPECT_EQ(o.test.qps, 4u);
  EXPECT_TRUE(o.test.verify);
}

TEST(PerfOptions, ServerAndRawAndJsonAndVerifySeed) {
  Options s;
  ASSERT_EQ(parse(with_endpoint({"--server", "--oob-port", "18600", "--fault-drop", "2"}), &s), -1);
  EXPECT_TRUE(s.server);
  EXPECT_EQ(s.oob_port, 18600);
  Options r;
  ASSERT_EQ(parse(with_endpoint({"--client", "write", "bw", "-s", "4096", "--raw", "--json"}), &r),
            -1);
  EXPECT_TRUE(r.test.raw);
  EXPECT_TRUE(r.json);
  // --reflector: a --raw lat client whose far end only bounces frames (no --client HOST).
  Options f;
  ASSERT_EQ(
      parse(with_endpoint({"--raw", "--reflector", "02:00:00:00:0b:01", "write", "lat", "-D", "2"}),
            &f),
      -1);
  ASSERT_TRUE(f.reflector.has_value());
  EXPECT_EQ((*f.reflector)[5], 0x01);
  EXPECT_TRUE(f.client);
  EXPECT_FALSE(f.server);
  Options v;
  ASSERT_EQ(parse(with_endpoint({"--client", "write", "bw", "--verify-seed", "7"}), &v), -1);
  EXPECT_TRUE(v.test.verify);
  EXPECT_EQ(v.verify_seed, 7u);
  Options a;
  ASSERT_EQ(parse(with_endpoint({"--client", "write", "bw", "-a", "-n", "5"}), &a), -1);
  EXPECT_EQ(a.test.size, 0u);  // every size
}

TEST(PerfOptions, ConnectAndListen) {
  Options c;
  ASSERT_EQ(
      parse({"--config", "client.yaml", "--connect", "198.18.1.1:7000", "--timeout", "40", "send",
             "lat", "-s", "64", "-n", "2", "--recv-delay-ms", "3000", "--peer-echoes"},
            &c),
      -1);
  EXPECT_TRUE(c.connect);
  EXPECT_FALSE(c.connect_to.ipv6);
  EXPECT_EQ(c.connect_to.ip, 0xC6120101u);
  EXPECT_EQ(c.connect_port, 7000);
  // IPv6: [address]:port.
  Options c6;
  ASSERT_EQ(parse({"--config", "c.yaml", "--connect", "[fd52::34]:7001", "send", "lat"}, &c6), -1);
  EXPECT_TRUE(c6.connect_to.ipv6);
  EXPECT_EQ(c6.connect_to.ip6[0], 0xFD);
  EXPECT_EQ(c6.connect_to.ip6[15], 0x34);
  EXPECT_EQ(c6.connect_to.port, 7001);
  Options bad6;
  EXPECT_EQ(parse({"--config", "c.yaml", "--connect", "[fd52::zz]:7001", "send", "lat"}, &bad6), 2);
  EXPECT_EQ(c.recv_delay_ms, 3000u);
  EXPECT_TRUE(c.peer_echoes);
  EXPECT_EQ(c.test.tx_depth, 64u);  // the echo service's queue depth unless -t says otherwise
  Options t;
  ASSERT_EQ(
      parse({"--config", "c.yaml", "--connect", "198.18.1.1:7000", "send", "bw", "-t", "8"}, &t),
      -1);
  EXPECT_EQ(t.test.tx_depth, 8u);
  EXPECT_EQ(t.test.cq_mod, 100u);  // perftest's default
  Options m;
  ASSERT_EQ(parse(with_endpoint({"--client", "write", "bw", "--cq-mod", "1"}), &m), -1);
  EXPECT_EQ(m.test.cq_mod, 1u);
  Options l;
  ASSERT_EQ(parse(with_endpoint({"--listen", "9000"}), &l), -1);
  EXPECT_TRUE(l.listen);
  EXPECT_EQ(l.listen_port, 9000);
  // One port of a file of several; a port name needs the file.
  Options p;
  ASSERT_EQ(parse({"--config", "both.yaml", "--config-port", "right", "--connect",
                   "198.18.1.1:7000", "send", "lat"},
                  &p),
            -1);
  EXPECT_EQ(p.endpoint.config_port, "right");
  Options np;
  EXPECT_EQ(parse({"--port-devargs", "net_ring0", "--ip", "198.18.0.1/24", "--config-port", "right",
                   "--connect", "198.18.1.1:7000", "send", "lat"},
                  &np),
            2);
}

TEST(PerfOptions, HelpAndVersionExitZeroAndBadLinesExitTwo) {
  Options o;
  EXPECT_EQ(parse({"--help"}, &o), 0);
  EXPECT_EQ(parse({"--version"}, &o), 0);
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"--bogus"},
           {"--client", "write", "bw"},     // no endpoint
           with_endpoint({"write", "bw"}),  // no mode
           with_endpoint({"--server", "--client"}),
           with_endpoint({"--client", "write", "fast"}),
           with_endpoint({"--client", "write", "bw", "-q", "0"}),
           with_endpoint({"--client", "write", "bw", "--cq-mod", "0"}),
           with_endpoint({"--client", "write", "lat", "-q", "2"}),
           with_endpoint({"--client", "write", "bw", "-s", "0"}),
           with_endpoint({"--client", "write", "bw", "--verify", "-D", "3"}),
           with_endpoint({"--client", "write", "bw", "--verify", "-a"}),
           // --verify: a slot per message, within 1 GiB (4 x 1,000,000 x 4096 is 16 GB)
           with_endpoint(
               {"--client", "write", "bw", "--verify", "-s", "4096", "-n", "1000000", "-q", "4"}),
           with_endpoint({"--listen", "0"}),
           with_endpoint({"--listen", "9000", "--raw"}),
           // --reflector: a MAC, --raw, lat, and no other peer
           with_endpoint({"--raw", "--reflector", "02:00:00:00:0b", "write", "lat"}),
           with_endpoint({"--reflector", "02:00:00:00:0b:01", "write", "lat"}),
           with_endpoint({"--raw", "--reflector", "02:00:00:00:0b:01", "write", "bw"}),
           with_endpoint({"--server", "--raw", "--reflector", "02:00:00:00:0b:01", "write", "lat"}),
           with_endpoint({"--connect", "198.18.1.1"}),
           with_endpoint({"--connect", "198.18.1:7000"}),
           with_endpoint({"--server", "--fault-drop", "101"}),
           with_endpoint({"--server", "--log-level", "loud"}),
           with_endpoint({"--server", "--oob-port", "70000"}),
       }) {
    Options b;
    EXPECT_EQ(parse(bad, &b), 2) << bad[0] << " " << (bad.size() > 1 ? bad[1] : "");
  }
}

TEST(PerfOptions, PerftestGrammarAsTheInteropTestsRunIt) {
  Argv probe({"--port-devargs", "x", "--perftest", "write", "bw"});
  EXPECT_TRUE(wants_perftest(probe.argc(), probe.argv()));
  PerftestOptions s;
  ASSERT_EQ(parse_perftest(
                with_endpoint({"--perftest", "--file-prefix", "p", "--timeout", "90", "write", "bw",
                               "--dump-recv", "/tmp/r.bin", "-n", "300", "-s", "65536", "-F"}),
                &s),
            -1);
  EXPECT_TRUE(s.server);
  EXPECT_EQ(s.timeout_s, 90u);
  EXPECT_EQ(s.dump_file, "/tmp/r.bin");
  EXPECT_EQ(s.tx_depth, 128u);
  PerftestOptions c;
  ASSERT_EQ(
      parse_perftest(with_endpoint({"--perftest", "198.18.0.50", "read", "lat", "-R", "-p", "18600",
                                    "-d", "rxe0", "-x", "1", "-i", "1", "-m", "1024", "-c", "RC"}),
                     &c),
      -1);
  EXPECT_FALSE(c.server);
  EXPECT_EQ(c.host, "198.18.0.50");
  EXPECT_TRUE(c.rdma_cm);
  EXPECT_EQ(c.port, 18600);
  EXPECT_EQ(c.op, Op::kRead);
  EXPECT_EQ(c.kind, Kind::kLat);
  EXPECT_EQ(c.size, 2u);
  EXPECT_EQ(c.tx_depth, 1u);
  EXPECT_EQ(c.mtu, 1024u);
  EXPECT_EQ(s.mtu, 0u);  // no -m: the port's
  PerftestOptions b;
  EXPECT_EQ(parse_perftest(with_endpoint({"--perftest", "write"}), &b), 2);  // no bw|lat
  EXPECT_EQ(parse_perftest(with_endpoint({"--perftest", "h", "write", "bw"}), &b), 2);
  EXPECT_EQ(parse_perftest(with_endpoint({"--perftest", "1.2.3.4", "5.6.7.8", "write", "bw"}), &b),
            2);
  EXPECT_EQ(parse_perftest(with_endpoint({"--perftest", "send", "bw", "-a"}), &b), 2);
  EXPECT_EQ(parse_perftest({"--perftest", "--help"}, &b), 0);
}

// perftest's -c and -m are not ignored: -c names RC or the line is refused, naming what rocedp
// has; -m is an InfiniBand MTU (what perftest_mode.cpp offers in the MTU exchange).
TEST(PerfOptions, PerftestConnectionTypeIsRcAndMtuIsAnIbMtu) {
  PerftestOptions o;
  ASSERT_EQ(
      parse_perftest(
          with_endpoint({"--perftest", "write", "bw", "--connection", "RC", "-m", "512"}), &o),
      -1);
  EXPECT_EQ(o.mtu, 512u);
  const auto refused = [](std::vector<std::string> words) {
    PerftestOptions r;
    testing::internal::CaptureStderr();
    const int status = parse_perftest(with_endpoint(std::move(words)), &r);
    const std::string err = testing::internal::GetCapturedStderr();
    return std::make_pair(status, err);
  };
  for (const char* type : {"UC", "UD", "XRC", "DC", "SRD"}) {
    const auto [status, err] = refused({"--perftest", "send", "bw", "-c", type});
    EXPECT_EQ(status, 2) << type;
    EXPECT_NE(err.find(std::string("-c ") + type + ": rocedp has RC connections only"),
              std::string::npos)
        << err;
  }
  const auto [bad_type, bad_type_err] = refused({"--perftest", "send", "bw", "-c", "rc"});
  EXPECT_EQ(bad_type, 2);
  EXPECT_NE(bad_type_err.find("-c must be RC, UC, UD, XRC, DC or SRD"), std::string::npos)
      << bad_type_err;
  for (const char* mtu : {"0", "1500", "8192", "300"}) {
    const auto [status, err] = refused({"--perftest", "write", "bw", "-m", mtu});
    EXPECT_EQ(status, 2) << mtu;
    EXPECT_NE(err.find("-m must be 256, 512, 1024, 2048 or 4096"), std::string::npos) << err;
  }
}

int parse_rping(std::vector<std::string> words, RpingOptions* o) {
  Argv a(std::move(words));
  return parse_rping_options(a.argc(), a.argv(), o);
}

TEST(PerfOptions, RpingGrammarAsRpingsOwnFlags) {
  Argv probe({"--port-devargs", "x", "--rping", "-s"});
  EXPECT_TRUE(wants_rping(probe.argc(), probe.argv()));
  EXPECT_FALSE(wants_perftest(probe.argc(), probe.argv()));
  RpingOptions c;
  ASSERT_EQ(parse_rping(with_endpoint({"--rping", "-c", "-a", "198.18.0.51", "-C", "10", "-S",
                                       "3000", "-V", "-p", "7000"}),
                        &c),
            -1);
  EXPECT_FALSE(c.server);
  EXPECT_EQ(c.addr.ip, 0xC6120033u);  // 198.18.0.51
  EXPECT_EQ(c.count, 10u);
  RpingOptions c6;
  ASSERT_EQ(parse_rping(with_endpoint({"--rping", "-c", "-a", "fd52::34"}), &c6), -1);
  EXPECT_TRUE(c6.addr.ipv6);
  EXPECT_EQ(c6.addr.ip6[15], 0x34);
  EXPECT_EQ(c.size, 3000u);
  EXPECT_TRUE(c.validate);
  EXPECT_EQ(c.port, 7000);
  RpingOptions s;
  ASSERT_EQ(parse_rping(with_endpoint({"--rping", "-s", "-v"}), &s), -1);
  EXPECT_TRUE(s.server);
  EXPECT_EQ(s.port, 7174);  // rping's default
  EXPECT_EQ(s.size, 64u);
  RpingOptions b;
  EXPECT_EQ(parse_rping(with_endpoint({"--rping"}), &b), 2);              // no side
  EXPECT_EQ(parse_rping(with_endpoint({"--rping", "-s", "-c"}), &b), 2);  // both sides
  EXPECT_EQ(parse_rping(with_endpoint({"--rping", "-c"}), &b), 2);        // no -a
  EXPECT_EQ(parse_rping(with_endpoint({"--rping", "-c", "-a", "host"}), &b), 2);
  EXPECT_EQ(parse_rping(with_endpoint({"--rping", "-s", "-S", "24"}), &b), 2);  // rping's bounds
  EXPECT_EQ(parse_rping(with_endpoint({"--rping", "-s", "-S", "65536"}), &b), 2);
  // 802.1Q on the endpoint's port (the interop VLAN cases): an ID, and a priority only with one.
  RpingOptions v;
  ASSERT_EQ(parse_rping(with_endpoint({"--rping", "-s", "--vlan", "7", "--vlan-priority", "3",
                                       "--dscp", "26"}),
                        &v),
            -1);
  EXPECT_EQ(v.endpoint.vlan, 7);
  EXPECT_EQ(v.endpoint.vlan_priority, 3u);
  EXPECT_EQ(v.endpoint.dscp, 26u);
  EXPECT_EQ(parse_rping(with_endpoint({"--rping", "-s", "--dscp", "64"}), &b), 2);
  // ECN: off and CNPs at DSCP 48 unless asked.
  EXPECT_FALSE(v.endpoint.ecn);
  EXPECT_EQ(v.endpoint.cnp_dscp, 48u);
  RpingOptions e;
  ASSERT_EQ(parse_rping(with_endpoint({"--rping", "-s", "--ecn", "--cnp-dscp", "40"}), &e), -1);
  EXPECT_TRUE(e.endpoint.ecn);
  EXPECT_EQ(e.endpoint.cnp_dscp, 40u);
  EXPECT_EQ(parse_rping(with_endpoint({"--rping", "-s", "--cnp-dscp", "64"}), &b), 2);
  // DCQCN's parameters, by their ports[].dcqcn keys, checked as the YAML form is.
  EXPECT_EQ(e.endpoint.dcqcn, config::DcqcnConfig{});
  RpingOptions d;
  ASSERT_EQ(parse_rping(with_endpoint({"--rping", "-s", "--dcqcn", "cnp_interval_us=50", "--dcqcn",
                                       "min_rate_mbps=100", "--ecn"}),
                        &d),
            -1);
  EXPECT_EQ(d.endpoint.dcqcn.cnp_interval_us, 50u);
  EXPECT_EQ(d.endpoint.dcqcn.min_rate_mbps, 100u);
  EXPECT_EQ(d.endpoint.dcqcn.time_reset_us, 300u);
  EXPECT_TRUE(d.endpoint.ecn);
  for (const char* bad : {"g=5", "alpha_keep=1024", "alpha_keep", "alpha_keep=", "alpha_keep=-1",
                          "alpha_keep=5x", "byte_reset=63"}) {
    RpingOptions x;
    EXPECT_EQ(parse_rping(with_endpoint({"--rping", "-s", "--dcqcn", bad}), &x), 2) << bad;
  }
  EXPECT_EQ(s.endpoint.vlan, 0);  // untagged unless asked
  EXPECT_EQ(parse_rping(with_endpoint({"--rping", "-s", "--vlan", "0"}), &b), 2);
  EXPECT_EQ(parse_rping(with_endpoint({"--rping", "-s", "--vlan", "4095"}), &b), 2);
  EXPECT_EQ(
      parse_rping(with_endpoint({"--rping", "-s", "--vlan", "7", "--vlan-priority", "8"}), &b), 2);
  RpingOptions pt;  // a priority without a VLAN: priority-tagged frames
  ASSERT_EQ(parse_rping(with_endpoint({"--rping", "-s", "--vlan-priority", "3"}), &pt), -1);
  EXPECT_EQ(pt.endpoint.vlan, 0);
  EXPECT_EQ(pt.endpoint.vlan_priority, 3u);
  RpingOptions fresh;
  EXPECT_EQ(parse_rping({"--rping", "-s"}, &fresh), 2);  // no endpoint
  EXPECT_EQ(parse_rping({"--rping", "--help"}, &b), 0);
}

int parse_ops_check(std::vector<std::string> words, OpsCheckOptions* o) {
  Argv a(std::move(words));
  return parse_ops_check_options(a.argc(), a.argv(), o);
}

TEST(PerfOptions, OpsCheckGrammarNamesItsSideAndTheServersAddress) {
  Argv probe({"--port-devargs", "x", "--ops-check", "-s"});
  EXPECT_TRUE(wants_ops_check(probe.argc(), probe.argv()));
  EXPECT_FALSE(wants_rping(probe.argc(), probe.argv()));
  OpsCheckOptions c;
  ASSERT_EQ(parse_ops_check(with_endpoint({"--ops-check", "-c", "-a", "198.18.0.51", "-p", "7000",
                                           "--timeout", "20"}),
                            &c),
            -1);
  EXPECT_FALSE(c.server);
  EXPECT_EQ(c.addr.ip, 0xC6120033u);  // 198.18.0.51
  EXPECT_EQ(c.port, 7000);
  EXPECT_EQ(c.timeout_s, 20u);
  OpsCheckOptions s;
  ASSERT_EQ(parse_ops_check(with_endpoint({"--ops-check", "-s"}), &s), -1);
  EXPECT_TRUE(s.server);
  EXPECT_EQ(s.port, 7475);  // ops_check_peer's default
  EXPECT_FALSE(s.fast_register);
  ASSERT_EQ(parse_ops_check(with_endpoint({"--ops-check", "-s", "--fast-register"}), &s), -1);
  EXPECT_TRUE(s.fast_register);
  EXPECT_FALSE(s.lossy);
  ASSERT_EQ(parse_ops_check(with_endpoint({"--ops-check", "-s", "--lossy"}), &s), -1);
  EXPECT_TRUE(s.lossy);  // either side: the server's go-ahead, the client's refused WRITE
  OpsCheckOptions b;
  EXPECT_EQ(parse_ops_check(with_endpoint({"--ops-check"}), &b), 2);              // no side
  EXPECT_EQ(parse_ops_check(with_endpoint({"--ops-check", "-s", "-c"}), &b), 2);  // both sides
  EXPECT_EQ(parse_ops_check(with_endpoint({"--ops-check", "-c"}), &b), 2);        // no -a
  EXPECT_EQ(parse_ops_check(with_endpoint({"--ops-check", "-c", "-a", "host"}), &b), 2);
  EXPECT_EQ(parse_ops_check(with_endpoint({"--ops-check", "-s", "-C", "3"}), &b), 2);  // no -C
  EXPECT_EQ(parse_ops_check(
                with_endpoint({"--ops-check", "-c", "-a", "198.18.0.51", "--fast-register"}), &b),
            2);  // the server's choice
  OpsCheckOptions fresh;
  EXPECT_EQ(parse_ops_check({"--ops-check", "-s"}, &fresh), 2);  // no endpoint
  EXPECT_EQ(parse_ops_check({"--ops-check", "--help"}, &b), 0);
}

int parse_cm_check(std::vector<std::string> words, CmCheckOptions* o) {
  Argv a(std::move(words));
  return parse_cm_check_options(a.argc(), a.argv(), o);
}

TEST(PerfOptions, CmCheckGrammarTakesTheClientsExpectationAndTheServersAnswer) {
  Argv probe({"--port-devargs", "x", "--cm-check", "-s", "--answer", "reject"});
  EXPECT_TRUE(wants_cm_check(probe.argc(), probe.argv()));
  EXPECT_FALSE(wants_ops_check(probe.argc(), probe.argv()));
  CmCheckOptions c;
  ASSERT_EQ(parse_cm_check(with_endpoint({"--cm-check", "-c", "-a", "198.18.0.51", "-p", "7478",
                                          "--expect", "cancelled", "--wait-ms", "1000"}),
                           &c),
            -1);
  EXPECT_FALSE(c.server);
  EXPECT_EQ(c.addr.ip, 0xC6120033u);  // 198.18.0.51
  EXPECT_EQ(c.port, 7478);
  EXPECT_EQ(c.expect, CmCheckOptions::Expect::kCancelled);
  EXPECT_EQ(c.wait_ms, 1000u);
  ASSERT_EQ(parse_cm_check(with_endpoint({"--cm-check", "-c", "-a", "198.18.0.51", "--expect",
                                          "refused", "--peer-data", "linux-rejects"}),
                           &c),
            -1);
  EXPECT_EQ(c.expect, CmCheckOptions::Expect::kRefused);
  EXPECT_EQ(c.peer_data, "linux-rejects");
  CmCheckOptions s;
  ASSERT_EQ(parse_cm_check(with_endpoint({"--cm-check", "-s", "--answer", "abandon"}), &s), -1);
  EXPECT_TRUE(s.server);
  EXPECT_EQ(s.port, 7476);  // cm_check_peer's default
  EXPECT_EQ(s.answer, CmCheckOptions::Answer::kAbandon);
  EXPECT_EQ(s.wait_ms, 2000u);
  ASSERT_EQ(parse_cm_check(
                with_endpoint({"--cm-check", "-s", "--answer", "late", "--wait-ms", "9000"}), &s),
            -1);
  EXPECT_EQ(s.answer, CmCheckOptions::Answer::kLate);
  EXPECT_EQ(s.wait_ms, 9000u);
  EXPECT_EQ(s.requests, 1u);
  ASSERT_EQ(parse_cm_check(
                with_endpoint({"--cm-check", "-s", "--answer", "reject", "--requests", "2"}), &s),
            -1);
  EXPECT_EQ(s.requests, 2u);  // the REQ sent again after a lost REJ
  CmCheckOptions k;
  ASSERT_EQ(
      parse_cm_check(
          with_endpoint({"--cm-check", "-c", "-a", "198.18.0.51", "--expect", "connected"}), &k),
      -1);
  EXPECT_EQ(k.expect, CmCheckOptions::Expect::kConnected);
  CmCheckOptions b;
  EXPECT_EQ(parse_cm_check(with_endpoint({"--cm-check", "--expect", "refused"}), &b), 2);  // side
  EXPECT_EQ(parse_cm_check(with_endpoint({"--cm-check", "-c", "--expect", "refused"}), &b),
            2);  // no -a
  EXPECT_EQ(parse_cm_check(with_endpoint({"--cm-check", "-c", "-a", "198.18.0.51"}), &b),
            2);  // no --expect
  EXPECT_EQ(
      parse_cm_check(
          with_endpoint({"--cm-check", "-c", "-a", "198.18.0.51", "--expect", "accepted"}), &b),
      2);
  EXPECT_EQ(parse_cm_check(with_endpoint({"--cm-check", "-c", "-a", "198.18.0.51", "--expect",
                                          "aborted", "--peer-data", "x"}),
                           &b),
            2);  // only a REJ's data is checked
  EXPECT_EQ(parse_cm_check(with_endpoint({"--cm-check", "-c", "-a", "198.18.0.51", "--expect",
                                          "refused", "--answer", "reject"}),
                           &b),
            2);                                                           // the server's
  EXPECT_EQ(parse_cm_check(with_endpoint({"--cm-check", "-s"}), &b), 2);  // no --answer
  EXPECT_EQ(parse_cm_check(
                with_endpoint({"--cm-check", "-s", "--answer", "late", "--requests", "2"}), &b),
            2);  // only rejects are answered again
  EXPECT_EQ(parse_cm_check(
                with_endpoint({"--cm-check", "-s", "--answer", "reject", "--requests", "0"}), &b),
            2);
  EXPECT_EQ(parse_cm_check(with_endpoint({"--cm-check", "-c", "-a", "198.18.0.51", "--expect",
                                          "refused", "--requests", "2"}),
                           &b),
            2);  // the server's
  EXPECT_EQ(
      parse_cm_check(
          with_endpoint({"--cm-check", "-s", "--answer", "reject", "--expect", "refused"}), &b),
      2);  // the client's
  EXPECT_EQ(
      parse_cm_check(
          with_endpoint({"--cm-check", "-s", "--answer", "silent", "--wait-ms", "60000"}), &b),
      2);  // not below --timeout
  EXPECT_EQ(parse_cm_check(
                with_endpoint({"--cm-check", "-s", "--answer", "silent", "--wait-ms", "0"}), &b),
            2);
  CmCheckOptions fresh;
  EXPECT_EQ(parse_cm_check({"--cm-check", "-s", "--answer", "reject"}, &fresh), 2);  // endpoint
  EXPECT_EQ(parse_cm_check({"--cm-check", "--help"}, &b), 0);
}

int parse_rc_pingpong(std::vector<std::string> words, RcPingpongOptions* o) {
  Argv a(std::move(words));
  return parse_rc_pingpong_options(a.argc(), a.argv(), o);
}

TEST(PerfOptions, RcPingpongGrammarAsTheExamplesOwnFlags) {
  Argv probe({"--rc-pingpong", "198.18.0.35"});
  EXPECT_TRUE(wants_rc_pingpong(probe.argc(), probe.argv()));
  EXPECT_FALSE(wants_rping(probe.argc(), probe.argv()));
  EXPECT_FALSE(wants_perftest(probe.argc(), probe.argv()));
  RcPingpongOptions c;
  ASSERT_EQ(parse_rc_pingpong(
                with_endpoint({"--rc-pingpong", "-d", "rxe0", "-g", "1", "-n", "10", "-s", "3000",
                               "-m", "512", "-r", "20", "-p", "9000", "198.18.0.35", "--verify"}),
                &c),
            -1);
  EXPECT_EQ(c.host, "198.18.0.35");
  EXPECT_EQ(c.iters, 10u);
  EXPECT_EQ(c.size, 3000u);
  EXPECT_EQ(c.mtu, 512u);
  EXPECT_EQ(c.rx_depth, 20u);
  EXPECT_EQ(c.port, 9000);
  EXPECT_TRUE(c.verify);
  RcPingpongOptions s;
  ASSERT_EQ(parse_rc_pingpong(with_endpoint({"--rc-pingpong", "-e"}), &s), -1);
  EXPECT_TRUE(s.host.empty());  // the server
  // The example's defaults.
  EXPECT_EQ(s.port, 18515);
  EXPECT_EQ(s.size, 4096u);
  EXPECT_EQ(s.mtu, 1024u);
  EXPECT_EQ(s.rx_depth, 500u);
  EXPECT_EQ(s.iters, 1000u);
  RcPingpongOptions b;
  EXPECT_EQ(parse_rc_pingpong(with_endpoint({"--rc-pingpong", "host"}), &b), 2);
  EXPECT_EQ(parse_rc_pingpong(with_endpoint({"--rc-pingpong", "1.2.3.4", "5.6.7.8"}), &b), 2);
  EXPECT_EQ(parse_rc_pingpong(with_endpoint({"--rc-pingpong", "-m", "1500"}), &b), 2);
  EXPECT_EQ(parse_rc_pingpong(with_endpoint({"--rc-pingpong", "-s", "0"}), &b), 2);
  EXPECT_EQ(parse_rc_pingpong(with_endpoint({"--rc-pingpong", "-r", "1"}), &b), 2);
  EXPECT_EQ(parse_rc_pingpong(with_endpoint({"--rc-pingpong", "-n", "0"}), &b), 2);
  EXPECT_EQ(parse_rc_pingpong(with_endpoint({"--rc-pingpong", "-o"}), &b), 2);  // no ODP
  RcPingpongOptions fresh;
  EXPECT_EQ(parse_rc_pingpong({"--rc-pingpong"}, &fresh), 2);  // no endpoint
  EXPECT_EQ(parse_rc_pingpong({"--rc-pingpong", "--help"}, &b), 0);
}

TEST(PerfOptions, PerftestAtomicsMoveEightBytesOfTheNamedType) {
  PerftestOptions f;
  ASSERT_EQ(parse_perftest(with_endpoint({"--perftest", "atomic", "bw", "-s", "4096"}), &f), -1);
  EXPECT_EQ(f.op, Op::kAtomic);
  EXPECT_EQ(f.size, 8u);     // as perftest: whatever -s says
  EXPECT_FALSE(f.cmp_swap);  // FETCH_AND_ADD, perftest's default
  PerftestOptions c;
  ASSERT_EQ(
      parse_perftest(
          with_endpoint({"--perftest", "198.18.0.33", "atomic", "lat", "-A", "CMP_AND_SWAP"}), &c),
      -1);
  EXPECT_TRUE(c.cmp_swap);
  EXPECT_EQ(c.kind, Kind::kLat);
  EXPECT_EQ(c.size, 8u);
  EXPECT_STREQ(op_name(Op::kAtomic), "atomic");
  PerftestOptions b;
  EXPECT_EQ(parse_perftest(with_endpoint({"--perftest", "atomic", "bw", "-A", "SWAP"}), &b), 2);
  EXPECT_EQ(parse_perftest(with_endpoint({"--perftest", "write", "bw", "-A", "FETCH_AND_ADD"}), &b),
            2);  // -A names an atomic type: only atomic tests take it
  EXPECT_EQ(parse_perftest(with_endpoint({"--perftest", "atomic", "bw", "-a"}), &b), 2);
  PerftestOptions srq;
  ASSERT_EQ(
      parse_perftest(with_endpoint({"--perftest", "send", "bw", "-q", "4", "--use-srq"}), &srq),
      -1);
  EXPECT_TRUE(srq.use_srq);
  EXPECT_EQ(srq.qps, 4u);
  EXPECT_EQ(parse_perftest(with_endpoint({"--perftest", "write", "bw", "--use-srq"}), &b), 2);
}

}  // namespace
}  // namespace rocedp::perf
