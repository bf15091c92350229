#pragma once
// RAII rte_pktmbuf pool. One pool per NUMA socket is enough for every port on it; the data room
// must fit the largest port MTU (see data_room_for_mtu) or the port falls back to scattered RX.

#include <cstdint>
#include <memory>
#include <string>

struct rte_mempool;

namespace rocedp::pmd {

class PacketPool {
 public:
  // rte_pktmbuf_pool_create(name, count, cache_size, 0, data_room, socket_id). `data_room`
  // includes RTE_PKTMBUF_HEADROOM. socket_id may be SOCKET_ID_ANY (-1).
  // Returns nullptr and sets *error on failure (EAL not initialised, no memory, name taken).
  static std::unique_ptr<PacketPool> create(const std::string& name, uint32_t count,
                                            uint32_t cache_size, uint16_t data_room, int socket_id,
                                            std::string* error);

  // Data room (headroom included) that holds one whole frame of this MTU: Ethernet header,
  // one VLAN tag and the FCS on top of the MTU; never less than RTE_MBUF_DEFAULT_BUF_SIZE
  // (2048 + headroom), which some PMDs (net_af_packet) require.
  static uint16_t data_room_for_mtu(uint16_t mtu);

  PacketPool(const PacketPool&) = delete;
  PacketPool& operator=(const PacketPool&) = delete;
  ~PacketPool();  // rte_mempool_free; every mbuf must be back by then

  rte_mempool* get() const { return pool_; }
  const std::string& name() const { return name_; }
  uint32_t size() const;       // mbufs in the pool
  uint32_t available() const;  // free mbufs (per-lcore caches included): telemetry, leak checks
  uint16_t data_room() const;  // per mbuf, headroom included

 private:
  PacketPool(rte_mempool* pool, std::string name) : pool_(pool), name_(std::move(name)) {}
  rte_mempool* pool_;
  std::string name_;
};

}  // namespace rocedp::pmd
