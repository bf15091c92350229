// CompletionQueue: delivery order, GetCqResults vs Ex, NDK arm rules, overrun, ResizeCq
// statuses, and a three-thread stress of resize against a draining consumer.
#include "dataplane/rc/completion_queue.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

namespace rocedp::rc {
namespace {

struct Notes {
  std::vector<NTSTATUS> calls;
  static void callback(void* ctx, NTSTATUS status) {
    static_cast<Notes*>(ctx)->calls.push_back(status);
  }
};

// Allocator hook that counts live bytes and fails on demand.
struct TestAllocator {
  std::atomic<int64_t> live_bytes{0};
  std::atomic<int> rings{0};
  std::atomic<bool> fail{false};
  static void* allocate(size_t bytes, void* ctx) {
    auto* self = static_cast<TestAllocator*>(ctx);
    if (self->fail.load()) return nullptr;
    self->live_bytes += static_cast<int64_t>(bytes);
    ++self->rings;
    return std::malloc(bytes);
  }
  static void release(void* memory, size_t bytes, void* ctx) {
    auto* self = static_cast<TestAllocator*>(ctx);
    self->live_bytes -= static_cast<int64_t>(bytes);
    --self->rings;
    std::free(memory);
  }
  RingAllocator hook() { return RingAllocator{&allocate, &release, this}; }
};

void* ctx_of(uint64_t i) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(i));
}
uint64_t id_of(void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

NdkResultEx entry(uint64_t i, NTSTATUS status = STATUS_SUCCESS,
                  NdkOperationType type = NdkOperationType::kSend) {
  NdkResultEx r;
  r.status = status;
  r.bytes_transferred = static_cast<uint32_t>(i * 3);
  r.qp_context = ctx_of(0xABC);
  r.request_context = ctx_of(i);
  r.type = type;
  r.type_specific_completion_output = i + 100;
  return r;
}

std::unique_ptr<CompletionQueue> make_cq(uint32_t depth, Notes* notes, uint32_t max = 1024,
                                         RingAllocator alloc = {}) {
  CqConfig cfg;
  cfg.depth = depth;
  cfg.max_cq_depth = max;
  cfg.notification = &Notes::callback;
  cfg.notification_context = notes;
  cfg.allocator = alloc;
  NTSTATUS status = STATUS_PENDING;
  auto cq = CompletionQueue::create(cfg, &status);
  EXPECT_EQ(status, STATUS_SUCCESS) << status_name(status);
  return cq;
}

std::vector<uint64_t> drain(CompletionQueue& cq) {
  std::vector<uint64_t> ids;
  NdkResultEx out[7];
  while (uint32_t n = cq.get_results_ex(out, 7)) {
    for (uint32_t i = 0; i < n; ++i) ids.push_back(id_of(out[i].request_context));
  }
  return ids;
}

std::vector<uint64_t> seq(uint64_t from, uint64_t to) {
  std::vector<uint64_t> v;
  for (uint64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

TEST(CompletionQueue, CreateRejectsBadDepthAndReportsAllocationFailure) {
  NTSTATUS status = STATUS_SUCCESS;
  CqConfig cfg;
  cfg.max_cq_depth = 64;
  cfg.depth = 0;
  EXPECT_EQ(CompletionQueue::create(cfg, &status), nullptr);
  EXPECT_EQ(status, STATUS_INVALID_PARAMETER);
  cfg.depth = 65;
  EXPECT_EQ(CompletionQueue::create(cfg, &status), nullptr);
  EXPECT_EQ(status, STATUS_INVALID_PARAMETER);
  TestAllocator alloc;
  alloc.fail = true;
  cfg.depth = 64;
  cfg.allocator = alloc.hook();
  EXPECT_EQ(CompletionQueue::create(cfg, &status), nullptr);
  EXPECT_EQ(status, STATUS_INSUFFICIENT_RESOURCES);
  alloc.fail = false;
  auto cq = CompletionQueue::create(cfg, &status);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(cq->depth(), 64u);
  cq.reset();
  EXPECT_EQ(alloc.live_bytes.load(), 0);
}

TEST(CompletionQueue, DeliversInOrderAcrossWrapAround) {
  Notes notes;
  auto cq = make_cq(5, &notes);  // capacity 8, logical depth 5
  uint64_t next = 0;
  std::vector<uint64_t> seen;
  for (int round = 0; round < 10; ++round) {
    for (int k = 0; k < 4; ++k) ASSERT_EQ(cq->produce_st(entry(next++)), STATUS_SUCCESS);
    NdkResultEx out[3];
    uint32_t n = cq->get_results_ex(out, 3);
    ASSERT_EQ(n, 3u);
    for (uint32_t i = 0; i < n; ++i) seen.push_back(id_of(out[i].request_context));
    for (uint64_t id : drain(*cq)) seen.push_back(id);
  }
  EXPECT_EQ(seen, seq(0, 40));
  NdkResultEx out[1];
  EXPECT_EQ(cq->get_results_ex(out, 1), 0u);  // 0 means empty
  EXPECT_TRUE(notes.calls.empty());           // never armed: no callback
  EXPECT_EQ(cq->stats().produced, 40u);
  EXPECT_EQ(cq->stats().consumed, 40u);
}

TEST(CompletionQueue, GetCqResultsAndExCarryTheSameEntries) {
  Notes notes;
  auto cq = make_cq(8, &notes);
  ASSERT_EQ(cq->produce_st(entry(1, STATUS_SUCCESS, NdkOperationType::kReceiveAndInvalidate)),
            STATUS_SUCCESS);
  ASSERT_EQ(cq->produce_st(entry(2, STATUS_CANCELLED, NdkOperationType::kWrite)), STATUS_SUCCESS);
  NdkResult plain[4];
  // ReceiveAndInvalidate must still come out of the non-Ex call (NDKPI completion rules).
  ASSERT_EQ(cq->get_results(plain, 1), 1u);
  EXPECT_EQ(plain[0].status, STATUS_SUCCESS);
  EXPECT_EQ(plain[0].bytes_transferred, 3u);
  EXPECT_EQ(plain[0].qp_context, ctx_of(0xABC));
  EXPECT_EQ(plain[0].request_context, ctx_of(1));
  NdkResultEx ex[4];
  ASSERT_EQ(cq->get_results_ex(ex, 4), 1u);
  EXPECT_EQ(ex[0].status, STATUS_CANCELLED);
  EXPECT_EQ(ex[0].type, NdkOperationType::kWrite);
  EXPECT_EQ(ex[0].type_specific_completion_output, 102u);
  EXPECT_EQ(ex[0].request_context, ctx_of(2));
}

TEST(CompletionQueue, ArmAnyFiresOncePerArm) {
  Notes notes;
  auto cq = make_cq(16, &notes);
  cq->arm(NdkCqNotifyType::kAny);
  EXPECT_FALSE(cq->poll_st());  // empty: nothing due
  EXPECT_TRUE(notes.calls.empty());
  cq->produce_st(entry(0));
  ASSERT_EQ(notes.calls.size(), 1u);
  EXPECT_EQ(notes.calls[0], STATUS_SUCCESS);
  cq->produce_st(entry(1));
  cq->produce_st(entry(2, STATUS_CANCELLED));
  cq->poll_st();
  EXPECT_EQ(notes.calls.size(), 1u);  // once per arm
  EXPECT_EQ(cq->stats().notifications, 1u);
}

TEST(CompletionQueue, ArmOnNonEmptyCqFiresOnNextPoll) {
  Notes notes;
  auto cq = make_cq(16, &notes);
  cq->produce_st(entry(0));  // lands just before ArmCq
  cq->arm(NdkCqNotifyType::kAny);
  EXPECT_TRUE(notes.calls.empty());  // the callback runs on the core, not inside ArmCq
  EXPECT_TRUE(cq->poll_st());
  ASSERT_EQ(notes.calls.size(), 1u);
  EXPECT_FALSE(cq->poll_st());
  EXPECT_EQ(notes.calls.size(), 1u);
  // Drained and re-armed: nothing due until a new completion.
  drain(*cq);
  cq->arm(NdkCqNotifyType::kAny);
  cq->poll_st();
  EXPECT_EQ(notes.calls.size(), 1u);
  cq->produce_st(entry(1));
  EXPECT_EQ(notes.calls.size(), 2u);
}

// An arm that found a completion due leaves a kick for the core's next poll. If a completion
// published before that poll fires the arm, and the consumer drains and arms for errors only in
// the callback, the old kick must not fire the new arm: no error is queued.
TEST(CompletionQueue, AKickLeftByAnArmAlreadyFiredDoesNotFireTheNextArm) {
  Notes notes;
  std::unique_ptr<CompletionQueue> cq;
  struct Rearm {
    CompletionQueue* cq = nullptr;
    Notes* notes = nullptr;
    static void callback(void* ctx, NTSTATUS status) {
      auto* self = static_cast<Rearm*>(ctx);
      self->notes->calls.push_back(status);
      drain(*self->cq);
      self->cq->arm(NdkCqNotifyType::kErrors);
    }
  };
  CqConfig cfg;
  cfg.depth = 16;
  cfg.max_cq_depth = 1024;
  Rearm rearm;
  cfg.notification = &Rearm::callback;
  cfg.notification_context = &rearm;
  NTSTATUS status = STATUS_PENDING;
  cq = CompletionQueue::create(cfg, &status);
  ASSERT_EQ(status, STATUS_SUCCESS);
  rearm.cq = cq.get();
  rearm.notes = &notes;
  cq->produce_st(entry(0));
  cq->arm(NdkCqNotifyType::kAny);  // due: a kick for the next poll
  cq->produce_st(entry(1));        // fires the arm first; the callback arms for errors
  ASSERT_EQ(notes.calls.size(), 1u);
  EXPECT_FALSE(cq->poll_st()) << "the kick was for the arm already fired";
  EXPECT_EQ(notes.calls.size(), 1u);
  // The error arm still fires on an error.
  cq->produce_st(entry(2, STATUS_CANCELLED));
  EXPECT_EQ(notes.calls.size(), 2u);
}

TEST(CompletionQueue, NotifyErrorsIgnoresSuccessfulCompletions) {
  Notes notes;
  auto cq = make_cq(16, &notes);
  cq->arm(NdkCqNotifyType::kErrors);
  cq->produce_st(entry(0));
  cq->produce_st(entry(1), /*solicited=*/true);
  cq->poll_st();
  EXPECT_TRUE(notes.calls.empty());
  cq->produce_st(entry(2, STATUS_CANCELLED));
  ASSERT_EQ(notes.calls.size(), 1u);
  EXPECT_EQ(notes.calls[0], STATUS_SUCCESS);  // the CQ is fine; the entry carries the error
  // An error already queued when ERRORS is armed fires on the next poll.
  cq->arm(NdkCqNotifyType::kErrors);
  cq->poll_st();
  EXPECT_EQ(notes.calls.size(), 2u);
  // Consumed errors no longer count.
  drain(*cq);
  cq->arm(NdkCqNotifyType::kErrors);
  cq->poll_st();
  EXPECT_EQ(notes.calls.size(), 2u);
}

TEST(CompletionQueue, NotifySolicitedFiresForSolicitedOrError) {
  Notes notes;
  auto cq = make_cq(16, &notes);
  cq->arm(NdkCqNotifyType::kSolicited);
  cq->produce_st(entry(0, STATUS_SUCCESS, NdkOperationType::kReceive));
  cq->poll_st();
  EXPECT_TRUE(notes.calls.empty());
  cq->produce_st(entry(1, STATUS_SUCCESS, NdkOperationType::kReceive), /*solicited=*/true);
  EXPECT_EQ(notes.calls.size(), 1u);
  cq->arm(NdkCqNotifyType::kSolicited);
  cq->poll_st();  // the solicited entry is still queued: due
  EXPECT_EQ(notes.calls.size(), 2u);
  drain(*cq);
  cq->arm(NdkCqNotifyType::kSolicited);
  cq->produce_st(entry(2));
  EXPECT_EQ(notes.calls.size(), 2u);
  cq->produce_st(entry(3, STATUS_ACCESS_VIOLATION));
  EXPECT_EQ(notes.calls.size(), 3u);
}

TEST(CompletionQueue, ArmsMergeToTheWidest) {
  Notes notes;
  auto cq = make_cq(16, &notes);
  cq->arm(NdkCqNotifyType::kErrors);
  cq->arm(NdkCqNotifyType::kAny);
  cq->produce_st(entry(0));  // plain success: fires only because the merge gave ANY
  EXPECT_EQ(notes.calls.size(), 1u);
  drain(*cq);

  cq->arm(NdkCqNotifyType::kAny);
  cq->arm(NdkCqNotifyType::kErrors);  // narrower arm does not narrow ANY
  cq->produce_st(entry(1));
  EXPECT_EQ(notes.calls.size(), 2u);
  drain(*cq);

  cq->arm(NdkCqNotifyType::kSolicited);
  cq->arm(NdkCqNotifyType::kErrors);
  cq->produce_st(entry(2));
  EXPECT_EQ(notes.calls.size(), 2u);
  cq->produce_st(entry(3), /*solicited=*/true);
  EXPECT_EQ(notes.calls.size(), 3u);
  cq->produce_st(entry(4, STATUS_CANCELLED));  // the merged arm was used up
  EXPECT_EQ(notes.calls.size(), 3u);
}

TEST(CompletionQueue, OverrunReportsBufferOverflowAndKillsTheCq) {
  Notes notes;
  auto cq = make_cq(4, &notes);
  for (uint64_t i = 0; i < 4; ++i) ASSERT_EQ(cq->produce_st(entry(i)), STATUS_SUCCESS);
  EXPECT_FALSE(cq->has_room_st());
  EXPECT_EQ(cq->produce_st(entry(4)), STATUS_BUFFER_OVERFLOW);
  ASSERT_EQ(notes.calls.size(), 1u);  // reported although the CQ was not armed
  EXPECT_EQ(notes.calls[0], STATUS_BUFFER_OVERFLOW);
  EXPECT_TRUE(cq->overrun());
  // Dead for good: even after draining, nothing is accepted and no more callbacks come.
  EXPECT_EQ(drain(*cq), seq(0, 4));
  cq->arm(NdkCqNotifyType::kAny);
  EXPECT_EQ(cq->produce_st(entry(5)), STATUS_BUFFER_OVERFLOW);
  cq->poll_st();
  EXPECT_EQ(notes.calls.size(), 1u);
  EXPECT_EQ(cq->resize_st(64), STATUS_INVALID_DEVICE_STATE);
  EXPECT_EQ(cq->stats().overruns, 2u);
}

TEST(CompletionQueue, ResizeGrowKeepsQueuedEntriesInOrder) {
  Notes notes;
  TestAllocator alloc;
  auto cq = make_cq(4, &notes, 1024, alloc.hook());
  // Move head off slot 0 so the copy has to follow sequence numbers through a wrap.
  for (uint64_t i = 0; i < 3; ++i) cq->produce_st(entry(i));
  EXPECT_EQ(drain(*cq), seq(0, 3));
  for (uint64_t i = 3; i < 7; ++i) ASSERT_EQ(cq->produce_st(entry(i)), STATUS_SUCCESS);
  ASSERT_EQ(cq->resize_st(100), STATUS_SUCCESS);
  EXPECT_EQ(cq->depth(), 100u);
  for (uint64_t i = 7; i < 103; ++i) ASSERT_EQ(cq->produce_st(entry(i)), STATUS_SUCCESS);
  EXPECT_EQ(cq->produce_st(entry(103)), STATUS_BUFFER_OVERFLOW);  // the new depth is enforced
  EXPECT_EQ(drain(*cq), seq(3, 103));
  EXPECT_EQ(cq->retired_rings(), 0u);  // consumer idle: the old ring was freed at once
  EXPECT_EQ(alloc.rings.load(), 1);
  cq.reset();
  EXPECT_EQ(alloc.live_bytes.load(), 0);
}

TEST(CompletionQueue, ResizeShrinkAndInvalidParameters) {
  Notes notes;
  auto cq = make_cq(16, &notes, 64);
  for (uint64_t i = 0; i < 5; ++i) cq->produce_st(entry(i));
  NdkResultEx out[2];
  ASSERT_EQ(cq->get_results_ex(out, 2), 2u);               // 3 queued now
  EXPECT_EQ(cq->resize_st(2), STATUS_INVALID_PARAMETER);   // fewer than queued
  EXPECT_EQ(cq->resize_st(65), STATUS_INVALID_PARAMETER);  // above MaxCqDepth
  EXPECT_EQ(cq->resize_st(0), STATUS_INVALID_PARAMETER);
  EXPECT_EQ(cq->depth(), 16u);                  // failures leave the CQ as it was
  ASSERT_EQ(cq->resize_st(3), STATUS_SUCCESS);  // exactly the queued count
  EXPECT_EQ(cq->depth(), 3u);
  EXPECT_FALSE(cq->has_room_st());
  EXPECT_EQ(drain(*cq), seq(2, 5));
  ASSERT_EQ(cq->resize_st(64), STATUS_SUCCESS);  // == MaxCqDepth is allowed
  EXPECT_EQ(cq->stats().resizes, 2u);
}

TEST(CompletionQueue, ResizeAllocationFailureIsInsufficientResources) {
  Notes notes;
  TestAllocator alloc;
  auto cq = make_cq(8, &notes, 1024, alloc.hook());
  for (uint64_t i = 0; i < 6; ++i) cq->produce_st(entry(i));
  alloc.fail = true;
  EXPECT_EQ(cq->resize_st(512), STATUS_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(cq->depth(), 8u);
  alloc.fail = false;
  // Unchanged: the same entries, still depth 8.
  cq->produce_st(entry(6));
  cq->produce_st(entry(7));
  EXPECT_EQ(cq->produce_st(entry(8)), STATUS_BUFFER_OVERFLOW);
  EXPECT_EQ(drain(*cq), seq(0, 8));
}

// The core keeps producing and resizing (asked by a third thread, executed in the core's own
// context as a ring message would be) while the consumer drains concurrently.
TEST(CompletionQueue, StressResizeWhileConsumerDrains) {
  constexpr uint64_t kEntries = 1'000'000;
  constexpr int kResizes = 3000;
  Notes notes;  // unused by this test unless the CQ overruns
  TestAllocator alloc;
  auto cq = make_cq(64, &notes, 4096, alloc.hook());

  std::atomic<uint32_t> request{0};  // requested depth, 0 = none (the "ring message")
  std::atomic<int> answered{0}, succeeded{0}, rejected{0};
  std::atomic<bool> stop{false};
  std::atomic<NTSTATUS> unexpected{STATUS_SUCCESS};

  std::thread core([&] {
    uint64_t next = 0;
    while (!stop.load(std::memory_order_acquire)) {
      if (uint32_t depth = request.load(std::memory_order_acquire)) {
        const NTSTATUS s = cq->resize_st(depth);
        if (s == STATUS_SUCCESS) {
          ++succeeded;
        } else if (s == STATUS_INVALID_PARAMETER) {
          ++rejected;  // more queued than the smaller depth: legitimate
        } else {
          unexpected = s;
        }
        request.store(0, std::memory_order_release);
        ++answered;
      }
      for (int burst = 0; burst < 16 && next < kEntries && cq->has_room_st(); ++burst) {
        const NTSTATUS s = cq->produce_st(entry(next));
        if (s != STATUS_SUCCESS) unexpected = s;
        ++next;
      }
      cq->poll_st();
    }
  });

  // Resizes back to back for the whole run (at least kResizes), so that many of them land while
  // the consumer is between reading the ring pointer and copying entries out.
  std::atomic<bool> consumer_done{false};
  int issued = 0;
  std::thread control([&] {
    const uint32_t depths[] = {8, 4096, 16, 1000, 64, 3, 2048, 128};
    while (issued < kResizes || !consumer_done.load(std::memory_order_acquire)) {
      request.store(depths[issued % 8], std::memory_order_release);
      ++issued;
      while (request.load(std::memory_order_acquire) != 0) {
      }
    }
  });

  uint64_t expect = 0;
  uint64_t errors = 0;
  NdkResultEx out[64];
  unsigned batch = 1;
  while (expect < kEntries) {
    batch = batch * 7 % 64 + 1;  // varying batch sizes
    const uint32_t n = cq->get_results_ex(out, batch);
    for (uint32_t i = 0; i < n; ++i) {
      if (id_of(out[i].request_context) != expect || out[i].bytes_transferred != expect * 3) {
        ++errors;
      }
      ++expect;
    }
  }
  consumer_done.store(true, std::memory_order_release);
  control.join();
  stop.store(true, std::memory_order_release);
  core.join();

  EXPECT_EQ(errors, 0u);  // no loss, duplicate or reordering
  EXPECT_EQ(expect, kEntries);
  NdkResultEx extra[1];
  EXPECT_EQ(cq->get_results_ex(extra, 1), 0u);  // and nothing beyond
  EXPECT_EQ(unexpected.load(), STATUS_SUCCESS) << status_name(unexpected.load());
  EXPECT_EQ(answered.load(), issued);
  EXPECT_GE(issued, kResizes);
  EXPECT_EQ(succeeded.load() + rejected.load(), issued);
  EXPECT_GE(succeeded.load(), issued / 8);  // every grow to 4096 must succeed
  EXPECT_EQ(cq->stats().resizes, static_cast<uint64_t>(succeeded.load()));
  EXPECT_FALSE(cq->overrun());
  EXPECT_TRUE(notes.calls.empty());
  cq->poll_st();  // consumer idle: any retired ring is freed now
  EXPECT_EQ(cq->retired_rings(), 0u);
  EXPECT_EQ(alloc.rings.load(), 1);
  cq.reset();
  EXPECT_EQ(alloc.live_bytes.load(), 0);
}

// Lost-wakeup check: the consumer sleeps only after arming, so a missed notification would hang
// this test (ctest's timeout fails it) instead of passing.
TEST(CompletionQueue, StressArmNeverLosesAWakeup) {
  constexpr uint64_t kEntries = 200'000;
  struct Flag {
    std::atomic<int> fired{0};
    static void callback(void* ctx, NTSTATUS) { static_cast<Flag*>(ctx)->fired.fetch_add(1); }
  } flag;
  CqConfig cfg;
  cfg.depth = 256;
  cfg.max_cq_depth = 256;
  cfg.notification = &Flag::callback;
  cfg.notification_context = &flag;
  NTSTATUS status = STATUS_PENDING;
  auto cq = CompletionQueue::create(cfg, &status);
  ASSERT_EQ(status, STATUS_SUCCESS);
  std::atomic<bool> stop{false};
  std::thread core([&] {
    uint64_t next = 0;
    unsigned pace = 1;
    while (!stop.load(std::memory_order_acquire)) {
      pace = pace * 5 % 97 + 1;
      for (unsigned k = 0; k < pace % 4 && next < kEntries && cq->has_room_st(); ++k) {
        cq->produce_st(entry(next++));
      }
      cq->poll_st();
    }
  });
  uint64_t expect = 0, errors = 0, sleeps = 0;
  NdkResultEx out[32];
  while (expect < kEntries) {
    uint32_t n;
    while ((n = cq->get_results_ex(out, 32)) != 0) {
      for (uint32_t i = 0; i < n; ++i) errors += id_of(out[i].request_context) != expect++;
    }
    if (expect == kEntries) break;
    const int before = flag.fired.load();
    cq->arm(NdkCqNotifyType::kAny);
    while (flag.fired.load() == before) std::this_thread::yield();
    ++sleeps;
  }
  stop.store(true, std::memory_order_release);
  core.join();
  EXPECT_EQ(errors, 0u);
  EXPECT_GT(sleeps, 0u);
  EXPECT_EQ(cq->stats().notifications, sleeps);  // exactly one callback per arm
}

}  // namespace
}  // namespace rocedp::rc
