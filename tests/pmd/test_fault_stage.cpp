// The fault stage on real mbufs, driven with a fake clock (cycles_per_us = 1, so times are µs):
// drop rate, duplicates, one-byte corruption, reordering within the window, delay, and no leak.

#include "pmd/fault_stage.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "pmd/port.hpp"
#include "tests/pmd/eal_env.hpp"

namespace rocedp::pmd {
namespace {

using test::make_frame;
using test::pool;
using test::to_bytes;
using test::to_mbuf;

struct PoolLeakCheck {
  uint32_t start = pool().available();
  ~PoolLeakCheck() { EXPECT_EQ(pool().available(), start) << "mbufs leaked"; }
};

FaultStage make_stage(const config::FaultConfig& c, uint32_t capacity = 1024) {
  return FaultStage(c, 0, pool().get(), capacity, 1.0);
}

void push_frames(FaultStage& s, uint32_t seq0, uint32_t n, uint64_t now, uint32_t len = 128) {
  std::vector<rte_mbuf*> v;
  for (uint32_t i = 0; i < n; ++i) v.push_back(to_mbuf(make_frame(seq0 + i, len)));
  ASSERT_LE(n, s.room());
  s.push(v.data(), n, now);
}

std::vector<std::vector<uint8_t>> pop_all(FaultStage& s, uint64_t now) {
  std::vector<std::vector<uint8_t>> out;
  rte_mbuf* buf[32];
  for (;;) {
    uint32_t k = s.pop_ready(buf, 32, now);
    if (k == 0) break;
    for (uint32_t i = 0; i < k; ++i) {
      out.push_back(to_bytes(buf[i]));
      rte_pktmbuf_free(buf[i]);
    }
  }
  return out;
}

TEST(FaultStage, DropsCloseToTheConfiguredRateAndCountsEachDrop) {
  PoolLeakCheck leaks;
  config::FaultConfig c;
  c.drop_pct = 10;
  c.seed = 5;
  FaultStage s = make_stage(c);
  uint64_t delivered = 0;
  for (uint32_t base = 0; base < 20000; base += 200) {
    push_frames(s, base, 200, 0);
    delivered += pop_all(s, 0).size();
  }
  const uint64_t dropped = s.counters().dropped.load();
  EXPECT_EQ(delivered + dropped, 20000u);
  EXPECT_NEAR(static_cast<double>(dropped), 2000, 5 * 43);  // sd = sqrt(20000 * .1 * .9)
  EXPECT_EQ(s.held(), 0u);
}

TEST(FaultStage, SameSeedDropsTheSameFrames) {
  PoolLeakCheck leaks;
  config::FaultConfig c;
  c.drop_pct = 30;
  c.seed = 77;
  auto survivors = [&] {
    FaultStage s = make_stage(c);
    push_frames(s, 0, 300, 0);
    std::vector<uint32_t> seqs;
    for (auto& f : pop_all(s, 0)) seqs.push_back(test::frame_seq(f));
    return seqs;
  };
  EXPECT_EQ(survivors(), survivors());
}

TEST(FaultStage, DuplicatesAreByteExactCopiesAndCounted) {
  PoolLeakCheck leaks;
  config::FaultConfig c;
  c.duplicate_pct = 100;
  FaultStage s = make_stage(c);
  push_frames(s, 10, 50, 0, 333);
  auto out = pop_all(s, 0);
  ASSERT_EQ(out.size(), 100u);
  for (uint32_t i = 0; i < 50; ++i) {
    EXPECT_EQ(out[2 * i], make_frame(10 + i, 333));
    EXPECT_EQ(out[2 * i + 1], make_frame(10 + i, 333));
  }
  EXPECT_EQ(s.counters().duplicated.load(), 50u);
}

TEST(FaultStage, DuplicateWithoutMbufsIsCountedAndTheOriginalStillGoes) {
  std::string error;
  auto tiny = PacketPool::create("tiny_dup", 3, 0, PacketPool::data_room_for_mtu(1500),
                                 SOCKET_ID_ANY, &error);
  ASSERT_TRUE(tiny) << error;
  {
    PoolLeakCheck leaks;
    config::FaultConfig c;
    c.duplicate_pct = 100;
    FaultStage s(c, 0, tiny->get(), 64, 1.0);
    push_frames(s, 0, 5, 0);
    EXPECT_EQ(s.counters().duplicated.load(), 3u);
    EXPECT_EQ(s.counters().duplicate_failed.load(), 2u);
    EXPECT_EQ(pop_all(s, 0).size(), 8u);
  }
  EXPECT_EQ(tiny->available(), 3u);
}

TEST(FaultStage, CorruptionChangesExactlyOneBytePastTheEthernetHeader) {
  PoolLeakCheck leaks;
  config::FaultConfig c;
  c.corrupt_pct = 100;
  c.seed = 3;
  FaultStage s = make_stage(c);
  push_frames(s, 0, 200, 0, 80);
  auto out = pop_all(s, 0);
  ASSERT_EQ(out.size(), 200u);
  for (uint32_t i = 0; i < 200; ++i) {
    auto want = make_frame(i, 80);
    ASSERT_EQ(out[i].size(), want.size());
    int diffs = 0;
    for (size_t b = 0; b < want.size(); ++b) {
      if (out[i][b] != want[b]) {
        ++diffs;
        EXPECT_GE(b, 14u) << "Ethernet header touched";
      }
    }
    EXPECT_EQ(diffs, 1) << "frame " << i;
  }
  EXPECT_EQ(s.counters().corrupted.load(), 200u);
}

TEST(FaultStage, CorruptionNeverWritesIntoAFrameSomeoneElseHolds) {
  PoolLeakCheck leaks;
  config::FaultConfig c;
  c.corrupt_pct = 100;
  FaultStage s = make_stage(c);
  rte_mbuf* m = to_mbuf(make_frame(1));
  rte_mbuf_refcnt_update(m, 1);  // the sender keeps a reference (e.g. for retransmission)
  s.push(&m, 1, 0);
  auto out = pop_all(s, 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0], make_frame(1));
  EXPECT_EQ(to_bytes(m), make_frame(1)) << "the sender's copy was modified";
  rte_pktmbuf_free(m);
}

// An Ethernet + IPv4 header (20 bytes, valid checksum) with ToS `tos`, then `pad` bytes.
std::vector<uint8_t> ipv4_frame(uint8_t tos, size_t pad = 40) {
  std::vector<uint8_t> f(14 + 20 + pad, 0);
  f[12] = 0x08;
  f[14] = 0x45;
  f[15] = tos;
  f[17] = static_cast<uint8_t>(20 + pad);
  f[22] = 64;
  f[23] = 17;
  for (int i = 0; i < 4; ++i) f[26 + i] = static_cast<uint8_t>(198 - i), f[30 + i] = 18 + i;
  uint32_t sum = 0;
  for (size_t i = 14; i < 34; i += 2) sum += (f[i] << 8) | f[i + 1];
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  f[24] = static_cast<uint8_t>(~sum >> 8);
  f[25] = static_cast<uint8_t>(~sum);
  return f;
}
bool ipv4_checksum_ok(const std::vector<uint8_t>& f) {
  uint32_t sum = 0;
  for (size_t i = 14; i < 34; i += 2) sum += (f[i] << 8) | f[i + 1];
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  return sum == 0xFFFF;
}

// A congested switch marks CE on ECN-capable packets only (RFC 3168): ECT(0) and ECT(1) frames
// become CE with a valid header checksum, Not-ECT, CE and non-IPv4 frames pass unchanged, and a
// frame the sender still holds is marked in a copy.
TEST(FaultStage, CeMarkingMarksOnlyEcnCapableIpv4FramesAndKeepsTheChecksumValid) {
  PoolLeakCheck leaks;
  config::FaultConfig c;
  c.ce_pct = 100;
  FaultStage s = make_stage(c);
  const std::vector<std::vector<uint8_t>> in = {ipv4_frame(0x02), ipv4_frame(0x01),
                                                ipv4_frame(0xC2), ipv4_frame(0x00),
                                                ipv4_frame(0x03), make_frame(7)};
  std::vector<rte_mbuf*> v(in.size());
  std::transform(in.begin(), in.end(), v.begin(), [](const auto& f) { return to_mbuf(f); });
  rte_mbuf* held = v[2];
  rte_mbuf_refcnt_update(held, 1);
  s.push(v.data(), static_cast<uint32_t>(v.size()), 0);
  auto out = pop_all(s, 0);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i][15], in[i][15] | 3) << i;
    EXPECT_TRUE(ipv4_checksum_ok(out[i])) << i;
    std::vector<uint8_t> rest = out[i];
    rest[15] = in[i][15];
    rest[24] = in[i][24];
    rest[25] = in[i][25];
    EXPECT_EQ(rest, in[i]) << "only the ECN bits and the checksum change";
  }
  for (size_t i = 3; i < in.size(); ++i) EXPECT_EQ(out[i], in[i]) << i;
  EXPECT_EQ(s.counters().ce_marked.load(), 3u);
  EXPECT_EQ(to_bytes(held), in[2]) << "the sender's copy was modified";
  rte_pktmbuf_free(held);
}

// Marking CE where the new checksum computes to 0x0000 writes 0xFFFF, as Linux's nftables does
// (-0: the same sum, which receivers take; test_parser and test_rc_rx take it).
TEST(FaultStage, CeMarkingWritesAZeroChecksumAsLinuxDoes) {
  PoolLeakCheck leaks;
  config::FaultConfig c;
  c.ce_pct = 100;
  FaultStage s = make_stage(c);
  // ECT(0) with the identification chosen so that the checksum is 0x0001 before marking: CE adds
  // 1 to the ToS word, so it computes to 0x0000 after.
  std::vector<uint8_t> in;
  for (uint32_t id = 0; id <= 0xFFFF; ++id) {
    in = ipv4_frame(0x02);
    in[18] = static_cast<uint8_t>(id >> 8);
    in[19] = static_cast<uint8_t>(id);
    uint32_t sum = 0;
    for (size_t i = 14; i < 34; i += 2) sum += i == 24 ? 0 : (in[i] << 8) | in[i + 1];
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    if (static_cast<uint16_t>(~sum) == 0x0001) break;
  }
  in[24] = 0x00;
  in[25] = 0x01;
  ASSERT_TRUE(ipv4_checksum_ok(in));
  rte_mbuf* m = to_mbuf(in);
  s.push(&m, 1, 0);
  auto out = pop_all(s, 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0][15], 0x03);
  EXPECT_EQ(out[0][24], 0xFF);
  EXPECT_EQ(out[0][25], 0xFF);
  EXPECT_TRUE(ipv4_checksum_ok(out[0]));
}

TEST(FaultStage, ReorderPermutesWithinEachWindowOnly) {
  PoolLeakCheck leaks;
  config::FaultConfig c;
  c.reorder_window = 8;
  c.seed = 11;
  FaultStage s = make_stage(c);
  uint32_t permuted_windows = 0;
  uint64_t moved = 0;
  for (uint32_t w = 0; w < 100; ++w) {
    push_frames(s, 8 * w, 8, 0);
    auto out = pop_all(s, 0);
    ASSERT_EQ(out.size(), 8u);
    std::vector<uint32_t> seqs;
    seqs.reserve(out.size());
    for (auto& f : out) seqs.push_back(test::frame_seq(f));
    for (uint32_t i = 0; i < 8; ++i) moved += seqs[i] != 8 * w + i;
    std::vector<uint32_t> sorted = seqs;
    std::sort(sorted.begin(), sorted.end());
    std::vector<uint32_t> window(8);
    std::iota(window.begin(), window.end(), 8 * w);
    EXPECT_EQ(sorted, window) << "a frame left its window";
    permuted_windows += seqs != window;
  }
  EXPECT_GE(permuted_windows, 95u);
  EXPECT_EQ(s.counters().reordered.load(), moved);
}

TEST(FaultStage, ReorderPctPicksTheFramesThatTakePartTheOthersPassAtOnce) {
  PoolLeakCheck leaks;
  config::FaultConfig c;
  c.reorder_window = 4;
  c.reorder_pct = 0;
  FaultStage none = make_stage(c);
  push_frames(none, 0, 10, 0);
  auto out = pop_all(none, 0);
  ASSERT_EQ(out.size(), 10u) << "no frame takes part: nothing is held";
  for (uint32_t i = 0; i < 10; ++i) EXPECT_EQ(test::frame_seq(out[i]), i);

  c.reorder_pct = 25;
  c.seed = 3;
  FaultStage some = make_stage(c);
  uint64_t passed_at_once = 0, late = 0;
  std::vector<uint32_t> seqs;
  for (uint32_t k = 0; k < 400; ++k) {
    const uint64_t now = 1000 * uint64_t{k};
    push_frames(some, k, 1, now);
    // A frame that takes part waits in the window (until it fills or its hold time passes).
    for (auto& f : pop_all(some, now)) {
      seqs.push_back(test::frame_seq(f));
      passed_at_once += seqs.back() == k;
      late += seqs.back() != k;
    }
  }
  for (auto& f : pop_all(some, 1000 * 400 + FaultStage::kWindowHoldUs)) {
    seqs.push_back(test::frame_seq(f));
    ++late;
  }
  ASSERT_EQ(seqs.size(), 400u);
  std::vector<uint32_t> sorted = seqs;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 400; ++i) ASSERT_EQ(sorted[i], i) << "a frame lost or doubled";
  // About a quarter arrive after a later frame; the rest at once.
  EXPECT_GT(late, 60u);
  EXPECT_LT(late, 140u);
  EXPECT_EQ(passed_at_once + late, 400u);
}

TEST(FaultStage, APartialWindowIsReleasedAfterItsHoldTime) {
  PoolLeakCheck leaks;
  config::FaultConfig c;
  c.reorder_window = 8;
  FaultStage s = make_stage(c);
  push_frames(s, 0, 3, 1000);
  EXPECT_TRUE(pop_all(s, 1000 + FaultStage::kWindowHoldUs - 1).empty());
  EXPECT_EQ(s.held(), 3u);
  EXPECT_EQ(pop_all(s, 1000 + FaultStage::kWindowHoldUs).size(), 3u);
}

TEST(FaultStage, DelayHoldsFramesUntilTheirTimeComes) {
  PoolLeakCheck leaks;
  config::FaultConfig c;
  c.delay_us = 500;
  FaultStage s = make_stage(c);
  push_frames(s, 0, 10, 100);
  push_frames(s, 10, 10, 300);
  EXPECT_TRUE(pop_all(s, 599).empty());
  auto first = pop_all(s, 600);
  ASSERT_EQ(first.size(), 10u);
  for (uint32_t i = 0; i < 10; ++i) EXPECT_EQ(first[i], make_frame(i));
  EXPECT_TRUE(pop_all(s, 799).empty());
  auto second = pop_all(s, 800);
  ASSERT_EQ(second.size(), 10u);
  EXPECT_EQ(second[0], make_frame(10));
  EXPECT_EQ(s.counters().delayed.load(), 20u);
}

TEST(FaultStage, PeekLeavesFramesUntilConsumed) {
  PoolLeakCheck leaks;
  config::FaultConfig c;
  c.delay_us = 1;
  FaultStage s = make_stage(c);
  push_frames(s, 0, 4, 0);
  rte_mbuf* buf[4];
  ASSERT_EQ(s.peek_ready(buf, 4, 10), 4u);
  EXPECT_EQ(s.held(), 4u);
  s.consume(1);
  rte_pktmbuf_free(buf[0]);
  EXPECT_EQ(s.held(), 3u);
  auto rest = pop_all(s, 10);
  ASSERT_EQ(rest.size(), 3u);
  EXPECT_EQ(rest[0], make_frame(1));
}

TEST(FaultStage, RoomShrinksAsFramesAreHeldAndFlushFreesThemAll) {
  PoolLeakCheck leaks;
  config::FaultConfig c;
  c.delay_us = 1000000;
  c.duplicate_pct = 50;
  c.reorder_window = 4;
  FaultStage s = make_stage(c, 256);
  const uint32_t room0 = s.room();
  EXPECT_GT(room0, 0u);
  uint32_t pushed = 0;
  while (s.room() > 0) {
    push_frames(s, pushed, 1, 0);
    ++pushed;
  }
  EXPECT_GE(pushed, room0);
  EXPECT_TRUE(pop_all(s, 10).empty());
  const uint32_t held = s.held();
  EXPECT_EQ(held, pushed + s.counters().duplicated.load());
  EXPECT_EQ(s.flush(), held);
  EXPECT_EQ(s.counters().flushed.load(), held);
  EXPECT_EQ(s.held(), 0u);
}

TEST(FaultStage, DestructorFreesHeldFrames) {
  PoolLeakCheck leaks;
  config::FaultConfig c;
  c.delay_us = 1000000;
  FaultStage s = make_stage(c);
  push_frames(s, 0, 10, 0);
}

TEST(FaultStage, CountersAddUpIntoPortFaultStats) {
  config::FaultConfig c;
  c.drop_pct = 100;
  FaultStage s = make_stage(c);
  push_frames(s, 0, 7, 0);
  FaultStats st;
  st.dropped = 1;
  s.counters().add_to(st);
  EXPECT_EQ(st.dropped, 8u);
}

}  // namespace
}  // namespace rocedp::pmd
