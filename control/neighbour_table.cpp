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
    if (s.ip.value == 0) continue;
    Entry& e = entries_[s.ip.value];
    e.state = NeighbourState::kStatic;
    e.mac = s.mac;
  }
}

bool NeighbourTable::resolvable(config::Ipv4Address ip) const {
  const uint32_t mask = options_.prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - options_.prefix_len);
  const uint32_t net = options_.local_ip.value & mask;
  return ip.value != 0 && (ip.value >> 28) < 0xE  // not multicast / class E / 255.255.255.255
         && ip != options_.local_ip && (ip.value & mask) == net  // on-link, not ours
         && ip.value != (net | ~mask);                           // not the subnet broadcast
}

void NeighbourTable::notify(config::Ipv4Address ip, const config::MacAddress& mac,
                            bool removed) const {
  if (hooks_.on_change) hooks_.on_change(NeighbourChange{ip, mac, removed});
}

NeighbourTable::ResolveStatus NeighbourTable::resolve(config::Ipv4Address ip, NeighbourTime now,
                                                      ResolveCallback callback) {
  auto it = entries_.find(ip.value);
  if (it != entries_.end()) {
    Entry& e = it->second;
    if (e.state == NeighbourState::kStatic ||
        (e.state == NeighbourState::kReachable && now < e.deadline)) {
      if (callback) callback(ResolveResult{ip, true, e.mac});
      return ResolveStatus::kCompleted;
    }
    if (e.state == NeighbourState::kResolving) {
      e.waiters.push_back(std::move(callback));
      return ResolveStatus::kPending;
    }
    // Expired, and on_timer has not run yet: it is gone; resolve afresh below.
    const config::MacAddress old = e.mac;
    entries_.erase(it);
    ++stats_.expired;
    notify(ip, old, true);
  }
  if (!resolvable(ip) || size() >= options_.max_entries) {
    if (resolvable(ip)) ++stats_.table_full;
    ++stats_.unreachable;
    if (callback) callback(ResolveResult{ip, false, {}});
    return ResolveStatus::kCompleted;
  }
  Entry& e = entries_[ip.value];
  e.state = NeighbourState::kResolving;
  e.requests_sent = 1;
  e.deadline = now + options_.retry_interval;
  e.waiters.push_back(std::move(callback));
  ++stats_.requests_sent;
  if (hooks_.send_request) hooks_.send_request(ip);
  return ResolveStatus::kPending;
}

bool NeighbourTable::lookup(config::Ipv4Address ip, NeighbourTime now,
                            config::MacAddress* mac) const {
  auto it = entries_.find(ip.value);
  if (it == entries_.end()) return false;
  const Entry& e = it->second;
  if (e.state == NeighbourState::kStatic ||
      (e.state == NeighbourState::kReachable && now < e.deadline)) {
    *mac = e.mac;
    return true;
  }
  return false;
}

LearnResult NeighbourTable::learn(config::Ipv4Address ip, const config::MacAddress& mac,
                                  NeighbourTime now, LearnMode mode) {
  if (!resolvable(ip) || !usable_mac(mac)) return LearnResult::kIgnored;
  auto it = entries_.find(ip.value);
  if (it == entries_.end()) {
    if (mode == LearnMode::kUpdateOnly) return LearnResult::kIgnored;
    if (size() >= options_.max_entries) {
      ++stats_.table_full;
      return LearnResult::kIgnored;
    }
    Entry& e = entries_[ip.value];
    e.state = NeighbourState::kReachable;
    e.mac = mac;
    e.deadline = now + options_.expiry;
    ++stats_.learned;
    notify(ip, mac, false);
    return LearnResult::kCreated;
  }
  Entry& e = it->second;
  switch (e.state) {
    case NeighbourState::kStatic:
      return LearnResult::kIgnored;  // configuration wins over the wire
    case NeighbourState::kResolving: {
      e.state = NeighbourState::kReachable;
      e.mac = mac;
      e.deadline = now + options_.expiry;
      std::vector<ResolveCallback> waiters = std::move(e.waiters);
      e.waiters.clear();
      ++stats_.resolved;
      ++stats_.learned;
      notify(ip, mac, false);
      const ResolveResult result{ip, true, mac};
      for (ResolveCallback& cb : waiters) {
        if (cb) cb(result);
      }
      return LearnResult::kResolved;
    }
    case NeighbourState::kReachable:
      e.deadline = now + options_.expiry;
      if (e.mac == mac) return LearnResult::kRefreshed;
      e.mac = mac;
      ++stats_.learned;
      notify(ip, mac, false);
      return LearnResult::kChanged;
  }
  return LearnResult::kIgnored;
}

// ---- IPv6 (RFC 4861) ----

bool NeighbourTable::resolvable6(const config::Ipv6Address& ip) const {
  config::Ipv6Address loopback;
  loopback.bytes[15] = 1;
  return options_.local_ip6 && ip != *options_.local_ip6 && ip != config::Ipv6Address{} &&
         ip != loopback && ip.bytes[0] != 0xff;  // not multicast
}

void NeighbourTable::notify6(const config::Ipv6Address& ip, const config::MacAddress& mac,
                             bool removed) const {
  if (hooks_.on_change6) hooks_.on_change6(ip, mac, removed);
}

NeighbourTable::ResolveStatus NeighbourTable::resolve6(const config::Ipv6Address& ip,
                                                       NeighbourTime now,
                                                       ResolveCallback6 callback) {
  auto it = entries6_.find(ip.bytes);
  if (it != entries6_.end()) {
    Entry6& e = it->second;
    if (e.state == NeighbourState::kReachable && now < e.deadline) {
      if (callback) callback(ResolveResult6{ip, true, e.mac});
      return ResolveStatus::kCompleted;
    }
    if (e.state == NeighbourState::kResolving) {
      e.waiters.push_back(std::move(callback));
      return ResolveStatus::kPending;
    }
    const config::MacAddress old = e.mac;  // expired, on_timer has not run yet
    entries6_.erase(it);
    ++stats_.expired;
    notify6(ip, old, true);
  }
  if (!resolvable6(ip) || size() >= options_.max_entries) {
    if (resolvable6(ip)) ++stats_.table_full;
    ++stats_.unreachable;
    if (callback) callback(ResolveResult6{ip, false, {}});
    return ResolveStatus::kCompleted;
  }
  Entry6& e = entries6_[ip.bytes];
  e.state = NeighbourState::kResolving;
  e.requests_sent = 1;
  e.deadline = now + options_.retry_interval;
  e.waiters.push_back(std::move(callback));
  ++stats_.requests_sent;
  if (hooks_.send_request6) hooks_.send_request6(ip);
  return ResolveStatus::kPending;
}

bool NeighbourTable::lookup6(const config::Ipv6Address& ip, NeighbourTime now,
                             config::MacAddress* mac) const {
  auto it = entries6_.find(ip.bytes);
  if (it == entries6_.end() || it->second.state != NeighbourState::kReachable ||
      now >= it->second.deadline)
    return false;
  *mac = it->second.mac;
  return true;
}

LearnResult NeighbourTable::learn6(const config::Ipv6Address& ip, const config::MacAddress& mac,
                                   NeighbourTime now, LearnMode mode) {
  if (!resolvable6(ip) || !usable_mac(mac)) return LearnResult::kIgnored;
  auto it = entries6_.find(ip.bytes);
  if (it == entries6_.end()) {
    if (mode == LearnMode::kUpdateOnly) return LearnResult::kIgnored;
    if (size() >= options_.max_entries) {
      ++stats_.table_full;
      return LearnResult::kIgnored;
    }
    Entry6& e = entries6_[ip.bytes];
    e.state = NeighbourState::kReachable;
    e.mac = mac;
    e.deadline = now + options_.expiry;
    ++stats_.learned;
    notify6(ip, mac, false);
    return LearnResult::kCreated;
  }
  Entry6& e = it->second;
  if (e.state == NeighbourState::kResolving) {
    e.state = NeighbourState::kReachable;
    e.mac = mac;
    e.deadline = now + options_.expiry;
    std::vector<ResolveCallback6> waiters = std::move(e.waiters);
    e.waiters.clear();
    ++stats_.resolved;
    ++stats_.learned;
    notify6(ip, mac, false);
    const ResolveResult6 result{ip, true, mac};
    for (ResolveCallback6& cb : waiters) {
      if (cb) cb(result);
    }
    return LearnResult::kResolved;
  }
  e.deadline = now + options_.expiry;
  if (e.mac == mac) return LearnResult::kRefreshed;
  e.mac = mac;
  ++stats_.learned;
  notify6(ip, mac, false);
  return LearnResult::kChanged;
}

void NeighbourTable::on_timer6(NeighbourTime now) {
  // Collect first, act after: hooks and callbacks may re-enter the table.
  std::vector<config::Ipv6Address> to_send;
  std::vector<std::pair<config::Ipv6Address, config::MacAddress>> removed;
  std::vector<std::pair<ResolveCallback6, config::Ipv6Address>> failed;
  for (auto it = entries6_.begin(); it != entries6_.end();) {
    Entry6& e = it->second;
    const config::Ipv6Address ip{it->first};
    if (e.state == NeighbourState::kResolving && now >= e.deadline) {
      if (e.requests_sent < options_.retries) {
        ++e.requests_sent;
        e.deadline = now + options_.retry_interval;
        to_send.push_back(ip);
      } else {
        ++stats_.unreachable;
        for (ResolveCallback6& cb : e.waiters) failed.emplace_back(std::move(cb), ip);
        it = entries6_.erase(it);
        continue;
      }
    } else if (e.state == NeighbourState::kReachable && now >= e.deadline) {
      ++stats_.expired;
      removed.emplace_back(ip, e.mac);
      it = entries6_.erase(it);
      continue;
    }
    ++it;
  }
  for (const config::Ipv6Address& ip : to_send) {
    ++stats_.requests_sent;
    if (hooks_.send_request6) hooks_.send_request6(ip);
  }
  for (const auto& [ip, mac] : removed) notify6(ip, mac, true);
  for (auto& [cb, ip] : failed) {
    if (cb) cb(ResolveResult6{ip, false, {}});
  }
}

std::vector<NeighbourSnapshotEntry6> NeighbourTable::snapshot6(NeighbourTime now) const {
  std::vector<NeighbourSnapshotEntry6> out;
  out.reserve(entries6_.size());
  for (const auto& [key, e] : entries6_) {
    out.push_back(NeighbourSnapshotEntry6{
        config::Ipv6Address{key}, e.mac, e.state,
        std::chrono::duration_cast<std::chrono::milliseconds>(e.deadline - now).count(),
        e.requests_sent, e.waiters.size()});
  }
  return out;
}

void NeighbourTable::on_timer(NeighbourTime now) {
  // Collect first, act after: hooks and callbacks may re-enter the table.
  std::vector<config::Ipv4Address> to_send;
  std::vector<NeighbourChange> removed;
  std::vector<std::pair<ResolveCallback, config::Ipv4Address>> failed;
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& e = it->second;
    const config::Ipv4Address ip{it->first};
    if (e.state == NeighbourState::kResolving && now >= e.deadline) {
      if (e.requests_sent < options_.retries) {
        ++e.requests_sent;
        e.deadline = now + options_.retry_interval;
        to_send.push_back(ip);
      } else {
        // One full interval passed after the last request without an answer.
        ++stats_.unreachable;
        for (ResolveCallback& cb : e.waiters) failed.emplace_back(std::move(cb), ip);
        it = entries_.erase(it);
        continue;
      }
    } else if (e.state == NeighbourState::kReachable && now >= e.deadline) {
      ++stats_.expired;
      removed.push_back(NeighbourChange{ip, e.mac, true});
      it = entries_.erase(it);
      continue;
    }
    ++it;
  }
  for (const config::Ipv4Address& ip : to_send) {
    ++stats_.requests_sent;
    if (hooks_.send_request) hooks_.send_request(ip);
  }
  for (const NeighbourChange& c : removed) notify(c.ip, c.mac, true);
  for (auto& [cb, ip] : failed) {
    if (cb) cb(ResolveResult{ip, false, {}});
  }
  on_timer6(now);
}

NeighbourTime NeighbourTable::next_deadline() const {
  NeighbourTime next = NeighbourTime::max();
  for (const auto& [ip, e] : entries_) {
    if (e.state != NeighbourState::kStatic) next = std::min(next, e.deadline);
  }
  for (const auto& [ip, e] : entries6_) next = std::min(next, e.deadline);
  return next;
}

void NeighbourTable::publish_all() const {
  for (const auto& [ip, e] : entries_) {
    if (e.state != NeighbourState::kResolving) notify(config::Ipv4Address{ip}, e.mac, false);
  }
}

std::vector<NeighbourSnapshotEntry> NeighbourTable::snapshot(NeighbourTime now) const {
  std::vector<NeighbourSnapshotEntry> out;
  out.reserve(entries_.size());
  for (const auto& [ip, e] : entries_) {
    NeighbourSnapshotEntry s;
    s.ip = config::Ipv4Address{ip};
    s.mac = e.mac;
    s.state = e.state;
    s.expires_in_ms =
        e.state == NeighbourState::kStatic
            ? -1
            : std::chrono::duration_cast<std::chrono::milliseconds>(e.deadline - now).count();
    s.requests_sent = e.requests_sent;
    s.waiters = e.waiters.size();
    out.push_back(s);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.ip.value < b.ip.value; });
  return out;
}

}  // namespace rocedp::control
