#pragma once
// Work queues ("doorbells") between a consumer thread and the polling core that owns a QP/SRQ:
// single-producer/single-consumer rings of work-request entries (WQEs).
//
// Threading (NDKPI posting rules): the consumer serializes posts per queue. Posts to different
// queues of one QP (Receive on the receive queue while Write on the send queue) may run
// concurrently because each queue is its own SPSC ring. Two threads posting to the SAME queue at
// once is a consumer bug that corrupts the ring; rocedp takes no lock to prevent it ("no
// redundant locks", NDKPI). Methods ending in _st belong to the owning polling core.
//
// Slot lifetime: a slot stays occupied from post until the core release_st()s it, which the
// core does when the request completes (or, for an SRQ, when a QP takes the receive). So the
// ring depth is the number of outstanding requests, as NDK's queue depths are, and a post into
// a full queue fails with STATUS_INSUFFICIENT_RESOURCES without generating a completion.
//
// DEFER (NDK_OP_FLAG_DEFER): a deferred post is written into its slot but the tail is not
// published, so the core does not see it; the next post without DEFER publishes it together with
// everything deferred before it. NDK calls DEFER a hint and requires that a post which fails
// inline still hands earlier deferred requests to the hardware, so every failure path below
// publishes first. A consumer that ends a batch with DEFER must call flush_deferred() (or make
// one more post) for those requests to run.

#include <emmintrin.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#include "rocedp/ndk_types.hpp"
#include "rocedp/status.hpp"

namespace rocedp::rc {

/// SGEs carried inside a WQE; a request with more fails with STATUS_INVALID_PARAMETER.
inline constexpr uint32_t kMaxWqeSge = 4;
/// Bytes of NDK_OP_FLAG_INLINE data a send WQE can carry (MaxInlineDataSize).
inline constexpr uint32_t kMaxInlineData = 64;

/// Operation of a send-queue WQE.
enum class SendOpcode : uint8_t {
  kSend,
  kSendAndInvalidate,  ///< SEND with IETH: the peer invalidates invalidate_token
  kWrite,
  kRead,
  kCompareSwap,   ///< 8-byte atomic at remote_address: if == compare then = swap_or_add
  kFetchAdd,      ///< 8-byte atomic at remote_address: += swap_or_add
  kFastRegister,  ///< local: make MR `local_token` valid at fr_* (NdkFastRegister)
  kInvalidate,    ///< local: invalidate MR/MW `local_token` (NdkInvalidate)
  kBind,          ///< local: bind window `local_token` to region `bind_mr_token` at fr_* (NdkBind)
};

/// A send-queue (NDK "initiator queue") work request: one ring slot of 112 bytes padded to two
/// cache lines. Fields that no operation uses together share their bytes (atomic operands with
/// the fast-register range, the remote address with its access rights, the remote token with the
/// local one, the immediate with the tokens a SEND-with-invalidate or a Bind names), so the fields
/// and the first SGE fill the first line: a post with one SGE writes, and the requester reads, one
/// cache line of the slot (the transport progress of a slot lives beside the ring, WqeMeta).
struct alignas(64) SendWqe {
  void* request_context = nullptr;  ///< returned in the completion's RequestContext
  union {
    uint64_t remote_address = 0;  ///< RDMA/atomic target virtual address
    uint32_t fr_access;           ///< fast register / Bind: NDK_MR_FLAG_* access
  };
  union {
    uint64_t compare = 0;  ///< compare-swap: compare operand
    uint64_t fr_address;   ///< fast register / Bind: region base virtual address
  };
  union {
    uint64_t swap_or_add = 0;  ///< compare-swap: swap value; fetch-add: addend
    uint64_t fr_length;        ///< fast register / Bind: region length
  };
  union {
    uint32_t remote_token = 0;  ///< RDMA/atomic remote token (R_Key)
    uint32_t local_token;       ///< FastRegister / Invalidate / Bind: the local MR/MW token
  };
  union {
    uint32_t immediate = 0;     ///< rocedp extension: immediate data (has_immediate)
    uint32_t invalidate_token;  ///< SendAndInvalidate: the peer's token to invalidate
    uint32_t bind_mr_token;     ///< Bind: the region the window (local_token) lends
  };
  uint32_t flags = 0;  ///< NDK_OP_FLAG_*
  SendOpcode opcode = SendOpcode::kSend;
  uint8_t sge_count = 0;
  bool has_immediate = false;
  uint8_t inline_length = 0;  ///< bytes valid in inline_data (NDK_OP_FLAG_INLINE)
  union {
    NdkSge sge[kMaxWqeSge]{};
    /// NDK_OP_FLAG_INLINE on a SEND/WRITE: post() copies the SGEs' bytes here (the SGEs are not
    /// needed after that), so the slot holds either, never both.
    uint8_t inline_data[kMaxInlineData];
  };
};
static_assert(sizeof(SendWqe) == 128, "a send-queue slot is two cache lines");
static_assert(offsetof(SendWqe, sge) + sizeof(NdkSge) <= 64, "fields and the first SGE: one line");
static_assert(sizeof(NdkSge) * kMaxWqeSge == kMaxInlineData, "inline data shares the SGE bytes");

/// A send-queue request's fields but its SGEs: what a post of at most one SGE builds in registers
/// and SendQueue::post_head writes into its slot's first line (the fields a Bind or a fast
/// register uses go through SendQueue::post).
struct SendWqeHead {
  void* request_context = nullptr;
  uint64_t remote_address = 0;
  uint64_t compare = 0;
  uint64_t swap_or_add = 0;
  uint32_t remote_token = 0;
  union {
    uint32_t immediate = 0;
    uint32_t invalidate_token;
  };
  uint32_t flags = 0;
  SendOpcode opcode = SendOpcode::kSend;
  bool has_immediate = false;
};

/// A receive-queue or SRQ work request.
struct RecvWqe {
  void* request_context = nullptr;
  uint32_t sge_count = 0;
  NdkSge sge[kMaxWqeSge]{};
};

/// Total bytes described by a WQE's SGEs.
template <typename Wqe>
constexpr uint64_t sge_bytes(const Wqe& wqe) {
  uint64_t total = 0;
  for (uint32_t i = 0; i < wqe.sge_count && i < kMaxWqeSge; ++i) total += wqe.sge[i].length;
  return total;
}

/// A ring with nothing of its owner's in its first line.
struct NoRingFront {};

/// SPSC ring of WQEs with a logical depth (capacity rounded up to a power of two).
/// Producer: the posting consumer thread. Consumer: the owning core (the _st methods).
/// `Front`: what the owning queue reads on every post besides the ring (SendQueueFront), kept
/// in the same line as the ring's indices, so a post at many QPs misses once, not twice.
template <typename T, typename Front = NoRingFront>
class WqeRing {
 public:
  /// A ring lives inside its queue (one pointer hop less per post): check the depth first
  /// (STATUS_INVALID_PARAMETER for 0 or > 2^31), construct, then allocated() says whether the
  /// slots could be allocated (STATUS_INSUFFICIENT_RESOURCES if not).
  static NTSTATUS check_depth(uint32_t depth) {
    return depth == 0 || depth > (1u << 31) ? STATUS_INVALID_PARAMETER : STATUS_SUCCESS;
  }
  explicit WqeRing(uint32_t depth)
      : mask_(static_cast<uint32_t>(std::bit_ceil(static_cast<uint64_t>(depth)) - 1)),
        slots_(new (std::nothrow) T[mask_ + 1]) {
    depth_.store(depth, std::memory_order_relaxed);
  }
  bool allocated() const { return slots_ != nullptr; }
  Front& front() { return front_; }
  const Front& front() const { return front_; }

  uint32_t depth() const { return depth_.load(std::memory_order_relaxed); }
  uint32_t capacity() const { return mask_ + 1; }

  // ---- producer (posting thread) ----

  /// The next free slot to fill, or null if depth() requests are outstanding.
  T* claim() {
    const uint64_t limit = depth_.load(std::memory_order_relaxed);
    if (shadow_tail_ - cached_head_ >= limit) {
      cached_head_ = head_.load(std::memory_order_acquire);
      if (shadow_tail_ - cached_head_ >= limit) return nullptr;
    }
    return &slots_[shadow_tail_ & mask_];
  }
  /// Producer: fetches, for writing, the slots of the next `n` posts (at most the ring's
  /// capacity), so that posts soon after do not wait for them (a hint: nothing changes).
  void prefetch_claim(uint32_t n) const {
    const uint64_t end = shadow_tail_ + std::min(n, mask_ + 1);
    for (uint64_t seq = shadow_tail_; seq != end; ++seq)
      __builtin_prefetch(&slots_[seq & mask_], 1);
  }
  /// Commits the slot claim() returned; publishes it (and all deferred ones) unless `defer`.
  void commit(bool defer) {
    ++shadow_tail_;
    if (!defer) publish();
  }
  /// Makes every committed slot visible to the core.
  void publish() { tail_.store(shadow_tail_, std::memory_order_release); }
  /// Committed but not yet published (deferred) requests.
  uint32_t deferred() const {
    return static_cast<uint32_t>(shadow_tail_ - tail_.load(std::memory_order_relaxed));
  }

  // ---- owning core ----

  /// Published requests not yet released.
  uint32_t readable_st() const {
    return static_cast<uint32_t>(tail_.load(std::memory_order_acquire) -
                                 head_.load(std::memory_order_relaxed));
  }
  /// The i-th unreleased request, oldest first; i < the last readable_st().
  T& at_st(uint32_t i) { return slots_[(head_.load(std::memory_order_relaxed) + i) & mask_]; }
  /// readable_st() and the slot of sequence `seq`, for a core that keeps the head's value itself
  /// (a QP's completer counts what it released): they read the ring's first line only, not the
  /// head's, which at many QPs is one cache miss less per visit.
  uint32_t readable_from_st(uint64_t head) const {
    assert(head == head_.load(std::memory_order_relaxed));
    return static_cast<uint32_t>(tail_.load(std::memory_order_acquire) - head);
  }
  T& slot_st(uint64_t seq) { return slots_[seq & mask_]; }
  /// Prefetches the ring's two lines (the engine, one QP ahead): the first to read, the head's
  /// to write when the visit retires requests.
  void prefetch_st() const {
    __builtin_prefetch(this);
    __builtin_prefetch(&head_, 1);
  }
  /// Frees the n oldest slots (their requests completed).
  void release_st(uint32_t n) {
    head_.store(head_.load(std::memory_order_relaxed) + n, std::memory_order_release);
  }
  /// Frees every slot before sequence `head` (readable_from_st's caller): a store, no load.
  void release_to_st(uint64_t head) {
    assert(head - head_.load(std::memory_order_relaxed) <= mask_ + uint64_t{1});
    head_.store(head, std::memory_order_release);
  }
  /// Changes the logical depth within the allocated capacity (SRQ modify).
  /// STATUS_INVALID_PARAMETER below the outstanding count, STATUS_NOT_SUPPORTED above the
  /// capacity allocated at creation.
  NTSTATUS set_depth_st(uint32_t depth) {
    if (depth == 0) return STATUS_INVALID_PARAMETER;
    if (depth > capacity()) return STATUS_NOT_SUPPORTED;
    if (tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_relaxed) > depth) {
      return STATUS_INVALID_PARAMETER;
    }
    depth_.store(depth, std::memory_order_relaxed);
    return STATUS_SUCCESS;
  }

 private:
  // A post reads and writes only the first line, and the core reads it on each visit (tail_
  // changes with every publication, so the core fetches that line anyway): one line for both.
  // The core's index, which only the core writes, has a line of its own.
  [[no_unique_address]] Front front_;
  std::atomic<uint32_t> depth_{0};
  const uint32_t mask_;
  std::unique_ptr<T[]> slots_;
  std::atomic<uint64_t> tail_{0};              // published by the producer
  uint64_t shadow_tail_ = 0;                   // producer: committed incl. deferred
  uint64_t cached_head_ = 0;                   // producer's view of head_
  alignas(64) std::atomic<uint64_t> head_{0};  // released by the core
};

/// The "needs attention" doorbell of one polling core (consumers post through
/// lock-free rings; the core only visits queues that rang). A lock-free multi-producer stack of
/// slot numbers (the core's local QP numbers) with one flag per slot, so a slot is on the stack
/// at most once and the stack never needs more room than it was created with.
///   - ring(slot): any posting thread. If the slot's flag was clear it sets it and pushes the
///     slot (CAS on the head); otherwise the core has not yet picked up the previous ring and
///     will see this post too.
///   - take_all_st / next_st / clear_st / cleared_st: the owning core takes the whole stack at
///     once (an exchange, so there is no ABA: nobody pops single entries), reads each entry's
///     successor and clears its flag, then fences once BEFORE looking at any of the queues.
/// Ordering (store buffering, both sides fenced): the producer publishes its ring tail and then
/// exchanges the flag (seq_cst); the core stores 0 into every flag it took and then issues one
/// seq_cst fence before it reads the tails. Either the producer's exchange comes after the clear
/// (it reads 0 and pushes again) or the core's reads after the fence see the new tail. A post is
/// never missed. One fence per drain, not a locked exchange per slot: each exchange waited for
/// the cache miss the previous slot's QP had just taken (at many QPs, one miss per message).
class Doorbell {
 public:
  static constexpr uint32_t kEmpty = UINT32_MAX;

  explicit Doorbell(uint32_t slots) : slots_(slots), entries_(new (std::nothrow) Entry[slots]) {
    if (entries_) {
      for (uint32_t i = 0; i < slots; ++i) entries_[i].flag.store(0, std::memory_order_relaxed);
    }
  }
  bool ok() const { return entries_ != nullptr; }
  uint32_t slots() const { return slots_; }

  /// Producer side (any thread).
  void ring(uint32_t slot) {
    if (slot >= slots_ || entries_[slot].flag.exchange(1, std::memory_order_seq_cst) != 0) return;
    uint32_t old = head_.load(std::memory_order_relaxed);
    do {
      entries_[slot].next = old;
    } while (!head_.compare_exchange_weak(old, slot, std::memory_order_release,
                                          std::memory_order_relaxed));
  }

  /// Producer: fetches `slot`'s entry for writing (a post about to ring it).
  void prefetch(uint32_t slot) const {
    if (slot < slots_) __builtin_prefetch(&entries_[slot], 1);
  }

  /// Owning core: the whole stack (kEmpty if nothing rang). A plain load first, so an idle
  /// poll costs no locked instruction.
  uint32_t take_all_st() {
    if (head_.load(std::memory_order_relaxed) == kEmpty) return kEmpty;
    return head_.exchange(kEmpty, std::memory_order_acquire);
  }
  /// Successor of `slot` in a stack taken by take_all_st; read it before clear_st(slot).
  uint32_t next_st(uint32_t slot) const { return entries_[slot].next; }
  /// Re-enables ringing `slot`; cleared_st() must follow before the slot's queues are read.
  /// Release: a producer whose exchange finds the 0 writes the slot's link, which the core read
  /// just before (next_st); the release orders that read first (a plain store on x86).
  void clear_st(uint32_t slot) { entries_[slot].flag.store(0, std::memory_order_release); }
  /// Orders every clear_st before the queue reads that follow (see the class comment).
  static void cleared_st() { std::atomic_thread_fence(std::memory_order_seq_cst); }

 private:
  struct Entry {  // flag and link side by side: one cache line per ring, not two
    std::atomic<uint32_t> flag;
    uint32_t next;
  };
  const uint32_t slots_;
  std::unique_ptr<Entry[]> entries_;
  alignas(64) std::atomic<uint32_t> head_{kEmpty};
};

/// Where a queue rings when the consumer publishes requests: set by the engine when the QP is
/// created (before the QP can be connected, so before any post can see it).
struct DoorbellHook {
  std::atomic<Doorbell*> doorbell{nullptr};
  uint32_t slot = 0;
  void ring() const {
    if (Doorbell* d = doorbell.load(std::memory_order_acquire)) d->ring(slot);
  }
  void prefetch() const {
    if (Doorbell* d = doorbell.load(std::memory_order_relaxed)) d->prefetch(slot);
  }
};

/// What a send-queue post reads besides the ring's indices, in the ring's first line.
struct SendQueueFront {
  uint16_t max_sge = 0;     ///< initiator SGE limit
  uint16_t max_inline = 0;  ///< inline bytes
  std::atomic<bool> connected{false};
  std::atomic<uint8_t> error_reason{0};  ///< rc::QpErrorReason, set as the QP enters ERROR
  DoorbellHook hook;
};
using SendRing = WqeRing<SendWqe, SendQueueFront>;
// Everything before head_ fits in one line exactly when head_ starts the second (alignas(64)).
static_assert(sizeof(SendRing) == 128, "a send-queue post reads and writes one line of its queue");

namespace detail {
inline NTSTATUS check_sges(uint32_t count, uint32_t max_sge) {
  return count > max_sge || count > kMaxWqeSge ? STATUS_INVALID_PARAMETER : STATUS_SUCCESS;
}
}  // namespace detail

/// The send (initiator) queue of one QP.
class SendQueue {
 public:
  /// depth: initiator queue depth; max_sge: initiator SGE limit (<= kMaxWqeSge);
  /// max_inline: inline bytes (<= kMaxInlineData).
  static std::unique_ptr<SendQueue> create(uint32_t depth, uint32_t max_sge, uint32_t max_inline,
                                           NTSTATUS* status) {
    void* mem =
        ::operator new (sizeof(SendQueue), std::align_val_t{alignof(SendQueue)}, std::nothrow);
    if (mem == nullptr) {
      *status = STATUS_INSUFFICIENT_RESOURCES;
      return nullptr;
    }
    SendQueue* q = create_at(mem, depth, max_sge, max_inline, status);
    if (q == nullptr) ::operator delete (mem, std::align_val_t{alignof(SendQueue)});
    return std::unique_ptr<SendQueue>(q);
  }
  /// create() into `storage` (sizeof(SendQueue) bytes aligned to alignof(SendQueue)), for an
  /// owner that keeps the queue beside itself: the queue, or null with the same statuses (then
  /// the storage holds nothing). The owner destroys it with ~SendQueue().
  static SendQueue* create_at(void* storage, uint32_t depth, uint32_t max_sge, uint32_t max_inline,
                              NTSTATUS* status) {
    if (max_sge > kMaxWqeSge || max_inline > kMaxInlineData) {
      *status = STATUS_INVALID_PARAMETER;
      return nullptr;
    }
    if ((*status = SendRing::check_depth(depth)) != STATUS_SUCCESS) return nullptr;
    auto* q = new (storage) SendQueue(depth, max_sge, max_inline);
    if (!q->ring_.allocated()) {
      q->~SendQueue();
      *status = STATUS_INSUFFICIENT_RESOURCES;
      return nullptr;
    }
    return q;
  }

  /// NdkSend/Write/Read/... post. STATUS_SUCCESS (a completion will follow unless
  /// SILENT_SUCCESS); STATUS_CONNECTION_INVALID if the QP is not connected;
  /// STATUS_INSUFFICIENT_RESOURCES if the queue is full; STATUS_INVALID_PARAMETER for too many
  /// SGEs or too much inline data. Failed posts generate no completion and publish earlier
  /// deferred posts. INLINE data is copied here, so the caller may reuse its buffers on return.
  NTSTATUS post(const SendWqe& wqe) {
    NTSTATUS status = STATUS_SUCCESS;
    const SendQueueFront& f = ring_.front();
    if (!f.connected.load(std::memory_order_acquire)) {
      status = STATUS_CONNECTION_INVALID;
    } else if (detail::check_sges(wqe.sge_count, f.max_sge) != STATUS_SUCCESS) {
      status = STATUS_INVALID_PARAMETER;
    } else if ((wqe.flags & NDK_OP_FLAG_INLINE) != 0 && sge_bytes(wqe) > f.max_inline) {
      status = STATUS_INVALID_PARAMETER;
    }
    SendWqe* slot = status == STATUS_SUCCESS ? ring_.claim() : nullptr;
    if (status == STATUS_SUCCESS && slot == nullptr) status = STATUS_INSUFFICIENT_RESOURCES;
    if (status != STATUS_SUCCESS) {
      flush_deferred();
      return status;
    }
    *slot = wqe;
    // Only SENDs and WRITEs carry inline data (a READ or an atomic has a local sink).
    if ((wqe.flags & NDK_OP_FLAG_INLINE) != 0 && wqe.opcode != SendOpcode::kRead &&
        wqe.opcode != SendOpcode::kCompareSwap && wqe.opcode != SendOpcode::kFetchAdd) {
      uint32_t offset = 0;
      for (uint32_t i = 0; i < wqe.sge_count; ++i) {  // from the caller's SGEs, not the slot's
        if (wqe.sge[i].length != 0) {
          std::memcpy(slot->inline_data + offset, wqe.sge[i].virtual_address, wqe.sge[i].length);
        }
        offset += wqe.sge[i].length;
      }
      slot->inline_length = static_cast<uint8_t>(offset);
    }
    commit_in_place(wqe.flags);
    return STATUS_SUCCESS;
  }

  /// post() for a request of at most one SGE (`n`: 0 or 1) without NDK_OP_FLAG_INLINE, with no
  /// staging copy: its slot's first line, the fields and the SGE, built in registers and written
  /// with four 16-byte stores (the second line holds only further SGEs). Same statuses as post().
  NTSTATUS post_head(const SendWqeHead& h, const NdkSge* sge, uint32_t n) {
    assert(n <= 1 && (h.flags & NDK_OP_FLAG_INLINE) == 0);
    NTSTATUS status = STATUS_SUCCESS;
    SendWqe* slot = claim_slot(n, &status);
    if (slot == nullptr) return status;
    static_assert(
        offsetof(SendWqe, request_context) == 0 && offsetof(SendWqe, remote_address) == 8 &&
            offsetof(SendWqe, compare) == 16 && offsetof(SendWqe, swap_or_add) == 24 &&
            offsetof(SendWqe, remote_token) == 32 && offsetof(SendWqe, immediate) == 36 &&
            offsetof(SendWqe, flags) == 40 && offsetof(SendWqe, opcode) == 44 &&
            offsetof(SendWqe, sge_count) == 45 && offsetof(SendWqe, has_immediate) == 46 &&
            offsetof(SendWqe, inline_length) == 47 && offsetof(SendWqe, sge) == 48 &&
            alignof(SendWqe) >= 16 && std::endian::native == std::endian::little,
        "post_head writes SendWqe's first line as four 16-byte lanes");
    // opcode, sge_count, has_immediate, inline_length (0): bytes 44..47.
    const uint32_t tail =
        static_cast<uint32_t>(h.opcode) | n << 8 | static_cast<uint32_t>(h.has_immediate) << 16;
    auto* line = reinterpret_cast<__m128i*>(slot);
    _mm_store_si128(
        line, _mm_set_epi64x(static_cast<int64_t>(h.remote_address),
                             static_cast<int64_t>(reinterpret_cast<uintptr_t>(h.request_context))));
    _mm_store_si128(line + 1, _mm_set_epi64x(static_cast<int64_t>(h.swap_or_add),
                                             static_cast<int64_t>(h.compare)));
    _mm_store_si128(
        line + 2,
        _mm_set_epi32(static_cast<int32_t>(tail), static_cast<int32_t>(h.flags),
                      static_cast<int32_t>(h.immediate), static_cast<int32_t>(h.remote_token)));
    // The SGE field by field: a caller builds it with narrow stores just before, and one 16-byte
    // load over them cannot be forwarded from the store buffer, so it would wait until every
    // older store, at many QPs the previous posts' cold slot lines, reached the cache.
    _mm_store_si128(
        line + 3,
        n != 0 ? _mm_set_epi64x(
                     static_cast<int64_t>(uint64_t{sge->memory_region_token} << 32 | sge->length),
                     static_cast<int64_t>(reinterpret_cast<uintptr_t>(sge->virtual_address)))
               : _mm_setzero_si128());
    commit_in_place(h.flags);
    return STATUS_SUCCESS;
  }

  /// post() without a staging copy, for a request without NDK_OP_FLAG_INLINE: the slot of the
  /// next request with every field but the SGEs reset to SendWqe's defaults, or null with
  /// *status what post() returns for such a request (nothing posted; earlier deferred posts
  /// published). The caller writes the request into the slot, then calls commit_in_place.
  /// Why: a request built on the stack and copied whole is read back in 16-byte loads over the
  /// narrower stores that built it, which the CPU cannot forward: a stall on every post.
  SendWqe* claim_in_place(uint32_t sge_count, NTSTATUS* status) {
    SendWqe* slot = claim_slot(sge_count, status);
    if (slot == nullptr) return nullptr;
    static constexpr SendWqe kReset{};
    std::memcpy(static_cast<void*>(slot), &kReset, offsetof(SendWqe, sge));
    return slot;
  }
  /// Publishes the request written into the slot claim_in_place gave (unless NDK_OP_FLAG_DEFER).
  void commit_in_place(uint32_t flags) {
    const bool defer = (flags & NDK_OP_FLAG_DEFER) != 0;
    ring_.commit(defer);
    if (!defer) ring_.front().hook.ring();  // after the tail is published (see Doorbell)
  }

  /// A hint before posts (Qp::prefetch_post). `n` = 0: the queue's first line, which every post
  /// reads and writes, fetched for writing without reading it; `n` > 0: the lines the next `n`
  /// posts write, the slots and the doorbell's entry, whose addresses come from that line (read
  /// here).
  void prefetch_post(uint32_t n) const {
    if (n == 0) {
      __builtin_prefetch(&ring_, 1);
      return;
    }
    ring_.prefetch_claim(n);
    ring_.front().hook.prefetch();
  }

  /// Publishes deferred posts (the consumer ends a DEFER batch without a final plain post).
  void flush_deferred() {
    if (ring_.deferred() == 0) return;
    ring_.publish();
    ring_.front().hook.ring();
  }

  /// Engine: the doorbell this queue rings on every publication (null detaches).
  void attach_doorbell_st(Doorbell* doorbell, uint32_t slot) {
    DoorbellHook& hook = ring_.front().hook;
    hook.slot = slot;
    hook.doorbell.store(doorbell, std::memory_order_release);
  }

  /// Connection hook: the owning core sets it when the QP reaches RTS and clears it when the
  /// QP leaves RTS (error, disconnect, close). Read by post().
  void set_connected(bool connected) {
    ring_.front().connected.store(connected, std::memory_order_release);
  }
  bool connected() const { return ring_.front().connected.load(std::memory_order_acquire); }
  /// Why the QP entered ERROR (rc::QpErrorReason; 0 before): set by the owning core before it
  /// clears connected, read by any thread.
  void set_error_reason(uint8_t reason) {
    ring_.front().error_reason.store(reason, std::memory_order_relaxed);
  }
  uint8_t error_reason() const {
    return ring_.front().error_reason.load(std::memory_order_relaxed);
  }

  SendRing& ring() { return ring_; }

 private:
  // The next slot for a request of `sge_count` SGEs as it was left (claim_in_place's checks),
  // or null with *status (earlier deferred posts then published).
  SendWqe* claim_slot(uint32_t sge_count, NTSTATUS* status) {
    const SendQueueFront& f = ring_.front();
    *status = f.connected.load(std::memory_order_acquire) ? detail::check_sges(sge_count, f.max_sge)
                                                          : STATUS_CONNECTION_INVALID;
    SendWqe* slot = *status == STATUS_SUCCESS ? ring_.claim() : nullptr;
    if (slot == nullptr) {
      if (*status == STATUS_SUCCESS) *status = STATUS_INSUFFICIENT_RESOURCES;
      flush_deferred();
      return nullptr;
    }
    return slot;
  }

  SendQueue(uint32_t depth, uint32_t max_sge, uint32_t max_inline) : ring_(depth) {
    ring_.front().max_sge = static_cast<uint16_t>(max_sge);        // <= kMaxWqeSge (create_at)
    ring_.front().max_inline = static_cast<uint16_t>(max_inline);  // <= kMaxInlineData
  }

  // A member, and the queue's own fields inside its first line (SendQueueFront): at many QPs a
  // post misses on that line and on the slot, nothing else of the queue.
  SendRing ring_;
};

/// The receive queue of one QP (no connection check: NDK allows receives before connecting).
class ReceiveQueue {
 public:
  static std::unique_ptr<ReceiveQueue> create(uint32_t depth, uint32_t max_sge, NTSTATUS* status) {
    if (max_sge > kMaxWqeSge) {
      *status = STATUS_INVALID_PARAMETER;
      return nullptr;
    }
    if ((*status = WqeRing<RecvWqe>::check_depth(depth)) != STATUS_SUCCESS) return nullptr;
    std::unique_ptr<ReceiveQueue> q(new (std::nothrow) ReceiveQueue(depth, max_sge));
    if (!q || !q->ring_.allocated()) {
      *status = STATUS_INSUFFICIENT_RESOURCES;
      return nullptr;
    }
    return q;
  }

  /// NdkReceive: STATUS_SUCCESS, STATUS_INSUFFICIENT_RESOURCES (full),
  /// STATUS_INVALID_PARAMETER (too many SGEs). DEFER in `flags` holds back publication.
  NTSTATUS post(const RecvWqe& wqe, uint32_t flags = 0) {
    if (detail::check_sges(wqe.sge_count, max_sge_) != STATUS_SUCCESS) {
      flush_deferred();
      return STATUS_INVALID_PARAMETER;
    }
    RecvWqe* slot = ring_.claim();
    if (slot == nullptr) {
      flush_deferred();
      return STATUS_INSUFFICIENT_RESOURCES;
    }
    *slot = wqe;
    const bool defer = (flags & NDK_OP_FLAG_DEFER) != 0;
    ring_.commit(defer);
    if (!defer) ring_if_armed();
    return STATUS_SUCCESS;
  }
  void flush_deferred() {
    if (ring_.deferred() == 0) return;
    ring_.publish();
    ring_if_armed();
  }
  WqeRing<RecvWqe>& ring() { return ring_; }

  /// Engine: the doorbell of the owning QP's slot. Receives need the core only while the QP
  /// is in ERROR (they complete flushed at once), so the queue rings only once armed.
  void attach_doorbell_st(Doorbell* doorbell, uint32_t slot) {
    hook_.slot = slot;
    armed_.store(false, std::memory_order_relaxed);
    hook_.doorbell.store(doorbell, std::memory_order_release);
  }
  /// Engine, when the QP enters ERROR: from now on every post rings. Dekker with
  /// ring_if_armed: the core stores armed_ and fences before reading the tail; the producer
  /// publishes the tail and fences before reading armed_; one of them sees the other.
  void arm_doorbell_st() {
    armed_.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }

 protected:
  ReceiveQueue(uint32_t depth, uint32_t max_sge) : max_sge_(max_sge), ring_(depth) {}

  void ring_if_armed() {
    if (hook_.doorbell.load(std::memory_order_relaxed) == nullptr) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (armed_.load(std::memory_order_relaxed)) hook_.ring();
  }

  const uint32_t max_sge_;
  DoorbellHook hook_;
  std::atomic<bool> armed_{false};
  WqeRing<RecvWqe> ring_;  // a member, as in SendQueue
};

/// A shared receive queue: receives posted by one consumer thread, taken by any QP of the
/// owning core, with the SRQ limit notification (NdkModifySrq's NotifyThreshold: when the posted
/// receives fall below the threshold the SrqNotification callback fires once, on the owning
/// core, and the threshold disarms until set again — IBTA's SRQ limit event).
class SharedReceiveQueue : public ReceiveQueue {
 public:
  static std::unique_ptr<SharedReceiveQueue> create(uint32_t depth, uint32_t max_sge,
                                                    NdkSrqNotificationCallback notification,
                                                    void* context, NTSTATUS* status) {
    if (max_sge > kMaxWqeSge) {
      *status = STATUS_INVALID_PARAMETER;
      return nullptr;
    }
    if ((*status = WqeRing<RecvWqe>::check_depth(depth)) != STATUS_SUCCESS) return nullptr;
    std::unique_ptr<SharedReceiveQueue> q(
        new (std::nothrow) SharedReceiveQueue(depth, max_sge, notification, context));
    if (!q || !q->ring_.allocated()) {
      *status = STATUS_INSUFFICIENT_RESOURCES;
      return nullptr;
    }
    return q;
  }

  /// NdkModifySrq on the owning core: new depth (up to the depth given at creation, which the
  /// adapter's MaxSrqDepth bounded; the ring's capacity is that rounded up to a power of two)
  /// and limit threshold (0 disarms). STATUS_SUCCESS, STATUS_INVALID_PARAMETER (depth below the
  /// posted count or threshold > depth), STATUS_NOT_SUPPORTED (depth above the creation depth).
  NTSTATUS modify_st(uint32_t depth, uint32_t notify_threshold) {
    if (notify_threshold > depth) return STATUS_INVALID_PARAMETER;
    if (depth > created_depth_) return STATUS_NOT_SUPPORTED;
    const NTSTATUS status = ring_.set_depth_st(depth);
    if (status != STATUS_SUCCESS) return status;
    limit_ = notify_threshold;
    return STATUS_SUCCESS;
  }

  /// Takes the oldest posted receive for a QP of this core; false if the SRQ is empty (the
  /// responder then sends an RNR NAK). May fire the limit notification.
  bool take_st(RecvWqe* out) {
    const uint32_t available = ring_.readable_st();
    if (available == 0) return false;
    *out = ring_.at_st(0);
    ring_.release_st(1);
    if (limit_ != 0 && available - 1 < limit_) {
      limit_ = 0;
      ++limit_events_;
      if (notification_ != nullptr) notification_(context_, STATUS_SUCCESS);
    }
    return true;
  }

  uint32_t limit_st() const { return limit_; }
  uint64_t limit_events_st() const { return limit_events_; }

 private:
  SharedReceiveQueue(uint32_t depth, uint32_t max_sge, NdkSrqNotificationCallback notification,
                     void* context)
      : ReceiveQueue(depth, max_sge),
        notification_(notification),
        context_(context),
        created_depth_(depth) {}

  NdkSrqNotificationCallback notification_;
  void* context_;
  uint32_t created_depth_;
  uint32_t limit_ = 0;  // owning core only
  uint64_t limit_events_ = 0;
};

}  // namespace rocedp::rc
