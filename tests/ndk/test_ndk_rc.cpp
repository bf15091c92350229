// RC data path through the NDK API: two adapters over a ring pair, QPs on different cores,
// every operation at sizes from 0 B to 16 MiB around the MTU, verified byte for byte; immediate
// data, invalidation, solicited events and CQ notifications (on the owning core). The same
// operations over IPv6 (NdkQpConnectParams::remote_ip6), through the polling cores' IPv6 path.

#include <gtest/gtest.h>

#include <random>

#include "tests/ndk/ndk_helpers.hpp"

namespace rocedp::test {
namespace {

constexpr uint32_t kMtu = 1024;
const std::vector<uint32_t> kSizes = {0, 1, 63, kMtu - 1, kMtu, kMtu + 1, 1u << 20, 16u << 20};

void fill_random(std::vector<uint8_t>& v, uint32_t seed) {
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
}

bool same_bytes(const uint8_t* a, const uint8_t* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

class NdkRc : public NdkFixture {
 protected:
  void SetUp() override {
    NdkFixture::SetUp();
    make_pair(x_, y_, 0, 1);
    src_ = buffer(x_.pd, 16u << 20);
    dst_ = buffer(y_.pd, 16u << 20);
  }
  void TearDown() override {
    close_pair(x_, y_, std::move(src_), std::move(dst_));
    NdkFixture::TearDown();
  }

  Endpoint x_, y_;
  std::unique_ptr<Buffer> src_, dst_;
};

TEST_F(NdkRc, SendReceiveAtEverySize) {
  for (uint32_t n : kSizes) {
    SCOPED_TRACE(n);
    fill_random(src_->data, n);
    std::fill(dst_->data.begin(), dst_->data.end(), 0);
    const NdkSge rs = dst_->sge(0, n);
    const NdkSge ss = src_->sge(0, n);
    ASSERT_EQ(y_.qp->receive(reinterpret_cast<void*>(uintptr_t{0x100 + n}), &rs, 1),
              STATUS_SUCCESS);
    ASSERT_EQ(x_.qp->send(reinterpret_cast<void*>(uintptr_t{0x200 + n}), &ss, 1, 0),
              STATUS_SUCCESS);
    auto sc = wait_results(x_.cq, 1);
    auto rc = wait_results(y_.cq, 1);
    ASSERT_EQ(sc.size(), 1u);
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(sc[0].status, STATUS_SUCCESS) << status_name(sc[0].status);
    EXPECT_EQ(sc[0].type, NdkOperationType::kSend);
    EXPECT_EQ(sc[0].request_context, reinterpret_cast<void*>(uintptr_t{0x200 + n}));
    EXPECT_EQ(sc[0].qp_context, &x_);
    EXPECT_EQ(rc[0].status, STATUS_SUCCESS) << status_name(rc[0].status);
    EXPECT_EQ(rc[0].type, NdkOperationType::kReceive);
    EXPECT_EQ(rc[0].bytes_transferred, n);
    EXPECT_EQ(rc[0].qp_context, &y_);
    EXPECT_EQ(rc[0].request_context, reinterpret_cast<void*>(uintptr_t{0x100 + n}));
    EXPECT_TRUE(same_bytes(src_->ptr(), dst_->ptr(), n));
  }
}

TEST_F(NdkRc, WriteAtEverySize) {
  for (uint32_t n : kSizes) {
    SCOPED_TRACE(n);
    fill_random(src_->data, n + 7);
    std::fill(dst_->data.begin(), dst_->data.end(), 0);
    const NdkSge ss = src_->sge(0, n);
    // The post hints, also for more posts than the queue holds, change nothing (rocedp-perf
    // calls them before its posts over many QPs; test_work_queue checks the ring).
    x_.qp->prefetch_post(0);
    x_.qp->prefetch_post(1u << 20);
    ASSERT_EQ(x_.qp->write(nullptr, &ss, 1, dst_->va(), dst_->mr->get_remote_token(), 0),
              STATUS_SUCCESS);
    auto sc = wait_results(x_.cq, 1);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, STATUS_SUCCESS) << status_name(sc[0].status);
    EXPECT_EQ(sc[0].type, NdkOperationType::kWrite);
    EXPECT_TRUE(same_bytes(src_->ptr(), dst_->ptr(), n));
    if (n < dst_->data.size()) {
      EXPECT_EQ(dst_->data[n], 0) << "no byte beyond the message";
    }
  }
}

TEST_F(NdkRc, WriteWithImmediateAtEverySize) {
  for (uint32_t n : kSizes) {
    SCOPED_TRACE(n);
    fill_random(src_->data, n + 11);
    ASSERT_EQ(y_.qp->receive(nullptr, nullptr, 0), STATUS_SUCCESS);
    const NdkSge ss = src_->sge(0, n);
    ASSERT_EQ(x_.qp->write_with_immediate(nullptr, &ss, 1, dst_->va(), dst_->mr->get_remote_token(),
                                          0xC0DE0000 + n, 0),
              STATUS_SUCCESS);
    auto sc = wait_results(x_.cq, 1);
    auto rc = wait_results(y_.cq, 1);
    ASSERT_EQ(sc.size(), 1u);
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(sc[0].status, STATUS_SUCCESS);
    EXPECT_EQ(rc[0].status, STATUS_SUCCESS);
    EXPECT_EQ(rc[0].bytes_transferred, n);
    EXPECT_EQ(rc[0].type_specific_completion_output & 0xFFFFFFFFu, 0xC0DE0000u + n);
    EXPECT_NE(rc[0].type_specific_completion_output >> 32, 0u) << "immediate valid";
    EXPECT_TRUE(same_bytes(src_->ptr(), dst_->ptr(), n));
  }
}

TEST_F(NdkRc, SendWithImmediateAndSolicitedEventNotifiesOnTheOwningCore) {
  const NdkSge rs = dst_->sge(0, 100);
  fill_random(src_->data, 5);
  const NdkSge ss = src_->sge(0, 100);
  // Armed for solicited only: an unsolicited receive does not fire.
  y_.cq->arm(NdkCqNotifyType::kSolicited);
  ASSERT_EQ(y_.qp->receive(nullptr, &rs, 1), STATUS_SUCCESS);
  ASSERT_EQ(x_.qp->send_with_immediate(nullptr, &ss, 1, 0x12345678, 0), STATUS_SUCCESS);
  auto rc = wait_results(y_.cq, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].type_specific_completion_output & 0xFFFFFFFFu, 0x12345678u);
  EXPECT_EQ(y_.notes.count, 0) << "SOLICITED arm, unsolicited receive";
  ASSERT_EQ(y_.qp->receive(nullptr, &rs, 1), STATUS_SUCCESS);
  ASSERT_EQ(x_.qp->send(nullptr, &ss, 1, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT), STATUS_SUCCESS);
  ASSERT_TRUE(poll_until([&] { return y_.notes.count == 1; }));
  EXPECT_EQ(y_.notes.last, STATUS_SUCCESS);
  rc = wait_results(y_.cq, 1);
  EXPECT_TRUE(same_bytes(src_->ptr(), dst_->ptr(), 100));
  wait_results(x_.cq, 2);
  // ANY on the sender's CQ fires once for the next completion, once per arm.
  x_.cq->arm(NdkCqNotifyType::kAny);
  ASSERT_EQ(y_.qp->receive(nullptr, &rs, 1), STATUS_SUCCESS);
  ASSERT_EQ(y_.qp->receive(nullptr, &rs, 1), STATUS_SUCCESS);
  ASSERT_EQ(x_.qp->send(nullptr, &ss, 1, 0), STATUS_SUCCESS);
  ASSERT_EQ(x_.qp->send(nullptr, &ss, 1, 0), STATUS_SUCCESS);
  wait_results(x_.cq, 2);
  EXPECT_EQ(x_.notes.count, 1);
  wait_results(y_.cq, 2);
}

TEST_F(NdkRc, ReadAtEverySize) {
  for (uint32_t n : kSizes) {
    SCOPED_TRACE(n);
    fill_random(dst_->data, n + 3);
    std::fill(src_->data.begin(), src_->data.end(), 0);
    const NdkSge sink = src_->sge(0, n);
    ASSERT_EQ(x_.qp->read(nullptr, &sink, 1, dst_->va(), dst_->mr->get_remote_token(), 0),
              STATUS_SUCCESS);
    auto sc = wait_results(x_.cq, 1);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, STATUS_SUCCESS) << status_name(sc[0].status);
    EXPECT_EQ(sc[0].type, NdkOperationType::kRead);
    EXPECT_TRUE(same_bytes(src_->ptr(), dst_->ptr(), n));
  }
}

TEST_F(NdkRc, AtomicsReturnTheOriginalAndUpdateTheTarget) {
  uint64_t* target = reinterpret_cast<uint64_t*>(dst_->ptr() + 64);
  *target = 40;
  const NdkSge result = src_->sge(0, 8);
  ASSERT_EQ(x_.qp->fetch_add(nullptr, result, dst_->va() + 64, dst_->mr->get_remote_token(), 2, 0),
            STATUS_SUCCESS);
  auto sc = wait_results(x_.cq, 1);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, STATUS_SUCCESS);
  EXPECT_EQ(*target, 42u);
  uint64_t orig;
  std::memcpy(&orig, src_->ptr(), 8);
  EXPECT_EQ(orig, 40u);
  ASSERT_EQ(
      x_.qp->compare_swap(nullptr, result, dst_->va() + 64, dst_->mr->get_remote_token(), 41, 7, 0),
      STATUS_SUCCESS);
  ASSERT_EQ(
      x_.qp->compare_swap(nullptr, result, dst_->va() + 64, dst_->mr->get_remote_token(), 42, 7, 0),
      STATUS_SUCCESS);
  sc = wait_results(x_.cq, 2);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[1].status, STATUS_SUCCESS);
  EXPECT_EQ(*target, 7u) << "the first compare failed, the second swapped";
  std::memcpy(&orig, src_->ptr(), 8);
  EXPECT_EQ(orig, 42u);
  // Unaligned target: a local operation error, no packet.
  ASSERT_EQ(x_.qp->fetch_add(nullptr, result, dst_->va() + 65, dst_->mr->get_remote_token(), 1, 0),
            STATUS_SUCCESS);
  sc = wait_results(x_.cq, 1);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, STATUS_INVALID_DEVICE_REQUEST);
}

TEST_F(NdkRc, SendAndInvalidateInvalidatesThePeersToken) {
  Mr* fr = nullptr;
  ASSERT_EQ(y_.pd->create_mr(true, nullptr, nullptr, &fr), STATUS_SUCCESS);
  ASSERT_EQ(fr->initialize_fast_register_mr(16, true, nullptr, nullptr), STATUS_SUCCESS);
  // Fast register on B's own QP makes the region valid for remote writes.
  ASSERT_EQ(y_.qp->fast_register(nullptr, fr, dst_->va(), 4096, kMrAll, 0), STATUS_SUCCESS);
  auto yc = wait_results(y_.cq, 1);
  ASSERT_EQ(yc.size(), 1u);
  EXPECT_EQ(yc[0].status, STATUS_SUCCESS);
  EXPECT_EQ(yc[0].type, NdkOperationType::kFastRegister);
  fill_random(src_->data, 99);
  const NdkSge ss = src_->sge(0, 256);
  ASSERT_EQ(x_.qp->write(nullptr, &ss, 1, dst_->va(), fr->get_remote_token(), 0), STATUS_SUCCESS);
  auto xc = wait_results(x_.cq, 1);
  ASSERT_EQ(xc.size(), 1u);
  EXPECT_EQ(xc[0].status, STATUS_SUCCESS);
  EXPECT_TRUE(same_bytes(src_->ptr(), dst_->ptr(), 256));

  const NdkSge rs = dst_->sge(8192, 256);
  ASSERT_EQ(y_.qp->receive(nullptr, &rs, 1), STATUS_SUCCESS);
  ASSERT_EQ(x_.qp->send_and_invalidate(nullptr, &ss, 1, fr->get_remote_token(), 0), STATUS_SUCCESS);
  yc = wait_results(y_.cq, 1);
  ASSERT_EQ(yc.size(), 1u);
  EXPECT_EQ(yc[0].status, STATUS_SUCCESS);
  EXPECT_EQ(yc[0].type, NdkOperationType::kReceiveAndInvalidate);
  EXPECT_EQ(yc[0].type_specific_completion_output, fr->get_remote_token());
  // The non-Ex form still returns it (NDKPI completion rules).
  wait_results(x_.cq, 1);

  // The token is dead now: a WRITE through it is a remote access error.
  ASSERT_EQ(x_.qp->write(nullptr, &ss, 1, dst_->va(), fr->get_remote_token(), 0), STATUS_SUCCESS);
  xc = wait_results(x_.cq, 1);
  ASSERT_EQ(xc.size(), 1u);
  EXPECT_EQ(xc[0].status, STATUS_ACCESS_VIOLATION);
  close_mr(fr);
}

// QPs connected by IPv6 address alone (remote_ip 0): an IPv4 frame would go to 0.0.0.0, which
// the peer's core drops, so a completion means the frames were IPv6 end to end.
class NdkRcIpv6 : public NdkRc {
 protected:
  void SetUp() override {
    ipv6_qps_ = true;
    NdkRc::SetUp();
  }
};

TEST_F(NdkRcIpv6, SendWriteAndReadAtEverySizeByteExact) {
  for (uint32_t n : kSizes) {
    SCOPED_TRACE(n);
    fill_random(src_->data, n + 5);
    std::fill(dst_->data.begin(), dst_->data.end(), 0);
    const NdkSge rs = dst_->sge(0, n);
    const NdkSge ss = src_->sge(0, n);
    ASSERT_EQ(y_.qp->receive(nullptr, &rs, 1), STATUS_SUCCESS);
    ASSERT_EQ(x_.qp->send(nullptr, &ss, 1, 0), STATUS_SUCCESS);
    auto sc = wait_results(x_.cq, 1);
    auto rc = wait_results(y_.cq, 1);
    ASSERT_EQ(sc.size(), 1u);
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(sc[0].status, STATUS_SUCCESS) << status_name(sc[0].status);
    EXPECT_EQ(rc[0].bytes_transferred, n);
    EXPECT_TRUE(same_bytes(src_->ptr(), dst_->ptr(), n));

    fill_random(src_->data, n + 6);
    ASSERT_EQ(x_.qp->write(nullptr, &ss, 1, dst_->va(), dst_->mr->get_remote_token(), 0),
              STATUS_SUCCESS);
    sc = wait_results(x_.cq, 1);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, STATUS_SUCCESS);
    EXPECT_TRUE(same_bytes(src_->ptr(), dst_->ptr(), n));

    fill_random(dst_->data, n + 7);
    ASSERT_EQ(x_.qp->read(nullptr, &ss, 1, dst_->va(), dst_->mr->get_remote_token(), 0),
              STATUS_SUCCESS);
    sc = wait_results(x_.cq, 1);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, STATUS_SUCCESS);
    EXPECT_TRUE(same_bytes(src_->ptr(), dst_->ptr(), n));
  }
}

// A port without an IPv6 address cannot connect a QP to an IPv6 peer; an IPv4-mapped address is
// the IPv4 peer it maps.
class NdkIpv4OnlyPorts : public NdkFixture {
 protected:
  bool ipv6_ports() const override { return false; }
};

TEST_F(NdkIpv4OnlyPorts, AnIpv6PeerIsInvalidAndAnIpv4MappedOneConnects) {
  Endpoint x, y;
  x.host = &a_;
  y.host = &b_;
  for (Endpoint* e : {&x, &y}) {
    e->pd = make_pd(*e->host);
    e->cq = make_cq(*e->host, 256, 0, &e->notes);
    e->qp = make_qp(e->pd, e->cq, e->cq, e, 64);
  }
  NdkQpConnectParams p = params_to(b_, y.qp, 100, 7000);
  p.remote_ip = 0;
  std::memcpy(p.remote_ip6, b_.ip6.bytes.data(), 16);
  Requested r;
  EXPECT_EQ(x.qp->connect(p, &Requested::cb, &r), STATUS_INVALID_PARAMETER);
  EXPECT_FALSE(r.done);
  // ::ffff:198.18.0.2 and ::ffff:198.18.0.1: both QPs connect over IPv4 and a SEND arrives.
  const uint8_t mapped_b[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 198, 18, 0, 2};
  const uint8_t mapped_a[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 198, 18, 0, 1};
  std::memcpy(p.remote_ip6, mapped_b, 16);
  NdkQpConnectParams q = params_to(a_, x.qp, 7000, 100);
  q.remote_ip = 0;
  std::memcpy(q.remote_ip6, mapped_a, 16);
  connect(x, y, &p, &q);
  auto src = buffer(x.pd, 64);
  auto dst = buffer(y.pd, 64);
  fill_random(src->data, 1);
  const NdkSge rs = dst->sge(0, 64);
  const NdkSge ss = src->sge(0, 64);
  ASSERT_EQ(y.qp->receive(nullptr, &rs, 1), STATUS_SUCCESS);
  ASSERT_EQ(x.qp->send(nullptr, &ss, 1, 0), STATUS_SUCCESS);
  const auto rc = wait_results(y.cq, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, STATUS_SUCCESS);
  EXPECT_TRUE(same_bytes(src->ptr(), dst->ptr(), 64));
  close_pair(x, y, std::move(src), std::move(dst));
}

}  // namespace
}  // namespace rocedp::test
