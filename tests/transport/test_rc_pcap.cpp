// Wire check: the frames of a run that uses every RC opcode the engine emits (SEND
// FIRST/MIDDLE/LAST/ONLY with and without immediate/invalidate, WRITE FIRST..LAST_IMM, READ
// request/responses, atomics and atomic ACKs, ACK, RNR NAK, sequence NAK, remote access NAK)
// go to $ROCEDP_ARTIFACT_DIR/rc-engine-traffic.pcap, and ../shared/tools/roce-check must accept
// them. The same run over IPv6 goes to rc-engine-traffic-ipv6.pcap.

#include <sys/wait.h>

#include <cstdlib>
#include <set>
#include <string>

#include "dataplane/wire/pcap_io.hpp"
#include "tests/common/tool_run.hpp"
#include "tests/transport/rc_harness.hpp"

namespace rocedp::rc::test {
namespace {

void every_opcode_passes_roce_check(bool ipv6, const std::string& name) {
  const char* art = std::getenv("ROCEDP_ARTIFACT_DIR");
  const char* shared = std::getenv("ROCEDP_SHARED_DIR");
  ASSERT_NE(art, nullptr);
  ASSERT_NE(shared, nullptr);
  Host a{0, 0xC6120001, 1};
  Host b{0, 0xC6120002, 2};
  Wire w{a, b};
  Qp& qa = a.qp();
  Qp& qb = b.qp();
  ConnectOptions o;
  o.ipv6 = ipv6;
  connect(a, qa, b, qb, o);
  Buffer& src = a.buffer(8192);
  Buffer& dst = b.buffer(8192);
  Buffer& res = a.buffer(64);
  fill_pattern(src.ptr(), 8192, 1);
  fill_pattern(dst.ptr(), 8192, 2);

  // RNR NAK first: a SEND before any receive is posted.
  ASSERT_EQ(qa.sq->post(send_wqe(SendOpcode::kSend, tag(0), {src.sge(0, 3000)})), STATUS_SUCCESS);
  w.step();
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(qb.rq->post(recv_wqe(tag(i), {dst.sge(0, 8192)})), STATUS_SUCCESS);
  SendWqe imm = send_wqe(SendOpcode::kSend, tag(1), {src.sge(0, 2500)});
  imm.has_immediate = true;
  ASSERT_EQ(qa.sq->post(imm), STATUS_SUCCESS);
  MrTokens fr;
  ASSERT_EQ(b.mrs->create_fast_register(1, 1, true, &fr), STATUS_SUCCESS);
  SendWqe inv = send_wqe(SendOpcode::kSendAndInvalidate, tag(2), {src.sge(0, 1500)});
  inv.invalidate_token = fr.remote;  // region in the invalid state: invalidating it again is fine
  ASSERT_EQ(qa.sq->post(inv), STATUS_SUCCESS);
  SendWqe wr = send_wqe(SendOpcode::kWrite, tag(3), {src.sge(0, 3000)});
  wr.remote_address = dst.va();
  wr.remote_token = dst.tokens.remote;
  wr.has_immediate = true;
  ASSERT_EQ(qa.sq->post(wr), STATUS_SUCCESS);
  wr.has_immediate = false;
  wr.request_context = tag(4);
  ASSERT_EQ(qa.sq->post(wr), STATUS_SUCCESS);
  SendWqe rd = send_wqe(SendOpcode::kRead, tag(5), {src.sge(0, 5000)});
  rd.remote_address = dst.va();
  rd.remote_token = dst.tokens.remote;
  ASSERT_EQ(qa.sq->post(rd), STATUS_SUCCESS);
  SendWqe fa = send_wqe(SendOpcode::kFetchAdd, tag(6), {res.sge(0, 8)});
  fa.remote_address = dst.va() + 8;
  fa.remote_token = dst.tokens.remote;
  fa.swap_or_add = 3;
  ASSERT_EQ(qa.sq->post(fa), STATUS_SUCCESS);
  SendWqe cs = fa;
  cs.opcode = SendOpcode::kCompareSwap;
  cs.request_context = tag(7);
  ASSERT_EQ(qa.sq->post(cs), STATUS_SUCCESS);
  w.now += 1'000'000;
  // Lose one packet of the next multi-packet WRITE: sequence NAK + go-back-N on the wire.
  SendWqe wr2 = wr;
  wr2.request_context = tag(8);
  w.settle(100);
  ASSERT_EQ(qa.send_cqes().size(), 8u);
  ASSERT_EQ(qa.sq->post(wr2), STATUS_SUCCESS);
  a.eng->poll_st(w.now);
  ASSERT_GE(a.tx.size(), 3u);
  a.tx.erase(a.tx.begin());
  w.settle(100);
  // Remote access NAK last (it moves both QPs to ERROR).
  SendWqe bad = wr;
  bad.request_context = tag(9);
  bad.remote_token ^= 0x100;
  ASSERT_EQ(qa.sq->post(bad), STATUS_SUCCESS);
  w.settle(100);
  EXPECT_EQ(qa.qp->state(), QpState::kError);

  std::set<uint8_t> opcodes;
  std::set<uint8_t> syndromes;
  wire::PcapWriter writer;
  const std::string path = std::string(art) + "/" + name;
  ASSERT_TRUE(writer.open(path)) << writer.error();
  for (Host* h : {&a, &b}) {
    for (const Frame& f : h->log) {
      const wire::ParsedPacket p = parse_frame(f);
      EXPECT_EQ(p.f.ipv6(), ipv6);
      opcodes.insert(p.f.bth.opcode);
      if (p.f.bth.opcode == wire::opcode::kRcAck)
        syndromes.insert(p.f.aeth.syndrome & 0xE0 ? p.f.aeth.syndrome : 0);
      writer.write(wire::Bytes(f.data(), f.size()));
    }
  }
  writer.close();
  using namespace wire::opcode;
  for (uint8_t op :
       {kRcSendFirst, kRcSendMiddle, kRcSendLast, kRcSendLastImm, kRcSendLastInv, kRcWriteFirst,
        kRcWriteMiddle, kRcWriteLast, kRcWriteLastImm, kRcReadRequest, kRcReadRespFirst,
        kRcReadRespMiddle, kRcReadRespLast, kRcAck, kRcAtomicAck, kRcCompareSwap, kRcFetchAdd}) {
    EXPECT_TRUE(opcodes.count(op)) << "opcode " << int(op) << " missing from the run";
  }
  EXPECT_TRUE(syndromes.count(wire::kAethNakPsnSeqError));
  EXPECT_TRUE(syndromes.count(wire::kAethNakRemoteAccess));
  EXPECT_TRUE(syndromes.count(wire::kAethRnrNak | 1));

  const rocedp::test::RunResult r =
      ipv6 ? rocedp::test::roce_check_ipv6(path) : rocedp::test::roce_check(path);
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST(RcPcap, TrafficOfEveryOpcodePassesRoceCheck) {
  every_opcode_passes_roce_check(false, "rc-engine-traffic.pcap");
}

TEST(RcPcap, TrafficOfEveryOpcodeOverIpv6PassesRoceCheck) {
  every_opcode_passes_roce_check(true, "rc-engine-traffic-ipv6.pcap");
}

}  // namespace
}  // namespace rocedp::rc::test
