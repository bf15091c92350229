#pragma once
// 802.1Q on a port, in software at the port's edge: a port with a VLAN tags every frame it sends
// and takes only frames of its VLAN, untagged on the way in, so everything above pmd/ sees plain
// Ethernet frames whatever the port. The virtual devices we run on offer no VLAN offload (memif,
// ring) or offer it out of band (af_packet), so one software stage serves them all.
//
// Both functions run on the queue's owning lcore, inside Port::rx_burst / Port::tx_burst.

#include <atomic>
#include <cstdint>

struct rte_mbuf;

namespace rocedp::pmd {

/// Counters of one queue's VLAN stage: written by the queue's owner, read by the control path.
struct VlanCounters {
  std::atomic<uint64_t> rx_dropped{0};  ///< untagged, or tagged with another VLAN ID: freed
  std::atomic<uint64_t> tx_dropped{0};  ///< could not take the tag (shared mbuf, no headroom)
};

/// 802.1Q tag control information: priority (PCP) in the top 3 bits, DEI 0, VLAN ID.
inline constexpr uint16_t vlan_tci(uint16_t vid, uint8_t priority) {
  return static_cast<uint16_t>((uint32_t{priority} << 13) | (vid & 0x0FFFu));
}

/// Removes the 802.1Q tag the frame carries in band if its VLAN ID is `vid`: the TCI into
/// m->vlan_tci, RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED set. False (and the frame
/// unchanged) if it has no such tag. For a port that takes priority-tagged frames (`vid` 0)
/// without a VLAN stage.
bool vlan_untag(rte_mbuf* m, uint16_t vid);

/// Keeps the frames of `pkts[0..n)` that belong to VLAN `vid`, untagged (as vlan_untag), in their
/// order at the front of `pkts`; frees every other frame and counts it. VLAN ID 0 is a port
/// without a VLAN that sends priority-tagged frames: it keeps untagged and priority-tagged frames.
/// A frame a driver untagged already (RTE_MBUF_F_RX_VLAN_STRIPPED) is judged by m->vlan_tci.
/// Returns how many were kept.
uint16_t vlan_receive(rte_mbuf** pkts, uint16_t n, uint16_t vid, VlanCounters& counters);

/// Tags the frames of `pkts[0..n)` with `tci`, each once: a frame that carries an 802.1Q tag
/// already (one the queue did not take last time, offered again) is left as it is. A frame that
/// cannot take the tag is freed and counted. Returns d, the number freed: the frames to send are
/// then `pkts[d..n)`, in their order (so the caller's "the first k were taken" still holds when
/// it counts the freed ones as taken).
uint16_t vlan_send(rte_mbuf** pkts, uint16_t n, uint16_t tci, VlanCounters& counters);

}  // namespace rocedp::pmd
