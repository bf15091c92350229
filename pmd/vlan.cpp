#include "pmd/vlan.hpp"

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

#include <cstring>

namespace rocedp::pmd {
namespace {

constexpr size_t kMacs = 2 * RTE_ETHER_ADDR_LEN;  // destination and source: they move by the tag

// One writer per queue: a relaxed load and store, no locked add.
void count(std::atomic<uint64_t>& c) {
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// The frame's TCI and whether it has one: out of band from a driver that untagged it, or in band.
bool tag_of(const rte_mbuf* m, uint16_t* tci) {
  if (m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) {
    *tci = m->vlan_tci;
    return true;
  }
  if (rte_pktmbuf_data_len(m) < RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN) return false;
  const auto* eth = rte_pktmbuf_mtod(m, const rte_ether_hdr*);
  if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN)) return false;
  *tci = rte_be_to_cpu_16(reinterpret_cast<const rte_vlan_hdr*>(eth + 1)->vlan_tci);
  return true;
}

// The MACs move forward over the in-band tag whose TCI is `tci`; the EtherType after the tag
// becomes the frame's.
void strip(rte_mbuf* m, uint16_t tci) {
  uint8_t* p = rte_pktmbuf_mtod(m, uint8_t*);
  std::memmove(p + RTE_VLAN_HLEN, p, kMacs);
  rte_pktmbuf_adj(m, RTE_VLAN_HLEN);
  m->vlan_tci = tci;
  m->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
}

}  // namespace

bool vlan_untag(rte_mbuf* m, uint16_t vid) {
  uint16_t tci = 0;
  if ((m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) || !tag_of(m, &tci) || (tci & 0x0FFF) != vid)
    return false;
  strip(m, tci);
  return true;
}

uint16_t vlan_receive(rte_mbuf** pkts, uint16_t n, uint16_t vid, VlanCounters& counters) {
  uint16_t kept = 0;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    uint16_t tci = 0;
    const bool tagged = tag_of(m, &tci);
    // A VLAN port takes its VLAN only; a priority-tagging port (vid 0) untagged frames and
    // priority-tagged ones.
    if (tagged ? (tci & 0x0FFF) != vid : vid != 0) {
      rte_pktmbuf_free(m);
      count(counters.rx_dropped);
      continue;
    }
    if (tagged && !(m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED)) strip(m, tci);
    pkts[kept++] = m;
  }
  return kept;
}

uint16_t vlan_send(rte_mbuf** pkts, uint16_t n, uint16_t tci, VlanCounters& counters) {
  // From the back, so the frames to send end up at the back in their order.
  uint16_t to = n;
  for (uint16_t i = n; i-- > 0;) {
    rte_mbuf* m = pkts[i];
    uint8_t* p = rte_pktmbuf_mtod(m, uint8_t*);
    const bool tagged = rte_pktmbuf_data_len(m) >= RTE_ETHER_HDR_LEN &&
                        reinterpret_cast<const rte_ether_hdr*>(p)->ether_type ==
                            rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN);
    if (!tagged) {
      // The frame's bytes change: only a frame no one else holds may take the tag.
      uint8_t* q = nullptr;
      if (RTE_MBUF_DIRECT(m) && rte_mbuf_refcnt_read(m) == 1 && rte_pktmbuf_data_len(m) >= kMacs)
        q = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(m, RTE_VLAN_HLEN));
      if (q == nullptr) {
        rte_pktmbuf_free(m);
        count(counters.tx_dropped);
        continue;
      }
      std::memmove(q, p, kMacs);  // the MACs move back; the EtherType stays, after the tag
      const rte_be16_t tpid = rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN);
      const rte_be16_t be_tci = rte_cpu_to_be_16(tci);
      std::memcpy(q + kMacs, &tpid, 2);
      std::memcpy(q + kMacs + 2, &be_tci, 2);
    }
    pkts[--to] = m;
  }
  return to;
}

}  // namespace rocedp::pmd
