// The control thread with one real polling lcore (lcore 1) over a ring-pair wire: port start
// through the channel, gratuitous ARP, stats snapshots arriving through the rings, ARP learning
// pushed to the core's cache, port stop and the shutdown sequence; its idle nap: ended by the
// core's hand-offs, cut at the stats round, long when idle, and its eventfd failing.

#define ROCEDP_TEST_LCORES \
  { 0, 1 }
#include "tests/dataplane/runtime_env.hpp"

#include "control/control_thread.hpp"

#include <gtest/gtest.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "dataplane/ndp.hpp"
#include "pmd/rx_dispatch.hpp"

namespace rocedp::control {
namespace {

using test::kOurIp;
using test::kOurMac;
using test::kPeerIp;
using test::kPeerMac;
using Bytes = std::vector<uint8_t>;

constexpr unsigned kCoreLcore = 1;
// Waiting loops are bounded by iterations, never asserted on time: the machine is shared.
constexpr int kMaxWaits = 5000;

const config::Ipv4Address kStaticIp{0xC6120009};  // 198.18.0.9
const config::MacAddress kStaticMac{{0x02, 0x00, 0x00, 0x00, 0x00, 0x09}};
const config::Ipv6Address kOurIp6{{0xfd, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20}};
const config::Ipv6Address kPeerIp6{{0xfd, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}};

class ControlThreadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int serial = 0;
    cfg_.eal.lcores = {0, kCoreLcore};
    cfg_.dataplane.lcores = {kCoreLcore};
    cfg_.telemetry.stats_interval_ms = stats_interval_ms_;
    auto us_cfg = test::port_config("us", kOurMac, kOurIp);
    us_cfg.neighbours.push_back({kStaticIp, kStaticMac});
    us_cfg.address6 = kOurIp6;
    cfg_.ports.push_back(us_cfg);
    std::string error;
    ASSERT_TRUE(pmd::open_ring_pair("ct" + std::to_string(serial++),
                                    test::port_config("peer", kPeerMac, kPeerIp), us_cfg, 1,
                                    test::pool(), test::small_dataplane(), &pair_, &error))
        << error;
    ASSERT_TRUE(peer()->start(&error)) << error;
    dispatch_ = std::make_unique<pmd::RxDispatch>(1, 256);
    channel_ = dataplane::CoreChannel::create(0, 64, &error);
    ASSERT_TRUE(channel_) << error;
    core_ = std::make_unique<dataplane::PollingCore>(0, kCoreLcore, 32, *dispatch_, *channel_);
    ASSERT_EQ(rte_eal_remote_launch(&dataplane::PollingCore::lcore_main, core_.get(), kCoreLcore),
              0);
    launched_ = true;

    ControlThread::Setup setup;
    setup.cfg = &cfg_;
    setup.ports = {us()};
    setup.channels = {channel_.get()};
    setup.dispatch = dispatch_.get();
    setup.pool = &test::pool();
    setup.max_idle_nap = max_idle_nap_;
    control_ = std::make_unique<ControlThread>(std::move(setup));
    ASSERT_TRUE(control_->start(&error)) << error;
  }

  void TearDown() override {
    std::string error;
    if (control_ && control_->running()) {
      EXPECT_TRUE(control_->shutdown(&error)) << error;
    }
    if (launched_) {
      EXPECT_EQ(rte_eal_wait_lcore(kCoreLcore), 0);
    }
    if (core_) core_->drain_after_stop();
    control_.reset();
    core_.reset();
    peer_frames();
    pair_ = {};
    dispatch_.reset();
    channel_.reset();
    EXPECT_EQ(test::pool().available(), test::pool().size()) << "an mbuf leaked";
  }

  pmd::Port* peer() { return pair_.a.get(); }
  pmd::Port* us() { return pair_.b.get(); }

  void peer_send(const Bytes& f) {
    rte_mbuf* m = test::to_mbuf(f);
    ASSERT_NE(m, nullptr);
    ASSERT_EQ(peer()->tx_burst(0, &m, 1), 1);
  }
  std::vector<Bytes> peer_frames() {
    std::vector<Bytes> out;
    rte_mbuf* pkts[32];
    uint16_t n;
    while ((n = peer()->rx_burst(0, pkts, 32)) > 0) {
      for (uint16_t i = 0; i < n; ++i) {
        out.push_back(test::to_bytes(pkts[i]));
        rte_pktmbuf_free(pkts[i]);
      }
    }
    return out;
  }
  // Collects frames at the peer until `want` arrived (bounded).
  std::vector<Bytes> peer_wait(size_t want) {
    std::vector<Bytes> got;
    for (int i = 0; i < kMaxWaits && got.size() < want; ++i) {
      for (auto& f : peer_frames()) got.push_back(std::move(f));
      if (got.size() < want) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return got;
  }
  std::shared_ptr<const Snapshot> fresh() {
    std::string error;
    EXPECT_TRUE(control_->refresh(&error)) << error;
    return control_->latest();
  }

  static constexpr uint32_t kStatsIntervalMs = 10;
  uint32_t stats_interval_ms_ = kStatsIntervalMs;
  std::chrono::microseconds max_idle_nap_ = ControlThread::kMaxIdleNap;
  config::Config cfg_;
  pmd::RingPair pair_;
  std::unique_ptr<pmd::RxDispatch> dispatch_;
  std::unique_ptr<dataplane::CoreChannel> channel_;
  std::unique_ptr<dataplane::PollingCore> core_;
  bool launched_ = false;
  std::unique_ptr<ControlThread> control_;
};

TEST_F(ControlThreadTest, PostedTasksRunOnTheControlThread) {
  std::promise<std::thread::id> where;
  control_->post([&where](ControlThread&) { where.set_value(std::this_thread::get_id()); });
  const auto id = where.get_future().get();
  EXPECT_NE(id, std::this_thread::get_id());
}

TEST_F(ControlThreadTest, StartPortsAttachesTheQueueAndAnnouncesUs) {
  EXPECT_FALSE(us()->started());
  std::string error;
  ASSERT_TRUE(control_->start_ports(&error)) << error;
  EXPECT_TRUE(us()->started());

  // A gratuitous ARP, and for the port's IPv6 address an unsolicited NA to all nodes (its bytes
  // are test_ndp's).
  auto frames = peer_wait(2);
  ASSERT_EQ(frames.size(), 2u) << "a gratuitous ARP and an unsolicited NA at start";
  const Bytes& g = frames[0];
  ASSERT_GE(g.size(), 42u);
  EXPECT_EQ(g[12], 0x08);
  EXPECT_EQ(g[13], 0x06);
  EXPECT_TRUE(std::equal(kOurMac.bytes.begin(), kOurMac.bytes.end(), g.begin() + 22));
  const Bytes& na = frames[1];
  ASSERT_EQ(na.size(), 86u);
  EXPECT_EQ(na[0], 0x33) << "to all nodes, 33:33:00:00:00:01";
  EXPECT_EQ(na[5], 0x01);
  EXPECT_EQ(na[12], 0x86);
  EXPECT_EQ(na[13], 0xDD);
  EXPECT_EQ(na[54], 136) << "Neighbor Advertisement";
  EXPECT_EQ(na[58], 0x20) << "Override alone";
  EXPECT_TRUE(std::equal(kOurIp6.bytes.begin(), kOurIp6.bytes.end(), na.begin() + 62))
      << "its target is our address";

  auto s = fresh();
  ASSERT_TRUE(s);
  ASSERT_EQ(s->cores.size(), 1u);
  EXPECT_EQ(s->cores[0].lcore_id, kCoreLcore);
  EXPECT_EQ(s->cores[0].attached_queues, 1u);
  EXPECT_EQ(s->cores[0].tx_packets, 2u);
  EXPECT_EQ(s->cores[0].neighbours, 1u) << "the static neighbour was pushed to the core";
  ASSERT_EQ(s->ports.size(), 1u);
  EXPECT_EQ(s->ports[0].name, "us");
  EXPECT_TRUE(s->ports[0].started);
  EXPECT_EQ(s->ports[0].address6, kOurIp6);
  ASSERT_EQ(s->neighbours.size(), 1u);
  EXPECT_EQ(s->neighbours[0].entry.ip, kStaticIp);
  EXPECT_EQ(s->neighbours[0].entry.state, NeighbourState::kStatic);
}

TEST_F(ControlThreadTest, SnapshotCountersMoveThroughTheRings) {
  std::string error;
  ASSERT_TRUE(control_->start_ports(&error)) << error;
  peer_wait(2);  // the gratuitous ARP and the unsolicited NA
  auto before = fresh();
  ASSERT_TRUE(before);
  for (uint16_t i = 0; i < 3; ++i) peer_send(test::icmp_echo(9, i));
  EXPECT_EQ(peer_wait(3).size(), 3u) << "three echo replies";
  auto after = fresh();
  ASSERT_TRUE(after);
  EXPECT_GT(after->sequence, before->sequence);
  EXPECT_EQ(after->cores[0].rx_packets, before->cores[0].rx_packets + 3);
  EXPECT_EQ(after->cores[0].arp_icmp.echo_replies, before->cores[0].arp_icmp.echo_replies + 3);
  EXPECT_GT(after->cores[0].polls, before->cores[0].polls);
  EXPECT_GT(after->cores[0].busy_cycles + after->cores[0].idle_cycles,
            before->cores[0].busy_cycles + before->cores[0].idle_cycles);
  EXPECT_GE(after->ports[0].stats.rx_packets, 3u);
}

// A snapshot part that could not gather everything (a core's ring was full) fails the round:
// nothing is published with that part's rows missing; the next complete round is.
TEST_F(ControlThreadTest, RoundWithAnIncompletePartIsNotPublished) {
  std::string error;
  ASSERT_TRUE(fresh());
  std::atomic<bool> complete{false};
  std::promise<uint64_t> added;
  control_->post([&](ControlThread& ct) {
    ControlThread::SnapshotPart part;
    part.collect = [&complete](const std::function<void(bool)>& done) { done(complete.load()); };
    part.fill = [](Snapshot& s) {
      ConnectionRow row;
      row.state = "from_the_part";
      s.connections.push_back(row);
    };
    added.set_value(ct.add_snapshot_part_st(std::move(part)));
  });
  const uint64_t id = added.get_future().get();
  EXPECT_FALSE(control_->refresh(&error)) << "the part failed: the round is not published";
  EXPECT_TRUE(control_->latest()->connections.empty())
      << "no published snapshot carries the part (its collects all failed)";
  complete.store(true);
  auto s = fresh();
  ASSERT_TRUE(s);
  ASSERT_EQ(s->connections.size(), 1u);
  EXPECT_EQ(s->connections[0].state, "from_the_part");
  std::promise<void> removed;
  control_->post([&](ControlThread& ct) {
    ct.remove_snapshot_part_st(id);
    removed.set_value();
  });
  removed.get_future().get();
}

TEST_F(ControlThreadTest, ArpReplyIsLearnedAndPushedToTheCores) {
  std::string error;
  ASSERT_TRUE(control_->start_ports(&error)) << error;
  peer_wait(2);                                    // the gratuitous ARP and the unsolicited NA
  peer_send(test::arp_frame(2, kOurMac, kOurIp));  // "198.18.0.2 is at 02:..:02", aimed at us
  std::shared_ptr<const Snapshot> s;
  bool learned = false;
  for (int i = 0; i < kMaxWaits && !learned; ++i) {
    s = fresh();
    learned = s && s->cores[0].neighbours == 2;
  }
  ASSERT_TRUE(learned) << "the core's cache holds the static and the learned neighbour";
  EXPECT_EQ(s->control.arp_frames, 1u);
  bool found = false;
  for (const auto& row : s->neighbours) {
    if (row.entry.ip == kPeerIp) {
      found = true;
      EXPECT_EQ(row.entry.mac, kPeerMac);
      EXPECT_EQ(row.entry.state, NeighbourState::kReachable);
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(ControlThreadTest, RequesterOfAnAnsweredArpRequestIsLearned) {
  std::string error;
  ASSERT_TRUE(control_->start_ports(&error)) << error;
  peer_wait(2);                               // the gratuitous ARP and the unsolicited NA
  peer_send(test::arp_frame(1, {}, kOurIp));  // "who has 198.18.0.1? tell 198.18.0.2"
  ASSERT_EQ(peer_wait(1).size(), 1u) << "the core answers the request itself";
  auto s = fresh();  // the requester rides on this snapshot round to control
  ASSERT_TRUE(s);
  bool found = false;
  for (const auto& row : s->neighbours)
    if (row.entry.ip == kPeerIp && row.entry.mac == kPeerMac &&
        row.entry.state == NeighbourState::kReachable)
      found = true;
  EXPECT_TRUE(found) << "RFC 826: the target of a request adds its sender";
}

// IPv6: resolve6 sends an NS through core 0, the peer's NA (answered by the peer's side of
// dataplane/ndp) comes back through the core to control and completes it; the solicitor of an NS
// the core answered is learned from the next snapshot round.
TEST_F(ControlThreadTest, Ipv6NeighbourIsResolvedByNsAndNaAndSolicitorsAreLearned) {
  std::string error;
  ASSERT_TRUE(control_->start_ports(&error)) << error;
  peer_wait(2);  // the gratuitous ARP and the unsolicited NA
  std::promise<ResolveResult6> resolved;
  control_->post([&resolved](ControlThread& ct) {
    ct.neighbour_table_st(0).resolve6(
        kPeerIp6, NeighbourClock::now(),
        [&resolved](const ResolveResult6& r) { resolved.set_value(r); });
  });
  auto frames = peer_wait(1);
  ASSERT_EQ(frames.size(), 1u) << "one Neighbor Solicitation";
  ASSERT_EQ(frames[0].size(), 86u);
  EXPECT_EQ(frames[0][54], 135);
  rte_mbuf* ns = test::to_mbuf(frames[0]);
  ASSERT_TRUE(dataplane::answer_ndp(ns, {kPeerMac, kPeerIp6}, nullptr, nullptr));
  ASSERT_EQ(peer()->tx_burst(0, &ns, 1), 1);
  const ResolveResult6 r = resolved.get_future().get();
  EXPECT_TRUE(r.reachable);
  EXPECT_EQ(r.mac, kPeerMac);

  // A second peer address solicits ours: answered by the core, learned by control.
  const config::Ipv6Address other{{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}};
  rte_mbuf* sol =
      dataplane::build_neighbor_solicitation(test::pool().get(), {kPeerMac, other}, kOurIp6);
  ASSERT_NE(sol, nullptr);
  ASSERT_EQ(peer()->tx_burst(0, &sol, 1), 1);
  auto na = peer_wait(1);
  ASSERT_EQ(na.size(), 1u);
  EXPECT_EQ(na[0][54], 136);
  std::shared_ptr<const Snapshot> s;
  bool learned = false;
  for (int i = 0; i < kMaxWaits && !learned; ++i) {
    s = fresh();
    for (const auto& row : s->neighbours)
      learned |= row.ip6 == other && row.entry.mac == kPeerMac &&
                 row.entry.state == NeighbourState::kReachable;
  }
  EXPECT_TRUE(learned) << "RFC 4861 7.2.3: the solicitor is learned";
  EXPECT_EQ(s->control.ndp_frames, 1u) << "the NA";
  size_t v6_rows = 0;
  for (const auto& row : s->neighbours) v6_rows += row.ip6.has_value();
  EXPECT_EQ(v6_rows, 2u);
  EXPECT_EQ(s->cores[0].neighbours, 1u) << "the cores' caches stay IPv4-only";
}

TEST_F(ControlThreadTest, StopPortDetachesThenStops) {
  std::string error;
  ASSERT_TRUE(control_->start_ports(&error)) << error;
  ASSERT_TRUE(control_->stop_port(0, &error)) << error;
  EXPECT_FALSE(us()->started());
  auto s = fresh();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->cores[0].attached_queues, 0u);
  EXPECT_FALSE(s->ports[0].started);
  EXPECT_FALSE(control_->stop_port(7, &error));
}

TEST_F(ControlThreadTest, ShutdownStopsTheCoreThenThePorts) {
  std::string error;
  ASSERT_TRUE(control_->start_ports(&error)) << error;
  ASSERT_TRUE(control_->shutdown(&error)) << error;
  EXPECT_FALSE(control_->running());
  EXPECT_EQ(rte_eal_wait_lcore(kCoreLcore), 0) << "the lcore left its loop";
  launched_ = false;
  EXPECT_FALSE(us()->started());
  EXPECT_FALSE(control_->refresh(&error)) << "nothing runs requests any more";
}

// A stats round due when the shutdown runs is not posted behind the cores' stop requests: a core
// answers nothing after its stop, so the round's request would stay in the ring for good (and its
// bookkeeping leak). The control thread is held for several stats intervals with the shutdown
// queued behind, so the round is due in the very pass that posts the stops.
TEST_F(ControlThreadTest, NoStatsRoundQueuesBehindTheShutdown) {
  std::string error;
  ASSERT_TRUE(control_->start_ports(&error)) << error;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  control_->post([released](ControlThread&) { released.wait(); });
  std::thread releaser([&release] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * kStatsIntervalMs));
    release.set_value();
  });
  EXPECT_TRUE(control_->shutdown(&error)) << error;
  releaser.join();
  EXPECT_EQ(rte_eal_wait_lcore(kCoreLcore), 0);
  launched_ = false;
  EXPECT_EQ(channel_->in_flight(), 0U) << "a request was posted behind the core's stop";
  EXPECT_FALSE(control_->shutdown(&error)) << "a second shutdown has nothing to do";
}

// A task posted while the loop makes its last pass still runs (its caller waits for an answer),
// and a post after the end is refused. A poll hook posts a task on every pass, the final one (the
// pass that sees the cores stopped) included: without the inbox's close that last task stayed
// in the inbox unrun.
TEST_F(ControlThreadTest, EveryTaskPostedBeforeTheEndRuns) {
  std::string error;
  ASSERT_TRUE(control_->start_ports(&error)) << error;
  std::atomic<uint64_t> posted{0};
  std::atomic<uint64_t> ran{0};
  std::promise<void> hooked;
  ASSERT_TRUE(control_->post([&](ControlThread& ct) {
    ct.add_poll_hook_st([&ct, &posted, &ran] {
      if (ct.post([&ran](ControlThread&) { ran.fetch_add(1); })) posted.fetch_add(1);
      return 0U;
    });
    hooked.set_value();
  }));
  hooked.get_future().get();
  ASSERT_TRUE(control_->shutdown(&error)) << error;
  EXPECT_EQ(rte_eal_wait_lcore(kCoreLcore), 0);
  launched_ = false;
  EXPECT_GT(posted.load(), 0U);
  EXPECT_EQ(ran.load(), posted.load()) << "a task accepted before the loop ended never ran";
  EXPECT_FALSE(control_->post([&ran](ControlThread&) { ran.fetch_add(1); }))
      << "the ended loop refuses tasks";
  EXPECT_FALSE(control_->refresh(&error));
}

// ---- the idle nap ----

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Naps of 5 s and no stats round for a minute: only a wake ends a nap early. The control thread
// idles for kIdle first, so it is in a nap with about 4 s to go when the core hands it
// something; without the wake the hand-off would wait for its end.
class LongNapTest : public ControlThreadTest {
 protected:
  LongNapTest() {
    stats_interval_ms_ = 60'000;
    max_idle_nap_ = std::chrono::seconds(5);
  }
  static constexpr auto kIdle = milliseconds(1000);
  // Generous for a loaded 2-CPU machine, and far below the rest of the nap it lands in.
  static constexpr auto kPrompt = milliseconds(1500);
};

// A request the core holds until the test lets go: a run function must not block, but nothing
// else runs on the test's core. Run functions take no context, so the request is a global.
struct HeldRequest {
  std::atomic<bool> release{false};
  std::atomic<bool> running{false};
  std::atomic<int64_t> done_at{0};
};
HeldRequest g_held;

TEST_F(LongNapTest, ACoreCompletionEndsTheNap) {
  std::promise<bool> sent;
  control_->post([this, &sent](ControlThread&) {
    sent.set_value(channel_->call<dataplane::NoArgs>(
        [](const dataplane::NoArgs&, dataplane::CoreResult&, void*) {
          g_held.running.store(true);
          while (!g_held.release.load()) std::this_thread::yield();
        },
        {}, [](const dataplane::CoreMessage&) { g_held.done_at.store(now_ns()); }, nullptr));
  });
  ASSERT_TRUE(sent.get_future().get());
  for (int i = 0; i < kMaxWaits && !g_held.running.load(); ++i)
    std::this_thread::sleep_for(milliseconds(1));
  ASSERT_TRUE(g_held.running.load());
  const uint64_t naps_before = control_->wake().naps();
  std::this_thread::sleep_for(kIdle);
  const uint64_t naps = control_->wake().naps() - naps_before;
  const uint64_t woken = control_->wake().woken();
  const int64_t released = now_ns();
  g_held.release.store(true);
  for (int i = 0; i < kMaxWaits && g_held.done_at.load() == 0; ++i)
    std::this_thread::sleep_for(milliseconds(1));
  ASSERT_NE(g_held.done_at.load(), 0) << "the completion was handled";
  EXPECT_LT(g_held.done_at.load() - released, std::chrono::nanoseconds(kPrompt).count())
      << "handled when the core answered, not when the nap ended";
  EXPECT_LE(naps, 2u) << "the control thread was in one long nap, not polling";
  EXPECT_GT(control_->wake().woken(), woken) << "the core's wake ended the nap";
}

TEST_F(LongNapTest, AFrameForControlEndsTheNap) {
  std::string error;
  ASSERT_TRUE(control_->start_ports(&error)) << error;
  peer_wait(2);  // the gratuitous ARP and the unsolicited NA
  std::atomic<int64_t> arrived{0};
  std::promise<void> installed;
  control_->post([&](ControlThread& ct) {
    ct.set_cm_handler_st(0, [&arrived](const uint8_t*, size_t) { arrived.store(now_ns()); });
    installed.set_value();
  });
  installed.get_future().get();
  std::this_thread::sleep_for(kIdle);
  const uint64_t woken = control_->wake().woken();
  const int64_t sent = now_ns();
  peer_send(test::roce_frame(1));  // a MAD to QP1: the core hands it to control
  for (int i = 0; i < kMaxWaits && arrived.load() == 0; ++i)
    std::this_thread::sleep_for(milliseconds(1));
  ASSERT_NE(arrived.load(), 0) << "the frame reached the CM handler";
  EXPECT_LT(arrived.load() - sent, std::chrono::nanoseconds(kPrompt).count())
      << "handled when the core handed it over, not when the nap ended";
  EXPECT_GT(control_->wake().woken(), woken) << "the core's wake ended the nap";
  std::promise<void> removed;
  control_->post([&](ControlThread& ct) {
    ct.set_cm_handler_st(0, nullptr);
    removed.set_value();
  });
  removed.get_future().get();
}

// A long nap still ends at the stats round: nobody wakes the control thread for it.
class ShortStatsLongNapTest : public ControlThreadTest {
 protected:
  ShortStatsLongNapTest() {
    stats_interval_ms_ = 20;
    max_idle_nap_ = std::chrono::seconds(2);
  }
};

TEST_F(ShortStatsLongNapTest, TheNapEndsAtTheStatsRound) {
  std::shared_ptr<const Snapshot> first;
  for (int i = 0; i < kMaxWaits && !(first = control_->latest()); ++i)
    std::this_thread::sleep_for(milliseconds(1));
  ASSERT_TRUE(first);
  // Five rounds take 100 ms; naps that ignored them would take five times 2 s.
  const auto start = Clock::now();
  while (control_->latest()->sequence < first->sequence + 5 &&
         Clock::now() - start < std::chrono::seconds(4))
    std::this_thread::sleep_for(milliseconds(1));
  EXPECT_GE(control_->latest()->sequence, first->sequence + 5);
}

// No stats round for a minute, default naps: idle, the control thread wakes about once per
// kMaxIdleNap (800 us naps would be hundreds of wake-ups here).
class IdleTest : public ControlThreadTest {
 protected:
  IdleTest() { stats_interval_ms_ = 60'000; }
};

TEST_F(IdleTest, AnIdleControlThreadWakesRarely) {
  std::this_thread::sleep_for(milliseconds(50));  // past the first round's work
  const uint64_t before = control_->wake().naps();
  const auto start = Clock::now();
  std::this_thread::sleep_for(milliseconds(300));
  const uint64_t naps = control_->wake().naps() - before;
  const auto idle = Clock::now() - start;
  // Naps never end early without a wake, so a slow machine only means fewer of them.
  const uint64_t most = static_cast<uint64_t>(idle / ControlThread::kMaxIdleNap) + 10;
  EXPECT_LE(naps, most) << "over " << std::chrono::duration_cast<milliseconds>(idle).count()
                        << " ms";
  EXPECT_LT(most, static_cast<uint64_t>(idle / std::chrono::microseconds(800)) / 4)
      << "the bound tells the long nap from the old 800 us one";
}

// start() fails, with the reason, when the wake's eventfd cannot be made (no descriptor left).
TEST_F(ControlThreadTest, StartFailsWhenItsEventfdCannotBeCreated) {
  ControlThread::Setup setup;  // no cores: this one must not rewire the fixture's
  setup.cfg = &cfg_;
  ControlThread other(std::move(setup));
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  const int lowest_free = dup(0);
  ASSERT_GE(lowest_free, 0);
  close(lowest_free);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(lowest_free);  // every descriptor below it is taken
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::string error;
  const bool started = other.start(&error);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_FALSE(started);
  EXPECT_FALSE(other.running());
  EXPECT_NE(error.find("eventfd"), std::string::npos) << error;
  EXPECT_NE(error.find("Too many open files"), std::string::npos) << error;
}

}  // namespace
}  // namespace rocedp::control
