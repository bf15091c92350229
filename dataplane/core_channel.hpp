#pragma once
// The control <-> polling-lcore channel: one single-producer/single-consumer rte_ring carries
// requests from control to one lcore, a second one brings them back as completions (CONVENTIONS.md
// items 2-4, after Seastar's smp queues). Nothing else crosses between the control thread and a
// core's state.
//
// Threads:
//   - control thread: alloc(), call(), post(), poll_completions(), free(). It is the only producer
//   of
//     the request ring and the only consumer of the completion ring.
//   - the owning polling lcore: process_requests_st(). Only consumer of requests, only producer of
//     completions.
// Messages come from a preallocated freelist owned by control ("the creator frees"): the core never
// frees a message, it hands it back on the completion ring, and control returns it to the freelist
// after running the completion callback. The completion ring holds as many entries as there are
// messages, so handing a message back can never fail.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct rte_ring;

namespace rocedp::dataplane {

/// One request to a polling core and, on the way back, its completion.
struct CoreMessage {
  /// Runs on the owning polling lcore; `core` is the context given to process_requests_st()
  /// (the PollingCore). Must not block: the core's pollers wait while it runs.
  using RunFn = void (*)(CoreMessage& msg, void* core);
  /// Runs on the control thread when the core has answered; `msg` is freed right after it returns.
  using DoneFn = void (*)(CoreMessage& msg);

  RunFn run = nullptr;
  void* arg = nullptr;       // request argument, owned by the sender
  DoneFn done = nullptr;     // may be null: nothing to do on completion
  void* done_ctx = nullptr;  // completion context, owned by the sender
  int64_t result = 0;        // set by `run`; 0 = success by convention
  uint64_t data[4] = {};     // small inline payload both ways (port id, queue, IP/MAC...)
};

/// The ring pair between the control thread and one polling lcore.
class CoreChannel {
 public:
  /// Creates both rings (SP/SC, exactly `capacity` entries each) and `capacity` messages.
  /// Returns null and sets *error when the rings cannot be created (EAL not up, no memory).
  static std::unique_ptr<CoreChannel> create(uint16_t core_index, uint32_t capacity,
                                             std::string* error);
  ~CoreChannel();
  CoreChannel(const CoreChannel&) = delete;
  CoreChannel& operator=(const CoreChannel&) = delete;

  // ---- control thread ----
  /// A clean message from the freelist, or null when every message is in flight.
  CoreMessage* alloc();
  /// Returns a message that was allocated but never posted.
  void free(CoreMessage* msg);
  /// Enqueues a request; false (message still the caller's) if the request ring is full.
  bool post(CoreMessage* msg);
  /// alloc() + fill + post(); false when no message is free (nothing was sent).
  bool call(CoreMessage::RunFn run, void* arg, CoreMessage::DoneFn done, void* done_ctx,
            uint64_t d0 = 0, uint64_t d1 = 0, uint64_t d2 = 0, uint64_t d3 = 0);
  /// Dequeues at most `max` completions, runs their callbacks in order, frees the messages.
  /// Returns how many completions were handled.
  unsigned poll_completions(unsigned max);
  /// Messages posted whose completion has not been handled yet.
  uint32_t in_flight() const { return capacity_ - static_cast<uint32_t>(free_.size()); }
  uint32_t capacity() const { return capacity_; }
  uint16_t core_index() const { return core_index_; }

  // ---- owning polling lcore ----
  /// Runs at most `max` pending requests (bounded, so control traffic never starves the pollers,
  /// CONVENTIONS.md item 3) and hands each back on the completion ring. Returns how many ran.
  unsigned process_requests_st(void* core, unsigned max);

 private:
  CoreChannel(uint16_t core_index, uint32_t capacity, rte_ring* requests, rte_ring* completions);

  uint16_t core_index_;
  uint32_t capacity_;
  rte_ring* requests_;
  rte_ring* completions_;
  std::vector<CoreMessage> messages_;
  std::vector<CoreMessage*>
      free_;  // LIFO: the most recently used (cache-warm) message goes out first
};

}  // namespace rocedp::dataplane
