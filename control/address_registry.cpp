#include "control/address_registry.hpp"

#include <vector>

namespace rocedp::control {

AddressRegistry::AddressRegistry(AddressRegistryConfig cfg) : cfg_(cfg) {}

std::size_t AddressRegistry::TupleHashCompare::hash(const FourTuple& t) {
  // splitmix64 finaliser over the addresses and ports: shared endpoints put many tuples on
  // one local half, so the remote half must spread well.
  std::uint64_t x = (std::uint64_t{t.local_ip.hash()} * 0x9E3779B97F4A7C15ull) ^
                    t.remote_ip.hash() ^ (std::uint64_t{t.local_port} << 48) ^
                    (std::uint64_t{t.remote_port} << 16);
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<std::size_t>(x);
}

void AddressRegistry::set_local_addresses(std::span<const IpAddress> ips) {
  local_ips_.clear();
  for (const IpAddress& ip : ips) local_ips_.insert({ip, true});
}

bool AddressRegistry::is_local_address(const IpAddress& ip) const {
  AddrSet::const_accessor a;
  return local_ips_.find(a, ip);
}

NTSTATUS AddressRegistry::try_bind_port(const IpAddress& ip, std::uint16_t port,
                                        BindingOwner owner) {
  PortMap::accessor a;  // holds the port's write lock: check and insert are one step
  ports_.insert(a, port);
  PortEntry& e = a->second;
  for (std::uint8_t i = 0; i < e.n; ++i) {
    // Same IP, or either side is the wildcard: the address is taken.
    if (e.ips[i] == ip || e.ips[i].is_any() || ip.is_any()) return STATUS_SHARING_VIOLATION;
  }
  if (e.n == PortEntry::kMaxIps) return STATUS_SHARING_VIOLATION;
  // The object limit is checked under the port lock so two racing binds
  // cannot both take the last slot.
  std::size_t cur = bindings_.load(std::memory_order_relaxed);
  do {
    if (cur >= cfg_.max_bindings) {
      if (e.n == 0) ports_.erase(a);
      return STATUS_INSUFFICIENT_RESOURCES;
    }
  } while (!bindings_.compare_exchange_weak(cur, cur + 1, std::memory_order_relaxed));
  e.ips[e.n] = ip;
  e.owner[e.n] = owner;
  ++e.n;
  return STATUS_SUCCESS;
}

NTSTATUS AddressRegistry::bind(const IpAddress& ip, std::uint16_t port, BindingOwner owner,
                               std::uint16_t* bound_port) {
  if (!ip.is_any() && !is_local_address(ip)) return STATUS_INVALID_ADDRESS;
  if (bindings_.load(std::memory_order_relaxed) >= cfg_.max_bindings)
    return STATUS_INSUFFICIENT_RESOURCES;
  if (port != 0) {
    const NTSTATUS s = try_bind_port(ip, port, owner);
    if (s == STATUS_SUCCESS && bound_port) *bound_port = port;
    return s;
  }
  // Ephemeral: walk the 16,384 ports once from a rotating cursor, so
  // successive allocations find a free port at once and a released port is
  // not handed out again right away.
  const std::uint32_t start = ephemeral_cursor_.fetch_add(1, std::memory_order_relaxed);
  for (std::size_t i = 0; i < kEphemeralPortCount; ++i) {
    const auto p =
        static_cast<std::uint16_t>(kEphemeralPortFirst + (start + i) % kEphemeralPortCount);
    const NTSTATUS s = try_bind_port(ip, p, owner);
    if (s == STATUS_SUCCESS) {
      ephemeral_cursor_.store(static_cast<std::uint32_t>((start + i + 1) % kEphemeralPortCount),
                              std::memory_order_relaxed);
      if (bound_port) *bound_port = p;
      return s;
    }
    if (s == STATUS_INSUFFICIENT_RESOURCES) return s;
  }
  return STATUS_TOO_MANY_ADDRESSES;
}

bool AddressRegistry::unbind(const IpAddress& ip, std::uint16_t port) {
  PortMap::accessor a;
  if (!ports_.find(a, port)) return false;
  PortEntry& e = a->second;
  for (std::uint8_t i = 0; i < e.n; ++i) {
    if (e.ips[i] != ip) continue;
    e.ips[i] = e.ips[e.n - 1];
    e.owner[i] = e.owner[e.n - 1];
    --e.n;
    bindings_.fetch_sub(1, std::memory_order_relaxed);
    if (e.n == 0) ports_.erase(a);
    return true;
  }
  return false;
}

NTSTATUS AddressRegistry::reserve_tuple(const FourTuple& t, std::uint64_t now_ns) {
  TupleMap::accessor a;
  if (!tuples_.insert(a, t)) {
    TupleEntry& e = a->second;
    if (e.in_use || now_ns < e.expires_ns) return STATUS_ADDRESS_ALREADY_EXISTS;
  }
  a->second = {true, 0};
  return STATUS_SUCCESS;
}

bool AddressRegistry::release_tuple(const FourTuple& t, std::uint64_t now_ns) {
  TupleMap::accessor a;
  if (!tuples_.find(a, t) || !a->second.in_use) return false;
  if (cfg_.timewait_ns == 0) {
    tuples_.erase(a);
  } else {
    a->second = {false, now_ns + cfg_.timewait_ns};
  }
  return true;
}

bool AddressRegistry::tuple_in_use(const FourTuple& t, std::uint64_t now_ns) const {
  TupleMap::const_accessor a;
  if (!tuples_.find(a, t)) return false;
  return a->second.in_use || now_ns < a->second.expires_ns;
}

std::size_t AddressRegistry::sweep(std::uint64_t now_ns) {
  // concurrent_hash_map iteration is not safe against concurrent erase, so
  // collect first, then erase each key under its own accessor (re-checked).
  std::vector<FourTuple> tuples;
  for (const auto& [k, v] : tuples_)
    if (!v.in_use && now_ns >= v.expires_ns) tuples.push_back(k);
  std::size_t n = 0;
  for (const auto& k : tuples) {
    TupleMap::accessor a;
    if (tuples_.find(a, k) && !a->second.in_use && now_ns >= a->second.expires_ns) {
      tuples_.erase(a);
      ++n;
    }
  }
  return n;
}

}  // namespace rocedp::control
