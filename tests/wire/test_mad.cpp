// MAD common header decode/encode and CM message names (IBTA §13.4.3, §12.6).
#include "dataplane/wire/mad.hpp"

#include <gtest/gtest.h>

#include <array>

namespace rocedp::wire {
namespace {

TEST(Mad, DecodesTheCommonHeaderBytes) {
  const std::array<std::uint8_t, 24> b = {0x01, 0x07, 0x02, 0x03, 0x00, 0x1c, 0x00, 0x00,
                                          0x00, 0x00, 0x00, 0x02, 0xd8, 0x78, 0x4b, 0x58,
                                          0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05};
  const auto h = decode_mad_header(b);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->base_version, 1);
  EXPECT_EQ(h->mgmt_class, kMgmtClassCm);
  EXPECT_EQ(h->class_version, 2);
  EXPECT_EQ(h->method, kMadMethodSend);
  EXPECT_EQ(h->status, 0x1c);
  EXPECT_EQ(h->tid, 0x00000002d8784b58ull);
  EXPECT_EQ(h->attr_id, cm_attr::kReq);
  EXPECT_EQ(h->attr_mod, 5u);
  EXPECT_EQ(cm_message_name(*h), "REQ");
  std::array<std::uint8_t, 24> out{};
  encode_mad_header(out.data(), *h);
  EXPECT_EQ(out, b);
}

TEST(Mad, RejectsShortInputAndNamesOnlyCm) {
  const std::array<std::uint8_t, 23> s{};
  EXPECT_FALSE(decode_mad_header(s).has_value());
  MadHeader h;
  h.attr_id = cm_attr::kDrep;
  EXPECT_EQ(cm_message_name(h), "DREP");
  h.mgmt_class = 0x01;  // subnet management: not CM
  EXPECT_EQ(cm_message_name(h), "");
  EXPECT_EQ(cm_message_name(cm_attr::kMra), "MRA");
  EXPECT_EQ(cm_message_name(cm_attr::kRej), "REJ");
  EXPECT_EQ(cm_message_name(cm_attr::kRtu), "RTU");
  EXPECT_EQ(cm_message_name(cm_attr::kDreq), "DREQ");
  EXPECT_EQ(cm_message_name(std::uint16_t{0x7777}), "");
}

}  // namespace
}  // namespace rocedp::wire
