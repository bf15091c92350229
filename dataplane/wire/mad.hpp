#pragma once
// Management datagram header (IBTA Vol 1 §13.4.3) as carried by QP1 (GSI) in
// a UD SEND_ONLY, and the CM attribute names (IBTA §12.6; cm_msgs.h).
// Only the common header is decoded here; the CM message bodies (REQ, REP...)
// have their codec in cm_messages.hpp.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "dataplane/wire/bytes.hpp"

namespace rocedp::wire {

inline constexpr std::size_t kMadHdrLen = 24;
inline constexpr std::size_t kMadLen = 256;  // every GSI MAD is exactly 256 bytes
inline constexpr std::uint32_t kGsiQpn = 1;
inline constexpr std::uint8_t kMadBaseVersion = 1;
inline constexpr std::uint8_t kMgmtClassCm = 0x07;
inline constexpr std::uint8_t kCmClassVersion = 2;
inline constexpr std::uint8_t kMadMethodSend = 0x03;
inline constexpr std::uint8_t kMadMethodResponseBit = 0x80;

namespace mad_off {
inline constexpr std::size_t kBaseVersion = 0, kMgmtClass = 1, kClassVersion = 2, kMethod = 3,
                             kStatus = 4, kClassSpecific = 6, kTid = 8, kAttrId = 16, kResv = 18,
                             kAttrMod = 20;
}
static_assert(mad_off::kAttrMod + 4 == kMadHdrLen, "MAD common header is 24 bytes");

// CM attribute IDs (IBTA Table 104; cm_msgs.h CM_*_ATTR_ID).
namespace cm_attr {
inline constexpr std::uint16_t kClassPortInfo = 0x0001, kReq = 0x0010, kMra = 0x0011, kRej = 0x0012,
                               kRep = 0x0013, kRtu = 0x0014, kDreq = 0x0015, kDrep = 0x0016,
                               kSidrReq = 0x0017, kSidrRep = 0x0018, kLap = 0x0019, kApr = 0x001A;
}

struct MadHeader {
  std::uint8_t base_version = kMadBaseVersion;
  std::uint8_t mgmt_class = kMgmtClassCm;
  std::uint8_t class_version = kCmClassVersion;
  std::uint8_t method = kMadMethodSend;  // bit 7 = response
  std::uint16_t status = 0;
  std::uint16_t class_specific = 0;
  std::uint64_t tid = 0;
  std::uint16_t attr_id = 0;
  std::uint16_t resv = 0;
  std::uint32_t attr_mod = 0;
  friend bool operator==(const MadHeader&, const MadHeader&) = default;
};

// nullopt if fewer than 24 bytes.
std::optional<MadHeader> decode_mad_header(Bytes mad);
void encode_mad_header(std::uint8_t* p, const MadHeader& h);

// "REQ", "REP", "RTU", ... for a CM attribute ID; "" if not a CM message.
std::string_view cm_message_name(std::uint16_t attr_id);
// The CM message name when `h` is a CM MAD, else "".
std::string_view cm_message_name(const MadHeader& h);

}  // namespace rocedp::wire
