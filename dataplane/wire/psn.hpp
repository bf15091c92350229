#pragma once
// 24-bit packet sequence numbers (IBTA §9.7.1). Comparison follows rxe's
// psn_compare: the difference shifted into the top 24 bits of an int32, so
// "a before b" holds when b is less than 2^23 ahead of a, across the wrap.

#include <cstdint>

namespace rocedp::wire {

inline constexpr std::uint32_t kPsnMask = 0xFFFFFF;
inline constexpr std::uint32_t kPsnModulus = 0x1000000;

constexpr std::uint32_t psn_mask(std::uint32_t v) {
  return v & kPsnMask;
}
constexpr std::uint32_t psn_add(std::uint32_t psn, std::uint32_t n) {
  return (psn + n) & kPsnMask;
}
constexpr std::uint32_t psn_next(std::uint32_t psn) {
  return psn_add(psn, 1);
}
constexpr std::uint32_t psn_sub(std::uint32_t psn, std::uint32_t n) {
  return (psn - n) & kPsnMask;
}

// Signed distance from b to a, in [-2^23, 2^23): positive when a is after b.
constexpr std::int32_t psn_diff(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::int32_t>((a - b) << 8) >> 8;
}
// <0, 0, >0 like rxe's psn_compare(a, b).
constexpr std::int32_t psn_compare(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::int32_t>((a - b) << 8);
}
constexpr bool psn_lt(std::uint32_t a, std::uint32_t b) {
  return psn_compare(a, b) < 0;
}
constexpr bool psn_le(std::uint32_t a, std::uint32_t b) {
  return psn_compare(a, b) <= 0;
}
constexpr bool psn_gt(std::uint32_t a, std::uint32_t b) {
  return psn_compare(a, b) > 0;
}
constexpr bool psn_ge(std::uint32_t a, std::uint32_t b) {
  return psn_compare(a, b) >= 0;
}
// Forward distance from `from` to `to` (0..2^24-1), e.g. packets outstanding.
constexpr std::uint32_t psn_forward(std::uint32_t from, std::uint32_t to) {
  return (to - from) & kPsnMask;
}

static_assert(psn_next(kPsnMask) == 0);
static_assert(psn_lt(kPsnMask, 0) && psn_gt(0, kPsnMask));
static_assert(psn_diff(2, kPsnMask - 1) == 4);

}  // namespace rocedp::wire
