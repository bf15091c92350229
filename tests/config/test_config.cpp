// config/: every rejection class names file, line, column, key path and reason; valid documents
// produce the expected values; the shipped examples parse.

#include "config/config.hpp"
#include "config/config_keys.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace rocedp::config {
namespace {

using ::testing::HasSubstr;

constexpr const char* kSource = "test.yaml";

// Parses `yaml`, which must be rejected with, among its problems (a misspelt required key is also
// a missing one), one at line:column on `key` with a reason containing `reason`; what() holds
// its "file:line:column: key: reason" line.
void expect_error(const std::string& yaml, int line, int column, const std::string& key,
                  const std::string& reason) {
  SCOPED_TRACE(yaml);
  try {
    parse(yaml, kSource);
    ADD_FAILURE() << "accepted, expected: " << key << ": " << reason;
  } catch (const ConfigError& e) {
    const auto& all = e.problems();
    ASSERT_FALSE(all.empty());
    EXPECT_EQ(e.key(), all[0].key);
    EXPECT_EQ(e.line(), all[0].line);
    auto it =
        std::find_if(all.begin(), all.end(), [&](const ConfigProblem& p) { return p.key == key; });
    ASSERT_NE(it, all.end()) << "no problem on " << key << " in:\n" << e.what();
    EXPECT_EQ(it->file, kSource);
    EXPECT_EQ(it->line, line) << e.what();
    EXPECT_EQ(it->column, column) << e.what();
    EXPECT_THAT(it->reason, HasSubstr(reason)) << e.what();
    std::string prefix = std::string(kSource) + ":" + std::to_string(line) + ":" +
                         std::to_string(column) + ": " + (key.empty() ? "" : key + ": ");
    EXPECT_EQ(it->text(), prefix + it->reason);
    EXPECT_THAT(std::string(e.what()), HasSubstr(it->text()));
  }
}

// The keys of every problem `yaml` is rejected with, in the order reported (none if accepted).
std::vector<std::string> problem_keys(const std::string& yaml) {
  std::vector<std::string> keys;
  try {
    parse(yaml, kSource);
    ADD_FAILURE() << "accepted:\n" << yaml;
  } catch (const ConfigError& e) {
    for (const ConfigProblem& p : e.problems()) keys.push_back(p.key);
  }
  return keys;
}

// A valid one-port document of 4 lines; tests append a section from line 5 on.
const std::string kOnePort =
    "ports:\n"
    "  - name: p0\n"
    "    devargs: net_tap0\n"
    "    address: 198.18.0.1/24\n";

// A RAII temporary directory, removed also when an assertion fails.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "rocedp-config-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// --- valid documents ------------------------------------------------------------------------

TEST(ConfigParse, FullDocumentGivesEveryValue) {
  const std::string yaml = R"(eal:
  lcores: [0, 2, 3, 5]
  main_lcore: 0
  main_lcore_cpu: 3
  memory_mb: 512
  hugepages: true
  file_prefix: rdp-a
  extra_args: ["--log-level=lib.eal:debug", "--in-memory"]
ports:
  - name: left
    devargs: net_memif0,role=server,socket=/tmp/a.sock
    mac: "02:AA:bb:00:00:01"
    address: 198.18.1.1/24
    mtu: 9000
    vlan: 4094
    vlan_priority: 3
    dscp: 46
    ecn: true
    cnp_dscp: 40
    dcqcn: {cnp_interval_us: 50, alpha_keep: 1008, byte_reset: 65536, first_cnp_rate_mbps: 2000}
    neighbours:
      - {ip: 198.18.1.2, mac: "02:00:00:00:00:02"}
      - ip: 198.18.1.3
        mac: "02:00:00:00:00:03"
    fault:
      direction: both
      drop_pct: 1.5
      duplicate_pct: 2
      corrupt_pct: 0.25
      ce_pct: 12.5
      reorder_window: 16
      reorder_pct: 50
      delay_us: 100
      seed: 18446744073709551615
  - name: right
    devargs: 0000:3b:00.0
    address: 10.0.0.1/31
dataplane:
  lcores: [2, 3]
  burst_size: 64
  rx_ring_size: 2048
  tx_ring_size: 512
  control_ring_size: 65536
  mbuf_count: 65535
  mbuf_cache_size: 512
control:
  lcore: 5
  arp_retry_ms: 50
  arp_retries: 3
  neighbour_expiry_s: 60
telemetry:
  enabled: false
  stats_interval_ms: 1000
logging:
  level: debug
  file: /var/log/rocedpd.log
limits:
  max_qps: 1000
  max_cqs: 2000
  max_srqs: 3
  max_pds: 4
  max_mrs: 5
  max_cq_depth: 6
  max_qp_depth: 7
  max_srq_depth: 8
  max_sge: 3
  max_inline_data: 0
  max_read_limit: 255
  max_registration_size: 1099511627776
  max_transfer_length: 2147483648
  frmr_page_count: 16
  max_listeners: 11
  max_shared_endpoints: 12
  max_connectors: 13
)";
  Config c = parse(yaml, "full.yaml");
  EXPECT_EQ(c.source, "full.yaml");
  EXPECT_EQ(c.eal.lcores, (std::vector<unsigned>{0, 2, 3, 5}));
  EXPECT_EQ(c.eal.main_lcore, 0u);
  EXPECT_EQ(c.eal.main_lcore_cpu, 3u);
  EXPECT_EQ(c.eal.memory_mb, 512u);
  EXPECT_TRUE(c.eal.hugepages);
  EXPECT_EQ(c.eal.file_prefix, "rdp-a");
  EXPECT_EQ(c.eal.extra_args,
            (std::vector<std::string>{"--log-level=lib.eal:debug", "--in-memory"}));

  ASSERT_EQ(c.ports.size(), 2u);
  const PortConfig& left = c.ports[0];
  EXPECT_EQ(left.name, "left");
  EXPECT_EQ(left.devargs, "net_memif0,role=server,socket=/tmp/a.sock");
  ASSERT_TRUE(left.mac.has_value());
  EXPECT_EQ(left.mac->bytes, (std::array<uint8_t, 6>{0x02, 0xaa, 0xbb, 0, 0, 1}));
  EXPECT_EQ(left.address.value, 0xc6120101u);
  EXPECT_EQ(left.prefix_len, 24);
  EXPECT_EQ(left.mtu, 9000);
  EXPECT_EQ(left.vlan, 4094);
  EXPECT_EQ(left.vlan_priority, 3);
  EXPECT_EQ(left.dscp, 46);
  EXPECT_TRUE(left.ecn);
  EXPECT_EQ(left.cnp_dscp, 40);
  config::DcqcnConfig dcqcn;  // the keys given, the defaults for the rest
  dcqcn.cnp_interval_us = 50;
  dcqcn.alpha_keep = 1008;
  dcqcn.byte_reset = 65536;
  dcqcn.first_cnp_rate_mbps = 2000;
  EXPECT_EQ(left.dcqcn, dcqcn);
  EXPECT_EQ(left.dcqcn.time_reset_us, 300u);
  ASSERT_EQ(left.neighbours.size(), 2u);
  EXPECT_EQ(left.neighbours[0].ip.value, 0xc6120102u);
  EXPECT_EQ(format_mac(left.neighbours[0].mac), "02:00:00:00:00:02");
  EXPECT_EQ(left.neighbours[1].ip.value, 0xc6120103u);
  EXPECT_EQ(format_mac(left.neighbours[1].mac), "02:00:00:00:00:03");
  EXPECT_EQ(left.fault.direction, FaultConfig::Direction::kBoth);
  EXPECT_DOUBLE_EQ(left.fault.drop_pct, 1.5);
  EXPECT_DOUBLE_EQ(left.fault.duplicate_pct, 2);
  EXPECT_DOUBLE_EQ(left.fault.corrupt_pct, 0.25);
  EXPECT_DOUBLE_EQ(left.fault.ce_pct, 12.5);
  EXPECT_EQ(left.fault.reorder_window, 16u);
  EXPECT_DOUBLE_EQ(left.fault.reorder_pct, 50);
  EXPECT_EQ(left.fault.delay_us, 100u);
  EXPECT_EQ(left.fault.seed, 18446744073709551615ull);
  EXPECT_TRUE(left.fault.enabled());

  const PortConfig& right = c.ports[1];
  EXPECT_EQ(right.devargs, "0000:3b:00.0");
  EXPECT_FALSE(right.mac.has_value());
  EXPECT_EQ(right.address.value, 0x0a000001u);
  EXPECT_EQ(right.prefix_len, 31);
  EXPECT_EQ(right.mtu, 1500);
  EXPECT_EQ(right.vlan, 0);  // untagged
  EXPECT_EQ(right.vlan_priority, 0);
  EXPECT_EQ(right.dscp, 0);  // unmarked
  EXPECT_FALSE(right.ecn);
  EXPECT_EQ(right.cnp_dscp, 48);
  EXPECT_FALSE(right.fault.enabled());

  EXPECT_EQ(c.dataplane.lcores, (std::vector<unsigned>{2, 3}));
  EXPECT_EQ(c.dataplane.burst_size, 64);
  EXPECT_EQ(c.dataplane.rx_ring_size, 2048);
  EXPECT_EQ(c.dataplane.tx_ring_size, 512);
  EXPECT_EQ(c.dataplane.control_ring_size, 65536u);
  EXPECT_EQ(c.dataplane.mbuf_count, 65535u);
  EXPECT_EQ(c.dataplane.mbuf_cache_size, 512u);
  EXPECT_EQ(c.control.lcore, std::optional<unsigned>(5));
  EXPECT_EQ(c.control.arp_retry_ms, 50u);
  EXPECT_EQ(c.control.arp_retries, 3u);
  EXPECT_EQ(c.control.neighbour_expiry_s, 60u);
  EXPECT_FALSE(c.telemetry.enabled);
  EXPECT_EQ(c.telemetry.stats_interval_ms, 1000u);
  EXPECT_EQ(c.logging.level, LoggingConfig::Level::kDebug);
  EXPECT_EQ(c.logging.file, std::optional<std::string>("/var/log/rocedpd.log"));
  const LimitsConfig& l = c.limits;
  EXPECT_EQ(l.max_qps, 1000u);
  EXPECT_EQ(l.max_cqs, 2000u);
  EXPECT_EQ(l.max_srqs, 3u);
  EXPECT_EQ(l.max_pds, 4u);
  EXPECT_EQ(l.max_mrs, 5u);
  EXPECT_EQ(l.max_cq_depth, 6u);
  EXPECT_EQ(l.max_qp_depth, 7u);
  EXPECT_EQ(l.max_srq_depth, 8u);
  EXPECT_EQ(l.max_sge, 3u);
  EXPECT_EQ(l.max_inline_data, 0u);
  EXPECT_EQ(l.max_read_limit, 255u);
  EXPECT_EQ(l.max_registration_size, 1099511627776ull);
  EXPECT_EQ(l.max_transfer_length, 2147483648u);
  EXPECT_EQ(l.frmr_page_count, 16u);
  EXPECT_EQ(l.max_listeners, 11u);
  EXPECT_EQ(l.max_shared_endpoints, 12u);
  EXPECT_EQ(l.max_connectors, 13u);
}

// A priority without a VLAN: the port sends priority-tagged frames (VLAN ID 0).
TEST(ConfigParse, APriorityWithoutAVlanIsPriorityTagging) {
  Config c = parse(kOnePort + "    vlan_priority: 3\n", kSource);
  ASSERT_EQ(c.ports.size(), 1u);
  EXPECT_EQ(c.ports[0].vlan, 0);
  EXPECT_EQ(c.ports[0].vlan_priority, 3);
}

TEST(ConfigParse, OmittedSectionsTakeTheDefaults) {
  Config c = parse(kOnePort, kSource);
  const Config d;  // the defaults config.hpp declares
  EXPECT_EQ(c.eal.lcores, d.eal.lcores);
  EXPECT_EQ(c.eal.main_lcore, d.eal.main_lcore);
  EXPECT_EQ(c.eal.memory_mb, 256u);
  EXPECT_FALSE(c.eal.hugepages);
  EXPECT_EQ(c.eal.file_prefix, "rocedp");
  EXPECT_TRUE(c.eal.extra_args.empty());
  ASSERT_EQ(c.ports.size(), 1u);
  EXPECT_FALSE(c.ports[0].mac.has_value());
  EXPECT_EQ(c.ports[0].mtu, 1500);
  EXPECT_TRUE(c.ports[0].neighbours.empty());
  EXPECT_FALSE(c.ports[0].fault.enabled());
  EXPECT_EQ(c.ports[0].fault.seed, 1u);
  EXPECT_EQ(c.dataplane.lcores, std::vector<unsigned>{1});
  EXPECT_EQ(c.dataplane.burst_size, 32);
  EXPECT_EQ(c.dataplane.rx_ring_size, 1024);
  EXPECT_EQ(c.dataplane.tx_ring_size, 1024);
  EXPECT_EQ(c.dataplane.control_ring_size, 1024u);
  EXPECT_EQ(c.dataplane.mbuf_count, 16383u);
  EXPECT_EQ(c.dataplane.mbuf_cache_size, 256u);
  EXPECT_FALSE(c.control.lcore.has_value());
  EXPECT_EQ(c.control.arp_retry_ms, 200u);
  EXPECT_EQ(c.control.arp_retries, 5u);
  EXPECT_EQ(c.control.neighbour_expiry_s, 300u);
  EXPECT_TRUE(c.telemetry.enabled);
  EXPECT_EQ(c.telemetry.stats_interval_ms, 100u);
  EXPECT_EQ(c.logging.level, LoggingConfig::Level::kInfo);
  EXPECT_FALSE(c.logging.file.has_value());
  EXPECT_EQ(c.limits.max_qps, d.limits.max_qps);
  EXPECT_EQ(c.limits.max_cq_depth, 65536u);
  EXPECT_EQ(c.limits.max_read_limit, 16u);
  EXPECT_EQ(c.limits.frmr_page_count, 256u);
  EXPECT_EQ(c.limits.max_registration_size, d.limits.max_registration_size);
  EXPECT_DOUBLE_EQ(c.ports[0].fault.reorder_pct, 100);
}

TEST(ConfigParse, EmptySectionsAndPartialSectionsKeepTheOtherDefaults) {
  Config c = parse(kOnePort + "eal:\ndataplane:\n  burst_size: 8\ncontrol: {lcore: ~}\n", kSource);
  EXPECT_EQ(c.eal.lcores, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(c.dataplane.burst_size, 8);
  EXPECT_EQ(c.dataplane.rx_ring_size, 1024);
  EXPECT_FALSE(c.control.lcore.has_value());
}

TEST(ConfigParse, EveryShippedExampleParses) {
  const char* root = std::getenv("ROCEDP_SOURCE_DIR");
  ASSERT_NE(root, nullptr) << "ROCEDP_SOURCE_DIR is not set";
  std::filesystem::path dir = std::filesystem::path(root) / "config" / "examples";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    ++count;
    try {
      Config c = load_file(entry.path().string());
      EXPECT_EQ(c.source, entry.path().string());
      EXPECT_FALSE(c.ports.empty());
      EXPECT_FALSE(c.eal.hugepages);
      EXPECT_EQ(c.eal.lcores, (std::vector<unsigned>{0, 1}));
      EXPECT_EQ(c.eal.main_lcore, 0u);
      EXPECT_EQ(c.dataplane.lcores, std::vector<unsigned>{1});
    } catch (const ConfigError& e) {
      ADD_FAILURE() << e.what();
    }
  }
  EXPECT_GE(count, 4);
}

TEST(ConfigParse, MemifExamplesArePeersOfEachOther) {
  const char* root = std::getenv("ROCEDP_SOURCE_DIR");
  ASSERT_NE(root, nullptr);
  std::string dir = std::string(root) + "/config/examples/";
  Config server = load_file(dir + "memif-server.yaml");
  Config client = load_file(dir + "memif-client.yaml");
  EXPECT_NE(server.eal.file_prefix, client.eal.file_prefix);
  ASSERT_EQ(server.ports.size(), 1u);
  ASSERT_EQ(client.ports.size(), 1u);
  const PortConfig& s = server.ports[0];
  const PortConfig& c = client.ports[0];
  EXPECT_THAT(s.devargs, HasSubstr("role=server"));
  EXPECT_THAT(c.devargs, HasSubstr("role=client"));
  EXPECT_EQ(format_ipv4(s.address), "198.18.1.1");
  EXPECT_EQ(format_ipv4(c.address), "198.18.1.2");
  ASSERT_EQ(s.neighbours.size(), 1u);
  ASSERT_EQ(c.neighbours.size(), 1u);
  EXPECT_EQ(s.neighbours[0].ip, c.address);
  EXPECT_EQ(c.neighbours[0].ip, s.address);
  ASSERT_TRUE(s.mac && c.mac);
  EXPECT_EQ(s.neighbours[0].mac, *c.mac);
  EXPECT_EQ(c.neighbours[0].mac, *s.mac);
}

TEST(ConfigParse, LoadFileReadsFromDisk) {
  TempDir dir;
  std::filesystem::path file = dir.path() / "one.yaml";
  std::ofstream(file) << kOnePort;
  Config c = load_file(file.string());
  EXPECT_EQ(c.source, file.string());
  ASSERT_EQ(c.ports.size(), 1u);
  EXPECT_EQ(c.ports[0].name, "p0");
}

TEST(ConfigFormat, MacAndIpv4RoundTrip) {
  EXPECT_EQ(format_ipv4(Ipv4Address{0xc6120001}), "198.18.0.1");
  EXPECT_EQ(format_ipv4(Ipv4Address{0}), "0.0.0.0");
  EXPECT_EQ(format_ipv4(Ipv4Address{0xffffffff}), "255.255.255.255");
  EXPECT_EQ(parse_ipv4("10.0.0.1"), Ipv4Address{0x0a000001});
  EXPECT_EQ(parse_ipv4("255.255.255.255"), Ipv4Address{0xffffffff});
  for (const char* bad : {"", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1..2.3", "1.2.3.4 ",
                          "a.b.c.d", "1.2.3.-4", "1.2.3.0004"})
    EXPECT_FALSE(parse_ipv4(bad).has_value()) << bad;

  MacAddress mac{{0x02, 0xab, 0xcd, 0xef, 0x00, 0x9f}};
  EXPECT_EQ(format_mac(mac), "02:ab:cd:ef:00:9f");
  EXPECT_EQ(parse_mac("02:AB:cd:EF:00:9f"), mac);
  for (const char* bad : {"", "02:00:00:00:00", "02:00:00:00:00:001", "02-00-00-00-00-01",
                          "0g:00:00:00:00:01", "02:00:00:00:00:0", "2:00:00:00:00:01"})
    EXPECT_FALSE(parse_mac(bad).has_value()) << bad;
  EXPECT_EQ(to_string(FaultConfig::Direction::kTx), "tx");
  EXPECT_EQ(to_string(LoggingConfig::Level::kWarning), "warning");
}

TEST(ConfigParse, Ipv6AddressIsReadBackAndOptional) {
  const Config none = parse(kOnePort, kSource);
  EXPECT_FALSE(none.ports[0].address6.has_value());
  const Config c = parse(kOnePort + "    ipv6: \"fd52::20\"\n", kSource);
  ASSERT_TRUE(c.ports[0].address6.has_value());
  Ipv6Address want;
  want.bytes[0] = 0xfd;
  want.bytes[1] = 0x52;
  want.bytes[15] = 0x20;
  EXPECT_EQ(*c.ports[0].address6, want);
  EXPECT_EQ(format_ipv6(want), "fd52::20");
  // Link-local and global forms are unicast too; unquoted YAML works as well.
  const Config ll = parse(kOnePort + "    ipv6: fe80::52:1\n", kSource);
  ASSERT_TRUE(ll.ports[0].address6.has_value());
  EXPECT_EQ(format_ipv6(*ll.ports[0].address6), "fe80::52:1");
  EXPECT_EQ(parse_ipv6("2001:db8::1:0:0:1"), parse_ipv6("2001:0db8:0:0:1::1"));
  for (const char* bad : {"", "fd52", "fd52:::1", "1.2.3.4", "fd52::20/64", "g::1", " fd52::1"})
    EXPECT_FALSE(parse_ipv6(bad).has_value()) << bad;
}

// --- rejection classes ----------------------------------------------------------------------

TEST(ConfigReject, YamlSyntaxError) {
  expect_error("ports: [\n", 2, 1, "", "YAML syntax error");
  // A key indented less than its siblings ends the sequence where yaml-cpp cannot.
  expect_error("ports:\n  - name: a\n    devargs: x\n   address: 198.18.0.1/24\n", 4, 4, "",
               "YAML syntax error: end of sequence not found");
  expect_error("ports: [a, b\n", 2, 1, "", "YAML syntax error: end of sequence flow not found");
  expect_error("ports: \"x", 1, 10, "", "YAML syntax error");
  // yaml-cpp 0.7's LoadAll() loops forever on these (jbeder/yaml-cpp#1040): must be an error.
  expect_error(", x\n", 1, 1, "", "YAML syntax error: unexpected ','");
  expect_error("# a comment\n, oops\n" + kOnePort, 2, 1, "", "YAML syntax error: unexpected ','");
  expect_error(kOnePort + "---\n,\n", 5, 1, "", "expected one YAML document, found more than one");
}

TEST(ConfigReject, UnreadableFile) {
  TempDir dir;
  std::string missing = (dir.path() / "missing.yaml").string();
  try {
    load_file(missing);
    ADD_FAILURE() << "accepted a missing file";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), missing);
    EXPECT_EQ(e.line(), 0);
    EXPECT_EQ(e.column(), 0);
    EXPECT_EQ(e.key(), "");
    EXPECT_THAT(e.reason(), HasSubstr("cannot read file: No such file or directory"));
    EXPECT_EQ(std::string(e.what()), missing + ": " + e.reason());
  }
  try {
    load_file(dir.path().string());
    ADD_FAILURE() << "accepted a directory";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.line(), 0);
    EXPECT_THAT(e.reason(), HasSubstr("is a directory"));
  }
  if (geteuid() != 0) {  // root reads files whatever their mode
    std::filesystem::path file = dir.path() / "secret.yaml";
    std::ofstream(file) << kOnePort;
    std::filesystem::permissions(file, std::filesystem::perms::none);
    try {
      load_file(file.string());
      ADD_FAILURE() << "accepted an unreadable file";
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.reason(), HasSubstr("Permission denied"));
    }
  }
}

TEST(ConfigReject, EmptyDocument) {
  expect_error("", 1, 1, "", "empty document");
  expect_error("# nothing but a comment\n\n", 1, 1, "", "empty document");
  expect_error("---\n...\n", 1, 1, "", "empty document");
  TempDir dir;
  std::filesystem::path file = dir.path() / "empty.yaml";
  std::ofstream(file).flush();
  try {
    load_file(file.string());
    ADD_FAILURE() << "accepted an empty file";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), file.string());
    EXPECT_EQ(e.line(), 1);
    EXPECT_THAT(e.reason(), HasSubstr("empty document"));
  }
}

TEST(ConfigReject, MoreThanOneDocument) {
  expect_error(kOnePort + "---\n" + kOnePort, 5, 1, "",
               "expected one YAML document, found more than one");
}

TEST(ConfigReject, TopLevelMustBeAMapping) {
  expect_error("- ports\n", 1, 1, "",
               "expected a mapping of sections at the top level, got a sequence");
  expect_error("ports\n", 1, 1, "", "got 'ports'");
}

TEST(ConfigReject, UnknownKeys) {
  expect_error(kOnePort + "telemetri:\n  enabled: true\n", 5, 1, "telemetri",
               "unknown key 'telemetri'; allowed keys: eal, ports, dataplane, control, telemetry, "
               "logging, limits");
  expect_error("ports:\n  - name: p0\n    devargs: net_tap0\n    adress: 198.18.0.1/24\n", 4, 5,
               "ports[0].adress",
               "unknown key 'adress'; allowed keys: name, devargs, mac, address, ipv6, mtu, vlan, "
               "vlan_priority, dscp, ecn, cnp_dscp, dcqcn, neighbours, fault");
  expect_error(kOnePort + "    dcqcn: {g: 5}\n", 5, 13, "ports[0].dcqcn.g",
               "unknown key 'g'; allowed keys: cnp_interval_us, rate_reduce_period_us, "
               "alpha_period_us, alpha_keep, time_reset_us, byte_reset, fast_recovery, "
               "ai_rate_mbps, hai_rate_mbps, min_rate_mbps, first_cnp_rate_mbps");
  expect_error(
      kOnePort + "    fault: {drop: 5}\n", 5, 13, "ports[0].fault.drop",
      "allowed keys: direction, drop_pct, duplicate_pct, corrupt_pct, ce_pct, reorder_window, "
      "reorder_pct, delay_us, seed");
  expect_error(
      kOnePort + "    neighbours: [{ip: 198.18.0.2, mac: \"02:00:00:00:00:02\", port: 1}]\n", 5, 61,
      "ports[0].neighbours[0].port", "allowed keys: ip, mac");
  expect_error(kOnePort + "control:\n  core: 3\n", 6, 3, "control.core",
               "allowed keys: lcore, arp_retry_ms, arp_retries, neighbour_expiry_s");
}

TEST(ConfigReject, WrongTypes) {
  expect_error(kOnePort + "dataplane:\n  burst_size: abc\n", 6, 15, "dataplane.burst_size",
               "expected an unsigned integer, got 'abc'");
  expect_error(kOnePort + "dataplane:\n  burst_size: \"32\"\n", 6, 15, "dataplane.burst_size",
               "expected an unsigned integer, got the quoted string \"32\"");
  expect_error(kOnePort + "dataplane:\n  burst_size: 0x20\n", 6, 15, "dataplane.burst_size",
               "expected an unsigned integer, got '0x20'");
  expect_error(kOnePort + "dataplane:\n  burst_size:\n", 6, 3, "dataplane.burst_size",
               "expected an unsigned integer, got an empty value");
  expect_error("ports:\n  name: p0\n", 2, 3, "ports", "expected a sequence, got a mapping");
  expect_error(kOnePort + "eal:\n  lcores: 1\n", 6, 11, "eal.lcores",
               "expected a sequence, got '1'");
  expect_error(kOnePort + "eal: [0, 1]\n", 5, 6, "eal", "expected a mapping, got a sequence");
  expect_error(kOnePort + "eal:\n  hugepages: yes\n", 6, 14, "eal.hugepages",
               "expected true or false, got 'yes'");
  expect_error(kOnePort + "eal:\n  file_prefix: [a]\n", 6, 16, "eal.file_prefix",
               "expected a string, got a sequence");
  expect_error(kOnePort + "    fault: {drop_pct: lots}\n", 5, 23, "ports[0].fault.drop_pct",
               "expected a number, got 'lots'");
  expect_error(kOnePort + "    fault: {drop_pct: .nan}\n", 5, 23, "ports[0].fault.drop_pct",
               "expected a number, got '.nan'");
  expect_error(kOnePort + "    fault: {direction: up}\n", 5, 24, "ports[0].fault.direction",
               "expected one of rx, tx, both; got 'up'");
  expect_error(kOnePort + "logging: {level: verbose}\n", 5, 18, "logging.level",
               "expected one of error, warning, info, debug; got 'verbose'");
  expect_error(kOnePort + "control: {lcore: first}\n", 5, 18, "control.lcore",
               "expected an unsigned integer, got 'first'");
  expect_error(kOnePort + "{a: 1}: 2\n", 5, 1, "", "expected a key name, got a mapping");
}

struct RangeCase {
  std::string section;  // written at line 5 as "<section>\n  <key>: <value>\n" (value at line 6)
  std::string key;
  std::string value;
  std::string path;
  std::string reason;
};

TEST(ConfigReject, OutOfRangeValues) {
  const RangeCase cases[] = {
      {"dataplane", "burst_size", "0", "dataplane.burst_size", "must be in 1..64, got 0"},
      {"dataplane", "burst_size", "65", "dataplane.burst_size", "must be in 1..64, got 65"},
      {"dataplane", "burst_size", "-1", "dataplane.burst_size", "must be in 1..64, got -1"},
      {"dataplane", "burst_size", "99999999999999999999999", "dataplane.burst_size",
       "must be in 1..64, got 99999999999999999999999"},
      {"dataplane", "rx_ring_size", "32", "dataplane.rx_ring_size", "must be in 64..16384, got 32"},
      {"dataplane", "rx_ring_size", "32768", "dataplane.rx_ring_size", "must be in 64..16384"},
      {"dataplane", "rx_ring_size", "1000", "dataplane.rx_ring_size",
       "must be a power of two in 64..16384, got 1000"},
      {"dataplane", "tx_ring_size", "1500", "dataplane.tx_ring_size",
       "must be a power of two in 64..16384"},
      {"dataplane", "control_ring_size", "100", "dataplane.control_ring_size",
       "must be a power of two in 64..65536, got 100"},
      {"dataplane", "control_ring_size", "131072", "dataplane.control_ring_size",
       "must be in 64..65536"},
      {"dataplane", "mbuf_count", "1022", "dataplane.mbuf_count",
       "must be in 1023..4294967295, got 1022"},
      {"dataplane", "mbuf_cache_size", "513", "dataplane.mbuf_cache_size",
       "must be in 0..512, got 513"},
      {"dataplane", "lcores", "[1, 128]", "dataplane.lcores[1]", "must be in 0..127, got 128"},
      {"eal", "memory_mb", "63", "eal.memory_mb", "must be in 64..1048576, got 63"},
      {"eal", "lcores", "[0, 200]", "eal.lcores[1]", "must be in 0..127, got 200"},
      {"eal", "main_lcore", "128", "eal.main_lcore", "must be in 0..127, got 128"},
      {"eal", "main_lcore_cpu", "128", "eal.main_lcore_cpu", "must be in 0..127, got 128"},
      {"control", "lcore", "500", "control.lcore", "must be in 0..127, got 500"},
      {"control", "arp_retry_ms", "0", "control.arp_retry_ms", "must be in 1..60000, got 0"},
      {"control", "arp_retries", "101", "control.arp_retries", "must be in 1..100, got 101"},
      {"control", "neighbour_expiry_s", "86401", "control.neighbour_expiry_s",
       "must be in 1..86400"},
      {"limits", "max_qps", "16777215", "limits.max_qps", "must be in 1..16777214, got 16777215"},
      {"limits", "max_qps", "0", "limits.max_qps", "must be in 1..16777214, got 0"},
      {"limits", "max_read_limit", "256", "limits.max_read_limit", "must be in 1..255, got 256"},
      {"limits", "frmr_page_count", "15", "limits.frmr_page_count", "must be in 16..65536, got 15"},
      {"limits", "max_transfer_length", "2147483649", "limits.max_transfer_length",
       "must be in 1..2147483648"},
      {"limits", "max_sge", "5", "limits.max_sge", "must be in 1..4, got 5"},
      {"limits", "max_registration_size", "4095", "limits.max_registration_size",
       "must be in 4096..281474976710656, got 4095"},
      {"telemetry", "stats_interval_ms", "0", "telemetry.stats_interval_ms",
       "must be in 1..60000, got 0"},
  };
  for (const RangeCase& rc : cases) {
    std::string yaml = kOnePort + rc.section + ":\n  " + rc.key + ": " + rc.value + "\n";
    int column = static_cast<int>(2 + rc.key.size() + 2 + 1);
    if (rc.path.ends_with("[1]")) column += 4;  // the second element of "[x, y]"
    expect_error(yaml, 6, column, rc.path, rc.reason);
  }
}

TEST(ConfigReject, OutOfRangePortValues) {
  const std::string head = "ports:\n  - name: p0\n    devargs: net_tap0\n";
  expect_error(head + "    address: 198.18.0.1/24\n    mtu: 575\n", 5, 10, "ports[0].mtu",
               "must be in 576..9000, got 575");
  expect_error(head + "    address: 198.18.0.1/24\n    mtu: 9001\n", 5, 10, "ports[0].mtu",
               "must be in 576..9000, got 9001");
  expect_error(head + "    address: 198.18.0.1/24\n    vlan: 0\n", 5, 11, "ports[0].vlan",
               "must be in 1..4094, got 0");
  expect_error(head + "    address: 198.18.0.1/24\n    vlan: 4095\n", 5, 11, "ports[0].vlan",
               "must be in 1..4094, got 4095");
  expect_error(head + "    address: 198.18.0.1/24\n    vlan: 7\n    vlan_priority: 8\n", 6, 20,
               "ports[0].vlan_priority", "must be in 0..7, got 8");
  expect_error(head + "    address: 198.18.0.1/24\n    dscp: 64\n", 5, 11, "ports[0].dscp",
               "must be in 0..63, got 64");
  expect_error(head + "    address: 198.18.0.1/24\n    cnp_dscp: 64\n", 5, 15, "ports[0].cnp_dscp",
               "must be in 0..63, got 64");
  expect_error(head + "    address: 198.18.0.1/24\n    dcqcn:\n      alpha_keep: 1024\n", 6, 19,
               "ports[0].dcqcn.alpha_keep", "must be in 0..1023, got 1024");
  expect_error(head + "    address: 198.18.0.1/24\n    dcqcn:\n      alpha_period_us: 0\n", 6, 24,
               "ports[0].dcqcn.alpha_period_us", "must be in 1..1000000, got 0");
  expect_error(head + "    address: 198.18.0.1/24\n    dcqcn: {byte_reset: 63}\n", 5, 25,
               "ports[0].dcqcn.byte_reset", "must be in 64..1073741824, got 63");
  expect_error(head + "    address: 198.18.0.1/24\n    dcqcn: 5\n", 5, 12, "ports[0].dcqcn",
               "expected a mapping, got '5'");
  expect_error(head + "    address: 198.18.0.1/24\n    ecn: on\n", 5, 10, "ports[0].ecn",
               "expected true or false, got 'on'");
  expect_error(head + "    address: 198.18.0.1/33\n", 4, 14, "ports[0].address",
               "prefix length must be in 1..32, got 33");
  expect_error(head + "    address: 198.18.0.1/0\n", 4, 14, "ports[0].address",
               "prefix length must be in 1..32, got 0");
  const std::string port = head + "    address: 198.18.0.1/24\n    fault:\n";
  expect_error(port + "      drop_pct: 100.5\n", 6, 17, "ports[0].fault.drop_pct",
               "must be in 0..100 (percent), got 100.5");
  expect_error(port + "      duplicate_pct: -1\n", 6, 22, "ports[0].fault.duplicate_pct",
               "must be in 0..100 (percent), got -1");
  expect_error(port + "      ce_pct: -1\n", 6, 15, "ports[0].fault.ce_pct",
               "must be in 0..100 (percent), got -1");
  expect_error(port + "      corrupt_pct: 101\n", 6, 20, "ports[0].fault.corrupt_pct",
               "must be in 0..100");
  expect_error(port + "      reorder_pct: 100.01\n", 6, 20, "ports[0].fault.reorder_pct",
               "must be in 0..100 (percent), got 100.01");
  expect_error(port + "      reorder_window: 1025\n", 6, 23, "ports[0].fault.reorder_window",
               "must be in 0..1024, got 1025");
  expect_error(port + "      delay_us: 1000001\n", 6, 17, "ports[0].fault.delay_us",
               "must be in 0..1000000, got 1000001");
  expect_error(port + "      seed: 18446744073709551616\n", 6, 13, "ports[0].fault.seed",
               "must be in 0..18446744073709551615");
}

TEST(ConfigReject, MalformedAddresses) {
  const std::string head = "ports:\n  - name: p0\n    devargs: net_tap0\n";
  expect_error(
      head + "    address: 198.18.0.1\n", 4, 14, "ports[0].address",
      "expected an IPv4 address with prefix length such as 198.18.0.1/24, got '198.18.0.1'");
  expect_error(head + "    address: 198.18.0.256/24\n", 4, 14, "ports[0].address",
               "expected an IPv4 address such as 198.18.0.1, got '198.18.0.256'");
  expect_error(head + "    address: 198.018.0.1/24\n", 4, 14, "ports[0].address",
               "got '198.018.0.1'");
  expect_error(head + "    address: 198.18.0.1/x\n", 4, 14, "ports[0].address",
               "expected a prefix length after '/'");
  expect_error(head + "    address: 224.0.0.1/24\n", 4, 14, "ports[0].address",
               "expected a unicast host address");
  expect_error(head + "    address: 198.18.0.0/24\n", 4, 14, "ports[0].address",
               "is the network address of its subnet");
  expect_error(head + "    address: 198.18.0.255/24\n", 4, 14, "ports[0].address",
               "is the broadcast address of its subnet");
  const std::string port = head + "    address: 198.18.0.1/24\n";
  expect_error(port + "    mac: 02:00:00:00:00\n", 5, 10, "ports[0].mac",
               "expected a MAC address such as \"02:00:00:00:00:01\", got '02:00:00:00:00'");
  expect_error(port + "    mac: \"02-00-00-00-00-01\"\n", 5, 10, "ports[0].mac",
               "got '02-00-00-00-00-01'");
  expect_error(port + "    mac: \"01:00:5e:00:00:01\"\n", 5, 10, "ports[0].mac",
               "expected a unicast MAC address, got multicast 01:00:5e:00:00:01");
  expect_error(port + "    mac: \"00:00:00:00:00:00\"\n", 5, 10, "ports[0].mac", "got all zeros");
  expect_error(port + "    neighbours:\n      - {ip: 198.18.0.300, mac: \"02:00:00:00:00:02\"}\n",
               6, 14, "ports[0].neighbours[0].ip",
               "expected an IPv4 address such as 198.18.0.1, got '198.18.0.300'");
  expect_error(port + "    neighbours:\n      - {ip: 198.18.0.2, mac: \"02:00:00:00:00:0z\"}\n", 6,
               31, "ports[0].neighbours[0].mac", "expected a MAC address");
}

TEST(ConfigReject, Ipv6AddressesThatAPortCannotOwn) {
  expect_error(kOnePort + "    ipv6: fd52::zz\n", 5, 11, "ports[0].ipv6",
               "expected an IPv6 address such as fd52::20, got 'fd52::zz'");
  expect_error(kOnePort + "    ipv6: \"fd52::1/64\"\n", 5, 11, "ports[0].ipv6",
               "expected an IPv6 address such as fd52::20, got 'fd52::1/64'");
  expect_error(kOnePort + "    ipv6: 5\n", 5, 11, "ports[0].ipv6",
               "expected an IPv6 address such as fd52::20, got '5'");
  expect_error(kOnePort + "    ipv6: \"ff02::1:ff00:20\"\n", 5, 11, "ports[0].ipv6",
               "expected a unicast IPv6 address, got ff02::1:ff00:20 (multicast;");
  expect_error(kOnePort + "    ipv6: \"::\"\n", 5, 11, "ports[0].ipv6",
               "got :: (the unspecified address;");
  expect_error(kOnePort + "    ipv6: \"::1\"\n", 5, 11, "ports[0].ipv6",
               "got ::1 (the loopback address;");
  expect_error(kOnePort + "    ipv6: \"::ffff:198.18.0.1\"\n", 5, 11, "ports[0].ipv6",
               "got ::ffff:198.18.0.1 (IPv4-mapped;");
  expect_error(kOnePort + "    ipv6: [fd52::1]\n", 5, 11, "ports[0].ipv6", "expected a string");
  expect_error(kOnePort + "    ipv6: fd52::20\n" +
                   "  - name: p1\n    devargs: net_tap1\n    address: 198.18.1.1/24\n" +
                   "    ipv6: \"fd52:0::20\"\n",
               9, 11, "ports[1].ipv6", "duplicate port IPv6 address fd52::20 (also ports[0])");
}

// Static neighbours may be IPv6 (an `ip` with colons) on a port with an IPv6 address, beside the
// IPv4 ones; each IPv6 rule names the entry.
TEST(ConfigPorts, StaticIpv6NeighboursBesideIpv4Ones) {
  Config c = parse(kOnePort +
                       "    ipv6: fd52::20\n"
                       "    neighbours:\n"
                       "      - {ip: 198.18.0.2, mac: \"02:00:00:00:00:02\"}\n"
                       "      - {ip: \"fd52::10\", mac: \"02:00:00:00:00:10\"}\n",
                   kSource);
  const auto& n = c.ports[0].neighbours;
  ASSERT_EQ(n.size(), 2u);
  EXPECT_FALSE(n[0].ip6.has_value());
  EXPECT_EQ(n[0].ip.value, 0xc6120002u);
  ASSERT_TRUE(n[1].ip6.has_value());
  EXPECT_EQ(format_ipv6(*n[1].ip6), "fd52::10");
  EXPECT_EQ(format_mac(n[1].mac), "02:00:00:00:00:10");

  const std::string v6 = kOnePort + "    ipv6: fd52::20\n    neighbours:\n";
  expect_error(
      kOnePort + "    neighbours:\n      - {ip: \"fd52::10\", mac: \"02:00:00:00:00:10\"}\n", 6, 14,
      "ports[0].neighbours[0].ip", "IPv6 neighbour fd52::10 on a port without an ipv6 address");
  expect_error(v6 + "      - {ip: \"fd52::20\", mac: \"02:00:00:00:00:10\"}\n", 7, 14,
               "ports[0].neighbours[0].ip", "fd52::20 is the port's own address");
  expect_error(v6 + "      - {ip: \"fd52::10\", mac: \"02:00:00:00:00:10\"}\n" +
                   "      - {ip: \"fd52:0::10\", mac: \"02:00:00:00:00:11\"}\n",
               8, 14, "ports[0].neighbours[1].ip",
               "duplicate neighbour fd52::10 (also ports[0].neighbours[0])");
  expect_error(v6 + "      - {ip: \"ff02::1\", mac: \"02:00:00:00:00:10\"}\n", 7, 14,
               "ports[0].neighbours[0].ip", "expected a unicast IPv6 address, got ff02::1");
  expect_error(v6 + "      - {ip: \"fd52::zz\", mac: \"02:00:00:00:00:10\"}\n", 7, 14,
               "ports[0].neighbours[0].ip", "expected an IPv6 address such as fd52::20");
}

// Eight ports at most: every polling core holds a queue and an RC engine per port.
TEST(ConfigReject, MoreThanEightPorts) {
  std::string eight = "ports:\n";
  for (int i = 0; i < 8; ++i)
    eight += "  - {name: p" + std::to_string(i) + ", devargs: net_tap" + std::to_string(i) +
             ", address: 198.18." + std::to_string(i) + ".1/24}\n";
  EXPECT_EQ(parse(eight, kSource).ports.size(), 8u);
  expect_error(eight + "  - {name: p8, devargs: net_tap8, address: 198.18.8.1/24}\n", 2, 3, "ports",
               "9 ports: at most 8 (a polling core serves every port)");
}

TEST(ConfigReject, MissingRequiredKeys) {
  expect_error("ports:\n  - name: p0\n    address: 198.18.0.1/24\n", 2, 5, "ports[0].devargs",
               "missing required key 'devargs'");
  expect_error(kOnePort + "  - name: p1\n    devargs: net_tap1\n", 5, 5, "ports[1].address",
               "missing required key 'address'");
  expect_error(kOnePort + "    neighbours: [{ip: 198.18.0.2}]\n", 5, 18,
               "ports[0].neighbours[0].mac", "missing required key 'mac'");
}

TEST(ConfigReject, DuplicateKeysInOneMapping) {
  expect_error(kOnePort + "    address: 198.18.0.2/24\n", 5, 5, "ports[0].address",
               "duplicate key (first given at line 4, column 5)");
  expect_error(kOnePort + "eal:\n  memory_mb: 128\neal:\n  memory_mb: 512\n", 7, 1, "eal",
               "duplicate key (first given at line 5, column 1)");
  expect_error(kOnePort + "    fault: {seed: 1, seed: 2}\n", 5, 22, "ports[0].fault.seed",
               "duplicate key");
}

TEST(ConfigReject, DuplicatePortNamesAddressesMacsAndDevices) {
  expect_error(kOnePort + "  - name: p0\n    devargs: net_tap1\n    address: 198.18.1.1/24\n", 5,
               11, "ports[1].name", "duplicate port name 'p0' (also ports[0])");
  expect_error(kOnePort + "  - name: p1\n    devargs: net_tap1\n    address: 198.18.0.1/24\n", 7,
               14, "ports[1].address", "duplicate port address 198.18.0.1 (also ports[0])");
  expect_error(kOnePort +
                   "    mac: \"02:00:00:00:00:01\"\n"
                   "  - name: p1\n    devargs: net_tap1\n    address: 198.18.1.1/24\n"
                   "    mac: \"02:00:00:00:00:01\"\n",
               9, 10, "ports[1].mac", "duplicate MAC 02:00:00:00:00:01 (also ports[0])");
  // Same device with different arguments is still one device to EAL.
  expect_error(
      kOnePort + "  - name: p1\n    devargs: net_tap0,iface=x\n    address: 198.18.1.1/24\n", 6, 14,
      "ports[1].devargs", "device 'net_tap0' is already used by ports[0]");
}

TEST(ConfigReject, NoPorts) {
  expect_error("ports: []\n", 1, 8, "ports", "no ports: list at least one");
  expect_error("eal:\n  memory_mb: 128\n", 1, 1, "ports", "missing required key 'ports'");
}

TEST(ConfigReject, NoPollingLcores) {
  expect_error(kOnePort + "dataplane:\n  lcores: []\n", 6, 11, "dataplane.lcores",
               "no polling lcores: list at least one");
}

TEST(ConfigReject, PollingLcoreNotInEalLcores) {
  expect_error(kOnePort + "dataplane:\n  lcores: [1, 2]\n", 6, 15, "dataplane.lcores[1]",
               "lcore 2 is not in eal.lcores [0, 1]");
  // The polling set is the default [1]: the error points at the eal.lcores that excludes it.
  expect_error(kOnePort + "eal:\n  lcores: [0, 2]\n", 6, 11, "dataplane.lcores[0]",
               "lcore 1 is not in eal.lcores [0, 2]");
}

TEST(ConfigReject, PollingLcoreIsMainLcore) {
  expect_error(kOnePort + "dataplane:\n  lcores: [0]\n", 6, 12, "dataplane.lcores[0]",
               "lcore 0 is eal.main_lcore; polling lcores must be worker lcores");
  expect_error(kOnePort + "eal:\n  main_lcore: 1\n", 6, 15, "dataplane.lcores[0]",
               "lcore 1 is eal.main_lcore");
}

TEST(ConfigReject, DuplicatedLcores) {
  expect_error(kOnePort + "eal:\n  lcores: [0, 1, 1]\n", 6, 18, "eal.lcores[2]",
               "lcore 1 is listed twice (first as eal.lcores[1])");
  expect_error(
      kOnePort + "eal:\n  lcores: [0, 1, 2]\ndataplane:\n  lcores:\n    - 2\n    - 1\n    - 2\n",
      11, 7, "dataplane.lcores[2]", "lcore 2 is listed twice (first as dataplane.lcores[0])");
}

TEST(ConfigReject, MainLcoreNotInEalLcores) {
  expect_error(kOnePort + "eal:\n  lcores: [1, 2]\n  main_lcore: 3\n", 7, 15, "eal.main_lcore",
               "lcore 3 is not in eal.lcores [1, 2]");
  // main_lcore left at 0: the error points at the lcores list that lacks it.
  expect_error(kOnePort + "eal:\n  lcores: [1, 2]\ndataplane:\n  lcores: [2]\n", 6, 11,
               "eal.main_lcore", "lcore 0 is not in eal.lcores [1, 2]");
}

TEST(ConfigReject, ControlLcore) {
  expect_error(kOnePort + "control:\n  lcore: 4\n", 6, 10, "control.lcore",
               "lcore 4 is not in eal.lcores [0, 1]");
  expect_error(kOnePort + "control:\n  lcore: 1\n", 6, 10, "control.lcore",
               "lcore 1 is a polling lcore (dataplane.lcores[0])");
  // Sharing the main lcore is allowed: main() can be the control thread.
  EXPECT_EQ(parse(kOnePort + "control:\n  lcore: 0\n", kSource).control.lcore,
            std::optional<unsigned>(0));
}

TEST(ConfigReject, StaticNeighbours) {
  expect_error(kOnePort + "    neighbours:\n      - {ip: 198.18.1.2, mac: \"02:00:00:00:00:02\"}\n",
               6, 14, "ports[0].neighbours[0].ip",
               "198.18.1.2 is outside the port's subnet 198.18.0.0/24");
  expect_error(kOnePort +
                   "    neighbours:\n      - ip: 198.18.0.2\n        mac: \"02:00:00:00:00:02\"\n"
                   "      - ip: 198.18.0.1\n        mac: \"02:00:00:00:00:03\"\n",
               8, 13, "ports[0].neighbours[1].ip", "198.18.0.1 is the port's own address");
  expect_error(
      kOnePort + "    neighbours:\n      - {ip: 198.18.0.255, mac: \"02:00:00:00:00:02\"}\n", 6, 14,
      "ports[0].neighbours[0].ip", "is the broadcast address of 198.18.0.0/24");
  expect_error(kOnePort +
                   "    neighbours:\n      - {ip: 198.18.0.2, mac: \"02:00:00:00:00:02\"}\n"
                   "      - {ip: 198.18.0.2, mac: \"02:00:00:00:00:03\"}\n",
               7, 14, "ports[0].neighbours[1].ip",
               "duplicate neighbour 198.18.0.2 (also ports[0].neighbours[0])");
}

TEST(ConfigReject, ExtraArgsThatKeysAlreadySet) {
  expect_error(kOnePort + "eal:\n  extra_args: [\"--in-memory\", \"-l\", \"0-3\"]\n", 6, 31,
               "eal.extra_args[1]", "'-l' is set from eal.lcores; use that key");
  expect_error(kOnePort + "eal:\n  extra_args: [\"--file-prefix=x\"]\n", 6, 16, "eal.extra_args[0]",
               "'--file-prefix' is set from eal.file_prefix");
  expect_error(kOnePort + "eal:\n  extra_args: [\"-m512\"]\n", 6, 16, "eal.extra_args[0]",
               "'-m' is set from eal.memory_mb");
  // getopt_long takes an unambiguous abbreviation of a long option as the option.
  for (const auto& [arg, option, key] :
       {std::tuple{"--file=other", "--file-prefix", "eal.file_prefix"},
        {"--main=3", "--main-lcore", "eal.main_lcore"},
        {"--lcore", "--lcores", "eal.lcores"},
        {"--socket-mem=512", "--socket-mem", "eal.memory_mb"}})
    expect_error(kOnePort + "eal:\n  extra_args: [\"" + arg + "\"]\n", 6, 16, "eal.extra_args[0]",
                 "'" + std::string(option) + "' is set from " + key);
  // Other options, also those that share a beginning with ours.
  EXPECT_EQ(parse(kOnePort + "eal:\n  extra_args: [\"--no-pci\", \"--log-level=lib.eal:8\", "
                             "\"--no-telemetry\"]\n",
                  kSource)
                .eal.extra_args.size(),
            3u);
}

TEST(ConfigReject, BadNamesAndPrefixes) {
  expect_error("ports:\n  - name: \"my port\"\n    devargs: net_tap0\n    address: 198.18.0.1/24\n",
               2, 11, "ports[0].name", "must be 1..32 characters");
  expect_error("ports:\n  - name: \"\"\n    devargs: net_tap0\n    address: 198.18.0.1/24\n", 2, 11,
               "ports[0].name", "must not be empty");
  expect_error(kOnePort + "eal:\n  file_prefix: ../etc\n", 6, 16, "eal.file_prefix",
               "must be 1..32 characters");
  expect_error("ports:\n  - name: p0\n    devargs: net_tap0, iface=x\n    address: 198.18.0.1/24\n",
               3, 14, "ports[0].devargs", "must not contain spaces");
}

}  // namespace
}  // namespace rocedp::config

// --- listeners -------------------------------------------------------------------------------

namespace rocedp::config {
namespace {

TEST(ConfigListeners, EchoAndMemoryWithDefaultsAndEveryKey) {
  Config c = parse(kOnePort +
                       "listeners:\n"
                       "  - {port: p0, nd_port: 7000, service: echo}\n"
                       "  - port: p0\n"
                       "    nd_port: 7001\n"
                       "    service: memory\n"
                       "    memory_bytes: 65536\n"
                       "    max_connections: 2\n"
                       "    keepalive_ms: 250\n"
                       "  - {port: p0, nd_port: 7002, service: echo, message_bytes: 100, "
                       "queue_depth: 8, idle_timeout_ms: 0}\n",
                   kSource);
  ASSERT_EQ(c.listeners.size(), 3u);
  EXPECT_EQ(c.listeners[0].port, "p0");
  EXPECT_EQ(c.listeners[0].nd_port, 7000);
  EXPECT_EQ(c.listeners[0].service, ListenerConfig::Service::kEcho);
  EXPECT_EQ(c.listeners[0].message_bytes, 4096u);
  EXPECT_EQ(c.listeners[0].queue_depth, 64u);
  EXPECT_EQ(c.listeners[0].max_connections, 64u);
  EXPECT_EQ(c.listeners[0].idle_timeout_ms, 300000u);  // dead peers give their slots back
  EXPECT_EQ(c.listeners[0].keepalive_ms, 10000u);
  EXPECT_EQ(c.listeners[1].service, ListenerConfig::Service::kMemory);
  EXPECT_EQ(c.listeners[1].memory_bytes, 65536u);
  EXPECT_EQ(c.listeners[1].max_connections, 2u);
  EXPECT_EQ(c.listeners[1].keepalive_ms, 250u);
  EXPECT_EQ(c.listeners[2].message_bytes, 100u);
  EXPECT_EQ(c.listeners[2].queue_depth, 8u);
  EXPECT_EQ(c.listeners[2].idle_timeout_ms, 0u);
  EXPECT_EQ(to_string(c.listeners[1].service), "memory");
  EXPECT_TRUE(parse(kOnePort, kSource).listeners.empty());
}

// perftest: a region (memory_bytes), receives (message_bytes, queue_depth), what its SENDs get
// (sends: sink by default) and its control connection's keepalive.
TEST(ConfigListeners, PerftestWithDefaultsAndEveryKey) {
  Config c = parse(kOnePort +
                       "listeners:\n"
                       "  - {port: p0, nd_port: 18515, service: perftest}\n"
                       "  - {port: p0, nd_port: 18516, service: perftest, sends: echo, "
                       "memory_bytes: 8192, message_bytes: 64, queue_depth: 4, keepalive_ms: 0, "
                       "writes: echo, tcp_exchange: 198.18.0.1}\n",
                   kSource);
  ASSERT_EQ(c.listeners.size(), 2u);
  EXPECT_EQ(c.listeners[0].service, ListenerConfig::Service::kPerftest);
  EXPECT_EQ(to_string(c.listeners[0].service), "perftest");
  EXPECT_EQ(c.listeners[0].sends, ListenerConfig::Sends::kSink);
  EXPECT_EQ(c.listeners[0].memory_bytes, 1u << 20);
  EXPECT_EQ(c.listeners[0].message_bytes, 4096u);
  EXPECT_EQ(c.listeners[0].writes, ListenerConfig::Writes::kSink);
  EXPECT_EQ(c.listeners[1].sends, ListenerConfig::Sends::kEcho);
  EXPECT_EQ(c.listeners[1].writes, ListenerConfig::Writes::kEcho);
  EXPECT_EQ(c.listeners[1].memory_bytes, 8192u);
  EXPECT_EQ(c.listeners[1].message_bytes, 64u);
  EXPECT_EQ(c.listeners[1].queue_depth, 4u);
  EXPECT_EQ(c.listeners[1].keepalive_ms, 0u);
  EXPECT_FALSE(c.listeners[0].tcp_exchange.has_value());
  ASSERT_TRUE(c.listeners[1].tcp_exchange.has_value());
  EXPECT_EQ(c.listeners[1].tcp_exchange->value, 0xC6120001u);
}

// Every port has its adapter: a listener may name any port, and the same ND port may serve on
// two ports (each port's adapter has its own address registry).
TEST(ConfigListeners, AnyPortAndTheSameNdPortOnTwoPorts) {
  Config c = parse(kOnePort +
                       "  - name: p1\n"
                       "    devargs: net_tap1\n"
                       "    address: 198.18.2.1/24\n"
                       "listeners:\n"
                       "  - {port: p1, nd_port: 7000, service: echo}\n"
                       "  - {port: p0, nd_port: 7000, service: memory}\n",
                   kSource);
  ASSERT_EQ(c.listeners.size(), 2u);
  EXPECT_EQ(c.listeners[0].port, "p1");
  EXPECT_EQ(c.listeners[1].port, "p0");
  expect_error(kOnePort +
                   "  - name: p1\n"
                   "    devargs: net_tap1\n"
                   "    address: 198.18.2.1/24\n"
                   "listeners:\n"
                   "  - {port: p1, nd_port: 7000, service: echo}\n"
                   "  - {port: p1, nd_port: 7000, service: memory}\n",
               10, 25, "listeners[1].nd_port", "already used by listeners[0]");
}

TEST(ConfigListeners, RejectedWithFileLineColumnKeyAndReason) {
  expect_error(kOnePort + "listeners:\n  - {port: p0, nd_port: 7000, service: ftp}\n", 6, 40,
               "listeners[0].service", "expected one of echo, memory");
  expect_error(kOnePort + "listeners:\n  - {port: p0, nd_port: 0, service: echo}\n", 6, 25,
               "listeners[0].nd_port", "");
  expect_error(kOnePort + "listeners:\n  - {port: p0, nd_port: 65536, service: echo}\n", 6, 25,
               "listeners[0].nd_port", "");
  expect_error(kOnePort + "listeners:\n  - {port: p0, service: echo}\n", 6, 5,
               "listeners[0].nd_port", "nd_port");
  expect_error(kOnePort + "listeners:\n  - {port: p0, nd_port: 7000, service: echo, colour: red}\n",
               6, 46, "listeners[0].colour", "unknown key");
  expect_error(kOnePort + "listeners:\n  - {port: p1, nd_port: 7000, service: echo}\n", 6, 12,
               "listeners[0].port", "no port named 'p1'");
  expect_error(kOnePort +
                   "listeners:\n"
                   "  - {port: p0, nd_port: 7000, service: echo}\n"
                   "  - {port: p0, nd_port: 7000, service: memory}\n",
               7, 25, "listeners[1].nd_port", "already used by listeners[0]");
  expect_error(
      kOnePort + "listeners:\n  - {port: p0, nd_port: 7000, service: echo, memory_bytes: 4096}\n",
      6, 60, "listeners[0].memory_bytes",
      "applies to service: memory and perftest only (this listener is 'echo')");
  expect_error(
      kOnePort + "listeners:\n  - {port: p0, nd_port: 7000, service: memory, message_bytes: 9}\n",
      6, 63, "listeners[0].message_bytes",
      "applies to service: echo and perftest only (this listener is 'memory')");
  expect_error(
      kOnePort + "listeners:\n  - {port: p0, nd_port: 7000, service: memory, queue_depth: 9}\n", 6,
      61, "listeners[0].queue_depth", "applies to service: echo and perftest only");
  expect_error(
      kOnePort + "listeners:\n  - {port: p0, nd_port: 7000, service: memory, memory_bytes: 100}\n",
      6, 62, "listeners[0].memory_bytes", "");
  // The keepalive is the memory service's, the idle timeout the echo's.
  expect_error(
      kOnePort + "listeners:\n  - {port: p0, nd_port: 7000, service: echo, keepalive_ms: 5}\n", 6,
      60, "listeners[0].keepalive_ms", "applies to service: memory and perftest only");
  // perftest's keys: `sends` is its own; the echo's knobs are not its.
  expect_error(kOnePort + "listeners:\n  - {port: p0, nd_port: 7000, service: echo, sends: echo}\n",
               6, 53, "listeners[0].sends",
               "applies to service: perftest only (this listener is 'echo')");
  expect_error(
      kOnePort + "listeners:\n  - {port: p0, nd_port: 7000, service: perftest, sends: both}\n", 6,
      57, "listeners[0].sends", "expected one of sink, echo; got 'both'");
  expect_error(
      kOnePort + "listeners:\n  - {port: p0, nd_port: 7000, service: memory, writes: echo}\n", 6,
      56, "listeners[0].writes", "applies to service: perftest only (this listener is 'memory')");
  expect_error(
      kOnePort + "listeners:\n  - {port: p0, nd_port: 7000, service: perftest, writes: 1}\n", 6, 58,
      "listeners[0].writes", "expected one of sink, echo; got '1'");
  // perftest's TCP exchange: a host address of the host's, or 0.0.0.0.
  expect_error(
      kOnePort +
          "listeners:\n  - {port: p0, nd_port: 7000, service: echo, tcp_exchange: 0.0.0.0}\n",
      6, 60, "listeners[0].tcp_exchange",
      "applies to service: perftest only (this listener is 'echo')");
  expect_error(
      kOnePort +
          "listeners:\n  - {port: p0, nd_port: 7000, service: perftest, tcp_exchange: "
          "224.0.0.1}\n",
      6, 64, "listeners[0].tcp_exchange",
      "expected a host IPv4 address such as 198.18.0.1 (or 0.0.0.0 for any), got '224.0.0.1'");
  expect_error(kOnePort +
                   "listeners:\n  - {port: p0, nd_port: 7000, service: perftest, tcp_exchange: "
                   "host}\n",
               6, 64, "listeners[0].tcp_exchange",
               "expected a host IPv4 address such as 198.18.0.1 (or 0.0.0.0 for any), got 'host'");
  expect_error(
      kOnePort +
          "listeners:\n  - {port: p0, nd_port: 7000, service: perftest, disconnect_after: 1}\n",
      6, 68, "listeners[0].disconnect_after",
      "applies to service: echo only (this listener is 'perftest')");
  expect_error(
      kOnePort + "listeners:\n  - {port: p0, nd_port: 7000, service: memory, idle_timeout_ms: 5}\n",
      6, 65, "listeners[0].idle_timeout_ms", "applies to service: echo only");
  expect_error(
      kOnePort +
          "listeners:\n  - {port: p0, nd_port: 7000, service: memory, keepalive_ms: 3600001}\n",
      6, 62, "listeners[0].keepalive_ms", "");
  expect_error(kOnePort + "listeners: {port: p0}\n", 5, 12, "listeners", "expected a sequence");
  // The memory service's region must fit one registration, given or by default (1 MiB).
  expect_error(
      kOnePort +
          "limits: {max_registration_size: 65536}\n"
          "listeners:\n  - {port: p0, nd_port: 7001, service: memory, memory_bytes: 65537}\n",
      7, 62, "listeners[0].memory_bytes",
      "65537 bytes (one registration) is more than limits.max_registration_size (65536)");
  expect_error(kOnePort +
                   "limits: {max_registration_size: 65536}\n"
                   "listeners:\n  - {port: p0, nd_port: 7001, service: memory}\n",
               7, 40, "listeners[0].memory_bytes", "1048576 bytes (one registration) is more than");
  EXPECT_NO_THROW(parse(kOnePort + "limits: {max_registration_size: 65536}\n"
                                   "listeners:\n  - {port: p0, nd_port: 7001, service: memory, "
                                   "memory_bytes: 65536}\n",
                        kSource));
  // An echo connection's buffers, QP and CQ must fit the adapter's limits too: refused at every
  // connection otherwise. On the key that asks for too much; at the service when it is a default.
  const std::string echo = "listeners:\n  - {port: p0, nd_port: 7001, service: echo";
  expect_error(kOnePort + "limits: {max_registration_size: 65536}\n" + echo +
                   ", message_bytes: 4096, queue_depth: 17}\n",
               7, 61, "listeners[0].message_bytes",
               "queue_depth x message_bytes = 69632 bytes (one registration) is more than "
               "limits.max_registration_size (65536)");
  expect_error(kOnePort + "limits: {max_registration_size: 65536}\n" + echo + "}\n", 7, 40,
               "listeners[0].message_bytes", "= 262144 bytes");
  expect_error(kOnePort + "limits: {max_qp_depth: 16}\n" + echo + "}\n", 7, 40,
               "listeners[0].queue_depth", "a QP of 64 is more than limits.max_qp_depth (16)");
  expect_error(kOnePort + "limits: {max_cq_depth: 100}\n" + echo + ", queue_depth: 51}\n", 7, 59,
               "listeners[0].queue_depth",
               "a CQ of 2 x queue_depth = 102 is more than limits.max_cq_depth (100)");
  EXPECT_NO_THROW(parse(
      kOnePort + "limits: {max_cq_depth: 100, max_qp_depth: 50}\n" + echo + ", queue_depth: 50}\n",
      kSource));
  // "listeners:" with nothing under it: none.
  EXPECT_TRUE(parse(kOnePort + "listeners:\n", kSource).listeners.empty());
}

TEST(ConfigErrors, EveryBadKeyOfAListenerAndEveryNeighbourIsReported) {
  // Each key of an item on its own; the cross-key rules go on past a bad neighbour.
  const std::string yaml =
      "ports:\n"
      "  - name: p0\n"
      "    devargs: net_tap0\n"
      "    address: 198.18.0.1/24\n"
      "    neighbours: [{ip: 10.0.0.1, mac: \"02:00:00:00:00:02\"},\n"
      "                 {ip: 198.18.0.1, mac: \"02:00:00:00:00:03\"}]\n"
      "listeners:\n"
      "  - {port: p9, nd_port: 0, service: ftp, queue_depth: 0}\n"
      "  - {port: p0, nd_port: 7000, service: echo}\n"
      "  - {port: p0, nd_port: 7000, service: echo}\n";
  EXPECT_EQ(
      problem_keys(yaml),
      (std::vector<std::string>{"ports[0].neighbours[0].ip", "ports[0].neighbours[1].ip",
                                "listeners[0].port", "listeners[0].nd_port", "listeners[0].service",
                                "listeners[0].queue_depth", "listeners[2].nd_port"}));
}

TEST(ConfigErrors, NoRuleChecksTheDefaultLeftForARejectedLcoreList) {
  // The range error alone: not also "main_lcore 2 is not in eal.lcores [0, 1]" (the default).
  EXPECT_EQ(problem_keys(kOnePort +
                         "eal: {lcores: [2, 3, 200], main_lcore: 2}\ndataplane: {lcores: [3]}\n"),
            std::vector<std::string>{"eal.lcores[2]"});
  EXPECT_EQ(problem_keys(kOnePort + "eal: {lcores: [0, 2]}\ndataplane: {lcores: [2, 2]}\n"),
            std::vector<std::string>{"dataplane.lcores[1]"});
}

// --- every error of a file, the key table -----------------------------------------------------

TEST(ConfigErrors, EveryProblemOfAFileIsReportedInFileOrder) {
  const std::string yaml =
      "eal:\n"
      "  memory_mb: 1\n"    // 2: range
      "  hugepages: yes\n"  // 3: type
      "ports:\n"
      "  - name: p0\n"
      "    devargs: net_tap0\n"
      "    address: 198.18.0.1/24\n"
      "    mtu: 99999\n"                                                // 8: range
      "    neighbours: [{ip: 10.0.0.1, mac: \"02:00:00:00:00:02\"}]\n"  // 9: outside the subnet
      "dataplane:\n"
      "  rx_ring_size: 1000\n"               // 11: not a power of two
      "  colour: blue\n"                     // 12: unknown key
      "limits: {max_sge: 0, max_qps: 5}\n";  // 13: range (max_qps is fine)
  try {
    parse(yaml, kSource);
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    std::vector<std::string> keys;
    for (const ConfigProblem& p : e.problems()) keys.push_back(p.key);
    EXPECT_EQ(keys, (std::vector<std::string>{"eal.memory_mb", "eal.hugepages", "ports[0].mtu",
                                              "ports[0].neighbours[0].ip", "dataplane.rx_ring_size",
                                              "dataplane.colour", "limits.max_sge"}))
        << e.what();
    std::vector<int> lines;
    for (const ConfigProblem& p : e.problems()) lines.push_back(p.line);
    EXPECT_EQ(lines, (std::vector<int>{2, 3, 8, 9, 11, 12, 13}));
    EXPECT_EQ(std::count(e.what(), e.what() + std::strlen(e.what()), '\n'), 6)
        << "one line per problem";
    EXPECT_EQ(e.key(), "eal.memory_mb");  // the first
  }
}

TEST(ConfigErrors, OneProblemPerKeyAndNoneFromRulesOverRejectedPorts) {
  // A port rejected for its address is left out of the rules between ports and listeners, so its
  // listener does not also get "no port named".
  const std::string yaml =
      "ports:\n"
      "  - {name: p0, devargs: net_tap0, address: 198.18.0.0/24}\n"
      "listeners:\n"
      "  - {port: p0, nd_port: 0, service: echo}\n";
  try {
    parse(yaml, kSource);
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.problems().size(), 2u) << e.what();
    EXPECT_EQ(e.problems()[0].key, "ports[0].address");
    EXPECT_EQ(e.problems()[1].key, "listeners[0].nd_port");
  }
}

// The table drives validation: for every number key of a plain section, its upper bound is
// accepted and one above is rejected with the table's range.
TEST(ConfigKeys, EveryNumberKeyTakesTheRangeOfTheTable) {
  int checked = 0;
  for (const KeySpec& k : config_keys()) {
    const bool plain = k.section == "eal" || k.section == "dataplane" || k.section == "control" ||
                       k.section == "telemetry" || k.section == "limits";
    if (!plain || (k.kind != KeySpec::Kind::kUint && k.kind != KeySpec::Kind::kPow2)) continue;
    if (k.key == "main_lcore" || k.key == "lcore") continue;  // must also be in eal.lcores
    SCOPED_TRACE(std::string(k.section) + "." + std::string(k.key));
    const std::string at = std::string(k.section) + ":\n  " + std::string(k.key) + ": ";
    EXPECT_NO_THROW(parse(kOnePort + at + std::to_string(k.hi) + "\n", kSource));
    if (k.hi == std::numeric_limits<uint64_t>::max()) continue;
    expect_error(kOnePort + at + std::to_string(k.hi + 1) + "\n", 6,
                 3 + static_cast<int>(k.key.size()) + 2,
                 std::string(k.section) + "." + std::string(k.key), "..");
    ++checked;
  }
  EXPECT_GE(checked, 25);
}

// README.md's configuration reference is exactly what the table renders (regenerate it with
// scripts/config_reference.sh).
TEST(ConfigKeys, ReadmeHoldsTheGeneratedReference) {
  const char* root = std::getenv("ROCEDP_SOURCE_DIR");
  ASSERT_NE(root, nullptr) << "ROCEDP_SOURCE_DIR is not set";
  std::ifstream in(std::filesystem::path(root) / "README.md");
  ASSERT_TRUE(in) << "cannot read README.md";
  const std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string begin =
      "<!-- BEGIN config-reference: generated by scripts/config_reference.sh -->\n";
  const std::string end = "<!-- END config-reference -->";
  const size_t b = readme.find(begin);
  const size_t e = readme.find(end);
  ASSERT_NE(b, std::string::npos) << "README.md has no " << begin;
  ASSERT_NE(e, std::string::npos) << "README.md has no " << end;
  ASSERT_LT(b, e);
  EXPECT_EQ(readme.substr(b + begin.size(), e - b - begin.size()), config_reference())
      << "README.md's configuration reference differs from the key table: run "
         "scripts/config_reference.sh";
}

}  // namespace
}  // namespace rocedp::config
