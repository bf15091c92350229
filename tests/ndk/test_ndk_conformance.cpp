// The frames both adapters transmit during a mixed run (SEND, SEND with immediate,
// WRITE, WRITE with immediate, READ, atomics, ACKs, READ responses, at sizes spanning one to
// many packets) are written to $ROCEDP_ARTIFACT_DIR/rc-traffic.pcap and checked by
// ../shared/tools/roce-check (ICRC, lengths, BTH, tshark's infiniband dissector).

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>

#include "dataplane/wire/pcap_io.hpp"
#include "tests/common/tool_run.hpp"
#include "tests/ndk/ndk_helpers.hpp"

namespace rocedp::test {
namespace {

struct Capture {
  std::vector<std::vector<uint8_t>> frames;
  static void tap(void* c, const uint8_t* f, size_t len) {
    static_cast<Capture*>(c)->frames.emplace_back(f, f + len);
  }
};

using NdkConformance = NdkFixture;

TEST_F(NdkConformance, CapturedTrafficPassesRoceCheck) {
  const char* artifacts = std::getenv("ROCEDP_ARTIFACT_DIR");
  const char* shared = std::getenv("ROCEDP_SHARED_DIR");
  ASSERT_NE(artifacts, nullptr);
  ASSERT_NE(shared, nullptr);
  Capture cap;
  test_hooks::set_tx_tap(*a_.adapter, &Capture::tap, &cap);
  test_hooks::set_tx_tap(*b_.adapter, &Capture::tap, &cap);
  Endpoint x, y;
  make_pair(x, y, 0, 1);
  auto src = buffer(x.pd, 8192);
  auto dst = buffer(y.pd, 8192);
  for (size_t i = 0; i < src->data.size(); ++i) src->data[i] = static_cast<uint8_t>(i * 7);
  const uint32_t sizes[] = {0, 1, 63, 1024, 3000};
  for (uint32_t n : sizes) {
    const NdkSge ss = src->sge(0, n);
    const NdkSge rs = dst->sge(0, 4096);
    ASSERT_EQ(y.qp->receive(nullptr, &rs, 1), STATUS_SUCCESS);
    ASSERT_EQ(y.qp->receive(nullptr, &rs, 1), STATUS_SUCCESS);
    ASSERT_EQ(y.qp->receive(nullptr, &rs, 1), STATUS_SUCCESS);
    ASSERT_EQ(x.qp->send(nullptr, &ss, 1, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT), STATUS_SUCCESS);
    ASSERT_EQ(x.qp->send_with_immediate(nullptr, &ss, 1, 0xABCD, 0), STATUS_SUCCESS);
    ASSERT_EQ(x.qp->write(nullptr, &ss, 1, dst->va() + 4096, dst->mr->get_remote_token(), 0),
              STATUS_SUCCESS);
    ASSERT_EQ(x.qp->write_with_immediate(nullptr, &ss, 1, dst->va() + 4096,
                                         dst->mr->get_remote_token(), 7, 0),
              STATUS_SUCCESS);
    const NdkSge sink = src->sge(4096, n);
    ASSERT_EQ(x.qp->read(nullptr, &sink, 1, dst->va(), dst->mr->get_remote_token(), 0),
              STATUS_SUCCESS);
    ASSERT_EQ(wait_results(x.cq, 5).size(), 5u);
    ASSERT_EQ(wait_results(y.cq, 3).size(), 3u);
  }
  const NdkSge result = src->sge(0, 8);
  ASSERT_EQ(x.qp->fetch_add(nullptr, result, dst->va() + 8, dst->mr->get_remote_token(), 1, 0),
            STATUS_SUCCESS);
  ASSERT_EQ(
      x.qp->compare_swap(nullptr, result, dst->va() + 8, dst->mr->get_remote_token(), 1, 2, 0),
      STATUS_SUCCESS);
  ASSERT_EQ(wait_results(x.cq, 2).size(), 2u);
  poll(16);  // trailing ACKs
  test_hooks::set_tx_tap(*a_.adapter, nullptr, nullptr);
  test_hooks::set_tx_tap(*b_.adapter, nullptr, nullptr);
  ASSERT_GT(cap.frames.size(), 30u);

  std::filesystem::create_directories(artifacts);
  const std::string path = std::string(artifacts) + "/rc-traffic.pcap";
  {
    wire::PcapWriter w;
    ASSERT_TRUE(w.open(path)) << w.error();
    for (const auto& f : cap.frames) w.write(wire::Bytes(f.data(), f.size()));
    w.close();
  }
  const test::RunResult r = test::roce_check(path);
  EXPECT_EQ(r.status, 0) << r.output;

  std::vector<std::unique_ptr<Buffer>> bx, by;
  bx.push_back(std::move(src));
  by.push_back(std::move(dst));
  close_endpoint(x, &bx);
  close_endpoint(y, &by);
}

}  // namespace
}  // namespace rocedp::test
