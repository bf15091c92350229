#include "pmd/port.hpp"

#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>

#include "pmd/eal.hpp"
#include "pmd/fault_stage.hpp"
#include "pmd/log.hpp"
#include "pmd/memif_guard.hpp"
#include "pmd/memif_hello.hpp"
#include "pmd/packet_pool.hpp"
#include "pmd/ring_pair.hpp"
#include "pmd/vlan.hpp"

namespace rocedp::pmd {
namespace {

constexpr uint16_t kInvalidPort = 0xFFFF;
constexpr uint16_t kDrainBurst = 64;

std::string errstr(int rc) {
  return rte_strerror(rc < 0 ? -rc : rc);
}

bool fail(std::string* error, const config::PortConfig& cfg, const std::string& step,
          const std::string& why) {
  std::string msg = "port " + cfg.name + " (" + cfg.devargs + "): " + step + ": " + why;
  log(LogLevel::kError, "port_open_failed",
      {{"port", cfg.name}, {"devargs", cfg.devargs}, {"step", step}, {"reason", why}});
  if (error) *error = msg;
  return false;
}

config::MacAddress to_mac(const rte_ether_addr& a) {
  config::MacAddress m;
  std::memcpy(m.bytes.data(), a.addr_bytes, 6);
  return m;
}

// FNV-1a of the port name: a fault stream id that does not depend on probe order.
uint64_t name_hash(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// Ports owned by an open Port object, so one device never gets two owners.
std::mutex g_owned_mutex;
std::map<uint16_t, std::string>& owned() {
  static std::map<uint16_t, std::string> m;
  return m;
}
bool claim(uint16_t pid, const std::string& name) {
  std::lock_guard lock(g_owned_mutex);
  return owned().try_emplace(pid, name).second;
}
void release(uint16_t pid) {
  std::lock_guard lock(g_owned_mutex);
  owned().erase(pid);
}
std::string owner_of(uint16_t pid) {
  std::lock_guard lock(g_owned_mutex);
  auto it = owned().find(pid);
  return it == owned().end() ? "?" : it->second;
}

// The ethdev port of a device EAL already knows. PCI names are canonical
// ("0000:03:00.0"), so a short address ("03:00.0") is matched with the domain added.
uint16_t find_port_by_device(const std::string& dev) {
  uint16_t pid = kInvalidPort;
  if (rte_eth_dev_get_port_by_name(dev.c_str(), &pid) == 0) return pid;
  uint16_t id;
  RTE_ETH_FOREACH_DEV(id) {
    rte_eth_dev_info info;
    if (rte_eth_dev_info_get(id, &info) != 0 || info.device == nullptr) continue;
    const std::string name = rte_dev_name(info.device);
    if (name == dev || name == "0000:" + dev) return id;
  }
  return kInvalidPort;
}

}  // namespace

std::unique_ptr<Port> Port::open(const config::PortConfig& cfg, uint16_t wanted_queues,
                                 PacketPool& pool, const config::DataplaneConfig& dp,
                                 std::string* error) {
  std::unique_ptr<Port> p(new Port());
  p->cfg_ = cfg;
  uint16_t pid = kInvalidPort;

  if (is_ring_pair_devargs(cfg.devargs)) {
    RingPairDevargs rp;
    std::string why;
    if (!parse_ring_pair_devargs(cfg.devargs, &rp, &why)) {
      fail(error, cfg, "devargs", why);
      return nullptr;
    }
    int rc = ring_pair_attach(rp, static_cast<int>(rte_socket_id()), &why);
    if (rc < 0) {
      fail(error, cfg, "ring_pair_attach", why);
      return nullptr;
    }
    pid = static_cast<uint16_t>(rc);
    p->ring_pair_link_ = rp.link;
    p->ring_pair_side_ = rp.side;
  } else {
    // Hot-plug: EAL stays independent of the port list, and a port can be closed and re-opened.
    std::vector<bool> before(RTE_MAX_ETHPORTS, false);
    uint16_t id;
    RTE_ETH_FOREACH_DEV(id) before[id] = true;
    int rc = rte_dev_probe(cfg.devargs.c_str());
    if (rc < 0 && rc != -EEXIST) {
      fail(error, cfg, "rte_dev_probe", errstr(rc) + " (is the driver in the EAL plugin dir?)");
      return nullptr;
    }
    RTE_ETH_FOREACH_DEV(id) {
      if (!before[id]) {
        pid = id;
        break;
      }
    }
    if (pid == kInvalidPort) {
      // Probed before (an EAL -a/--vdev argument, or another Port): find it by device name.
      pid = find_port_by_device(cfg.devargs.substr(0, cfg.devargs.find(',')));
      if (pid == kInvalidPort) {
        fail(error, cfg, "find port", "no ethdev port appeared for the device");
        return nullptr;
      }
    } else {
      p->plugged_ = true;
    }
  }
  if (!claim(pid, cfg.name)) {
    // Two owners of one port would both configure its queues: refuse, and leave it alone.
    fail(error, cfg, "claim", "the device is already open as port " + owner_of(pid));
    return nullptr;
  }
  p->port_id_ = pid;
  p->opened_ = true;

  rte_eth_dev_info info;
  int rc = rte_eth_dev_info_get(pid, &info);
  if (rc != 0) {
    fail(error, cfg, "rte_eth_dev_info_get", errstr(rc));
    return nullptr;
  }
  p->device_ = info.device;
  p->memif_ = info.driver_name != nullptr && std::strcmp(info.driver_name, "net_memif") == 0;
  p->device_name_ = info.device != nullptr ? rte_dev_name(info.device) : "";

  const uint16_t want = std::max<uint16_t>(wanted_queues, 1);
  const uint16_t queues = std::min({want, info.max_rx_queues, info.max_tx_queues});
  if (queues == 0) {
    fail(error, cfg, "queues", "device offers no RX/TX queue");
    return nullptr;
  }

  if (cfg.mtu < info.min_mtu || cfg.mtu > info.max_mtu) {
    fail(error, cfg, "mtu",
         "MTU " + std::to_string(cfg.mtu) + " outside the device range " +
             std::to_string(info.min_mtu) + ".." + std::to_string(info.max_mtu));
    return nullptr;
  }
  rte_eth_conf conf{};
  conf.rxmode.mtu = cfg.mtu;
  // net_af_packet reports a 1518-byte frame limit (max_rx_pktlen) whatever its socket frames
  // hold; its real limit is the devargs framesz and the interface's own MTU. Let ethdev see a
  // size it accepts and keep the configured MTU for everything above (path MTU, TX sizes).
  const bool af_packet =
      info.driver_name != nullptr && std::string_view(info.driver_name) == "net_af_packet";
  const uint32_t overhead = RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
  bool software_mtu = false;
  if (af_packet && cfg.mtu + overhead > info.max_rx_pktlen && info.max_rx_pktlen > overhead) {
    conf.rxmode.mtu = static_cast<uint16_t>(info.max_rx_pktlen - overhead);
    software_mtu = true;
    log(LogLevel::kInfo, "port_mtu_in_software",
        {{"port", cfg.name},
         {"mtu", std::to_string(cfg.mtu)},
         {"note", "net_af_packet: frames up to framesz (devargs) are carried"}});
  }
  // A frame of this MTU must fit one mbuf, or the device must chain mbufs (scattered RX).
  const uint32_t frame = uint32_t{cfg.mtu} + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
  const uint32_t room =
      pool.data_room() > RTE_PKTMBUF_HEADROOM ? pool.data_room() - RTE_PKTMBUF_HEADROOM : 0;
  if (frame > room) {
    if ((info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER) == 0) {
      fail(error, cfg, "mtu",
           "pool data room " + std::to_string(room) + " is smaller than a " +
               std::to_string(frame) + "-byte frame and the device cannot scatter");
      return nullptr;
    }
    conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
  }
  // Let the layers above send chained mbufs (header + payload segments) where supported.
  conf.txmode.offloads |= info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS;

  rc = rte_eth_dev_configure(pid, queues, queues, &conf);
  if (rc != 0) {
    fail(error, cfg, "rte_eth_dev_configure", errstr(rc));
    return nullptr;
  }
  uint16_t nb_rxd = dp.rx_ring_size, nb_txd = dp.tx_ring_size;
  rc = rte_eth_dev_adjust_nb_rx_tx_desc(pid, &nb_rxd, &nb_txd);
  if (rc != 0) {
    fail(error, cfg, "rte_eth_dev_adjust_nb_rx_tx_desc", errstr(rc));
    return nullptr;
  }
  int socket = rte_eth_dev_socket_id(pid);
  if (socket < 0) socket = SOCKET_ID_ANY;
  for (uint16_t q = 0; q < queues; ++q) {
    rte_eth_rxconf rxconf = info.default_rxconf;
    rxconf.offloads = conf.rxmode.offloads;
    rc = rte_eth_rx_queue_setup(pid, q, nb_rxd, socket, &rxconf, pool.get());
    if (rc != 0) {
      fail(error, cfg, "rte_eth_rx_queue_setup " + std::to_string(q),
           errstr(rc) + " (pool data room " + std::to_string(pool.data_room()) +
               "; some drivers need more, see the EAL log)");
      return nullptr;
    }
    rte_eth_txconf txconf = info.default_txconf;
    txconf.offloads = conf.txmode.offloads;
    rc = rte_eth_tx_queue_setup(pid, q, nb_txd, socket, &txconf);
    if (rc != 0) {
      fail(error, cfg, "rte_eth_tx_queue_setup " + std::to_string(q), errstr(rc));
      return nullptr;
    }
  }
  p->queues_ = queues;
  p->rx_pool_ = pool.get();

  rte_ether_addr addr;
  if (cfg.mac) {
    std::memcpy(addr.addr_bytes, cfg.mac->bytes.data(), 6);
    rc = rte_eth_dev_default_mac_addr_set(pid, &addr);
    if (rc == -ENOTSUP) {
      // Some vdevs (net_ring) have no MAC to program: the address lives in software and the
      // port listens promiscuously so frames for it still arrive.
      p->software_mac_ = true;
      log(LogLevel::kWarning, "port_mac_in_software",
          {{"port", cfg.name}, {"mac", config::format_mac(*cfg.mac)}});
    } else if (rc != 0) {
      fail(error, cfg, "rte_eth_dev_default_mac_addr_set", errstr(rc));
      return nullptr;
    }
  }
  if (p->software_mac_) {
    p->mac_ = *cfg.mac;
  } else if (rte_eth_macaddr_get(pid, &addr) == 0) {
    p->mac_ = to_mac(addr);
  }
  if (p->mac_ == config::MacAddress{}) {
    // A device without an address of its own (net_ring) and none configured: derive a stable,
    // locally administered unicast MAC from the port name so two such ports never share one.
    const uint64_t h = name_hash(cfg.name);
    p->mac_.bytes = {0x02,
                     static_cast<uint8_t>(h >> 32),
                     static_cast<uint8_t>(h >> 24),
                     static_cast<uint8_t>(h >> 16),
                     static_cast<uint8_t>(h >> 8),
                     static_cast<uint8_t>(h)};
    p->software_mac_ = true;
    log(LogLevel::kInfo, "port_mac_derived",
        {{"port", cfg.name}, {"mac", config::format_mac(p->mac_)}});
  }
  uint16_t mtu = cfg.mtu;
  if (!software_mtu && rte_eth_dev_get_mtu(pid, &mtu) == 0)
    p->mtu_ = mtu;
  else
    p->mtu_ = cfg.mtu;

  // Fault stages: one per queue and direction, each with its own replayable random stream.
  const config::FaultConfig& f = cfg.fault;
  if (f.enabled()) {
    using Dir = config::FaultConfig::Direction;
    p->rx_faults_ = f.direction == Dir::kRx || f.direction == Dir::kBoth;
    p->tx_faults_ = f.direction == Dir::kTx || f.direction == Dir::kBoth;
    const double cycles_per_us = static_cast<double>(rte_get_tsc_hz()) / 1e6;
    const uint32_t capacity = 2u * std::max(nb_rxd, nb_txd);
    const uint64_t base = name_hash(cfg.name);
    for (uint16_t q = 0; q < queues; ++q) {
      if (p->rx_faults_) {
        p->rx_stage_.push_back(
            std::make_unique<FaultStage>(f, base + 2u * q, pool.get(), capacity, cycles_per_us));
      }
      if (p->tx_faults_) {
        p->tx_stage_.push_back(std::make_unique<FaultStage>(f, base + 2u * q + 1, pool.get(),
                                                            capacity, cycles_per_us));
      }
    }
    log(LogLevel::kInfo, "port_faults",
        {{"port", cfg.name},
         {"direction", p->rx_faults_ && p->tx_faults_ ? "both"
                       : p->rx_faults_                ? "rx"
                                                      : "tx"},
         {"drop_pct", std::to_string(f.drop_pct)},
         {"duplicate_pct", std::to_string(f.duplicate_pct)},
         {"corrupt_pct", std::to_string(f.corrupt_pct)},
         {"ce_pct", std::to_string(f.ce_pct)},
         {"reorder_window", std::to_string(f.reorder_window)},
         {"delay_us", std::to_string(f.delay_us)},
         {"seed", std::to_string(f.seed)}});
  }

  if (p->tags_frames()) {
    p->vlan_tci_ = vlan_tci(cfg.vlan, cfg.vlan_priority);
    for (uint16_t q = 0; q < queues; ++q)
      p->vlan_counters_.push_back(std::make_unique<VlanCounters>());
  }

  p->guard_ = MemifGuard::attach(pid, queues, cfg.name);
  if (p->memif_ && !memif_hello_guard_active()) {
    log(LogLevel::kWarning, "memif_hello_guard_unavailable",
        {{"port", cfg.name},
         {"reason",
          "the executable does not export sendmsg (link with rocedp::rocedp or rocedp.pc)"},
         {"note", "a peer that closes before the server's HELLO can crash the process"}});
  }

  log(LogLevel::kInfo, "port_open",
      {{"port", cfg.name},
       {"devargs", cfg.devargs},
       {"port_id", std::to_string(pid)},
       {"driver", info.driver_name != nullptr ? info.driver_name : "?"},
       {"queues", std::to_string(queues)},
       {"max_queues", std::to_string(std::min(info.max_rx_queues, info.max_tx_queues))},
       {"mtu", std::to_string(p->mtu_)},
       {"vlan", cfg.vlan == 0 && cfg.vlan_priority == 0
                    ? "none"
                    : std::to_string(cfg.vlan) + " priority " + std::to_string(cfg.vlan_priority)},
       {"mac", config::format_mac(p->mac_)}});
  return p;
}

bool Port::start(std::string* error) {
  if (started_) return true;
  int rc = rte_eth_dev_start(port_id_);
  if (rc != 0) return fail(error, cfg_, "rte_eth_dev_start", errstr(rc));
  started_ = true;
  if (guard_) guard_->start();
  if (software_mac_) {
    rc = rte_eth_promiscuous_enable(port_id_);
    if (rc != 0 && rc != -ENOTSUP) {
      log(LogLevel::kWarning, "port_promiscuous_failed",
          {{"port", cfg_.name}, {"reason", errstr(rc)}});
    }
  }
  if (cfg_.address6) receive_ndp_groups();
  LinkStatus l = link();
  log(LogLevel::kInfo, "port_up",
      {{"port", cfg_.name},
       {"mac", config::format_mac(mac_)},
       {"ip", config::format_ipv4(cfg_.address) + "/" + std::to_string(cfg_.prefix_len)},
       {"link", l.up ? "up" : "down"},
       {"speed_mbps", std::to_string(l.speed_mbps)}});
  return true;
}

// IPv6 neighbour discovery reaches us at two groups (RFC 4861 7.2.1): our address's solicited-node
// group 33:33:ff:XX:XX:XX and all-nodes 33:33:00:00:00:01 (unsolicited and DAD answers). A device
// that filters multicast must let them in: the exact list where the driver takes one, else every
// multicast frame. net_tap takes the list (it filters nothing), net_memif and net_ring have no
// filter (ENOTSUP), net_af_packet has neither operation, so its kernel interface goes promiscuous:
// on a veth every frame arrives anyway, on a real NIC the kernel would otherwise filter them.
void Port::receive_ndp_groups() {
  const std::array<uint8_t, 16>& ip = cfg_.address6->bytes;
  rte_ether_addr groups[2] = {{{0x33, 0x33, 0xff, ip[13], ip[14], ip[15]}},
                              {{0x33, 0x33, 0x00, 0x00, 0x00, 0x01}}};
  const char* how = "mc_addr_list";
  int rc = rte_eth_dev_set_mc_addr_list(port_id_, groups, 2);
  if (rc != 0) {
    how = "allmulticast";
    rc = rte_eth_allmulticast_enable(port_id_);
  }
  if (rc == -ENOTSUP) {
    rte_eth_dev_info info{};
    const bool af_packet = rte_eth_dev_info_get(port_id_, &info) == 0 &&
                           info.driver_name != nullptr &&
                           std::string_view(info.driver_name) == "net_af_packet";
    how = "no filter";
    rc = 0;
    if (af_packet) {
      how = "promiscuous";
      rc = rte_eth_promiscuous_enable(port_id_);
    }
  }
  if (rc != 0) {
    log(LogLevel::kWarning, "port_ndp_groups_failed",
        {{"port", cfg_.name}, {"mode", how}, {"reason", errstr(rc)}});
    return;
  }
  log(LogLevel::kInfo, "port_ndp_groups", {{"port", cfg_.name}, {"mode", how}});
}

void Port::stop() {
  if (started_) {
    // memif_disconnect (inside rte_eth_dev_stop) needs the lock the guard holds.
    if (guard_) guard_->stop();
    int rc = rte_eth_dev_stop(port_id_);
    if (rc != 0) {
      log(LogLevel::kWarning, "port_stop_failed", {{"port", cfg_.name}, {"reason", errstr(rc)}});
    }
    started_ = false;
    log(LogLevel::kInfo, "port_down", {{"port", cfg_.name}});
  }
  // Frames the fault stages still hold go back to the pool: nothing leaks at stop.
  for (auto& s : rx_stage_) s->flush();
  for (auto& s : tx_stage_) s->flush();
}

void Port::close_device() {
  if (!opened_) return;
  opened_ = false;
  release(port_id_);
  if (ring_pair_link_.empty() && !plugged_) {
    // Probed by EAL arguments (-a / --vdev), not by us: closing would release the ethdev for
    // good (EAL will not probe a probed device again), so it stays configured and stopped.
    log(LogLevel::kDebug, "port_left_open", {{"port", cfg_.name}, {"device", device_name_}});
    return;
  }
  if (memif_) {
    // rte_eth_dev_stop ran memif_disconnect here while the interrupt thread may have been inside
    // the driver's handler for the peer's own departure: let that finish before the close frees
    // the device it works on (seen as a SIGSEGV in librte_net_memif at exit).
    if (!interrupt_thread_barrier(std::chrono::milliseconds(500)))
      log(LogLevel::kWarning, "port_close_unsynchronised", {{"port", cfg_.name}});
    eal_keep_at_exit();  // see pmd/eal.hpp
    if (const uint64_t n = memif_hello_sends_absorbed(); n > 0)
      log(LogLevel::kInfo, "memif_peers_gone_before_reply",
          {{"port", cfg_.name}, {"control_sends_absorbed", std::to_string(n)}});
  }
  rte_eth_dev_close(port_id_);
  if (!ring_pair_link_.empty()) {
    ring_pair_detach(RingPairDevargs{ring_pair_link_, ring_pair_side_});
  } else if (plugged_ && device_ != nullptr) {
    // Only a device we plugged is removed (net_tap deletes its interface here).
    int rc = rte_dev_remove(device_);
    if (rc != 0) {
      log(LogLevel::kWarning, "port_remove_failed",
          {{"port", cfg_.name}, {"device", device_name_}, {"reason", errstr(rc)}});
    }
  }
  log(LogLevel::kDebug, "port_closed", {{"port", cfg_.name}, {"device", device_name_}});
}

Port::~Port() {
  stop();
  rx_stage_.clear();
  tx_stage_.clear();
  guard_.reset();  // before close frees the driver state it watches
  close_device();
}

LinkStatus Port::link() const {
  rte_eth_link l{};
  LinkStatus s;
  if (rte_eth_link_get_nowait(port_id_, &l) != 0) return s;
  // A guarded memif port is up once its bursts may touch the device (the guard follows the
  // driver's link within a watcher period).
  s.up = l.link_status == RTE_ETH_LINK_UP && (guard_ == nullptr || guard_->polling());
  s.speed_mbps = (l.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN) ? 0 : l.link_speed;
  s.full_duplex = l.link_duplex == RTE_ETH_LINK_FULL_DUPLEX;
  return s;
}

PortStats Port::stats() const {
  PortStats out;
  rte_eth_stats s{};
  if (rte_eth_stats_get(port_id_, &s) == 0) {
    out.rx_packets = s.ipackets;
    out.tx_packets = s.opackets;
    out.rx_bytes = s.ibytes;
    out.tx_bytes = s.obytes;
    out.rx_missed = s.imissed;
    out.rx_errors = s.ierrors;
    out.tx_errors = s.oerrors;
    out.rx_nombuf = s.rx_nombuf;
  }
  for (const auto& v : vlan_counters_) {
    out.rx_vlan_dropped += v->rx_dropped.load(std::memory_order_relaxed);
    out.tx_vlan_dropped += v->tx_dropped.load(std::memory_order_relaxed);
  }
  for (const auto& st : rx_stage_) st->counters().add_to(out.fault);
  for (const auto& st : tx_stage_) st->counters().add_to(out.fault);
  return out;
}

void Port::drain_tx_stage(uint16_t queue, uint64_t now) {
  FaultStage& s = *tx_stage_[queue];
  rte_mbuf* buf[kDrainBurst];
  for (;;) {
    uint32_t k = s.peek_ready(buf, kDrainBurst, now);
    if (k == 0) return;
    uint16_t sent = rte_eth_tx_burst(port_id_, queue, buf, static_cast<uint16_t>(k));
    s.consume(sent);
    if (sent < k) return;  // device full: the rest waits in the stage, in order
  }
}

uint16_t Port::rx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t n) {
  uint16_t got = 0;
  if (guard_ == nullptr) {
    got = device_rx_burst(queue, pkts, n);
  } else {
    got = guard_->enter(queue) ? device_rx_burst(queue, pkts, n) : 0;
    guard_->leave(queue);
  }
  if (vlan_counters_.empty() || got == 0) return got;
  return vlan_receive(pkts, got, cfg_.vlan, *vlan_counters_[queue]);
}

uint16_t Port::tx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t n, TxTally* tally) {
  // Frames that could not take the tag were freed: they count as taken, ahead of the rest.
  const uint16_t freed =
      vlan_counters_.empty() ? 0 : vlan_send(pkts, n, vlan_tci_, *vlan_counters_[queue]);
  pkts += freed;
  n = static_cast<uint16_t>(n - freed);
  // Counted before the device may free them, tagged; what it leaves is taken off after.
  uint64_t bytes = 0;
  if (tally != nullptr)
    for (uint16_t i = 0; i < n; ++i) bytes += rte_pktmbuf_pkt_len(pkts[i]);
  uint16_t sent = 0;
  if (guard_ == nullptr) {
    sent = device_tx_burst(queue, pkts, n);
  } else {
    sent = guard_->enter(queue) ? device_tx_burst(queue, pkts, n) : 0;
    guard_->leave(queue);
  }
  if (tally != nullptr) {
    for (uint16_t i = sent; i < n; ++i) bytes -= rte_pktmbuf_pkt_len(pkts[i]);
    tally->sent = sent;
    tally->bytes = bytes;
  }
  return static_cast<uint16_t>(freed + sent);
}

uint16_t Port::device_rx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t n) {
  if (!rx_faults_ && !tx_faults_) return rte_eth_rx_burst(port_id_, queue, pkts, n);
  const uint64_t now = rte_get_tsc_cycles();
  if (tx_faults_) drain_tx_stage(queue, now);
  if (!rx_faults_) return rte_eth_rx_burst(port_id_, queue, pkts, n);
  FaultStage& s = *rx_stage_[queue];
  // Take from the device only what the stage can hold; the rest waits in the device ring.
  const uint16_t want = static_cast<uint16_t>(std::min<uint32_t>(n, s.room()));
  if (want != 0) {
    uint16_t got = rte_eth_rx_burst(port_id_, queue, pkts, want);
    s.push(pkts, got, now);
  }
  return static_cast<uint16_t>(s.pop_ready(pkts, n, now));
}

uint16_t Port::device_tx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t n) {
  if (!tx_faults_) return rte_eth_tx_burst(port_id_, queue, pkts, n);
  const uint64_t now = rte_get_tsc_cycles();
  FaultStage& s = *tx_stage_[queue];
  const uint16_t take = static_cast<uint16_t>(std::min<uint32_t>(n, s.room()));
  s.push(pkts, take, now);
  drain_tx_stage(queue, now);
  return take;
}

}  // namespace rocedp::pmd
