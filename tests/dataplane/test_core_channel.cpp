// The control<->lcore channel: requests run where process_requests_st() is called, completions
// where poll_completions() is called, in order, in bounded batches, from a fixed freelist.

#include "dataplane/core_channel.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tests/dataplane/runtime_env.hpp"

namespace rocedp::dataplane {
namespace {

struct Trace {
  std::vector<int> ran;        // request ids in the order the "core" ran them
  std::vector<int> completed;  // request ids in the order control completed them
  std::vector<int64_t> results;
  void* core_seen = nullptr;
};

void run_record(CoreMessage& msg, void* core) {
  auto* t = static_cast<Trace*>(msg.arg);
  t->ran.push_back(static_cast<int>(msg.data[0]));
  t->core_seen = core;
  msg.result = static_cast<int64_t>(msg.data[0]) * 10;
  msg.data[1] = 0xC0DE;  // data travels back with the completion
}

void done_record(CoreMessage& msg) {
  auto* t = static_cast<Trace*>(msg.done_ctx);
  EXPECT_EQ(msg.data[1], 0xC0DEu);
  t->completed.push_back(static_cast<int>(msg.data[0]));
  t->results.push_back(msg.result);
}

std::unique_ptr<CoreChannel> make(uint32_t capacity) {
  std::string error;
  auto ch = CoreChannel::create(0, capacity, &error);
  EXPECT_TRUE(ch) << error;
  return ch;
}

TEST(CoreChannel, RequestRunsOnlyWhenTheCorePollsAndCompletesOnlyWhenControlPolls) {
  auto ch = make(8);
  Trace trace;
  int core_ctx = 0;
  ASSERT_TRUE(ch->call(&run_record, &trace, &done_record, &trace, 7));
  EXPECT_EQ(ch->in_flight(), 1u);
  EXPECT_EQ(ch->poll_completions(16), 0u) << "no completion before the core ran the request";
  EXPECT_TRUE(trace.ran.empty());

  EXPECT_EQ(ch->process_requests_st(&core_ctx, 16), 1u);
  EXPECT_EQ(trace.ran, std::vector<int>{7});
  EXPECT_EQ(trace.core_seen, &core_ctx);
  EXPECT_TRUE(trace.completed.empty())
      << "the completion callback runs on control, not on the core";

  EXPECT_EQ(ch->poll_completions(16), 1u);
  EXPECT_EQ(trace.completed, std::vector<int>{7});
  EXPECT_EQ(trace.results, std::vector<int64_t>{70});
  EXPECT_EQ(ch->in_flight(), 0u);
}

TEST(CoreChannel, CoreDrainsRequestsInBoundedBatchesInOrder) {
  auto ch = make(16);
  Trace trace;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(ch->call(&run_record, &trace, &done_record, &trace, i));
  EXPECT_EQ(ch->process_requests_st(nullptr, 4), 4u);
  EXPECT_EQ(trace.ran.size(), 4u);
  EXPECT_EQ(ch->poll_completions(3), 3u) << "completions are bounded too";
  EXPECT_EQ(ch->process_requests_st(nullptr, 4), 4u);
  EXPECT_EQ(ch->process_requests_st(nullptr, 4), 2u);
  EXPECT_EQ(ch->process_requests_st(nullptr, 4), 0u);
  EXPECT_EQ(ch->poll_completions(100), 7u);
  std::vector<int> expect{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(trace.ran, expect);
  EXPECT_EQ(trace.completed, expect);
}

TEST(CoreChannel, FreelistBoundsMessagesInFlightAndRecyclesThem) {
  auto ch = make(4);
  Trace trace;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(ch->call(&run_record, &trace, &done_record, &trace, i));
  EXPECT_FALSE(ch->call(&run_record, &trace, &done_record, &trace, 99))
      << "all 4 messages are in flight";
  EXPECT_EQ(ch->alloc(), nullptr);
  EXPECT_EQ(ch->process_requests_st(nullptr, 16), 4u)
      << "the completion ring takes every message back";
  EXPECT_EQ(ch->poll_completions(16), 4u);
  EXPECT_EQ(ch->in_flight(), 0u);
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(ch->call(&run_record, &trace, &done_record, &trace, 10 + i));
  EXPECT_EQ(ch->process_requests_st(nullptr, 16), 4u);
  EXPECT_EQ(ch->poll_completions(16), 4u);
  EXPECT_EQ(trace.completed.size(), 8u);
}

TEST(CoreChannel, NullCompletionCallbackStillReturnsTheMessage) {
  auto ch = make(2);
  Trace trace;
  ASSERT_TRUE(ch->call(&run_record, &trace, nullptr, nullptr, 1));
  EXPECT_EQ(ch->process_requests_st(nullptr, 8), 1u);
  EXPECT_EQ(ch->poll_completions(8), 1u);
  EXPECT_EQ(ch->in_flight(), 0u);
  EXPECT_EQ(trace.ran, std::vector<int>{1});
}

// The rings across two real threads: a core thread runs requests while control posts and reaps.
TEST(CoreChannel, CrossThreadRoundTripsKeepOrderAndLoseNothing) {
  auto ch = make(64);
  constexpr int kTotal = 5000;
  struct CoreSide {
    std::atomic<bool> stop{false};
    uint64_t ran = 0;
  } core;
  auto run = [](CoreMessage& msg, void* c) {
    auto* cs = static_cast<CoreSide*>(c);
    msg.result = static_cast<int64_t>(cs->ran++);  // sequence as seen by the core
  };
  struct ControlSide {
    int64_t expected = 0;
    int64_t mismatches = 0;
  } control;
  auto done = [](CoreMessage& msg) {
    auto* cs = static_cast<ControlSide*>(msg.done_ctx);
    if (msg.result != cs->expected || static_cast<int64_t>(msg.data[0]) != cs->expected)
      cs->mismatches++;
    cs->expected++;
  };
  std::thread core_thread([&] {
    while (!core.stop.load(std::memory_order_acquire)) ch->process_requests_st(&core, 16);
    ch->process_requests_st(&core, 1u << 20);
  });
  int sent = 0;
  while (control.expected < kTotal) {
    while (sent < kTotal && ch->call(run, nullptr, done, &control, static_cast<uint64_t>(sent)))
      sent++;
    ch->poll_completions(32);
  }
  core.stop.store(true, std::memory_order_release);
  core_thread.join();
  EXPECT_EQ(control.expected, kTotal);
  EXPECT_EQ(control.mismatches, 0);
  EXPECT_EQ(core.ran, static_cast<uint64_t>(kTotal));
  EXPECT_EQ(ch->in_flight(), 0u);
}

}  // namespace
}  // namespace rocedp::dataplane
