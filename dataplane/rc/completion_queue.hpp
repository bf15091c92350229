#pragma once
// The completion queue (NDK_CQ) of one polling core: a single-producer/single-consumer ring of
// NdkResultEx from the owning core (producer) to the consumer that calls GetCqResults.
//
// Who may call what:
//   - methods ending in _st: only the owning polling core (or, in tests, the one thread that
//     plays it). They never block; produce_st() and poll_st() never allocate.
//   - get_results / get_results_ex / arm: the consumer. NDKPI makes the consumer serialize
//     GetCqResults(Ex) and ArmCq per CQ, so there is exactly one consumer at a time.
//   - depth(), overrun(), stats: any thread (relaxed snapshots).
//
// Sequence numbers. head_ and tail_ are 64-bit counters that never wrap in practice and never
// reset; the entry with sequence s lives in slot (s & mask) of whichever ring is current. A resize
// copies the queued sequences [head, tail) into the new ring at their own sequence numbers, so
// head_ and tail_ keep their meaning across rings and the consumer needs no fix-up.
//
// Resize protocol (resize_st on the owning core while the consumer may be inside get_results):
//   1. The core snapshots head (acquire) and its own tail, checks the new depth against
//      MaxCqDepth and the queued count (STATUS_INVALID_PARAMETER), and allocates the new ring
//      through the allocator hook (STATUS_INSUFFICIENT_RESOURCES if it returns null).
//   2. It copies sequences [head, tail) into the new ring. The consumer may read the same old
//      slots meanwhile; both only read, and the core never writes an old ring again.
//   3. It publishes the new ring: ring_.store(new, seq_cst); the old ring goes to a retired list.
//   4. The consumer reads tail_ (acquire) FIRST, then the ring pointer, and protects the ring
//      with a hazard pointer: hazard_ = r (seq_cst), re-read ring_ (seq_cst), retry if changed.
//      Whatever ring r it ends up with holds every sequence in [its head, the tail it read):
//      either r was current when that tail was published (the core wrote them into r or copied
//      them there), or r came from a later resize whose copy started at a head no newer than the
//      consumer's own. So nothing is lost, duplicated or reordered.
//   5. The core frees a retired ring only when hazard_ != that ring (seq_cst load). Because the
//      consumer's hazard store precedes its re-read of ring_, and the core's ring_ store precedes
//      its hazard_ load, either the consumer sees the new ring and drops the old one, or the core
//      sees the hazard and keeps the ring until a later poll_st() / resize_st(). One hazard
//      protects at most one ring, so at most two rings are ever retired at once.
//
// Arm / notify (NDKPI completion rules: one callback per arm, merge ANY > SOLICITED > ERRORS,
// callbacks serialized by the provider): arm_ holds the merged arm rank (0 = disarmed). The core,
// after publishing an entry, issues a seq_cst fence and reads arm_; if the entry matches, it
// claims the arm with exchange(0) and calls the callback. The consumer, after merging its arm
// with a CAS, issues a seq_cst fence and checks whether a matching entry is already queued
// (tail > head for ANY; the last solicited-or-error / last error sequence >= head otherwise).
// The two fences make it impossible for both sides to miss each other (Dekker), so a completion
// that lands just before ArmCq still fires. The consumer cannot call the callback itself (it runs
// on the core), so it sets kick_ and the core's next poll_st() claims the arm and fires. Only the
// core claims arms, and the claim is an exchange, so each arm fires at most once.
//
// Overrun: when the core finds the ring full (NDK: the consumer did not drain in time), the CQ
// enters the overrun state for good: the entry is dropped, produce_st returns
// STATUS_BUFFER_OVERFLOW (the core must then move every QP of this CQ to error), and the
// notification callback receives STATUS_BUFFER_OVERFLOW once, whether or not the CQ is armed
// [inference: NDK says the CQ and its QPs are dead; the consumer must learn it without polling].

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "rocedp/ndk_types.hpp"
#include "rocedp/status.hpp"

namespace rocedp::rc {

/// Where a CQ gets ring memory. Null functions mean the default (aligned operator new).
/// Tests install a hook that fails to provoke STATUS_INSUFFICIENT_RESOURCES.
struct RingAllocator {
  void* (*allocate)(size_t bytes, void* context) = nullptr;
  void (*release)(void* memory, size_t bytes, void* context) = nullptr;
  void* context = nullptr;
};

/// Arguments of NdkCreateCq that reach the core.
struct CqConfig {
  uint32_t depth = 0;         ///< CqDepth
  uint32_t max_cq_depth = 0;  ///< NDK_ADAPTER_INFO::MaxCqDepth
  NdkCqNotificationCallback notification = nullptr;
  void* notification_context = nullptr;
  RingAllocator allocator{};
};

/// Counters for telemetry and tests (relaxed snapshots).
struct CqStats {
  uint64_t produced = 0;
  uint64_t consumed = 0;
  uint64_t notifications = 0;  ///< callbacks with STATUS_SUCCESS
  uint64_t overruns = 0;       ///< entries dropped because the ring was full
  uint64_t resizes = 0;
};

class CompletionQueue {
 public:
  /// NdkCreateCq: STATUS_SUCCESS, STATUS_INVALID_PARAMETER (depth 0 or > max_cq_depth),
  /// STATUS_INSUFFICIENT_RESOURCES (ring allocation failed). Null on failure.
  static std::unique_ptr<CompletionQueue> create(const CqConfig& config, NTSTATUS* status);

  /// Destroy on the owning core once the consumer can no longer call in (after close).
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // ---- consumer side (serialized per CQ by the consumer, as NDKPI requires) ----

  /// NdkGetCqResultsEx: moves up to n completions, oldest first, into out; 0 = empty.
  uint32_t get_results_ex(NdkResultEx* out, uint32_t n);
  /// NdkGetCqResults: the same entries without Type/TypeSpecificCompletionOutput.
  uint32_t get_results(NdkResult* out, uint32_t n);
  /// NdkArmCq: request one notification callback for the next matching completion, or for one
  /// already queued. Arms merge to the widest until the callback fires.
  void arm(NdkCqNotifyType type);

  // ---- owning core ----

  /// Queues one completion. `solicited`: a receive whose SEND carried the SE bit. An entry
  /// whose status is not STATUS_SUCCESS counts as an error for NOTIFY_ERRORS / SOLICITED.
  /// STATUS_SUCCESS, or STATUS_BUFFER_OVERFLOW (overrun; entry dropped; CQ dead).
  /// May call the notification callback before returning.
  NTSTATUS produce_st(const NdkResultEx& result, bool solicited = false) {
    NdkResultEx* e = claim_st();
    if (e == nullptr) [[unlikely]]
      return STATUS_BUFFER_OVERFLOW;
    *e = result;
    commit_st(result.status != STATUS_SUCCESS, solicited);
    return STATUS_SUCCESS;
  }
  /// produce_st in two steps, so the caller writes the entry in place (no staging copy): the
  /// slot of the next completion, or null when the CQ is dead or full, the overrun then counted
  /// and reported exactly as produce_st does (STATUS_BUFFER_OVERFLOW). Every field of the entry
  /// must be written before commit_st publishes it (`error`: its status is not STATUS_SUCCESS).
  NdkResultEx* claim_st() {
    if (overrun_.load(std::memory_order_relaxed) || !has_room_st()) [[unlikely]] {
      publish_st();  // the entries before the overrun are visible when it is reported
      overflow_st();
      return nullptr;
    }
    return &current_->at(staged_);
  }
  void commit_st(bool error, bool solicited) {
    stage_st(error, solicited);
    publish_st();
  }
  /// commit_st without the publication: a run of entries (the completions one visit retires,
  /// the receive completions of one RX burst) is staged one by one and published by one publish_st
  /// (one release store, one fence, one look at the arm). Staged entries are invisible to the
  /// consumer and to arm(), so the core publishes before it leaves the code that staged them.
  void stage_st(bool error, bool solicited) {
    ++staged_;
    if (error) staged_error_end_ = staged_;
    if (error || solicited) staged_solicited_end_ = staged_;
  }
  void publish_st() {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (staged_ == tail) return;
    const bool error = staged_error_end_ > tail;
    const bool solicited = staged_solicited_end_ > tail;
    if (error) last_error_end_.store(staged_error_end_, std::memory_order_relaxed);
    if (solicited) last_solicited_end_.store(staged_solicited_end_, std::memory_order_relaxed);
    tail_.store(staged_, std::memory_order_release);
    // The core is the only writer: no locked increment.
    produced_.store(produced_.load(std::memory_order_relaxed) + (staged_ - tail),
                    std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (arm_.load(std::memory_order_relaxed) != 0) [[unlikely]]
      notify_if_armed_st(error, solicited);
  }

  /// True if produce_st would not overrun (the requester can use this to hold back a CQE).
  bool has_room_st() {
    if (staged_ - cached_head_ < current_->depth) [[likely]]
      return true;
    cached_head_ = head_.load(std::memory_order_acquire);
    return staged_ - cached_head_ < current_->depth;
  }

  /// NdkResizeCq, executed on the owning core. STATUS_SUCCESS; STATUS_INVALID_PARAMETER if
  /// depth is 0, > max_cq_depth or < the completions queued now; STATUS_INSUFFICIENT_RESOURCES
  /// if the allocator fails; STATUS_INVALID_DEVICE_STATE after an overrun. On failure the CQ
  /// is unchanged.
  NTSTATUS resize_st(uint32_t depth);

  /// Fires a notification the consumer's arm found already due, and frees retired rings the
  /// consumer no longer reads. Call once per poll loop for every CQ of the core; returns true
  /// if it did work. Never allocates or blocks (besides the callback).
  bool poll_st();

  // ---- any thread ----

  uint32_t depth() const { return depth_.load(std::memory_order_relaxed); }
  uint32_t max_depth() const { return max_cq_depth_; }
  bool overrun() const { return overrun_.load(std::memory_order_acquire); }
  /// Completions queued right now (a snapshot; exact when called by the producer or consumer
  /// while the other side is idle).
  uint64_t size() const;
  CqStats stats() const;
  /// Rings retired by resizes and not yet freed (tests check that they do get freed).
  uint32_t retired_rings() const { return retired_count_.load(std::memory_order_relaxed); }

 private:
  struct Ring {
    uint32_t depth;
    uint32_t reserved;
    uint64_t mask;
    size_t bytes;
    uint64_t pad;

    NdkResultEx* slots() { return reinterpret_cast<NdkResultEx*>(this + 1); }
    NdkResultEx& at(uint64_t sequence) { return slots()[sequence & mask]; }
  };
  void overflow_st();
  void notify_if_armed_st(bool error, bool solicited);

  explicit CompletionQueue(const CqConfig& config);
  Ring* allocate_ring(uint32_t depth);
  void free_ring(Ring* ring);
  Ring* protect_ring();
  bool claim_and_notify(NTSTATUS status);
  bool due(uint32_t rank) const;
  bool reclaim_st();
  template <typename Out, typename Copy>
  uint32_t consume(Out* out, uint32_t n, Copy copy);

  const uint32_t max_cq_depth_;
  const NdkCqNotificationCallback notification_;
  void* const notification_context_;
  const RingAllocator allocator_;

  // Shared state.
  alignas(64) std::atomic<Ring*> ring_{nullptr};
  std::atomic<uint32_t> depth_{0};
  std::atomic<uint32_t> arm_{0};  // merged arm rank, 0 = disarmed
  std::atomic<bool> kick_{false};
  std::atomic<bool> overrun_{false};
  std::atomic<uint32_t> retired_count_{0};

  // Producer (owning core) side.
  alignas(64) std::atomic<uint64_t> tail_{0};
  std::atomic<uint64_t> last_error_end_{0};      // 1 + sequence of the last error entry
  std::atomic<uint64_t> last_solicited_end_{0};  // 1 + sequence of the last solicited/error
  std::atomic<uint64_t> produced_{0};
  std::atomic<uint64_t> notifications_{0};
  std::atomic<uint64_t> overruns_{0};
  std::atomic<uint64_t> resizes_{0};
  Ring* current_ = nullptr;  // == ring_, owned by the core
  uint64_t staged_ = 0;      // tail_ plus the entries staged and not yet published
  uint64_t staged_error_end_ = 0;
  uint64_t staged_solicited_end_ = 0;
  uint64_t cached_head_ = 0;
  std::array<Ring*, 2> retired_{};

  // Consumer side.
  alignas(64) std::atomic<uint64_t> head_{0};
  std::atomic<Ring*> hazard_{nullptr};
};

}  // namespace rocedp::rc
