// Pages of the telemetry tables (control/telemetry_page.hpp): which rows fit one reply, and the
// `from=N` parameter.

#include <gtest/gtest.h>

#include <vector>

#include "control/telemetry_page.hpp"

namespace rocedp::control {
namespace {

TEST(TelemetryPage, JsonBytesOfNumbersAndStrings) {
  EXPECT_EQ(json_u64_bytes(0), 2u);
  EXPECT_EQ(json_u64_bytes(9), 2u);
  EXPECT_EQ(json_u64_bytes(10), 3u);
  EXPECT_EQ(json_u64_bytes(16777215), 9u);
  EXPECT_EQ(json_u64_bytes(UINT64_MAX), 21u);  // 20 digits
  EXPECT_EQ(json_string_bytes(""), 3u);
  EXPECT_EQ(json_string_bytes("RTS"), 6u);
}

TEST(TelemetryPage, RowsThatFitTheBudgetAndTheArrayLimit) {
  const auto ten = [](size_t) { return size_t{10}; };
  // 100 fixed + 10 a row in 1000 bytes: 90 rows.
  RowPage p = page_rows(1000, 0, 100, 1000, 512, ten);
  EXPECT_EQ(p.first, 0u);
  EXPECT_EQ(p.end, 90u);
  // The next page starts where the last ended; the last page is short.
  p = page_rows(1000, 990, 100, 1000, 512, ten);
  EXPECT_EQ(p.first, 990u);
  EXPECT_EQ(p.end, 1000u);
  // The array limit binds before the budget.
  p = page_rows(1000, 0, 0, 1'000'000, 512, ten);
  EXPECT_EQ(p.end - p.first, 512u);
  // At or past the end: an empty page at the end.
  p = page_rows(5, 5, 0, 1000, 512, ten);
  EXPECT_EQ(p.first, 5u);
  EXPECT_EQ(p.end, 5u);
  p = page_rows(5, 9, 0, 1000, 512, ten);
  EXPECT_EQ(p.first, 5u);
  EXPECT_EQ(p.end, 5u);
  // A row larger than the budget still goes out alone, so a client always gets further.
  p = page_rows(3, 1, 100, 150, 512, [](size_t) { return size_t{500}; });
  EXPECT_EQ(p.first, 1u);
  EXPECT_EQ(p.end, 2u);
  // Rows of different sizes: each costs what it costs.
  const std::vector<size_t> cost = {400, 300, 200, 100};
  p = page_rows(4, 0, 0, 900, 512, [&](size_t i) { return cost[i]; });
  EXPECT_EQ(p.end, 3u);
}

TEST(TelemetryPage, FromParameter) {
  size_t first = 99;
  EXPECT_TRUE(parse_page_param("from=0", &first));
  EXPECT_EQ(first, 0u);
  EXPECT_TRUE(parse_page_param("from=600", &first));
  EXPECT_EQ(first, 600u);
  for (const char* bad : {"", "from=", "from=x", "from=1x", "from=-1", "0x12", "from= 1", "From=1"})
    EXPECT_FALSE(parse_page_param(bad, &first)) << bad;
}

}  // namespace
}  // namespace rocedp::control
