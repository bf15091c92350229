// The public runtime calls beyond open_adapter itself (include/rocedp/runtime.hpp):
// load_config_file, configure_logging, and an open AdapterRuntime's link_up, resolve_neighbour
// and engine_counters, drop_counters, each for either of its two ports (an adapter each). One
// runtime (EAL starts once per process) on two net_ring ports, whose one ring each carries what
// the port sends back to itself; the polling core runs inline, driven
// by the calls' own waits. EAL --no-huge, label eal.

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "rocedp/rocedp.hpp"
#include "tests/common/runtime_dir.hpp"

namespace rocedp {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("rdp-open-adapter-" + std::to_string(getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

std::string yaml(const std::string& prefix) {
  return "eal: {lcores: [0, 1], main_lcore: 0, memory_mb: 256, file_prefix: " + prefix +
         ", extra_args: [\"--no-pci\", \"--no-telemetry\"]}\n"
         "ports:\n"
         "  - name: loop0\n"
         "    devargs: net_ring0\n"
         "    mac: \"02:00:00:00:33:01\"\n"
         "    address: 198.18.33.1/24\n"
         "    ipv6: \"fd52::33:1\"\n"
         "    neighbours: [{ip: 198.18.33.2, mac: \"02:00:00:00:33:02\"}]\n"
         "    fault: {direction: rx, drop_pct: 100}\n"
         "  - name: loop1\n"
         "    devargs: net_ring1\n"
         "    mac: \"02:00:00:00:34:01\"\n"
         "    address: 198.18.34.1/24\n"
         "    neighbours: [{ip: 198.18.34.2, mac: \"02:00:00:00:34:02\"}]\n"
         "    fault: {direction: rx, delay_us: 10}\n"
         "dataplane: {lcores: [1], mbuf_count: 4095}\n"
         "control: {arp_retry_ms: 20, arp_retries: 2}\n"
         "telemetry: {enabled: false}\n";
}

TEST(OpenAdapter, LoadConfigFileReadsAFileOrSaysWhereItIsWrong) {
  TempDir dir;
  config::Config cfg;
  std::string error;
  ASSERT_TRUE(load_config_file(dir.write("good.yaml", yaml("x")), &cfg, &error)) << error;
  ASSERT_EQ(cfg.ports.size(), 2u);
  EXPECT_EQ(cfg.ports[0].devargs, "net_ring0");
  EXPECT_EQ(cfg.control.arp_retry_ms, 20u);

  const std::string bad = dir.write("bad.yaml", "ports:\n  - name: p\n    mtu: many\n");
  EXPECT_FALSE(load_config_file(bad, &cfg, &error));
  EXPECT_NE(error.find(bad + ":3:"), std::string::npos) << error;
  EXPECT_FALSE(load_config_file((dir.path / "missing.yaml").string(), &cfg, &error));
}

TEST(OpenAdapter, RuntimeReportsLinkResolvesNeighboursAndCountsItsEngine) {
  TempDir dir;
  // configure_logging: the start-up's info lines go to the file.
  config::LoggingConfig logging;
  logging.level = config::LoggingConfig::Level::kInfo;
  logging.file = (dir.path / "rocedp.log").string();
  configure_logging(logging);

  const test::RuntimeDirRemover runtime_dir("rdp-open-adapter-" + std::to_string(getpid()));
  config::Config cfg;
  std::string error;
  ASSERT_TRUE(load_config_file(dir.write("rt.yaml", yaml(runtime_dir.prefix())), &cfg, &error))
      << error;
  OpenOptions options;
  options.program = "test_open_adapter";
  options.launch_cores = false;
  options.telemetry = false;
  auto rt = open_adapter(cfg, options, &error);
  ASSERT_TRUE(rt) << error;
  configure_logging(config::LoggingConfig{config::LoggingConfig::Level::kWarning, std::nullopt});
  std::stringstream log;
  log << std::ifstream(*logging.file).rdbuf();
  EXPECT_NE(log.str().find("level=info"), std::string::npos) << log.str();

  EXPECT_TRUE(rt->wait_until([&] { return rt->link_up(); }, std::chrono::seconds(5)));

  // A static neighbour answers at once; an address nobody answers for fails after the retries.
  std::array<uint8_t, 6> mac{};
  ASSERT_TRUE(rt->resolve_neighbour(0xC6122102, &mac, std::chrono::seconds(5)));
  EXPECT_EQ(mac, (std::array<uint8_t, 6>{0x02, 0x00, 0x00, 0x00, 0x33, 0x02}));
  EXPECT_FALSE(rt->resolve_neighbour(0xC6122109, &mac, std::chrono::seconds(5)));

  // IPv6: the port's address in PortInfo; a neighbour nobody answers for (every frame the ring
  // loops back is dropped) is unreachable after the retries, ours and a group never resolve.
  const PortInfo info = rt->port();
  ASSERT_TRUE(info.has_ip6);
  const std::array<uint8_t, 16> ours{0xfd, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x33, 0, 1};
  EXPECT_EQ(info.ip6, ours);
  std::array<uint8_t, 16> absent = ours;
  absent[15] = 9;
  EXPECT_FALSE(rt->resolve_neighbour6(absent, &mac, std::chrono::seconds(5)));
  EXPECT_FALSE(rt->resolve_neighbour6(ours, &mac, std::chrono::seconds(5)));
  const std::array<uint8_t, 16> all_nodes{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  EXPECT_FALSE(rt->resolve_neighbour6(all_nodes, &mac, std::chrono::seconds(5)));

  // Inline mode: the engine's counters by name, tx_no_room last; none for a core that is not.
  const auto counters = rt->engine_counters(0);
  ASSERT_GT(counters.size(), 1u);
  EXPECT_EQ(counters.back().name, "tx_no_room");
  bool named = true;
  for (const auto& c : counters) named &= !c.name.empty();
  EXPECT_TRUE(named);
  EXPECT_TRUE(rt->engine_counters(1).empty());

  // The second port: its own adapter, its own neighbours (port 0's static entry is not its), the
  // same counters for its engine on the core; nothing past the last port.
  ASSERT_EQ(rt->port_count(), 2u);
  EXPECT_EQ(rt->port(1).name, "loop1");
  EXPECT_EQ(rt->port(1).ip, 0xC6122201u);
  EXPECT_NE(&rt->adapter(1), &rt->adapter(0));
  EXPECT_EQ(&rt->adapter(), &rt->adapter(0));
  EXPECT_TRUE(rt->wait_until([&] { return rt->link_up(1); }, std::chrono::seconds(5)));
  EXPECT_FALSE(rt->link_up(2));
  ASSERT_TRUE(rt->resolve_neighbour(0xC6122202, &mac, std::chrono::seconds(5), 1));
  EXPECT_EQ(mac, (std::array<uint8_t, 6>{0x02, 0x00, 0x00, 0x00, 0x34, 0x02}));
  EXPECT_FALSE(rt->resolve_neighbour(0xC6122102, &mac, std::chrono::seconds(5), 1));
  EXPECT_FALSE(rt->resolve_neighbour(0xC6122202, &mac, std::chrono::seconds(5), 2));
  NdkAdapterInfo info1{};
  size_t size1 = sizeof(info1);
  EXPECT_EQ(rt->adapter(1).query_adapter_info(&info1, &size1), STATUS_SUCCESS);
  EXPECT_EQ(rt->engine_counters(0, 1).size(), counters.size());
  EXPECT_TRUE(rt->engine_counters(0, 2).empty());

  // What never reached the engine: every drop reason by name, then the ports' fault stages,
  // summed: the first dropped everything its ring looped back (the unanswered ARP requests above
  // among it), the second delayed what its ring looped back (its gratuitous ARP at least).
  const auto drops = rt->drop_counters();
  auto value = [&](const std::string& name) -> int64_t {
    for (const auto& c : drops)
      if (c.name == name) return static_cast<int64_t>(c.value);
    return -1;
  };
  EXPECT_EQ(value("bad_icrc"), 0);
  EXPECT_EQ(value("unknown_qpn"), 0);
  EXPECT_GE(value("fault_dropped"), 3);
  EXPECT_EQ(value("fault_duplicated"), 0);
  EXPECT_GE(value("fault_delayed"), 1);
  EXPECT_EQ(drops.back().name, "fault_delayed");

  EXPECT_TRUE(rt->stop());
  EXPECT_FALSE(rt->link_up());
}

}  // namespace
}  // namespace rocedp
