// The control thread's neighbour table: resolution with retries, learning, expiry, statics.
// Time is injected, so every timing assertion is exact and none depends on the clock.

#include "control/neighbour_table.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace rocedp::control {
namespace {

using namespace std::chrono_literals;
using config::Ipv4Address;
using config::MacAddress;

constexpr Ipv4Address kLocal{0xC6120001};  // 198.18.0.1
constexpr Ipv4Address kPeer{0xC6120002};   // 198.18.0.2
constexpr Ipv4Address kPeer2{0xC6120003};
constexpr MacAddress kMacA{{0x02, 0, 0, 0, 0, 0x0A}};
constexpr MacAddress kMacB{{0x02, 0, 0, 0, 0, 0x0B}};

class NeighbourTableTest : public ::testing::Test {
 protected:
  NeighbourTime t0 = NeighbourTime{} + 1000s;
  std::vector<std::pair<Ipv4Address, NeighbourTime>>
      sent;  // ARP requests, with the time of sending
  std::vector<NeighbourChange> changes;
  NeighbourTime clock = t0;  // what send_request stamps

  NeighbourTableOptions options(uint32_t retries = 3) {
    NeighbourTableOptions o;
    o.local_ip = kLocal;
    o.prefix_len = 24;
    o.retry_interval = 200ms;
    o.retries = retries;
    o.expiry = 300s;
    o.max_entries = 8;
    return o;
  }
  NeighbourTableHooks hooks() {
    return NeighbourTableHooks{
        [this](Ipv4Address ip) { sent.emplace_back(ip, clock); },
        [this](const NeighbourChange& c) { changes.push_back(c); },
    };
  }
  void tick(NeighbourTable& t, NeighbourTime now) {
    clock = now;
    t.on_timer(now);
  }
};

// A callback that records every invocation, to prove "exactly once".
struct Recorder {
  std::vector<ResolveResult> calls;
  ResolveCallback cb() {
    return [this](const ResolveResult& r) { calls.push_back(r); };
  }
};

TEST_F(NeighbourTableTest, RetriesAtIntervalThenUnreachableAfterLastRetry) {
  NeighbourTable t(options(3), {}, hooks());
  Recorder r;
  EXPECT_EQ(t.resolve(kPeer, t0, r.cb()), NeighbourTable::ResolveStatus::kPending);
  ASSERT_EQ(sent.size(), 1u);  // first request goes out at once
  EXPECT_EQ(sent[0].first, kPeer);

  tick(t, t0 + 199ms);
  EXPECT_EQ(sent.size(), 1u) << "no retry before the interval";
  tick(t, t0 + 200ms);
  EXPECT_EQ(sent.size(), 2u);
  tick(t, t0 + 399ms);
  EXPECT_EQ(sent.size(), 2u);
  tick(t, t0 + 400ms);
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[1].second, t0 + 200ms);
  EXPECT_EQ(sent[2].second, t0 + 400ms);
  EXPECT_TRUE(r.calls.empty()) << "still waiting for an answer to the last request";

  tick(t, t0 + 599ms);
  EXPECT_TRUE(r.calls.empty());
  tick(t, t0 + 600ms);  // one interval after the third (last) request
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_FALSE(r.calls[0].reachable);
  EXPECT_EQ(r.calls[0].ip, kPeer);
  EXPECT_EQ(sent.size(), 3u) << "exactly `retries` requests";

  tick(t, t0 + 10s);
  EXPECT_EQ(r.calls.size(), 1u) << "callback fires once";
  EXPECT_EQ(sent.size(), 3u);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.stats().unreachable, 1u);
  EXPECT_EQ(t.stats().requests_sent, 3u);
  EXPECT_TRUE(changes.empty()) << "nothing usable ever existed";
}

TEST_F(NeighbourTableTest, LearningResolvesAllPendingCallbacksOnce) {
  NeighbourTable t(options(5), {}, hooks());
  Recorder a, b;
  EXPECT_EQ(t.resolve(kPeer, t0, a.cb()), NeighbourTable::ResolveStatus::kPending);
  EXPECT_EQ(t.resolve(kPeer, t0 + 50ms, b.cb()), NeighbourTable::ResolveStatus::kPending);
  EXPECT_EQ(sent.size(), 1u) << "a second resolve joins the pending one";

  EXPECT_EQ(t.learn(kPeer, kMacA, t0 + 100ms, LearnMode::kUpdateOnly), LearnResult::kResolved);
  ASSERT_EQ(a.calls.size(), 1u);
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_TRUE(a.calls[0].reachable);
  EXPECT_EQ(a.calls[0].mac, kMacA);
  EXPECT_EQ(b.calls[0].mac, kMacA);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].ip, kPeer);
  EXPECT_EQ(changes[0].mac, kMacA);
  EXPECT_FALSE(changes[0].removed);

  // No more requests, no second callback.
  tick(t, t0 + 5s);
  EXPECT_EQ(sent.size(), 1u);
  EXPECT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(b.calls.size(), 1u);

  // Known now: immediate.
  Recorder c;
  EXPECT_EQ(t.resolve(kPeer, t0 + 6s, c.cb()), NeighbourTable::ResolveStatus::kCompleted);
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].mac, kMacA);
  EXPECT_EQ(t.stats().resolved, 1u);
}

TEST_F(NeighbourTableTest, LearnedEntriesExpireAndAreRemovedFromCaches) {
  NeighbourTable t(options(), {}, hooks());
  EXPECT_EQ(t.learn(kPeer, kMacA, t0), LearnResult::kCreated);
  MacAddress mac;
  EXPECT_TRUE(t.lookup(kPeer, t0 + 299s, &mac));
  EXPECT_EQ(mac, kMacA);

  // A confirmation pushes expiry back.
  EXPECT_EQ(t.learn(kPeer, kMacA, t0 + 100s), LearnResult::kRefreshed);
  tick(t, t0 + 399s);
  EXPECT_TRUE(t.lookup(kPeer, t0 + 399s, &mac));
  EXPECT_EQ(changes.size(), 1u);

  tick(t, t0 + 400s);
  EXPECT_FALSE(t.lookup(kPeer, t0 + 400s, &mac));
  EXPECT_EQ(t.size(), 0u);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_TRUE(changes[1].removed);
  EXPECT_EQ(changes[1].ip, kPeer);
  EXPECT_EQ(t.stats().expired, 1u);

  // Resolving it again asks the wire again.
  Recorder r;
  EXPECT_EQ(t.resolve(kPeer, t0 + 401s, r.cb()), NeighbourTable::ResolveStatus::kPending);
  EXPECT_EQ(sent.size(), 1u);
}

TEST_F(NeighbourTableTest, ExpiredEntryIsNotServedEvenBeforeTheTimerRuns) {
  NeighbourTable t(options(), {}, hooks());
  t.learn(kPeer, kMacA, t0);
  MacAddress mac;
  EXPECT_FALSE(t.lookup(kPeer, t0 + 300s, &mac));
  Recorder r;
  EXPECT_EQ(t.resolve(kPeer, t0 + 300s, r.cb()), NeighbourTable::ResolveStatus::kPending);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(sent.size(), 1u);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_TRUE(changes[1].removed) << "the cores drop the stale MAC";
}

TEST_F(NeighbourTableTest, StaticEntriesNeverExpireAndWinOverArp) {
  const config::StaticNeighbour statics[] = {{kPeer, kMacA}};
  NeighbourTable t(options(), statics, hooks());
  EXPECT_TRUE(changes.empty()) << "nothing published before publish_all";
  t.publish_all();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].mac, kMacA);

  tick(t, t0 + 24h * 365);
  MacAddress mac;
  EXPECT_TRUE(t.lookup(kPeer, t0 + 24h * 365, &mac));
  EXPECT_EQ(mac, kMacA);
  EXPECT_EQ(t.learn(kPeer, kMacB, t0), LearnResult::kIgnored);
  EXPECT_TRUE(t.lookup(kPeer, t0, &mac));
  EXPECT_EQ(mac, kMacA);

  Recorder r;
  EXPECT_EQ(t.resolve(kPeer, t0 + 24h * 365, r.cb()), NeighbourTable::ResolveStatus::kCompleted);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].mac, kMacA);
  EXPECT_TRUE(sent.empty());
  EXPECT_EQ(changes.size(), 1u);
  auto snap = t.snapshot(t0);
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].state, NeighbourState::kStatic);
  EXPECT_EQ(snap[0].expires_in_ms, -1);
}

TEST_F(NeighbourTableTest, MacChangeIsPushedAndUpdateOnlyDoesNotCreate) {
  NeighbourTable t(options(), {}, hooks());
  EXPECT_EQ(t.learn(kPeer, kMacA, t0, LearnMode::kUpdateOnly), LearnResult::kIgnored);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.learn(kPeer, kMacA, t0, LearnMode::kCreate), LearnResult::kCreated);
  EXPECT_EQ(t.learn(kPeer, kMacB, t0 + 1s, LearnMode::kUpdateOnly), LearnResult::kChanged);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[1].mac, kMacB);
  MacAddress mac;
  EXPECT_TRUE(t.lookup(kPeer, t0 + 2s, &mac));
  EXPECT_EQ(mac, kMacB);
}

TEST_F(NeighbourTableTest, UnresolvableAddressesFailInlineWithoutTraffic) {
  NeighbourTable t(options(), {}, hooks());
  for (Ipv4Address ip :
       {Ipv4Address{0}, kLocal, Ipv4Address{0xC61200FF} /* subnet broadcast */,
        Ipv4Address{0xE0000001} /* multicast */, Ipv4Address{0x0A000001} /* off-link */}) {
    Recorder r;
    EXPECT_EQ(t.resolve(ip, t0, r.cb()), NeighbourTable::ResolveStatus::kCompleted);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_FALSE(r.calls[0].reachable);
    EXPECT_EQ(t.learn(ip, kMacA, t0), LearnResult::kIgnored);
  }
  EXPECT_TRUE(sent.empty());
  EXPECT_EQ(t.size(), 0u);
  // Group or zero MACs are never learned.
  EXPECT_EQ(t.learn(kPeer, MacAddress{{0x01, 0, 0x5E, 0, 0, 1}}, t0), LearnResult::kIgnored);
  EXPECT_EQ(t.learn(kPeer, MacAddress{}, t0), LearnResult::kIgnored);
}

// RFC 3021: a /31 has no broadcast address; the other one is the peer, also when it is odd.
TEST_F(NeighbourTableTest, OnAThirtyOneBitSubnetTheOtherAddressIsResolved) {
  for (const uint32_t ours : {0x0A000000u, 0x0A000001u}) {
    auto o = options();
    o.local_ip = Ipv4Address{ours};
    o.prefix_len = 31;
    NeighbourTable t(o, {}, hooks());
    const Ipv4Address peer{ours ^ 1};
    EXPECT_EQ(t.learn(peer, kMacA, t0), LearnResult::kCreated) << ours;
    MacAddress mac;
    EXPECT_TRUE(t.lookup(peer, t0, &mac));
  }
}

TEST_F(NeighbourTableTest, CapacityBoundsLearningAndResolution) {
  auto o = options();
  o.max_entries = 2;
  NeighbourTable t(o, {}, hooks());
  EXPECT_EQ(t.learn(kPeer, kMacA, t0), LearnResult::kCreated);
  EXPECT_EQ(t.learn(kPeer2, kMacB, t0), LearnResult::kCreated);
  EXPECT_EQ(t.learn(Ipv4Address{0xC6120004}, kMacB, t0), LearnResult::kIgnored);
  Recorder r;
  EXPECT_EQ(t.resolve(Ipv4Address{0xC6120005}, t0, r.cb()),
            NeighbourTable::ResolveStatus::kCompleted);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_FALSE(r.calls[0].reachable);
  EXPECT_EQ(t.stats().table_full, 2u);
  EXPECT_TRUE(sent.empty());
}

TEST_F(NeighbourTableTest, CallbackMayResolveAgainFromInsideTheTimer) {
  NeighbourTable t(options(1), {}, hooks());
  int failures = 0;
  std::function<void(const ResolveResult&)> again = [&](const ResolveResult& r) {
    ++failures;
    if (failures < 2) t.resolve(r.ip, clock, again);
  };
  t.resolve(kPeer, t0, again);
  tick(t, t0 + 200ms);  // unreachable -> callback starts a new resolution
  EXPECT_EQ(failures, 1);
  EXPECT_EQ(sent.size(), 2u);
  EXPECT_EQ(t.size(), 1u);
  tick(t, t0 + 400ms);
  EXPECT_EQ(failures, 2);
  EXPECT_EQ(t.size(), 0u);
}

TEST_F(NeighbourTableTest, SnapshotAndDeadline) {
  NeighbourTable t(options(), {}, hooks());
  EXPECT_EQ(t.next_deadline(), NeighbourTime::max());
  t.learn(kPeer2, kMacB, t0);
  Recorder r;
  t.resolve(kPeer, t0, r.cb());
  EXPECT_EQ(t.next_deadline(), t0 + 200ms);
  auto snap = t.snapshot(t0 + 50ms);
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].ip, kPeer);  // ordered by address
  EXPECT_EQ(snap[0].state, NeighbourState::kResolving);
  EXPECT_EQ(snap[0].expires_in_ms, 150);
  EXPECT_EQ(snap[0].requests_sent, 1u);
  EXPECT_EQ(snap[0].waiters, 1u);
  EXPECT_EQ(snap[1].state, NeighbourState::kReachable);
  EXPECT_EQ(snap[1].mac, kMacB);
  EXPECT_EQ(snap[1].expires_in_ms, 300000 - 50);
  EXPECT_EQ(neighbour_state_name(snap[1].state), "reachable");
}

TEST(NeighbourTableOptionsTest, FromConfig) {
  config::ControlConfig c;
  c.arp_retry_ms = 250;
  c.arp_retries = 7;
  c.neighbour_expiry_s = 60;
  config::PortConfig p;
  p.address = kLocal;
  p.prefix_len = 16;
  auto o = NeighbourTableOptions::from_config(c, p);
  EXPECT_EQ(o.retry_interval, 250ms);
  EXPECT_EQ(o.retries, 7u);
  EXPECT_EQ(o.expiry, 60s);
  EXPECT_EQ(o.local_ip, kLocal);
  EXPECT_EQ(o.prefix_len, 16);
  EXPECT_FALSE(o.local_ip6.has_value());
  p.address6 = config::Ipv6Address{{0xfd, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20}};
  EXPECT_EQ(NeighbourTableOptions::from_config(c, p).local_ip6, p.address6);
}

// ---- IPv6 (RFC 4861) ----

using config::Ipv6Address;
const Ipv6Address kLocal6{{0xfd, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20}};
const Ipv6Address kPeer6{{0xfd, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}};
const Ipv6Address kPeer6b{{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}};

class NeighbourTable6Test : public NeighbourTableTest {
 protected:
  std::vector<std::pair<Ipv6Address, NeighbourTime>> sent6;  // solicitations
  struct Change6 {
    Ipv6Address ip;
    MacAddress mac;
    bool removed;
  };
  std::vector<Change6> changes6;

  NeighbourTableOptions options6(uint32_t retries = 3) {
    NeighbourTableOptions o = options(retries);
    o.local_ip6 = kLocal6;
    return o;
  }
  NeighbourTableHooks hooks6() {
    NeighbourTableHooks h = hooks();
    h.send_request6 = [this](const Ipv6Address& ip) { sent6.emplace_back(ip, clock); };
    h.on_change6 = [this](const Ipv6Address& ip, const MacAddress& mac, bool removed) {
      changes6.push_back({ip, mac, removed});
    };
    return h;
  }
};

struct Recorder6 {
  std::vector<ResolveResult6> calls;
  ResolveCallback6 cb() {
    return [this](const ResolveResult6& r) { calls.push_back(r); };
  }
};

TEST_F(NeighbourTable6Test, SolicitsAtTheArpIntervalThenUnreachable) {
  NeighbourTable t(options6(3), {}, hooks6());
  Recorder6 r;
  EXPECT_EQ(t.resolve6(kPeer6, t0, r.cb()), NeighbourTable::ResolveStatus::kPending);
  ASSERT_EQ(sent6.size(), 1u) << "the first solicitation goes out at once";
  EXPECT_EQ(sent6[0].first, kPeer6);
  EXPECT_TRUE(sent.empty()) << "no ARP for an IPv6 address";
  tick(t, t0 + 199ms);
  EXPECT_EQ(sent6.size(), 1u);
  tick(t, t0 + 200ms);
  tick(t, t0 + 400ms);
  ASSERT_EQ(sent6.size(), 3u);
  EXPECT_EQ(sent6[2].second, t0 + 400ms);
  EXPECT_EQ(t.next_deadline(), t0 + 600ms);
  tick(t, t0 + 599ms);
  EXPECT_TRUE(r.calls.empty());
  tick(t, t0 + 600ms);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_FALSE(r.calls[0].reachable);
  EXPECT_EQ(r.calls[0].ip, kPeer6);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.stats().requests_sent, 3u);
  EXPECT_EQ(t.stats().unreachable, 1u);
}

TEST_F(NeighbourTable6Test, AdvertisementResolvesEveryWaiterOnceAndIsThenCached) {
  NeighbourTable t(options6(), {}, hooks6());
  Recorder6 r;
  t.resolve6(kPeer6, t0, r.cb());
  t.resolve6(kPeer6, t0 + 10ms, r.cb());
  EXPECT_EQ(sent6.size(), 1u) << "one resolution for both callers";
  // An NA completes a resolution even in kUpdateOnly mode (RFC 4861 7.2.5), and without the
  // Override flag.
  EXPECT_EQ(t.learn6(kPeer6, kMacA, t0 + 50ms, LearnMode::kUpdateNoOverride),
            LearnResult::kResolved);
  ASSERT_EQ(r.calls.size(), 2u);
  for (const auto& c : r.calls) {
    EXPECT_TRUE(c.reachable);
    EXPECT_EQ(c.mac, kMacA);
  }
  ASSERT_EQ(changes6.size(), 1u);
  EXPECT_FALSE(changes6[0].removed);
  EXPECT_TRUE(changes.empty()) << "IPv6 changes never reach the IPv4 cores' caches";
  MacAddress mac;
  ASSERT_TRUE(t.lookup6(kPeer6, t0 + 1s, &mac));
  EXPECT_EQ(mac, kMacA);
  EXPECT_EQ(t.resolve6(kPeer6, t0 + 1s, r.cb()), NeighbourTable::ResolveStatus::kCompleted);
  EXPECT_EQ(r.calls.size(), 3u);
  EXPECT_EQ(sent6.size(), 1u);
  tick(t, t0 + 2s);
  EXPECT_EQ(sent6.size(), 1u) << "a reachable entry is not solicited again";
}

TEST_F(NeighbourTable6Test, SolicitorsCreateAdvertisementsOnlyUpdateAndEntriesExpire) {
  NeighbourTable t(options6(), {}, hooks6());
  EXPECT_EQ(t.learn6(kPeer6, kMacA, t0, LearnMode::kUpdateOnly), LearnResult::kIgnored)
      << "an unsolicited NA creates nothing (7.2.5)";
  EXPECT_EQ(t.learn6(kPeer6, kMacA, t0, LearnMode::kCreate), LearnResult::kCreated)
      << "the solicitor of an NS we answered is created (7.2.3)";
  EXPECT_EQ(t.learn6(kPeer6, kMacA, t0 + 100s, LearnMode::kUpdateOnly), LearnResult::kRefreshed);
  // RFC 4861 7.2.5: an NA without the Override flag refreshes the same address but does not
  // replace it with another.
  EXPECT_EQ(t.learn6(kPeer6, kMacB, t0 + 150s, LearnMode::kUpdateNoOverride),
            LearnResult::kIgnored);
  EXPECT_EQ(t.learn6(kPeer6, kMacA, t0 + 150s, LearnMode::kUpdateNoOverride),
            LearnResult::kRefreshed);
  EXPECT_EQ(changes6.size(), 1u);
  EXPECT_EQ(t.learn6(kPeer6, kMacB, t0 + 200s, LearnMode::kUpdateOnly), LearnResult::kChanged);
  ASSERT_EQ(changes6.size(), 2u);
  EXPECT_EQ(changes6[1].mac, kMacB);
  EXPECT_EQ(t.next_deadline(), t0 + 500s);
  MacAddress mac;
  EXPECT_FALSE(t.lookup6(kPeer6, t0 + 500s, &mac)) << "expired, even before the timer ran";
  tick(t, t0 + 499s);
  EXPECT_EQ(t.size(), 1u);
  tick(t, t0 + 500s);
  EXPECT_EQ(t.size(), 0u);
  ASSERT_EQ(changes6.size(), 3u);
  EXPECT_TRUE(changes6[2].removed);
  EXPECT_EQ(t.stats().expired, 1u);
  // After expiry a resolution starts afresh with a solicitation.
  Recorder6 r;
  EXPECT_EQ(t.resolve6(kPeer6, t0 + 501s, r.cb()), NeighbourTable::ResolveStatus::kPending);
  EXPECT_EQ(sent6.size(), 1u);
}

// A static IPv6 neighbour (an `ip` with colons in ports[].neighbours): resolved at once without a
// solicitation, never expired, never overwritten by an advertisement, listed as static; the
// table's next deadline ignores it. A port without an IPv6 address keeps none.
TEST_F(NeighbourTable6Test, StaticEntriesNeverExpireAndWinOverAdvertisements) {
  config::StaticNeighbour v6{{}, kMacA, kPeer6};
  const config::StaticNeighbour statics[] = {{kPeer, kMacB}, v6};
  NeighbourTable t(options6(), statics, hooks6());
  tick(t, t0 + 24h * 365);
  Recorder6 r;
  EXPECT_EQ(t.resolve6(kPeer6, t0 + 24h * 365, r.cb()), NeighbourTable::ResolveStatus::kCompleted);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_TRUE(r.calls[0].reachable);
  EXPECT_EQ(r.calls[0].mac, kMacA);
  EXPECT_EQ(t.learn6(kPeer6, kMacB, t0, LearnMode::kUpdateOnly), LearnResult::kIgnored);
  MacAddress mac;
  EXPECT_TRUE(t.lookup6(kPeer6, t0 + 24h * 365, &mac));
  EXPECT_EQ(mac, kMacA);
  EXPECT_TRUE(t.lookup(kPeer, t0, &mac));
  EXPECT_EQ(mac, kMacB) << "the IPv4 static entry beside it";
  EXPECT_TRUE(sent6.empty());
  EXPECT_TRUE(changes6.empty());
  const auto snap = t.snapshot6(t0);
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].state, NeighbourState::kStatic);
  EXPECT_EQ(snap[0].expires_in_ms, -1);
  EXPECT_EQ(t.snapshot(t0).size(), 1u);
  EXPECT_EQ(t.next_deadline(), NeighbourTime::max()) << "statics never need the timer";

  NeighbourTable v4only(options(), statics, hooks6());
  EXPECT_FALSE(v4only.lookup6(kPeer6, t0, &mac));
  EXPECT_TRUE(v4only.snapshot6(t0).empty());
}

TEST_F(NeighbourTable6Test, UnresolvableAddressesAndPortsWithoutIpv6FailInline) {
  NeighbourTable t(options6(), {}, hooks6());
  Recorder6 r;
  const Ipv6Address loopback{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};
  const Ipv6Address group{{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};
  for (const Ipv6Address& ip : {Ipv6Address{}, loopback, group, kLocal6}) {
    EXPECT_EQ(t.resolve6(ip, t0, r.cb()), NeighbourTable::ResolveStatus::kCompleted);
    EXPECT_EQ(t.learn6(ip, kMacA, t0, LearnMode::kCreate), LearnResult::kIgnored);
  }
  ASSERT_EQ(r.calls.size(), 4u);
  for (const auto& c : r.calls) EXPECT_FALSE(c.reachable);
  EXPECT_EQ(t.learn6(kPeer6, MacAddress{}, t0, LearnMode::kCreate), LearnResult::kIgnored);
  EXPECT_EQ(t.learn6(kPeer6, MacAddress{{0x33, 0x33, 0, 0, 0, 1}}, t0, LearnMode::kCreate),
            LearnResult::kIgnored)
      << "a group MAC is no neighbour";
  EXPECT_TRUE(sent6.empty());

  NeighbourTable v4only(options(), {}, hooks6());
  EXPECT_EQ(v4only.resolve6(kPeer6, t0, r.cb()), NeighbourTable::ResolveStatus::kCompleted);
  EXPECT_FALSE(r.calls.back().reachable);
  EXPECT_EQ(v4only.learn6(kPeer6, kMacA, t0, LearnMode::kCreate), LearnResult::kIgnored);
  EXPECT_TRUE(sent6.empty());
}

TEST_F(NeighbourTable6Test, CapacityIsSharedWithIpv4AndSnapshotListsByAddress) {
  NeighbourTableOptions o = options6();
  o.max_entries = 2;
  NeighbourTable t(o, {}, hooks6());
  EXPECT_EQ(t.learn(kPeer, kMacA, t0), LearnResult::kCreated);
  EXPECT_EQ(t.learn6(kPeer6b, kMacB, t0, LearnMode::kCreate), LearnResult::kCreated);
  EXPECT_EQ(t.learn6(kPeer6, kMacA, t0, LearnMode::kCreate), LearnResult::kIgnored);
  EXPECT_EQ(t.stats().table_full, 1u);
  EXPECT_EQ(t.size(), 2u);
  Recorder6 r;
  EXPECT_EQ(t.resolve6(kPeer6, t0, r.cb()), NeighbourTable::ResolveStatus::kCompleted);
  EXPECT_FALSE(r.calls[0].reachable);

  NeighbourTable u(options6(), {}, hooks6());
  u.learn6(kPeer6b, kMacB, t0, LearnMode::kCreate);
  u.resolve6(kPeer6, t0, r.cb());
  const auto rows = u.snapshot6(t0 + 100ms);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].ip, kPeer6) << "fd52::10 sorts before fe80::10";
  EXPECT_EQ(rows[0].state, NeighbourState::kResolving);
  EXPECT_EQ(rows[0].expires_in_ms, 100);
  EXPECT_EQ(rows[0].requests_sent, 1u);
  EXPECT_EQ(rows[0].waiters, 1u);
  EXPECT_EQ(rows[1].ip, kPeer6b);
  EXPECT_EQ(rows[1].mac, kMacB);
  EXPECT_EQ(rows[1].state, NeighbourState::kReachable);
  EXPECT_EQ(rows[1].expires_in_ms, 299'900);
  EXPECT_TRUE(u.snapshot(t0).empty()) << "IPv4 rows stay IPv4";
}

}  // namespace
}  // namespace rocedp::control
