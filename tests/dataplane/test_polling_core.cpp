// A polling core driven by explicit poll_once() calls in one thread, over an in-memory ring-pair
// wire (CONVENTIONS.md item 14): "peer" is the far end, "us" is the port the cores serve.
// Every test checks that nothing happens before the target core is polled.

#include "dataplane/polling_core.hpp"

#include <gtest/gtest.h>
#include <rte_lcore.h>

#include "dataplane/arp_icmp.hpp"
#include "dataplane/ndp.hpp"
#include "dataplane/qpn_map.hpp"
#include "pmd/rx_dispatch.hpp"
#include "tests/dataplane/runtime_env.hpp"

namespace rocedp::dataplane {
namespace {

using test::kOurIp;
using test::kOurMac;
using test::kPeerIp;
using test::kPeerMac;
using Bytes = std::vector<uint8_t>;

// Keeps the core's answer; a result still STATUS_PENDING was not reaped by control yet.
void record_result(const CoreMessage& msg) {
  *static_cast<CoreResult*>(msg.done_ctx) = msg.result;
}

class PollingCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int serial = 0;
    const std::string link = "pc" + std::to_string(serial++);
    std::string error;
    config::PortConfig us_cfg = test::port_config("us", kOurMac, kOurIp);
    us_cfg.address6 = us_ip6_;
    ASSERT_TRUE(pmd::open_ring_pair(link, test::port_config("peer", kPeerMac, kPeerIp), us_cfg, 1,
                                    test::pool(), test::small_dataplane(), &pair_, &error))
        << error;
    ASSERT_TRUE(pair_.a->start(&error)) << error;
    ASSERT_TRUE(pair_.b->start(&error)) << error;
    dispatch_ = std::make_unique<pmd::RxDispatch>(2, 256);
    for (uint16_t i = 0; i < 2; ++i) {
      channels_.push_back(CoreChannel::create(i, 64, &error));
      ASSERT_TRUE(channels_.back()) << error;
      cores_.push_back(
          std::make_unique<PollingCore>(i, rte_lcore_id(), 32, *dispatch_, *channels_.back()));
    }
    // Attach "us" queue 0 to core 0: the request waits in the ring until core 0 polls.
    CoreResult result{STATUS_PENDING};
    ASSERT_TRUE(core_requests::attach_port(ch(0), us(), 0, &record_result, &result));
    EXPECT_EQ(core(0).stats_st().attached_queues, 0u);
    EXPECT_TRUE(core(0).poll_once());
    EXPECT_EQ(core(0).stats_st().attached_queues, 1u);
    EXPECT_EQ(result.status, STATUS_PENDING) << "completion not yet reaped by control";
    EXPECT_EQ(ch(0).poll_completions(16), 1u);
    EXPECT_EQ(result.status, STATUS_SUCCESS);
  }

  void TearDown() override {
    peer_receive();
    pmd::Port* u = us();
    pair_ = {};
    (void)u;
    cores_.clear();
    dispatch_.reset();  // frees whatever is still in the handoff rings
    channels_.clear();
    EXPECT_EQ(test::pool().available(), test::pool().size()) << "an mbuf leaked";
  }

  pmd::Port* peer() { return pair_.a.get(); }
  pmd::Port* us() { return pair_.b.get(); }
  PollingCore& core(int i) { return *cores_[i]; }
  CoreChannel& ch(int i) { return *channels_[i]; }
  uint64_t drops(int i, std::size_t idx) { return core(i).stats_st().drops[idx]; }

  void peer_send(const Bytes& f) {
    rte_mbuf* m = test::to_mbuf(f);
    ASSERT_NE(m, nullptr);
    ASSERT_EQ(peer()->tx_burst(0, &m, 1), 1);
  }
  std::vector<Bytes> peer_receive() {
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

  std::optional<config::Ipv6Address> us_ip6_;  // set by a subclass before SetUp
  pmd::RingPair pair_;
  std::unique_ptr<pmd::RxDispatch> dispatch_;
  std::vector<std::unique_ptr<CoreChannel>> channels_;
  std::vector<std::unique_ptr<PollingCore>> cores_;
};

bool mac_at(const Bytes& f, size_t off, const config::MacAddress& mac) {
  return f.size() >= off + 6 && std::equal(mac.bytes.begin(), mac.bytes.end(), f.begin() + off);
}
uint32_t be32_at(const Bytes& f, size_t off) {
  return (uint32_t{f[off]} << 24) | (uint32_t{f[off + 1]} << 16) | (uint32_t{f[off + 2]} << 8) |
         f[off + 3];
}

TEST_F(PollingCoreTest, ArpRequestForUsIsAnsweredOnTheRxCore) {
  peer_send(test::arp_frame(1, {}, kOurIp));
  EXPECT_TRUE(peer_receive().empty()) << "nothing is answered before the core polls";
  EXPECT_EQ(core(0).stats_st().rx_packets, 0u);

  EXPECT_TRUE(core(0).poll_once());
  auto frames = peer_receive();
  ASSERT_EQ(frames.size(), 1u);
  const Bytes& r = frames[0];
  ASSERT_GE(r.size(), 42u);
  EXPECT_TRUE(mac_at(r, 0, kPeerMac));  // unicast back to the requester
  EXPECT_TRUE(mac_at(r, 6, kOurMac));
  EXPECT_EQ(r[12], 0x08);
  EXPECT_EQ(r[13], 0x06);
  EXPECT_EQ(r[21], 2) << "ARP reply opcode";
  EXPECT_TRUE(mac_at(r, 22, kOurMac));  // sender hardware address: ours
  EXPECT_EQ(be32_at(r, 28), kOurIp.value);
  EXPECT_EQ(be32_at(r, 38), kPeerIp.value);
  EXPECT_EQ(core(0).stats_st().rx_packets, 1u);
  EXPECT_EQ(core(0).stats_st().tx_packets, 1u);
  EXPECT_EQ(core(0).stats_st().arp_icmp.arp_replies, 1u);
  EXPECT_EQ(core(1).stats_st().rx_packets, 0u);

  // The requester is kept for control (RFC 826) and handed over with the next snapshot only.
  CoreStats out;
  ASSERT_TRUE(core_requests::snapshot(ch(0), &out, nullptr, nullptr));
  EXPECT_TRUE(core(0).poll_once());
  ASSERT_EQ(out.n_learned_peers, 1u);
  EXPECT_EQ(out.learned_peers[0].ip, kPeerIp);
  EXPECT_EQ(out.learned_peers[0].mac, kPeerMac);
  ASSERT_TRUE(core_requests::snapshot(ch(0), &out, nullptr, nullptr));
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_EQ(out.n_learned_peers, 0u) << "reported once";
  EXPECT_EQ(ch(0).poll_completions(8), 2u);
}

TEST_F(PollingCoreTest, IcmpEchoIsAnsweredOnTheRxCore) {
  peer_send(test::icmp_echo(0x1234, 7));
  EXPECT_TRUE(peer_receive().empty());
  EXPECT_TRUE(core(0).poll_once());
  auto frames = peer_receive();
  ASSERT_EQ(frames.size(), 1u);
  const Bytes& r = frames[0];
  ASSERT_GE(r.size(), 42u);
  EXPECT_TRUE(mac_at(r, 0, kPeerMac));
  EXPECT_EQ(be32_at(r, 26), kOurIp.value);   // IPv4 source
  EXPECT_EQ(be32_at(r, 30), kPeerIp.value);  // IPv4 destination
  EXPECT_EQ(r[34], 0) << "echo reply";
  EXPECT_EQ(r[38], 0x12);
  EXPECT_EQ(r[39], 0x34);
  EXPECT_EQ(r[41], 7);
  EXPECT_EQ(core(0).stats_st().arp_icmp.echo_replies, 1u);
}

// `f` priority-tagged (802.1Q, VLAN ID 0, priority `pcp`), as a RoCE NIC marks its PFC class
// without a VLAN.
std::vector<uint8_t> priority_tagged(std::vector<uint8_t> f, uint8_t pcp) {
  const uint8_t tag[4] = {0x81, 0x00, static_cast<uint8_t>(pcp << 5), 0};
  f.insert(f.begin() + 12, tag, tag + 4);
  return f;
}

// An untagged port takes priority-tagged frames as if untagged: the echo is answered (untagged),
// and a RoCEv2 frame reaches the core that owns its QP. A frame of any VLAN is not the port's.
TEST_F(PollingCoreTest, PriorityTaggedFramesAreTakenAndOtherVlansAreNot) {
  peer_send(priority_tagged(test::icmp_echo(0x1234, 7), 3));
  EXPECT_TRUE(core(0).poll_once());
  auto frames = peer_receive();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(be32_at(frames[0], 26), kOurIp.value) << "an untagged echo reply";
  EXPECT_EQ(frames[0][34], 0);
  EXPECT_EQ(core(0).stats_st().arp_icmp.echo_replies, 1u);

  peer_send(priority_tagged(test::roce_frame(make_qpn(1, 5)), 3));
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_EQ(dispatch_->forwarded(0), 1u) << "handed to the QP's core";

  std::vector<uint8_t> other = test::icmp_echo(0x1234, 8);
  const uint8_t tag[4] = {0x81, 0x00, 0x00, 0x07};  // VLAN 7
  other.insert(other.begin() + 12, tag, tag + 4);
  peer_send(other);
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_TRUE(peer_receive().empty());
  EXPECT_EQ(core(0).stats_st().arp_icmp.echo_replies, 1u);
  EXPECT_EQ(drops(0, drop_index(CoreDrop::kUnsupported)), 1u);
}

// A poll whose RX burst comes back short while the pool has no mbuf for the core is counted
// (rx_pool_empty): not every PMD counts rx_nombuf. A poll with mbufs to spare is not.
TEST_F(PollingCoreTest, PollsThatFindThePoolEmptyAreCounted) {
  EXPECT_FALSE(core(0).poll_once());
  EXPECT_EQ(core(0).stats_st().rx_pool_empty, 0u) << "the pool has mbufs";
  std::vector<rte_mbuf*> taken;
  while (rte_mbuf* m = rte_pktmbuf_alloc(test::pool().get())) taken.push_back(m);
  ASSERT_FALSE(taken.empty());
  EXPECT_FALSE(core(0).poll_once());
  EXPECT_FALSE(core(0).poll_once());
  EXPECT_EQ(core(0).stats_st().rx_pool_empty, 2u);
  EXPECT_EQ(core(1).stats_st().rx_pool_empty, 0u) << "core 1 polls no port";
  for (rte_mbuf* m : taken) rte_pktmbuf_free(m);
  EXPECT_FALSE(core(0).poll_once());
  EXPECT_EQ(core(0).stats_st().rx_pool_empty, 2u) << "mbufs are back";
}

TEST_F(PollingCoreTest, RoceFrameIsHandedToTheCoreThatOwnsItsQpn) {
  peer_send(test::roce_frame(make_qpn(1, 5)));
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_EQ(core(0).stats_st().rx_packets, 1u);
  EXPECT_EQ(dispatch_->forwarded(0), 1u);
  EXPECT_EQ(core(1).stats_st().handoff_in, 0u) << "core 1 has not polled yet";
  EXPECT_EQ(drops(1, drop_index(CoreDrop::kUnknownQpn)), 0u);

  EXPECT_TRUE(core(1).poll_once());
  EXPECT_EQ(core(1).stats_st().handoff_in, 1u);
  // No RoCE handler is installed here (no QP exists on core 1), so the owner drops it as unknown.
  EXPECT_EQ(drops(1, drop_index(CoreDrop::kUnknownQpn)), 1u);
  EXPECT_EQ(drops(0, drop_index(CoreDrop::kUnknownQpn)), 0u);
  EXPECT_FALSE(core(1).poll_once()) << "nothing left: an idle poll reports no work";
}

TEST_F(PollingCoreTest, RoceFrameForItsOwnQpnStaysOnTheRxCore) {
  peer_send(test::roce_frame(make_qpn(0, 9)));
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_EQ(dispatch_->forwarded(0), 0u);
  EXPECT_EQ(drops(0, drop_index(CoreDrop::kUnknownQpn)), 1u);
}

// Records the frames the core hands it: the DestQP of each, per call.
class RecordingHandler : public RoceHandler {
 public:
  uint32_t rx_burst_st(std::span<const wire::Bytes> frames, uint64_t /*tsc*/) override {
    std::vector<uint32_t> qpns;
    for (const wire::Bytes& f : frames)
      qpns.push_back(be32_at(Bytes(f.begin(), f.end()), 46) & 0xFFFFFF);
    calls.push_back(qpns);
    return static_cast<uint32_t>(frames.size());
  }
  bool poll_st(uint64_t /*tsc*/) override {
    ++polls;
    return false;
  }
  std::vector<std::vector<uint32_t>> calls;
  int polls = 0;
};

// One handler per port (each port's adapter): a port's RoCEv2 frames reach its handler alone, on
// the RX core and through a hand-off alike; a port without one drops them as unknown even when
// another port has a handler; every installed handler gets its turn per poll.
TEST_F(PollingCoreTest, EachPortsFramesReachThatPortsHandlerAndEveryHandlerIsPolled) {
  RecordingHandler ours, other, ours1, other1;
  const uint16_t other_port = peer()->id();  // a port of the process not attached to core 0
  ASSERT_TRUE(core(0).set_roce_handler_st(other_port, &other));
  peer_send(test::roce_frame(make_qpn(0, 5)));
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_TRUE(other.calls.empty()) << "the frame came in on another port";
  EXPECT_EQ(drops(0, drop_index(CoreDrop::kUnknownQpn)), 1u);
  EXPECT_EQ(other.polls, 1);

  ASSERT_TRUE(core(0).set_roce_handler_st(us()->id(), &ours));
  EXPECT_EQ(core(0).roce_handler_st(us()->id()), &ours);
  EXPECT_EQ(core(0).roce_handler_st(other_port), &other);
  peer_send(test::roce_frame(make_qpn(0, 6)));
  EXPECT_TRUE(core(0).poll_once());
  ASSERT_EQ(ours.calls.size(), 1u);
  EXPECT_EQ(ours.calls[0], (std::vector<uint32_t>{make_qpn(0, 6)}));
  EXPECT_TRUE(other.calls.empty());
  EXPECT_EQ(ours.polls, 1);
  EXPECT_EQ(other.polls, 2);

  // Core 1 takes frames of "us" handed over by core 0: by the port each frame came in on.
  ASSERT_TRUE(core(1).set_roce_handler_st(other_port, &other1));
  peer_send(test::roce_frame(make_qpn(1, 7)));
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_TRUE(core(1).poll_once());
  EXPECT_TRUE(other1.calls.empty());
  EXPECT_EQ(drops(1, drop_index(CoreDrop::kUnknownQpn)), 1u);
  ASSERT_TRUE(core(1).set_roce_handler_st(us()->id(), &ours1));
  peer_send(test::roce_frame(make_qpn(1, 8)));
  peer_send(test::roce_frame(make_qpn(1, 9)));
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_TRUE(core(1).poll_once());
  ASSERT_EQ(ours1.calls.size(), 1u);
  EXPECT_EQ(ours1.calls[0], (std::vector<uint32_t>{make_qpn(1, 8), make_qpn(1, 9)}));

  // Removed: its frames are unknown again and it is no longer polled.
  ASSERT_TRUE(core(0).set_roce_handler_st(us()->id(), nullptr));
  peer_send(test::roce_frame(make_qpn(0, 10)));
  const int polls_before = ours.polls;
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_EQ(ours.calls.size(), 1u);
  EXPECT_EQ(ours.polls, polls_before);
  EXPECT_EQ(drops(0, drop_index(CoreDrop::kUnknownQpn)), 2u);

  // At most kMaxPorts handlers; replacing one is always possible.
  std::vector<RecordingHandler> more(PollingCore::kMaxPorts);
  unsigned installed = 1;  // `other`
  for (uint16_t p = 20; installed < PollingCore::kMaxPorts; ++p, ++installed)
    ASSERT_TRUE(core(0).set_roce_handler_st(p, &more[installed]));
  EXPECT_FALSE(core(0).set_roce_handler_st(us()->id(), &ours));
  EXPECT_EQ(core(0).roce_handler_st(us()->id()), nullptr);
  EXPECT_TRUE(core(0).set_roce_handler_st(other_port, &ours));
  EXPECT_FALSE(core(0).set_roce_handler_st(RTE_MAX_ETHPORTS, &ours));
  for (unsigned p = 20; p < 20 + PollingCore::kMaxPorts - 1; ++p)
    core(0).set_roce_handler_st(static_cast<uint16_t>(p), nullptr);
  for (uint16_t port : {other_port, us()->id()}) {
    core(0).set_roce_handler_st(port, nullptr);
    core(1).set_roce_handler_st(port, nullptr);
  }
}

// A burst of RoCEv2 frames for the core's own QPs goes to its handler in one call; from the first
// other frame on (an ICMP echo, a frame for core 1) the rest of the burst takes the dispatcher,
// and the core's own frames after it follow in a second call: the handler sees them in order.
TEST_F(PollingCoreTest, OwnRoceFramesReachTheHandlerInOrderAroundOtherFrames) {
  RecordingHandler handler;
  core(0).set_roce_handler_st(us()->id(), &handler);
  const std::vector<Bytes> burst = {
      test::roce_frame(make_qpn(0, 5)), test::roce_frame(make_qpn(0, 6)), test::icmp_echo(7, 1),
      test::roce_frame(make_qpn(1, 8)), test::roce_frame(make_qpn(0, 9))};
  uint64_t bytes = 0;
  for (const Bytes& f : burst) {
    peer_send(f);
    bytes += f.size();
  }
  EXPECT_TRUE(handler.calls.empty()) << "nothing before the core polls";
  EXPECT_TRUE(core(0).poll_once());
  ASSERT_EQ(handler.calls.size(), 2u);
  EXPECT_EQ(handler.calls[0], (std::vector<uint32_t>{make_qpn(0, 5), make_qpn(0, 6)}));
  EXPECT_EQ(handler.calls[1], (std::vector<uint32_t>{make_qpn(0, 9)}));
  EXPECT_EQ(core(0).stats_st().roce_to_engine, 3u);
  EXPECT_EQ(core(0).stats_st().rx_packets, 5u);
  EXPECT_EQ(core(0).stats_st().rx_bytes, bytes);
  EXPECT_EQ(core(0).stats_st().arp_icmp.echo_replies, 1u);
  EXPECT_EQ(dispatch_->forwarded(0), 1u) << "core 1's frame";
  EXPECT_EQ(core(0).stats_st().total_drops(), 0u);
  EXPECT_EQ(peer_receive().size(), 1u) << "the echo reply";
  core(0).set_roce_handler_st(us()->id(), nullptr);
  EXPECT_TRUE(core(1).poll_once());
  EXPECT_EQ(core(1).stats_st().handoff_in, 1u);
}

// The engine's frames go back to the pool in one put only when nothing else holds them: a frame
// someone else still references (as a capture would) loses the core's reference and stays out.
TEST_F(PollingCoreTest, ARoceFrameStillReferencedElsewhereIsNotReturnedToThePool) {
  RecordingHandler handler;
  core(0).set_roce_handler_st(us()->id(), &handler);
  peer_send(test::roce_frame(make_qpn(0, 5)));
  rte_mbuf* held = test::to_mbuf(test::roce_frame(make_qpn(0, 6)));
  ASSERT_NE(held, nullptr);
  rte_mbuf_refcnt_update(held, 1);
  ASSERT_EQ(peer()->tx_burst(0, &held, 1), 1);
  const uint32_t free_before = test::pool().available();
  EXPECT_TRUE(core(0).poll_once());
  ASSERT_EQ(handler.calls.size(), 1u);
  EXPECT_EQ(handler.calls[0].size(), 2u);
  EXPECT_EQ(rte_mbuf_refcnt_read(held), 1);
  EXPECT_EQ(test::pool().available(), free_before + 1) << "only the first frame is back";
  rte_pktmbuf_free(held);
  core(0).set_roce_handler_st(us()->id(), nullptr);
}

TEST_F(PollingCoreTest, OwningCoreChecksTheIcrc) {
  Bytes f = test::roce_frame(make_qpn(1, 5));
  ASSERT_TRUE(wire::icrc_verify(wire::Bytes(f.data() + 14, f.size() - 14)));
  f[f.size() - 5] ^= 0xFF;  // last payload byte
  peer_send(f);
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_EQ(drops(0, drop_index(wire::DropReason::kBadIcrc)), 0u) << "the RX core only routes";
  EXPECT_TRUE(core(1).poll_once());
  EXPECT_EQ(drops(1, drop_index(wire::DropReason::kBadIcrc)), 1u);
  EXPECT_EQ(drops(1, drop_index(CoreDrop::kUnknownQpn)), 0u);
}

TEST_F(PollingCoreTest, Qp1AndArpRepliesGoToTheControlPath) {
  peer_send(test::roce_frame(kGsiQpn));
  peer_send(test::arp_frame(2, kOurMac, kOurIp));
  rte_mbuf* pkts[8];
  EXPECT_EQ(dispatch_->receive(dispatch_->control_target(), pkts, 8), 0);
  EXPECT_TRUE(core(0).poll_once());
  const uint16_t n = dispatch_->receive(dispatch_->control_target(), pkts, 8);
  ASSERT_EQ(n, 2);
  EXPECT_EQ(frame_kind(pkts[0]), FrameKind::kCm);
  EXPECT_EQ(frame_kind(pkts[1]), FrameKind::kArpToControl);
  for (uint16_t i = 0; i < n; ++i) rte_pktmbuf_free(pkts[i]);
  EXPECT_EQ(core(0).stats_st().to_control, 2u);
}

TEST_F(PollingCoreTest, FramesNotForUsAreDroppedByReason) {
  peer_send(test::roce_frame(make_qpn(0, 9), kPeerMac));  // another station's MAC
  peer_send(test::roce_frame(make_qpn(7, 1)));            // core 7 does not exist
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_EQ(drops(0, drop_index(CoreDrop::kNotForUs)), 1u);
  EXPECT_EQ(drops(0, drop_index(CoreDrop::kQpnCoreOutOfRange)), 1u);
  EXPECT_EQ(core(0).stats_st().total_drops(), 2u);
  EXPECT_TRUE(peer_receive().empty());
}

// IPv4 UDP frames skip the ARP/ICMP classifier: one to another UDP port than RoCEv2's is
// dropped as unsupported, and an ICMP echo in the same burst is still answered.
TEST_F(PollingCoreTest, UdpFrameForAnotherPortIsUnsupportedAndIcmpStillAnswered) {
  Bytes udp = test::roce_frame(make_qpn(0, 1));
  ASSERT_GT(udp.size(), 38u);
  udp[36] = 0x12;  // UDP destination port 4790, not 4791
  udp[37] = 0xB6;
  peer_send(udp);
  peer_send(test::icmp_echo(0x4321, 3));
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_EQ(drops(0, drop_index(CoreDrop::kUnsupported)), 1u);
  EXPECT_EQ(core(0).stats_st().total_drops(), 1u);
  EXPECT_EQ(core(0).stats_st().arp_icmp.echo_replies, 1u);
  EXPECT_EQ(peer_receive().size(), 1u) << "the echo reply, nothing for the UDP frame";
}

TEST_F(PollingCoreTest, SnapshotArrivesThroughTheRings) {
  peer_send(test::icmp_echo(1, 1));
  EXPECT_TRUE(core(0).poll_once());
  CoreStats out;
  out.core_index = 99;
  CoreResult result{STATUS_PENDING};
  ASSERT_TRUE(core_requests::snapshot(ch(0), &out, &record_result, &result));
  EXPECT_EQ(out.core_index, 99) << "untouched until the core runs the request";
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_EQ(ch(0).poll_completions(8), 1u);
  EXPECT_EQ(result.status, STATUS_SUCCESS);
  EXPECT_EQ(out.core_index, 0);
  EXPECT_EQ(out.rx_packets, 1u);
  EXPECT_EQ(out.tx_packets, 1u);
  EXPECT_EQ(out.arp_icmp.echo_replies, 1u);
  EXPECT_EQ(out.polls, 2u) << "the snapshot is taken during the second poll";
  EXPECT_EQ(out.requests, 1u) << "the attach; the snapshot itself is counted after it ran";
}

TEST_F(PollingCoreTest, ControlBuiltFrameLeavesOnTheCoreThatOwnsTheTxQueue) {
  LocalAddress local{kOurMac, kOurIp, 24};
  rte_mbuf* garp = build_gratuitous_arp(test::pool().get(), local);
  ASSERT_NE(garp, nullptr);
  CoreResult result{STATUS_PENDING};
  ASSERT_TRUE(core_requests::transmit(ch(0), us()->id(), garp, &record_result, &result));
  EXPECT_TRUE(peer_receive().empty());
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_EQ(ch(0).poll_completions(8), 1u);
  EXPECT_EQ(result.status, STATUS_SUCCESS);
  auto frames = peer_receive();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(be32_at(frames[0], 28), kOurIp.value);  // sender IP
  EXPECT_EQ(be32_at(frames[0], 38), kOurIp.value);  // target IP: an announcement (RFC 5227)
  EXPECT_EQ(core(0).stats_st().tx_packets, 1u);
}

TEST_F(PollingCoreTest, FrameForAPortWithoutTxQueueIsCounted) {
  rte_mbuf* m = test::to_mbuf(test::icmp_echo(1, 1));
  CoreResult result{STATUS_PENDING};
  ASSERT_TRUE(core_requests::transmit(ch(1), us()->id(), m, &record_result,
                                      &result));  // core 1 owns no queue
  EXPECT_TRUE(core(1).poll_once());
  EXPECT_EQ(ch(1).poll_completions(8), 1u);
  EXPECT_EQ(result.status, STATUS_INVALID_DEVICE_STATE) << "no queue of that port here";
  EXPECT_EQ(drops(1, drop_index(CoreDrop::kNoTxQueue)), 1u);
}

TEST_F(PollingCoreTest, NeighbourUpdatesReachTheCoreCache) {
  NeighbourUpdate u{kPeerIp, kPeerMac, false};
  ASSERT_TRUE(core_requests::neighbour_update(ch(1), u, nullptr, nullptr));
  config::MacAddress mac;
  EXPECT_FALSE(core(1).neighbour_cache_st().lookup_st(kPeerIp, &mac));
  EXPECT_TRUE(core(1).poll_once());
  ASSERT_TRUE(core(1).neighbour_cache_st().lookup_st(kPeerIp, &mac));
  EXPECT_EQ(mac, kPeerMac);
  u.remove = true;
  ASSERT_TRUE(core_requests::neighbour_update(ch(1), u, nullptr, nullptr));
  EXPECT_TRUE(core(1).poll_once());
  EXPECT_FALSE(core(1).neighbour_cache_st().lookup_st(kPeerIp, &mac));
  EXPECT_EQ(ch(1).poll_completions(8), 2u);
}

TEST_F(PollingCoreTest, DetachStopsPollingThePort) {
  CoreResult result{STATUS_PENDING};
  ASSERT_TRUE(core_requests::detach_port(ch(0), us()->id(), &record_result, &result));
  peer_send(test::icmp_echo(1, 1));
  EXPECT_TRUE(core(0).poll_once());  // runs RX first (the frame), then the detach request
  EXPECT_EQ(core(0).stats_st().rx_packets, 1u);
  EXPECT_EQ(core(0).stats_st().attached_queues, 0u);
  EXPECT_EQ(ch(0).poll_completions(8), 1u);
  EXPECT_EQ(result.status, STATUS_SUCCESS);
  peer_receive();
  peer_send(test::icmp_echo(1, 2));
  EXPECT_FALSE(core(0).poll_once()) << "a detached queue is not polled";
  EXPECT_EQ(core(0).stats_st().rx_packets, 1u);
  ASSERT_TRUE(core_requests::detach_port(ch(0), us()->id(), &record_result, &result));
  core(0).poll_once();
  ch(0).poll_completions(8);
  EXPECT_EQ(result.status, STATUS_INVALID_PARAMETER) << "not attached any more";
  // Re-attach so the frame still in the ring is received and freed before teardown.
  ASSERT_TRUE(core_requests::attach_port(ch(0), us(), 0, &record_result, &result));
  core(0).poll_once();
  core(0).poll_once();
  ch(0).poll_completions(8);
  EXPECT_EQ(core(0).stats_st().rx_packets, 2u);
}

TEST_F(PollingCoreTest, RefusedRequestsAnswerWithAStatusAndNoValue) {
  CoreResult twice{STATUS_PENDING};
  ASSERT_TRUE(core_requests::attach_port(ch(0), us(), 0, &record_result, &twice));
  core(0).poll_once();
  EXPECT_EQ(ch(0).poll_completions(8), 1u);
  EXPECT_EQ(twice.status, STATUS_INVALID_DEVICE_STATE) << "queue 0 of us is attached already";
  EXPECT_FALSE(twice.ok());
  EXPECT_TRUE(std::holds_alternative<std::monostate>(twice.value));
  EXPECT_EQ(core(0).stats_st().attached_queues, 1u) << "the refused attach changed nothing";
}

TEST_F(PollingCoreTest, StopRequestEndsTheLoopAndCountsCycles) {
  CoreResult result{STATUS_PENDING};
  ASSERT_TRUE(core_requests::stop(ch(0), &record_result, &result));
  EXPECT_FALSE(core(0).stopped_st());
  core(0).run_st();  // returns once the stop request has run
  EXPECT_TRUE(core(0).stopped_st());
  EXPECT_EQ(core(0).stats_st().attached_queues, 0u);
  EXPECT_EQ(core(0).stats_st().polls, 2u);
  EXPECT_GT(core(0).stats_st().busy_cycles, 0u);
  EXPECT_EQ(ch(0).poll_completions(8), 1u);
  EXPECT_EQ(result.status, STATUS_SUCCESS);
}

// ---- IPv6: neighbour discovery and echo on the RX core (dataplane/ndp) ----

const config::Ipv6Address kOurIp6{{0xfd, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20}};
const config::Ipv6Address kPeerIp6{{0xfd, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}};

class PollingCoreNdpTest : public PollingCoreTest {
 protected:
  PollingCoreNdpTest() { us_ip6_ = kOurIp6; }
  // What the peer's side would send: an NS for `target` (built by dataplane/ndp, whose bytes
  // tests/arp/test_ndp.cpp checks), or the NA it gets back answered by the peer's side.
  Bytes peer_ns(const config::Ipv6Address& target) {
    rte_mbuf* m = build_neighbor_solicitation(test::pool().get(), {kPeerMac, kPeerIp6}, target);
    Bytes f = test::to_bytes(m);
    rte_pktmbuf_free(m);
    return f;
  }
  Bytes peer_na() {
    // Our NS for the peer, answered by the peer's side of dataplane/ndp.
    rte_mbuf* m = build_neighbor_solicitation(test::pool().get(), {kOurMac, kOurIp6}, kPeerIp6);
    EXPECT_TRUE(answer_ndp(m, {kPeerMac, kPeerIp6}, nullptr, nullptr));
    Bytes f = test::to_bytes(m);
    rte_pktmbuf_free(m);
    return f;
  }
};

TEST_F(PollingCoreNdpTest, SolicitationIsAnsweredOnTheRxCoreAndItsSolicitorReported) {
  peer_send(peer_ns(kOurIp6));
  EXPECT_TRUE(peer_receive().empty()) << "nothing is answered before the core polls";
  EXPECT_TRUE(core(0).poll_once());
  auto frames = peer_receive();
  ASSERT_EQ(frames.size(), 1u);
  const Bytes& r = frames[0];
  ASSERT_EQ(r.size(), 86u);
  EXPECT_TRUE(mac_at(r, 0, kPeerMac));
  EXPECT_TRUE(mac_at(r, 6, kOurMac));
  EXPECT_EQ(r[54], 136) << "Neighbor Advertisement";
  EXPECT_TRUE(std::equal(kOurIp6.bytes.begin(), kOurIp6.bytes.end(), r.begin() + 62));
  const CoreStats& st = core(0).stats_st();
  EXPECT_EQ(st.ndp.na_sent, 1u);
  EXPECT_EQ(st.total_drops(), 0u);
  ASSERT_EQ(st.n_learned_peers6, 1u);
  EXPECT_EQ(st.learned_peers6[0].ip, kPeerIp6);
  EXPECT_EQ(st.learned_peers6[0].mac, kPeerMac);
  EXPECT_EQ(st.learned_peers6[0].port_id, us()->id());

  // The solicitor rides on the next snapshot, and is handed over once.
  CoreStats out;
  CoreResult result{STATUS_PENDING};
  ASSERT_TRUE(core_requests::snapshot(ch(0), &out, &record_result, &result));
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_EQ(ch(0).poll_completions(8), 1u);
  EXPECT_EQ(out.n_learned_peers6, 1u);
  EXPECT_EQ(core(0).stats_st().n_learned_peers6, 0u);
}

TEST_F(PollingCoreNdpTest, AdvertisementGoesToControlAndForeignSolicitationsAreCounted) {
  peer_send(peer_na());
  peer_send(peer_ns(kPeerIp6));  // someone resolving the peer's own address (its DAD, say)
  EXPECT_TRUE(core(0).poll_once());
  rte_mbuf* pkts[8];
  const uint16_t n = dispatch_->receive(dispatch_->control_target(), pkts, 8);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(frame_kind(pkts[0]), FrameKind::kNdpToControl);
  rte_pktmbuf_free(pkts[0]);
  const CoreStats& st = core(0).stats_st();
  EXPECT_EQ(st.to_control, 1u);
  EXPECT_EQ(st.ndp.to_control, 1u);
  EXPECT_EQ(st.ndp.drop(NdpDrop::kIcmp6NotForUs), 1u) << "another solicited-node group";
  EXPECT_EQ(st.total_drops(), 1u);
  EXPECT_TRUE(peer_receive().empty());
}

// UDP over IPv6 (RoCEv2's shape, port 4791) is not ICMPv6: the NDP classifier leaves it to the
// classifiers after it (today a drop as unsupported, RoCEv2 over IPv6 later) and counts nothing.
TEST_F(PollingCoreNdpTest, Ipv6UdpIsLeftToTheOtherClassifiers) {
  Bytes f(14 + 40 + 8 + 12, 0);
  test::put_mac(f.data(), kOurMac);
  test::put_mac(f.data() + 6, kPeerMac);
  test::put16(f.data() + 12, 0x86DD);
  f[14] = 0x60;
  test::put16(f.data() + 18, 20);
  f[20] = 17;  // UDP
  f[21] = 64;
  std::copy(kPeerIp6.bytes.begin(), kPeerIp6.bytes.end(), f.begin() + 22);
  std::copy(kOurIp6.bytes.begin(), kOurIp6.bytes.end(), f.begin() + 38);
  test::put16(f.data() + 54, 49152);
  test::put16(f.data() + 56, 4791);
  test::put16(f.data() + 58, 20);
  peer_send(f);
  EXPECT_TRUE(core(0).poll_once());
  const CoreStats& st = core(0).stats_st();
  EXPECT_EQ(st.ndp.total_drops(), 0u);
  EXPECT_EQ(st.ndp.to_control, 0u);
  EXPECT_EQ(st.ndp.na_sent + st.ndp.echo_replies, 0u);
  EXPECT_TRUE(peer_receive().empty());
}

// A port without an IPv6 address takes no part in neighbour discovery.
TEST_F(PollingCoreTest, WithoutAnIpv6AddressSolicitationsAreNotAnswered) {
  rte_mbuf* m = build_neighbor_solicitation(test::pool().get(), {kPeerMac, kPeerIp6}, kOurIp6);
  peer_send(test::to_bytes(m));
  rte_pktmbuf_free(m);
  EXPECT_TRUE(core(0).poll_once());
  EXPECT_TRUE(peer_receive().empty());
  EXPECT_EQ(core(0).stats_st().ndp.total_drops(), 0u);
  EXPECT_EQ(drops(0, drop_index(CoreDrop::kNotForUs)), 1u) << "a group MAC that is not ours";
}

}  // namespace
}  // namespace rocedp::dataplane
