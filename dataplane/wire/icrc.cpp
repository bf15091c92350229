#include "dataplane/wire/icrc.hpp"

#include <isa-l/crc.h>

#include <cstring>
#include <vector>

#include "dataplane/wire/bth.hpp"
#include "dataplane/wire/ipv4.hpp"
#include "dataplane/wire/udp.hpp"

namespace rocedp::wire {

namespace {
constexpr std::size_t kMaxPrefix = kIpv4MaxHdrLen + kUdpHdrLen + kBthLen;
static_assert(kMaxPrefix >= kIpv6HdrLen + kUdpHdrLen + kBthLen);

// Sets the variant fields of the prefix to 1s. `ip_len` is the IP header length.
inline void mask_prefix(std::uint8_t* b, std::size_t ip_len, bool ipv6) {
  if (ipv6) {
    b[0] |= 0x0F;  // traffic class, high nibble of the byte after version
    b[1] = 0xFF;   // traffic class low nibble + flow label
    b[2] = 0xFF;
    b[3] = 0xFF;
    b[7] = 0xFF;  // hop limit
  } else {
    b[ipv4_off::kTos] = 0xFF;
    b[ipv4_off::kTtl] = 0xFF;
    b[ipv4_off::kChecksum] = 0xFF;
    b[ipv4_off::kChecksum + 1] = 0xFF;
  }
  b[ip_len + udp_off::kChecksum] = 0xFF;
  b[ip_len + udp_off::kChecksum + 1] = 0xFF;
  b[ip_len + kUdpHdrLen + bth_off::kResv8a] = 0xFF;
}

inline std::size_t ip_header_len(Bytes l3, bool& ipv6) {
  if (l3.empty()) return 0;
  const std::uint8_t ver = l3[0] >> 4;
  ipv6 = ver == 6;
  if (ver == 6) return kIpv6HdrLen;
  if (ver == 4) return std::size_t{l3[0] & 0x0Fu} * 4;
  return 0;
}
}  // namespace

std::size_t icrc_masked_prefix_len(Bytes l3) {
  bool ipv6 = false;
  const std::size_t ip_len = ip_header_len(l3, ipv6);
  if (ip_len < kIpv4MinHdrLen) return 0;
  const std::size_t n = ip_len + kUdpHdrLen + kBthLen;
  return n <= l3.size() ? n : 0;
}

std::uint32_t icrc_compute(Bytes l3, std::span<const Bytes> more) {
  bool ipv6 = false;
  const std::size_t ip_len = ip_header_len(l3, ipv6);
  if (ip_len < kIpv4MinHdrLen) return 0;
  const std::size_t prefix = ip_len + kUdpHdrLen + kBthLen;
  if (prefix > l3.size()) return 0;

  std::uint8_t tmp[kMaxPrefix];
  std::memcpy(tmp, l3.data(), prefix);
  mask_prefix(tmp, ip_len, ipv6);
  std::uint32_t crc = crc32_gzip_refl(kIcrcSeed, tmp, prefix);
  if (l3.size() > prefix) {
    crc = crc32_gzip_refl(crc, l3.data() + prefix, l3.size() - prefix);
  }
  for (const Bytes& seg : more) {
    if (!seg.empty()) crc = crc32_gzip_refl(crc, seg.data(), seg.size());
  }
  return crc;
}

std::uint32_t icrc_extend(std::uint32_t crc, Bytes more) {
  return more.empty() ? crc : crc32_gzip_refl(crc, more.data(), more.size());
}

bool icrc_verify(Bytes l3_with_icrc) {
  if (l3_with_icrc.size() < kIcrcLen) return false;
  const Bytes body = l3_with_icrc.first(l3_with_icrc.size() - kIcrcLen);
  if (icrc_masked_prefix_len(body) == 0) return false;
  return icrc_compute(body) == load_le32(l3_with_icrc.data() + body.size());
}

std::uint32_t icrc_reference(Bytes l3) {
  std::vector<std::uint8_t> b(8, 0xFF);
  b.insert(b.end(), l3.begin(), l3.end());
  bool ipv6 = false;
  const std::size_t ip_len = ip_header_len(l3, ipv6);
  if (ip_len < kIpv4MinHdrLen || ip_len + kUdpHdrLen + kBthLen > l3.size()) return 0;
  mask_prefix(b.data() + 8, ip_len, ipv6);
  return detail::crc32_bitwise(0, b.data(), b.size());
}

}  // namespace rocedp::wire
