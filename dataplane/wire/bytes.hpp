#pragma once
// Big-endian load/store over raw bytes. Wire headers are byte arrays, never
// packed structs: no alignment assumptions, no aliasing UB, and the compiler
// turns these into single bswap'd loads/stores.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace rocedp::wire {

using Bytes = std::span<const std::uint8_t>;
using MutBytes = std::span<std::uint8_t>;

inline std::uint16_t load_be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
inline std::uint32_t load_be24(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 16) | (std::uint32_t{p[1]} << 8) | p[2];
}
inline std::uint32_t load_be32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return __builtin_bswap32(v);
}
inline std::uint64_t load_be64(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return __builtin_bswap64(v);
}
inline std::uint32_t load_le32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // x86-64 / aarch64 little-endian hosts only (static_assert below)
}

inline void store_be16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
inline void store_be24(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 16);
  p[1] = static_cast<std::uint8_t>(v >> 8);
  p[2] = static_cast<std::uint8_t>(v);
}
inline void store_be32(std::uint8_t* p, std::uint32_t v) {
  v = __builtin_bswap32(v);
  std::memcpy(p, &v, 4);
}
inline void store_be64(std::uint8_t* p, std::uint64_t v) {
  v = __builtin_bswap64(v);
  std::memcpy(p, &v, 8);
}
inline void store_le32(std::uint8_t* p, std::uint32_t v) {
  std::memcpy(p, &v, 4);
}

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "rocedp assumes a little-endian host");

// A message's payload: up to 64 bytes in two overlapping moves of one size (16 or 32 bytes)
// instead of a call into the library's copy, anything longer by memcpy. The RC engine's
// one-packet WRITE and SEND, sent and received, are mostly such small copies.
inline void copy_payload_bytes(std::uint8_t* dst, const std::uint8_t* src, std::uint32_t len) {
  if (len >= 16 && len <= 64) {
    if (len >= 32) {
      std::memcpy(dst, src, 32);
      std::memcpy(dst + len - 32, src + len - 32, 32);
    } else {
      std::memcpy(dst, src, 16);
      std::memcpy(dst + len - 16, src + len - 16, 16);
    }
    return;
  }
  if (len != 0) std::memcpy(dst, src, len);
}

}  // namespace rocedp::wire
