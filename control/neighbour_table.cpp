#include "control/neighbour_table.hpp"

#include <algorithm>
#include <utility>

namespace rocedp::control {
namespace {

bool usable_mac(const config::MacAddress& mac) {
  // A neighbour is one station: never a group address, never all zeros.
  return (mac.bytes[0] & 0x01) == 0 && mac != config::MacAddress{};
}

}  // namespace

NeighbourTableOptions NeighbourTableOptions::from_config(const config::ControlConfig& control,
                                                         const config::PortConfig& port) {
  NeighbourTableOptions o;
  o.local_ip = port.address;
  o.prefix_len = port.prefix_len;
  o.local_ip6 = port.address6;
  o.retry_interval = std::chrono::milliseconds(control.arp_retry_ms);
  o.retries = control.arp_retries;
  o.expiry = std::chrono::seconds(control.neighbour_expiry_s);
  return o;
}

std::string_view neighbour_state_name(NeighbourState s) {
  switch (s) {
    case NeighbourState::kStatic:
      return "static";
    case NeighbourState::kReachable:
      return "reachable";
    case NeighbourState::kResolving:
      return "resolving";
  }
  return "unknown";
}

NeighbourTable::NeighbourTable(NeighbourTableOptions options,
                               std::span<const config::StaticNeighbour> statics,
                               NeighbourTableHooks hooks)
    : options_(options), hooks_(std::move(hooks)) {
  // At least one request per resolution, whatever the configuration says.
  options_.retries = std::max<uint32_t>(options_.retries, 1);
  for (const config::StaticNeighbour& s : statics) {
    if (s.ip6) {  // only a port with an IPv6 address has IPv6 neighbours
      if (!options_.local_ip6) continue;
      Entry6& e = entries6_[s.ip6->bytes];
      e.state = NeighbourState::kStatic;
      e.mac = s.mac;
      continue;
    }
    if (s.ip.value == 0) continue;
    Entry& e = entries_[s.ip.value];
    e.state = NeighbourState::kStatic;
    e.mac = s.mac;
  }
}

// ---- The per-family pieces ----

namespace {

// What the two families declare alike: the address, result, callback and snapshot types, and the
// member holding the entries.
template <class IpT, class ResultT, class SnapshotT, auto kEntries>
struct FamilyTypes {
  using Ip = IpT;
  using Result = ResultT;
  using Callback = std::function<void(const ResultT&)>;
  using Snapshot = SnapshotT;
  static auto& map(NeighbourTable& t) { return t.*kEntries; }
  static const auto& map(const NeighbourTable& t) { return t.*kEntries; }
};

}  // namespace

// IPv4 (RFC 826): keyed by the host-order value, static entries from the configuration, changes
// reported through on_change (the cores' caches).
struct NeighbourTable::Family4 : FamilyTypes<config::Ipv4Address, ResolveResult,
                                             NeighbourSnapshotEntry, &NeighbourTable::entries_> {
  static uint32_t key(Ip ip) { return ip.value; }

  static bool resolvable(const NeighbourTable& t, Ip ip) {
    const uint8_t prefix_len = t.options_.prefix_len;
    const uint32_t mask = prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - prefix_len);
    const uint32_t net = t.options_.local_ip.value & mask;
    return ip.value != 0 && (ip.value >> 28) < 0xE  // not multicast / class E / 255.255.255.255
           && ip != t.options_.local_ip &&
           (ip.value & mask) == net  // on-link, not ours
           // not the subnet broadcast, which a /31 or /32 does not have (RFC 3021 §2.2)
           && (prefix_len > 30 || ip.value != (net | ~mask));
  }
  static void send_request(const NeighbourTable& t, Ip ip) {
    if (t.hooks_.send_request) t.hooks_.send_request(ip);
  }
  static void notify(const NeighbourTable& t, Ip ip, const config::MacAddress& mac, bool removed) {
    if (t.hooks_.on_change) t.hooks_.on_change(NeighbourChange{ip, mac, removed});
  }
};

// IPv6 (RFC 4861): keyed by the 16 bytes, no static entries, changes reported through on_change6.
struct NeighbourTable::Family6 : FamilyTypes<config::Ipv6Address, ResolveResult6,
                                             NeighbourSnapshotEntry6, &NeighbourTable::entries6_> {
  static const Key6& key(const Ip& ip) { return ip.bytes; }

  static bool resolvable(const NeighbourTable& t, const Ip& ip) {
    config::Ipv6Address loopback;
    loopback.bytes[15] = 1;
    return t.options_.local_ip6 && ip != *t.options_.local_ip6 && ip != config::Ipv6Address{} &&
           ip != loopback && ip.bytes[0] != 0xff;  // not multicast
  }
  static void send_request(const NeighbourTable& t, const Ip& ip) {
    if (t.hooks_.send_request6) t.hooks_.send_request6(ip);
  }
  static void notify(const NeighbourTable& t, const Ip& ip, const config::MacAddress& mac,
                     bool removed) {
    if (t.hooks_.on_change6) t.hooks_.on_change6(ip, mac, removed);
  }
};

// ---- One implementation for both ----

template <class F>
NeighbourTable::ResolveStatus NeighbourTable::resolve_in(const typename F::Ip& ip,
                                                         NeighbourTime now,
                                                         typename F::Callback callback) {
  auto& entries = F::map(*this);
  auto it = entries.find(F::key(ip));
  if (it != entries.end()) {
    auto& e = it->second;
    if (e.state == NeighbourState::kStatic ||
        (e.state == NeighbourState::kReachable && now < e.deadline)) {
      if (callback) callback(typename F::Result{ip, true, e.mac});
      return ResolveStatus::kCompleted;
    }
    if (e.state == NeighbourState::kResolving) {
      e.waiters.push_back(std::move(callback));
      return ResolveStatus::kPending;
    }
    // Expired, and on_timer has not run yet: it is gone; resolve afresh below.
    const config::MacAddress old = e.mac;
    entries.erase(it);
    ++stats_.expired;
    F::notify(*this, ip, old, true);
  }
  const bool resolvable = F::resolvable(*this, ip);
  if (!resolvable || size() >= options_.max_entries) {
    if (resolvable) ++stats_.table_full;
    ++stats_.unreachable;
    if (callback) callback(typename F::Result{ip, false, {}});
    return ResolveStatus::kCompleted;
  }
  auto& e = entries[F::key(ip)];
  e.state = NeighbourState::kResolving;
  e.requests_sent = 1;
  e.deadline = now + options_.retry_interval;
  e.waiters.push_back(std::move(callback));
  ++stats_.requests_sent;
  F::send_request(*this, ip);
  return ResolveStatus::kPending;
}

template <class F>
bool NeighbourTable::lookup_in(const typename F::Ip& ip, NeighbourTime now,
                               config::MacAddress* mac) const {
  const auto& entries = F::map(*this);
  auto it = entries.find(F::key(ip));
  if (it == entries.end()) return false;
  const auto& e = it->second;
  if (e.state == NeighbourState::kStatic ||
      (e.state == NeighbourState::kReachable && now < e.deadline)) {
    *mac = e.mac;
    return true;
  }
  return false;
}

template <class F>
LearnResult NeighbourTable::learn_in(const typename F::Ip& ip, const config::MacAddress& mac,
                                     NeighbourTime now, LearnMode mode) {
  if (!F::resolvable(*this, ip) || !usable_mac(mac)) return LearnResult::kIgnored;
  auto& entries = F::map(*this);
  auto it = entries.find(F::key(ip));
  if (it == entries.end()) {
    if (mode != LearnMode::kCreate) return LearnResult::kIgnored;
    if (size() >= options_.max_entries) {
      ++stats_.table_full;
      return LearnResult::kIgnored;
    }
    auto& e = entries[F::key(ip)];
    e.state = NeighbourState::kReachable;
    e.mac = mac;
    e.deadline = now + options_.expiry;
    ++stats_.learned;
    F::notify(*this, ip, mac, false);
    return LearnResult::kCreated;
  }
  auto& e = it->second;
  switch (e.state) {
    case NeighbourState::kStatic:
      return LearnResult::kIgnored;  // configuration wins over the wire
    case NeighbourState::kResolving: {
      e.state = NeighbourState::kReachable;
      e.mac = mac;
      e.deadline = now + options_.expiry;
      std::vector<typename F::Callback> waiters = std::move(e.waiters);
      e.waiters.clear();
      ++stats_.resolved;
      ++stats_.learned;
      F::notify(*this, ip, mac, false);
      const typename F::Result result{ip, true, mac};
      for (typename F::Callback& cb : waiters) {
        if (cb) cb(result);
      }
      return LearnResult::kResolved;
    }
    case NeighbourState::kReachable:
      if (e.mac != mac && mode == LearnMode::kUpdateNoOverride) return LearnResult::kIgnored;
      e.deadline = now + options_.expiry;
      if (e.mac == mac) return LearnResult::kRefreshed;
      e.mac = mac;
      ++stats_.learned;
      F::notify(*this, ip, mac, false);
      return LearnResult::kChanged;
  }
  return LearnResult::kIgnored;
}

template <class F>
void NeighbourTable::on_timer_in(NeighbourTime now) {
  using Ip = typename F::Ip;
  // Collect first, act after: hooks and callbacks may re-enter the table.
  std::vector<Ip> to_send;
  std::vector<std::pair<Ip, config::MacAddress>> removed;
  std::vector<std::pair<typename F::Callback, Ip>> failed;
  auto& entries = F::map(*this);
  for (auto it = entries.begin(); it != entries.end();) {
    auto& e = it->second;
    const Ip ip{it->first};
    if (e.state == NeighbourState::kResolving && now >= e.deadline) {
      if (e.requests_sent < options_.retries) {
        ++e.requests_sent;
        e.deadline = now + options_.retry_interval;
        to_send.push_back(ip);
      } else {
        // One full interval passed after the last request without an answer.
        ++stats_.unreachable;
        for (typename F::Callback& cb : e.waiters) failed.emplace_back(std::move(cb), ip);
        it = entries.erase(it);
        continue;
      }
    } else if (e.state == NeighbourState::kReachable && now >= e.deadline) {
      ++stats_.expired;
      removed.emplace_back(ip, e.mac);
      it = entries.erase(it);
      continue;
    }
    ++it;
  }
  for (const Ip& ip : to_send) {
    ++stats_.requests_sent;
    F::send_request(*this, ip);
  }
  for (const auto& [ip, mac] : removed) F::notify(*this, ip, mac, true);
  for (auto& [cb, ip] : failed) {
    if (cb) cb(typename F::Result{ip, false, {}});
  }
}

template <class F>
std::vector<typename F::Snapshot> NeighbourTable::snapshot_in(NeighbourTime now) const {
  const auto& entries = F::map(*this);
  std::vector<typename F::Snapshot> out;
  out.reserve(entries.size());
  for (const auto& [key, e] : entries) {
    const int64_t expires_in_ms =
        e.state == NeighbourState::kStatic
            ? -1
            : std::chrono::duration_cast<std::chrono::milliseconds>(e.deadline - now).count();
    out.push_back(typename F::Snapshot{typename F::Ip{key}, e.mac, e.state, expires_in_ms,
                                       e.requests_sent, e.waiters.size()});
  }
  return out;
}

// ---- The public interface ----

NeighbourTable::ResolveStatus NeighbourTable::resolve(config::Ipv4Address ip, NeighbourTime now,
                                                      ResolveCallback callback) {
  return resolve_in<Family4>(ip, now, std::move(callback));
}

NeighbourTable::ResolveStatus NeighbourTable::resolve6(const config::Ipv6Address& ip,
                                                       NeighbourTime now,
                                                       ResolveCallback6 callback) {
  return resolve_in<Family6>(ip, now, std::move(callback));
}

bool NeighbourTable::lookup(config::Ipv4Address ip, NeighbourTime now,
                            config::MacAddress* mac) const {
  return lookup_in<Family4>(ip, now, mac);
}

bool NeighbourTable::lookup6(const config::Ipv6Address& ip, NeighbourTime now,
                             config::MacAddress* mac) const {
  return lookup_in<Family6>(ip, now, mac);
}

LearnResult NeighbourTable::learn(config::Ipv4Address ip, const config::MacAddress& mac,
                                  NeighbourTime now, LearnMode mode) {
  return learn_in<Family4>(ip, mac, now, mode);
}

LearnResult NeighbourTable::learn6(const config::Ipv6Address& ip, const config::MacAddress& mac,
                                   NeighbourTime now, LearnMode mode) {
  return learn_in<Family6>(ip, mac, now, mode);
}

void NeighbourTable::on_timer(NeighbourTime now) {
  on_timer_in<Family4>(now);
  on_timer_in<Family6>(now);
}

NeighbourTime NeighbourTable::next_deadline() const {
  NeighbourTime next = NeighbourTime::max();
  for (const auto& [ip, e] : entries_) {
    if (e.state != NeighbourState::kStatic) next = std::min(next, e.deadline);
  }
  for (const auto& [ip, e] : entries6_) {
    if (e.state != NeighbourState::kStatic) next = std::min(next, e.deadline);
  }
  return next;
}

void NeighbourTable::publish_all() const {
  for (const auto& [ip, e] : entries_) {
    if (e.state != NeighbourState::kResolving) {
      Family4::notify(*this, config::Ipv4Address{ip}, e.mac, false);
    }
  }
}

std::vector<NeighbourSnapshotEntry> NeighbourTable::snapshot(NeighbourTime now) const {
  std::vector<NeighbourSnapshotEntry> out = snapshot_in<Family4>(now);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.ip.value < b.ip.value; });
  return out;
}

std::vector<NeighbourSnapshotEntry6> NeighbourTable::snapshot6(NeighbourTime now) const {
  return snapshot_in<Family6>(now);  // entries6_ is ordered by address already
}

}  // namespace rocedp::control
