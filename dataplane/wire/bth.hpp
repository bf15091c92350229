#pragma once
// Base Transport Header, 12 bytes (IBTA Vol 1 §9.2; rxe_hdr.h):
//   0 opcode | 1 SE M Pad(2) TVer(4) | 2-3 P_Key | 4 FECN BECN resv6 | 5-7 DestQP
//   8 AckReq resv7 | 9-11 PSN
// Reserved bits are kept as they came so re-encoding reproduces the bytes.

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/psn.hpp"

namespace rocedp::wire {

inline constexpr std::size_t kBthLen = 12;
inline constexpr std::size_t kIcrcLen = 4;
inline constexpr std::uint16_t kDefaultPkey = 0xFFFF;
// The partition key without its membership bit (IBTA §10.9.3). The port holds only the default
// partition, as a full member, so a packet's P_Key matches when its low 15 bits are all ones:
// a full (0xFFFF) or limited (0x7FFF) member of it (Linux rxe's pkey_match does the same).
inline constexpr std::uint16_t kPkeyBaseMask = 0x7FFF;
constexpr bool pkey_matches_default(std::uint16_t pkey) {
  return (pkey & kPkeyBaseMask) == kPkeyBaseMask;
}
inline constexpr std::uint32_t kQpnMask = 0xFFFFFF;

namespace bth_off {
inline constexpr std::size_t kOpcode = 0, kFlags = 1, kPkey = 2, kResv8a = 4, kDqpn = 5,
                             kAckReq = 8, kPsn = 9;
}
static_assert(bth_off::kPsn + 3 == kBthLen, "BTH is 12 bytes");

namespace bth_bits {
inline constexpr std::uint8_t kSe = 0x80, kMig = 0x40, kPadMask = 0x30, kTverMask = 0x0F;
inline constexpr std::uint8_t kFecn = 0x80, kBecn = 0x40, kResv6Mask = 0x3F;
inline constexpr std::uint8_t kAckReq = 0x80, kResv7Mask = 0x7F;
inline constexpr int kPadShift = 4;
}  // namespace bth_bits

// The BTH's first 32-bit word (opcode, flags, P_Key; big-endian) masked by this equals
// kPkeyBaseMask exactly when TVer is 0 and the P_Key is the default partition's: the receive
// paths test both with one compare.
inline constexpr std::uint32_t kBthWord0TverPkeyMask =
    std::uint32_t{bth_bits::kTverMask} << 16 | kPkeyBaseMask;

template <class B>
class BthView {
 public:
  explicit BthView(B* p) : p_(p) {}
  std::uint8_t opcode() const { return p_[bth_off::kOpcode]; }
  bool se() const { return p_[bth_off::kFlags] & bth_bits::kSe; }
  bool mig() const { return p_[bth_off::kFlags] & bth_bits::kMig; }
  std::uint8_t pad() const {
    return (p_[bth_off::kFlags] & bth_bits::kPadMask) >> bth_bits::kPadShift;
  }
  std::uint8_t tver() const { return p_[bth_off::kFlags] & bth_bits::kTverMask; }
  std::uint16_t pkey() const { return load_be16(p_ + bth_off::kPkey); }
  bool fecn() const { return p_[bth_off::kResv8a] & bth_bits::kFecn; }
  bool becn() const { return p_[bth_off::kResv8a] & bth_bits::kBecn; }
  std::uint8_t resv6() const { return p_[bth_off::kResv8a] & bth_bits::kResv6Mask; }
  std::uint32_t dqpn() const { return load_be24(p_ + bth_off::kDqpn); }
  bool ack_req() const { return p_[bth_off::kAckReq] & bth_bits::kAckReq; }
  std::uint8_t resv7() const { return p_[bth_off::kAckReq] & bth_bits::kResv7Mask; }
  std::uint32_t psn() const { return load_be24(p_ + bth_off::kPsn); }

  void set_opcode(std::uint8_t v) requires(!std::is_const_v<B>) { p_[bth_off::kOpcode] = v; }
  void set_flags(bool se, bool mig, std::uint8_t pad,
                 std::uint8_t tver) requires(!std::is_const_v<B>) {
    p_[bth_off::kFlags] = static_cast<std::uint8_t>(
        (se ? bth_bits::kSe : 0) | (mig ? bth_bits::kMig : 0) |
        ((pad << bth_bits::kPadShift) & bth_bits::kPadMask) | (tver & bth_bits::kTverMask));
  }
  void set_pad(std::uint8_t pad) requires(!std::is_const_v<B>) {
    p_[bth_off::kFlags] =
        static_cast<std::uint8_t>((p_[bth_off::kFlags] & ~bth_bits::kPadMask) |
                                  ((pad << bth_bits::kPadShift) & bth_bits::kPadMask));
  }
  void set_pkey(std::uint16_t v) requires(!std::is_const_v<B>) {
    store_be16(p_ + bth_off::kPkey, v);
  }
  void set_resv8a(bool fecn, bool becn, std::uint8_t resv6) requires(!std::is_const_v<B>) {
    p_[bth_off::kResv8a] =
        static_cast<std::uint8_t>((fecn ? bth_bits::kFecn : 0) | (becn ? bth_bits::kBecn : 0) |
                                  (resv6 & bth_bits::kResv6Mask));
  }
  void set_dqpn(std::uint32_t v) requires(!std::is_const_v<B>) {
    store_be24(p_ + bth_off::kDqpn, v & kQpnMask);
  }
  void set_ack_req_psn(bool ack_req, std::uint8_t resv7,
                       std::uint32_t psn) requires(!std::is_const_v<B>) {
    p_[bth_off::kAckReq] = static_cast<std::uint8_t>((ack_req ? bth_bits::kAckReq : 0) |
                                                     (resv7 & bth_bits::kResv7Mask));
    store_be24(p_ + bth_off::kPsn, psn & kPsnMask);
  }
  void set_psn(std::uint32_t psn) requires(!std::is_const_v<B>) {
    store_be24(p_ + bth_off::kPsn, psn & kPsnMask);
  }

 private:
  B* p_;
};

struct BthFields {
  std::uint8_t opcode = 0;
  bool se = false;
  bool mig = false;
  std::uint8_t pad = 0;   // 0..3 bytes of pad after the payload
  std::uint8_t tver = 0;  // must be 0 (IBTA §9.2.1)
  std::uint16_t pkey = kDefaultPkey;
  bool fecn = false;
  bool becn = false;
  std::uint8_t resv6 = 0;
  std::uint32_t dqpn = 0;
  bool ack_req = false;
  std::uint8_t resv7 = 0;
  std::uint32_t psn = 0;
  friend bool operator==(const BthFields&, const BthFields&) = default;
};

inline void encode_bth(std::uint8_t* p, const BthFields& f) {
  BthView<std::uint8_t> v(p);
  v.set_opcode(f.opcode);
  v.set_flags(f.se, f.mig, f.pad, f.tver);
  v.set_pkey(f.pkey);
  v.set_resv8a(f.fecn, f.becn, f.resv6);
  v.set_dqpn(f.dqpn);
  v.set_ack_req_psn(f.ack_req, f.resv7, f.psn);
}

// Fills `f` in place (the parser decodes straight into its PacketFields, no temporary).
inline void decode_bth_into(const std::uint8_t* p, BthFields& f) {
  BthView<const std::uint8_t> v(p);
  f.opcode = v.opcode();
  f.se = v.se();
  f.mig = v.mig();
  f.pad = v.pad();
  f.tver = v.tver();
  f.pkey = v.pkey();
  f.fecn = v.fecn();
  f.becn = v.becn();
  f.resv6 = v.resv6();
  f.dqpn = v.dqpn();
  f.ack_req = v.ack_req();
  f.resv7 = v.resv7();
  f.psn = v.psn();
}

inline BthFields decode_bth(const std::uint8_t* p) {
  BthFields f;
  decode_bth_into(p, f);
  return f;
}

}  // namespace rocedp::wire
