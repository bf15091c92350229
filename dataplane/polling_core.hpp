#pragma once
// One polling lcore: its RX/TX queues, its handoff ring, its control channel, its counters, all in
// one cache-aligned object touched by that lcore only (CONVENTIONS.md items 1, 5, 12).
//
// poll_once() runs every poller once and says whether any did work; run_st() loops over it and adds
// up busy and idle TSC cycles. Pollers, in order:
//   1. RX burst on every (port, queue) this core owns -> classify -> pmd::RxDispatch: RoCEv2 goes
//      to the core that owns its destination QPN (dataplane/qpn_map.hpp), QP1 (CM) and ARP replies
//      to the control path, ARP requests for us and ICMP echo stay here and are answered in place,
//      everything else is dropped and counted by reason. The RoCEv2 frames this core owns go to
//      the RoceHandler as one burst (the RC engine parses them, prefetches their QPs, executes
//      them), then their mbufs are freed in bulk; a burst of nothing but those skips the
//      dispatcher;
//   2. frames other cores handed to this one (already classified), the same way;
//   3. the control channel's request ring, a bounded batch;
//   4. TX: frames buffered by the pollers above go out once per poll, one burst per port.
// Nothing on this path allocates, locks or makes a system call.
//
// Who may call what: everything suffixed _st, and poll_once()/run_st(), only on the owning lcore
// (checked by assert in debug builds). The control thread reaches a core only through messages
// built by the core_requests:: helpers below, posted on the core's CoreChannel.

#include <rte_config.h>
#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_mbuf_core.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "dataplane/arp_icmp.hpp"
#include "dataplane/core_channel.hpp"
#include "dataplane/core_drop_reason.hpp"
#include "dataplane/ndp.hpp"
#include "dataplane/neighbour_cache.hpp"
#include "dataplane/roce_handler.hpp"

struct rte_mbuf;
struct rte_mempool;

namespace rocedp::pmd {
class Port;
class RxDispatch;
}  // namespace rocedp::pmd

namespace rocedp::dataplane {

/// What a core counts; a copy of it is the stats snapshot a core sends to control.
struct CoreStats {
  uint16_t core_index = 0;
  unsigned lcore_id = 0;
  uint64_t rx_packets = 0, rx_bytes = 0;  // received from this core's own RX queues
  uint64_t tx_packets = 0, tx_bytes = 0;  // taken by this core's TX queues (Port::TxTally)
  uint64_t handoff_out = 0;               // sent to another core or to control (RxDispatch)
  uint64_t handoff_in = 0;                // received from other cores
  uint64_t to_control = 0;                // frames classified for the control path
  uint64_t roce_to_engine = 0;            // RoCEv2 frames the RDMA objects took (past the codec)
  uint64_t requests = 0;                  // control messages run
  // RX bursts that came back short while the packet pool had no mbuf this core could take (its
  // cache and the common pool both empty): the port could not receive, frames waited in the
  // device or were lost there. Counted by the core because not every PMD counts rx_nombuf
  // (net_af_packet of DPDK 22.11 stops its burst and counts nothing).
  uint64_t rx_pool_empty = 0;
  uint64_t polls = 0, busy_polls = 0;
  uint64_t busy_cycles = 0, idle_cycles = 0;  // TSC cycles, added up by run_st()
  uint32_t attached_queues = 0;
  uint32_t neighbours = 0;                          // entries in this core's neighbour cache
  std::array<uint64_t, kDropCounterCount> drops{};  // by drop_counter_name(i)
  ArpIcmpCounters arp_icmp;                         // answers and drops of dataplane/arp_icmp
  NdpCounters ndp;                                  // answers and drops of dataplane/ndp
  // Requesters of ARP requests answered since the last snapshot (RFC 826: the target of a request
  // adds its sender). They ride on the snapshot to control, which owns the neighbour table; the
  // core never touches the table. Cleared on the core after each snapshot.
  static constexpr std::size_t kMaxLearnedPeers = 8;
  std::array<ArpPeer, kMaxLearnedPeers> learned_peers{};
  uint32_t n_learned_peers = 0;
  uint64_t learned_peers_overflow = 0;  // requesters not reported because the buffer was full
  // Solicitors of Neighbor Solicitations answered since the last snapshot, with their source
  // link-layer address (RFC 4861 7.2.3), the same way. Cleared on the core after each snapshot.
  std::array<NdpPeer, kMaxLearnedPeers> learned_peers6{};
  uint32_t n_learned_peers6 = 0;
  uint64_t learned_peers6_overflow = 0;
  uint64_t total_drops() const {
    uint64_t t = 0;
    for (std::size_t i = 0; i < drops.size(); ++i)
      if (drop_counter_is_failure(i)) t += drops[i];
    return t + arp_icmp.total_drops() + ndp.total_drops();
  }
};

/// What the classifier decided for a frame; kept in the mbuf (hash.usr) so the core that handles
/// it (maybe another one) does not parse the headers again.
enum class FrameKind : uint8_t {
  kUnknown = 0,
  kAnswerLocally,  // ARP request / ICMP echo for us (dataplane/arp_icmp)
  kArpToControl,
  kRoce,
  kCm,
  kNdpAnswerLocally,  // Neighbor Solicitation / ICMPv6 echo for us (dataplane/ndp)
  kNdpToControl,      // Neighbor Advertisement to learn from
};

/// The kind the classifier stored in `m`.
inline FrameKind frame_kind(const rte_mbuf* m) {
  return static_cast<FrameKind>(m->hash.usr & 0xFF);
}

class alignas(RTE_CACHE_LINE_SIZE) PollingCore {
 public:
  static constexpr unsigned kMaxPorts = 8;
  static_assert(kMaxPorts == config::kMaxPorts, "the configuration's bound on ports");
  static constexpr uint16_t kMaxBurst = 64;      // dataplane.burst_size's bound (config_keys.cpp)
  static constexpr unsigned kRequestBatch = 16;  // control messages per poll at most

  /// `index` is this core's target number in `dispatch` (0..n-1); `lcore_id` the EAL lcore that
  /// will run it (tests that drive poll_once() themselves pass rte_lcore_id()).
  PollingCore(uint16_t index, unsigned lcore_id, uint16_t burst_size, pmd::RxDispatch& dispatch,
              CoreChannel& channel, uint32_t neighbour_capacity = 1024);
  PollingCore(const PollingCore&) = delete;
  PollingCore& operator=(const PollingCore&) = delete;

  /// Runs every poller once; true when any did work. Owning lcore only.
  bool poll_once() { return poll_at_st(rte_rdtsc()); }
  /// The same, with the TSC the caller read at the start of this poll: the poll's one clock
  /// read, which the RDMA objects take as their time (a TSC read costs 13-18 ns on a VM).
  bool poll_at_st(uint64_t tsc);
  /// Busy/idle loop until a stop request arrives; counts cycles. Owning lcore only.
  void run_st();
  /// rte_eal_remote_launch entry point: arg is the PollingCore.
  static int lcore_main(void* arg);

  /// After the lcore has returned (rte_eal_wait_lcore): frees frames still handed to this core.
  /// Any thread, once the core no longer runs.
  unsigned drain_after_stop();

  uint16_t index() const { return index_; }
  unsigned lcore_id() const { return lcore_id_; }
  CoreChannel& channel() { return channel_; }
  /// True once a stop request has run (read by the lcore itself; others learn it by completion).
  bool stopped_st() const { return stop_; }
  /// Before launch: sleep this many µs per idle poll once kIdlePollsBeforeSleep polls in a row
  /// were idle (config dataplane.idle_sleep_us); 0 spins.
  void set_idle_sleep_us(uint32_t us) { idle_sleep_us_ = us; }
  static constexpr uint32_t kIdlePollsBeforeSleep = 1024;

  // ---- owning lcore: used by LocalServices and the request handlers ----
  /// Queues a frame for TX on `port_id` (flushed at the end of this poll). The frame is the core's
  /// from now on: sent, or freed and counted. Frames the TX queue did not take stay queued for the
  /// next flush; only when the core's TX buffer is still full after a flush is the frame dropped
  /// (counted no_tx_room; no_tx_queue when this core has no TX queue on the port).
  void send_st(uint16_t port_id, rte_mbuf* m) {
    if (!queue_tx_st(port_id, m)) [[unlikely]]
      drop_unqueued_st(port_id, m);
  }
  /// Queues `m` for TX on `port_id` if this core has a TX queue on the port and room in its TX
  /// buffer (flushing once if it is full): true, and the frame leaves with this poll's TX burst,
  /// so its bytes may still be written until then. False: nothing queued, `m` stays the caller's.
  /// For senders that can take a frame back (the RC engine: it restores its saved state, rxe's
  /// rollback_state), so nothing they counted as sent is ever dropped here.
  bool queue_tx_st(uint16_t port_id, rte_mbuf* m) {
    if (try_queue_tx_st(port_id, m)) [[likely]]
      return true;
    return queue_tx_after_flush_st(port_id, m);
  }
  /// queue_tx_st without the flush: false when the TX buffer is full too (nothing queued; the
  /// caller may then take queue_tx_st's way). Calls nothing, so a caller that inlines it needs no
  /// registers saved for a call.
  bool try_queue_tx_st(uint16_t port_id, rte_mbuf* m) {
    const int slot = port_id < RTE_MAX_ETHPORTS ? slot_of_port_[port_id] : -1;
    if (slot < 0) [[unlikely]]
      return false;
    AttachedPort& ap = ports_[slot];
    if (ap.tx_count == kMaxBurst) [[unlikely]]
      return false;
    ap.tx[ap.tx_count++] = m;
    return true;
  }
  void count_drop_st(std::size_t drop_index) { stats_.drops[drop_index]++; }
  /// The wire-reason part of the drop table (indexed by wire::DropReason): the RC engine counts
  /// the frames its codec refuses there. The table lives as long as the core.
  uint64_t* wire_drop_counters_st() { return stats_.drops.data(); }
  void drop_st(rte_mbuf* m, std::size_t drop_index);
  const CoreStats& stats_st() const { return stats_; }
  const NeighbourCache& neighbour_cache_st() const { return neighbours_; }

  // ---- RDMA objects: one RoceHandler per port (the RDMA objects of that port's adapter on this
  // core) gets the core's RoCEv2 frames that arrived on the port, one call per burst, and every
  // handler one turn per poll. Set only on the owning lcore (a request handler) or before the
  // core runs; null removes the port's handler, and its RoCEv2 frames are then checked and
  // dropped as kUnknownQpn. False (nothing changed) when kMaxPorts other ports have handlers.
  bool set_roce_handler_st(uint16_t port_id, RoceHandler* handler);
  RoceHandler* roce_handler_st(uint16_t port_id) const {
    return port_id < RTE_MAX_ETHPORTS ? roce_of_port_[port_id] : nullptr;
  }

  // ---- request handlers (CoreCall::RunFn), run on the lcore from its channel; `core` is the
  // PollingCore. Every status is an NTSTATUS.
  /// STATUS_INVALID_DEVICE_STATE: the port is attached already; INSUFFICIENT_RESOURCES: kMaxPorts.
  static void on_attach_port(const PortAttach& req, CoreResult& result, void* core);
  /// STATUS_INVALID_PARAMETER: the port is not attached to this core.
  static void on_detach_port(const PortDetach& req, CoreResult& result, void* core);
  static void on_snapshot(const StatsSnapshot& req, CoreResult& result, void* core);
  /// The frame is sent (or counted and dropped) either way; STATUS_INVALID_DEVICE_STATE when
  /// the port is not attached to this core.
  static void on_transmit(const FrameTransmit& req, CoreResult& result, void* core);
  /// Flushes TX, detaches every port and leaves run_st.
  static void on_stop(const NoArgs& req, CoreResult& result, void* core);
  /// STATUS_INSUFFICIENT_RESOURCES: the neighbour cache is full.
  static void on_neighbour(const NeighbourUpdate& req, CoreResult& result, void* core);

 private:
  struct AttachedPort {
    pmd::Port* port = nullptr;
    uint16_t port_id = 0;
    uint16_t queue = 0;
    uint32_t ip_be = 0;              // our IPv4 address on this port, network byte order
    rte_ether_addr mac{};            // our MAC on this port
    LocalAddress local;              // the same, as dataplane/arp_icmp wants it
    bool has_ip6 = false;            // the port has an IPv6 address (config ports[].ipv6)
    LocalAddress6 local6;            // it and our MAC, as dataplane/ndp wants them
    rte_mempool* rx_pool = nullptr;  // the pool the queue receives into (rx_pool_empty)
    RoceHandler* roce = nullptr;     // roce_of_port_[port_id], read once per RX burst
    uint16_t tx_count = 0;
    rte_mbuf* tx[kMaxBurst];
  };

  [[gnu::noinline, gnu::cold]] void drop_unqueued_st(uint16_t port_id, rte_mbuf* m);
  [[gnu::noinline]] bool queue_tx_after_flush_st(uint16_t port_id, rte_mbuf* m);
  static constexpr uint32_t kNotFastRoce = UINT32_MAX;
  static uint32_t roce_core(const AttachedPort& ap, const rte_mbuf* m);
  static uint16_t classify(void* ctx, rte_mbuf* m);
  uint16_t classify_st(rte_mbuf* m);
  [[gnu::noinline]] uint16_t classify_other_st(rte_mbuf* m);
  uint16_t classify_ipv6_st(rte_mbuf* m, const AttachedPort& ap);
  uint16_t route_bth_st(rte_mbuf* m, const uint8_t* bth);
  // What a local classifier (dataplane/arp_icmp, dataplane/ndp: kAnswerLocally, kToControl,
  // kDrop, else not theirs) decided for `m`, as the dispatch's target; -1: not theirs.
  template <class Class>
  int route_local_st(rte_mbuf* m, Class c, FrameKind answer, FrameKind to_control);
  void handle_local_st(rte_mbuf** pkts, uint16_t n, uint64_t tsc);
  /// Hands rx_frames_[0, n) (the frames of `roce`) to `handler`, then frees the mbufs.
  void deliver_roce_st(RoceHandler* handler, rte_mbuf** roce, uint16_t n, uint64_t tsc);
  static void free_received(rte_mbuf** m, uint16_t n);
  void drop_roce_st(rte_mbuf* m);
  void note_peer_st(const ArpPeer& peer);
  void note_peer6_st(const NdpPeer& peer);
  bool flush_tx_st();
  void detach_slot_st(unsigned slot);
  void assert_lcore() const;

  // Hot, read on every poll.
  const uint16_t index_;
  const uint16_t n_cores_;
  const unsigned lcore_id_;
  const uint16_t burst_;
  bool stop_ = false;
  uint32_t idle_sleep_us_ = 0;
  unsigned n_attached_ = 0;
  pmd::RxDispatch& dispatch_;
  CoreChannel& channel_;
  CoreStats stats_;
  std::array<int8_t, RTE_MAX_ETHPORTS> slot_of_port_;
  std::array<AttachedPort, kMaxPorts> ports_;
  NeighbourCache neighbours_;
  std::array<RoceHandler*, RTE_MAX_ETHPORTS> roce_of_port_{};
  std::array<RoceHandler*, kMaxPorts> handlers_{};  // the non-null entries of roce_of_port_
  unsigned n_handlers_ = 0;
  // One burst's RoCEv2 frames for the engine (handle_local_st): a member, as a local array of
  // spans would be zeroed on every burst.
  std::array<wire::Bytes, kMaxBurst> rx_frames_{};
};

namespace core_requests {
// Control-thread helpers: build and post one request to `ch`. False when the channel has no free
// message (nothing sent). `done` runs on the control thread; msg.result.status is an NTSTATUS.
bool attach_port(CoreChannel& ch, pmd::Port* port, uint16_t queue, CoreMessage::DoneFn done,
                 void* ctx);
bool detach_port(CoreChannel& ch, uint16_t port_id, CoreMessage::DoneFn done, void* ctx);
bool snapshot(CoreChannel& ch, CoreStats* out, CoreMessage::DoneFn done, void* ctx);
bool transmit(CoreChannel& ch, uint16_t port_id, rte_mbuf* m, CoreMessage::DoneFn done, void* ctx);
bool stop(CoreChannel& ch, CoreMessage::DoneFn done, void* ctx);
/// Pushes one neighbour-table change into the core's NeighbourCache; INSUFFICIENT_RESOURCES if
/// full.
bool neighbour_update(CoreChannel& ch, const NeighbourUpdate& update, CoreMessage::DoneFn done,
                      void* ctx);
}  // namespace core_requests

}  // namespace rocedp::dataplane
