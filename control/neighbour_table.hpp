#pragma once
// The control thread's authoritative neighbour table of one port: IPv4 -> MAC.
//
// - Static entries (ports[].neighbours in the YAML) never expire and are never overwritten by ARP.
// - Learned entries come from ARP (learn()) and are removed `neighbour_expiry_s` after they were
//   last confirmed; a later resolve() asks again.
// - resolve() answers at once for a usable entry, otherwise sends an ARP request through the send
//   hook, repeats it every `arp_retry_ms` until `arp_retries` requests went out, and reports
//   "unreachable" one interval after the last request (Connect reports that as
//   STATUS_HOST_UNREACHABLE).
// - Every change of a usable mapping is reported through the change hook; the control thread
//   turns it into NeighbourUpdate messages for the polling cores' NeighbourCache.
// - IPv6 neighbours (RFC 4861) live in a map of their own, keyed by the 16 bytes: learn6() from
//   Neighbor Advertisements and from the solicitors of NS we answered, resolve6() by Neighbor
//   Solicitations (send_request6) with the same retries, expiry and capacity (shared with IPv4).
//   Static IPv6 entries come from the same configuration list (an `ip` with colons). The cores'
//   caches stay IPv4-only, so IPv6 changes only reach the optional on_change6 hook.
//
// Threading: single-threaded. Every method, and every hook and callback it invokes, runs on the
// control thread. Time is passed in (`now`), never read, so tests are deterministic.
// Callbacks and hooks are invoked after the table's own state is updated, so they may call back
// into the table (e.g. resolve() again).

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/config.hpp"

namespace rocedp::control {

using NeighbourClock = std::chrono::steady_clock;
using NeighbourTime = NeighbourClock::time_point;

struct NeighbourTableOptions {
  config::Ipv4Address local_ip;  // our address on this port: never resolved, never learned
  uint8_t prefix_len = 24;       // only on-link addresses are resolved by ARP
  std::optional<config::Ipv6Address> local_ip6;   // ports[].ipv6: never resolved, never learned
  std::chrono::milliseconds retry_interval{200};  // control.arp_retry_ms
  uint32_t retries = 5;                           // control.arp_retries: requests per resolution
  std::chrono::seconds expiry{300};               // control.neighbour_expiry_s
  uint32_t max_entries = 1024;  // static + learned + resolving; keep <= every core cache's capacity
                                // (PollingCore neighbour_capacity, 1024 by default)

  static NeighbourTableOptions from_config(const config::ControlConfig& control,
                                           const config::PortConfig& port);
};

enum class NeighbourState : uint8_t {
  kStatic,     // from configuration, usable, never expires
  kReachable,  // learned from ARP, usable until it expires
  kResolving,  // ARP requests outstanding, not usable
};
std::string_view neighbour_state_name(NeighbourState s);

// The outcome of a resolution, as delivered to its callback.
struct ResolveResult {
  config::Ipv4Address ip;
  bool reachable =
      false;  // false: no answer after the last retry, or the address is not resolvable
  config::MacAddress mac;  // valid when reachable
};
using ResolveCallback = std::function<void(const ResolveResult&)>;

// The outcome of an IPv6 resolution.
struct ResolveResult6 {
  config::Ipv6Address ip;
  bool reachable = false;  // false: no answer after the last retry, or not resolvable
  config::MacAddress mac;  // valid when reachable
};
using ResolveCallback6 = std::function<void(const ResolveResult6&)>;

// A change of a usable mapping, for the cores' caches.
struct NeighbourChange {
  config::Ipv4Address ip;
  config::MacAddress mac;  // the new MAC (not meaningful when removed)
  bool removed = false;
};

struct NeighbourTableHooks {
  // Send one broadcast ARP request for `target` (build_arp_request + TX on this port). Required.
  std::function<void(config::Ipv4Address target)> send_request;
  // Optional: a usable mapping appeared, changed MAC, or disappeared.
  std::function<void(const NeighbourChange&)> on_change;
  // Send one Neighbor Solicitation for `target` to its solicited-node group
  // (build_neighbor_solicitation + TX on this port). Needed for resolve6().
  std::function<void(const config::Ipv6Address& target)> send_request6;
  // Optional: an IPv6 mapping appeared, changed MAC (removed false) or disappeared (true).
  std::function<void(const config::Ipv6Address& ip, const config::MacAddress& mac, bool removed)>
      on_change6;
};

// How far a learned mapping may go (RFC 826 merge/add; Linux arp_accept).
enum class LearnMode : uint8_t {
  kCreate,      // add the entry if absent (ARP aimed at us: request/reply to our address)
  kUpdateOnly,  // only refresh/complete an entry we already have (third-party or gratuitous ARP)
  kUpdateNoOverride,  // as kUpdateOnly, but a reachable entry keeps its address when `mac`
                      // differs (an NA with the Override flag clear, RFC 4861 7.2.5)
};
enum class LearnResult : uint8_t {
  kCreated,    // new reachable entry
  kResolved,   // a resolving entry completed; its callbacks fired
  kRefreshed,  // existing entry confirmed (same MAC), expiry pushed back
  kChanged,    // existing entry now has a different MAC
  kIgnored,    // static entry, our own/invalid address, absent with kUpdateOnly, or table full
};

struct NeighbourSnapshotEntry {
  config::Ipv4Address ip;
  config::MacAddress mac;  // zero while resolving
  NeighbourState state;
  int64_t expires_in_ms;   // reachable: until expiry; resolving: until the next request or verdict;
                           // static: -1
  uint32_t requests_sent;  // of the current/last resolution
  size_t waiters;          // resolve callbacks pending
};

struct NeighbourSnapshotEntry6 {
  config::Ipv6Address ip;
  config::MacAddress mac;  // zero while resolving
  NeighbourState state;    // kReachable or kResolving
  int64_t expires_in_ms;
  uint32_t requests_sent;
  size_t waiters;
};

struct NeighbourTableStats {
  uint64_t requests_sent = 0;  // ARP requests and Neighbor Solicitations
  uint64_t resolved = 0;       // resolutions answered by ARP
  uint64_t unreachable = 0;    // resolutions that ran out of retries (or were not resolvable)
  uint64_t learned = 0;        // kCreated + kChanged
  uint64_t expired = 0;
  uint64_t table_full = 0;  // creations refused by max_entries
};

class NeighbourTable {
 public:
  // Static neighbours are installed immediately; call publish_all() once the cores can receive.
  NeighbourTable(NeighbourTableOptions options, std::span<const config::StaticNeighbour> statics,
                 NeighbourTableHooks hooks);

  enum class ResolveStatus : uint8_t { kCompleted, kPending };
  // Resolves `ip`. kCompleted: `callback` already ran inline (known entry, or an address that can
  // never be resolved: 0, multicast, broadcast, ours, off-link). kPending: it will run exactly once
  // from learn() or on_timer(). The first request of a new resolution is sent before returning.
  ResolveStatus resolve(config::Ipv4Address ip, NeighbourTime now, ResolveCallback callback);

  // Usable MAC for `ip` (static or reachable and not yet expired at `now`).
  bool lookup(config::Ipv4Address ip, NeighbourTime now, config::MacAddress* mac) const;

  // A sender seen in an ARP frame (dataplane::ArpPeer). Completes a pending resolution.
  LearnResult learn(config::Ipv4Address ip, const config::MacAddress& mac, NeighbourTime now,
                    LearnMode mode = LearnMode::kCreate);

  // IPv6 (RFC 4861), for a port with options().local_ip6; without it resolve6 fails at once and
  // learn6 ignores everything.
  // As resolve(): kCompleted when the callback already ran (known entry, or an address that can
  // never be resolved: ::, ::1, multicast, ours, or no IPv6 on the port); kPending otherwise, the
  // first Neighbor Solicitation sent before returning.
  ResolveStatus resolve6(const config::Ipv6Address& ip, NeighbourTime now,
                         ResolveCallback6 callback);
  bool lookup6(const config::Ipv6Address& ip, NeighbourTime now, config::MacAddress* mac) const;
  // A target seen in an NA (kUpdateOnly: RFC 4861 7.2.5 creates nothing) or a solicitor with its
  // source link-layer address (kCreate: 7.2.3). Completes a pending resolution.
  LearnResult learn6(const config::Ipv6Address& ip, const config::MacAddress& mac,
                     NeighbourTime now, LearnMode mode);

  // Drives retries, unreachable verdicts and expiry. Call at least every retry interval.
  void on_timer(NeighbourTime now);
  // The earliest time on_timer has something to do (time_point::max() if nothing).
  NeighbourTime next_deadline() const;

  // Reports every usable entry through on_change (at start, or when a core restarts).
  void publish_all() const;

  // For telemetry (/rocedp/neighbours), ordered by address.
  std::vector<NeighbourSnapshotEntry> snapshot(NeighbourTime now) const;
  std::vector<NeighbourSnapshotEntry6> snapshot6(NeighbourTime now) const;  // by address
  size_t size() const { return entries_.size() + entries6_.size(); }
  const NeighbourTableStats& stats() const { return stats_; }
  const NeighbourTableOptions& options() const { return options_; }

 private:
  template <class Callback>
  struct BasicEntry {
    NeighbourState state = NeighbourState::kResolving;
    config::MacAddress mac;
    NeighbourTime deadline;  // reachable: expiry; resolving: next request or verdict
    uint32_t requests_sent = 0;
    std::vector<Callback> waiters;
  };
  using Entry = BasicEntry<ResolveCallback>;
  using Entry6 = BasicEntry<ResolveCallback6>;
  using Key6 = std::array<uint8_t, 16>;

  // One implementation of the table's logic serves both families; Family4 and Family6 (defined in
  // neighbour_table.cpp) supply the map, the key, the result and snapshot types, which addresses
  // are resolvable, and the send and change hooks.
  struct Family4;
  struct Family6;
  template <class F>
  ResolveStatus resolve_in(const typename F::Ip& ip, NeighbourTime now,
                           typename F::Callback callback);
  template <class F>
  bool lookup_in(const typename F::Ip& ip, NeighbourTime now, config::MacAddress* mac) const;
  template <class F>
  LearnResult learn_in(const typename F::Ip& ip, const config::MacAddress& mac, NeighbourTime now,
                       LearnMode mode);
  template <class F>
  void on_timer_in(NeighbourTime now);
  template <class F>
  std::vector<typename F::Snapshot> snapshot_in(NeighbourTime now) const;

  NeighbourTableOptions options_;
  NeighbourTableHooks hooks_;
  std::unordered_map<uint32_t, Entry> entries_;
  std::map<Key6, Entry6> entries6_;  // few entries; ordered, so snapshot6 needs no sort
  NeighbourTableStats stats_;
};

}  // namespace rocedp::control
