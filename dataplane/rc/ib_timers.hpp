#pragma once
// IBTA timer and credit encodings used by the RC transport. All constexpr.
//
// - Local ACK timeout (IBTA vol 1, QP attribute "Local ACK Timeout"; perftest's -u):
//   4.096 µs × 2^timeout, 5-bit field; 0 means infinite (no retransmission timer).
// - RNR NAK timer (IBTA vol 1, AETH "RNR NAK timer" field encoding): the 5-bit code an RNR NAK
//   carries in its AETH syndrome. Code 0 is the longest, 655.36 ms. The Linux rxe driver's copy
//   of this table has a typo at code 25 (61410 µs); the IBTA value is 61.44 ms.
// - ACK credit encoding (IBTA vol 1, AETH credit count encoding; rdmavt's credit_table): the low 5
// bits of an ACK syndrome;
//   0x1F means "invalid / unlimited" (end-to-end flow control not in use).

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace rocedp::rc {

/// Local ACK timeout in nanoseconds for the 5-bit `timeout` code (4096 ns × 2^timeout);
/// std::nullopt for 0, which means infinite. Codes above 31 are clamped to 31.
constexpr std::optional<uint64_t> local_ack_timeout_ns(uint8_t timeout) {
  if (timeout == 0) return std::nullopt;
  const uint8_t code = timeout > 31 ? 31 : timeout;
  return uint64_t{4096} << code;
}

/// RNR NAK timer codes 0..31 in microseconds (IBTA AETH RNR timer encoding).
inline constexpr std::array<uint32_t, 32> kRnrTimerUs = {
    655360,                                                // 0
    10,     20,     30,     40,    60,    80,     120,     // 1..7
    160,    240,    320,    480,   640,   960,    1280,    // 8..14
    1920,   2560,   3840,   5120,  7680,  10240,  15360,   // 15..21
    20480,  30720,  40960,  61440, 81920, 122880, 163840,  // 22..28
    245760, 327680, 491520,                                // 29..31
};

/// Microseconds the requester waits after an RNR NAK carrying `code` (low 5 bits used).
constexpr uint32_t rnr_timer_us(uint8_t code) {
  return kRnrTimerUs[code & 0x1F];
}

/// The smallest RNR timer code whose delay is at least `us` (code 0 if none of 1..31 is long
/// enough, since code 0 is the longest delay). For the responder's configured min RNR timer.
constexpr uint8_t rnr_code_at_least_us(uint32_t us) {
  for (uint8_t code = 1; code < 32; ++code) {
    if (kRnrTimerUs[code] >= us) return code;
  }
  return 0;
}

/// AETH credit codes 0..30 → number of receive WQEs the responder has (IBTA AETH credit encoding).
inline constexpr std::array<uint32_t, 31> kAckCredits = {
    0,   1,   2,   3,   4,    6,    8,    12,   16,   24,   32,   48,    64,    96,    128,   192,
    256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
};

/// Credit code meaning "no credit information / unlimited".
inline constexpr uint8_t kAckCreditsUnlimited = 0x1F;

/// Credits encoded by `code`; std::nullopt for 0x1F (unlimited). Low 5 bits used.
constexpr std::optional<uint32_t> ack_credits(uint8_t code) {
  const uint8_t c = code & 0x1F;
  if (c == kAckCreditsUnlimited) return std::nullopt;
  return kAckCredits[c];
}

/// The code to advertise `available` receive WQEs: the largest code whose credit count does not
/// exceed `available` (advertising more than we have would invite RNR NAKs).
constexpr uint8_t ack_credit_code(uint32_t available) {
  uint8_t code = 0;
  for (size_t c = 0; c < kAckCredits.size(); ++c) {
    if (kAckCredits[c] <= available) code = static_cast<uint8_t>(c);
  }
  return code;
}

/// RNR retry count 7 means "retry forever" (IBTA vol 1, QP attribute RNR Retry Count).
inline constexpr uint8_t kRnrRetryInfinite = 7;

}  // namespace rocedp::rc
