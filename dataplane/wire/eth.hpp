#pragma once
// Ethernet II with an optional single 802.1Q tag (IEEE 802.3 / 802.1Q).

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "dataplane/wire/bytes.hpp"

namespace rocedp::wire {

using MacAddr = std::array<std::uint8_t, 6>;

inline constexpr std::uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr std::uint16_t kEtherTypeArp = 0x0806;
inline constexpr std::uint16_t kEtherTypeVlan = 0x8100;
inline constexpr std::uint16_t kEtherTypeIpv6 = 0x86DD;

inline constexpr std::size_t kEthHdrLen = 14;
inline constexpr std::size_t kVlanTagLen = 4;
namespace eth_off {
inline constexpr std::size_t kDst = 0, kSrc = 6, kType = 12, kVlanTci = 14, kInnerType = 16;
}
static_assert(eth_off::kType + 2 == kEthHdrLen, "Ethernet II header is 14 bytes");
static_assert(eth_off::kInnerType + 2 == kEthHdrLen + kVlanTagLen, "802.1Q tag adds 4 bytes");

// Raw accessors: byte order only; B is `const uint8_t` (read) or `uint8_t` (read/write).
template <class B>
class EthView {
 public:
  explicit EthView(B* p) : p_(p) {}
  MacAddr dst() const { return mac(eth_off::kDst); }
  MacAddr src() const { return mac(eth_off::kSrc); }
  std::uint16_t type() const { return load_be16(p_ + eth_off::kType); }  // TPID when tagged
  std::uint16_t vlan_tci() const { return load_be16(p_ + eth_off::kVlanTci); }
  std::uint16_t inner_type() const { return load_be16(p_ + eth_off::kInnerType); }

  void set_dst(const MacAddr& m) requires(!std::is_const_v<B>) { put(eth_off::kDst, m); }
  void set_src(const MacAddr& m) requires(!std::is_const_v<B>) { put(eth_off::kSrc, m); }
  void set_type(std::uint16_t v) requires(!std::is_const_v<B>) {
    store_be16(p_ + eth_off::kType, v);
  }
  void set_vlan_tci(std::uint16_t v) requires(!std::is_const_v<B>) {
    store_be16(p_ + eth_off::kVlanTci, v);
  }
  void set_inner_type(std::uint16_t v) requires(!std::is_const_v<B>) {
    store_be16(p_ + eth_off::kInnerType, v);
  }

 private:
  MacAddr mac(std::size_t off) const {
    MacAddr m;
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = p_[off + i];
    return m;
  }
  void put(std::size_t off, const MacAddr& m) {
    for (std::size_t i = 0; i < m.size(); ++i) p_[off + i] = m[i];
  }
  B* p_;
};

// Decoded Ethernet header (what the parser fills and the builder writes).
struct EthFields {
  MacAddr dst{};
  MacAddr src{};
  bool has_vlan = false;
  std::uint16_t vlan_tci = 0;                // PCP(3) DEI(1) VID(12), kept whole
  std::uint16_t ethertype = kEtherTypeIpv4;  // the inner type when tagged

  std::size_t header_len() const { return kEthHdrLen + (has_vlan ? kVlanTagLen : 0); }
  friend bool operator==(const EthFields&, const EthFields&) = default;
};

inline void encode_eth(std::uint8_t* p, const EthFields& f) {
  EthView<std::uint8_t> v(p);
  v.set_dst(f.dst);
  v.set_src(f.src);
  if (f.has_vlan) {
    v.set_type(kEtherTypeVlan);
    v.set_vlan_tci(f.vlan_tci);
    v.set_inner_type(f.ethertype);
  } else {
    v.set_type(f.ethertype);
  }
}

}  // namespace rocedp::wire
