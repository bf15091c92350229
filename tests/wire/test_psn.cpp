// 24-bit PSN arithmetic with wraparound (rxe psn_compare semantics).
#include "dataplane/wire/psn.hpp"

#include <gtest/gtest.h>

namespace rocedp::wire {
namespace {

TEST(Psn, AddAndNextWrapAt24Bits) {
  EXPECT_EQ(psn_next(0xFFFFFE), 0xFFFFFFu);
  EXPECT_EQ(psn_next(0xFFFFFF), 0u);
  EXPECT_EQ(psn_add(0xFFFFF0, 0x20), 0x10u);
  EXPECT_EQ(psn_sub(0x5, 0x10), 0xFFFFF5u);
  EXPECT_EQ(psn_mask(0x12345678), 0x345678u);
}

TEST(Psn, CompareAcrossTheWrap) {
  EXPECT_TRUE(psn_lt(0xFFFFFF, 0));
  EXPECT_TRUE(psn_gt(0, 0xFFFFFF));
  EXPECT_TRUE(psn_lt(0xFFF000, 0x000FFF));
  EXPECT_TRUE(psn_le(7, 7));
  EXPECT_TRUE(psn_ge(7, 7));
  EXPECT_EQ(psn_compare(7, 7), 0);
  EXPECT_FALSE(psn_lt(7, 7));
  // Half the space apart: 2^23 ahead counts as behind (sign bit), as in rxe.
  EXPECT_TRUE(psn_lt(0x800000, 0));
  EXPECT_TRUE(psn_gt(0x7FFFFF, 0));
}

TEST(Psn, DiffAndForwardDistance) {
  EXPECT_EQ(psn_diff(2, 0xFFFFFE), 4);
  EXPECT_EQ(psn_diff(0xFFFFFE, 2), -4);
  EXPECT_EQ(psn_diff(100, 100), 0);
  EXPECT_EQ(psn_forward(0xFFFFFE, 2), 4u);
  EXPECT_EQ(psn_forward(2, 0xFFFFFE), 0xFFFFFCu);
  for (std::uint32_t base : {0u, 1u, 0x7FFFFFu, 0x800000u, 0xFFFFFFu}) {
    for (std::uint32_t n : {0u, 1u, 1000u, 0x7FFFFFu}) {
      EXPECT_EQ(psn_diff(psn_add(base, n), base), static_cast<std::int32_t>(n)) << base << "+" << n;
      EXPECT_EQ(psn_forward(base, psn_add(base, n)), n);
    }
  }
}

}  // namespace
}  // namespace rocedp::wire
