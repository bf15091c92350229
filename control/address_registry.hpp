#pragma once
// The adapter's table of local (IP, ND port) bindings and of connection
// 4-tuples in use, with the NDK status codes each conflict maps to
// (NdkListen, NdkCreateSharedEndpoint, NdkConnect pages; DESIGN.md §3).
//
// * A binding is one local address owned by a listener, a shared endpoint or a
//   connector that connected without one. Addresses are wire::IpAddress (IPv4 as
//   IPv4-mapped). 0.0.0.0 and :: are the wildcard: it conflicts with every binding
//   of the same port, and they with it.
// * Port 0 asks for an ephemeral port from 49152-65535 (the IANA dynamic
//   range NDK names), STATUS_TOO_MANY_ADDRESSES when none is free for the IP.
// * A 4-tuple (local ip:port, remote ip:port) identifies one connection; a
//   shared endpoint's connections share the local half and must differ in the
//   remote half (STATUS_ADDRESS_ALREADY_EXISTS otherwise).
// * TimeWait (TCP's 2MSL): a released 4-tuple cannot be reused until
//   `timewait_ns` after its release, so late packets of the old connection
//   cannot reach the new one. (QPNs: the RC engine takes a freed number again
//   only after every other free one, rc_engine.hpp.) Time is passed
//   in (`now_ns`), never read: the control thread owns the clock and tests
//   drive it.
//
// Thread safety: every table is a oneTBB concurrent_hash_map, so any thread
// may call any method; a per-port accessor makes "check then bind" atomic.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <tuple>

#include <oneapi/tbb/concurrent_hash_map.h>

#include "dataplane/wire/ip_address.hpp"
#include "rocedp/status.hpp"

namespace rocedp::control {

inline constexpr std::uint16_t kEphemeralPortFirst = 49152;
inline constexpr std::uint16_t kEphemeralPortLast = 65535;
inline constexpr std::size_t kEphemeralPortCount =
    kEphemeralPortLast - kEphemeralPortFirst + 1;  // 16,384

/// Who owns a binding (for telemetry and for GetLocalAddress).
enum class BindingOwner : std::uint8_t { kListener, kSharedEndpoint, kConnector };

struct AddressRegistryConfig {
  std::size_t max_bindings = 65536;           ///< listeners + shared endpoints + connector ports
  std::uint64_t timewait_ns = 1'000'000'000;  ///< hold time of a released 4-tuple / QPN
};

using wire::IpAddress;

/// One connection's addresses.
struct FourTuple {
  IpAddress local_ip;
  std::uint16_t local_port = 0;
  IpAddress remote_ip;
  std::uint16_t remote_port = 0;
  friend bool operator==(const FourTuple&, const FourTuple&) = default;
  friend bool operator<(const FourTuple& a, const FourTuple& b) {
    return std::tie(a.local_ip, a.local_port, a.remote_ip, a.remote_port) <
           std::tie(b.local_ip, b.local_port, b.remote_ip, b.remote_port);
  }
};

class AddressRegistry {
 public:
  explicit AddressRegistry(AddressRegistryConfig cfg = {});

  /// Replaces the adapter's addresses that bind() accepts.
  void set_local_addresses(std::span<const IpAddress> ips);
  bool is_local_address(const IpAddress& ip) const;

  /// Binds (ip, port); port 0 picks an ephemeral port, written to *bound_port.
  /// STATUS_SUCCESS, STATUS_INVALID_ADDRESS (ip is neither 0 nor the adapter's),
  /// STATUS_SHARING_VIOLATION (taken), STATUS_TOO_MANY_ADDRESSES (port 0, none
  /// free), STATUS_INSUFFICIENT_RESOURCES (max_bindings reached).
  NTSTATUS bind(const IpAddress& ip, std::uint16_t port, BindingOwner owner,
                std::uint16_t* bound_port);
  /// Releases a binding made by bind(); false if there was none.
  bool unbind(const IpAddress& ip, std::uint16_t port);
  std::size_t binding_count() const { return bindings_.load(std::memory_order_relaxed); }

  /// Claims a 4-tuple for a connection. STATUS_SUCCESS, or
  /// STATUS_ADDRESS_ALREADY_EXISTS while it is in use or in TimeWait.
  NTSTATUS reserve_tuple(const FourTuple& t, std::uint64_t now_ns);
  /// Releases a 4-tuple into TimeWait; false if it was not reserved.
  bool release_tuple(const FourTuple& t, std::uint64_t now_ns);
  bool tuple_in_use(const FourTuple& t, std::uint64_t now_ns) const;

  /// Forgets TimeWait entries that have expired; returns how many.
  std::size_t sweep(std::uint64_t now_ns);

 private:
  // A port holds at most a handful of IPs (one per adapter address or the wildcard).
  struct PortEntry {
    static constexpr std::size_t kMaxIps = 8;
    IpAddress ips[kMaxIps] = {};
    BindingOwner owner[kMaxIps] = {};
    std::uint8_t n = 0;
  };
  struct TupleEntry {
    bool in_use = false;
    std::uint64_t expires_ns = 0;  // TimeWait end when !in_use
  };
  struct TupleHashCompare {
    static std::size_t hash(const FourTuple& t);
    static bool equal(const FourTuple& a, const FourTuple& b) { return a == b; }
  };
  using PortMap = tbb::concurrent_hash_map<std::uint16_t, PortEntry>;
  using TupleMap = tbb::concurrent_hash_map<FourTuple, TupleEntry, TupleHashCompare>;
  struct AddrHashCompare {
    static std::size_t hash(const IpAddress& a) { return a.hash(); }
    static bool equal(const IpAddress& a, const IpAddress& b) { return a == b; }
  };
  using AddrSet = tbb::concurrent_hash_map<IpAddress, bool, AddrHashCompare>;

  NTSTATUS try_bind_port(const IpAddress& ip, std::uint16_t port, BindingOwner owner);

  AddressRegistryConfig cfg_;
  AddrSet local_ips_;
  PortMap ports_;
  TupleMap tuples_;
  std::atomic<std::size_t> bindings_{0};
  std::atomic<std::uint32_t> ephemeral_cursor_{0};
};

}  // namespace rocedp::control
