#include "dataplane/rc/ib_timers.hpp"

#include <gtest/gtest.h>

namespace rocedp::rc {
namespace {

TEST(IbTimers, LocalAckTimeout) {
  EXPECT_FALSE(local_ack_timeout_ns(0).has_value());  // 0 = infinite
  EXPECT_EQ(local_ack_timeout_ns(1).value(), 8192u);
  EXPECT_EQ(local_ack_timeout_ns(14).value(), 4096ull << 14);  // perftest default: ~67 ms
  EXPECT_EQ(local_ack_timeout_ns(14).value(), 67108864u);
  EXPECT_EQ(local_ack_timeout_ns(31).value(), 4096ull << 31);
  EXPECT_EQ(local_ack_timeout_ns(40).value(), 4096ull << 31);  // clamped to the 5-bit field
}

TEST(IbTimers, RnrTable) {
  EXPECT_EQ(rnr_timer_us(0), 655360u);
  EXPECT_EQ(rnr_timer_us(1), 10u);
  EXPECT_EQ(rnr_timer_us(12), 640u);
  EXPECT_EQ(rnr_timer_us(25), 61440u);  // rxe has 61410 here: a typo
  EXPECT_EQ(rnr_timer_us(31), 491520u);
  EXPECT_EQ(rnr_timer_us(32 + 1), 10u);  // only the 5-bit code counts
  for (uint8_t c = 2; c < 32; ++c) EXPECT_GT(rnr_timer_us(c), rnr_timer_us(c - 1)) << int(c);
  EXPECT_EQ(rnr_code_at_least_us(1), 1);
  EXPECT_EQ(rnr_code_at_least_us(640), 12);
  EXPECT_EQ(rnr_code_at_least_us(641), 13);
  EXPECT_EQ(rnr_code_at_least_us(600000), 0);  // longer than code 31: code 0 (655.36 ms)
}

TEST(IbTimers, AckCredits) {
  EXPECT_EQ(ack_credits(0).value(), 0u);
  EXPECT_EQ(ack_credits(5).value(), 6u);
  EXPECT_EQ(ack_credits(30).value(), 32768u);
  EXPECT_FALSE(ack_credits(kAckCreditsUnlimited).has_value());
  EXPECT_EQ(ack_credit_code(0), 0);
  EXPECT_EQ(ack_credit_code(5), 4);  // 4 credits: never advertise more than we have
  EXPECT_EQ(ack_credit_code(6), 5);
  EXPECT_EQ(ack_credit_code(100000), 30);
  for (uint8_t c = 0; c <= 30; ++c) EXPECT_EQ(ack_credit_code(ack_credits(c).value()), c);
}

static_assert(local_ack_timeout_ns(2).value() == 16384);
static_assert(rnr_timer_us(25) == 61440);

}  // namespace
}  // namespace rocedp::rc
