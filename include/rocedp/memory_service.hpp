#pragma once
// What a client of rocedpd's memory service reads from the connection (config
// ListenerConfig::Service::kMemory, README "Services"): the Accept carries the region in its
// private data, so the client can WRITE and READ it right after CompleteConnect. A client gets
// the bytes with Connector::get_connection_data (the first 32 bytes of the REP private data).
//
// Layout, every field big-endian:
//   offset 0  u32 magic    0x524D454D ("RMEM")
//   offset 4  u16 version  1
//   offset 6  u16 flags    bit 0: remote READ allowed, bit 1: remote WRITE allowed
//   offset 8  u64 address  the region's first byte, as RETH virtual address
//   offset 16 u64 length   bytes
//   offset 24 u32 token    the region's remote token (RETH R_Key)
//   offset 28 u32 reserved 0

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rocedp {

/// The memory service's Accept private data (layout above).
struct MemoryServiceInfo {
  static constexpr uint32_t kMagic = 0x524D454D;
  static constexpr uint16_t kVersion = 1;
  static constexpr size_t kWireSize = 32;
  static constexpr uint16_t kFlagRead = 1;   ///< remote READ allowed
  static constexpr uint16_t kFlagWrite = 2;  ///< remote WRITE allowed
  uint16_t flags = kFlagRead | kFlagWrite;
  uint64_t address = 0;
  uint64_t length = 0;
  uint32_t token = 0;

  /// Writes the kWireSize bytes.
  void encode(uint8_t out[kWireSize]) const {
    std::memset(out, 0, kWireSize);
    put(out + 0, kMagic, 4);
    put(out + 4, kVersion, 2);
    put(out + 6, flags, 2);
    put(out + 8, address, 8);
    put(out + 16, length, 8);
    put(out + 24, token, 4);
  }
  /// False if `len` is short, or the magic or version differ (*out untouched).
  static bool decode(const uint8_t* data, size_t len, MemoryServiceInfo* out) {
    if (len < kWireSize || get(data, 4) != kMagic || get(data + 4, 2) != kVersion) return false;
    out->flags = static_cast<uint16_t>(get(data + 6, 2));
    out->address = get(data + 8, 8);
    out->length = get(data + 16, 8);
    out->token = static_cast<uint32_t>(get(data + 24, 4));
    return true;
  }

 private:
  static void put(uint8_t* p, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
  }
  static uint64_t get(const uint8_t* p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
    return v;
  }
};

}  // namespace rocedp
