#pragma once
// Two in-process ports wired back to back over rte_rings (net_ring's rte_eth_from_rings): what
// side a transmits on queue q, side b receives on queue q, and the other way round. For
// one-process tests of two adapters, and for YAML:
//
//   ports:
//     - { name: a, devargs: "ring_pair:link0:a", ... }
//     - { name: b, devargs: "ring_pair:link0:b", ... }
//
// (No comma in the form: config/ treats the text before the first comma as the device and
// rejects two ports on one device; here each side is its own device.)
//
// The first side opened creates the link's rings (kMaxQueues per direction), the last side
// closed frees them together with any frame still in them. Each side may configure up to
// kMaxQueues queues; both sides should use the same count (a frame sent on queue q waits in
// ring q until the peer polls its queue q).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "pmd/port.hpp"

namespace rocedp::pmd {

class PacketPool;

struct RingPairDevargs {
  std::string link;  // LINK in "ring_pair:LINK:a"
  char side = 'a';   // 'a' or 'b'
};

constexpr uint16_t kRingPairMaxQueues = 8;
constexpr uint32_t kRingPairRingSize = 1024;

// True when devargs uses the ring_pair form (starts with "ring_pair:").
bool is_ring_pair_devargs(std::string_view devargs);
// Parses "ring_pair:LINK:a" or "ring_pair:LINK:b" (LINK: letters, digits, '_', '-'). False and
// *error on a malformed string.
bool parse_ring_pair_devargs(std::string_view devargs, RingPairDevargs* out, std::string* error);
// "ring_pair:LINK:S".
std::string ring_pair_devargs(const std::string& link, char side);

// Creates (or joins) the link and returns the ethdev port id of `side`, or -1 with *error.
// Used by Port::open; the device name is "net_ring_rp_<link>_<side>".
int ring_pair_attach(const RingPairDevargs& args, int socket_id, std::string* error);
// Removes that side's device (after rte_eth_dev_close) and, with the last side, the rings.
void ring_pair_detach(const RingPairDevargs& args);

// Convenience for tests: both sides opened (not started) on one pool.
struct RingPair {
  std::unique_ptr<Port> a, b;
};
bool open_ring_pair(const std::string& link, config::PortConfig a, config::PortConfig b,
                    uint16_t wanted_queues, PacketPool& pool, const config::DataplaneConfig& dp,
                    RingPair* out, std::string* error);

}  // namespace rocedp::pmd
