#include "dataplane/rc/memory_region.hpp"

#include <new>

namespace rocedp::rc {

namespace {

using namespace mr_detail;

constexpr uint32_t next_gen(uint32_t gen) {
  return gen >= 0xFF ? 1 : gen + 1;
}
constexpr uint32_t make_token(uint32_t index, uint32_t gen) {
  return (index << kMrTokenGenerationBits) | gen;
}

constexpr uint32_t kKnownMrFlags = NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                                   NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_RDMA_READ_SINK;
constexpr uint32_t kRemoteBits = kMrAccessRemoteRead | kMrAccessRemoteWrite;

// Bit 2 alone is not an NDK value: REMOTE_WRITE is 5, i.e. it always brings local write.
constexpr bool mr_flags_valid(uint32_t flags) {
  if ((flags & ~kKnownMrFlags) != 0) return false;
  if ((flags & kMrAccessRemoteWrite) != 0 && (flags & NDK_MR_FLAG_ALLOW_LOCAL_WRITE) == 0) {
    return false;
  }
  return true;
}

// Reading a READ response into memory is a local write; this adapter reports
// RDMA_READ_SINK_NOT_REQUIRED, so RDMA_READ_SINK also grants it.
constexpr uint32_t effective_access(uint32_t flags) {
  uint32_t access = flags & (kMrAccessLocalWrite | kRemoteBits);
  if ((flags & NDK_MR_FLAG_RDMA_READ_SINK) != 0) access |= kMrAccessLocalWrite;
  return access;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

std::string_view mr_fault_name(MrFault fault) {
  switch (fault) {
    case MrFault::kNone:
      return "none";
    case MrFault::kBadIndex:
      return "bad_index";
    case MrFault::kStaleToken:
      return "stale_token";
    case MrFault::kNotValid:
      return "not_valid";
    case MrFault::kPdMismatch:
      return "pd_mismatch";
    case MrFault::kAccess:
      return "access";
    case MrFault::kBounds:
      return "bounds";
  }
  return "unknown";
}

std::unique_ptr<MemoryRegionTable> MemoryRegionTable::create(uint32_t capacity,
                                                             uint64_t max_registration_size,
                                                             uint32_t max_frmr_pages) {
  if (capacity == 0 || capacity > kMrMaxEntries) return nullptr;
  std::unique_ptr<MemoryRegionTable> table(
      new (std::nothrow) MemoryRegionTable(capacity, max_registration_size, max_frmr_pages));
  if (!table || !table->entries_) return nullptr;
  try {
    table->free_.reserve(capacity);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  // Hand out low indexes first.
  for (uint32_t i = capacity; i > 0; --i) table->free_.push_back(i - 1);
  return table;
}

MemoryRegionTable::MemoryRegionTable(uint32_t capacity, uint64_t max_registration_size,
                                     uint32_t max_frmr_pages)
    : capacity_(capacity),
      max_registration_size_(max_registration_size),
      max_frmr_pages_(max_frmr_pages),
      entries_(new (std::nothrow) Entry[capacity]) {}

MemoryRegionTable::~MemoryRegionTable() = default;

uint32_t MemoryRegionTable::live_regions() const {
  return live_.load(std::memory_order_relaxed);
}

// ---- seqlock ----

MemoryRegionTable::Entry* MemoryRegionTable::lock_entry(uint32_t index) {
  Entry* e = &entries_[index];
  uint32_t s = e->seq.load(std::memory_order_relaxed);
  for (;;) {
    if ((s & 1) != 0) {
      cpu_relax();
      s = e->seq.load(std::memory_order_relaxed);
      continue;
    }
    if (e->seq.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
      break;
    }
  }
  // The odd sequence must be visible before any field store (seqlock writer).
  std::atomic_thread_fence(std::memory_order_release);
  return e;
}

void MemoryRegionTable::unlock_entry(Entry* entry) {
  entry->seq.store(entry->seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

bool MemoryRegionTable::snapshot(uint32_t index, uint32_t* meta, MrView* view) const {
  const Entry& e = entries_[index];
  for (;;) {
    const uint32_t s1 = e.seq.load(std::memory_order_acquire);
    if ((s1 & 1) != 0) {
      cpu_relax();
      continue;
    }
    *meta = e.meta.load(std::memory_order_relaxed);
    view->base = e.base.load(std::memory_order_relaxed);
    view->length = e.length.load(std::memory_order_relaxed);
    view->pd = e.pd.load(std::memory_order_relaxed);
    view->parent = e.parent.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.seq.load(std::memory_order_relaxed) == s1) break;
  }
  view->access = meta_access(*meta);
  const uint32_t state = meta_state(*meta);
  view->fast_register = state == kFrInvalid || state == kFrValid;
  return state == kValid || state == kFrValid || state == kMwValid || state == kPrivileged;
}

// ---- control thread ----

NTSTATUS MemoryRegionTable::allocate_slot(uint32_t* index) {
  std::lock_guard<std::mutex> lock(control_mutex_);
  if (free_.empty()) return STATUS_INSUFFICIENT_RESOURCES;
  *index = free_.back();
  free_.pop_back();
  return STATUS_SUCCESS;
}

NTSTATUS MemoryRegionTable::register_mr(uint32_t pd, const void* address, uint64_t length,
                                        uint32_t mr_flags, MrTokens* tokens) {
  const uint64_t base = reinterpret_cast<uintptr_t>(address);
  if (address == nullptr || length == 0 || length > max_registration_size_ ||
      base + length < base || !mr_flags_valid(mr_flags)) {
    return STATUS_INVALID_PARAMETER;
  }
  uint32_t index = 0;
  const NTSTATUS status = allocate_slot(&index);
  if (status != STATUS_SUCCESS) return status;
  Entry* e = lock_entry(index);
  const uint32_t gen = meta_gen(e->meta.load(std::memory_order_relaxed));
  e->base.store(base, std::memory_order_relaxed);
  e->length.store(length, std::memory_order_relaxed);
  e->pd.store(pd, std::memory_order_relaxed);
  e->frmr_pages.store(0, std::memory_order_relaxed);
  e->meta.store(pack(gen, kValid, effective_access(mr_flags), true), std::memory_order_relaxed);
  unlock_entry(e);
  live_.fetch_add(1, std::memory_order_relaxed);
  tokens->local = tokens->remote = make_token(index, gen);
  return STATUS_SUCCESS;
}

NTSTATUS MemoryRegionTable::create_fast_register(uint32_t pd, uint32_t page_count,
                                                 bool allow_remote_access, MrTokens* tokens) {
  if (page_count == 0 || page_count > max_frmr_pages_) return STATUS_IMPLEMENTATION_LIMIT;
  uint32_t index = 0;
  const NTSTATUS status = allocate_slot(&index);
  if (status != STATUS_SUCCESS) return status;
  Entry* e = lock_entry(index);
  const uint32_t gen = meta_gen(e->meta.load(std::memory_order_relaxed));
  e->base.store(0, std::memory_order_relaxed);
  e->length.store(0, std::memory_order_relaxed);
  e->pd.store(pd, std::memory_order_relaxed);
  e->frmr_pages.store(page_count, std::memory_order_relaxed);
  e->meta.store(pack(gen, kFrInvalid, 0, allow_remote_access), std::memory_order_relaxed);
  unlock_entry(e);
  live_.fetch_add(1, std::memory_order_relaxed);
  tokens->local = tokens->remote = make_token(index, gen);
  return STATUS_SUCCESS;
}

NTSTATUS MemoryRegionTable::deregister(uint32_t token) {
  const uint32_t index = mr_token_index(token);
  if (index >= capacity_) return STATUS_INVALID_PARAMETER;
  Entry* e = lock_entry(index);
  const uint32_t meta = e->meta.load(std::memory_order_relaxed);
  if (meta_gen(meta) != mr_token_generation(token) || meta_state(meta) == kFree) {
    unlock_entry(e);
    return STATUS_INVALID_PARAMETER;
  }
  // New generation first: from the unlock on, the old token fails every check.
  e->meta.store(pack(next_gen(meta_gen(meta)), kFree, 0, false), std::memory_order_relaxed);
  e->base.store(0, std::memory_order_relaxed);
  e->length.store(0, std::memory_order_relaxed);
  unlock_entry(e);
  live_.fetch_sub(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(control_mutex_);
  free_.push_back(index);
  return STATUS_SUCCESS;
}

NTSTATUS MemoryRegionTable::create_window(uint32_t pd, uint32_t* token) {
  uint32_t index = 0;
  const NTSTATUS status = allocate_slot(&index);
  if (status != STATUS_SUCCESS) return status;
  Entry* e = lock_entry(index);
  const uint32_t gen = meta_gen(e->meta.load(std::memory_order_relaxed));
  e->base.store(0, std::memory_order_relaxed);
  e->length.store(0, std::memory_order_relaxed);
  e->pd.store(pd, std::memory_order_relaxed);
  e->parent.store(0, std::memory_order_relaxed);
  e->meta.store(pack(gen, kMwInvalid, 0, true), std::memory_order_relaxed);
  unlock_entry(e);
  live_.fetch_add(1, std::memory_order_relaxed);
  *token = make_token(index, gen);
  return STATUS_SUCCESS;
}

NTSTATUS MemoryRegionTable::register_privileged(uint32_t pd, uint32_t* token) {
  uint32_t index = 0;
  const NTSTATUS status = allocate_slot(&index);
  if (status != STATUS_SUCCESS) return status;
  Entry* e = lock_entry(index);
  const uint32_t gen = meta_gen(e->meta.load(std::memory_order_relaxed));
  e->base.store(0, std::memory_order_relaxed);
  e->length.store(~uint64_t{0}, std::memory_order_relaxed);
  e->pd.store(pd, std::memory_order_relaxed);
  e->meta.store(pack(gen, kPrivileged, kMrAccessLocalWrite, false), std::memory_order_relaxed);
  unlock_entry(e);
  live_.fetch_add(1, std::memory_order_relaxed);
  *token = make_token(index, gen);
  return STATUS_SUCCESS;
}

// ---- polling cores ----

NTSTATUS MemoryRegionTable::bind_window(uint32_t mw_token, uint32_t mr_token, uint32_t pd,
                                        uint64_t address, uint64_t length, uint32_t mr_flags) {
  const uint32_t mw_index = mr_token_index(mw_token);
  const uint32_t mr_index = mr_token_index(mr_token);
  if (mw_index >= capacity_ || mr_index >= capacity_ || mw_index == mr_index)
    return STATUS_ACCESS_VIOLATION;
  if (!mr_flags_valid(mr_flags) || length == 0 || address + length < address)
    return STATUS_INVALID_DEVICE_REQUEST;
  // The region as it is now (a later deregistration kills the window through `parent`).
  uint32_t mr_meta = 0;
  MrView mr;
  const bool mr_valid = snapshot(mr_index, &mr_meta, &mr);
  if (!mr_valid || meta_gen(mr_meta) != mr_token_generation(mr_token) ||
      meta_state(mr_meta) == kPrivileged || mr.pd != pd) {
    return STATUS_ACCESS_VIOLATION;
  }
  const uint32_t want = effective_access(mr_flags) & kRemoteBits;
  if ((mr.access & want) != want || address < mr.base || length > mr.length ||
      address - mr.base > mr.length - length) {
    return STATUS_ACCESS_VIOLATION;
  }
  Entry* e = lock_entry(mw_index);
  const uint32_t meta = e->meta.load(std::memory_order_relaxed);
  NTSTATUS status = STATUS_SUCCESS;
  if (meta_gen(meta) != mr_token_generation(mw_token) || meta_state(meta) == kFree) {
    status = STATUS_ACCESS_VIOLATION;
  } else if (meta_state(meta) != kMwInvalid && meta_state(meta) != kMwValid) {
    status = STATUS_INVALID_DEVICE_REQUEST;
  } else if (e->pd.load(std::memory_order_relaxed) != pd) {
    status = STATUS_ACCESS_VIOLATION;
  } else {
    e->base.store(address, std::memory_order_relaxed);
    e->length.store(length, std::memory_order_relaxed);
    e->parent.store(mr_token, std::memory_order_relaxed);
    e->meta.store(pack(meta_gen(meta), kMwValid, want, true), std::memory_order_relaxed);
  }
  unlock_entry(e);
  return status;
}

NTSTATUS MemoryRegionTable::fast_register(uint32_t token, uint64_t address, uint64_t length,
                                          uint32_t mr_flags) {
  const uint32_t index = mr_token_index(token);
  if (index >= capacity_) return STATUS_ACCESS_VIOLATION;
  Entry* e = lock_entry(index);
  const uint32_t meta = e->meta.load(std::memory_order_relaxed);
  NTSTATUS status = STATUS_SUCCESS;
  if (meta_gen(meta) != mr_token_generation(token) || meta_state(meta) == kFree) {
    status = STATUS_ACCESS_VIOLATION;
  } else if (meta_state(meta) != kFrInvalid || !mr_flags_valid(mr_flags) ||
             length > uint64_t{e->frmr_pages.load(std::memory_order_relaxed)} * kFrmrPageSize ||
             address + length < address) {
    status = STATUS_INVALID_DEVICE_REQUEST;
  } else if ((effective_access(mr_flags) & kRemoteBits) != 0 && !meta_allow_remote(meta)) {
    status = STATUS_ACCESS_VIOLATION;
  }
  if (status == STATUS_SUCCESS) {
    e->base.store(address, std::memory_order_relaxed);
    e->length.store(length, std::memory_order_relaxed);
    e->meta.store(
        pack(meta_gen(meta), kFrValid, effective_access(mr_flags), meta_allow_remote(meta)),
        std::memory_order_relaxed);
  }
  unlock_entry(e);
  return status;
}

NTSTATUS MemoryRegionTable::invalidate(uint32_t token) {
  const uint32_t index = mr_token_index(token);
  if (index >= capacity_) return STATUS_ACCESS_VIOLATION;
  Entry* e = lock_entry(index);
  const uint32_t meta = e->meta.load(std::memory_order_relaxed);
  NTSTATUS status = STATUS_SUCCESS;
  if (meta_gen(meta) != mr_token_generation(token) || meta_state(meta) == kFree) {
    status = STATUS_ACCESS_VIOLATION;
  } else if (meta_state(meta) == kValid || meta_state(meta) == kPrivileged) {
    status = STATUS_INVALID_DEVICE_REQUEST;
  } else if (meta_state(meta) == kMwValid || meta_state(meta) == kMwInvalid) {
    e->meta.store(pack(meta_gen(meta), kMwInvalid, 0, true), std::memory_order_relaxed);
  } else {
    e->meta.store(pack(meta_gen(meta), kFrInvalid, 0, meta_allow_remote(meta)),
                  std::memory_order_relaxed);
  }
  unlock_entry(e);
  return status;
}

// ---- read path ----

NTSTATUS MemoryRegionTable::check_slow(uint32_t token, uint32_t pd, uint64_t address,
                                       uint64_t length, uint32_t access, MrFault* fault) const {
  // The full path: reached when the inline fast path (check_fast) failed; names the fault.
  const uint32_t index = mr_token_index(token);
  MrFault f = MrFault::kNone;
  uint32_t meta = 0;
  MrView v;
  if (index >= capacity_) {
    f = MrFault::kBadIndex;
  } else {
    const bool valid = snapshot(index, &meta, &v);
    if (meta_gen(meta) != mr_token_generation(token)) {
      f = MrFault::kStaleToken;
    } else if (!valid) {
      f = MrFault::kNotValid;
    } else if (v.pd != pd) {
      f = MrFault::kPdMismatch;
    } else if ((v.access & access) != access) {
      f = MrFault::kAccess;
    } else if (address < v.base || length > v.length || address - v.base > v.length - length) {
      f = MrFault::kBounds;
    } else if (meta_state(meta) == kMwValid) {
      // A window lends its region's memory: remote access only, and only while the region
      // it is bound to is still the same live region, and still holds these bytes with these
      // rights. A fast-registered region keeps its token when it is invalidated and registered
      // again, perhaps over other memory: the window must not reach the memory it covered
      // before (the bind's own checks, made again against the region as it is now).
      const uint32_t parent = v.parent;
      uint32_t pmeta = 0;
      MrView pv;
      const uint32_t pindex = mr_token_index(parent);
      if ((access & kRemoteBits) == 0) {
        f = MrFault::kAccess;
      } else if (pindex >= capacity_ || !snapshot(pindex, &pmeta, &pv) ||
                 meta_gen(pmeta) != mr_token_generation(parent) || (pv.access & access) != access ||
                 address < pv.base || length > pv.length ||
                 address - pv.base > pv.length - length) {
        f = MrFault::kNotValid;
      }
    }
  }
  if (fault != nullptr) *fault = f;
  return f == MrFault::kNone ? STATUS_SUCCESS : STATUS_ACCESS_VIOLATION;
}

bool MemoryRegionTable::view(uint32_t token, MrView* out) const {
  const uint32_t index = mr_token_index(token);
  if (index >= capacity_) return false;
  uint32_t meta = 0;
  const bool valid = snapshot(index, &meta, out);
  return valid && meta_gen(meta) == mr_token_generation(token);
}

}  // namespace rocedp::rc
