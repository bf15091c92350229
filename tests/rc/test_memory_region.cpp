// Memory-region table: tokens and generations, bounds/access/PD checks, fast register and
// invalidation, and concurrent readers while control re-registers.
#include "dataplane/rc/memory_region.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace rocedp::rc {
namespace {

constexpr uint32_t kPd = 7;

std::unique_ptr<MemoryRegionTable> make_table(uint32_t capacity = 16) {
  auto t = MemoryRegionTable::create(capacity, 1ull << 30, 64);
  EXPECT_NE(t, nullptr);
  return t;
}

uint64_t addr(const void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

TEST(MemoryRegion, RegisterGivesTokensThatCheckBoundsAndAccess) {
  auto t = make_table();
  std::vector<uint8_t> buf(4096);
  MrTokens tok;
  ASSERT_EQ(t->register_mr(kPd, buf.data(), buf.size(),
                           NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ, &tok),
            STATUS_SUCCESS);
  EXPECT_NE(tok.local, 0u);
  EXPECT_NE(mr_token_generation(tok.local), 0u);
  const uint64_t base = addr(buf.data());
  MrFault f = MrFault::kNone;
  EXPECT_EQ(t->check_local(tok.local, kPd, base, 4096, kMrAccessLocalWrite, &f), STATUS_SUCCESS);
  EXPECT_EQ(t->check_local(tok.local, kPd, base + 4000, 96, kMrAccessLocalRead), STATUS_SUCCESS);
  EXPECT_EQ(t->check_local(tok.local, kPd, base + 4000, 97, kMrAccessLocalRead, &f),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(f, MrFault::kBounds);
  EXPECT_EQ(t->check_local(tok.local, kPd, base - 1, 2, kMrAccessLocalRead, &f),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(f, MrFault::kBounds);
  EXPECT_EQ(t->check_remote(tok.remote, kPd, base + 8, 64, kMrAccessRemoteRead), STATUS_SUCCESS);
  EXPECT_EQ(t->check_remote(tok.remote, kPd, base + 8, 64, kMrAccessRemoteWrite, &f),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(f, MrFault::kAccess);
  EXPECT_EQ(t->check_remote(tok.remote, kPd + 1, base, 8, kMrAccessRemoteRead, &f),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(f, MrFault::kPdMismatch);
  // Huge lengths must not wrap around the bounds arithmetic.
  EXPECT_EQ(t->check_remote(tok.remote, kPd, base + 8, ~0ull, kMrAccessRemoteRead, &f),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(f, MrFault::kBounds);
}

TEST(MemoryRegion, RemoteWriteImpliesLocalWriteAndReadOnlyRegions) {
  auto t = make_table();
  std::vector<uint8_t> buf(256);
  MrTokens rw, ro;
  ASSERT_EQ(t->register_mr(kPd, buf.data(), 128, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, &rw),
            STATUS_SUCCESS);
  EXPECT_EQ(t->check_local(rw.local, kPd, addr(buf.data()), 128, kMrAccessLocalWrite),
            STATUS_SUCCESS);
  EXPECT_EQ(t->check_remote(rw.remote, kPd, addr(buf.data()), 128, kMrAccessRemoteWrite),
            STATUS_SUCCESS);
  EXPECT_EQ(t->check_remote(rw.remote, kPd, addr(buf.data()), 8, kMrAccessRemoteAtomic),
            STATUS_ACCESS_VIOLATION);  // no remote read
  ASSERT_EQ(t->register_mr(kPd, buf.data() + 128, 128, NDK_MR_FLAG_ALLOW_LOCAL_READ, &ro),
            STATUS_SUCCESS);
  EXPECT_NE(ro.local, rw.local);
  EXPECT_EQ(t->check_local(ro.local, kPd, addr(buf.data() + 128), 8, kMrAccessLocalRead),
            STATUS_SUCCESS);
  EXPECT_EQ(t->check_local(ro.local, kPd, addr(buf.data() + 128), 8, kMrAccessLocalWrite),
            STATUS_ACCESS_VIOLATION);
  // RDMA_READ_SINK grants local write (the adapter reports READ_SINK_NOT_REQUIRED anyway).
  MrTokens sink;
  ASSERT_EQ(t->register_mr(kPd, buf.data(), 64, NDK_MR_FLAG_RDMA_READ_SINK, &sink), STATUS_SUCCESS);
  EXPECT_EQ(t->check_local(sink.local, kPd, addr(buf.data()), 64, kMrAccessLocalWrite),
            STATUS_SUCCESS);
}

TEST(MemoryRegion, RegisterArgumentErrorsAndTableFull) {
  auto t = make_table(2);
  std::vector<uint8_t> buf(64);
  MrTokens tok;
  EXPECT_EQ(t->register_mr(kPd, nullptr, 64, 0, &tok), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(t->register_mr(kPd, buf.data(), 0, 0, &tok), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(t->register_mr(kPd, buf.data(), (1ull << 30) + 1, 0, &tok), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(t->register_mr(kPd, buf.data(), 64, 0x4, &tok), STATUS_INVALID_PARAMETER);  // 4 alone
  EXPECT_EQ(t->register_mr(kPd, buf.data(), 64, 0x10, &tok), STATUS_INVALID_PARAMETER);
  ASSERT_EQ(t->register_mr(kPd, buf.data(), 64, 0, &tok), STATUS_SUCCESS);
  ASSERT_EQ(t->register_mr(kPd, buf.data(), 64, 0, &tok), STATUS_SUCCESS);
  EXPECT_EQ(t->register_mr(kPd, buf.data(), 64, 0, &tok), STATUS_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(t->live_regions(), 2u);
}

TEST(MemoryRegion, DeregisteredTokensGoStaleEvenWhenTheSlotIsReused) {
  auto t = make_table(1);  // one slot: reuse is certain
  std::vector<uint8_t> buf(64);
  MrTokens first, second;
  ASSERT_EQ(t->register_mr(kPd, buf.data(), 64, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, &first),
            STATUS_SUCCESS);
  ASSERT_EQ(t->deregister(first.local), STATUS_SUCCESS);
  MrFault f = MrFault::kNone;
  EXPECT_EQ(t->check_remote(first.remote, kPd, addr(buf.data()), 8, kMrAccessRemoteWrite, &f),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(f, MrFault::kStaleToken);
  EXPECT_EQ(t->deregister(first.local), STATUS_INVALID_PARAMETER);  // twice
  ASSERT_EQ(t->register_mr(kPd, buf.data(), 64, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, &second),
            STATUS_SUCCESS);
  EXPECT_EQ(mr_token_index(second.local), mr_token_index(first.local));
  EXPECT_NE(second.local, first.local);
  EXPECT_EQ(t->check_remote(first.remote, kPd, addr(buf.data()), 8, kMrAccessRemoteWrite, &f),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(f, MrFault::kStaleToken);
  EXPECT_EQ(t->check_remote(second.remote, kPd, addr(buf.data()), 8, kMrAccessRemoteWrite),
            STATUS_SUCCESS);
  // Generations cycle 1..255 and never produce token 0.
  MrTokens tok = second;
  for (int i = 0; i < 600; ++i) {
    ASSERT_EQ(t->deregister(tok.local), STATUS_SUCCESS);
    ASSERT_EQ(t->register_mr(kPd, buf.data(), 64, 0, &tok), STATUS_SUCCESS);
    ASSERT_NE(mr_token_generation(tok.local), 0u);
  }
  EXPECT_EQ(t->check_local(0xFFFFFF01u, kPd, addr(buf.data()), 8, 0, &f), STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(f, MrFault::kBadIndex);
}

TEST(MemoryRegion, ZeroLengthAccessNeedsNoValidToken) {
  auto t = make_table();
  EXPECT_EQ(t->check_remote(0xDEAD00u, kPd, 0, 0, kMrAccessRemoteWrite), STATUS_SUCCESS);
  EXPECT_EQ(t->check_local(0xDEAD00u, kPd, 0, 0, kMrAccessLocalWrite), STATUS_SUCCESS);
  EXPECT_EQ(t->check_remote(0xDEAD00u, kPd, 0, 1, kMrAccessRemoteWrite), STATUS_ACCESS_VIOLATION);
}

TEST(MemoryRegion, FastRegisterAndInvalidateStateMachine) {
  auto t = make_table();
  std::vector<uint8_t> buf(3 * 4096);
  const uint64_t base = addr(buf.data());
  MrTokens tok;
  EXPECT_EQ(t->create_fast_register(kPd, 65, true, &tok), STATUS_IMPLEMENTATION_LIMIT);
  EXPECT_EQ(t->create_fast_register(kPd, 0, true, &tok), STATUS_IMPLEMENTATION_LIMIT);
  ASSERT_EQ(t->create_fast_register(kPd, 2, true, &tok), STATUS_SUCCESS);
  MrFault f = MrFault::kNone;
  // Initialized but not registered: invalid state rejects access.
  EXPECT_EQ(t->check_remote(tok.remote, kPd, base, 8, kMrAccessRemoteRead, &f),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(f, MrFault::kNotValid);
  EXPECT_EQ(t->fast_register(tok.local, base, 3 * 4096, NDK_MR_FLAG_ALLOW_REMOTE_READ),
            STATUS_INVALID_DEVICE_REQUEST);  // more than its 2 pages
  ASSERT_EQ(t->fast_register(tok.local, base, 8192,
                             NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE),
            STATUS_SUCCESS);
  EXPECT_EQ(t->check_remote(tok.remote, kPd, base + 100, 8000, kMrAccessRemoteWrite),
            STATUS_SUCCESS);
  MrView v;
  ASSERT_TRUE(t->view(tok.remote, &v));
  EXPECT_EQ(v.base, base);
  EXPECT_EQ(v.length, 8192u);
  EXPECT_TRUE(v.fast_register);
  EXPECT_EQ(t->fast_register(tok.local, base, 4096, 0), STATUS_INVALID_DEVICE_REQUEST);  // valid
  ASSERT_EQ(t->invalidate(tok.local), STATUS_SUCCESS);
  EXPECT_EQ(t->check_remote(tok.remote, kPd, base + 100, 8, kMrAccessRemoteWrite, &f),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(f, MrFault::kNotValid);
  EXPECT_FALSE(t->view(tok.remote, &v));
  // Re-register with other bounds and rights.
  ASSERT_EQ(t->fast_register(tok.local, base + 4096, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE),
            STATUS_SUCCESS);
  EXPECT_EQ(t->check_local(tok.local, kPd, base + 4096, 4096, kMrAccessLocalWrite), STATUS_SUCCESS);
  EXPECT_EQ(t->check_remote(tok.remote, kPd, base + 4096, 8, kMrAccessRemoteRead),
            STATUS_ACCESS_VIOLATION);
  // Regular regions cannot be invalidated; stale tokens are access violations.
  std::vector<uint8_t> other(64);
  MrTokens reg;
  ASSERT_EQ(t->register_mr(kPd, other.data(), 64, 0, &reg), STATUS_SUCCESS);
  EXPECT_EQ(t->invalidate(reg.local), STATUS_INVALID_DEVICE_REQUEST);
  EXPECT_EQ(t->invalidate(reg.local ^ 0x3), STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(t->fast_register(reg.local, addr(other.data()), 64, 0), STATUS_INVALID_DEVICE_REQUEST);
}

// A QP's memo passes what the table passes and nothing else: a changed entry (invalidated,
// registered again with other bounds, deregistered) is read again, and bounds and rights are
// checked against the memo on every call.
TEST(MemoryRegion, MemoizedChecksFollowEveryChangeOfTheEntry) {
  auto t = make_table();
  std::vector<uint8_t> buf(2 * 4096);
  const uint64_t base = addr(buf.data());
  MrTokens tok;
  ASSERT_EQ(t->create_fast_register(kPd, 2, true, &tok), STATUS_SUCCESS);
  MrMemo memo;
  EXPECT_EQ(t->check_local(memo, tok.local, kPd, base, 8, kMrAccessLocalRead),
            STATUS_ACCESS_VIOLATION);  // not registered yet: nothing remembered
  EXPECT_EQ(memo.token, 0u);
  ASSERT_EQ(t->fast_register(tok.local, base, 8192, NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
  EXPECT_EQ(t->check_local(memo, tok.local, kPd, base, 8192, kMrAccessLocalRead), STATUS_SUCCESS);
  EXPECT_EQ(memo.token, tok.local);
  // The memo answers now; bounds and rights still apply.
  EXPECT_EQ(t->check_local(memo, tok.local, kPd, base + 8184, 8, kMrAccessLocalRead),
            STATUS_SUCCESS);
  EXPECT_EQ(t->check_local(memo, tok.local, kPd, base + 8185, 8, kMrAccessLocalRead),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(t->check_local(memo, tok.local, kPd, base - 1, 8, kMrAccessLocalRead),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(t->check_local(memo, tok.local, kPd, base, 8, kMrAccessLocalWrite),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(t->check_local(memo, tok.local, kPd, base + 8, ~0ull, kMrAccessLocalRead),
            STATUS_ACCESS_VIOLATION);
  // Invalidated: refused although the memo holds the token.
  ASSERT_EQ(t->invalidate(tok.local), STATUS_SUCCESS);
  EXPECT_EQ(t->check_local(memo, tok.local, kPd, base, 8, kMrAccessLocalRead),
            STATUS_ACCESS_VIOLATION);
  // Registered again, on the second page only, with local write.
  ASSERT_EQ(t->fast_register(tok.local, base + 4096, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE),
            STATUS_SUCCESS);
  EXPECT_EQ(t->check_local(memo, tok.local, kPd, base, 8, kMrAccessLocalRead),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(t->check_local(memo, tok.local, kPd, base + 4096, 8, kMrAccessLocalWrite),
            STATUS_SUCCESS);
  // Another region replaces the memo; the first one, deregistered, no longer passes.
  MrTokens reg;
  ASSERT_EQ(t->register_mr(kPd, buf.data(), 64, 0, &reg), STATUS_SUCCESS);
  EXPECT_EQ(t->check_local(memo, reg.local, kPd, base, 64, kMrAccessLocalRead), STATUS_SUCCESS);
  EXPECT_EQ(memo.token, reg.local);
  ASSERT_EQ(t->deregister(reg.local), STATUS_SUCCESS);
  EXPECT_EQ(t->check_local(memo, reg.local, kPd, base, 64, kMrAccessLocalRead),
            STATUS_ACCESS_VIOLATION);
  // A memory window grants no local access and is never remembered.
  uint32_t mw = 0;
  ASSERT_EQ(t->create_window(kPd, &mw), STATUS_SUCCESS);
  EXPECT_EQ(t->check_local(memo, mw, kPd, base, 8, kMrAccessLocalRead), STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(memo.token, reg.local);
}

// A window bound to a fast-registered region reaches only what that region holds now: the
// region keeps its token through an invalidation and a registration over other memory, and the
// window must not reach the memory it covered before (nor use rights the region dropped).
TEST(MemoryRegion, AWindowFollowsItsFastRegisteredRegionWhenItIsRegisteredAgain) {
  auto t = make_table();
  std::vector<uint8_t> buf(4 * 4096);
  const uint64_t base = addr(buf.data());
  constexpr uint32_t kRemote = NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE;
  MrTokens fr;
  ASSERT_EQ(t->create_fast_register(kPd, 4, true, &fr), STATUS_SUCCESS);
  ASSERT_EQ(t->fast_register(fr.local, base, 2 * 4096, kRemote), STATUS_SUCCESS);
  uint32_t mw = 0;
  ASSERT_EQ(t->create_window(kPd, &mw), STATUS_SUCCESS);
  ASSERT_EQ(t->bind_window(mw, fr.local, kPd, base, 4096, kRemote), STATUS_SUCCESS);
  EXPECT_EQ(t->check_remote(mw, kPd, base, 4096, kMrAccessRemoteWrite), STATUS_SUCCESS);
  // Invalidated: the window is dead with it.
  ASSERT_EQ(t->invalidate(fr.local), STATUS_SUCCESS);
  MrFault fault = MrFault::kNone;
  EXPECT_EQ(t->check_remote(mw, kPd, base, 4096, kMrAccessRemoteWrite, &fault),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(fault, MrFault::kNotValid);
  // Registered again over the last two pages: the window's first page is not the region's now.
  ASSERT_EQ(t->fast_register(fr.local, base + 2 * 4096, 2 * 4096, kRemote), STATUS_SUCCESS);
  EXPECT_EQ(t->check_remote(mw, kPd, base, 4096, kMrAccessRemoteWrite, &fault),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(fault, MrFault::kNotValid);
  EXPECT_EQ(t->check_remote(mw, kPd, base + 4095, 1, kMrAccessRemoteRead), STATUS_ACCESS_VIOLATION);
  // Registered again over the window's page, but read-only: reads pass, writes do not.
  ASSERT_EQ(t->invalidate(fr.local), STATUS_SUCCESS);
  ASSERT_EQ(t->fast_register(fr.local, base, 4096, NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
  EXPECT_EQ(t->check_remote(mw, kPd, base, 4096, kMrAccessRemoteRead), STATUS_SUCCESS);
  EXPECT_EQ(t->check_remote(mw, kPd, base, 4096, kMrAccessRemoteWrite), STATUS_ACCESS_VIOLATION);
  // Registered again over exactly what it covered, with its rights: the window works again.
  ASSERT_EQ(t->invalidate(fr.local), STATUS_SUCCESS);
  ASSERT_EQ(t->fast_register(fr.local, base, 4096, kRemote), STATUS_SUCCESS);
  EXPECT_EQ(t->check_remote(mw, kPd, base, 4096, kMrAccessRemoteWrite), STATUS_SUCCESS);
  // Partly covered: the bytes past the region are refused.
  ASSERT_EQ(t->invalidate(fr.local), STATUS_SUCCESS);
  ASSERT_EQ(t->fast_register(fr.local, base, 2048, kRemote), STATUS_SUCCESS);
  EXPECT_EQ(t->check_remote(mw, kPd, base, 2048, kMrAccessRemoteWrite), STATUS_SUCCESS);
  EXPECT_EQ(t->check_remote(mw, kPd, base + 2047, 2, kMrAccessRemoteWrite),
            STATUS_ACCESS_VIOLATION);
}

TEST(MemoryRegion, FastRegisterWithoutRemoteAccessRefusesRemoteRights) {
  auto t = make_table();
  std::vector<uint8_t> buf(4096);
  MrTokens tok;
  ASSERT_EQ(t->create_fast_register(kPd, 1, /*allow_remote_access=*/false, &tok), STATUS_SUCCESS);
  EXPECT_EQ(t->fast_register(tok.local, addr(buf.data()), 4096, NDK_MR_FLAG_ALLOW_REMOTE_READ),
            STATUS_ACCESS_VIOLATION);
  EXPECT_EQ(t->fast_register(tok.local, addr(buf.data()), 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE),
            STATUS_SUCCESS);
}

// Readers on "cores" never see a torn entry while control re-registers the slot with other
// bounds: every successful check must be inside the bounds that some registration had.
TEST(MemoryRegion, ConcurrentReadersSeeConsistentEntries) {
  auto t = make_table(4);
  static std::vector<uint8_t> buf(2 * 4096);
  const uint64_t base = addr(buf.data());
  MrTokens tok;
  ASSERT_EQ(t->register_mr(kPd, buf.data(), 4096, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, &tok),
            STATUS_SUCCESS);
  std::atomic<uint32_t> token{tok.remote};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0}, ok{0};
  auto reader = [&] {
    while (!stop.load(std::memory_order_relaxed)) {
      MrView v;
      if (t->view(token.load(std::memory_order_relaxed), &v)) {
        // Registrations alternate: [base, +4096) remote-write, or [base+4096, +4096) local only.
        const bool first = v.base == base && v.length == 4096 && (v.access & kMrAccessRemoteWrite);
        const bool second = v.base == base + 4096 && v.length == 4096 && v.access == 0;
        if (!first && !second) ++bad;
        ++ok;
      }
    }
  };
  std::thread r1(reader), r2(reader);
  MrTokens cur = tok;
  for (int i = 0; i < 20000; ++i) {
    ASSERT_EQ(t->deregister(cur.local), STATUS_SUCCESS);
    const bool odd = i % 2 == 0;
    ASSERT_EQ(
        t->register_mr(kPd, buf.data() + (odd ? 4096 : 0), 4096,
                       odd ? NDK_MR_FLAG_ALLOW_LOCAL_READ : NDK_MR_FLAG_ALLOW_REMOTE_WRITE, &cur),
        STATUS_SUCCESS);
    token.store(cur.remote, std::memory_order_relaxed);
  }
  // The last registration stays valid: wait until the readers have seen it at least once.
  while (ok.load() == 0) std::this_thread::yield();
  stop = true;
  r1.join();
  r2.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(ok.load(), 0u);
}

}  // namespace
}  // namespace rocedp::rc
