#pragma once
// Frame bytes -> ParsedPacket. Every length is checked before the bytes it
// covers are read, so no input can make the parser read past `frame`.

#include "dataplane/wire/drop_reason.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocedp::wire {

struct ParseOptions {
  bool verify_ip_checksum = true;  // off when the NIC already checked it
  bool verify_icrc = true;
};

// Returns DropReason::kNone and fills `out` for a valid RoCEv2 packet;
// kNotRoce for frames that are not IPv4 or IPv6 UDP to port 4791 (ARP, ICMP, other
// UDP); otherwise the first reason the packet is malformed. `out` is partly
// filled on failure (whatever was decoded before the check that failed).
DropReason parse(Bytes frame, ParsedPacket& out, const ParseOptions& opts = {});

}  // namespace rocedp::wire
