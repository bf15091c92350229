// The control<->lcore channel: requests run where process_requests_st() is called, completions
// where poll_completions() is called, in order, in bounded batches, from a fixed freelist.

#include "dataplane/core_channel.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <variant>
#include <vector>

#include "tests/dataplane/runtime_env.hpp"

namespace rocedp::dataplane {
namespace {

// The channel carries any request kind with the function to run for it; these tests send
// QpTarget requests (the QPN field is the request's id) to a fake core and answer with QpCreated.
struct Trace {
  std::vector<int> ran;        // request ids in the order the "core" ran them
  std::vector<int> completed;  // request ids in the order control completed them
  std::vector<CoreResult> results;
};

// The "core": records the id, answers QpCreated{id * 10}; ids >= 100 are refused.
void run_record(const QpTarget& req, CoreResult& result, void* core) {
  auto* t = static_cast<Trace*>(core);
  t->ran.push_back(static_cast<int>(req.qpn));
  if (req.qpn >= 100) {
    result.status = STATUS_INVALID_PARAMETER;
    return;
  }
  result.value = QpCreated{req.qpn * 10};
}

void done_record(const CoreMessage& msg) {
  auto* t = static_cast<Trace*>(msg.done_ctx);
  t->completed.push_back(static_cast<int>(std::get<CoreCall<QpTarget>>(msg.request).request.qpn));
  t->results.push_back(msg.result);
}

bool send(CoreChannel& ch, Trace& trace, uint32_t id) {
  return ch.call(&run_record, QpTarget{nullptr, id}, &done_record, &trace);
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
  ASSERT_TRUE(send(*ch, trace, 7));
  EXPECT_EQ(ch->in_flight(), 1u);
  EXPECT_EQ(ch->poll_completions(16), 0u) << "no completion before the core ran the request";
  EXPECT_TRUE(trace.ran.empty());

  EXPECT_EQ(ch->process_requests_st(&trace, 16), 1u);
  EXPECT_EQ(trace.ran, std::vector<int>{7});
  EXPECT_TRUE(trace.completed.empty())
      << "the completion callback runs on control, not on the core";

  EXPECT_EQ(ch->poll_completions(16), 1u);
  EXPECT_EQ(trace.completed, std::vector<int>{7});
  EXPECT_EQ(ch->in_flight(), 0u);
}

TEST(CoreChannel, TypedValueTravelsBackWithTheStatus) {
  auto ch = make(8);
  Trace trace;
  ASSERT_TRUE(send(*ch, trace, 7));
  ch->process_requests_st(&trace, 16);
  ch->poll_completions(16);
  ASSERT_EQ(trace.results.size(), 1u);
  const CoreResult& r = trace.results[0];
  EXPECT_TRUE(r.ok());
  ASSERT_NE(r.get<QpCreated>(), nullptr);
  EXPECT_EQ(r.get<QpCreated>()->qpn, 70u);
  EXPECT_EQ(r.get<QpHealth>(), nullptr) << "only the value the core set";
}

TEST(CoreChannel, FailureResultCarriesTheStatusAndNoValue) {
  auto ch = make(8);
  Trace trace;
  ASSERT_TRUE(send(*ch, trace, 100));
  ASSERT_TRUE(send(*ch, trace, 3));
  ch->process_requests_st(&trace, 16);
  ch->poll_completions(16);
  ASSERT_EQ(trace.results.size(), 2u);
  EXPECT_FALSE(trace.results[0].ok());
  EXPECT_EQ(trace.results[0].status, STATUS_INVALID_PARAMETER);
  EXPECT_EQ(trace.results[0].get<QpCreated>(), nullptr);
  // A recycled message starts clean: the next answer does not inherit the failure.
  EXPECT_TRUE(trace.results[1].ok());
  ASSERT_NE(trace.results[1].get<QpCreated>(), nullptr);
  EXPECT_EQ(trace.results[1].get<QpCreated>()->qpn, 30u);
}

TEST(CoreChannel, MessagesAreRecycledClean) {
  auto ch = make(1);  // one message: every request reuses it
  Trace trace;
  ASSERT_TRUE(send(*ch, trace, 100));
  ch->process_requests_st(&trace, 16);
  ch->poll_completions(16);
  CoreMessage* msg = ch->alloc();
  ASSERT_NE(msg, nullptr);
  EXPECT_EQ(msg->result.status, STATUS_SUCCESS);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(msg->result.value));
  EXPECT_EQ(msg->done, nullptr);
  ch->free(msg);
}

TEST(CoreChannel, CoreDrainsRequestsInBoundedBatchesInOrder) {
  auto ch = make(16);
  Trace trace;
  for (uint32_t i = 0; i < 10; ++i) ASSERT_TRUE(send(*ch, trace, i));
  EXPECT_EQ(ch->process_requests_st(&trace, 4), 4u);
  EXPECT_EQ(trace.ran.size(), 4u);
  EXPECT_EQ(ch->poll_completions(3), 3u) << "completions are bounded too";
  EXPECT_EQ(ch->process_requests_st(&trace, 4), 4u);
  EXPECT_EQ(ch->process_requests_st(&trace, 4), 2u);
  EXPECT_EQ(ch->process_requests_st(&trace, 4), 0u);
  EXPECT_EQ(ch->poll_completions(100), 7u);
  std::vector<int> expect{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(trace.ran, expect);
  EXPECT_EQ(trace.completed, expect);
}

TEST(CoreChannel, FreelistBoundsMessagesInFlightAndRecyclesThem) {
  auto ch = make(4);
  Trace trace;
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(send(*ch, trace, i));
  EXPECT_FALSE(send(*ch, trace, 99)) << "all 4 messages are in flight";
  EXPECT_EQ(ch->alloc(), nullptr);
  EXPECT_EQ(ch->process_requests_st(&trace, 16), 4u)
      << "the completion ring takes every message back";
  EXPECT_EQ(ch->poll_completions(16), 4u);
  EXPECT_EQ(ch->in_flight(), 0u);
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(send(*ch, trace, 10 + i));
  EXPECT_EQ(ch->process_requests_st(&trace, 16), 4u);
  EXPECT_EQ(ch->poll_completions(16), 4u);
  EXPECT_EQ(trace.completed.size(), 8u);
}

TEST(CoreChannel, NullCompletionCallbackStillReturnsTheMessage) {
  auto ch = make(2);
  Trace trace;
  ASSERT_TRUE(ch->call(&run_record, QpTarget{nullptr, 1}, nullptr, nullptr));
  EXPECT_EQ(ch->process_requests_st(&trace, 8), 1u);
  EXPECT_EQ(ch->poll_completions(8), 1u);
  EXPECT_EQ(ch->in_flight(), 0u);
  EXPECT_EQ(trace.ran, std::vector<int>{1});
}

// The rings across two real threads: a core thread runs requests while control posts and reaps.
TEST(CoreChannel, CrossThreadRoundTripsKeepOrderAndLoseNothing) {
  auto ch = make(64);
  constexpr uint32_t kTotal = 5000;
  struct CoreSide {
    std::atomic<bool> stop{false};
    uint64_t ran = 0;
  } core;
  auto run = [](const QpTarget&, CoreResult& result, void* c) {
    auto* cs = static_cast<CoreSide*>(c);
    result.value = QpCreated{static_cast<uint32_t>(cs->ran++)};  // sequence as seen by the core
  };
  struct ControlSide {
    uint32_t expected = 0;
    int64_t mismatches = 0;
  } control;
  auto done = [](const CoreMessage& msg) {
    auto* cs = static_cast<ControlSide*>(msg.done_ctx);
    const QpCreated* seq = msg.result.get<QpCreated>();
    const uint32_t id = std::get<CoreCall<QpTarget>>(msg.request).request.qpn;
    if (seq == nullptr || seq->qpn != cs->expected || id != cs->expected) cs->mismatches++;
    cs->expected++;
  };
  std::thread core_thread([&] {
    while (!core.stop.load(std::memory_order_acquire)) ch->process_requests_st(&core, 16);
    ch->process_requests_st(&core, 1u << 20);
  });
  uint32_t sent = 0;
  while (control.expected < kTotal) {
    while (sent < kTotal && ch->call<QpTarget>(run, QpTarget{nullptr, sent}, done, &control))
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
