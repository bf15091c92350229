// NDK calls beyond the basic object set: memory windows (CreateMw, Bind, Invalidate on a window,
// GetRemoteTokenFromMw), GetPrivilegedMemoryRegionToken, BuildLAM/ReleaseLAM and
// ControlCqInterruptModeration, each with its documented statuses, over two adapters.

#include <gtest/gtest.h>

#include "tests/ndk/ndk_helpers.hpp"

namespace rocedp::test {
namespace {

class NdkCalls : public NdkFixture {
 protected:
  void SetUp() override {
    NdkFixture::SetUp();
    if (HasFatalFailure()) return;
    make_pair(x_, y_, 0, 1, 256, 32);
    src_ = buffer(x_.pd, 1 << 16, kMrAll, 0);
    dst_ = buffer(y_.pd, 1 << 16, kMrAll, 0);
  }
  void TearDown() override {
    std::vector<std::unique_ptr<Buffer>> bx, by;
    if (src_) bx.push_back(std::move(src_));
    if (dst_) by.push_back(std::move(dst_));
    if (x_.pd != nullptr) close_endpoint(x_, &bx);
    if (y_.pd != nullptr) close_endpoint(y_, &by);
    NdkFixture::TearDown();
  }
  void close_mw(Mw* mw) {
    Closed c;
    ASSERT_EQ(mw->close(&Closed::cb, &c), STATUS_PENDING);
    EXPECT_EQ(c.count, 0);
    ASSERT_TRUE(poll_until([&] { return c.count != 0; }));
    poll(4);
    EXPECT_EQ(c.count, 1);
  }
  NdkResultEx one(Cq* cq) {
    auto r = wait_results(cq, 1);
    EXPECT_EQ(r.size(), 1u);
    return r.empty() ? NdkResultEx{} : r[0];
  }
  Endpoint x_, y_;
  std::unique_ptr<Buffer> src_, dst_;
};

// B lends a 4 KiB window of its 64 KiB region: A's WRITE and READ through the window's token
// work inside it; after B invalidates the window the same WRITE is a remote access error.
TEST_F(NdkCalls, MemoryWindowBindLendsARangeAndInvalidateTakesItBack) {
  Mw* mw = nullptr;
  EXPECT_EQ(y_.pd->create_mw(nullptr, nullptr, nullptr), STATUS_INVALID_PARAMETER);
  ASSERT_EQ(y_.pd->create_mw(nullptr, nullptr, &mw), STATUS_SUCCESS);
  ASSERT_NE(mw, nullptr);
  EXPECT_EQ(mw->header.object_type, NdkObjectType::kMw);
  const uint32_t token = mw->get_remote_token();
  EXPECT_NE(token, 0u);
  EXPECT_NE(token, dst_->mr->get_remote_token());
  uint8_t* const win = dst_->ptr() + 8192;
  std::memset(src_->ptr(), 0xB4, 4096);
  const NdkSge ss = src_->sge(0, 4096);
  // Not bound yet: the token reaches nothing (checked at the end, where the QP may die).
  EXPECT_EQ(y_.qp->bind(nullptr, nullptr, mw, win, 4096, kMrAll, 0), STATUS_INVALID_PARAMETER);
  ASSERT_EQ(y_.qp->bind(reinterpret_cast<void*>(7), dst_->mr, mw, win, 4096,
                        NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0),
            STATUS_SUCCESS);
  NdkResultEx b = one(y_.cq);
  EXPECT_EQ(b.status, STATUS_SUCCESS);
  EXPECT_EQ(b.type, NdkOperationType::kBind);
  EXPECT_EQ(b.request_context, reinterpret_cast<void*>(7));
  EXPECT_EQ(mw->get_remote_token(), token) << "the token does not change with a bind";
  ASSERT_EQ(x_.qp->write(nullptr, &ss, 1, reinterpret_cast<uint64_t>(win), token, 0),
            STATUS_SUCCESS);
  EXPECT_EQ(one(x_.cq).status, STATUS_SUCCESS);
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(win[i], 0xB4) << i;
  EXPECT_EQ(dst_->data[8191], 0) << "outside the window";
  const NdkSge rs = src_->sge(8192, 4096);
  ASSERT_EQ(x_.qp->read(nullptr, &rs, 1, reinterpret_cast<uint64_t>(win), token, 0),
            STATUS_SUCCESS);
  EXPECT_EQ(one(x_.cq).status, STATUS_SUCCESS);
  EXPECT_EQ(std::memcmp(src_->ptr() + 8192, win, 4096), 0);
  // B invalidates the window (in order with its other requests).
  ASSERT_EQ(y_.qp->invalidate(reinterpret_cast<void*>(8), mw, 0), STATUS_SUCCESS);
  NdkResultEx inv = one(y_.cq);
  EXPECT_EQ(inv.status, STATUS_SUCCESS);
  EXPECT_EQ(inv.type, NdkOperationType::kInvalidate);
  std::memset(src_->ptr(), 0x3D, 4096);
  ASSERT_EQ(x_.qp->write(nullptr, &ss, 1, reinterpret_cast<uint64_t>(win), token, 0),
            STATUS_SUCCESS);
  NdkResultEx w = one(x_.cq);
  EXPECT_EQ(w.status, STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(w.provider_error_code, 10u) << "NAK remote access error";
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(win[i], 0xB4) << i;
  close_mw(mw);
}

TEST_F(NdkCalls, MemoryWindowRefusesRangesAndRightsItsRegionLacksAndOtherPds) {
  Mw* mw = nullptr;
  ASSERT_EQ(y_.pd->create_mw(nullptr, nullptr, &mw), STATUS_SUCCESS);
  // A region without remote write: a window cannot grant it.
  std::vector<uint8_t> ro(4096, 0);
  Mr* romr = nullptr;
  ASSERT_EQ(y_.pd->create_mr(false, nullptr, nullptr, &romr), STATUS_SUCCESS);
  ASSERT_EQ(
      romr->register_mr(ro.data(), ro.size(), NDK_MR_FLAG_ALLOW_REMOTE_READ, nullptr, nullptr),
      STATUS_SUCCESS);
  ASSERT_EQ(y_.qp->bind(nullptr, romr, mw, ro.data(), 4096, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0),
            STATUS_SUCCESS);
  NdkResultEx r = one(y_.cq);
  EXPECT_EQ(r.status, STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(r.type, NdkOperationType::kBind);
  close_mr(romr);
  close_mw(mw);
}

TEST_F(NdkCalls, MemoryWindowOutsideItsRegionIsAnAccessViolation) {
  Mw* mw = nullptr;
  ASSERT_EQ(y_.pd->create_mw(nullptr, nullptr, &mw), STATUS_SUCCESS);
  ASSERT_EQ(y_.qp->bind(nullptr, dst_->mr, mw, dst_->ptr() + dst_->data.size() - 100, 4096,
                        NDK_MR_FLAG_ALLOW_REMOTE_READ, 0),
            STATUS_SUCCESS);
  EXPECT_EQ(one(y_.cq).status, STATUS_ACCESS_VIOLATION);
  close_mw(mw);
}

TEST_F(NdkCalls, MemoryWindowOfAnotherPdIsAnAccessViolation) {
  Pd* other = make_pd(b_);
  Mw* mw = nullptr;
  ASSERT_EQ(other->create_mw(nullptr, nullptr, &mw), STATUS_SUCCESS);
  ASSERT_EQ(y_.qp->bind(nullptr, dst_->mr, mw, dst_->ptr(), 4096, NDK_MR_FLAG_ALLOW_REMOTE_READ, 0),
            STATUS_SUCCESS);
  EXPECT_EQ(one(y_.cq).status, STATUS_ACCESS_VIOLATION);
  close_mw(mw);
  EXPECT_EQ(other->close(nullptr, nullptr), STATUS_SUCCESS);
}

// A window dies with its region: after DeregisterMr completes, the window's token fails.
TEST_F(NdkCalls, MemoryWindowStopsWorkingWhenItsRegionIsDeregistered) {
  std::vector<uint8_t> region(8192, 0);
  Mr* mr = nullptr;
  ASSERT_EQ(y_.pd->create_mr(false, nullptr, nullptr, &mr), STATUS_SUCCESS);
  ASSERT_EQ(mr->register_mr(region.data(), region.size(), kMrAll, nullptr, nullptr),
            STATUS_SUCCESS);
  Mw* mw = nullptr;
  ASSERT_EQ(y_.pd->create_mw(nullptr, nullptr, &mw), STATUS_SUCCESS);
  ASSERT_EQ(y_.qp->bind(nullptr, mr, mw, region.data(), 4096, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0),
            STATUS_SUCCESS);
  ASSERT_EQ(one(y_.cq).status, STATUS_SUCCESS);
  Requested d;
  ASSERT_EQ(mr->deregister_mr(&Requested::cb, &d), STATUS_PENDING);
  ASSERT_TRUE(poll_until([&] { return d.done; }));
  const NdkSge ss = src_->sge(0, 64);
  std::memset(src_->ptr(), 0x99, 64);
  ASSERT_EQ(x_.qp->write(nullptr, &ss, 1, reinterpret_cast<uint64_t>(region.data()),
                         mw->get_remote_token(), 0),
            STATUS_SUCCESS);
  EXPECT_EQ(one(x_.cq).status, STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(region[0], 0);
  close_mw(mw);
  close_mr(mr);
}

// SMB Direct's privileged token: local SGEs anywhere in memory (no registration); never a
// remote token.
TEST_F(NdkCalls, PrivilegedTokenReachesUnregisteredLocalMemoryButNothingRemote) {
  EXPECT_EQ(x_.pd->get_privileged_memory_region_token(nullptr), STATUS_INVALID_PARAMETER);
  uint32_t tx = 0, tx2 = 0, ty = 0;
  ASSERT_EQ(x_.pd->get_privileged_memory_region_token(&tx), STATUS_SUCCESS);
  ASSERT_EQ(x_.pd->get_privileged_memory_region_token(&tx2), STATUS_SUCCESS);
  EXPECT_EQ(tx, tx2);
  ASSERT_EQ(y_.pd->get_privileged_memory_region_token(&ty), STATUS_SUCCESS);
  std::vector<uint8_t> plain(256, 0x61), landing(256, 0);  // neither registered
  const NdkSge rs{landing.data(), 256, ty};
  ASSERT_EQ(y_.qp->receive(nullptr, &rs, 1), STATUS_SUCCESS);
  const NdkSge ss{plain.data(), 256, tx};
  ASSERT_EQ(x_.qp->send(nullptr, &ss, 1, 0), STATUS_SUCCESS);
  EXPECT_EQ(one(x_.cq).status, STATUS_SUCCESS);
  NdkResultEx r = one(y_.cq);
  EXPECT_EQ(r.status, STATUS_SUCCESS);
  EXPECT_EQ(r.bytes_transferred, 256u);
  EXPECT_EQ(landing, plain);
  // As a remote token it grants nothing.
  const NdkSge ws = src_->sge(0, 64);
  ASSERT_EQ(x_.qp->write(nullptr, &ws, 1, reinterpret_cast<uint64_t>(landing.data()), ty, 0),
            STATUS_SUCCESS);
  EXPECT_EQ(one(x_.cq).status, STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(landing[0], 0x61);
}

TEST_F(NdkCalls, BuildLamListsEveryPageWithTheFirstByteOffset) {
  alignas(4096) static uint8_t mem[4 * 4096];
  const uint8_t* start = mem + 100;
  const size_t len = 2 * 4096;  // 100 .. 8291: pages 0, 1, 2
  uint32_t size = 0, fbo = 0;
  EXPECT_EQ(a_.adapter->build_lam(start, len, nullptr, nullptr, nullptr, &size, &fbo),
            STATUS_BUFFER_TOO_SMALL);
  EXPECT_EQ(size, ndk_lam_size(3));
  std::vector<uint8_t> storage(size);
  auto* lam = reinterpret_cast<NdkLogicalAddressMapping*>(storage.data());
  uint32_t small = size - 1;
  EXPECT_EQ(a_.adapter->build_lam(start, len, nullptr, nullptr, lam, &small, &fbo),
            STATUS_BUFFER_TOO_SMALL);
  EXPECT_EQ(small, size);
  ASSERT_EQ(a_.adapter->build_lam(start, len, nullptr, nullptr, lam, &size, &fbo), STATUS_SUCCESS);
  EXPECT_EQ(fbo, 100u);
  ASSERT_EQ(lam->adapter_page_count, 3u);
  for (uint32_t i = 0; i < 3; ++i)
    EXPECT_EQ(lam->adapter_page_array[i], reinterpret_cast<uint64_t>(mem) + i * 4096u);
  a_.adapter->release_lam(lam);
  EXPECT_EQ(a_.adapter->build_lam(nullptr, len, nullptr, nullptr, lam, &size, &fbo),
            STATUS_INVALID_PARAMETER);
  EXPECT_EQ(a_.adapter->build_lam(start, 0, nullptr, nullptr, lam, &size, &fbo),
            STATUS_INVALID_PARAMETER);
  EXPECT_EQ(a_.adapter->build_lam(reinterpret_cast<void*>(~uintptr_t{0} - 10), 100, nullptr,
                                  nullptr, lam, &size, &fbo),
            STATUS_INVALID_PARAMETER)
      << "wraps";
}

TEST_F(NdkCalls, CqInterruptModerationIsNotSupportedAndNotAdvertised) {
  EXPECT_EQ(x_.cq->control_interrupt_moderation(100, 16), STATUS_NOT_SUPPORTED);
  EXPECT_EQ(x_.cq->control_interrupt_moderation(0, 0), STATUS_NOT_SUPPORTED);
  NdkAdapterInfo info;
  size_t size = sizeof(info);
  ASSERT_EQ(a_.adapter->query_adapter_info(&info, &size), STATUS_SUCCESS);
  EXPECT_EQ(info.adapter_flags & NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED, 0u);
  EXPECT_GT(info.max_window_size, 0u) << "memory windows are supported";
}

}  // namespace
}  // namespace rocedp::test
