// The texts and structs of perftest's and ibv_rc_pingpong's exchanges
// (control/perftest.cpp), against bytes as the Linux tools write them.

#include "rocedp/perftest.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace rocedp::perf {
namespace {

TEST(PingpongText, EncodesAsIbvRcPingpongWritesIt) {
  PerftestKey k;
  k.qpn = 0x11;
  k.psn = 0xabcdef;
  k.set_ipv4(0xC6120023);  // 198.18.0.35
  uint8_t out[kPingpongTextSize];
  encode_pingpong_text(k, out);
  const std::string want = "0000:000011:abcdef:00000000000000000000ffffc6120023";
  ASSERT_EQ(want.size() + 1, kPingpongTextSize);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(out)), want);
  EXPECT_EQ(out[kPingpongTextSize - 1], 0);
}

TEST(PingpongText, DecodesTheExamplesTextAndRefusesOthers) {
  // As the rig's ibv_rc_pingpong -g 1 wrote it (interop-perftest-tcp-pingpong-*.pcap, its TCP
  // payload): LID 0, QPN, PSN, the IPv4-mapped GID, a NUL.
  const char text[] = "0000:000011:65ac0e:00000000000000000000ffffc6120021";
  static_assert(sizeof(text) == kPingpongTextSize);
  PerftestKey k;
  ASSERT_TRUE(decode_pingpong_text(reinterpret_cast<const uint8_t*>(text), sizeof(text), &k));
  EXPECT_EQ(k.lid, 0u);
  EXPECT_EQ(k.qpn, 0x11u);
  EXPECT_EQ(k.psn, 0x65ac0eu);
  EXPECT_EQ(k.ipv4(), 0xC6120021u);  // 198.18.0.33
  uint8_t again[kPingpongTextSize];
  encode_pingpong_text(k, again);
  EXPECT_EQ(std::memcmp(again, text, sizeof(text)), 0);

  auto refuses = [](const char* t) {
    PerftestKey x;
    return !decode_pingpong_text(reinterpret_cast<const uint8_t*>(t), std::strlen(t) + 1, &x);
  };
  EXPECT_TRUE(refuses("0000:000012:6b81c2:00000000000000000000ffffc612000"));    // 31 digits
  EXPECT_TRUE(refuses("0000:000012:6b81c2:00000000000000000000ffffc612000bb"));  // 33 digits
  EXPECT_TRUE(refuses("0000:0000g2:6b81c2:00000000000000000000ffffc612000b"));   // not hex
  EXPECT_TRUE(refuses("0000:000012:00000000000000000000ffffc612000b"));          // no PSN
  EXPECT_TRUE(refuses(""));
  // A GID that is not IPv4-mapped decodes; its IPv4 address is 0 (the mode refuses it).
  const char zero[] = "0000:000012:6b81c2:00000000000000000000000000000000";
  PerftestKey z;
  ASSERT_TRUE(decode_pingpong_text(reinterpret_cast<const uint8_t*>(zero), sizeof(zero), &z));
  EXPECT_EQ(z.ipv4(), 0u);
}

TEST(PerftestKeyText, RoundTripsEveryField) {
  PerftestKey k;
  k.out_reads = 16;
  k.qpn = 0x123456;
  k.psn = 0x654321;
  k.rkey = 0xdeadbeef;
  k.vaddr = 0x00007f0102030405;
  k.set_ipv4(0xC612002D);
  k.srqn = 7;
  uint8_t out[kKeyTextSize];
  encode_key_text(k, out);
  PerftestKey back;
  ASSERT_TRUE(decode_key_text(out, sizeof(out), &back));
  EXPECT_EQ(back.out_reads, 16u);
  EXPECT_EQ(back.qpn, k.qpn);
  EXPECT_EQ(back.psn, k.psn);
  EXPECT_EQ(back.rkey, k.rkey);
  EXPECT_EQ(back.vaddr, k.vaddr);
  EXPECT_EQ(back.ipv4(), 0xC612002Du);
  EXPECT_EQ(back.srqn, 7u);
}

}  // namespace
}  // namespace rocedp::perf
