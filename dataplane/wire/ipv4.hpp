#pragma once
// IPv4 header (RFC 791). IPv6 is beside it (ipv6.hpp): the parser dispatches on the EtherType.

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "dataplane/wire/bytes.hpp"

namespace rocedp::wire {

inline constexpr std::size_t kIpv4MinHdrLen = 20;
inline constexpr std::size_t kIpv4MaxHdrLen = 60;
inline constexpr std::uint8_t kIpProtoUdp = 17;
inline constexpr std::uint16_t kIpv4FlagDf = 0x4000;
inline constexpr std::uint16_t kIpv4FlagMf = 0x2000;
inline constexpr std::uint16_t kIpv4FragOffsetMask = 0x1FFF;

namespace ipv4_off {
inline constexpr std::size_t kVerIhl = 0, kTos = 1, kTotalLen = 2, kId = 4, kFlagsFrag = 6,
                             kTtl = 8, kProto = 9, kChecksum = 10, kSrc = 12, kDst = 16;
}
static_assert(ipv4_off::kDst + 4 == kIpv4MinHdrLen, "IPv4 header without options is 20 bytes");

template <class B>
class Ipv4View {
 public:
  explicit Ipv4View(B* p) : p_(p) {}
  std::uint8_t version() const { return p_[ipv4_off::kVerIhl] >> 4; }
  std::uint8_t ihl() const { return p_[ipv4_off::kVerIhl] & 0x0F; }  // in 32-bit words
  std::size_t header_len() const { return std::size_t{ihl()} * 4; }
  std::uint8_t tos() const { return p_[ipv4_off::kTos]; }  // DSCP(6) ECN(2)
  std::uint16_t total_len() const { return load_be16(p_ + ipv4_off::kTotalLen); }
  std::uint16_t id() const { return load_be16(p_ + ipv4_off::kId); }
  std::uint16_t flags_frag() const { return load_be16(p_ + ipv4_off::kFlagsFrag); }
  std::uint8_t ttl() const { return p_[ipv4_off::kTtl]; }
  std::uint8_t protocol() const { return p_[ipv4_off::kProto]; }
  std::uint16_t checksum() const { return load_be16(p_ + ipv4_off::kChecksum); }
  std::uint32_t src() const { return load_be32(p_ + ipv4_off::kSrc); }
  std::uint32_t dst() const { return load_be32(p_ + ipv4_off::kDst); }
  bool is_fragment() const { return (flags_frag() & (kIpv4FlagMf | kIpv4FragOffsetMask)) != 0; }

  void set_version_ihl(std::uint8_t ihl_words) requires(!std::is_const_v<B>) {
    p_[ipv4_off::kVerIhl] = static_cast<std::uint8_t>(0x40 | (ihl_words & 0x0F));
  }
  void set_tos(std::uint8_t v) requires(!std::is_const_v<B>) { p_[ipv4_off::kTos] = v; }
  void set_total_len(std::uint16_t v) requires(!std::is_const_v<B>) {
    store_be16(p_ + ipv4_off::kTotalLen, v);
  }
  void set_id(std::uint16_t v) requires(!std::is_const_v<B>) { store_be16(p_ + ipv4_off::kId, v); }
  void set_flags_frag(std::uint16_t v) requires(!std::is_const_v<B>) {
    store_be16(p_ + ipv4_off::kFlagsFrag, v);
  }
  void set_ttl(std::uint8_t v) requires(!std::is_const_v<B>) { p_[ipv4_off::kTtl] = v; }
  void set_protocol(std::uint8_t v) requires(!std::is_const_v<B>) { p_[ipv4_off::kProto] = v; }
  void set_checksum(std::uint16_t v) requires(!std::is_const_v<B>) {
    store_be16(p_ + ipv4_off::kChecksum, v);
  }
  void set_src(std::uint32_t v) requires(!std::is_const_v<B>) {
    store_be32(p_ + ipv4_off::kSrc, v);
  }
  void set_dst(std::uint32_t v) requires(!std::is_const_v<B>) {
    store_be32(p_ + ipv4_off::kDst, v);
  }

 private:
  B* p_;
};

// RFC 1071 one's-complement sum of the header with the checksum field taken as 0.
// Summed in 32-bit words: 2^16 = 1 mod 0xFFFF, so the folded sum of 32-bit words equals the
// folded sum of their 16-bit halves (RFC 1071 §2(B)), at half the additions.
inline std::uint16_t ipv4_header_checksum(const std::uint8_t* hdr, std::size_t len) {
  static_assert(ipv4_off::kChecksum == 10, "the checksum is the low half of word 8..11");
  std::uint64_t sum = 0;
  std::size_t i = 0;
  if (len == kIpv4MinHdrLen) {  // no options: the usual header, unrolled
    sum = std::uint64_t{load_be32(hdr)} + load_be32(hdr + 4) + (load_be32(hdr + 8) & 0xFFFF0000u) +
          load_be32(hdr + 12) + load_be32(hdr + 16);
    i = len;
  }
  for (; i + 4 <= len; i += 4) {
    const std::uint32_t w = load_be32(hdr + i);
    sum += i == 8 ? (w & 0xFFFF0000u) : w;
  }
  if (i + 2 <= len) sum += load_be16(hdr + i);
  sum = (sum & 0xFFFFFFFFu) + (sum >> 32);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

/// RFC 1071's check of a received header: the one's-complement sum of all its words, checksum
/// included, is 0xFFFF (the sum of the others, ~ipv4_header_checksum, plus the field). So a field
/// of 0xFFFF stands for a computed 0x0000 too (-0 for +0, RFC 1624): what an incremental update
/// leaves when the checksum comes out zero. Linux's nftables writes it so on purpose
/// (nft_csum_replace: CSUM_MANGLED_0), e.g. for `ip ecn set ce` on a switch, and Linux receives
/// it; comparing the field with the computed value dropped one frame in 65,536 of such a path.
inline bool ipv4_checksum_valid(const std::uint8_t* hdr, std::size_t len) {
  std::uint32_t sum = std::uint32_t{static_cast<std::uint16_t>(~ipv4_header_checksum(hdr, len))} +
                      load_be16(hdr + ipv4_off::kChecksum);
  sum = (sum & 0xFFFF) + (sum >> 16);
  return sum == 0xFFFF;
}

/// ECN codepoints (RFC 3168): the low two bits of the ToS.
inline constexpr std::uint8_t kEcnMask = 3, kEcnEct0 = 2, kEcnCe = 3;

/// Sets the ToS of the IPv4 header at `hdr` (no options) and its checksum with it.
inline void set_ipv4_tos(std::uint8_t* hdr, std::uint8_t tos) {
  hdr[ipv4_off::kTos] = tos;
  store_be16(hdr + ipv4_off::kChecksum, ipv4_header_checksum(hdr, kIpv4MinHdrLen));
}

struct Ipv4Fields {
  std::uint8_t ihl = 5;  // words; > 5 means options (kept verbatim)
  std::uint8_t tos = 0;
  std::uint16_t total_len = 0;  // the builder computes it
  std::uint16_t id = 0;
  std::uint16_t flags_frag = kIpv4FlagDf;  // rxe sets DF
  std::uint8_t ttl = 64;
  std::uint8_t protocol = kIpProtoUdp;
  std::uint16_t checksum = 0;  // the builder computes it
  std::uint32_t src = 0;       // host order
  std::uint32_t dst = 0;
  std::array<std::uint8_t, kIpv4MaxHdrLen - kIpv4MinHdrLen> options{};

  std::size_t header_len() const { return std::size_t{ihl} * 4; }
  friend bool operator==(const Ipv4Fields&, const Ipv4Fields&) = default;
};

inline void encode_ipv4(std::uint8_t* p, const Ipv4Fields& f) {
  Ipv4View<std::uint8_t> v(p);
  v.set_version_ihl(f.ihl);
  v.set_tos(f.tos);
  v.set_total_len(f.total_len);
  v.set_id(f.id);
  v.set_flags_frag(f.flags_frag);
  v.set_ttl(f.ttl);
  v.set_protocol(f.protocol);
  v.set_checksum(f.checksum);
  v.set_src(f.src);
  v.set_dst(f.dst);
  for (std::size_t i = kIpv4MinHdrLen; i < f.header_len(); ++i)
    p[i] = f.options[i - kIpv4MinHdrLen];
}

// Fills `f` in place (the parser decodes straight into its PacketFields, no temporary).
inline void decode_ipv4_into(const std::uint8_t* p, Ipv4Fields& f) {
  Ipv4View<const std::uint8_t> v(p);
  f.ihl = v.ihl();
  f.tos = v.tos();
  f.total_len = v.total_len();
  f.id = v.id();
  f.flags_frag = v.flags_frag();
  f.ttl = v.ttl();
  f.protocol = v.protocol();
  f.checksum = v.checksum();
  f.src = v.src();
  f.dst = v.dst();
  for (std::size_t i = kIpv4MinHdrLen; i < f.header_len(); ++i)
    f.options[i - kIpv4MinHdrLen] = p[i];
}

inline Ipv4Fields decode_ipv4(const std::uint8_t* p) {
  Ipv4Fields f;
  decode_ipv4_into(p, f);
  return f;
}

}  // namespace rocedp::wire
