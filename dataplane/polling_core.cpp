#include "dataplane/polling_core.hpp"

#include <algorithm>

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_prefetch.h>
#include <rte_udp.h>

#include <cassert>
#include <cstring>

#include "dataplane/qpn_map.hpp"
#include "dataplane/wire/parser.hpp"
#include "pmd/port.hpp"
#include "pmd/rx_dispatch.hpp"
#include "pmd/vlan.hpp"

namespace rocedp::dataplane {
namespace {

inline void set_kind(rte_mbuf* m, FrameKind kind) {
  m->hash.usr = static_cast<uint32_t>(kind);
}

// True when this lcore can take no mbuf from `mp`. Free while the lcore's cache holds mbufs (the
// usual case); with the cache empty it tries to take one from the common pool and puts it back
// (rte_mempool_avail_count would walk every lcore's cache).
bool pool_empty_st(rte_mempool* mp) {
  const rte_mempool_cache* cache = rte_mempool_default_cache(mp, rte_lcore_id());
  if (cache != nullptr && cache->len != 0) return false;
  void* obj = nullptr;
  if (rte_mempool_get(mp, &obj) != 0) return true;
  rte_mempool_put(mp, obj);
  return false;
}

}  // namespace

PollingCore::PollingCore(uint16_t index, unsigned lcore_id, uint16_t burst_size,
                         pmd::RxDispatch& dispatch, CoreChannel& channel,
                         uint32_t neighbour_capacity)
    : index_(index),
      n_cores_(dispatch.core_count()),
      lcore_id_(lcore_id),
      burst_(burst_size == 0 ? 1 : (burst_size > kMaxBurst ? kMaxBurst : burst_size)),
      dispatch_(dispatch),
      channel_(channel),
      neighbours_(neighbour_capacity) {
  stats_.core_index = index;
  stats_.lcore_id = lcore_id;
  slot_of_port_.fill(-1);
}

void PollingCore::assert_lcore() const {
  assert(rte_lcore_id() == lcore_id_);
}

int PollingCore::lcore_main(void* arg) {
  static_cast<PollingCore*>(arg)->run_st();
  return 0;
}

void PollingCore::run_st() {
  assert_lcore();
  uint64_t last = rte_rdtsc();
  uint32_t idle_streak = 0;
  while (!stop_) {
    // One TSC read per iteration: it ends the last iteration's accounting and times this poll.
    const bool busy = poll_at_st(last);
    if (idle_sleep_us_ != 0) {
      idle_streak = busy ? 0 : idle_streak + 1;
      // Only an idle core sleeps: the system call never sits on a busy packet path.
      if (idle_streak >= kIdlePollsBeforeSleep) rte_delay_us_sleep(idle_sleep_us_);
    }
    const uint64_t now = rte_rdtsc();
    // Cycles of one iteration go to busy when any poller did work (SPDK reactor accounting).
    (busy ? stats_.busy_cycles : stats_.idle_cycles) += now - last;
    last = now;
  }
}

// RoCEv2 in IPv4 without options, to this port's MAC and address, for a data QP: the core that
// owns the QP (which may not exist: the caller compares with n_cores_ or its own index), or
// kNotFastRoce for any other frame. It is exactly what classify_other_st would route to that
// core (the same checks, fewer of them).
[[gnu::always_inline]] inline uint32_t PollingCore::roce_core(const AttachedPort& ap,
                                                              const rte_mbuf* m) {
  constexpr size_t kUdpAt = wire::kEthHdrLen + wire::kIpv4MinHdrLen;
  constexpr size_t kBthAt = kUdpAt + wire::kUdpHdrLen;
  if (rte_pktmbuf_data_len(m) < kBthAt + wire::kBthLen) [[unlikely]]
    return kNotFastRoce;
  const uint8_t* p = rte_pktmbuf_mtod(m, const uint8_t*);
  const auto* eth = reinterpret_cast<const rte_ether_hdr*>(p);
  const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(p + wire::kEthHdrLen);
  const auto* udp = reinterpret_cast<const rte_udp_hdr*>(p + kUdpAt);
  if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) || ip->version_ihl != 0x45 ||
      ip->next_proto_id != IPPROTO_UDP || udp->dst_port != rte_cpu_to_be_16(wire::kRoceV2UdpPort) ||
      ip->dst_addr != ap.ip_be || !rte_is_same_ether_addr(&eth->dst_addr, &ap.mac)) [[unlikely]]
    return kNotFastRoce;
  const uint32_t qpn = wire::load_be32(p + kBthAt + 4) & wire::kQpnMask;  // resv8a, DestQP
  return qpn_is_control(qpn) ? kNotFastRoce : qpn_core(qpn);
}

bool PollingCore::poll_at_st(uint64_t tsc) {
  assert_lcore();
  bool work = false;
  rte_mbuf* pkts[kMaxBurst];
  rte_mbuf* local[kMaxBurst];

  // 1. Our RX queues.
  for (unsigned s = 0; s < n_attached_; ++s) {
    AttachedPort& ap = ports_[s];
    const uint16_t n = ap.port->rx_burst(ap.queue, pkts, burst_);
    if (n < burst_ && ap.rx_pool != nullptr && pool_empty_st(ap.rx_pool)) [[unlikely]]
      stats_.rx_pool_empty++;
    if (n == 0) continue;
    work = true;
    stats_.rx_packets += n;
    // The common burst, RoCEv2 for this core's QPs, goes straight to the engine in one pass; from
    // the first frame that is anything else, the rest of the burst goes through the dispatcher
    // (so a burst's frames reach the engine in their order).
    rte_mbuf* roce[kMaxBurst];
    wire::Bytes* frames = rx_frames_.data();
    RoceHandler* const handler = ap.roce;
    uint64_t bytes = 0;
    uint16_t i = 0;
    for (; i < n; ++i) {
      rte_mbuf* m = pkts[i];
      bytes += rte_pktmbuf_pkt_len(m);
      // Not every PMD stamps the port (net_ring leaves the sender's); classification and the
      // answer path rely on it, so the RX poller does.
      m->port = ap.port_id;
      if (handler == nullptr || m->nb_segs != 1 || roce_core(ap, m) != index_) break;
      roce[i] = m;
      frames[i] = wire::Bytes(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
    }
    if (i != 0) deliver_roce_st(handler, roce, i, tsc);
    if (i != n) [[unlikely]] {
      for (uint16_t k = i + 1; k < n; ++k) {
        bytes += rte_pktmbuf_pkt_len(pkts[k]);
        pkts[k]->port = ap.port_id;
      }
      const uint16_t n_local =
          dispatch_.dispatch(index_, pkts + i, n - i, &PollingCore::classify, this, local);
      handle_local_st(local, n_local, tsc);
    }
    stats_.rx_bytes += bytes;
  }

  // 2. Frames other cores handed to us (already classified by them).
  const uint16_t n_in = dispatch_.receive(index_, pkts, burst_);
  if (n_in > 0) {
    work = true;
    stats_.handoff_in += n_in;
    handle_local_st(pkts, n_in, tsc);
  }

  // 3. Control requests, bounded so control traffic never starves the pollers.
  const unsigned n_req = channel_.process_requests_st(this, kRequestBatch);
  if (n_req > 0) {
    work = true;
    stats_.requests += n_req;
  }

  // 3b. RDMA objects: engine timers/transmit/completions and CQ upkeep (dataplane/core_rdma).
  for (unsigned h = 0; h < n_handlers_; ++h)
    if (handlers_[h]->poll_st(tsc)) work = true;

  // 4. One TX burst per port for everything the pollers above produced.
  if (flush_tx_st()) work = true;

  stats_.polls++;
  if (work) stats_.busy_polls++;
  return work;
}

uint16_t PollingCore::classify(void* ctx, rte_mbuf* m) {
  return static_cast<PollingCore*>(ctx)->classify_st(m);
}

// Cheap header peek that only decides the owner; the owner parses and checks fully (the RoCEv2
// parser with its ICRC check runs on the core that owns the QP). Frames whose headers are not in
// the first segment are not ours to route: every PMD we use delivers headers contiguously.
//
// The frame nearly every poll carries first (roce_core), inline; every other frame, and every
// drop with its counter, goes to classify_other_st. Measured in the responder of a WRITE 64 B
// stream (callgrind, rocedp-perf --server): 91 instructions a frame before, with every check in
// one function that saved and restored six registers for the ARP/ICMP branch.
uint16_t PollingCore::classify_st(rte_mbuf* m) {
  const int slot = m->port < RTE_MAX_ETHPORTS ? slot_of_port_[m->port] : -1;
  if (slot >= 0) [[likely]] {
    const uint32_t core = roce_core(ports_[slot], m);
    if (core < n_cores_) {
      set_kind(m, FrameKind::kRoce);
      return static_cast<uint16_t>(core);
    }
  }
  return classify_other_st(m);
}

// What a local classifier (dataplane/arp_icmp, dataplane/ndp) decided for `m`, as the dispatch's
// target: kAnswerLocally stays on this core, kToControl goes to the control thread, kDrop is
// counted by the classifier by reason; -1: not theirs.
template <class Class>
int PollingCore::route_local_st(rte_mbuf* m, Class c, FrameKind answer, FrameKind to_control) {
  if (c == Class::kAnswerLocally) {
    set_kind(m, answer);
    return index_;
  }
  if (c == Class::kToControl) {
    set_kind(m, to_control);
    stats_.to_control++;
    return n_cores_;
  }
  if (c == Class::kDrop) return pmd::RxDispatch::kDrop;
  return -1;
}

uint16_t PollingCore::classify_other_st(rte_mbuf* m) {
  const int slot = m->port < RTE_MAX_ETHPORTS ? slot_of_port_[m->port] : -1;
  const uint32_t len = rte_pktmbuf_data_len(m);
  if (slot < 0) {
    stats_.drops[drop_index(CoreDrop::kNotForUs)]++;
    return pmd::RxDispatch::kDrop;
  }
  const AttachedPort& ap = ports_[slot];
  if (len < sizeof(rte_ether_hdr)) {
    stats_.drops[drop_index(wire::DropReason::kEthTooShort)]++;
    return pmd::RxDispatch::kDrop;
  }
  const auto* eth = rte_pktmbuf_mtod(m, const rte_ether_hdr*);
  const uint16_t ether_type = rte_be_to_cpu_16(eth->ether_type);
  // A priority-tagged frame (802.1Q, VLAN ID 0: a peer that marks its PCP without a VLAN, as RoCE
  // NICs do for PFC) is untagged here, once, and classified again. Any other VLAN is not this
  // port's (a port with a VLAN takes its own in pmd/vlan.hpp before frames get here).
  if (ether_type == RTE_ETHER_TYPE_VLAN && pmd::vlan_untag(m, 0)) return classify_st(m);

  // ARP and ICMP first: dataplane/arp_icmp validates and decides (answer here, learn on control).
  // An IPv4 UDP frame is neither, so RoCEv2 traffic does not pass through that classifier.
  const bool ipv4_udp =
      ether_type == RTE_ETHER_TYPE_IPV4 && len >= sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr) &&
      reinterpret_cast<const rte_ipv4_hdr*>(eth + 1)->next_proto_id == IPPROTO_UDP;
  if (!ipv4_udp) {
    const int target = route_local_st(m, classify_arp_icmp(m, ap.local, &stats_.arp_icmp),
                                      FrameKind::kAnswerLocally, FrameKind::kArpToControl);
    if (target >= 0) return static_cast<uint16_t>(target);
  }
  // ICMPv6 (neighbour discovery, echo) of a port with an IPv6 address: dataplane/ndp decides.
  // Any other IPv6 frame (UDP among them) is left to the classifiers below.
  if (ether_type == RTE_ETHER_TYPE_IPV6 && ap.has_ip6) {
    const int target = route_local_st(m, classify_ndp(m, ap.local6, &stats_.ndp),
                                      FrameKind::kNdpAnswerLocally, FrameKind::kNdpToControl);
    if (target >= 0) return static_cast<uint16_t>(target);
  }

  if (!rte_is_same_ether_addr(&eth->dst_addr, &ap.mac) &&
      !rte_is_broadcast_ether_addr(&eth->dst_addr)) {
    stats_.drops[drop_index(CoreDrop::kNotForUs)]++;
    return pmd::RxDispatch::kDrop;
  }
  if (ether_type == RTE_ETHER_TYPE_IPV6) return classify_ipv6_st(m, ap);
  if (ether_type != RTE_ETHER_TYPE_IPV4) {
    stats_.drops[drop_index(CoreDrop::kUnsupported)]++;
    return pmd::RxDispatch::kDrop;
  }
  if (len < sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr)) {
    stats_.drops[drop_index(wire::DropReason::kIpTooShort)]++;
    return pmd::RxDispatch::kDrop;
  }
  const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(eth + 1);
  if (ip->dst_addr != ap.ip_be) {
    stats_.drops[drop_index(CoreDrop::kNotForUs)]++;
    return pmd::RxDispatch::kDrop;
  }
  const uint32_t ihl = static_cast<uint32_t>(ip->version_ihl & 0x0F) * 4;
  if (ip->next_proto_id == IPPROTO_UDP && ihl >= sizeof(rte_ipv4_hdr) &&
      len >= sizeof(rte_ether_hdr) + ihl + sizeof(rte_udp_hdr)) {
    const auto* udp =
        reinterpret_cast<const rte_udp_hdr*>(reinterpret_cast<const uint8_t*>(ip) + ihl);
    if (rte_be_to_cpu_16(udp->dst_port) == wire::kRoceV2UdpPort) {
      if (len < sizeof(rte_ether_hdr) + ihl + sizeof(rte_udp_hdr) + wire::kBthLen) {
        stats_.drops[drop_index(wire::DropReason::kBthTooShort)]++;
        return pmd::RxDispatch::kDrop;
      }
      return route_bth_st(m, reinterpret_cast<const uint8_t*>(udp + 1));
    }
  }
  stats_.drops[drop_index(CoreDrop::kUnsupported)]++;
  return pmd::RxDispatch::kDrop;
}

// RoCEv2 over IPv6 (no extension headers) to this port's IPv6 address: the core of its data QP,
// or the control thread for QP1 (the IB CM).
uint16_t PollingCore::classify_ipv6_st(rte_mbuf* m, const AttachedPort& ap) {
  constexpr size_t kIp = sizeof(rte_ether_hdr);
  constexpr size_t kUdp = kIp + wire::kIpv6HdrLen;
  constexpr size_t kBth = kUdp + sizeof(rte_udp_hdr);
  const uint32_t len = rte_pktmbuf_data_len(m);
  const uint8_t* p = rte_pktmbuf_mtod(m, const uint8_t*);
  if (len < kUdp) {
    stats_.drops[drop_index(wire::DropReason::kIpTooShort)]++;
    return pmd::RxDispatch::kDrop;
  }
  if (!ap.has_ip6 ||
      std::memcmp(p + kIp + wire::ipv6_off::kDst, ap.local6.ip.bytes.data(), 16) != 0) {
    stats_.drops[drop_index(CoreDrop::kNotForUs)]++;
    return pmd::RxDispatch::kDrop;
  }
  const auto* udp = reinterpret_cast<const rte_udp_hdr*>(p + kUdp);
  if (p[kIp + wire::ipv6_off::kNextHeader] != IPPROTO_UDP || len < kBth ||
      rte_be_to_cpu_16(udp->dst_port) != wire::kRoceV2UdpPort) {
    stats_.drops[drop_index(CoreDrop::kUnsupported)]++;
    return pmd::RxDispatch::kDrop;
  }
  if (len < kBth + wire::kBthLen) {
    stats_.drops[drop_index(wire::DropReason::kBthTooShort)]++;
    return pmd::RxDispatch::kDrop;
  }
  return route_bth_st(m, p + kBth);
}

// A RoCEv2 frame (IPv4 or IPv6) by the DestQP of its BTH at `bth` (the caller checked it is in
// the frame): QP1 to the control thread, a data QP to the core that owns it.
uint16_t PollingCore::route_bth_st(rte_mbuf* m, const uint8_t* bth) {
  const uint32_t qpn = wire::load_be32(bth + 4) & wire::kQpnMask;  // resv8a, DestQP
  if (qpn_is_control(qpn)) {
    set_kind(m, FrameKind::kCm);
    stats_.to_control++;
    return n_cores_;
  }
  const uint32_t core = qpn_core(qpn);
  if (core >= n_cores_) {
    stats_.drops[drop_index(CoreDrop::kQpnCoreOutOfRange)]++;
    return pmd::RxDispatch::kDrop;
  }
  set_kind(m, FrameKind::kRoce);
  return static_cast<uint16_t>(core);
}

void PollingCore::handle_local_st(rte_mbuf** pkts, uint16_t n, uint64_t tsc) {
  // RoCEv2 frames are collected and handed to the RDMA objects of their port as one burst: after
  // the loop, or before a frame of another port (so each port's frames keep their order).
  rte_mbuf* roce[kMaxBurst];
  wire::Bytes* frames = rx_frames_.data();
  uint16_t n_roce = 0;
  RoceHandler* batch = nullptr;  // the handler of roce[0, n_roce)
  for (uint16_t i = 0; i < n; ++i) {
    if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void*));
    rte_mbuf* m = pkts[i];
    switch (frame_kind(m)) {
      case FrameKind::kAnswerLocally: {
        const int slot = slot_of_port_[m->port];
        // The reply is built in the received mbuf and leaves on the queue it came in on.
        ArpPeer peer;
        if (slot >= 0 && answer_locally(m, ports_[slot].local, &stats_.arp_icmp, &peer)) {
          if (peer.ip.value != 0) note_peer_st(peer);
          send_st(m->port, m);
        } else {
          rte_pktmbuf_free(m);  // counted by answer_locally (or the port left meanwhile)
        }
        break;
      }
      case FrameKind::kNdpAnswerLocally: {
        const int slot = slot_of_port_[m->port];
        NdpPeer peer;
        if (slot >= 0 && ports_[slot].has_ip6 &&
            answer_ndp(m, ports_[slot].local6, &stats_.ndp, &peer)) {
          if (peer.ip != config::Ipv6Address{}) note_peer6_st(peer);
          send_st(m->port, m);
        } else {
          rte_pktmbuf_free(m);  // counted by answer_ndp (or the port left meanwhile)
        }
        break;
      }
      case FrameKind::kRoce: {
        // Every PMD we use delivers a frame that fits one segment in one segment.
        RoceHandler* const handler = roce_of_port_[m->port];
        if (handler != nullptr && m->nb_segs == 1) [[likely]] {
          if (handler != batch) {
            if (n_roce != 0) deliver_roce_st(batch, roce, n_roce, tsc);
            n_roce = 0;
            batch = handler;
          }
          roce[n_roce] = m;
          frames[n_roce++] =
              wire::Bytes(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
        } else {
          drop_roce_st(m);
        }
        break;
      }
      default:
        drop_st(m, drop_index(CoreDrop::kUnsupported));
        break;
    }
  }
  if (n_roce != 0) deliver_roce_st(batch, roce, n_roce, tsc);
}

// The engine checks every frame (lengths, opcode, pad, ICRC) before any QP sees it, counts each
// one (accepted or by reason) and keeps none of them.
void PollingCore::deliver_roce_st(RoceHandler* handler, rte_mbuf** roce, uint16_t n, uint64_t tsc) {
  stats_.roce_to_engine +=
      handler->rx_burst_st(std::span<const wire::Bytes>(rx_frames_.data(), n), tsc);
  free_received(roce, n);
}

// Received mbufs as a PMD hands them out (direct, one segment, nobody else holding them, one
// pool) go back to their pool in one put: the test rte_pktmbuf_free makes of each (its
// rte_pktmbuf_prefree_seg), without rte_pktmbuf_free_bulk's per-mbuf pool grouping and reset
// stores. Any other burst takes the general free.
void PollingCore::free_received(rte_mbuf** m, uint16_t n) {
  rte_mempool* const pool = m[0]->pool;
  for (uint16_t i = 0; i < n; ++i) {
    const rte_mbuf* b = m[i];
    if (b->pool != pool || rte_mbuf_refcnt_read(b) != 1 || !RTE_MBUF_DIRECT(b) ||
        b->next != nullptr) [[unlikely]] {
      rte_pktmbuf_free_bulk(m, n);
      return;
    }
  }
  rte_mempool_put_bulk(pool, reinterpret_cast<void* const*>(m), n);
}

// A RoCEv2 frame no RDMA object can take (none installed on this core, or a chained mbuf): it is
// still checked, so a malformed one is counted by its reason, and otherwise counted unknown.
[[gnu::cold]] void PollingCore::drop_roce_st(rte_mbuf* m) {
  if (m->nb_segs == 1) {
    wire::ParsedPacket parsed;
    const wire::DropReason r = wire::parse(
        wire::Bytes(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m)), parsed);
    if (wire::is_failure(r)) {
      drop_st(m, drop_index(r));
      return;
    }
  }
  drop_st(m, drop_index(CoreDrop::kUnknownQpn));
}

void PollingCore::note_peer_st(const ArpPeer& peer) {
  for (uint32_t i = 0; i < stats_.n_learned_peers; ++i) {
    if (stats_.learned_peers[i].ip == peer.ip) {
      stats_.learned_peers[i] = peer;  // the latest MAC wins
      return;
    }
  }
  if (stats_.n_learned_peers == CoreStats::kMaxLearnedPeers) {
    stats_.learned_peers_overflow++;
    return;
  }
  stats_.learned_peers[stats_.n_learned_peers++] = peer;
}

void PollingCore::note_peer6_st(const NdpPeer& peer) {
  for (uint32_t i = 0; i < stats_.n_learned_peers6; ++i) {
    if (stats_.learned_peers6[i].ip == peer.ip &&
        stats_.learned_peers6[i].port_id == peer.port_id) {
      stats_.learned_peers6[i] = peer;  // the latest MAC wins
      return;
    }
  }
  if (stats_.n_learned_peers6 == CoreStats::kMaxLearnedPeers) {
    stats_.learned_peers6_overflow++;
    return;
  }
  stats_.learned_peers6[stats_.n_learned_peers6++] = peer;
}

void PollingCore::drop_st(rte_mbuf* m, std::size_t idx) {
  stats_.drops[idx]++;
  rte_pktmbuf_free(m);
}

// send_st without room in the buffer, or without a TX queue on `port_id`.
// A frame queue_tx_st did not take: no TX queue on the port here, or the buffer still full.
void PollingCore::drop_unqueued_st(uint16_t port_id, rte_mbuf* m) {
  const bool queue = port_id < RTE_MAX_ETHPORTS && slot_of_port_[port_id] >= 0;
  drop_st(m, drop_index(queue ? CoreDrop::kNoTxRoom : CoreDrop::kNoTxQueue));
}

// queue_tx_st once try_queue_tx_st refused: with a TX queue on the port, its buffer was full, so
// one flush, then the frame if that made room.
bool PollingCore::queue_tx_after_flush_st(uint16_t port_id, rte_mbuf* m) {
  if (port_id >= RTE_MAX_ETHPORTS || slot_of_port_[port_id] < 0) return false;
  flush_tx_st();
  return try_queue_tx_st(port_id, m);
}

bool PollingCore::flush_tx_st() {
  bool sent_any = false;
  for (unsigned s = 0; s < n_attached_; ++s) {
    AttachedPort& ap = ports_[s];
    if (ap.tx_count == 0) continue;
    pmd::Port::TxTally tally;
    const uint16_t taken = ap.port->tx_burst(ap.queue, ap.tx, ap.tx_count, &tally);
    // What the queue did not take stays, in order, for the next flush (a full TX ring is
    // back-pressure, not loss: the RC engine counted these frames as sent).
    const uint16_t left = static_cast<uint16_t>(ap.tx_count - taken);
    for (uint16_t i = 0; i < left; ++i) ap.tx[i] = ap.tx[taken + i];
    stats_.tx_packets += tally.sent;
    stats_.tx_bytes += tally.bytes;
    ap.tx_count = left;
    sent_any |= taken != 0 || left != 0;  // frames held: not idle (an idle core may sleep)
  }
  return sent_any;
}

void PollingCore::detach_slot_st(unsigned slot) {
  AttachedPort& ap = ports_[slot];
  for (uint16_t i = 0; i < ap.tx_count; ++i) drop_st(ap.tx[i], drop_index(CoreDrop::kStopFlush));
  ap.tx_count = 0;
  slot_of_port_[ap.port_id] = -1;
  // Keep the slots dense: the last one moves into the hole.
  const unsigned last = n_attached_ - 1;
  if (slot != last) {
    ports_[slot] = ports_[last];
    slot_of_port_[ports_[slot].port_id] = static_cast<int8_t>(slot);
  }
  ports_[last] = AttachedPort{};
  n_attached_--;
  stats_.attached_queues = n_attached_;
}

bool PollingCore::set_roce_handler_st(uint16_t port_id, RoceHandler* handler) {
  if (port_id >= RTE_MAX_ETHPORTS) return false;
  RoceHandler*& entry = roce_of_port_[port_id];
  if (entry != nullptr) {  // the port's handler leaves the poll list (kept dense)
    auto* end = handlers_.begin() + n_handlers_;
    auto* it = std::find(handlers_.begin(), end, entry);
    if (it != end) {
      *it = handlers_[--n_handlers_];
      handlers_[n_handlers_] = nullptr;
    }
    entry = nullptr;
  }
  if (handler != nullptr) {
    if (n_handlers_ == kMaxPorts) return false;
    handlers_[n_handlers_++] = handler;
    entry = handler;
  }
  const int slot = slot_of_port_[port_id];
  if (slot >= 0) ports_[slot].roce = entry;
  return true;
}

unsigned PollingCore::drain_after_stop() {
  unsigned freed = 0;
  rte_mbuf* pkts[kMaxBurst];
  for (;;) {
    const uint16_t n = dispatch_.receive(index_, pkts, kMaxBurst);
    if (n == 0) break;
    for (uint16_t i = 0; i < n; ++i) rte_pktmbuf_free(pkts[i]);
    freed += n;
  }
  return freed;
}

// ---- request handlers: run on the owning lcore from process_requests_st() ----

void PollingCore::on_attach_port(const PortAttach& req, CoreResult& result, void* c) {
  auto& core = *static_cast<PollingCore*>(c);
  pmd::Port* port = req.port;
  if (port->id() >= RTE_MAX_ETHPORTS || core.slot_of_port_[port->id()] >= 0) {
    result.status = STATUS_INVALID_DEVICE_STATE;  // already attached
    return;
  }
  if (core.n_attached_ == kMaxPorts) {
    result.status = STATUS_INSUFFICIENT_RESOURCES;
    return;
  }
  const unsigned slot = core.n_attached_;
  AttachedPort& ap = core.ports_[slot];
  ap = AttachedPort{};
  ap.port = port;
  ap.port_id = port->id();
  ap.queue = req.queue;
  ap.ip_be = rte_cpu_to_be_32(port->address().value);
  const config::MacAddress mac = port->mac();
  std::memcpy(ap.mac.addr_bytes, mac.bytes.data(), 6);
  ap.local.mac = mac;
  ap.local.ip = port->address();
  ap.local.prefix_len = port->prefix_len();
  if (const std::optional<config::Ipv6Address> ip6 = port->address6()) {
    ap.has_ip6 = true;
    ap.local6 = LocalAddress6{mac, *ip6};
  }
  ap.rx_pool = port->rx_pool();
  ap.roce = core.roce_of_port_[ap.port_id];
  core.slot_of_port_[ap.port_id] = static_cast<int8_t>(slot);
  core.n_attached_++;
  core.stats_.attached_queues = core.n_attached_;
  result.status = STATUS_SUCCESS;
}

void PollingCore::on_detach_port(const PortDetach& req, CoreResult& result, void* c) {
  auto& core = *static_cast<PollingCore*>(c);
  const int slot = req.port_id < RTE_MAX_ETHPORTS ? core.slot_of_port_[req.port_id] : -1;
  if (slot < 0) {
    result.status = STATUS_INVALID_PARAMETER;  // not attached here
    return;
  }
  // Whatever is buffered for this port goes out now, while the port still runs.
  core.flush_tx_st();
  core.detach_slot_st(static_cast<unsigned>(slot));
  result.status = STATUS_SUCCESS;
}

void PollingCore::on_snapshot(const StatsSnapshot& req, CoreResult& result, void* c) {
  auto& core = *static_cast<PollingCore*>(c);
  core.stats_.drops[drop_index(CoreDrop::kHandoffRingFull)] =
      core.dispatch_.ring_full_drops(core.index_);
  core.stats_.handoff_out = core.dispatch_.forwarded(core.index_);
  *req.out = core.stats_;
  core.stats_.n_learned_peers = 0;  // handed over to control
  core.stats_.n_learned_peers6 = 0;
  result.status = STATUS_SUCCESS;
}

void PollingCore::on_transmit(const FrameTransmit& req, CoreResult& result, void* c) {
  auto& core = *static_cast<PollingCore*>(c);
  const bool attached = req.port_id < RTE_MAX_ETHPORTS && core.slot_of_port_[req.port_id] >= 0;
  core.send_st(req.port_id, req.frame);
  result.status = attached ? STATUS_SUCCESS : STATUS_INVALID_DEVICE_STATE;
}

void PollingCore::on_stop(const NoArgs&, CoreResult& result, void* c) {
  auto& core = *static_cast<PollingCore*>(c);
  core.flush_tx_st();
  while (core.n_attached_ > 0) core.detach_slot_st(core.n_attached_ - 1);
  core.stop_ = true;
  result.status = STATUS_SUCCESS;
}

void PollingCore::on_neighbour(const NeighbourUpdate& req, CoreResult& result, void* c) {
  auto& core = *static_cast<PollingCore*>(c);
  result.status = core.neighbours_.apply_st(req) ? STATUS_SUCCESS : STATUS_INSUFFICIENT_RESOURCES;
  core.stats_.neighbours = core.neighbours_.size();
}

// ---- control-thread helpers ----
namespace core_requests {

bool attach_port(CoreChannel& ch, pmd::Port* port, uint16_t queue, CoreMessage::DoneFn done,
                 void* ctx) {
  return ch.call(&PollingCore::on_attach_port, PortAttach{port, queue}, done, ctx);
}
bool detach_port(CoreChannel& ch, uint16_t port_id, CoreMessage::DoneFn done, void* ctx) {
  return ch.call(&PollingCore::on_detach_port, PortDetach{port_id}, done, ctx);
}
bool snapshot(CoreChannel& ch, CoreStats* out, CoreMessage::DoneFn done, void* ctx) {
  return ch.call(&PollingCore::on_snapshot, StatsSnapshot{out}, done, ctx);
}
bool transmit(CoreChannel& ch, uint16_t port_id, rte_mbuf* m, CoreMessage::DoneFn done, void* ctx) {
  return ch.call(&PollingCore::on_transmit, FrameTransmit{port_id, m}, done, ctx);
}
bool stop(CoreChannel& ch, CoreMessage::DoneFn done, void* ctx) {
  return ch.call(&PollingCore::on_stop, NoArgs{}, done, ctx);
}
bool neighbour_update(CoreChannel& ch, const NeighbourUpdate& update, CoreMessage::DoneFn done,
                      void* ctx) {
  return ch.call(&PollingCore::on_neighbour, update, done, ctx);
}

}  // namespace core_requests
}  // namespace rocedp::dataplane
