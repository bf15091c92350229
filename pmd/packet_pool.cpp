#include "pmd/packet_pool.hpp"

#include <rte_errno.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>

#include "pmd/log.hpp"

namespace rocedp::pmd {

std::unique_ptr<PacketPool> PacketPool::create(const std::string& name, uint32_t count,
                                               uint32_t cache_size, uint16_t data_room,
                                               int socket_id, std::string* error) {
  // The per-lcore cache may not exceed RTE_MEMPOOL_CACHE_MAX_SIZE nor count / 1.5
  // (rte_mempool_create_empty rejects it otherwise).
  uint32_t cache = std::min<uint32_t>(cache_size, RTE_MEMPOOL_CACHE_MAX_SIZE);
  cache = std::min<uint32_t>(cache, static_cast<uint32_t>(count / 1.5));
  rte_mempool* mp = rte_pktmbuf_pool_create(name.c_str(), count, cache, 0, data_room, socket_id);
  if (mp == nullptr) {
    std::string reason = rte_strerror(rte_errno);
    if (error) *error = "mbuf pool " + name + ": " + reason;
    log(LogLevel::kError, "pool_create_failed", {{"pool", name}, {"reason", reason}});
    return nullptr;
  }
  log(LogLevel::kInfo, "pool_created",
      {{"pool", name}, {"mbufs", std::to_string(count)}, {"data_room", std::to_string(data_room)}});
  return std::unique_ptr<PacketPool>(new PacketPool(mp, name));
}

uint16_t PacketPool::data_room_for_mtu(uint16_t mtu) {
  // 256 bytes of slack: net_af_packet needs its whole socket frame (the frame, the kernel's
  // tpacket header, rounded up to 256 bytes) to fit one mbuf.
  uint32_t room =
      RTE_PKTMBUF_HEADROOM + mtu + RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN + RTE_ETHER_CRC_LEN + 256;
  // Never below DPDK's default 2 KiB data room: several PMDs size their buffers from it
  // (net_af_packet refuses an mbuf smaller than its 2048-byte frame minus its header).
  room = std::max<uint32_t>(room, RTE_MBUF_DEFAULT_BUF_SIZE);
  return static_cast<uint16_t>(std::min<uint32_t>(room, UINT16_MAX));
}

PacketPool::~PacketPool() {
  uint32_t missing = size() - available();
  if (missing != 0) {
    log(LogLevel::kWarning, "pool_free_with_mbufs_out",
        {{"pool", name_}, {"missing", std::to_string(missing)}});
  }
  rte_mempool_free(pool_);
}

uint32_t PacketPool::size() const {
  return pool_->size;
}
uint32_t PacketPool::available() const {
  return rte_mempool_avail_count(pool_);
}
uint16_t PacketPool::data_room() const {
  return rte_pktmbuf_data_room_size(pool_);
}

}  // namespace rocedp::pmd
