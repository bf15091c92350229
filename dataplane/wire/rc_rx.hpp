#pragma once
// The receive-side view of a RoCEv2 frame for the RC data path: one pass over Ethernet, IPv4,
// UDP and BTH fills a compact RcRxPacket with what the RC roles read (opcode, PSN, QPN, the
// addresses, where the extension headers and the payload are), and the extension headers are
// read from the frame only when a role asks for them. The general parser (parser.hpp) decodes
// every field of every header; the data path reads a handful of them.
//
// parse_rc returns exactly the DropReason parse() returns for the same bytes (same checks, same
// order; tests/wire/test_rc_rx.cpp compares both over every opcode and every malformation the
// parser tests build, and over random mutations), so every refused frame is counted under the
// same reason whichever parser saw it. Frames of an unusual shape (802.1Q tag, IP options) go
// through parse() itself.

#include <cstdint>

#include "dataplane/wire/drop_reason.hpp"
#include "dataplane/wire/ext_headers.hpp"
#include "dataplane/wire/opcode.hpp"

namespace rocedp::wire {

struct RcRxPacket {
  const std::uint8_t* bth = nullptr;  // the BTH inside the frame (the frame must outlive this)
  const OpcodeInfo* op = nullptr;     // never null after a successful parse
  const std::uint8_t* payload = nullptr;
  std::uint32_t payload_len = 0;  // without pad
  std::uint32_t psn = 0;
  std::uint32_t dqpn = 0;
  std::uint32_t src_ip = 0;  // host order
  std::uint32_t dst_ip = 0;
  std::uint8_t opcode = 0;
  bool ack_req = false;
  bool se = false;

  // Extension headers, read from the frame: only for an opcode that carries them.
  const std::uint8_t* hdr(Hdr h) const { return bth + op->offset_of(h); }
  RethFields reth() const {
    const std::uint8_t* h = hdr(Hdr::kReth);
    return RethFields{load_be64(h + reth_off::kVa), load_be32(h + reth_off::kRkey),
                      load_be32(h + reth_off::kLen)};
  }
  std::uint8_t aeth_syndrome() const { return hdr(Hdr::kAeth)[aeth_off::kSyndrome]; }
  AtomicEthFields atomic_eth() const {
    AtomicEthView<const std::uint8_t> v(hdr(Hdr::kAtomicEth));
    return AtomicEthFields{v.va(), v.rkey(), v.swap_add(), v.compare()};
  }
  std::uint64_t atomic_ack_orig() const { return load_be64(hdr(Hdr::kAtomicAckEth)); }
  std::uint32_t imm() const { return load_be32(hdr(Hdr::kImmDt)); }
  std::uint32_t ieth_rkey() const { return load_be32(hdr(Hdr::kIeth)); }
};

// Parses `frame` (IP checksum and ICRC verified). kNone: `out` describes the packet; otherwise
// the reason parse() gives (kNotRoce for a frame that is not IPv4/UDP to 4791), `out` unspecified.
DropReason parse_rc(Bytes frame, RcRxPacket& out);

}  // namespace rocedp::wire
