// The two-adapter pair under the pmd fault injector (5% drop, 5% reorder, 1%
// duplicate, 1% corrupt, on both ports' RX, i.e. both directions): 100,000 mixed operations on
// four QPs complete exactly once, in posting order, byte-exact, with no hang (a generous
// deadline bounds the run; it is not a performance assertion).

#include <gtest/gtest.h>

#include "tests/ndk/ndk_traffic.hpp"

namespace rocedp::test {
namespace {

class NdkFaults : public TrafficFixture {
 protected:
  config::FaultConfig fault(uint64_t seed) const {
    config::FaultConfig f;
    f.direction = config::FaultConfig::Direction::kRx;
    f.drop_pct = 5;
    f.duplicate_pct = 1;
    f.corrupt_pct = 1;
    f.reorder_window = 8;
    f.reorder_pct = 5;
    f.seed = seed;
    return f;
  }
  config::FaultConfig fault_a() const override { return fault(11); }
  config::FaultConfig fault_b() const override { return fault(23); }
  void TearDown() override {
    close_pairs();
    TrafficFixture::TearDown();
  }
};

TEST_F(NdkFaults, HundredThousandMixedOperationsCompleteExactlyOnceInOrder) {
  // ACK timeout 1 ms: one thread polls all four cores in turn, and a round under a sanitizer can
  // outlast 262 µs often enough to spend a QP's seven retries on timers of the harness's making.
  make_pairs(4, 8);
  const std::string err = run(25'000, std::chrono::seconds(900));
  ASSERT_EQ(err, "");
  uint64_t total = 0;
  for (auto& p : pairs_) {
    EXPECT_EQ(p->completed, 25'000u);
    EXPECT_EQ(p->recv_done, p->send_seq.size());
    total += p->completed;
  }
  EXPECT_EQ(total, 100'000u);
  const pmd::PortStats sa = a_.port->stats();
  const pmd::PortStats sb = b_.port->stats();
  EXPECT_GT(sa.fault.dropped + sb.fault.dropped, 0u) << "the injector was active";
  EXPECT_GT(sa.fault.corrupted + sb.fault.corrupted, 0u);
  EXPECT_GT(sa.fault.duplicated + sb.fault.duplicated, 0u);
  EXPECT_GT(sa.fault.reordered + sb.fault.reordered, 0u);
}

}  // namespace
}  // namespace rocedp::test
