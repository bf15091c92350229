#pragma once
// Why a polling core dropped a frame. Wire reasons (dataplane/wire/drop_reason.hpp: the RoCEv2
// parser refused it) come first, then the core's own reasons below; one flat index space so a
// core keeps all its drop counters in one array and telemetry prints one table (/rocedp/drops).
// Order is part of the telemetry output: append, never renumber.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dataplane/wire/drop_reason.hpp"

namespace rocedp::dataplane {

// X(enumerator, "name", "human description")
#define ROCEDP_CORE_DROP_REASONS(X)                                                             \
  X(kHandoffRingFull, "handoff_ring_full", "frame for another core or control met a full ring") \
  X(kNoTxRoom, "no_tx_room", "the TX queue did not take the frame")                             \
  X(kNoTxQueue, "no_tx_queue", "frame to send on a port this core owns no TX queue of")         \
  X(kNotForUs, "not_for_us", "destination MAC or IPv4 address is not ours")                     \
  X(kUnsupported, "unsupported_protocol", "ours, but a protocol we do not serve")               \
  X(kQpnCoreOutOfRange, "qpn_core_out_of_range",                                                \
    "destination QPN names a core that does not exist")                                         \
  X(kUnknownQpn, "unknown_qpn", "no QP with this number on its core")                           \
  X(kNoMbuf, "no_mbuf", "no mbuf for an answer")                                                \
  X(kStopFlush, "stop_flush", "frame still buffered when the core stopped")

enum class CoreDrop : std::uint8_t {
#define ROCEDP_X(e, n, d) e,
  ROCEDP_CORE_DROP_REASONS(ROCEDP_X)
#undef ROCEDP_X
      kCount
};

inline constexpr std::size_t kCoreDropCount = static_cast<std::size_t>(CoreDrop::kCount);
/// Size of a core's drop counter array: wire reasons, then core reasons.
inline constexpr std::size_t kDropCounterCount = wire::kDropReasonCount + kCoreDropCount;

constexpr std::size_t drop_index(wire::DropReason r) {
  return static_cast<std::size_t>(r);
}
constexpr std::size_t drop_index(CoreDrop r) {
  return wire::kDropReasonCount + static_cast<std::size_t>(r);
}

inline constexpr std::array<std::string_view, kCoreDropCount> kCoreDropNames = {
#define ROCEDP_X(e, n, d) std::string_view{n},
    ROCEDP_CORE_DROP_REASONS(ROCEDP_X)
#undef ROCEDP_X
};

/// Name of drop counter `i` (0 <= i < kDropCounterCount), as telemetry prints it.
constexpr std::string_view drop_counter_name(std::size_t i) {
  if (i < wire::kDropReasonCount) return wire::kDropReasonNames[i];
  i -= wire::kDropReasonCount;
  return i < kCoreDropCount ? kCoreDropNames[i] : std::string_view{"invalid"};
}

/// Whether counter `i` counts a real drop (wire kNone / kNotRoce are outcomes, never counted).
constexpr bool drop_counter_is_failure(std::size_t i) {
  return i >= wire::kDropReasonCount || wire::is_failure(static_cast<wire::DropReason>(i));
}

}  // namespace rocedp::dataplane
