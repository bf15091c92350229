#pragma once
// The connection manager of an adapter: IB CM over QP1 (DESIGN.md §3-4) behind the NDK
// listener, connector and shared-endpoint objects (rocedp/listener.hpp, connector.hpp,
// shared_endpoint.hpp). No DPDK type appears here.
//
// rocedp::open_adapter (rocedp/runtime.hpp) attaches the connection manager when
// OpenOptions::connection_manager is set (the default).
//
// Threads: every function here, and every call on a listener, connector or shared endpoint, may
// be made from any thread; it runs on the control thread (the thread open_adapter started, which
// runs the adapter's poll_control() and the connection manager's loop): from another thread the
// call is handed to that thread and waits there for its inline result. Every connection callback
// (ConnectEvent, Connect/Accept/CompleteConnect/Disconnect RequestCompletion, DisconnectEvent,
// Create/CloseCompletion of these objects) runs on the control thread. No callback may block; a
// consumer may close any of these objects from inside its own callbacks, and nothing of an object
// fires after its close completed.

#include <array>
#include <cstddef>
#include <cstdint>

#include "rocedp/adapter.hpp"
#include "rocedp/status.hpp"

namespace rocedp {

/// A socket address (NDK's SOCKADDR_IN, or SOCKADDR_IN6 with `ipv6`): IP and ND port. IPv4 and
/// the port in host order, IPv6 in network order. The address 0 (0.0.0.0 or ::) is the wildcard
/// for Listen and CreateSharedEndpoint, and for Connect's source (the port's address of the
/// destination's family); port 0 asks for an ephemeral port (49152-65535).
struct NdkSockAddr {
  uint32_t ip = 0;  ///< IPv4 (when !ipv6)
  uint16_t port = 0;
  bool ipv6 = false;
  std::array<uint8_t, 16> ip6{};  ///< IPv6 (when ipv6)
  friend bool operator==(const NdkSockAddr&, const NdkSockAddr&) = default;
};

/// Counters of one adapter's connection manager.
struct ConnectionManagerCounters {
  uint64_t cm_rx = 0, cm_tx = 0;      ///< CM MADs received / sent
  uint64_t cm_rx_dropped = 0;         ///< undecodable or for no connection
  uint64_t cm_tx_failed = 0;          ///< no mbuf or the core's ring was full
  uint64_t rej_sent_no_listener = 0;  ///< REJ invalid service ID
  uint64_t stale_rejected = 0;        ///< REJ stale connection
  uint64_t drep_sent_unknown = 0;     ///< DREP to a DREQ for a connection already gone
  uint64_t established_by_data = 0;   ///< Accepts completed by the peer's packets (RTU lost)
  uint64_t arp_rx = 0;
  uint64_t arp_tx = 0;         ///< ARP requests handed to the core for resolving a peer
  uint64_t arp_tx_failed = 0;  ///< ARP requests not sent: no mbuf or the core's ring was full
  uint64_t connections = 0;    ///< live CM connections (not yet released)
  uint64_t peer_deaths = 0;    ///< established QPs whose retries ran out
};
ConnectionManagerCounters connection_manager_counters(Adapter& adapter);

}  // namespace rocedp
