// Conformance of the CM codec against real Linux traffic and independent
// decoders: every CM packet of the rping capture (Linux rdma_cm over rxe)
// decodes into the values tshark shows and re-encodes to the identical MAD and
// frame; frames we build for every message type pass ../shared/tools/roce-check
// (scapy ICRC + tshark's CM dissector, no malformed frames).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dataplane/wire/cm_messages.hpp"
#include "dataplane/wire/parser.hpp"
#include "dataplane/wire/pcap_io.hpp"
#include "tests/common/tool_run.hpp"

namespace rocedp::wire {
namespace {

using rocedp::test::env;
using rocedp::test::run;
using rocedp::test::RunResult;

struct CapturedCm {
  std::vector<std::uint8_t> frame;
  ParsedPacket pkt;
  CmMad mad;
};

std::vector<CapturedCm> captured_cm() {
  std::vector<PcapFrame> frames;
  std::string err;
  const std::string path = env("ROCEDP_SHARED_DIR") + "/captures/rxe-rping.pcap";
  EXPECT_TRUE(read_pcap(path, frames, err)) << err;
  std::vector<CapturedCm> out;
  for (auto& fr : frames) {
    CapturedCm c;
    c.frame = fr.data;
    if (parse(c.frame, c.pkt) != DropReason::kNone) continue;
    if (c.pkt.f.bth.opcode != opcode::kUdSendOnly || c.pkt.f.bth.dqpn != kGsiQpn) continue;
    EXPECT_EQ(decode_cm_mad(c.pkt.payload(), c.mad), CmDecodeStatus::kOk);
    out.push_back(std::move(c));
  }
  for (auto& c : out) c.pkt.frame = c.frame;  // re-point after the vector settled
  return out;
}

TEST(CmConformance, RpingCaptureDecodesToTsharksValues) {
  const auto cms = captured_cm();
  ASSERT_EQ(cms.size(), 5u) << "REQ, REP, RTU, DREQ, DREP";
  for (const auto& c : cms) EXPECT_EQ(c.mad.hdr.tid, 0x00000002d8784b58ull);

  // Frame 3: CM ConnectRequest (tshark -V).
  const auto& req = std::get<CmReq>(cms[0].mad.body);
  EXPECT_EQ(req.local_comm_id, 0x584b78d8u);
  EXPECT_EQ(req.service_id, 0x0000000001061c06ull);
  EXPECT_TRUE(is_rdma_cm_tcp_service(req.service_id));
  EXPECT_EQ(rdma_cm_port(req.service_id), 0x1c06);
  EXPECT_EQ(req.local_ca_guid, 0x005217fffe00000cull);
  EXPECT_EQ(req.local_qkey, 0u);
  EXPECT_EQ(req.local_qpn, 0x11u);
  EXPECT_EQ(req.responder_resources, 1);
  EXPECT_EQ(req.initiator_depth, 1);
  EXPECT_EQ(req.remote_cm_response_timeout, 0x14);
  EXPECT_EQ(req.transport_service_type, 0);
  EXPECT_FALSE(req.end_to_end_flow_control);
  EXPECT_EQ(req.starting_psn, 0xc92c3au);
  EXPECT_EQ(req.local_cm_response_timeout, 0x14);
  EXPECT_EQ(req.retry_count, 7);
  EXPECT_EQ(req.pkey, 0xffff);
  EXPECT_EQ(req.path_mtu, 3);
  EXPECT_EQ(req.rnr_retry_count, 7);
  EXPECT_EQ(req.max_cm_retries, 0xf);
  EXPECT_FALSE(req.srq);
  EXPECT_EQ(req.primary.local_lid, 0xFFFF);
  EXPECT_EQ(req.primary.remote_lid, 0xFFFF);
  EXPECT_EQ(req.primary.local_gid, gid_from_ipv4(0xC612000C));   // 198.18.0.12
  EXPECT_EQ(req.primary.remote_gid, gid_from_ipv4(0xC612000B));  // 198.18.0.11
  // tshark 4.x shows "Primary Flow Label: 0x00642 / Packet Rate: 0x24": its
  // dissector reads the 20-bit field from a 3-byte item. The bytes are
  // 64 27 b0 00, which Linux (CM_REQ_PRIMARY_FLOW_LABEL = top 20 bits of the
  // 32-bit word at 88, PACKET_RATE = byte 91 bits 2-7) reads as 0x6427b and 0.
  EXPECT_EQ(req.primary.flow_label, 0x6427bu);
  EXPECT_EQ(req.primary.packet_rate, 0);
  EXPECT_EQ(req.primary.traffic_class, 0);
  EXPECT_EQ(req.primary.hop_limit, 0x40);
  EXPECT_EQ(req.primary.sl, 0);
  EXPECT_FALSE(req.primary.subnet_local);
  EXPECT_EQ(req.primary.local_ack_timeout, 0x13);
  EXPECT_EQ(req.alternate, (CmPath{0, 0}));
  CmaHeader cma;
  ASSERT_TRUE(decode_cma_header(req.private_data.data(), cma));
  EXPECT_EQ(cma.src_port, 0xb6eb);
  EXPECT_EQ(cma.src_ip, 0xC612000Cu);
  EXPECT_EQ(cma.dst_ip, 0xC612000Bu);

  // Frame 4: CM ConnectReply.
  const auto& rep = std::get<CmRep>(cms[1].mad.body);
  EXPECT_EQ(rep.local_comm_id, 0x3cada2a6u);
  EXPECT_EQ(rep.remote_comm_id, 0x584b78d8u);
  EXPECT_EQ(rep.local_qkey, 0u);
  EXPECT_EQ(rep.local_qpn, 0x11u);
  EXPECT_EQ(rep.local_eecn, 0u);
  EXPECT_EQ(rep.starting_psn, 0x07e1b7u);
  EXPECT_EQ(rep.responder_resources, 1);
  EXPECT_EQ(rep.initiator_depth, 1);
  EXPECT_EQ(rep.target_ack_delay, 0x0f);
  EXPECT_EQ(rep.failover_accepted, 0);
  EXPECT_FALSE(rep.end_to_end_flow_control);
  EXPECT_EQ(rep.rnr_retry_count, 7);
  EXPECT_FALSE(rep.srq);
  EXPECT_EQ(rep.local_ca_guid, 0x005217fffe00000bull);

  // Frame 5: RTU; frames 126/127: DREQ / DREP.
  const auto& rtu = std::get<CmRtu>(cms[2].mad.body);
  EXPECT_EQ(rtu.local_comm_id, 0x584b78d8u);
  EXPECT_EQ(rtu.remote_comm_id, 0x3cada2a6u);
  const auto& dreq = std::get<CmDreq>(cms[3].mad.body);
  EXPECT_EQ(dreq.local_comm_id, 0x584b78d8u);
  EXPECT_EQ(dreq.remote_comm_id, 0x3cada2a6u);
  EXPECT_EQ(dreq.remote_qpn_eecn, 0x11u);
  const auto& drep = std::get<CmDrep>(cms[4].mad.body);
  EXPECT_EQ(drep.local_comm_id, 0x3cada2a6u);
  EXPECT_EQ(drep.remote_comm_id, 0x584b78d8u);
}

TEST(CmConformance, RpingCaptureReencodesToIdenticalMadsAndFrames) {
  for (const auto& c : captured_cm()) {
    const auto mad = encode_cm_mad(c.mad);
    const Bytes orig = c.pkt.payload();
    ASSERT_EQ(orig.size(), kMadLen);
    EXPECT_TRUE(std::equal(mad.begin(), mad.end(), orig.begin())) << cm_message_name(c.mad.hdr);

    // The whole frame from its addressing: Ethernet, IPv4 (DF, TTL 64), UDP, BTH, DETH, MAD, ICRC.
    CmFrameAddr a;
    a.src_mac = c.pkt.f.eth.src;
    a.dst_mac = c.pkt.f.eth.dst;
    a.src_ip = c.pkt.f.ip.src;
    a.dst_ip = c.pkt.f.ip.dst;
    a.tos = c.pkt.f.ip.tos;
    a.ip_id = c.pkt.f.ip.id;
    a.udp_src_port = c.pkt.f.udp.src_port;
    a.psn = c.pkt.f.bth.psn;
    std::vector<std::uint8_t> out(kCmFrameLen);
    ASSERT_EQ(build_cm_frame(out, a, c.mad), kCmFrameLen);
    EXPECT_EQ(out, std::vector<std::uint8_t>(c.frame.begin(), c.frame.begin() + kCmFrameLen))
        << cm_message_name(c.mad.hdr);
  }
}

// One frame per message type with non-trivial values, as our CM would send them.
std::vector<CmMad> every_message_type() {
  std::vector<CmMad> v;
  CmReq req;
  req.local_comm_id = 0x10000001;
  req.service_id = rdma_cm_service_id(18515);
  req.local_ca_guid = ca_guid_from_mac({0x02, 0, 0, 0, 0, 1});
  req.local_qpn = 0x000102;
  req.responder_resources = 16;
  req.initiator_depth = 16;
  req.remote_cm_response_timeout = 20;
  req.starting_psn = 0x123456;
  req.local_cm_response_timeout = 20;
  req.retry_count = 7;
  req.path_mtu = 3;
  req.rnr_retry_count = 7;
  req.max_cm_retries = 15;
  req.primary.local_gid = gid_from_ipv4(0x0A000001);
  req.primary.remote_gid = gid_from_ipv4(0x0A000002);
  req.primary.hop_limit = 64;
  req.primary.local_ack_timeout = 19;
  encode_cma_header(req.private_data.data(), {0, 49152, 0x0A000001, 0x0A000002});
  for (std::size_t i = kCmaHdrLen; i < req.private_data.size(); ++i)
    req.private_data[i] = static_cast<std::uint8_t>(i);
  CmRep rep;
  rep.local_comm_id = 0x20000002;
  rep.remote_comm_id = req.local_comm_id;
  rep.local_qpn = 0x000203;
  rep.starting_psn = 0x654321;
  rep.responder_resources = 8;
  rep.initiator_depth = 8;
  rep.target_ack_delay = 15;
  rep.rnr_retry_count = 7;
  rep.local_ca_guid = ca_guid_from_mac({0x02, 0, 0, 0, 0, 2});
  rep.private_data[0] = 0xAB;
  CmRej rej;
  rej.remote_comm_id = req.local_comm_id;
  rej.reason = static_cast<std::uint16_t>(CmRejReason::kConsumerDefined);
  rej.private_data[147] = 0x5A;
  v.push_back(make_cm_mad(0x100, req));
  v.push_back(
      make_cm_mad(0x100, CmMra{rep.local_comm_id, req.local_comm_id, CmMsgResponse::kReq, 23, {}}));
  v.push_back(make_cm_mad(0x100, rej));
  v.push_back(make_cm_mad(0x100, rep));
  v.push_back(make_cm_mad(0x100, CmRtu{req.local_comm_id, rep.local_comm_id, {}}));
  v.push_back(make_cm_mad(0x101, CmDreq{req.local_comm_id, rep.local_comm_id, rep.local_qpn, {}}));
  v.push_back(make_cm_mad(0x101, CmDrep{rep.local_comm_id, req.local_comm_id, {}}));
  return v;
}

TEST(CmConformance, FramesOfEveryMessageTypePassRoceCheck) {
  ASSERT_FALSE(env("ROCEDP_ARTIFACT_DIR").empty());
  const std::string out = env("ROCEDP_ARTIFACT_DIR") + "/cm-messages.pcap";
  const auto msgs = every_message_type();
  {
    PcapWriter w;
    ASSERT_TRUE(w.open(out)) << w.error();
    std::uint32_t psn = 0;
    for (const auto& m : msgs) {
      CmFrameAddr a;
      a.src_mac = {0x02, 0, 0, 0, 0, 1};
      a.dst_mac = {0x02, 0, 0, 0, 0, 2};
      a.src_ip = 0x0A000001;
      a.dst_ip = 0x0A000002;
      a.psn = psn++;
      std::vector<std::uint8_t> f(kCmFrameLen);
      ASSERT_EQ(build_cm_frame(f, a, m), kCmFrameLen);
      // Our own parser and codec read back what we wrote.
      ParsedPacket p;
      ASSERT_EQ(parse(f, p), DropReason::kNone);
      CmMad back;
      ASSERT_EQ(decode_cm_mad(p.payload(), back), CmDecodeStatus::kOk);
      EXPECT_EQ(back, m);
      w.write(f);
    }
    w.close();
  }
  const RunResult r = rocedp::test::roce_check(out);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(std::to_string(msgs.size()) + " RoCEv2 packets, 0 problems"),
            std::string::npos)
      << r.output;
  // tshark names each CM message (the dissector decoded the attribute, not just the MAD header).
  const RunResult t = run("tshark -r " + out + " -d udp.port==4791,infiniband -V");
  ASSERT_EQ(t.status, 0) << t.output.substr(0, 2000);
  for (const char* name : {"CM ConnectRequest", "CM MsgRcptAck", "CM ConnectReject",
                           "CM ConnectReply", "CM ReadyToUse", "CM DisconnectRequest",
                           "CM DisconnectReply", "IP CM Source Port: 0xc000", "Reason: 0x001c"})
    EXPECT_NE(t.output.find(name), std::string::npos) << name;
}

}  // namespace
}  // namespace rocedp::wire
