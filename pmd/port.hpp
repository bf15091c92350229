#pragma once
// One DPDK ethdev port brought up from a PortConfig: vdev or PCI device, one RX/TX queue pair per
// polling core where the device has enough, MTU, MAC, link status, stats, and the per-queue
// fault-injection stage. pmd/ knows nothing of RDMA: a Port moves frames.
//
// Threads: open/start/stop/stats/link and the destructor run on the control path; rx_burst and
// tx_burst on queue q run only on the lcore that owns q (one owner per queue, no locks).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"

struct rte_mbuf;
struct rte_device;
struct rte_mempool;

namespace rocedp::pmd {

class PacketPool;
class FaultStage;
class MemifGuard;
struct VlanCounters;

struct LinkStatus {
  bool up = false;
  uint32_t speed_mbps = 0;
  bool full_duplex = false;
};

struct FaultStats {
  uint64_t dropped = 0, duplicated = 0, corrupted = 0, reordered = 0, delayed = 0;
  uint64_t ce_marked = 0;         // ECN-capable IPv4 frames marked CE
  uint64_t duplicate_failed = 0;  // a duplicate was wanted but the pool had no mbuf
  uint64_t flushed = 0;           // frames still held at stop, freed
};

struct PortStats {
  uint64_t rx_packets = 0, tx_packets = 0, rx_bytes = 0, tx_bytes = 0, rx_missed = 0, rx_errors = 0,
           tx_errors = 0, rx_nombuf = 0;
  // A port with a VLAN (vlan.hpp): frames received without its tag, frames that could not take it.
  uint64_t rx_vlan_dropped = 0, tx_vlan_dropped = 0;
  FaultStats fault;  // RX and TX stages of every queue added up
};

class Port {
 public:
  // Brings up the device named by cfg.devargs: a vdev string such as
  // "net_memif0,role=server,socket=/tmp/x.sock", "net_af_packet0,iface=veth0",
  // "net_tap0,iface=rdp0", "net_pcap0,rx_pcap=a.pcap,tx_pcap=b.pcap", "net_ring0" (a loopback), the
  // in-process pair form "ring_pair:LINK:a" / "ring_pair:LINK:b" (ring_pair.hpp), or a PCI address
  // ("0000:03:00.0", optionally with
  // ",key=value" driver args). The device is hot-plugged (rte_dev_probe), so EAL needs no --vdev.
  // Configures min(wanted_queues, device maximum) RX/TX queue pairs (at least 1) with
  // dp.rx_ring_size / dp.tx_ring_size descriptors on `pool`, sets the MTU (scattered RX if the
  // pool's data room is smaller than a frame) and the MAC if cfg.mac is set. A device that
  // cannot take a MAC keeps it in software (mac() reports it) and receives promiscuously; a
  // device with no MAC at all and none configured gets 02:xx:xx:xx:xx:xx derived from cfg.name.
  // Returns nullptr and sets *error (device, step and rte_strerror) on failure; the device is
  // removed again then. `pool` must outlive the Port.
  static std::unique_ptr<Port> open(const config::PortConfig& cfg, uint16_t wanted_queues,
                                    PacketPool& pool, const config::DataplaneConfig& dp,
                                    std::string* error);

  // rte_eth_dev_start. False and *error on failure.
  bool start(std::string* error);
  // rte_eth_dev_stop, then frees the frames the fault stages still hold. Idempotent. The lcores
  // must have stopped polling this port.
  void stop();
  // Stop, close, and remove the device (and a ring pair's rings when it is the last side).
  // A device EAL probed from its own arguments (-a, --vdev) is only stopped, so it can be
  // opened again.
  ~Port();

  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  uint16_t id() const { return port_id_; }
  const std::string& name() const { return cfg_.name; }
  uint16_t queue_count() const { return queues_; }
  config::MacAddress mac() const { return mac_; }
  config::Ipv4Address address() const { return cfg_.address; }
  uint8_t prefix_len() const { return cfg_.prefix_len; }
  std::optional<config::Ipv6Address> address6() const { return cfg_.address6; }
  uint16_t mtu() const { return mtu_; }
  // 802.1Q VLAN ID of every frame (0: untagged) and the priority of the frames sent.
  uint16_t vlan() const { return cfg_.vlan; }
  uint8_t vlan_priority() const { return cfg_.vlan_priority; }
  // Every frame sent carries an 802.1Q tag (a VLAN, or a priority alone).
  bool tags_frames() const { return cfg_.vlan != 0 || cfg_.vlan_priority != 0; }
  // DSCP of the port's RoCEv2 frames (0: unmarked); the port itself does not touch IP headers.
  uint8_t dscp() const { return cfg_.dscp; }
  // ECN-capable QPs (ECT(0), DCQCN) and the DSCP of the port's CNPs.
  bool ecn() const { return cfg_.ecn; }
  uint8_t cnp_dscp() const { return cfg_.cnp_dscp; }
  /// DCQCN's parameters: QpConnectParams::dcqcn points here (the port outlives its QPs).
  const config::DcqcnConfig& dcqcn() const { return cfg_.dcqcn; }
  bool started() const { return started_; }
  LinkStatus link() const;  // rte_eth_link_get_nowait
  PortStats stats() const;  // rte_eth_stats_get + fault counters
  // The pool every RX queue receives into (the `pool` given to open()).
  rte_mempool* rx_pool() const { return rx_pool_; }
  // The memif guard of a net_memif port (null otherwise, or where it is unavailable).
  const MemifGuard* memif_guard() const { return guard_.get(); }

  // Fast path; exactly one caller per queue (the lcore that owns it). The fault stage (cfg.fault)
  // applies here. rx_burst on queue q also moves TX frames that the fault stage of q delayed
  // onto the wire, so a polling core needs no separate timer for them.
  // On net_memif a guard (memif_guard.hpp) makes these return 0 while the peer is leaving, so the
  // driver never unmaps the peer's memory under a burst; a queue's owner must keep polling (or
  // stop the port) for a peer's departure to complete.
  uint16_t rx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t n);
  // On a port with a VLAN, rx_burst returns the frames of that VLAN untagged (others are freed and
  // counted) and tx_burst tags each frame once (vlan.hpp); a port with a priority and no VLAN
  // sends priority-tagged frames (VLAN ID 0) and takes untagged and priority-tagged ones. Frames
  // not sent stay the caller's (a frame that could not take the tag was freed and counts as sent).
  // With a TX fault stage the stage takes the frames it has room for (they count as sent) and hands
  // them to the device as their time comes.
  // With `tally`: the frames of this call the device (or the fault stage) took and their bytes as
  // sent, the tag included; the return value counts the freed frames as well.
  struct TxTally {
    uint16_t sent = 0;
    uint64_t bytes = 0;
  };
  uint16_t tx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t n, TxTally* tally = nullptr);

 private:
  Port() = default;
  void receive_ndp_groups();  // start(): the multicast groups IPv6 neighbour discovery needs
  void drain_tx_stage(uint16_t queue, uint64_t now);
  uint16_t device_rx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t n);
  uint16_t device_tx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t n);
  void close_device();

  config::PortConfig cfg_;
  uint16_t port_id_ = 0xFFFF;
  uint16_t queues_ = 0;
  uint16_t mtu_ = 0;
  config::MacAddress mac_{};
  bool started_ = false;
  bool opened_ = false;
  bool plugged_ = false;        // we hot-plugged the device, so we remove it
  bool software_mac_ = false;   // the device cannot take cfg.mac: kept here, RX promiscuous
  bool memif_ = false;          // net_memif: closing it keeps EAL until exit (pmd/eal.hpp)
  std::string device_name_;     // as EAL knows it, for removal
  std::string ring_pair_link_;  // non-empty for the ring_pair form
  char ring_pair_side_ = 0;
  rte_device* device_ = nullptr;
  rte_mempool* rx_pool_ = nullptr;
  bool rx_faults_ = false, tx_faults_ = false;
  std::vector<std::unique_ptr<FaultStage>> rx_stage_, tx_stage_;  // per queue
  std::unique_ptr<MemifGuard> guard_;                             // net_memif only
  uint16_t vlan_tci_ = 0;                                         // tag of the frames sent
  std::vector<std::unique_ptr<VlanCounters>> vlan_counters_;      // per queue; empty: no VLAN
};

}  // namespace rocedp::pmd
