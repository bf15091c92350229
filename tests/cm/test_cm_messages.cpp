// CM message codec (dataplane/wire/cm_messages.*): every field of every
// message at its IBTA bit position, round trips, decode errors, the rdma_cm
// header and service ID. Pure unit test (no EAL, no files).
#include "dataplane/wire/cm_messages.hpp"

#include <gtest/gtest.h>

#include <array>
#include <numeric>

#include "dataplane/wire/parser.hpp"

namespace rocedp::wire {
namespace {

template <std::size_t N>
std::array<std::uint8_t, N> ramp(std::uint8_t start) {
  std::array<std::uint8_t, N> a{};
  std::iota(a.begin(), a.end(), start);
  return a;
}

CmPath sample_path(std::uint8_t salt) {
  CmPath p;
  p.local_lid = static_cast<std::uint16_t>(0xA100 + salt);
  p.remote_lid = static_cast<std::uint16_t>(0xB200 + salt);
  p.local_gid = gid_from_ipv4(0xC6120000u + salt);
  p.remote_gid = gid_from_ipv4(0xC6120100u + salt);
  p.flow_label = 0xABCDE;
  p.packet_rate = 0x2A;
  p.traffic_class = 0x5C;
  p.hop_limit = 0x3F;
  p.sl = 0x9;
  p.subnet_local = true;
  p.local_ack_timeout = 0x13;
  return p;
}

CmReq sample_req() {
  CmReq r;
  r.local_comm_id = 0x11223344;
  r.vendor_id = 0xABCDEF;
  r.service_id = rdma_cm_service_id(7174);
  r.local_ca_guid = 0x0052'17ff'fe00'000cull;
  r.local_qkey = 0x01020304;
  r.local_qpn = 0x123456;
  r.responder_resources = 0x10;
  r.local_eecn = 0x654321;
  r.initiator_depth = 0x0F;
  r.remote_eecn = 0x0A0B0C;
  r.remote_cm_response_timeout = 0x14;
  r.transport_service_type = 2;
  r.end_to_end_flow_control = true;
  r.starting_psn = 0xC92C3A;
  r.local_cm_response_timeout = 0x11;
  r.retry_count = 6;
  r.pkey = 0x8001;
  r.path_mtu = 3;
  r.rdc_exists = true;
  r.rnr_retry_count = 5;
  r.max_cm_retries = 0xE;
  r.srq = true;
  r.extended_transport_type = 3;
  r.primary = sample_path(1);
  r.alternate = sample_path(2);
  r.sap_supported = true;
  r.private_data = ramp<kCmReqPrivateLen>(1);
  return r;
}

std::array<std::uint8_t, kMadLen> enc(const CmBody& body,
                                      std::uint64_t tid = 0x0000000200000001ull) {
  CmMad m;
  m.hdr.tid = tid;
  m.body = body;
  return encode_cm_mad(m);
}

CmMad dec(const std::array<std::uint8_t, kMadLen>& b) {
  CmMad m;
  EXPECT_EQ(decode_cm_mad(b, m), CmDecodeStatus::kOk);
  return m;
}

// Body byte `off` (after the 24-byte MAD header).
std::uint8_t body(const std::array<std::uint8_t, kMadLen>& b, std::size_t off) {
  return b[kMadHdrLen + off];
}

TEST(CmMessages, MadHeaderIsCmClassVersion2SendWithTheBodysAttribute) {
  const auto b = enc(CmRtu{}, 0x00000002d8784b58ull);
  EXPECT_EQ(b[0], 1);     // base version
  EXPECT_EQ(b[1], 0x07);  // CM class
  EXPECT_EQ(b[2], 2);     // class version
  EXPECT_EQ(b[3], 0x03);  // Send
  EXPECT_EQ(load_be64(b.data() + 8), 0x00000002d8784b58ull);
  EXPECT_EQ(load_be16(b.data() + 16), cm_attr::kRtu);
  EXPECT_EQ(cm_attr_id(CmReq{}), 0x10);
  EXPECT_EQ(cm_attr_id(CmMra{}), 0x11);
  EXPECT_EQ(cm_attr_id(CmRej{}), 0x12);
  EXPECT_EQ(cm_attr_id(CmRep{}), 0x13);
  EXPECT_EQ(cm_attr_id(CmRtu{}), 0x14);
  EXPECT_EQ(cm_attr_id(CmDreq{}), 0x15);
  EXPECT_EQ(cm_attr_id(CmDrep{}), 0x16);
}

TEST(CmMessages, ReqFieldsSitAtTheirIbtaOffsets) {
  const CmReq r = sample_req();
  const auto b = enc(r);
  EXPECT_EQ(load_be32(b.data() + 24), 0x11223344u);
  EXPECT_EQ(body(b, 4), 0);  // reserved
  EXPECT_EQ(load_be24(b.data() + 24 + 5), 0xABCDEFu);
  EXPECT_EQ(load_be64(b.data() + 24 + 8), 0x0000000001061c06ull);
  EXPECT_EQ(load_be64(b.data() + 24 + 16), 0x005217fffe00000cull);
  EXPECT_EQ(load_be32(b.data() + 24 + 28), 0x01020304u);
  EXPECT_EQ(load_be24(b.data() + 24 + 32), 0x123456u);
  EXPECT_EQ(body(b, 35), 0x10);
  EXPECT_EQ(load_be24(b.data() + 24 + 36), 0x654321u);
  EXPECT_EQ(body(b, 39), 0x0F);
  EXPECT_EQ(load_be24(b.data() + 24 + 40), 0x0A0B0Cu);
  EXPECT_EQ(body(b, 43), (0x14 << 3) | (2 << 1) | 1);
  EXPECT_EQ(load_be24(b.data() + 24 + 44), 0xC92C3Au);
  EXPECT_EQ(body(b, 47), (0x11 << 3) | 6);
  EXPECT_EQ(load_be16(b.data() + 24 + 48), 0x8001);
  EXPECT_EQ(body(b, 50), (3 << 4) | (1 << 3) | 5);
  EXPECT_EQ(body(b, 51), (0xE << 4) | (1 << 3) | 3);
  // Primary path at 52.
  EXPECT_EQ(load_be16(b.data() + 24 + 52), 0xA101);
  EXPECT_EQ(load_be16(b.data() + 24 + 54), 0xB201);
  EXPECT_EQ(body(b, 56 + 10), 0xFF);
  EXPECT_EQ(load_be32(b.data() + 24 + 56 + 12), 0xC6120001u);
  EXPECT_EQ(load_be32(b.data() + 24 + 72 + 12), 0xC6120101u);
  EXPECT_EQ(load_be32(b.data() + 24 + 88), (0xABCDEu << 12) | 0x2A);
  EXPECT_EQ(body(b, 92), 0x5C);
  EXPECT_EQ(body(b, 93), 0x3F);
  EXPECT_EQ(body(b, 94), (0x9 << 4) | (1 << 3));
  EXPECT_EQ(body(b, 95), 0x13 << 3);
  // Alternate path at 96; SAP supported is byte 139 bit 5.
  EXPECT_EQ(load_be16(b.data() + 24 + 96), 0xA102);
  EXPECT_EQ(body(b, 139), (0x13 << 3) | (1 << 2));
  EXPECT_EQ(body(b, 140), 1);  // private data
  EXPECT_EQ(b[255], kCmReqPrivateLen);
  EXPECT_EQ(std::get<CmReq>(dec(b).body), r);
}

TEST(CmMessages, RepFieldsSitAtTheirIbtaOffsets) {
  CmRep r;
  r.local_comm_id = 0x3cada2a6;
  r.remote_comm_id = 0x584b78d8;
  r.local_qkey = 0x0A0B0C0D;
  r.local_qpn = 0x000011;
  r.vendor_id = 0x123456;
  r.local_eecn = 0x778899;
  r.starting_psn = 0x07e1b7;
  r.responder_resources = 1;
  r.initiator_depth = 2;
  r.target_ack_delay = 0x0F;
  r.failover_accepted = 2;
  r.end_to_end_flow_control = true;
  r.rnr_retry_count = 7;
  r.srq = true;
  r.local_ca_guid = 0x005217fffe00000bull;
  r.private_data = ramp<kCmRepPrivateLen>(9);
  const auto b = enc(r);
  EXPECT_EQ(load_be24(b.data() + 24 + 12), 0x11u);
  EXPECT_EQ(body(b, 15), 0x12);
  EXPECT_EQ(load_be24(b.data() + 24 + 16), 0x778899u);
  EXPECT_EQ(body(b, 19), 0x34);
  EXPECT_EQ(load_be24(b.data() + 24 + 20), 0x07e1b7u);
  EXPECT_EQ(body(b, 23), 0x56);
  EXPECT_EQ(body(b, 24), 1);
  EXPECT_EQ(body(b, 25), 2);
  EXPECT_EQ(body(b, 26), (0x0F << 3) | (2 << 1) | 1);
  EXPECT_EQ(body(b, 27), (7 << 5) | (1 << 4));
  EXPECT_EQ(load_be64(b.data() + 24 + 28), 0x005217fffe00000bull);
  EXPECT_EQ(body(b, 36), 9);
  EXPECT_EQ(std::get<CmRep>(dec(b).body), r);
}

TEST(CmMessages, MraRejRtuDreqDrepRoundTripAtTheirOffsets) {
  CmMra mra{0x01020304, 0x05060708, CmMsgResponse::kRep, 0x1F, ramp<kCmMraPrivateLen>(3)};
  auto b = enc(mra);
  EXPECT_EQ(body(b, 8), 1 << 6);
  EXPECT_EQ(body(b, 9), 0x1F << 3);
  EXPECT_EQ(body(b, 10), 3);
  EXPECT_EQ(std::get<CmMra>(dec(b).body), mra);

  CmRej rej;
  rej.local_comm_id = 0;
  rej.remote_comm_id = 0xCAFEBABE;
  rej.message_rejected = CmMsgResponse::kOther;
  rej.rejected_info_length = 0x48;
  rej.reason = static_cast<std::uint16_t>(CmRejReason::kConsumerDefined);
  rej.ari = ramp<kCmRejAriLen>(100);
  rej.private_data = ramp<kCmRejPrivateLen>(50);
  b = enc(rej);
  EXPECT_EQ(load_be32(b.data() + 24 + 4), 0xCAFEBABEu);
  EXPECT_EQ(body(b, 8), 2 << 6);
  EXPECT_EQ(body(b, 9), 0x48 << 1);
  EXPECT_EQ(load_be16(b.data() + 24 + 10), 28);
  EXPECT_EQ(body(b, 12), 100);
  EXPECT_EQ(body(b, 84), 50);
  EXPECT_EQ(std::get<CmRej>(dec(b).body), rej);

  CmRtu rtu{0xAAAA0001, 0xBBBB0002, ramp<kCmRtuPrivateLen>(7)};
  b = enc(rtu);
  EXPECT_EQ(body(b, 8), 7);
  EXPECT_EQ(std::get<CmRtu>(dec(b).body), rtu);

  CmDreq dreq{0x584b78d8, 0x3cada2a6, 0x000011, ramp<kCmDreqPrivateLen>(4)};
  b = enc(dreq);
  EXPECT_EQ(load_be24(b.data() + 24 + 8), 0x11u);
  EXPECT_EQ(body(b, 11), 0);  // reserved
  EXPECT_EQ(body(b, 12), 4);
  EXPECT_EQ(std::get<CmDreq>(dec(b).body), dreq);

  CmDrep drep{0x3cada2a6, 0x584b78d8, ramp<kCmDrepPrivateLen>(8)};
  b = enc(drep);
  EXPECT_EQ(body(b, 8), 8);
  EXPECT_EQ(std::get<CmDrep>(dec(b).body), drep);
}

TEST(CmMessages, OutOfRangeValuesAreMaskedToTheirFieldWidth) {
  CmReq r = sample_req();
  r.local_qpn = 0xFF123456;  // only 24 bits exist
  r.remote_cm_response_timeout = 0xFF;
  r.primary.flow_label = 0xFFFFFFFF;
  const auto b = enc(r);
  const CmReq d = std::get<CmReq>(dec(b).body);
  EXPECT_EQ(d.local_qpn, 0x123456u);
  EXPECT_EQ(d.remote_cm_response_timeout, 0x1F);
  EXPECT_EQ(d.primary.flow_label, 0xFFFFFu);
  EXPECT_EQ(d.transport_service_type, 2) << "a wide value must not spill into its neighbours";
  EXPECT_EQ(d.primary.packet_rate, 0x2A);
}

TEST(CmMessages, DecodeRejectsWhatIsNotACmSendOfAKnownAttribute) {
  auto b = enc(CmRtu{});
  CmMad m;
  EXPECT_EQ(decode_cm_mad(Bytes(b).first(255), m), CmDecodeStatus::kShort);
  auto bad = b;
  bad[1] = 0x01;
  EXPECT_EQ(decode_cm_mad(bad, m), CmDecodeStatus::kNotCm);
  bad = b;
  bad[2] = 1;
  EXPECT_EQ(decode_cm_mad(bad, m), CmDecodeStatus::kNotCm);
  bad = b;
  bad[0] = 2;
  EXPECT_EQ(decode_cm_mad(bad, m), CmDecodeStatus::kNotCm);
  bad = b;
  bad[3] = 0x81;  // GetResp
  EXPECT_EQ(decode_cm_mad(bad, m), CmDecodeStatus::kBadMethod);
  bad = b;
  store_be16(bad.data() + 16, cm_attr::kSidrReq);
  EXPECT_EQ(decode_cm_mad(bad, m), CmDecodeStatus::kUnsupportedAttr);
  EXPECT_EQ(cm_decode_status_name(CmDecodeStatus::kUnsupportedAttr), "unsupported CM attribute");
}

TEST(CmMessages, RejReasonNumbersMatchLinuxIbCm) {
  EXPECT_EQ(static_cast<int>(CmRejReason::kNoQp), 1);
  EXPECT_EQ(static_cast<int>(CmRejReason::kTimeout), 4);
  EXPECT_EQ(static_cast<int>(CmRejReason::kInvalidServiceId), 8);
  EXPECT_EQ(static_cast<int>(CmRejReason::kStaleConn), 10);
  EXPECT_EQ(static_cast<int>(CmRejReason::kConsumerDefined), 28);
  EXPECT_EQ(cm_rej_reason_name(28), "consumer defined");
  EXPECT_EQ(cm_rej_reason_name(10), "stale connection");
  EXPECT_EQ(cm_rej_reason_name(999), "other");
}

TEST(CmMessages, RdmaCmServiceIdAndHeader) {
  EXPECT_EQ(rdma_cm_service_id(7174), 0x0000000001061c06ull);
  EXPECT_TRUE(is_rdma_cm_tcp_service(0x0000000001061c06ull));
  EXPECT_FALSE(is_rdma_cm_tcp_service(0x0000000001111c06ull));  // port space UDP
  EXPECT_EQ(rdma_cm_port(0x0000000001061c06ull), 7174);
  EXPECT_EQ(kMaxCallerData, 56u);
  EXPECT_EQ(kMaxCalleeData, 148u);

  // Bytes 140.. of the rping REQ (capture rxe-rping.pcap frame 3).
  const std::array<std::uint8_t, kCmaHdrLen> wire = {
      0x00, 0x40, 0xb6, 0xeb, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,    0,    0xc6, 0x12,
      0x00, 0x0c, 0,    0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xc6, 0x12, 0x00, 0x0b};
  CmaHeader h;
  ASSERT_TRUE(decode_cma_header(wire.data(), h));
  EXPECT_EQ(h.src_port, 0xb6eb);
  EXPECT_EQ(h.src_ip, 0xC612000Cu);
  EXPECT_EQ(h.dst_ip, 0xC612000Bu);
  std::array<std::uint8_t, kCmaHdrLen> out{};
  out.fill(0xEE);
  encode_cma_header(out.data(), h);
  EXPECT_EQ(out, wire);
  // IPv6 (ip_version 6): all 16 bytes of each address; it encodes back the same.
  auto v6 = wire;
  v6[1] = 0x60;
  for (std::size_t i = 4; i < 36; ++i) v6[i] = static_cast<std::uint8_t>(0xF0 + i);
  ASSERT_TRUE(decode_cma_header(v6.data(), h));
  EXPECT_FALSE(h.src_ip.is_v4());
  EXPECT_EQ(h.ip_version(), 6);
  EXPECT_EQ(h.src_ip.bytes[0], 0xF4);
  EXPECT_EQ(h.dst_ip.bytes[15], static_cast<std::uint8_t>(0xF0 + 35));
  out.fill(0xEE);
  encode_cma_header(out.data(), h);
  EXPECT_EQ(out, v6);
  auto v5 = wire;
  v5[1] = 0x50;
  EXPECT_FALSE(decode_cma_header(v5.data(), h)) << "neither IPv4 nor IPv6";
}

TEST(CmMessages, GidGuidAndTimeHelpers) {
  const Gid g = gid_from_ipv4(0xC612000B);
  EXPECT_TRUE(gid_is_ipv4_mapped(g));
  EXPECT_EQ(ipv4_from_gid(g), 0xC612000Bu);
  Gid link_local{};
  link_local[0] = 0xFE;
  link_local[1] = 0x80;
  EXPECT_FALSE(gid_is_ipv4_mapped(link_local));
  EXPECT_EQ(ca_guid_from_mac({0x02, 0x52, 0x17, 0x00, 0x00, 0x0c}), 0x005217fffe00000cull);
  EXPECT_EQ(ib_time_ns(0), 4096u);
  EXPECT_EQ(ib_time_ns(20), 4096ull << 20);  // ≈ 4.29 s, rdma_cm's CMA_CM_RESPONSE_TIMEOUT
}

TEST(CmMessages, BuildsAQp1FrameTheParserAccepts) {
  const CmMad m = make_cm_mad(42, sample_req());
  CmFrameAddr a;
  a.src_mac = {0x02, 0, 0, 0, 0, 1};
  a.dst_mac = {0x02, 0, 0, 0, 0, 2};
  a.src_ip = 0x0A000001;
  a.dst_ip = 0x0A000002;
  a.psn = 7;
  std::array<std::uint8_t, kCmFrameLen> frame{};
  ASSERT_EQ(build_cm_frame(frame, a, m), kCmFrameLen);
  std::array<std::uint8_t, kCmFrameLen - 1> small{};
  EXPECT_EQ(build_cm_frame(small, a, m), 0u);
  ParsedPacket p;
  ASSERT_EQ(parse(frame, p), DropReason::kNone);
  EXPECT_EQ(p.f.bth.opcode, opcode::kUdSendOnly);
  EXPECT_EQ(p.f.bth.dqpn, kGsiQpn);
  EXPECT_EQ(p.f.bth.psn, 7u);
  EXPECT_EQ(p.f.deth.qkey, kGsiQkey);
  EXPECT_EQ(p.f.deth.src_qp, kGsiQpn);
  ASSERT_EQ(p.payload_len, kMadLen);
  CmMad back;
  ASSERT_EQ(decode_cm_mad(p.payload(), back), CmDecodeStatus::kOk);
  EXPECT_EQ(back, m);
}

}  // namespace
}  // namespace rocedp::wire
