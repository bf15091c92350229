#pragma once
// Invariant CRC of a RoCEv2 packet (IBTA Annex A17.3.3; rxe_icrc.c).
//
// ICRC = CRC-32 (IEEE 802.3 polynomial, reflected, as zlib/gzip) over
//   8 bytes of 0xFF (stand-in for the LRH that RoCEv2 has not)
//   + IP header with TOS, TTL, header checksum set to 1s (IPv6: traffic
//     class, flow label, hop limit)
//   + UDP header with its checksum set to 1s
//   + BTH with byte 4 (FECN, BECN, resv6) set to 1s
//   + the extension headers, payload and pad as they are.
// It is stored after the pad, little-endian (the CRC register as the host
// holds it; scapy pack_icrc, rxe stores the native u32).
//
// Methods (icrc.cpp):
//  * icrc_compute (codec, chained segments): ISA-L crc32_gzip_refl over the bytes as
//    they are (it chains: crc32_gzip_refl(crc(a), b) == crc(a||b)), the masking added
//    back as a correction (CRC-32 is affine); IPv6 and jumbo frames CRC a masked copy
//    of the prefix. The 8x0xFF prefix is folded into a constant seed.
//  * icrc_plain_ipv4 (the RC engine's frames): our own PCLMULQDQ folding with the
//    masking done in registers; ISA-L continues past the first few blocks of a long frame.
//    With AVX-512 VPCLMULQDQ, frames up to 252 bytes fold in 512-bit registers instead.
//  * Runs of 256 bytes and more on a CPU with VPCLMULQDQ but not AVX-512 fold in 256-bit
//    registers (crc32_vpclmul256), where ISA-L 2.30 would take 128-bit ones.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "dataplane/wire/bytes.hpp"

namespace rocedp::wire {

namespace detail {
constexpr std::uint32_t crc32_bitwise(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
  crc = ~crc;
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}
constexpr std::uint32_t ff8_seed() {
  const std::uint8_t ff[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  return crc32_bitwise(0, ff, 8);
}
}  // namespace detail

// zlib.crc32(b"\xff" * 8): the CRC state after the masked-LRH stand-in.
inline constexpr std::uint32_t kIcrcSeed = detail::ff8_seed();

// Bytes of the L3 packet that are masked: IP header + UDP + BTH. 0 if `l3` is
// too short to hold them or is not IPv4/IPv6.
std::size_t icrc_masked_prefix_len(Bytes l3);

// ICRC of the packet whose bytes are `l3` (starting at the IP header, holding
// at least IP+UDP+BTH, possibly more) followed by every span of `more` in
// order (remaining headers, payload segments, pad). The ICRC itself must not
// be included. Returns 0 if `l3` is shorter than the masked prefix (callers
// validate lengths first; the parser always does).
std::uint32_t icrc_compute(Bytes l3, std::span<const Bytes> more = {});
inline std::uint32_t icrc_compute(Bytes l3, std::initializer_list<Bytes> more) {
  return icrc_compute(l3, std::span<const Bytes>(more.begin(), more.size()));
}

// ICRC of an IPv4 packet without options (l3[0] == 0x45) of `len` bytes (>= IP + UDP + BTH =
// 40, without the ICRC), its variant fields as they are: the RC data path's frames, on receive
// and on transmit. Folds with PCLMULQDQ and masks in registers (icrc.cpp says why not ISA-L
// here); without PCLMULQDQ, icrc_compute.
std::uint32_t icrc_plain_ipv4(const std::uint8_t* l3, std::size_t len);
// The same for an IPv6 packet without extension headers (next header UDP) of `len` bytes (>= IP +
// UDP + BTH = 60): traffic class, flow label, hop limit, UDP checksum and BTH byte 4 masked in
// registers. The RC data path's IPv6 frames.
std::uint32_t icrc_plain_ipv6(const std::uint8_t* l3, std::size_t len);
namespace detail {
// icrc_plain_ipv6 in SSE encoding, for tests (icrc_plain_ipv6 runs the VEX one on CPUs with AVX).
std::uint32_t icrc_plain_ipv6_sse(const std::uint8_t* l3, std::size_t len);
// icrc_plain_ipv4's SIMD paths, for tests: the 512-bit one (icrc_wide_available() tells
// whether this CPU has it: AVX-512BW/VL and VPCLMULQDQ), the 128-bit one as this CPU runs it
// (VEX-encoded with AVX) and the same in SSE encoding.
bool icrc_wide_available();
std::uint32_t icrc_plain_ipv4_wide(const std::uint8_t* l3, std::size_t len);
std::uint32_t icrc_plain_ipv4_narrow(const std::uint8_t* l3, std::size_t len);
std::uint32_t icrc_plain_ipv4_sse(const std::uint8_t* l3, std::size_t len);
// The CRC of long runs (payloads past a frame's first blocks, the codec's segments) in 256-bit
// registers (taken where ISA-L has no 512-bit path): whether this CPU can run it (AVX2 and
// VPCLMULQDQ), and the fold itself, zlib's crc32(crc, data) for 256 bytes and more.
bool crc_long256_available();
std::uint32_t crc32_long256(std::uint32_t crc, Bytes data);
}  // namespace detail

// zlib's crc32(crc, data): the CRC-32 that icrc_plain_ipv4 folds with (tests compare it with
// zlib).
std::uint32_t crc32_refl(std::uint32_t crc, Bytes data);

// Continues a CRC returned by icrc_compute over more bytes.
std::uint32_t icrc_extend(std::uint32_t crc, Bytes more);

// `l3_with_icrc` is the whole L3 packet ending with the 4-byte ICRC.
bool icrc_verify(Bytes l3_with_icrc);

// Reference implementation (bitwise, copies the whole packet) for tests only.
std::uint32_t icrc_reference(Bytes l3_without_icrc);

}  // namespace rocedp::wire
