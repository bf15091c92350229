#include "pmd/ring_pair.hpp"

#include <rte_bus_vdev.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <map>
#include <mutex>

#include "pmd/log.hpp"

namespace rocedp::pmd {
namespace {

constexpr std::string_view kPrefix = "ring_pair:";

// One link: rings a->b and b->a for each queue. Shared by both sides, freed with the last.
struct Link {
  unsigned index = 0;  // names rings compactly: RTE_RING_NAMESIZE is only 29 usable bytes
  std::array<rte_ring*, kRingPairMaxQueues> a_to_b{};
  std::array<rte_ring*, kRingPairMaxQueues> b_to_a{};
  bool side_open[2] = {false, false};
};

std::mutex g_mutex;
std::map<std::string, Link>& links() {
  static std::map<std::string, Link> m;
  return m;
}
unsigned g_next_index = 0;

std::string device_name(const RingPairDevargs& a) {
  return "rp_" + a.link + "_" + a.side;  // rte_eth_from_rings prefixes "net_ring_"
}

void free_rings(Link& l) {
  for (auto* rings : {&l.a_to_b, &l.b_to_a}) {
    for (rte_ring*& r : *rings) {
      if (r == nullptr) continue;
      void* obj;
      while (rte_ring_dequeue(r, &obj) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(obj));
      rte_ring_free(r);
      r = nullptr;
    }
  }
}

}  // namespace

bool is_ring_pair_devargs(std::string_view devargs) {
  return devargs.starts_with(kPrefix);
}

std::string ring_pair_devargs(const std::string& link, char side) {
  return std::string(kPrefix) + link + ":" + side;
}

bool parse_ring_pair_devargs(std::string_view devargs, RingPairDevargs* out, std::string* error) {
  auto fail = [&](const std::string& why) {
    if (error)
      *error = "devargs \"" + std::string(devargs) + "\": " + why +
               " (expected ring_pair:LINK:a or ring_pair:LINK:b)";
    return false;
  };
  if (!is_ring_pair_devargs(devargs)) return fail("not a ring_pair form");
  std::string_view rest = devargs.substr(kPrefix.size());
  size_t colon = rest.rfind(':');
  std::string_view link = rest.substr(0, colon);
  if (link.empty()) return fail("empty link name");
  for (char c : link) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) {
      return fail("link name may hold only letters, digits, '_' and '-'");
    }
  }
  if (link.size() > 40) return fail("link name longer than 40 characters");
  if (colon == std::string_view::npos) return fail("missing the side (:a or :b)");
  std::string_view side = rest.substr(colon + 1);
  if (side != "a" && side != "b") return fail("the side must be a or b");
  out->link = std::string(link);
  out->side = side.back();
  return true;
}

int ring_pair_attach(const RingPairDevargs& args, int socket_id, std::string* error) {
  std::lock_guard lock(g_mutex);
  const int s = args.side == 'a' ? 0 : 1;
  auto [it, created] = links().try_emplace(args.link);
  Link& l = it->second;
  if (created) {
    l.index = g_next_index++;
    for (uint16_t q = 0; q < kRingPairMaxQueues; ++q) {
      char name[RTE_RING_NAMESIZE];
      // Single producer (the one lcore that owns the TX queue), single consumer (the peer's RX).
      for (int dir = 0; dir < 2; ++dir) {
        std::snprintf(name, sizeof name, "rp%u_%s%u", l.index, dir == 0 ? "ab" : "ba", q);
        rte_ring* r =
            rte_ring_create(name, kRingPairRingSize, socket_id, RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (r == nullptr) {
          if (error)
            *error =
                std::string("ring_pair: rte_ring_create ") + name + ": " + rte_strerror(rte_errno);
          free_rings(l);
          links().erase(it);
          return -1;
        }
        (dir == 0 ? l.a_to_b : l.b_to_a)[q] = r;
      }
    }
  }
  if (l.side_open[s]) {
    if (error) *error = "ring_pair " + args.link + " side " + args.side + " is already open";
    return -1;
  }
  auto& rx = s == 0 ? l.b_to_a : l.a_to_b;
  auto& tx = s == 0 ? l.a_to_b : l.b_to_a;
  const std::string name = device_name(args);
  int port = rte_eth_from_rings(name.c_str(), rx.data(), kRingPairMaxQueues, tx.data(),
                                kRingPairMaxQueues, socket_id < 0 ? 0 : socket_id);
  if (port < 0) {
    if (error) *error = "ring_pair: rte_eth_from_rings " + name + ": " + rte_strerror(rte_errno);
    if (!l.side_open[1 - s]) {
      free_rings(l);
      links().erase(it);
    }
    return -1;
  }
  l.side_open[s] = true;
  return port;
}

void ring_pair_detach(const RingPairDevargs& args) {
  std::lock_guard lock(g_mutex);
  const std::string name = "net_ring_" + device_name(args);
  rte_vdev_uninit(name.c_str());
  auto it = links().find(args.link);
  if (it == links().end()) return;
  Link& l = it->second;
  l.side_open[args.side == 'a' ? 0 : 1] = false;
  if (!l.side_open[0] && !l.side_open[1]) {
    free_rings(l);
    links().erase(it);
  }
}

bool open_ring_pair(const std::string& link, config::PortConfig a, config::PortConfig b,
                    uint16_t wanted_queues, PacketPool& pool, const config::DataplaneConfig& dp,
                    RingPair* out, std::string* error) {
  a.devargs = ring_pair_devargs(link, 'a');
  b.devargs = ring_pair_devargs(link, 'b');
  RingPair pair;
  pair.a = Port::open(a, wanted_queues, pool, dp, error);
  if (!pair.a) return false;
  pair.b = Port::open(b, wanted_queues, pool, dp, error);
  if (!pair.b) return false;
  *out = std::move(pair);
  return true;
}

}  // namespace rocedp::pmd
