// RxDispatch with a toy classifier (the first payload byte names the target): frames reach the
// right target in order, frames for the source come back locally, full rings and classifier
// drops are counted, and nothing leaks.

#include "pmd/rx_dispatch.hpp"

#include <gtest/gtest.h>

#include "tests/pmd/eal_env.hpp"

namespace rocedp::pmd {
namespace {

using test::pool;
using test::to_bytes;
using test::to_mbuf;

struct PoolLeakCheck {
  uint32_t start = pool().available();
  ~PoolLeakCheck() { EXPECT_EQ(pool().available(), start) << "mbufs leaked"; }
};

// Frame: 14-byte Ethernet header, then [target][seq hi][seq lo].
rte_mbuf* frame_for(uint8_t target, uint16_t seq) {
  std::vector<uint8_t> f(64, 0);
  f[14] = target;
  f[15] = static_cast<uint8_t>(seq >> 8);
  f[16] = static_cast<uint8_t>(seq);
  return to_mbuf(f);
}
uint16_t seq_of(rte_mbuf* m) {
  auto b = to_bytes(m);
  return static_cast<uint16_t>((b[15] << 8) | b[16]);
}
uint8_t target_of(rte_mbuf* m) {
  return to_bytes(m)[14];
}

uint16_t toy_classifier(void* ctx, rte_mbuf* m) {
  ++*static_cast<int*>(ctx);
  uint8_t t = rte_pktmbuf_mtod(m, const uint8_t*)[14];
  return t == 0xEE ? RxDispatch::kDrop : t;
}

std::vector<rte_mbuf*> drain(RxDispatch& d, uint16_t target, uint16_t batch = 32) {
  std::vector<rte_mbuf*> out;
  rte_mbuf* buf[64];
  for (;;) {
    uint16_t k = d.receive(target, buf, batch);
    if (k == 0) break;
    EXPECT_LE(k, batch) << "receive exceeded its bound";
    out.insert(out.end(), buf, buf + k);
  }
  return out;
}

void free_all(const std::vector<rte_mbuf*>& v) {
  for (rte_mbuf* m : v) rte_pktmbuf_free(m);
}

TEST(RxDispatch, FramesReachTheirTargetInOrderAndLocalOnesComeBack) {
  PoolLeakCheck leaks;
  RxDispatch d(3, 256);  // cores 0,1,2; target 3 = control
  EXPECT_EQ(d.control_target(), 3);
  std::vector<rte_mbuf*> in;
  for (uint16_t i = 0; i < 200; ++i) in.push_back(frame_for(static_cast<uint8_t>(i % 4), i));
  std::vector<rte_mbuf*> local(in.size());
  int calls = 0;
  uint16_t n_local = d.dispatch(1, in.data(), static_cast<uint16_t>(in.size()), toy_classifier,
                                &calls, local.data());
  EXPECT_EQ(calls, 200);
  ASSERT_EQ(n_local, 50);
  for (uint16_t i = 0; i < n_local; ++i) {
    EXPECT_EQ(target_of(local[i]), 1);
    EXPECT_EQ(seq_of(local[i]), 4 * i + 1) << "local frames keep their order";
  }
  free_all({local.begin(), local.begin() + n_local});
  for (uint16_t t : {0, 2, 3}) {
    auto got = drain(d, t);
    ASSERT_EQ(got.size(), 50u) << "target " << t;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(target_of(got[i]), t);
      EXPECT_EQ(seq_of(got[i]), 4 * i + t);
    }
    EXPECT_EQ(d.received(t), 50u);
    free_all(got);
  }
  EXPECT_TRUE(drain(d, 1).empty()) << "a core never receives its own frames through a ring";
  EXPECT_EQ(d.forwarded(1), 150u);
  EXPECT_EQ(d.ring_full_drops(1), 0u);
  EXPECT_EQ(d.classifier_drops(1), 0u);
}

TEST(RxDispatch, ClassifierDropsAndUnknownTargetsAreFreedAndCounted) {
  PoolLeakCheck leaks;
  RxDispatch d(2, 64);
  std::vector<rte_mbuf*> in = {frame_for(0xEE, 0), frame_for(9, 1), frame_for(2, 2),
                               frame_for(0xEE, 3)};
  rte_mbuf* local[4];
  int calls = 0;
  EXPECT_EQ(d.dispatch(0, in.data(), 4, toy_classifier, &calls, local), 0);
  EXPECT_EQ(d.classifier_drops(0), 3u);  // two kDrop, one target 9 that does not exist
  auto got = drain(d, 2);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(seq_of(got[0]), 2);
  free_all(got);
}

TEST(RxDispatch, AFullRingDropsAndCountsTheOverflow) {
  PoolLeakCheck leaks;
  RxDispatch d(2, 16);
  std::vector<rte_mbuf*> in;
  for (uint16_t i = 0; i < 40; ++i) in.push_back(frame_for(1, i));
  rte_mbuf* local[40];
  int calls = 0;
  EXPECT_EQ(d.dispatch(0, in.data(), 40, toy_classifier, &calls, local), 0);
  EXPECT_EQ(d.forwarded(0), 16u);
  EXPECT_EQ(d.ring_full_drops(0), 24u);
  auto got = drain(d, 1);
  ASSERT_EQ(got.size(), 16u);
  for (uint16_t i = 0; i < 16; ++i) EXPECT_EQ(seq_of(got[i]), i) << "the first 16 got through";
  free_all(got);
}

TEST(RxDispatch, ReceiveIsBoundedAndServesEverySource) {
  PoolLeakCheck leaks;
  RxDispatch d(3, 128);
  rte_mbuf* local[64];
  int calls = 0;
  // Sources 0 and 1 both send 60 frames to the control path (target 3).
  for (uint16_t src : {0, 1}) {
    std::vector<rte_mbuf*> in;
    for (uint16_t i = 0; i < 60; ++i)
      in.push_back(frame_for(3, static_cast<uint16_t>(src * 1000 + i)));
    d.dispatch(src, in.data(), 60, toy_classifier, &calls, local);
  }
  rte_mbuf* buf[8];
  uint16_t k = d.receive(3, buf, 8);
  ASSERT_EQ(k, 8);
  free_all({buf, buf + k});
  k = d.receive(3, buf, 8);
  ASSERT_EQ(k, 8);
  // The second batch starts with the other source: a busy source cannot starve the rest.
  EXPECT_EQ(seq_of(buf[0]) / 1000, 1);
  free_all({buf, buf + k});
  auto rest = drain(d, 3, 8);
  EXPECT_EQ(rest.size(), 120u - 16);
  free_all(rest);
}

TEST(RxDispatch, BurstsLargerThanOneChunkAreSplitCorrectly) {
  PoolLeakCheck leaks;
  RxDispatch d(2, 1024);
  std::vector<rte_mbuf*> in;
  for (uint16_t i = 0; i < 300; ++i) in.push_back(frame_for(static_cast<uint8_t>(i % 3), i));
  std::vector<rte_mbuf*> local(300);
  int calls = 0;
  uint16_t n_local = d.dispatch(0, in.data(), 300, toy_classifier, &calls, local.data());
  EXPECT_EQ(n_local, 100);
  free_all({local.begin(), local.begin() + n_local});
  for (uint16_t t : {1, 2}) {
    auto got = drain(d, t);
    ASSERT_EQ(got.size(), 100u);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(seq_of(got[i]), 3 * i + t);
    free_all(got);
  }
}

TEST(RxDispatch, DestructorFreesFramesStillInTheRings) {
  PoolLeakCheck leaks;
  RxDispatch d(2, 64);
  std::vector<rte_mbuf*> in;
  for (uint16_t i = 0; i < 30; ++i) in.push_back(frame_for(2, i));
  rte_mbuf* local[30];
  int calls = 0;
  d.dispatch(1, in.data(), 30, toy_classifier, &calls, local);
}

}  // namespace
}  // namespace rocedp::pmd
