#include "pmd/control_wake.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>

namespace rocedp::pmd {

ControlWake::~ControlWake() {
  if (fd_ >= 0) ::close(fd_);
}

bool ControlWake::open(std::string* error) {
  if (fd_ >= 0) return true;
  // Non-blocking: the drain after a nap must never block, and neither may a waker.
  fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd_ < 0) {
    if (error)
      *error = std::string("cannot create the control thread's eventfd: ") + std::strerror(errno);
    return false;
  }
  return true;
}

bool ControlWake::nap(std::chrono::microseconds timeout) {
  assert(fd_ >= 0 && "open() first");
  pollfd p{fd_, POLLIN, 0};
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  const timespec ts{static_cast<time_t>(s.count()),
                    static_cast<long>((timeout - s).count() * 1000)};
  naps_.store(naps_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  const bool woken = ::ppoll(&p, 1, &ts, nullptr) > 0 && (p.revents & POLLIN) != 0;
  napping_.store(false, std::memory_order_relaxed);
  if (woken) {
    woken_.store(woken_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    uint64_t count;
    // Resets the counter; a wake() after this read ends the next nap at once, which is harmless.
    [[maybe_unused]] const ssize_t r = ::read(fd_, &count, sizeof count);
  }
  return woken;
}

void ControlWake::signal() {
  if (fd_ < 0) return;
  const uint64_t one = 1;
  // Cannot block (EFD_NONBLOCK) and cannot meaningfully fail: the counter is drained every nap.
  [[maybe_unused]] const ssize_t r = ::write(fd_, &one, sizeof one);
}

}  // namespace rocedp::pmd
