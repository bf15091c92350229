#pragma once
// The memory-region table of one adapter: registrations, their 32-bit tokens, fast-register /
// invalidate state, and the checks the data path runs before touching memory.
//
// Tokens: key = index << 8 | generation. The 8-bit generation (1..255, never 0, so no valid
// token is 0) changes every time a slot is deregistered, so a token kept after deregistration
// fails every check instead of reaching whatever the slot holds next (IBTA uses the low byte of
// L_Key/R_Key the same way). The local and remote tokens of a region are the same key; they are
// separate in the API because NDK keeps them separate.
//
// Concurrency: written by the control thread (register, deregister, initialize fast register)
// and by polling cores (FastRegister / Invalidate work requests, a peer's SendAndInvalidate);
// read by every polling core on each RDMA request and each SGE. Each entry is a seqlock: a
// writer makes the sequence odd (CAS, so two writers of one entry serialize), stores the fields,
// then makes it even with release; a reader retries until it reads the same even sequence before
// and after its (relaxed atomic) field loads. The read path takes no lock and allocates nothing.
// Writers keep their critical section to a handful of stores, so a reader spins at most that
// long. The entry array is allocated once at creation and never moves. Control-side slot
// allocation (the free list) is under a mutex: never on the read path.
//
// Access: NDK_MR_FLAG_* compose as bits (see ndk_types.hpp): bit 0 local write, bit 1 remote
// read, bit 2 remote write (REMOTE_WRITE = 5 carries local write). Local read is always allowed.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "rocedp/ndk_types.hpp"
#include "rocedp/status.hpp"

namespace rocedp::rc {

/// What an access needs (bits of NDK_MR_FLAG_*).
enum MrAccess : uint32_t {
  kMrAccessLocalRead = 0,
  kMrAccessLocalWrite = 0x1,   ///< receive buffer, READ response sink, atomic result
  kMrAccessRemoteRead = 0x2,   ///< RDMA READ target
  kMrAccessRemoteWrite = 0x4,  ///< RDMA WRITE target
  /// Atomic target: NDK has no atomic access flag; rocedp asks for remote read and remote
  /// write, as an atomic both reads and writes the target [inference].
  kMrAccessRemoteAtomic = 0x6,
};

/// Why a check failed (telemetry and tests); the completion only carries the NTSTATUS.
enum class MrFault : uint8_t {
  kNone,
  kBadIndex,    ///< token's index outside the table
  kStaleToken,  ///< generation mismatch: deregistered (or forged) token
  kNotValid,    ///< slot free, or a fast-register region in the invalid state
  kPdMismatch,  ///< region belongs to another protection domain
  kAccess,      ///< access right not granted
  kBounds,      ///< [address, address+length) not inside the region
};
std::string_view mr_fault_name(MrFault fault);

/// Tokens of a registered region.
struct MrTokens {
  uint32_t local = 0;
  uint32_t remote = 0;
};

/// A consistent snapshot of one region (for the responder/requester copy loops and tests).
struct MrView {
  uint64_t base = 0;
  uint64_t length = 0;
  uint32_t access = 0;
  uint32_t pd = 0;
  bool fast_register = false;
  uint32_t parent = 0;  ///< memory window: token of the region it is bound to
};

/// A check that passed, remembered by the one core that owns a QP, for that QP (so one protection
/// domain): the region's token, the entry's seqlock sequence when it was read, and what it
/// granted. Every change to an entry moves its sequence, so while the sequence is unchanged the
/// region is exactly as checked and the next check of the same token is one load and the bounds.
struct MrMemo {
  uint32_t token = 0;
  uint32_t seq = 0;
  uint32_t access = 0;  ///< empty memo: grants nothing, so it never passes a check
  uint64_t base = 0;
  uint64_t length = 0;
};

inline constexpr uint32_t kMrTokenGenerationBits = 8;
inline constexpr uint32_t kMrMaxEntries = 1u << 24;  // 24-bit index
inline constexpr uint64_t kFrmrPageSize = 4096;

namespace mr_detail {
enum State : uint32_t {
  kFree = 0,
  kValid = 1,
  kFrInvalid = 2,
  kFrValid = 3,
  kMwInvalid = 4,   // memory window, not bound
  kMwValid = 5,     // memory window bound to `parent` (remote access only)
  kPrivileged = 6,  // GetPrivilegedMemoryRegionToken: local access to any address
};

// meta word: generation (bits 0..7), state (8..15), access (16..23), allow-remote (24).
constexpr uint32_t pack(uint32_t gen, uint32_t state, uint32_t access, bool allow_remote) {
  return (gen & 0xFF) | (state << 8) | ((access & 0xFF) << 16) | (allow_remote ? 1u << 24 : 0u);
}
constexpr uint32_t meta_gen(uint32_t meta) {
  return meta & 0xFF;
}
constexpr uint32_t meta_state(uint32_t meta) {
  return (meta >> 8) & 0xFF;
}
constexpr uint32_t meta_access(uint32_t meta) {
  return (meta >> 16) & 0xFF;
}
constexpr bool meta_allow_remote(uint32_t meta) {
  return (meta >> 24) & 1;
}
}  // namespace mr_detail

constexpr uint32_t mr_token_index(uint32_t token) {
  return token >> kMrTokenGenerationBits;
}
constexpr uint32_t mr_token_generation(uint32_t token) {
  return token & 0xFF;
}

class MemoryRegionTable {
 public:
  /// capacity: max regions (<= kMrMaxEntries); max_registration_size: NDK_ADAPTER_INFO's
  /// MaxRegistrationSize; max_frmr_pages: FRMRPageCount. Null if the table cannot be allocated.
  static std::unique_ptr<MemoryRegionTable> create(uint32_t capacity,
                                                   uint64_t max_registration_size,
                                                   uint32_t max_frmr_pages);
  ~MemoryRegionTable();

  // ---- control thread ----

  /// NdkRegisterMr: STATUS_SUCCESS with the tokens; STATUS_INVALID_PARAMETER (null address,
  /// length 0 or > MaxRegistrationSize, address range wraps, unknown flags, or bit 2 without
  /// bit 0); STATUS_INSUFFICIENT_RESOURCES (table full).
  NTSTATUS register_mr(uint32_t pd, const void* address, uint64_t length, uint32_t mr_flags,
                       MrTokens* tokens);
  /// NdkInitializeFastRegisterMr: a region in the invalid state that FastRegister can make valid
  /// for up to page_count pages. STATUS_IMPLEMENTATION_LIMIT (page_count > FRMRPageCount or 0),
  /// STATUS_INSUFFICIENT_RESOURCES (table full).
  NTSTATUS create_fast_register(uint32_t pd, uint32_t page_count, bool allow_remote_access,
                                MrTokens* tokens);
  /// NdkDeregisterMr / close of a fast-register MR or a memory window: frees the slot and
  /// retires the token. STATUS_INVALID_PARAMETER if the token is not a live region or window.
  NTSTATUS deregister(uint32_t token);
  /// NdkCreateMw: a memory window of protection domain `pd`, unbound (its token fails every
  /// check until a Bind). STATUS_INSUFFICIENT_RESOURCES (table full).
  NTSTATUS create_window(uint32_t pd, uint32_t* token);
  /// NdkGetPrivilegedMemoryRegionToken: a local-only region of `pd` covering the whole address
  /// space (the consumer's logical addresses are virtual addresses here). Remote checks always
  /// fail on it. STATUS_INSUFFICIENT_RESOURCES (table full).
  NTSTATUS register_privileged(uint32_t pd, uint32_t* token);

  // ---- polling cores (work requests), any thread ----

  /// FastRegister work request: makes an invalid fast-register region valid at
  /// [address, address+length) with mr_flags. Completion status: STATUS_SUCCESS;
  /// STATUS_ACCESS_VIOLATION (stale/unknown token, or remote flags on a region initialized
  /// without remote access); STATUS_INVALID_DEVICE_REQUEST (not a fast-register region, already
  /// valid, length beyond its pages, bad flags).
  NTSTATUS fast_register(uint32_t token, uint64_t address, uint64_t length, uint32_t mr_flags);
  /// Invalidate work request, or a peer's SendAndInvalidate: a valid fast-register region
  /// becomes invalid (an invalid one stays invalid). STATUS_ACCESS_VIOLATION for a stale or
  /// unknown token; STATUS_INVALID_DEVICE_REQUEST for a region that is not fast-register.
  NTSTATUS invalidate(uint32_t token);
  /// Bind work request (NdkBind) of a QP of protection domain `pd`: window `mw_token` gives
  /// remote access `mr_flags` (NDK_MR_FLAG_*, remote bits) to [address, address+length) of
  /// region `mr_token`, until it is invalidated or the region goes away. Completion status:
  /// STATUS_SUCCESS; STATUS_ACCESS_VIOLATION (stale/unknown window or region, another PD, range
  /// outside the region, a right the region does not grant); STATUS_INVALID_DEVICE_REQUEST (not
  /// a window, bad flags, zero length).
  NTSTATUS bind_window(uint32_t mw_token, uint32_t mr_token, uint32_t pd, uint64_t address,
                       uint64_t length, uint32_t mr_flags);

  // ---- read path: any polling core, lock-free ----

  /// Local access through an SGE's token (the posting QP's protection domain `pd`).
  /// STATUS_SUCCESS or STATUS_ACCESS_VIOLATION (the completion's status). Zero-length SGEs
  /// describe no memory and always pass.
  NTSTATUS check_local(uint32_t token, uint32_t pd, uint64_t address, uint64_t length,
                       uint32_t access, MrFault* fault = nullptr) const {
    if (length == 0 || check_fast(token, pd, address, length, access)) [[likely]] {
      if (fault != nullptr) *fault = MrFault::kNone;
      return STATUS_SUCCESS;
    }
    return check_slow(token, pd, address, length, access, fault);
  }
  /// check_local for a QP's per-packet checks: the same result, through `memo` (that QP's) when
  /// the token is the one it last passed and its entry has not changed since.
  NTSTATUS check_local(MrMemo& memo, uint32_t token, uint32_t pd, uint64_t address, uint64_t length,
                       uint32_t access) const {
    if (token == memo.token && (memo.access & access) == access && address >= memo.base &&
        length <= memo.length && address - memo.base <= memo.length - length &&
        entries_[mr_token_index(token)].seq.load(std::memory_order_acquire) == memo.seq)
        [[likely]] {
      return STATUS_SUCCESS;
    }
    if (length == 0 || check_fast(token, pd, address, length, access, &memo)) return STATUS_SUCCESS;
    return check_slow(token, pd, address, length, access, nullptr);
  }
  /// check_remote for a QP's per-packet checks, through its memo as check_local(memo, ...) (a
  /// window is never remembered: its checks take the full path every time).
  NTSTATUS check_remote(MrMemo& memo, uint32_t token, uint32_t pd, uint64_t address,
                        uint64_t length, uint32_t access) const {
    return check_local(memo, token, pd, address, length, access);
  }
  /// Remote access by a peer (responder side, before writing or reading a byte): same result;
  /// the responder answers STATUS_ACCESS_VIOLATION with a NAK remote access error.
  /// A zero-length RDMA carries no meaningful R_Key and passes (IBTA; rxe skips the check too).
  NTSTATUS check_remote(uint32_t token, uint32_t pd, uint64_t address, uint64_t length,
                        uint32_t access, MrFault* fault = nullptr) const {
    return check_local(token, pd, address, length, access, fault);
  }
  /// A consistent snapshot of a live, valid region; false otherwise.
  bool view(uint32_t token, MrView* out) const;

  uint32_t capacity() const { return capacity_; }
  uint32_t live_regions() const;

 private:
  struct alignas(64) Entry {
    std::atomic<uint32_t> seq{0};
    std::atomic<uint32_t> meta{mr_detail::pack(1, mr_detail::kFree, 0, false)};
    std::atomic<uint32_t> pd{0};
    std::atomic<uint32_t> frmr_pages{0};
    std::atomic<uint64_t> base{0};
    std::atomic<uint64_t> length{0};
    std::atomic<uint32_t> parent{0};  // memory window: the token of the region it is bound to
  };
  MemoryRegionTable(uint32_t capacity, uint64_t max_registration_size, uint32_t max_frmr_pages);
  /// The per-packet check, inline on the data path: one entry, one seqlock round, then state,
  /// generation, PD, rights and bounds. True only for a live region (not a window) that passes
  /// every check; anything else (a window, a writer in the entry, a failure) goes to check_slow,
  /// which decides and names the fault.
  /// On success, `memo` (if given) remembers the region as read.
  bool check_fast(uint32_t token, uint32_t pd, uint64_t address, uint64_t length, uint32_t access,
                  MrMemo* memo = nullptr) const {
    using namespace mr_detail;
    const uint32_t index = mr_token_index(token);
    if (index >= capacity_) [[unlikely]]
      return false;
    const Entry& e = entries_[index];
    const uint32_t s1 = e.seq.load(std::memory_order_acquire);
    const uint32_t meta = e.meta.load(std::memory_order_relaxed);
    const uint64_t base = e.base.load(std::memory_order_relaxed);
    const uint64_t len = e.length.load(std::memory_order_relaxed);
    const uint32_t epd = e.pd.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint32_t state = meta_state(meta);
    const bool ok = e.seq.load(std::memory_order_relaxed) == s1 && (s1 & 1) == 0 &&
                    (state == kValid || state == kFrValid) &&
                    meta_gen(meta) == mr_token_generation(token) && epd == pd &&
                    (meta_access(meta) & access) == access && address >= base && length <= len &&
                    address - base <= len - length;
    if (ok && memo != nullptr) *memo = MrMemo{token, s1, meta_access(meta), base, len};
    return ok;
  }
  NTSTATUS check_slow(uint32_t token, uint32_t pd, uint64_t address, uint64_t length,
                      uint32_t access, MrFault* fault) const;
  bool snapshot(uint32_t index, uint32_t* meta, MrView* view) const;
  Entry* lock_entry(uint32_t index);
  static void unlock_entry(Entry* entry);
  NTSTATUS allocate_slot(uint32_t* index);

  const uint32_t capacity_;
  const uint64_t max_registration_size_;
  const uint32_t max_frmr_pages_;
  std::unique_ptr<Entry[]> entries_;
  std::mutex control_mutex_;    // free list only; never taken on the read path
  std::vector<uint32_t> free_;  // free slot indexes (control thread)
  std::atomic<uint32_t> live_{0};
};

}  // namespace rocedp::rc
