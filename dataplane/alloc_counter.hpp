#pragma once
// Debug allocation counter: proves that the per-packet path allocates nothing.
// A test or benchmark binary puts ROCEDP_DEFINE_ALLOC_COUNTER() in exactly one of its .cpp files;
// that replaces the global operator new/delete with versions that count every allocation
// (relaxed atomic increment, then malloc). Code then reads alloc_count() before and after a
// traffic run: the difference is the number of heap allocations anything in the process made.
// Never linked into the libraries or the daemon.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace rocedp::debug {

inline std::atomic<uint64_t>& alloc_counter() {
  static std::atomic<uint64_t> counter{0};
  return counter;
}
/// Allocations (operator new of any form) since the process started.
inline uint64_t alloc_count() {
  return alloc_counter().load(std::memory_order_relaxed);
}

/// Optional hook called on every allocation (e.g. to print a backtrace while hunting one down).
inline std::atomic<void (*)(std::size_t)>& alloc_hook() {
  static std::atomic<void (*)(std::size_t)> hook{nullptr};
  return hook;
}

inline void* counted_alloc(std::size_t size, std::size_t align) {
  alloc_counter().fetch_add(1, std::memory_order_relaxed);
  if (auto* h = alloc_hook().load(std::memory_order_relaxed)) h(size);
  if (size == 0) size = 1;
  void* p = align <= alignof(std::max_align_t)
                ? std::malloc(size)
                : std::aligned_alloc(align, (size + align - 1) / align * align);
  return p;
}

/// Out of line so the compiler does not pair the replaced new with free() and warn.
[[gnu::noinline]] inline void counted_free(void* p) noexcept {
  std::free(p);
}

}  // namespace rocedp::debug

// NOLINTBEGIN: replacement functions must have these exact signatures.
#define ROCEDP_DEFINE_ALLOC_COUNTER()                                                       \
  void* operator new(std::size_t n) {                                                       \
    void* p = rocedp::debug::counted_alloc(n, 0);                                           \
    if (p == nullptr) throw std::bad_alloc();                                               \
    return p;                                                                               \
  }                                                                                         \
  void* operator new[](std::size_t n) {                                                     \
    return operator new(n);                                                                 \
  }                                                                                         \
  void* operator new(std::size_t n, const std::nothrow_t&) noexcept {                       \
    return rocedp::debug::counted_alloc(n, 0);                                              \
  }                                                                                         \
  void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {                     \
    return rocedp::debug::counted_alloc(n, 0);                                              \
  }                                                                                         \
  void* operator new(std::size_t n, std::align_val_t a) {                                   \
    void* p = rocedp::debug::counted_alloc(n, static_cast<std::size_t>(a));                 \
    if (p == nullptr) throw std::bad_alloc();                                               \
    return p;                                                                               \
  }                                                                                         \
  void* operator new[](std::size_t n, std::align_val_t a) {                                 \
    return operator new(n, a);                                                              \
  }                                                                                         \
  void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {   \
    return rocedp::debug::counted_alloc(n, static_cast<std::size_t>(a));                    \
  }                                                                                         \
  void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { \
    return rocedp::debug::counted_alloc(n, static_cast<std::size_t>(a));                    \
  }                                                                                         \
  void operator delete(void* p) noexcept {                                                  \
    rocedp::debug::counted_free(p);                                                         \
  }                                                                                         \
  void operator delete[](void* p) noexcept {                                                \
    rocedp::debug::counted_free(p);                                                         \
  }                                                                                         \
  void operator delete(void* p, std::size_t) noexcept {                                     \
    rocedp::debug::counted_free(p);                                                         \
  }                                                                                         \
  void operator delete[](void* p, std::size_t) noexcept {                                   \
    rocedp::debug::counted_free(p);                                                         \
  }                                                                                         \
  void operator delete(void* p, std::align_val_t) noexcept {                                \
    rocedp::debug::counted_free(p);                                                         \
  }                                                                                         \
  void operator delete[](void* p, std::align_val_t) noexcept {                              \
    rocedp::debug::counted_free(p);                                                         \
  }                                                                                         \
  void operator delete(void* p, std::size_t, std::align_val_t) noexcept {                   \
    rocedp::debug::counted_free(p);                                                         \
  }                                                                                         \
  void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {                 \
    rocedp::debug::counted_free(p);                                                         \
  }
// NOLINTEND
