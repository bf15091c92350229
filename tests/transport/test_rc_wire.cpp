// Byte compatibility with Linux rxe: the engine answers the SEND of ../shared/captures/
// rxe-rping.pcap with the same ACK rxe sent, issues the same READ request, and completes the
// READ from rxe's response. Fields compared one by one (only the IPv4 identification and
// checksum, a per-host counter, may differ).

#include <cstdlib>
#include <string>

#include "dataplane/wire/builder.hpp"
#include "dataplane/wire/pcap_io.hpp"
#include "tests/transport/rc_harness.hpp"
#include "tests/wire/wire_test_util.hpp"

namespace rocedp::rc::test {
namespace {

std::vector<wire::PcapFrame> capture() {
  const char* dir = std::getenv("ROCEDP_SHARED_DIR");
  std::vector<wire::PcapFrame> frames;
  std::string err;
  EXPECT_NE(dir, nullptr);
  if (dir == nullptr) return frames;
  EXPECT_TRUE(wire::read_pcap(std::string(dir) + "/captures/rxe-rping.pcap", frames, err)) << err;
  return frames;
}

void expect_same_fields(const wire::ParsedPacket& ours, const wire::ParsedPacket& rxe) {
  wire::PacketFields a = ours.f;
  wire::PacketFields b = rxe.f;
  EXPECT_EQ(a.eth, b.eth);
  EXPECT_EQ(a.ip.tos, b.ip.tos);
  EXPECT_EQ(a.ip.ttl, b.ip.ttl);
  EXPECT_EQ(a.ip.flags_frag, b.ip.flags_frag);
  EXPECT_EQ(a.ip.total_len, b.ip.total_len);
  EXPECT_EQ(a.ip.src, b.ip.src);
  EXPECT_EQ(a.ip.dst, b.ip.dst);
  EXPECT_EQ(a.udp, b.udp) << "source port " << a.udp.src_port << " vs " << b.udp.src_port;
  EXPECT_EQ(a.bth, b.bth);
  EXPECT_EQ(a.reth, b.reth);
  EXPECT_EQ(a.aeth, b.aeth);
  a.ip.id = b.ip.id;
  a.ip.checksum = b.ip.checksum;
  EXPECT_EQ(a, b);
  EXPECT_EQ(ours.frame.size(), rxe.frame.size());
}

TEST(RcWire, AckAndReadRequestMatchRxeAndRxeReadResponseCompletes) {
  auto frames = capture();
  ASSERT_GE(frames.size(), 9u);
  // The capture's server side: 198.18.0.11, QPN 0x11; the client is 198.18.0.12, QPN 0x11.
  Host b{0, 0xC6120000 | 11, 0x0b};
  Host peer{1, 0xC6120000 | 12, 0x0c};
  Qp* q = nullptr;
  for (int i = 0; i < 16; ++i) q = &b.qp();
  ASSERT_EQ(q->qp->qpn(), 0x11u);
  QpConnectParams p;
  p.remote_qpn = 0x11;
  p.local_ip = b.ip;
  p.remote_ip = peer.ip;
  p.local_mac = b.mac;
  p.remote_mac = peer.mac;
  p.flow_label = 0x6427B;  // rdma_cm's flow label of this connection (udp_sport.hpp)
  p.path_mtu = 1024;
  p.rq_psn = 516535;
  p.sq_psn = 13184058;
  ASSERT_EQ(q->qp->connect(p), STATUS_SUCCESS);

  Buffer& rbuf = b.buffer(64);
  ASSERT_EQ(q->rq->post(recv_wqe(tag(1), {rbuf.sge(0, 64)})), STATUS_SUCCESS);
  std::vector<wire::Bytes> in = {wire::Bytes(frames[5].data)};  // frame 6: SEND_ONLY
  ASSERT_EQ(b.eng->rx_burst_st(in, 0), 1u);
  b.eng->poll_st(0);
  EXPECT_TRUE(b.tx.empty()) << "a lone request's ACK waits one poll for the consumer's answer";
  b.eng->poll_st(0);
  ASSERT_EQ(b.tx.size(), 1u);
  {
    const wire::ParsedPacket ours = parse_frame(b.tx[0]);
    const wire::ParsedPacket rxe = parse_frame(frames[6].data);  // frame 7: ACK
    expect_same_fields(ours, rxe);
  }
  auto rc = q->recv_cqes();
  ASSERT_EQ(rc.size(), 1u);
  const wire::ParsedPacket send = parse_frame(frames[5].data);
  EXPECT_EQ(rc[0].bytes_transferred, send.payload_len);
  EXPECT_EQ(std::memcmp(rbuf.ptr(), send.payload().data(), send.payload_len), 0);
  b.tx.clear();

  // The READ rping's server issued (frame 8), then rxe's response (frame 9).
  Buffer& sink = b.buffer(64, kMrAll, 0);
  SendWqe rd = send_wqe(SendOpcode::kRead, tag(2), {sink.sge(0, 64)});
  rd.remote_address = 0x000055d1c8455d50;
  rd.remote_token = 0x526;
  ASSERT_EQ(q->sq->post(rd), STATUS_SUCCESS);
  b.eng->poll_st(0);
  ASSERT_EQ(b.tx.size(), 1u);
  {
    const wire::ParsedPacket ours = parse_frame(b.tx[0]);
    const wire::ParsedPacket rxe = parse_frame(frames[7].data);
    expect_same_fields(ours, rxe);
  }
  in = {wire::Bytes(frames[8].data)};
  ASSERT_EQ(b.eng->rx_burst_st(in, 0), 1u);
  b.eng->poll_st(0);
  auto sc = q->send_cqes();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, STATUS_SUCCESS);
  const wire::ParsedPacket resp = parse_frame(frames[8].data);
  ASSERT_EQ(resp.payload_len, 64u);
  EXPECT_EQ(std::memcmp(sink.ptr(), resp.payload().data(), 64), 0);
}

TEST(RcWire, CorruptFrameIsDroppedOnIcrc) {
  auto frames = capture();
  ASSERT_GE(frames.size(), 9u);
  Host b{0, 0xC6120000 | 11, 0x0b};
  Frame bad = frames[5].data;
  bad[bad.size() - 10] ^= 1;
  std::vector<wire::Bytes> in = {wire::Bytes(bad)};
  EXPECT_EQ(b.eng->rx_burst_st(in, 0), 0u);
  EXPECT_EQ(b.eng->wire_drops()[static_cast<size_t>(wire::DropReason::kBadIcrc)], 1u);
  // A valid frame for a QPN this core does not have.
  in = {wire::Bytes(frames[5].data)};
  b.eng->rx_burst_st(in, 0);
  EXPECT_EQ(b.eng->counters().get(RcCounter::kRxDropNoQp), 1u);
  // The same frame in another partition (P_Key 0x1234, ICRC resealed): dropped as such before
  // its QPN is looked at.
  Frame other = frames[5].data;
  wire::store_be16(other.data() + 42 + 2, 0x1234);
  wire::test::reseal(other);
  in = {wire::Bytes(other)};
  EXPECT_EQ(b.eng->rx_burst_st(in, 0), 0u);
  EXPECT_EQ(b.eng->wire_drops()[static_cast<size_t>(wire::DropReason::kBadPkey)], 1u);
  EXPECT_EQ(b.eng->counters().get(RcCounter::kRxDropNoQp), 1u);
}

// Every frame handed to the engine ends in exactly one counter: the wire drops (codec), or the
// frames it took (rx_burst_st's return), which its RC counters then account for: non-RC opcodes
// to a live QPN included (they once landed in no counter of the core's identity).
TEST(RcWire, EveryFrameLandsInExactlyOneCounter) {
  auto frames = capture();
  ASSERT_GE(frames.size(), 9u);
  Host b{0, 0xC6120000 | 11, 0x0b};
  auto craft = [&](uint8_t opcode, size_t payload_len) {
    const wire::ParsedPacket send = parse_frame(frames[5].data);
    wire::PacketFields f = send.f;
    f.bth.opcode = opcode;
    f.deth.qkey = 0x80010000;
    f.deth.src_qp = 1;
    std::vector<uint8_t> payload(payload_len, 0x5a);
    Frame out(wire::frame_len(f, payload_len));
    EXPECT_EQ(wire::build_frame(out, f, wire::Bytes(payload.data(), payload.size())), out.size());
    return out;
  };
  Frame bad = frames[5].data;
  bad[bad.size() - 10] ^= 1;
  const std::vector<Frame> set = {craft(wire::opcode::kUdSendOnly, 8),
                                  craft(wire::opcode::kUdSendOnlyImm, 8),
                                  craft(wire::opcode::kCnp, wire::kCnpReservedLen),
                                  bad,
                                  Frame(frames[5].data.begin(), frames[5].data.begin() + 40),
                                  frames[5].data};
  std::vector<wire::Bytes> in;
  in.reserve(set.size());
  for (const Frame& f : set) in.emplace_back(f);
  const uint32_t taken = b.eng->rx_burst_st(in, 0);
  uint64_t codec = 0;
  for (uint64_t v : b.eng->wire_drops()) codec += v;
  EXPECT_EQ(taken + codec, set.size());
  EXPECT_EQ(codec, 2u) << "bad ICRC and the truncated frame";
  EXPECT_EQ(b.eng->counters().get(RcCounter::kRxDropNotRc), 2u);
  EXPECT_EQ(b.eng->counters().get(RcCounter::kRxCnp), 1u);
  EXPECT_EQ(b.eng->counters().get(RcCounter::kRxDropNoQp), 1u);
  EXPECT_EQ(taken, 4u);
}

}  // namespace
}  // namespace rocedp::rc::test
