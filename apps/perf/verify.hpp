#pragma once
// --verify: every byte of every message slot is a function of (slot, offset), so a byte landing
// in the wrong place, a stale byte or a lost message all show. --verify-seed changes this
// process's pattern only: the negative test that proves a mismatch is reported.

#include <cstdint>

namespace rocedp::perf {

inline uint64_t g_pattern_seed = 0;

inline uint8_t pattern(uint64_t slot, uint64_t k) {
  const uint64_t x =
      (slot + 1 + g_pattern_seed) * 0x9E3779B97F4A7C15ull + k * 0xBF58476D1CE4E5B9ull;
  return static_cast<uint8_t>(x >> 56);
}
inline void fill_slot(uint8_t* p, uint64_t slot, uint64_t len) {
  for (uint64_t k = 0; k < len; ++k) p[k] = pattern(slot, k);
}
/// The bytes of the slot that differ from the pattern.
inline uint64_t check_slot(const uint8_t* p, uint64_t slot, uint64_t len) {
  uint64_t bad = 0;
  for (uint64_t k = 0; k < len; ++k) bad += p[k] != pattern(slot, k);
  return bad;
}

/// The slot of message i on QP q: --verify gives every message its own slot; otherwise every
/// message uses slot 0 (perftest reuses one buffer).
struct Slots {
  bool verify = false;
  uint64_t iters = 0, size = 0;
  uint64_t slot(uint64_t q, uint64_t i) const { return verify ? q * iters + i : 0; }
  uint64_t offset(uint64_t q, uint64_t i) const { return slot(q, i) * size; }
};

/// Latency ping-pongs: the last byte of message i, which the peer watches for.
inline uint8_t marker(uint64_t i) {
  return static_cast<uint8_t>(i % 255 + 1);
}

}  // namespace rocedp::perf
