// Address registry (control/address_registry.*): every status NdkListen /
// NdkCreateSharedEndpoint / NdkConnect derive from it, a real exhaustion of
// all 16,384 ephemeral ports, 4-tuples for shared endpoints, TimeWait with
// injected time, and concurrent binders.
#include "control/address_registry.hpp"

#include <gtest/gtest.h>

#include <array>
#include <set>
#include <thread>
#include <vector>

namespace rocedp::control {
namespace {

constexpr std::uint32_t kIpA = 0x0A000001;  // 10.0.0.1
constexpr std::uint32_t kIpB = 0x0A000002;
constexpr std::uint32_t kForeign = 0x0A0000FE;
constexpr std::uint64_t kSec = 1'000'000'000;

// A registry on an adapter with addresses A and B.
struct Registry : AddressRegistry {
  explicit Registry(AddressRegistryConfig cfg = {}) : AddressRegistry(cfg) {
    const std::array<IpAddress, 2> ips = {kIpA, kIpB};
    set_local_addresses(ips);
  }
};

TEST(AddressRegistry, BindsAFixedPortOnceThenSharingViolation) {
  Registry r;
  std::uint16_t port = 0;
  EXPECT_EQ(r.bind(kIpA, 445, BindingOwner::kListener, &port), STATUS_SUCCESS);
  EXPECT_EQ(port, 445);
  EXPECT_EQ(r.bind(kIpA, 445, BindingOwner::kSharedEndpoint, &port), STATUS_SHARING_VIOLATION);
  EXPECT_EQ(r.bind(kIpB, 445, BindingOwner::kListener, &port), STATUS_SUCCESS)
      << "another local IP";
  EXPECT_EQ(r.binding_count(), 2u);
  EXPECT_TRUE(r.unbind(kIpA, 445));
  EXPECT_FALSE(r.unbind(kIpA, 445));
  EXPECT_EQ(r.bind(kIpA, 445, BindingOwner::kListener, &port), STATUS_SUCCESS)
      << "free again after unbind";
}

TEST(AddressRegistry, WildcardConflictsWithEverySpecificBindingOfItsPort) {
  Registry r;
  std::uint16_t port = 0;
  ASSERT_EQ(r.bind(kIpA, 5000, BindingOwner::kListener, &port), STATUS_SUCCESS);
  EXPECT_EQ(r.bind(0, 5000, BindingOwner::kListener, &port), STATUS_SHARING_VIOLATION);
  ASSERT_EQ(r.bind(0, 5001, BindingOwner::kListener, &port), STATUS_SUCCESS);
  EXPECT_EQ(r.bind(kIpB, 5001, BindingOwner::kListener, &port), STATUS_SHARING_VIOLATION);
  EXPECT_TRUE(r.unbind(0, 5001));
  EXPECT_EQ(r.bind(kIpB, 5001, BindingOwner::kListener, &port), STATUS_SUCCESS);
}

TEST(AddressRegistry, AnAddressThatIsNotTheAdaptersIsInvalid) {
  Registry r;
  std::uint16_t port = 0;
  EXPECT_EQ(r.bind(kForeign, 445, BindingOwner::kListener, &port), STATUS_INVALID_ADDRESS);
  EXPECT_EQ(r.bind(kForeign, 0, BindingOwner::kSharedEndpoint, &port), STATUS_INVALID_ADDRESS);
  EXPECT_EQ(r.binding_count(), 0u);
  const std::array<IpAddress, 1> now_ours = {kForeign};
  r.set_local_addresses(now_ours);
  EXPECT_EQ(r.bind(kForeign, 445, BindingOwner::kListener, &port), STATUS_SUCCESS);
  EXPECT_EQ(r.bind(kIpA, 446, BindingOwner::kListener, &port), STATUS_INVALID_ADDRESS)
      << "address removed";
}

TEST(AddressRegistry, ObjectLimitGivesInsufficientResources) {
  Registry r(AddressRegistryConfig{.max_bindings = 3});
  std::uint16_t port = 0;
  EXPECT_EQ(r.bind(kIpA, 1, BindingOwner::kListener, &port), STATUS_SUCCESS);
  EXPECT_EQ(r.bind(kIpA, 2, BindingOwner::kListener, &port), STATUS_SUCCESS);
  EXPECT_EQ(r.bind(kIpA, 0, BindingOwner::kSharedEndpoint, &port), STATUS_SUCCESS);
  EXPECT_EQ(r.bind(kIpA, 4, BindingOwner::kListener, &port), STATUS_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(r.bind(kIpA, 0, BindingOwner::kSharedEndpoint, &port), STATUS_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(r.binding_count(), 3u);
  EXPECT_TRUE(r.unbind(kIpA, 2));
  EXPECT_EQ(r.bind(kIpA, 4, BindingOwner::kListener, &port), STATUS_SUCCESS);
}

TEST(AddressRegistry, ExhaustsAll16384EphemeralPortsThenTooManyAddresses) {
  Registry r;
  std::set<std::uint16_t> got;
  for (std::size_t i = 0; i < kEphemeralPortCount; ++i) {
    std::uint16_t port = 0;
    ASSERT_EQ(r.bind(kIpA, 0, BindingOwner::kSharedEndpoint, &port), STATUS_SUCCESS) << i;
    ASSERT_GE(port, kEphemeralPortFirst);
    got.insert(port);
  }
  EXPECT_EQ(got.size(), 16384u) << "every port once";
  EXPECT_EQ(*got.begin(), 49152);
  EXPECT_EQ(*got.rbegin(), 65535);
  std::uint16_t port = 1;
  EXPECT_EQ(r.bind(kIpA, 0, BindingOwner::kSharedEndpoint, &port), STATUS_TOO_MANY_ADDRESSES);
  EXPECT_EQ(port, 1) << "untouched on failure";
  EXPECT_EQ(r.bind(0, 0, BindingOwner::kListener, &port), STATUS_TOO_MANY_ADDRESSES);
  // A fixed port below the range is still fine, and the other IP has its own ports.
  EXPECT_EQ(r.bind(kIpA, 445, BindingOwner::kListener, &port), STATUS_SUCCESS);
  EXPECT_EQ(r.bind(kIpB, 0, BindingOwner::kSharedEndpoint, &port), STATUS_SUCCESS);
  // One port freed: the next port-0 bind gets exactly it.
  ASSERT_TRUE(r.unbind(kIpA, 50000));
  EXPECT_EQ(r.bind(kIpA, 0, BindingOwner::kSharedEndpoint, &port), STATUS_SUCCESS);
  EXPECT_EQ(port, 50000);
}

TEST(AddressRegistry, SharedEndpointTuplesDifferInTheRemoteHalf) {
  Registry r;
  const FourTuple t1{kIpA, 50000, 0x0B000001, 445};
  const FourTuple t2{kIpA, 50000, 0x0B000002, 445};
  const FourTuple t3{kIpA, 50000, 0x0B000001, 446};
  EXPECT_EQ(r.reserve_tuple(t1, 0), STATUS_SUCCESS);
  EXPECT_EQ(r.reserve_tuple(t2, 0), STATUS_SUCCESS);
  EXPECT_EQ(r.reserve_tuple(t3, 0), STATUS_SUCCESS);
  EXPECT_EQ(r.reserve_tuple(t1, 0), STATUS_ADDRESS_ALREADY_EXISTS);
  EXPECT_TRUE(r.tuple_in_use(t1, 0));
  EXPECT_FALSE(r.tuple_in_use({kIpB, 50000, 0x0B000001, 445}, 0));
}

TEST(AddressRegistry, ReleasedTupleAndQpnWaitOutTimeWait) {
  Registry r(AddressRegistryConfig{.timewait_ns = 2 * kSec});
  const FourTuple t{kIpA, 50000, 0x0B000001, 445};
  ASSERT_EQ(r.reserve_tuple(t, 10 * kSec), STATUS_SUCCESS);
  EXPECT_FALSE(r.release_tuple({kIpA, 50001, 0x0B000001, 445}, 10 * kSec)) << "never reserved";
  EXPECT_TRUE(r.release_tuple(t, 10 * kSec));
  EXPECT_FALSE(r.release_tuple(t, 10 * kSec)) << "already released";
  EXPECT_EQ(r.reserve_tuple(t, 10 * kSec), STATUS_ADDRESS_ALREADY_EXISTS);
  EXPECT_EQ(r.reserve_tuple(t, 12 * kSec - 1), STATUS_ADDRESS_ALREADY_EXISTS);
  EXPECT_TRUE(r.tuple_in_use(t, 12 * kSec - 1));
  EXPECT_FALSE(r.tuple_in_use(t, 12 * kSec));
  EXPECT_EQ(r.reserve_tuple(t, 12 * kSec), STATUS_SUCCESS) << "TimeWait over";

  // sweep() forgets only what has expired.
  ASSERT_TRUE(r.release_tuple(t, 20 * kSec));
  EXPECT_EQ(r.sweep(21 * kSec), 0u);
  EXPECT_TRUE(r.tuple_in_use(t, 21 * kSec));
  EXPECT_EQ(r.sweep(22 * kSec), 1u);
  EXPECT_EQ(r.sweep(22 * kSec), 0u);
}

TEST(AddressRegistry, ZeroTimeWaitFreesAtOnce) {
  Registry r(AddressRegistryConfig{.timewait_ns = 0});
  const FourTuple t{kIpA, 1, kIpB, 2};
  ASSERT_EQ(r.reserve_tuple(t, 5), STATUS_SUCCESS);
  ASSERT_TRUE(r.release_tuple(t, 5));
  EXPECT_EQ(r.reserve_tuple(t, 5), STATUS_SUCCESS);
}

TEST(AddressRegistry, ConcurrentBindersNeverShareAPortOrPassTheLimit) {
  Registry r(AddressRegistryConfig{.max_bindings = 3000});
  constexpr int kThreads = 4;
  std::vector<std::vector<std::uint16_t>> ports(kThreads);
  std::vector<int> refused(kThreads, 0);
  std::vector<std::thread> th;
  th.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    th.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) {
        std::uint16_t p = 0;
        const NTSTATUS s = r.bind(kIpA, 0, BindingOwner::kConnector, &p);
        if (s == STATUS_SUCCESS) {
          ports[t].push_back(p);
        } else {
          EXPECT_EQ(s, STATUS_INSUFFICIENT_RESOURCES);
          ++refused[t];
        }
      }
    });
  }
  for (auto& x : th) x.join();
  std::set<std::uint16_t> all;
  std::size_t n = 0;
  int nrefused = 0;
  for (int t = 0; t < kThreads; ++t) {
    all.insert(ports[t].begin(), ports[t].end());
    n += ports[t].size();
    nrefused += refused[t];
  }
  EXPECT_EQ(n, 3000u);
  EXPECT_EQ(all.size(), n) << "no port handed out twice";
  EXPECT_EQ(nrefused, 1000);
  EXPECT_EQ(r.binding_count(), 3000u);
}

}  // namespace
}  // namespace rocedp::control
