// control/raw_port.hpp, the raw baseline's hook: frames in and out of a port with no RDMA stack.
// A net_ring port's one ring carries what it sends back to itself, so every frame sent is
// received, with its header and length. EAL --no-huge, label eal.

#include "control/raw_port.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "tests/common/runtime_dir.hpp"

namespace rocedp::control {
namespace {

struct Seen {
  std::vector<uint16_t> lengths;
  std::vector<std::string> heads;
};

void record(void* ctx, const uint8_t* frame, uint16_t len) {
  auto* s = static_cast<Seen*>(ctx);
  s->lengths.push_back(len);
  s->heads.emplace_back(reinterpret_cast<const char*>(frame), 4);
}

TEST(RawPort, SendsFramesWithTheHeaderAndLengthsAndReceivesOrBouncesThem) {
  const test::RuntimeDirRemover runtime_dir("rdp-raw-port-" + std::to_string(getpid()));
  config::Config cfg;
  config::PortConfig p;
  p.name = "loop0";
  p.devargs = "net_ring0";
  p.mac = config::MacAddress{{0x02, 0x00, 0x00, 0x00, 0x34, 0x01}};
  p.address.value = 0xC6122201;
  cfg.ports.push_back(p);
  cfg.eal.lcores = {0};
  cfg.eal.main_lcore = 0;
  cfg.eal.memory_mb = 256;
  cfg.eal.file_prefix = runtime_dir.prefix();
  cfg.eal.extra_args = {"--no-pci", "--no-telemetry"};
  cfg.dataplane.lcores = {0};
  cfg.dataplane.mbuf_count = 4095;
  cfg.telemetry.enabled = false;
  std::string error;
  auto port = RawPort::open(cfg, "test_raw_port", &error);
  ASSERT_TRUE(port) << error;
  EXPECT_TRUE(port->wait_until([&] { return port->link_up(); }, std::chrono::seconds(5)));
  const PortInfo info = port->port();
  EXPECT_EQ(info.name, "loop0");
  EXPECT_EQ(info.ip, 0xC6122201u);
  EXPECT_EQ(info.mac, p.mac->bytes);

  const uint8_t header[4] = {'R', 'A', 'W', '!'};
  const uint16_t lengths[3] = {60, 128, 1514};
  EXPECT_EQ(port->send(header, sizeof(header), lengths, 3), 3u);
  Seen seen;
  EXPECT_EQ(port->receive(&record, &seen), 3u);
  EXPECT_EQ(seen.lengths, (std::vector<uint16_t>{60, 128, 1514}));
  EXPECT_EQ(seen.heads, (std::vector<std::string>(3, "RAW!")));

  // A bounce sends the frames back unchanged: they come round once more.
  EXPECT_EQ(port->send(header, sizeof(header), lengths, 1), 1u);
  EXPECT_EQ(port->receive(nullptr, nullptr, /*bounce=*/true), 1u);
  Seen again;
  EXPECT_EQ(port->receive(&record, &again), 1u);
  EXPECT_EQ(again.lengths, (std::vector<uint16_t>{60}));
  EXPECT_EQ(port->receive(nullptr, nullptr), 0u);

  // At most kBurst per call; nothing counted against the pool or the ring here.
  std::vector<uint16_t> many(RawPort::kBurst + 8, 64);
  EXPECT_EQ(port->send(header, sizeof(header), many.data(), static_cast<unsigned>(many.size())),
            RawPort::kBurst);
  EXPECT_EQ(port->receive(nullptr, nullptr), RawPort::kBurst);
  EXPECT_EQ(port->no_buffer(), 0u);
  EXPECT_EQ(port->tx_full(), 0u);
  EXPECT_TRUE(port->stop());
}

}  // namespace
}  // namespace rocedp::control
