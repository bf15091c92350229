#pragma once
// The capture decoder shared by `rocedpctl decode` and the conformance test:
// for each frame, parse, verify the ICRC, re-encode from the parsed fields and
// compare byte-for-byte, and describe the packet in one text line.

#include <cstddef>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>

#include "dataplane/wire/drop_reason.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocedp::wire {

enum class FrameKind : std::uint8_t { kRoce, kSkipped, kFailed };

struct FrameVerdict {
  FrameKind kind = FrameKind::kSkipped;
  DropReason reason = DropReason::kNone;  // why it failed (or kNotRoce when skipped)
  bool roundtrip_ok = false;
  std::size_t mismatch_at = 0;      // first differing byte when !roundtrip_ok
  std::uint32_t icrc_computed = 0;  // when reason == kBadIcrc
  ParsedPacket pkt;
  std::string_view cm_message;  // "REQ", "REP"... for QP1 MADs
};

// Parses `frame`, verifies its ICRC and checks it re-encodes to the same bytes.
FrameVerdict check_frame(Bytes frame);

// One line (no newline) describing a frame's verdict, prefixed with "#<frame_no>".
std::string describe_frame(std::size_t frame_no, const FrameVerdict& v);

struct DecodeStats {
  std::size_t frames = 0;
  std::size_t roce = 0;     // RoCEv2 packets that parsed, verified and round-tripped
  std::size_t skipped = 0;  // not RoCEv2 (ARP...)
  std::size_t failed = 0;   // RoCEv2 packets that did not
  std::map<std::string, std::size_t> by_type;  // opcode name or "CM <msg>"
};

// Decodes every frame of the pcap at `path`, one line per frame to `out`
// (nothing when out is null). False with `error` set if the file is unreadable.
bool decode_capture(const std::string& path, std::ostream* out, DecodeStats& stats,
                    std::string& error);

}  // namespace rocedp::wire
