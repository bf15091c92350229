// RoCEv2 over IPv6 (IBTA Annex A17.4.5.1). Against Linux rxe's own frames first:
// tests/transport/data/rxe-ipv6-pingpong.pcap is ibv_rc_pingpong -g 2 -n 3 -s 100 between two
// rdma_rxe guests of the rig (fd52::11 and fd52::12, QPN 0x11 each): the engine, in the server's
// place, answers the client's SEND with rxe's ACK and sends rxe's SEND, byte for byte. Then two
// engines whose QPs connect with IPv6 addresses: every frame is IPv6 with the QPs' addresses and
// traffic class; every operation completes byte-exact, through loss too; a frame from another
// address, or of the other IP version, is dropped as from a stranger; CE marks in the traffic
// class are answered with CNPs that carry the CNP class.

#include <cstring>
#include <string>

#include "dataplane/wire/builder.hpp"
#include "dataplane/wire/pcap_io.hpp"
#include "tests/common/tool_run.hpp"
#include "tests/transport/rc_harness.hpp"

namespace rocedp::rc::test {
namespace {

TEST(RcIpv6, AckAndSendMatchRxeByteForByte) {
  std::vector<wire::PcapFrame> frames;
  std::string err;
  ASSERT_TRUE(wire::read_pcap(
      rocedp::test::env("ROCEDP_SOURCE_DIR") + "/tests/transport/data/rxe-ipv6-pingpong.pcap",
      frames, err))
      << err;
  ASSERT_EQ(frames.size(), 12u);
  for (const wire::PcapFrame& f : frames) EXPECT_TRUE(parse_frame(f.data).f.ipv6());
  // The server: fd52::11, MAC 02:52:17:00:00:0b, QPN 0x11, PSN 0xcb465e; the client's PSN 0xec88ba.
  Host srv{0, 0xC612000B, 0x0b};
  Qp* q = nullptr;
  for (int i = 0; i < 16; ++i) q = &srv.qp();
  ASSERT_EQ(q->qp->qpn(), 0x11u);
  QpConnectParams p;
  p.remote_qpn = 0x11;
  p.ipv6 = true;
  p.local_ip6 = wire::Ipv6Addr{0xFD, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11};
  p.remote_ip6 = wire::Ipv6Addr{0xFD, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12};
  p.local_mac = srv.mac;
  p.remote_mac = wire::MacAddr{0x02, 0x52, 0x17, 0, 0, 0x0c};
  p.path_mtu = 1024;
  p.rq_psn = 0xec88ba;
  p.sq_psn = 0xcb465e;
  ASSERT_EQ(q->qp->connect(p), STATUS_SUCCESS);

  Buffer& rbuf = srv.buffer(100);
  ASSERT_EQ(q->rq->post(recv_wqe(tag(1), {rbuf.sge(0, 100)})), STATUS_SUCCESS);
  std::vector<wire::Bytes> in = {wire::Bytes(frames[0].data)};  // the client's SEND
  ASSERT_EQ(srv.eng->rx_burst_st(in, 0), 1u);
  srv.eng->poll_st(0);
  srv.eng->poll_st(0);
  ASSERT_EQ(srv.tx.size(), 1u);
  EXPECT_EQ(srv.tx[0], frames[1].data) << "rxe's ACK";
  const auto rc = q->recv_cqes();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].bytes_transferred, 100u);
  EXPECT_EQ(std::memcmp(rbuf.ptr(), parse_frame(frames[0].data).payload().data(), 100), 0);
  srv.tx.clear();

  // The server's SEND (frame 3), with the payload rxe carried.
  Buffer& sbuf = srv.buffer(100);
  std::memcpy(sbuf.ptr(), parse_frame(frames[2].data).payload().data(), 100);
  ASSERT_EQ(q->sq->post(send_wqe(SendOpcode::kSend, tag(2), {sbuf.sge(0, 100)})), STATUS_SUCCESS);
  srv.eng->poll_st(0);
  ASSERT_EQ(srv.tx.size(), 1u);
  EXPECT_EQ(srv.tx[0], frames[2].data) << "rxe's SEND";
  in = {wire::Bytes(frames[3].data)};  // the client's ACK of it
  ASSERT_EQ(srv.eng->rx_burst_st(in, 0), 1u);
  srv.eng->poll_st(0);
  const auto sc = q->send_cqes();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, STATUS_SUCCESS);
}

constexpr uint32_t kIpA = 0xC6120001, kIpB = 0xC6120002;

struct Ipv6Pair : ::testing::Test {
  Host a{0, kIpA, 1};
  Host b{0, kIpB, 2};
  Wire w{a, b};
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  ConnectOptions o;
  void SetUp() override {
    o.ipv6 = true;
    o.a_tos = 0x68;  // DSCP 26, not ECN-capable
    qa = &a.qp();
    qb = &b.qp();
    connect(a, *qa, b, *qb, o);
  }
  std::vector<NdkResultEx> send_completions(size_t n) {
    std::vector<NdkResultEx> sc;
    EXPECT_TRUE(w.run_until([&] {
      auto s = qa->send_cqes();
      sc.insert(sc.end(), s.begin(), s.end());
      return sc.size() >= n;
    })) << "only "
        << sc.size() << " of " << n << " completions";
    return sc;
  }
};

TEST_F(Ipv6Pair, WriteSendReadAndAtomicsCompleteByteExactInIpv6Frames) {
  constexpr uint32_t kLen = 5000;  // five packets at MTU 1024
  Buffer& src = a.buffer(kLen);
  Buffer& sink = a.buffer(kLen, kMrAll, 0x11);
  Buffer& word = a.buffer(8, kMrAll, 0);
  Buffer& dst = b.buffer(kLen, kMrAll, 0);
  Buffer& recv = b.buffer(kLen, kMrAll, 0);
  Buffer& remote = b.buffer(kLen);
  fill_pattern(src.ptr(), kLen, 1);
  fill_pattern(remote.ptr(), kLen, 2);
  std::memset(dst.ptr(), 0, 8);  // the atomic word at dst + 0 is written after the WRITE below

  ASSERT_EQ(qb->rq->post(recv_wqe(tag(10), {recv.sge(0, kLen)})), STATUS_SUCCESS);
  ASSERT_EQ(qa->sq->post(write_wqe(tag(1), src, dst, 0, kLen)), STATUS_SUCCESS);
  ASSERT_EQ(qa->sq->post(send_wqe(SendOpcode::kSend, tag(2), {src.sge(0, kLen)})), STATUS_SUCCESS);
  SendWqe rd = send_wqe(SendOpcode::kRead, tag(3), {sink.sge(0, kLen)});
  rd.remote_address = remote.va();
  rd.remote_token = remote.tokens.remote;
  ASSERT_EQ(qa->sq->post(rd), STATUS_SUCCESS);
  // Fenced: without it the responder may apply the add before it reads the READ's data.
  SendWqe fa = send_wqe(SendOpcode::kFetchAdd, tag(4), {word.sge(0, 8)}, NDK_OP_FLAG_READ_FENCE);
  fa.remote_address = remote.va();
  fa.remote_token = remote.tokens.remote;
  fa.swap_or_add = 5;
  ASSERT_EQ(qa->sq->post(fa), STATUS_SUCCESS);

  const std::vector<NdkResultEx> sc = send_completions(4);
  ASSERT_EQ(sc.size(), 4u);
  for (size_t i = 0; i < sc.size(); ++i) {
    EXPECT_EQ(sc[i].status, STATUS_SUCCESS) << i;
    EXPECT_EQ(sc[i].request_context, tag(i + 1));
  }
  uint64_t after = 0;
  std::memcpy(&after, remote.ptr(), 8);
  EXPECT_EQ(std::memcmp(src.ptr(), dst.ptr(), kLen), 0);
  EXPECT_EQ(std::memcmp(src.ptr(), recv.ptr(), kLen), 0);
  uint64_t orig = 0;
  std::memcpy(&orig, word.ptr(), 8);
  EXPECT_EQ(after, orig + 5);
  uint64_t first = 0;
  std::memcpy(&first, sink.ptr(), 8);
  EXPECT_EQ(first, orig) << "the READ ran before the fetch-add changed the word";
  EXPECT_EQ(std::memcmp(sink.ptr() + 8, remote.ptr() + 8, kLen - 8), 0);
  const auto rc = qb->recv_cqes();
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].bytes_transferred, kLen);

  // Every frame of both sides: IPv6, the QPs' addresses, A's class, hop limit 64, valid ICRC.
  size_t frames = 0;
  for (Host* h : {&a, &b}) {
    for (const Frame& f : h->log) {
      const wire::ParsedPacket p = parse_frame(f);
      ASSERT_TRUE(p.f.ipv6());
      const bool from_a = h == &a;
      EXPECT_EQ(p.f.ip6.src, host_ipv6(from_a ? kIpA : kIpB));
      EXPECT_EQ(p.f.ip6.dst, host_ipv6(from_a ? kIpB : kIpA));
      EXPECT_EQ(p.f.ip6.traffic_class, from_a ? 0x68 : 0);
      EXPECT_EQ(p.f.ip6.hop_limit, 64);
      EXPECT_EQ(p.f.ip6.payload_len, f.size() - wire::kEthHdrLen - wire::kIpv6HdrLen);
      EXPECT_EQ(p.f.udp.dst_port, wire::kRoceV2UdpPort);
      ++frames;
    }
  }
  EXPECT_GE(frames, 5u + 5u + 1u + 5u + 2u);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kRxDropSource), 0u);
  EXPECT_EQ(b.eng->counters().get(RcCounter::kRxDropSource), 0u);
}

// A's next WRITE, built again from its parsed fields with `edit` applied (ICRC recomputed), and
// handed to B: B must drop it as not from its peer, and complete nothing.
void expect_stranger_dropped(Ipv6Pair& t, const std::function<void(wire::PacketFields&)>& edit) {
  Buffer& src = t.a.buffer(64);
  Buffer& dst = t.b.buffer(64, kMrAll, 0);
  fill_pattern(src.ptr(), 64, 3);
  ASSERT_EQ(t.qa->sq->post(write_wqe(tag(1), src, dst, 0, 64)), STATUS_SUCCESS);
  ASSERT_TRUE(t.a.eng->poll_st(t.w.now));
  ASSERT_EQ(t.a.tx.size(), 1u);
  const wire::ParsedPacket p = parse_frame(t.a.tx[0]);
  t.a.tx.clear();
  wire::PacketFields f = p.f;
  edit(f);
  Frame out(wire::frame_len(f, 64));
  ASSERT_EQ(wire::build_frame(out, f, wire::Bytes(src.ptr(), 64)), out.size());
  std::vector<wire::Bytes> in = {wire::Bytes(out)};
  EXPECT_EQ(t.b.eng->rx_burst_st(in, t.w.now), 1u);
  EXPECT_EQ(t.b.eng->counters().get(RcCounter::kRxDropSource), 1u);
  t.b.eng->poll_st(t.w.now);
  EXPECT_TRUE(t.b.tx.empty()) << "no ACK for a stranger's WRITE";
  EXPECT_EQ(dst.data[0], 0);
}

TEST_F(Ipv6Pair, AFrameFromAnotherIpv6SourceIsDropped) {
  expect_stranger_dropped(*this, [](wire::PacketFields& f) { f.ip6.src[15] ^= 1; });
}

TEST_F(Ipv6Pair, AFrameToAnotherIpv6DestinationIsDropped) {
  expect_stranger_dropped(*this, [](wire::PacketFields& f) { f.ip6.dst[0] ^= 0x80; });
}

TEST_F(Ipv6Pair, AnIpv4FrameToAnIpv6QpIsDropped) {
  expect_stranger_dropped(*this, [](wire::PacketFields& f) {
    f.eth.ethertype = wire::kEtherTypeIpv4;
    f.ip = wire::Ipv4Fields{};
    f.ip.src = kIpA;
    f.ip.dst = kIpB;
  });
}

TEST(RcIpv6, AnIpv6FrameToAnIpv4QpIsDropped) {
  Host a{0, kIpA, 1};
  Host b{0, kIpB, 2};
  Wire w{a, b};
  Qp& qa = a.qp();
  Qp& qb = b.qp();
  connect(a, qa, b, qb);
  Buffer& src = a.buffer(64);
  Buffer& dst = b.buffer(64, kMrAll, 0);
  ASSERT_EQ(qa.sq->post(write_wqe(tag(1), src, dst, 0, 64)), STATUS_SUCCESS);
  ASSERT_TRUE(a.eng->poll_st(w.now));
  ASSERT_EQ(a.tx.size(), 1u);
  wire::PacketFields f = parse_frame(a.tx[0]).f;
  f.eth.ethertype = wire::kEtherTypeIpv6;
  f.ip6.src = wire::ipv4_mapped(kIpA);  // even as IPv4-mapped addresses
  f.ip6.dst = wire::ipv4_mapped(kIpB);
  Frame out(wire::frame_len(f, 64));
  ASSERT_EQ(wire::build_frame(out, f, wire::Bytes(src.ptr(), 64)), out.size());
  std::vector<wire::Bytes> in = {wire::Bytes(out)};
  EXPECT_EQ(b.eng->rx_burst_st(in, w.now), 1u);
  EXPECT_EQ(b.eng->counters().get(RcCounter::kRxDropSource), 1u);
}

// 2,000 WRITEs, SENDs and READs of up to 3 packets through 10% loss, 5% reordering, 1%
// duplication and 1% corruption each way: every one completes once, in order, byte-exact.
TEST_F(Ipv6Pair, EveryOperationExactlyOnceThroughLossReorderDuplicationAndCorruption) {
  Faults faults;
  faults.drop = 0.10;
  faults.reorder = 0.05;
  faults.duplicate = 0.01;
  faults.corrupt = 0.01;
  w.faults = &faults;
  constexpr uint32_t kOps = 2000, kSlot = 3000, kSlots = 16;
  Buffer& src = a.buffer(kSlot * kSlots);
  Buffer& sink = a.buffer(kSlot * kSlots, kMrAll, 0);
  Buffer& dst = b.buffer(kSlot * kSlots, kMrAll, 0);
  Buffer& recv = b.buffer(kSlot * kSlots, kMrAll, 0);
  Buffer& remote = b.buffer(kSlot * kSlots);
  fill_pattern(remote.ptr(), kSlot * kSlots, 9);
  uint32_t posted = 0, done = 0, received = 0;
  std::vector<uint32_t> sizes(kOps);
  while (done < kOps) {
    while (posted < kOps && posted - done < kSlots) {
      const uint32_t i = posted;
      const uint32_t off = (i % kSlots) * kSlot;
      const uint32_t len = 1 + (i * 977) % kSlot;
      sizes[i] = len;
      fill_pattern(src.ptr() + off, len, i);
      SendWqe wr;
      switch (i % 3) {
        case 0:
          wr = write_wqe(tag(i), src, dst, off, len);
          break;
        case 1:
          ASSERT_EQ(qb->rq->post(recv_wqe(tag(i), {recv.sge(off, kSlot)})), STATUS_SUCCESS);
          wr = send_wqe(SendOpcode::kSend, tag(i), {src.sge(off, len)});
          break;
        default:
          wr = send_wqe(SendOpcode::kRead, tag(i), {sink.sge(off, len)});
          wr.remote_address = remote.va() + off;
          wr.remote_token = remote.tokens.remote;
      }
      ASSERT_EQ(qa->sq->post(wr), STATUS_SUCCESS);
      ++posted;
    }
    uint32_t got = 0;
    ASSERT_TRUE(w.run_until([&] {
      for (const NdkResultEx& r : qa->send_cqes()) {
        const auto i = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(r.request_context));
        EXPECT_EQ(i, done) << "completions in posting order, each once";
        EXPECT_EQ(r.status, STATUS_SUCCESS);
        const uint32_t off = (i % kSlots) * kSlot;
        if (i % 3 == 0) {
          EXPECT_EQ(std::memcmp(src.ptr() + off, dst.ptr() + off, sizes[i]), 0) << i;
        } else if (i % 3 == 2) {
          EXPECT_EQ(std::memcmp(remote.ptr() + off, sink.ptr() + off, sizes[i]), 0) << i;
        }
        ++done;
        ++got;
      }
      for (const NdkResultEx& r : qb->recv_cqes()) {
        const auto i = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(r.request_context));
        EXPECT_EQ(r.bytes_transferred, sizes[i]);
        EXPECT_EQ(std::memcmp(src.ptr() + (i % kSlots) * kSlot, recv.ptr() + (i % kSlots) * kSlot,
                              sizes[i]),
                  0)
            << i;
        ++received;
      }
      return got > 0;
    }));
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_EQ(received, (kOps + 1) / 3);
  EXPECT_GT(a.eng->counters().get(RcCounter::kTxRetransmit) +
                b.eng->counters().get(RcCounter::kTxRetransmit),
            0u);
}

// A CE mark in the traffic class of B's frames: A answers with a CNP in the CNP class, over IPv6,
// and B's rate is cut (B is ECN-capable).
TEST(RcIpv6, CeMarksAreAnsweredWithIpv6Cnps) {
  Host a{0, kIpA, 1};
  Host b{0, kIpB, 2};
  Wire w{a, b};
  Qp& qa = a.qp();
  Qp& qb = b.qp();
  ConnectOptions o;
  o.ipv6 = true;
  o.b_tos = wire::kEcnEct0;
  o.cnp_tos = 48 << 2;
  connect(a, qa, b, qb, o);
  w.mark_ce_if = [](bool ab) { return !ab; };
  Buffer& src = b.buffer(4096);
  Buffer& dst = a.buffer(4096, kMrAll, 0);
  fill_pattern(src.ptr(), 4096, 4);
  ASSERT_EQ(qb.sq->post(write_wqe(tag(1), src, dst, 0, 4096)), STATUS_SUCCESS);
  ASSERT_TRUE(w.run_until([&] { return !qb.send_cqes().empty(); }));
  EXPECT_EQ(std::memcmp(src.ptr(), dst.ptr(), 4096), 0);
  EXPECT_GT(w.marked, 0u);
  EXPECT_GT(a.eng->counters().get(RcCounter::kRxCe), 0u);
  size_t cnps = 0;
  for (const Frame& f : a.log) {
    const wire::ParsedPacket p = parse_frame(f);
    ASSERT_TRUE(p.f.ipv6());
    if (p.f.bth.opcode != wire::opcode::kCnp) continue;
    ++cnps;
    EXPECT_EQ(p.f.ip6.traffic_class, 48 << 2);
    EXPECT_EQ(p.f.ip6.dst, host_ipv6(kIpB));
    EXPECT_TRUE(p.f.bth.becn);
  }
  EXPECT_GT(cnps, 0u);
  EXPECT_EQ(cnps, a.eng->counters().get(RcCounter::kTxCnp));
  EXPECT_GT(qb.qp->cc.rate_cuts, 0u);
}

}  // namespace
}  // namespace rocedp::rc::test
