// perftest's set-up messages (rocedp/perftest.hpp).

#include "rocedp/perftest.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rocedp::perf {

void put_be32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
uint32_t get_be32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = v << 8 | p[i];
  return v;
}
void put_be64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}
uint64_t get_be64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
  return v;
}
void put_be_double(uint8_t* p, double v) {
  uint64_t u = 0;
  std::memcpy(&u, &v, 8);
  put_be64(p, u);
}
double get_be_double(const uint8_t* p) {
  const uint64_t u = get_be64(p);
  double v = 0;
  std::memcpy(&v, &u, 8);
  return v;
}

uint32_t PerftestKey::ipv4() const {
  for (int i = 0; i < 10; ++i)
    if (gid[i] != 0) return 0;
  if (gid[10] != 0xFF || gid[11] != 0xFF) return 0;
  return get_be32(gid + 12);
}

void PerftestKey::set_ipv4(uint32_t ip) {
  std::memset(gid, 0, sizeof(gid));
  gid[10] = gid[11] = 0xFF;
  put_be32(gid + 12, ip);
}

void encode_key_text(const PerftestKey& k, uint8_t out[kKeyTextSize]) {
  char text[kKeyTextSize + 16];
  int n = std::snprintf(text, sizeof(text), "%04x:%04x:%06x:%06x:%08x:%016llx:", k.lid & 0xFFFF,
                        k.out_reads & 0xFFFF, k.qpn & 0xFFFFFF, k.psn & 0xFFFFFF, k.rkey,
                        static_cast<unsigned long long>(k.vaddr));
  for (const auto byte : k.gid)
    n += std::snprintf(text + n, sizeof(text) - static_cast<size_t>(n), "%02x:", byte);
  n += std::snprintf(text + n, sizeof(text) - static_cast<size_t>(n), "%08x:", k.srqn);
  std::memset(out, 0, kKeyTextSize);
  std::memcpy(out, text, std::min<size_t>(static_cast<size_t>(n), kKeyTextSize - 1));
}

namespace {

int hex_digit(uint8_t c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

// One colon-terminated field of 1 to max_digits hex digits at *pos; *pos moves past the colon.
bool read_hex_field(const uint8_t* in, size_t len, size_t* pos, size_t max_digits,
                    uint64_t* value) {
  uint64_t v = 0;
  size_t digits = 0;
  for (; *pos < len && in[*pos] != ':'; ++*pos) {
    const int d = hex_digit(in[*pos]);
    if (d < 0 || ++digits > max_digits) return false;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  if (*pos >= len || digits == 0) return false;
  ++*pos;  // the colon
  *value = v;
  return true;
}

}  // namespace

bool decode_key_text(const uint8_t* in, size_t len, PerftestKey* k) {
  // 6 header fields, 16 GID bytes, the SRQ number: 23 colon-terminated hex fields.
  uint64_t f[23] = {};
  size_t pos = 0;
  for (uint64_t& field : f)
    if (!read_hex_field(in, len, &pos, 16, &field)) return false;
  k->lid = static_cast<uint32_t>(f[0]);
  k->out_reads = static_cast<uint32_t>(f[1]);
  k->qpn = static_cast<uint32_t>(f[2]);
  k->psn = static_cast<uint32_t>(f[3]);
  k->rkey = static_cast<uint32_t>(f[4]);
  k->vaddr = f[5];
  for (int i = 0; i < 16; ++i) {
    if (f[6 + i] > 0xFF) return false;
    k->gid[i] = static_cast<uint8_t>(f[6 + i]);
  }
  k->srqn = static_cast<uint32_t>(f[22]);
  return true;
}

void encode_pingpong_text(const PerftestKey& k, uint8_t out[kPingpongTextSize]) {
  char text[kPingpongTextSize + 16];
  int n = std::snprintf(text, sizeof(text), "%04x:%06x:%06x:", k.lid & 0xFFFF, k.qpn & 0xFFFFFF,
                        k.psn & 0xFFFFFF);
  for (const auto byte : k.gid)
    n += std::snprintf(text + n, sizeof(text) - static_cast<size_t>(n), "%02x", byte);
  std::memset(out, 0, kPingpongTextSize);
  std::memcpy(out, text, std::min<size_t>(static_cast<size_t>(n), kPingpongTextSize - 1));
}

bool decode_pingpong_text(const uint8_t* in, size_t len, PerftestKey* k) {
  size_t pos = 0;
  uint64_t f[3] = {};  // LID, QPN, PSN
  for (uint64_t& field : f)
    if (!read_hex_field(in, len, &pos, 8, &field)) return false;
  if (len - pos < 32 || (len - pos > 32 && in[pos + 32] != 0)) return false;
  for (size_t i = 0; i < 16; ++i) {
    const int hi = hex_digit(in[pos + 2 * i]), lo = hex_digit(in[pos + 2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    k->gid[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  k->lid = static_cast<uint32_t>(f[0]);
  k->qpn = static_cast<uint32_t>(f[1]);
  k->psn = static_cast<uint32_t>(f[2]);
  return true;
}

void encode_key_struct(const PerftestKey& k, uint8_t out[kKeyStructSize]) {
  std::memset(out, 0, kKeyStructSize);
  put_be32(out + 0, k.lid);
  put_be32(out + 4, k.out_reads);
  put_be32(out + 8, k.qpn);
  put_be32(out + 12, k.psn);
  put_be32(out + 16, k.rkey);
  // 20..23: padding before the 8-byte-aligned address
  put_be64(out + 24, k.vaddr);
  std::memcpy(out + 32, k.gid, 16);
  put_be32(out + 48, k.srqn);
  put_be32(out + 52, static_cast<uint32_t>(k.gid_index));
}

bool decode_key_struct(const uint8_t* in, size_t len, PerftestKey* k) {
  if (len < kKeyStructSize) return false;
  k->lid = get_be32(in + 0);
  k->out_reads = get_be32(in + 4);
  k->qpn = get_be32(in + 8);
  k->psn = get_be32(in + 12);
  k->rkey = get_be32(in + 16);
  k->vaddr = get_be64(in + 24);
  std::memcpy(k->gid, in + 32, 16);
  k->srqn = get_be32(in + 48);
  k->gid_index = static_cast<int32_t>(get_be32(in + 52));
  return true;
}

void encode_version(uint8_t out[kVersionSize]) {
  std::memset(out, 0, kVersionSize);
  // Always NUL-terminated: at most kVersionSize - 1 characters, zeros after.
  std::snprintf(reinterpret_cast<char*>(out), kVersionSize, "%s", kPerftestVersion);
}

bool version_compatible(const uint8_t in[kVersionSize], std::string* printable) {
  char v[kVersionSize + 1] = {};
  std::memcpy(v, in, kVersionSize);
  *printable = v;
  return std::atof(v) >= 5.70;
}

void encode_mtu(uint32_t path_mtu_bytes, uint8_t out[2]) {
  int e = 1;
  for (uint32_t m = 256; m < path_mtu_bytes && e < 5; m *= 2) ++e;
  out[0] = static_cast<uint8_t>('0' + e);
  out[1] = 0;
}

uint32_t decode_mtu(const uint8_t in[2]) {
  if (in[0] < '1' || in[0] > '5') return 0;
  return 256u << (in[0] - '1');
}

}  // namespace rocedp::perf
