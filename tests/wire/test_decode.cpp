// Conformance (DESIGN.md §6.4): every RoCEv2 packet of the real Soft-RoCE
// captures parses, verifies its ICRC and re-encodes to identical bytes; our
// encoder's output passes the independent checker (scapy + tshark); and
// `rocedpctl decode` reports success and failure through its exit status.
#include "dataplane/wire/decode.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "dataplane/wire/mad.hpp"
#include "dataplane/wire/pcap_io.hpp"
#include "tests/common/tool_run.hpp"
#include "tests/wire/wire_test_util.hpp"

namespace rocedp::wire {
namespace {

namespace fs = std::filesystem;

using rocedp::test::env;
using rocedp::test::run;
using rocedp::test::RunResult;

std::string captures_dir() {
  return env("ROCEDP_SHARED_DIR") + "/captures";
}
std::string rping_pcap() {
  return captures_dir() + "/rxe-rping.pcap";
}

TEST(Conformance, EveryCapturedRoceV2PacketParsesVerifiesAndRoundTrips) {
  ASSERT_FALSE(env("ROCEDP_SHARED_DIR").empty());
  int files = 0;
  for (const auto& entry : fs::directory_iterator(captures_dir())) {
    const auto ext = entry.path().extension();
    if (ext != ".pcap" && ext != ".pcapng") continue;
    ++files;
    DecodeStats stats;
    std::string err;
    ASSERT_TRUE(decode_capture(entry.path(), nullptr, stats, err)) << entry.path() << ": " << err;
    EXPECT_EQ(stats.failed, 0u) << entry.path();
    EXPECT_GT(stats.roce, 0u) << entry.path();
    EXPECT_EQ(stats.roce + stats.skipped + stats.failed, stats.frames);
  }
  EXPECT_GE(files, 1);
}

TEST(Conformance, RpingCaptureHasTheDocumentedPackets) {
  DecodeStats stats;
  std::string err;
  ASSERT_TRUE(decode_capture(rping_pcap(), nullptr, stats, err)) << err;
  // ../shared/captures/README.md: 125 RoCEv2 packets plus the ARP before them.
  EXPECT_EQ(stats.roce, 125u);
  EXPECT_EQ(stats.failed, 0u);
  EXPECT_EQ(stats.skipped, 2u);
  const std::map<std::string, std::size_t> want = {{"CM REQ", 1},
                                                   {"CM REP", 1},
                                                   {"CM RTU", 1},
                                                   {"CM DREQ", 1},
                                                   {"CM DREP", 1},
                                                   {"RC SEND_ONLY", 40},
                                                   {"RC RDMA_WRITE_ONLY", 10},
                                                   {"RC RDMA_READ_REQUEST", 10},
                                                   {"RC RDMA_READ_RESPONSE_ONLY", 10},
                                                   {"RC ACKNOWLEDGE", 50}};
  EXPECT_EQ(stats.by_type, want);
}

TEST(Conformance, CheckFrameReportsCorruption) {
  std::vector<PcapFrame> frames;
  std::string err;
  ASSERT_TRUE(read_pcap(rping_pcap(), frames, err)) << err;
  ASSERT_GE(frames.size(), 6u);
  auto fr = frames[5].data;  // RC SEND_ONLY
  ASSERT_EQ(check_frame(fr).kind, FrameKind::kRoce);
  fr[fr.size() - 8] ^= 0x10;
  const FrameVerdict v = check_frame(fr);
  EXPECT_EQ(v.kind, FrameKind::kFailed);
  EXPECT_EQ(v.reason, DropReason::kBadIcrc);
  EXPECT_NE(describe_frame(6, v).find("FAIL bad_icrc"), std::string::npos) << describe_frame(6, v);
}

// A CM MAD as QP1 carries it: base version 1, class CM, 256 bytes.
std::vector<std::uint8_t> cm_mad(std::uint16_t attr) {
  std::vector<std::uint8_t> mad(kMadLen, 0);
  MadHeader h;
  h.tid = 0x1234;
  h.attr_id = attr;
  encode_mad_header(mad.data(), h);
  return mad;
}

TEST(Conformance, EncoderSamplesPassRoceCheck) {
  const std::string art = env("ROCEDP_ARTIFACT_DIR");
  ASSERT_FALSE(art.empty());
  fs::create_directories(art);
  const std::string out = art + "/encoder-samples.pcap";
  std::mt19937 rng(2024);
  std::size_t written = 0;
  std::set<std::uint8_t> opcodes;
  std::set<int> pads;
  {
    PcapWriter w;
    ASSERT_TRUE(w.open(out)) << w.error();
    const std::size_t lens[] = {0,   1,   2,    3,    4,    5,    6,    7,    16,   63,   64,  65,
                                255, 256, 1021, 1022, 1023, 1024, 2048, 4093, 4094, 4095, 4096};
    for (const OpcodeInfo& op : kOpcodeTable) {
      if (!op.valid()) continue;
      const auto code = static_cast<std::uint8_t>(&op - kOpcodeTable.data());
      for (std::size_t want : lens) {
        const std::size_t len = test::legal_payload_len(op, want);
        if (len != want && want != 0) continue;  // fixed/no-payload opcodes: one sample
        PacketFields f = test::sample_fields(code, rng);
        f.bth.pad = pad_for(len);
        const auto payload = test::make_payload(len, static_cast<std::uint8_t>(written));
        const auto fr = test::build(f, payload);
        ASSERT_FALSE(fr.empty());
        ASSERT_EQ(check_frame(fr).kind, FrameKind::kRoce) << op.name << " " << len;
        w.write(fr);
        opcodes.insert(code);
        pads.insert(f.bth.pad);
        ++written;
      }
    }
    // CM messages on QP1, as the connection manager will send them.
    for (std::uint16_t attr : {cm_attr::kReq, cm_attr::kMra, cm_attr::kRej, cm_attr::kRep,
                               cm_attr::kRtu, cm_attr::kDreq, cm_attr::kDrep}) {
      PacketFields f = test::sample_fields(opcode::kUdSendOnly, rng);
      f.bth.dqpn = kGsiQpn;
      f.deth = {kGsiQkey, 0, kGsiQpn};
      const auto fr = test::build(f, cm_mad(attr));
      const FrameVerdict v = check_frame(fr);
      ASSERT_EQ(v.kind, FrameKind::kRoce);
      EXPECT_EQ(v.cm_message, cm_message_name(attr));
      w.write(fr);
      ++written;
    }
  }
  EXPECT_EQ(opcodes.size(), 26u) << "every opcode of the table";
  EXPECT_EQ(pads, (std::set<int>{0, 1, 2, 3})) << "every pad count";

  const RunResult r = rocedp::test::roce_check(out);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(std::to_string(written) + " RoCEv2 packets, 0 problems"),
            std::string::npos)
      << r.output;
}

std::string rocedpctl() {
  return env("ROCEDP_BIN_DIR") + "/rocedpctl";
}

TEST(Conformance, RocedpctlDecodeRealCapture) {
  const RunResult r = run(rocedpctl() + " decode " + rping_pcap());
  EXPECT_EQ(r.status, 0) << r.output.substr(0, 2000);
  for (const char* name :
       {"CM REQ", "CM REP", "CM RTU", "CM DREQ", "CM DREP", "RC RDMA_READ_REQUEST",
        "RC RDMA_READ_RESPONSE_ONLY", "RC RDMA_WRITE_ONLY", "RC SEND_ONLY", "RC ACKNOWLEDGE",
        "QPN 0x000011", "skipped: not RoCEv2 (ARP)", "125 RoCEv2 packets ok, 0 failed"}) {
    EXPECT_NE(r.output.find(name), std::string::npos) << name;
  }
}

TEST(Conformance, RocedpctlDecodeFailsOnACorruptedByte) {
  std::vector<PcapFrame> frames;
  std::string err;
  ASSERT_TRUE(read_pcap(rping_pcap(), frames, err)) << err;
  const std::string out = env("ROCEDP_ARTIFACT_DIR") + "/rxe-rping-corrupted.pcap";
  {
    PcapWriter w;
    ASSERT_TRUE(w.open(out)) << w.error();
    for (std::size_t i = 0; i < frames.size(); ++i) {
      auto d = frames[i].data;
      if (i == 13) d[d.size() - 20] ^= 0x01;  // frame #14: a byte of RDMA WRITE payload
      w.write(d, frames[i].ts_sec, frames[i].ts_usec);
    }
  }
  const RunResult r = run(rocedpctl() + " decode " + out);
  std::remove(out.c_str());
  EXPECT_EQ(r.status, 1) << r.output.substr(0, 2000);
  EXPECT_NE(r.output.find("#14 FAIL bad_icrc"), std::string::npos);
  EXPECT_NE(r.output.find("124 RoCEv2 packets ok, 1 failed"), std::string::npos);
}

TEST(Conformance, RocedpctlUsageErrors) {
  EXPECT_EQ(run(rocedpctl()).status, 2);
  EXPECT_EQ(run(rocedpctl() + " decode").status, 2);
  EXPECT_EQ(run(rocedpctl() + " nosuchcommand").status, 2);
  const RunResult r = run(rocedpctl() + " decode /nonexistent/x.pcap");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("cannot read"), std::string::npos);
}

}  // namespace
}  // namespace rocedp::wire
