// Work queues: posting statuses, DEFER publication, slot lifetime, SRQ limit notification.
#include "dataplane/rc/work_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace rocedp::rc {
namespace {

void* ctx_of(uint64_t i) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(i));
}

SendWqe write_wqe(uint64_t id, uint32_t flags = 0) {
  SendWqe w;
  w.opcode = SendOpcode::kWrite;
  w.request_context = ctx_of(id);
  w.remote_address = 0x1000 + id;
  w.remote_token = 0x4201;
  w.flags = flags;
  return w;
}

std::unique_ptr<SendQueue> make_sq(uint32_t depth, bool connected = true) {
  NTSTATUS status = STATUS_PENDING;
  auto sq = SendQueue::create(depth, 2, 32, &status);
  EXPECT_EQ(status, STATUS_SUCCESS);
  sq->set_connected(connected);
  return sq;
}

TEST(WorkQueue, PostBeforeConnectIsConnectionInvalid) {
  auto sq = make_sq(4, /*connected=*/false);
  EXPECT_EQ(sq->post(write_wqe(1)), STATUS_CONNECTION_INVALID);
  EXPECT_EQ(sq->ring().readable_st(), 0u);  // failed posts leave nothing for the core
  sq->set_connected(true);
  EXPECT_EQ(sq->post(write_wqe(2)), STATUS_SUCCESS);
  ASSERT_EQ(sq->ring().readable_st(), 1u);
  EXPECT_EQ(sq->ring().at_st(0).request_context, ctx_of(2));
  EXPECT_EQ(sq->ring().at_st(0).remote_address, 0x1002u);
}

TEST(WorkQueue, FullQueueIsInsufficientResourcesUntilTheCoreReleases) {
  auto sq = make_sq(3);  // capacity 4, depth 3
  for (uint64_t i = 0; i < 3; ++i) ASSERT_EQ(sq->post(write_wqe(i)), STATUS_SUCCESS);
  EXPECT_EQ(sq->post(write_wqe(3)), STATUS_INSUFFICIENT_RESOURCES);
  ASSERT_EQ(sq->ring().readable_st(), 3u);
  // Reading does not free a slot; only completion (release) does.
  EXPECT_EQ(sq->post(write_wqe(3)), STATUS_INSUFFICIENT_RESOURCES);
  sq->ring().release_st(1);
  EXPECT_EQ(sq->post(write_wqe(3)), STATUS_SUCCESS);
  ASSERT_EQ(sq->ring().readable_st(), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(sq->ring().at_st(i).request_context, ctx_of(i + 1));
}

// The core may keep the head's value itself (a QP's completer does): reading and releasing
// through it sees and frees exactly what the ring's own head would, across the wrap.
TEST(WorkQueue, CoreKeepingItsOwnHeadSeesAndFreesTheSameSlots) {
  auto sq = make_sq(3);  // capacity 4, depth 3
  SendRing& ring = sq->ring();
  uint64_t head = 0, next = 0;
  for (int round = 0; round < 5; ++round) {  // 5 x 3 posts: the sequence wraps the 4 slots
    for (int i = 0; i < 3; ++i) ASSERT_EQ(sq->post(write_wqe(next++)), STATUS_SUCCESS);
    EXPECT_EQ(sq->post(write_wqe(next)), STATUS_INSUFFICIENT_RESOURCES);
    ASSERT_EQ(ring.readable_from_st(head), 3u);
    EXPECT_EQ(ring.readable_from_st(head), ring.readable_st());
    for (uint32_t i = 0; i < 3; ++i) {
      EXPECT_EQ(&ring.slot_st(head + i), &ring.at_st(i));
      EXPECT_EQ(ring.slot_st(head + i).request_context, ctx_of(head + i));
    }
    head += 2;
    ring.release_to_st(head);  // two complete: two posts fit again, not three
    EXPECT_EQ(ring.readable_from_st(head), 1u);
    ASSERT_EQ(sq->post(write_wqe(next++)), STATUS_SUCCESS);
    ASSERT_EQ(sq->post(write_wqe(next++)), STATUS_SUCCESS);
    EXPECT_EQ(sq->post(write_wqe(next)), STATUS_INSUFFICIENT_RESOURCES);
    head += 3;
    ring.release_to_st(head);
    EXPECT_EQ(ring.readable_from_st(head), 0u);
  }
}

TEST(WorkQueue, InvalidSgeCountAndInlineSize) {
  auto sq = make_sq(4);
  SendWqe w = write_wqe(1);
  w.sge_count = 3;  // queue created with max 2
  EXPECT_EQ(sq->post(w), STATUS_INVALID_PARAMETER);
  char big[40] = {};
  w = write_wqe(2, NDK_OP_FLAG_INLINE);
  w.sge_count = 1;
  w.sge[0] = NdkSge{big, sizeof(big), 0};  // 40 > 32 inline bytes
  EXPECT_EQ(sq->post(w), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(sq->ring().readable_st(), 0u);
}

TEST(WorkQueue, InlineDataIsCopiedAtPostTime) {
  auto sq = make_sq(4);
  char a[5] = {'h', 'e', 'l', 'l', 'o'};
  char b[3] = {'!', '?', '.'};
  SendWqe w = write_wqe(1, NDK_OP_FLAG_INLINE);
  w.opcode = SendOpcode::kSend;
  w.sge_count = 2;
  w.sge[0] = NdkSge{a, 5, 0};
  w.sge[1] = NdkSge{b, 3, 0};
  ASSERT_EQ(sq->post(w), STATUS_SUCCESS);
  std::memset(a, 0, sizeof(a));  // the consumer may reuse its buffer right away
  ASSERT_EQ(sq->ring().readable_st(), 1u);
  const SendWqe& got = sq->ring().at_st(0);
  EXPECT_EQ(got.inline_length, 8u);
  EXPECT_EQ(std::memcmp(got.inline_data, "hello!?.", 8), 0);
}

TEST(WorkQueue, DeferPublishesWithTheNextPlainPost) {
  auto sq = make_sq(8);
  ASSERT_EQ(sq->post(write_wqe(0, NDK_OP_FLAG_DEFER)), STATUS_SUCCESS);
  ASSERT_EQ(sq->post(write_wqe(1, NDK_OP_FLAG_DEFER)), STATUS_SUCCESS);
  EXPECT_EQ(sq->ring().readable_st(), 0u);  // the core sees nothing yet
  EXPECT_EQ(sq->ring().deferred(), 2u);
  ASSERT_EQ(sq->post(write_wqe(2)), STATUS_SUCCESS);
  ASSERT_EQ(sq->ring().readable_st(), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(sq->ring().at_st(i).request_context, ctx_of(i));
  // An explicit flush also publishes.
  ASSERT_EQ(sq->post(write_wqe(3, NDK_OP_FLAG_DEFER)), STATUS_SUCCESS);
  EXPECT_EQ(sq->ring().readable_st(), 3u);
  sq->flush_deferred();
  EXPECT_EQ(sq->ring().readable_st(), 4u);
}

// The post hints (Qp::prefetch_post) only fetch lines: they publish nothing, ring nothing and
// leave DEFERred posts deferred, also with more posts than slots, a full queue, a doorbell
// slot past the doorbell's end, or no doorbell at all.
TEST(WorkQueue, PostHintsChangeNothing) {
  auto sq = make_sq(3);  // capacity 4
  sq->prefetch_post(0);
  sq->prefetch_post(1000);  // no doorbell attached
  Doorbell bell(2);
  ASSERT_TRUE(bell.ok());
  sq->attach_doorbell_st(&bell, 1);
  ASSERT_EQ(sq->post(write_wqe(0, NDK_OP_FLAG_DEFER)), STATUS_SUCCESS);
  sq->prefetch_post(0);
  sq->prefetch_post(3);
  EXPECT_EQ(sq->ring().readable_st(), 0u);
  EXPECT_EQ(sq->ring().deferred(), 1u);
  EXPECT_EQ(bell.take_all_st(), Doorbell::kEmpty);
  ASSERT_EQ(sq->post(write_wqe(1)), STATUS_SUCCESS);
  ASSERT_EQ(sq->post(write_wqe(2)), STATUS_SUCCESS);
  sq->prefetch_post(5);  // full: depth 3 outstanding
  EXPECT_EQ(sq->post(write_wqe(3)), STATUS_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(bell.take_all_st(), 1u);  // the plain posts rang, once
  bell.clear_st(1);
  sq->attach_doorbell_st(&bell, 7);  // past the doorbell's two slots: hint and ring ignore it
  sq->prefetch_post(1);
  EXPECT_EQ(bell.take_all_st(), Doorbell::kEmpty);
  ASSERT_EQ(sq->ring().readable_st(), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(sq->ring().at_st(i).request_context, ctx_of(i));
}

TEST(WorkQueue, FailedPostFlushesEarlierDeferredRequests) {
  auto sq = make_sq(2);
  ASSERT_EQ(sq->post(write_wqe(0, NDK_OP_FLAG_DEFER)), STATUS_SUCCESS);
  ASSERT_EQ(sq->post(write_wqe(1, NDK_OP_FLAG_DEFER)), STATUS_SUCCESS);
  EXPECT_EQ(sq->post(write_wqe(2, NDK_OP_FLAG_DEFER)), STATUS_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(sq->ring().readable_st(), 2u);  // NDK: flush deferred work on inline failure
  // Same for a post refused because the QP left RTS.
  auto sq2 = make_sq(4);
  ASSERT_EQ(sq2->post(write_wqe(0, NDK_OP_FLAG_DEFER)), STATUS_SUCCESS);
  sq2->set_connected(false);
  EXPECT_EQ(sq2->post(write_wqe(1)), STATUS_CONNECTION_INVALID);
  EXPECT_EQ(sq2->ring().readable_st(), 1u);
}

// A queue of capacity 1 (every post reuses the same slot) whose slot holds a request with an
// immediate and atomic operands, not yet released.
std::unique_ptr<SendQueue> sq_with_a_used_slot() {
  auto sq = make_sq(1);
  SendWqe old = write_wqe(7, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT);
  old.has_immediate = true;
  old.immediate = 0xABCD;
  old.compare = 99;
  old.swap_or_add = 98;
  EXPECT_EQ(sq->post(old), STATUS_SUCCESS);
  return sq;
}

// Posting in place: the same statuses as post(), and a reused slot keeps nothing of the request
// it held before (an immediate, tokens, inline length) except what the caller writes.
TEST(WorkQueue, InPlacePostsResetTheSlotAndFailLikePost) {
  auto sq = sq_with_a_used_slot();
  NTSTATUS status = STATUS_PENDING;
  EXPECT_EQ(sq->claim_in_place(1, &status), nullptr);
  EXPECT_EQ(status, STATUS_INSUFFICIENT_RESOURCES);
  sq->ring().release_st(1);
  EXPECT_EQ(sq->claim_in_place(kMaxWqeSge + 1, &status), nullptr);
  EXPECT_EQ(status, STATUS_INVALID_PARAMETER);
  SendWqe* w = sq->claim_in_place(1, &status);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(status, STATUS_SUCCESS);
  EXPECT_FALSE(w->has_immediate);
  EXPECT_EQ(w->immediate, 0u);
  EXPECT_EQ(w->compare, 0u);
  EXPECT_EQ(w->flags, 0u);
  EXPECT_EQ(w->request_context, nullptr);
  w->opcode = SendOpcode::kWrite;
  w->request_context = ctx_of(8);
  w->sge_count = 1;
  EXPECT_EQ(sq->ring().readable_st(), 0u);  // not published before the commit
  sq->commit_in_place(0);
  ASSERT_EQ(sq->ring().readable_st(), 1u);
  EXPECT_EQ(sq->ring().at_st(0).request_context, ctx_of(8));
  EXPECT_FALSE(sq->ring().at_st(0).has_immediate);
  // Refused when not connected; earlier deferred requests are published then, as by post().
  auto sq2 = make_sq(4);
  SendWqe* d = sq2->claim_in_place(0, &status);
  ASSERT_NE(d, nullptr);
  sq2->commit_in_place(NDK_OP_FLAG_DEFER);
  EXPECT_EQ(sq2->ring().readable_st(), 0u);
  sq2->set_connected(false);
  EXPECT_EQ(sq2->claim_in_place(1, &status), nullptr);
  EXPECT_EQ(status, STATUS_CONNECTION_INVALID);
  EXPECT_EQ(sq2->ring().readable_st(), 1u);
}

// A post of one line (post_head): every field of the slot's first line is the request's, whatever
// the slot held before, bit for bit as post() would have left it; no SGE leaves a zero one; the
// statuses and the deferred publication are post()'s.
TEST(WorkQueue, OneLinePostsWriteEveryFieldAndFailLikePost) {
  auto sq = sq_with_a_used_slot();
  SendWqeHead h;
  h.request_context = ctx_of(8);
  h.remote_address = 0x1122334455667788ull;
  h.remote_token = 0x9ABC;
  h.invalidate_token = 0xDEF0;
  h.flags = NDK_OP_FLAG_DEFER;
  h.opcode = SendOpcode::kSendAndInvalidate;
  char buf[32];
  const NdkSge sge{buf, sizeof(buf), 0x77};
  EXPECT_EQ(sq->post_head(h, &sge, 1), STATUS_INSUFFICIENT_RESOURCES);  // full
  sq->ring().release_st(1);
  ASSERT_EQ(sq->post_head(h, &sge, 1), STATUS_SUCCESS);
  EXPECT_EQ(sq->ring().readable_st(), 0u);  // deferred
  sq->flush_deferred();
  ASSERT_EQ(sq->ring().readable_st(), 1u);
  const SendWqe& w = sq->ring().at_st(0);
  EXPECT_EQ(w.request_context, ctx_of(8));
  EXPECT_EQ(w.remote_address, 0x1122334455667788ull);
  EXPECT_EQ(w.compare, 0u);
  EXPECT_EQ(w.swap_or_add, 0u);
  EXPECT_EQ(w.remote_token, 0x9ABCu);
  EXPECT_EQ(w.invalidate_token, 0xDEF0u);
  EXPECT_EQ(w.flags, NDK_OP_FLAG_DEFER);
  EXPECT_EQ(w.opcode, SendOpcode::kSendAndInvalidate);
  EXPECT_EQ(w.sge_count, 1u);
  EXPECT_FALSE(w.has_immediate);
  EXPECT_EQ(w.inline_length, 0u);
  EXPECT_EQ(w.sge[0].virtual_address, buf);
  EXPECT_EQ(w.sge[0].length, sizeof(buf));
  EXPECT_EQ(w.sge[0].memory_region_token, 0x77u);
  // No SGE, an immediate and atomic operands.
  sq->ring().release_st(1);
  SendWqeHead z;
  z.opcode = SendOpcode::kWrite;
  z.has_immediate = true;
  z.immediate = 5;
  z.compare = 3;
  z.swap_or_add = 4;
  ASSERT_EQ(sq->post_head(z, nullptr, 0), STATUS_SUCCESS);
  const SendWqe& y = sq->ring().at_st(0);
  EXPECT_EQ(y.sge_count, 0u);
  EXPECT_TRUE(y.has_immediate);
  EXPECT_EQ(y.immediate, 5u);
  EXPECT_EQ(y.compare, 3u);
  EXPECT_EQ(y.swap_or_add, 4u);
  EXPECT_EQ(y.request_context, nullptr);
  EXPECT_EQ(y.sge[0].virtual_address, nullptr);
  EXPECT_EQ(y.sge[0].length, 0u);
  // More SGEs than the queue takes; not connected, publishing what was deferred.
  NTSTATUS status = STATUS_PENDING;
  auto sq2 = SendQueue::create(4, 0, 0, &status);  // no SGE per request
  ASSERT_EQ(status, STATUS_SUCCESS);
  sq2->set_connected(true);
  EXPECT_EQ(sq2->post_head(h, &sge, 1), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(sq2->post_head(z, nullptr, 0), STATUS_SUCCESS);
  auto sq3 = make_sq(4);
  ASSERT_EQ(sq3->post_head(h, &sge, 1), STATUS_SUCCESS);
  EXPECT_EQ(sq3->ring().readable_st(), 0u);
  sq3->set_connected(false);
  EXPECT_EQ(sq3->post_head(h, &sge, 1), STATUS_CONNECTION_INVALID);
  EXPECT_EQ(sq3->ring().readable_st(), 1u);
}

TEST(WorkQueue, ReceiveQueueAcceptsPostsBeforeConnect) {
  NTSTATUS status = STATUS_PENDING;
  auto rq = ReceiveQueue::create(2, 1, &status);
  ASSERT_EQ(status, STATUS_SUCCESS);
  char buf[16];
  RecvWqe r;
  r.request_context = ctx_of(9);
  r.sge_count = 1;
  r.sge[0] = NdkSge{buf, sizeof(buf), 0x101};
  EXPECT_EQ(rq->post(r), STATUS_SUCCESS);
  EXPECT_EQ(rq->post(r, NDK_OP_FLAG_DEFER), STATUS_SUCCESS);
  EXPECT_EQ(rq->ring().readable_st(), 1u);
  EXPECT_EQ(rq->post(r), STATUS_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(rq->ring().readable_st(), 2u);
  r.sge_count = 2;
  EXPECT_EQ(rq->post(r), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(sge_bytes(rq->ring().at_st(0)), 16u);
}

TEST(WorkQueue, CreateRejectsBadArguments) {
  NTSTATUS status = STATUS_SUCCESS;
  EXPECT_EQ(SendQueue::create(0, 1, 0, &status), nullptr);
  EXPECT_EQ(status, STATUS_INVALID_PARAMETER);
  EXPECT_EQ(SendQueue::create(4, kMaxWqeSge + 1, 0, &status), nullptr);
  EXPECT_EQ(status, STATUS_INVALID_PARAMETER);
  EXPECT_EQ(SendQueue::create(4, 1, kMaxInlineData + 1, &status), nullptr);
  EXPECT_EQ(status, STATUS_INVALID_PARAMETER);
}

struct SrqNotes {
  std::vector<NTSTATUS> calls;
  static void callback(void* ctx, NTSTATUS s) { static_cast<SrqNotes*>(ctx)->calls.push_back(s); }
};

TEST(WorkQueue, SrqSharedTakeAndLimitNotification) {
  SrqNotes notes;
  NTSTATUS status = STATUS_PENDING;
  auto srq = SharedReceiveQueue::create(8, 1, &SrqNotes::callback, &notes, &status);
  ASSERT_EQ(status, STATUS_SUCCESS);
  for (uint64_t i = 0; i < 6; ++i) {
    RecvWqe r;
    r.request_context = ctx_of(i);
    ASSERT_EQ(srq->post(r), STATUS_SUCCESS);
  }
  ASSERT_EQ(srq->modify_st(8, 4), STATUS_SUCCESS);  // notify below 4 posted receives
  RecvWqe got;
  // Two QPs of the core take in turn; FIFO across them.
  ASSERT_TRUE(srq->take_st(&got));
  EXPECT_EQ(got.request_context, ctx_of(0));
  ASSERT_TRUE(srq->take_st(&got));  // 4 left: not below the limit yet
  EXPECT_EQ(got.request_context, ctx_of(1));
  EXPECT_TRUE(notes.calls.empty());
  ASSERT_TRUE(srq->take_st(&got));  // 3 left: fires once and disarms
  ASSERT_EQ(notes.calls.size(), 1u);
  EXPECT_EQ(notes.calls[0], STATUS_SUCCESS);
  EXPECT_EQ(srq->limit_st(), 0u);
  ASSERT_TRUE(srq->take_st(&got));
  EXPECT_EQ(notes.calls.size(), 1u);
  ASSERT_TRUE(srq->take_st(&got));
  ASSERT_TRUE(srq->take_st(&got));
  EXPECT_EQ(got.request_context, ctx_of(5));
  EXPECT_FALSE(srq->take_st(&got));  // empty: the responder sends an RNR NAK
  EXPECT_EQ(srq->limit_events_st(), 1u);
}

TEST(WorkQueue, SrqModifyStatuses) {
  NTSTATUS status = STATUS_PENDING;
  auto srq = SharedReceiveQueue::create(8, 1, nullptr, nullptr, &status);
  ASSERT_EQ(status, STATUS_SUCCESS);
  RecvWqe r;
  for (int i = 0; i < 5; ++i) ASSERT_EQ(srq->post(r), STATUS_SUCCESS);
  EXPECT_EQ(srq->modify_st(4, 0), STATUS_INVALID_PARAMETER);  // 5 posted
  EXPECT_EQ(srq->modify_st(8, 9), STATUS_INVALID_PARAMETER);  // threshold above depth
  EXPECT_EQ(srq->modify_st(16, 0), STATUS_NOT_SUPPORTED);     // above the allocated capacity
  ASSERT_EQ(srq->modify_st(5, 0), STATUS_SUCCESS);
  EXPECT_EQ(srq->post(r), STATUS_INSUFFICIENT_RESOURCES);  // new depth enforced on posts
  // Up to the depth given at creation, not to the ring's capacity (a power of two above it).
  auto odd = SharedReceiveQueue::create(6, 1, nullptr, nullptr, &status);
  ASSERT_EQ(status, STATUS_SUCCESS);
  EXPECT_EQ(odd->modify_st(7, 0), STATUS_NOT_SUPPORTED);
  EXPECT_EQ(odd->modify_st(8, 0), STATUS_NOT_SUPPORTED);
  EXPECT_EQ(odd->modify_st(3, 0), STATUS_SUCCESS);
  EXPECT_EQ(odd->modify_st(6, 0), STATUS_SUCCESS);
}

}  // namespace
}  // namespace rocedp::rc

namespace rocedp::rc {
namespace {

// A posting thread with DEFER batches against a core thread that consumes and releases: every
// request arrives once, in posting order, and deferred ones only after their batch is published.
TEST(WorkQueue, TwoThreadPostAndConsumeKeepsOrder) {
  constexpr uint64_t kPosts = 200'000;
  auto sq = make_sq(64);
  std::atomic<bool> done{false};
  uint64_t seen = 0, errors = 0;
  std::thread core([&] {
    while (seen < kPosts) {
      const uint32_t n = sq->ring().readable_st();
      for (uint32_t i = 0; i < n; ++i) {
        errors += sq->ring().at_st(i).request_context != ctx_of(seen + i);
      }
      seen += n;
      sq->ring().release_st(n);
    }
    done = true;
  });
  uint64_t posted = 0, full = 0;
  while (posted < kPosts) {
    // Batches of up to 5: all DEFER except the last, which publishes the batch.
    const uint64_t batch = std::min<uint64_t>(posted % 5 + 1, kPosts - posted);
    for (uint64_t k = 0; k < batch;) {
      const uint32_t flags = k + 1 < batch ? NDK_OP_FLAG_DEFER : 0;
      const NTSTATUS s = sq->post(write_wqe(posted, flags));
      if (s == STATUS_INSUFFICIENT_RESOURCES) {
        ++full;  // the failed post published the deferred ones; retry after the core drains
        std::this_thread::yield();
        continue;
      }
      ASSERT_EQ(s, STATUS_SUCCESS);
      ++posted;
      ++k;
    }
  }
  sq->flush_deferred();
  core.join();
  EXPECT_TRUE(done.load());
  EXPECT_EQ(seen, kPosts);
  EXPECT_EQ(errors, 0u);
  EXPECT_EQ(sq->ring().deferred(), 0u);
}

}  // namespace
}  // namespace rocedp::rc
