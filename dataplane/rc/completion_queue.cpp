#include "dataplane/rc/completion_queue.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>
#include <type_traits>

namespace rocedp::rc {

// Ring memory: this header followed by `capacity` NdkResultEx slots (an aggregate, so the
// slots begin their lifetime when first assigned). capacity is a power of two >= depth; the
// producer enforces the logical depth.
namespace {

// Arm ranks: larger is wider (NDKPI arm merge: ANY > SOLICITED > ERRORS).
constexpr uint32_t kRankErrors = 1;
constexpr uint32_t kRankSolicited = 2;
constexpr uint32_t kRankAny = 3;

constexpr uint32_t arm_rank(NdkCqNotifyType type) {
  switch (type) {
    case NdkCqNotifyType::kErrors:
      return kRankErrors;
    case NdkCqNotifyType::kSolicited:
      return kRankSolicited;
    case NdkCqNotifyType::kAny:
      return kRankAny;
  }
  return kRankAny;  // unknown values: treat as ANY rather than never notifying
}

constexpr bool arm_matches(uint32_t rank, bool error, bool solicited) {
  if (rank == kRankAny) return true;
  if (rank == kRankSolicited) return error || solicited;
  return rank == kRankErrors && error;
}

void* default_allocate(size_t bytes, void*) {
  return ::operator new (bytes, std::align_val_t{64}, std::nothrow);
}
void default_release(void* memory, size_t, void*) {
  ::operator delete (memory, std::align_val_t{64});
}

}  // namespace

std::unique_ptr<CompletionQueue> CompletionQueue::create(const CqConfig& config, NTSTATUS* status) {
  if (config.depth == 0 || config.depth > config.max_cq_depth || config.depth > (1u << 31)) {
    *status = STATUS_INVALID_PARAMETER;
    return nullptr;
  }
  std::unique_ptr<CompletionQueue> cq(new (std::nothrow) CompletionQueue(config));
  if (!cq) {
    *status = STATUS_INSUFFICIENT_RESOURCES;
    return nullptr;
  }
  Ring* ring = cq->allocate_ring(config.depth);
  if (ring == nullptr) {
    *status = STATUS_INSUFFICIENT_RESOURCES;
    return nullptr;
  }
  cq->current_ = ring;
  cq->ring_.store(ring, std::memory_order_release);
  cq->depth_.store(config.depth, std::memory_order_relaxed);
  *status = STATUS_SUCCESS;
  return cq;
}

CompletionQueue::CompletionQueue(const CqConfig& config)
    : max_cq_depth_(config.max_cq_depth),
      notification_(config.notification),
      notification_context_(config.notification_context),
      allocator_(config.allocator) {}

CompletionQueue::~CompletionQueue() {
  for (Ring*& r : retired_) {
    if (r != nullptr) free_ring(r);
  }
  if (current_ != nullptr) free_ring(current_);
}

CompletionQueue::Ring* CompletionQueue::allocate_ring(uint32_t depth) {
  const uint64_t capacity = std::bit_ceil(static_cast<uint64_t>(depth));
  const size_t bytes = sizeof(Ring) + capacity * sizeof(NdkResultEx);
  void* memory = allocator_.allocate ? allocator_.allocate(bytes, allocator_.context)
                                     : default_allocate(bytes, nullptr);
  if (memory == nullptr) return nullptr;
  Ring* ring = new (memory) Ring{depth, 0, capacity - 1, bytes, 0};
  return ring;
}

void CompletionQueue::free_ring(Ring* ring) {
  const size_t bytes = ring->bytes;
  ring->~Ring();
  if (allocator_.release) {
    allocator_.release(ring, bytes, allocator_.context);
  } else {
    default_release(ring, bytes, nullptr);
  }
}

// ---- consumer side ----

CompletionQueue::Ring* CompletionQueue::protect_ring() {
  Ring* ring = ring_.load(std::memory_order_acquire);
  for (;;) {
    hazard_.store(ring, std::memory_order_seq_cst);
    Ring* again = ring_.load(std::memory_order_seq_cst);
    if (again == ring) return ring;
    ring = again;
  }
}

template <typename Out, typename Copy>
uint32_t CompletionQueue::consume(Out* out, uint32_t n, Copy copy) {
  const uint64_t head = head_.load(std::memory_order_relaxed);
  // Tail first, then the ring (see the protocol in the header, step 4).
  const uint64_t tail = tail_.load(std::memory_order_acquire);
  if (tail == head || n == 0) return 0;
  Ring* ring = protect_ring();
  const uint32_t count = static_cast<uint32_t>(std::min<uint64_t>(n, tail - head));
  copy(out, ring, head, count);
  hazard_.store(nullptr, std::memory_order_release);
  // Release: the core may reuse these slots only after our reads.
  head_.store(head + count, std::memory_order_release);
  return count;
}

static_assert(std::is_trivially_copyable_v<NdkResultEx>);

// The entries as they are: at most two contiguous runs of the ring (before and after the wrap).
uint32_t CompletionQueue::get_results_ex(NdkResultEx* out, uint32_t n) {
  return consume(out, n, [](NdkResultEx* dst, Ring* ring, uint64_t head, uint32_t count) {
    const uint64_t first = head & ring->mask;
    const uint64_t run = std::min<uint64_t>(count, ring->mask + 1 - first);
    std::memcpy(dst, ring->slots() + first, run * sizeof(NdkResultEx));
    std::memcpy(dst + run, ring->slots(), (count - run) * sizeof(NdkResultEx));
  });
}

uint32_t CompletionQueue::get_results(NdkResult* out, uint32_t n) {
  return consume(out, n, [](NdkResult* dst, Ring* ring, uint64_t head, uint32_t count) {
    for (uint32_t i = 0; i < count; ++i) dst[i] = to_result(ring->at(head + i));
  });
}

void CompletionQueue::arm(NdkCqNotifyType type) {
  const uint32_t want = arm_rank(type);
  uint32_t current = arm_.load(std::memory_order_relaxed);
  while (current < want && !arm_.compare_exchange_weak(current, want, std::memory_order_seq_cst,
                                                       std::memory_order_relaxed)) {
  }
  const uint32_t merged = std::max(current, want);
  // Dekker with produce_st: our arm store is ordered before these loads, the core's entry
  // store before its arm_ load. At least one side sees the other.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (due(merged)) kick_.store(true, std::memory_order_release);
}

// Whether completions an arm of `rank` waits for are queued now.
bool CompletionQueue::due(uint32_t rank) const {
  const uint64_t head = head_.load(std::memory_order_acquire);
  if (rank == kRankAny) return tail_.load(std::memory_order_relaxed) > head;
  if (rank == kRankSolicited) return last_solicited_end_.load(std::memory_order_relaxed) > head;
  return last_error_end_.load(std::memory_order_relaxed) > head;
}

// ---- owning core ----

bool CompletionQueue::claim_and_notify(NTSTATUS status) {
  if (arm_.exchange(0, std::memory_order_acq_rel) == 0) return false;
  if (overrun_.load(std::memory_order_relaxed)) return false;  // dead CQ: overflow was reported
  notifications_.fetch_add(1, std::memory_order_relaxed);
  if (notification_ != nullptr) notification_(notification_context_, status);
  return true;
}

void CompletionQueue::overflow_st() {
  overruns_.fetch_add(1, std::memory_order_relaxed);
  if (overrun_.load(std::memory_order_relaxed)) return;  // dead already: reported once
  overrun_.store(true, std::memory_order_release);
  // The overrun is reported whether or not the CQ is armed; it consumes any arm.
  arm_.store(0, std::memory_order_relaxed);
  if (notification_ != nullptr) notification_(notification_context_, STATUS_BUFFER_OVERFLOW);
}

void CompletionQueue::notify_if_armed_st(bool error, bool solicited) {
  const uint32_t rank = arm_.load(std::memory_order_relaxed);
  if (rank != 0 && arm_matches(rank, error, solicited)) claim_and_notify(STATUS_SUCCESS);
}

NTSTATUS CompletionQueue::resize_st(uint32_t depth) {
  publish_st();  // the copy below moves published entries only
  if (overrun_.load(std::memory_order_relaxed)) return STATUS_INVALID_DEVICE_STATE;
  if (depth == 0 || depth > max_cq_depth_ || depth > (1u << 31)) return STATUS_INVALID_PARAMETER;
  const uint64_t head = head_.load(std::memory_order_acquire);
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  // Real providers refuse to drop queued completions; so do we (DESIGN.md §3, ResizeCq).
  if (tail - head > depth) return STATUS_INVALID_PARAMETER;
  Ring* fresh = allocate_ring(depth);
  if (fresh == nullptr) return STATUS_INSUFFICIENT_RESOURCES;
  for (uint64_t s = head; s < tail; ++s) fresh->at(s) = current_->at(s);

  ring_.store(fresh, std::memory_order_seq_cst);
  Ring* old = current_;
  current_ = fresh;
  cached_head_ = head;
  depth_.store(depth, std::memory_order_relaxed);
  resizes_.fetch_add(1, std::memory_order_relaxed);

  // At most one retired ring survives a reclaim (one hazard), so a slot is always free here.
  for (Ring*& r : retired_) {
    if (r == nullptr) {
      r = old;
      retired_count_.fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
  reclaim_st();
  return STATUS_SUCCESS;
}

bool CompletionQueue::reclaim_st() {
  if (retired_count_.load(std::memory_order_relaxed) == 0) return false;
  bool freed = false;
  const Ring* in_use = hazard_.load(std::memory_order_seq_cst);
  for (Ring*& r : retired_) {
    if (r != nullptr && r != in_use) {
      free_ring(r);
      r = nullptr;
      retired_count_.fetch_sub(1, std::memory_order_relaxed);
      freed = true;
    }
  }
  return freed;
}

bool CompletionQueue::poll_st() {
  bool busy = false;
  if (kick_.load(std::memory_order_relaxed) && kick_.exchange(false, std::memory_order_acquire)) {
    // A kick says an arm found completions due when it was made. The arm may have been claimed
    // since (a completion published meanwhile fired it) and a new one made from the callback,
    // which no completion may match yet: the arm there now fires only if it is due itself.
    const uint32_t rank = arm_.load(std::memory_order_acquire);
    if (rank != 0 && due(rank)) busy = claim_and_notify(STATUS_SUCCESS);
  }
  if (retired_count_.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    busy = reclaim_st() || busy;
  }
  return busy;
}

// ---- any thread ----

uint64_t CompletionQueue::size() const {
  const uint64_t head = head_.load(std::memory_order_acquire);
  const uint64_t tail = tail_.load(std::memory_order_acquire);
  return tail >= head ? tail - head : 0;
}

CqStats CompletionQueue::stats() const {
  CqStats s;
  s.produced = produced_.load(std::memory_order_relaxed);
  s.consumed = head_.load(std::memory_order_relaxed);
  s.notifications = notifications_.load(std::memory_order_relaxed);
  s.overruns = overruns_.load(std::memory_order_relaxed);
  s.resizes = resizes_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace rocedp::rc
