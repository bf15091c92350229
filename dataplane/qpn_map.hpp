#pragma once
// Which polling core owns a queue pair, read straight from its 24-bit QPN (IBTA 9.2 BTH DestQP).
//
//   QPN = core index (bits 23..18) | per-core number (bits 17..0)
//
// The RX core finds the owner of a RoCEv2 frame with one shift, no table lookup and no shared
// state. QPN 0 (SMI, unused on RoCE) and QPN 1 (GSI: IB CM MADs, IBTA 13.5.1) are never data QPs:
// they go to the control path. Core 0 therefore hands out per-core numbers from 2. At most 64
// polling cores and 262,144 QPs per core (100,000 QPs on one core is a design target). QP creation
// takes the core of the QP's CQs, then a free per-core number on that core.

#include <cstdint>

namespace rocedp::dataplane {

inline constexpr uint32_t kQpnMask = 0x00FFFFFF;
inline constexpr unsigned kQpnCoreShift = 18;
inline constexpr uint32_t kQpnLocalMask = (1u << kQpnCoreShift) - 1;
inline constexpr uint32_t kMaxQpnCores = 1u << (24 - kQpnCoreShift);
inline constexpr uint32_t kGsiQpn = 1;  // QP1: connection management MADs

/// The polling core index that owns `qpn` (may be >= the number of cores: then nobody owns it).
constexpr uint32_t qpn_core(uint32_t qpn) {
  return (qpn & kQpnMask) >> kQpnCoreShift;
}
/// The number of `qpn` among the QPs of its core.
constexpr uint32_t qpn_local(uint32_t qpn) {
  return qpn & kQpnLocalMask;
}
/// Builds a QPN from a core index and a per-core number.
constexpr uint32_t make_qpn(uint32_t core, uint32_t local) {
  return ((core << kQpnCoreShift) | (local & kQpnLocalMask)) & kQpnMask;
}
/// QP0 and QP1 belong to the control path, whatever their high bits say.
constexpr bool qpn_is_control(uint32_t qpn) {
  return (qpn & kQpnMask) <= kGsiQpn;
}

static_assert(qpn_core(make_qpn(3, 7)) == 3 && qpn_local(make_qpn(3, 7)) == 7);
static_assert(qpn_core(0xFFFFFF) == kMaxQpnCores - 1);

}  // namespace rocedp::dataplane
