#pragma once
// Why the RoCEv2 parser refused a frame. One X-macro generates the enum and its
// name table (CONVENTIONS.md item 13) so counters (/rocedp/drops), logs and
// `rocedpctl decode` all print the same names.
//
// Order is part of the telemetry output; append new reasons at the end
// (before kCount), never renumber.

#include <array>
#include <cstdint>
#include <string_view>

namespace rocedp::wire {

// X(enumerator, "name", "human description")
#define ROCEDP_WIRE_DROP_REASONS(X)                                                             \
  X(kNone, "none", "parsed, no drop")                                                           \
  X(kNotRoce, "not_roce", "not IPv4 or IPv6 UDP to port 4791 (handed elsewhere, not an error)") \
  X(kEthTooShort, "eth_short", "frame shorter than the Ethernet (+802.1Q) header")              \
  X(kIpTooShort, "ip_short", "frame shorter than the IPv4 header")                              \
  X(kIpBadHeader, "ip_bad_header", "IPv4 version/IHL invalid or options past the frame")        \
  X(kIpBadLength, "ip_bad_length", "IPv4 total length inconsistent with header or frame")       \
  X(kIpBadChecksum, "ip_bad_checksum", "IPv4 header checksum wrong")                            \
  X(kIpFragment, "ip_fragment", "IPv4 fragment (RoCEv2 is never fragmented)")                   \
  X(kUdpTooShort, "udp_short", "IP payload shorter than the UDP header")                        \
  X(kUdpBadLength, "udp_bad_length", "UDP length inconsistent with the IP length")              \
  X(kBthTooShort, "bth_short", "UDP payload shorter than BTH + ICRC")                           \
  X(kBadTver, "bad_tver", "BTH transport version is not 0")                                     \
  X(kUnknownOpcode, "unknown_opcode", "BTH opcode not in the opcode table")                     \
  X(kHeadersTooShort, "headers_short", "packet shorter than the opcode's headers + ICRC")       \
  X(kPadTooLarge, "pad_too_large", "BTH pad count larger than the payload")                     \
  X(kPayloadNotAllowed, "payload_not_allowed", "payload on an opcode that carries none")        \
  X(kPayloadMissing, "payload_missing", "no payload on an opcode that requires one")            \
  X(kBadPayloadLength, "bad_payload_length", "payload length not the opcode's fixed size")      \
  X(kBadIcrc, "bad_icrc", "invariant CRC mismatch")                                             \
  X(kBadPkey, "bad_pkey", "BTH P_Key not of the port's partition (the default, 0x7FFF/0xFFFF)")

enum class DropReason : std::uint8_t {
#define ROCEDP_X(e, n, d) e,
  ROCEDP_WIRE_DROP_REASONS(ROCEDP_X)
#undef ROCEDP_X
      kCount
};

inline constexpr std::size_t kDropReasonCount = static_cast<std::size_t>(DropReason::kCount);

inline constexpr std::array<std::string_view, kDropReasonCount> kDropReasonNames = {
#define ROCEDP_X(e, n, d) std::string_view{n},
    ROCEDP_WIRE_DROP_REASONS(ROCEDP_X)
#undef ROCEDP_X
};

inline constexpr std::array<std::string_view, kDropReasonCount> kDropReasonDescriptions = {
#define ROCEDP_X(e, n, d) std::string_view{d},
    ROCEDP_WIRE_DROP_REASONS(ROCEDP_X)
#undef ROCEDP_X
};

constexpr std::string_view drop_reason_name(DropReason r) {
  const auto i = static_cast<std::size_t>(r);
  return i < kDropReasonCount ? kDropReasonNames[i] : std::string_view{"invalid"};
}

constexpr std::string_view drop_reason_description(DropReason r) {
  const auto i = static_cast<std::size_t>(r);
  return i < kDropReasonCount ? kDropReasonDescriptions[i] : std::string_view{"invalid"};
}

// kNone and kNotRoce are outcomes, not failures of a RoCEv2 packet.
constexpr bool is_failure(DropReason r) {
  return r != DropReason::kNone && r != DropReason::kNotRoce;
}

}  // namespace rocedp::wire
