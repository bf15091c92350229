#pragma once
// UDP header (RFC 768). RoCEv2 = UDP destination port 4791 (IBTA Annex A17.2.2).

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "dataplane/wire/bytes.hpp"

namespace rocedp::wire {

inline constexpr std::uint16_t kRoceV2UdpPort = 4791;
inline constexpr std::size_t kUdpHdrLen = 8;
namespace udp_off {
inline constexpr std::size_t kSrc = 0, kDst = 2, kLen = 4, kChecksum = 6;
}
static_assert(udp_off::kChecksum + 2 == kUdpHdrLen, "UDP header is 8 bytes");

template <class B>
class UdpView {
 public:
  explicit UdpView(B* p) : p_(p) {}
  std::uint16_t src_port() const { return load_be16(p_ + udp_off::kSrc); }
  std::uint16_t dst_port() const { return load_be16(p_ + udp_off::kDst); }
  std::uint16_t length() const { return load_be16(p_ + udp_off::kLen); }
  std::uint16_t checksum() const { return load_be16(p_ + udp_off::kChecksum); }
  void set_src_port(std::uint16_t v) requires(!std::is_const_v<B>) {
    store_be16(p_ + udp_off::kSrc, v);
  }
  void set_dst_port(std::uint16_t v) requires(!std::is_const_v<B>) {
    store_be16(p_ + udp_off::kDst, v);
  }
  void set_length(std::uint16_t v) requires(!std::is_const_v<B>) {
    store_be16(p_ + udp_off::kLen, v);
  }
  void set_checksum(std::uint16_t v) requires(!std::is_const_v<B>) {
    store_be16(p_ + udp_off::kChecksum, v);
  }

 private:
  B* p_;
};

struct UdpFields {
  std::uint16_t src_port = 0xC000;
  std::uint16_t dst_port = kRoceV2UdpPort;
  std::uint16_t length = 0;    // the builder computes it
  std::uint16_t checksum = 0;  // rxe sends 0 (rxe_net.c prepare_udp_hdr); written as given
  friend bool operator==(const UdpFields&, const UdpFields&) = default;
};

inline void encode_udp(std::uint8_t* p, const UdpFields& f) {
  UdpView<std::uint8_t> v(p);
  v.set_src_port(f.src_port);
  v.set_dst_port(f.dst_port);
  v.set_length(f.length);
  v.set_checksum(f.checksum);
}

inline UdpFields decode_udp(const std::uint8_t* p) {
  UdpView<const std::uint8_t> v(p);
  return UdpFields{v.src_port(), v.dst_port(), v.length(), v.checksum()};
}

}  // namespace rocedp::wire
