#pragma once
// PacketFields -> bytes. Two entry points:
//  * build_frame: a whole frame into one buffer (tools, tests, control path);
//  * write_headers + finish_packet: the data path writes the headers into the
//    headroom in front of a payload that already sits in (possibly chained)
//    buffers, then the pad and ICRC after it. No allocation anywhere.

#include <cstddef>
#include <initializer_list>
#include <span>

#include "dataplane/wire/packet.hpp"

namespace rocedp::wire {

struct BuildOptions {
  bool fill_lengths = true;      // IP total length and UDP length from the payload
  bool fill_ip_checksum = true;  // IPv4 header checksum
  bool fill_icrc = true;         // else PacketFields-independent `icrc` below is written
  std::uint32_t icrc = 0;        // used when !fill_icrc (tests forge bad ICRCs)
};

// Bytes of Ethernet..last extension header, or 0 if the opcode is not in the table.
std::size_t header_len(const PacketFields& f);
// Bytes of the whole frame for `payload_len` payload bytes (pad from f.bth.pad).
std::size_t frame_len(const PacketFields& f, std::size_t payload_len);

struct HeaderSpan {
  MutBytes headers;           // Ethernet .. last extension header; empty on failure
  std::size_t l3_offset = 0;  // IP header offset inside `headers`
  Bytes l3() const { return Bytes(headers).subspan(l3_offset); }
};

// Writes the headers so that they end exactly at headroom.end(), where the
// payload of `payload_len` bytes begins. Fails (empty span) if the headroom is
// too small or the opcode is unknown. Lengths/checksum per `opts`.
HeaderSpan write_headers(MutBytes headroom, const PacketFields& f, std::size_t payload_len,
                         const BuildOptions& opts = {});

// Writes `pad` zero bytes and the ICRC into `tail` (right after the payload);
// the ICRC covers hs.l3(), every payload segment in order, and the pad.
// Returns the bytes written (pad + 4) or 0 if `tail` is too small.
std::size_t finish_packet(MutBytes tail, const HeaderSpan& hs, std::span<const Bytes> payload,
                          std::uint8_t pad, const BuildOptions& opts = {});
inline std::size_t finish_packet(MutBytes tail, const HeaderSpan& hs,
                                 std::initializer_list<Bytes> payload, std::uint8_t pad,
                                 const BuildOptions& opts = {}) {
  return finish_packet(tail, hs, std::span<const Bytes>(payload.begin(), payload.size()), pad,
                       opts);
}

// The whole frame into `out`; returns its length, 0 if `out` is too small or
// the opcode is unknown. Writes whatever the fields say (even a payload on an
// opcode that allows none), so tests can forge malformed packets.
std::size_t build_frame(MutBytes out, const PacketFields& f, Bytes payload,
                        const BuildOptions& opts = {});

}  // namespace rocedp::wire
