#include "pmd/memif_hello.hpp"

#include <dlfcn.h>
#include <rte_interrupts.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace {

using SendmsgFn = ssize_t (*)(int, const msghdr*, int);

std::atomic<uint64_t> g_absorbed{0};

SendmsgFn libc_sendmsg() {
  static const SendmsgFn fn = reinterpret_cast<SendmsgFn>(dlsym(RTLD_NEXT, "sendmsg"));
  return fn;
}

ssize_t plain_sendmsg(int fd, const msghdr* msg, int flags) {
  if (SendmsgFn fn = libc_sendmsg(); fn != nullptr) return fn(fd, msg, flags);
  return syscall(SYS_sendmsg, fd, msg, flags);
}

// Diagnostic switch: ROCEDP_MEMIF_HELLO_GUARD=0 passes failures through, to reproduce the panic.
bool absorbing() {
  static const bool on = [] {
    const char* env = std::getenv("ROCEDP_MEMIF_HELLO_GUARD");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return on;
}

bool peer_gone(int err) {
  return err == EPIPE || err == ECONNRESET || err == ECONNREFUSED || err == ENOTCONN;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) ssize_t sendmsg(int fd, const msghdr* msg,
                                                                  int flags) {
  if (rte_thread_is_intr() == 0) return plain_sendmsg(fd, msg, flags);
  // memif sends without MSG_NOSIGNAL; a departed stream peer must not raise SIGPIPE here either.
  const ssize_t sent = plain_sendmsg(fd, msg, flags | MSG_NOSIGNAL);
  if (sent >= 0 || !peer_gone(errno) || !absorbing()) return sent;
  g_absorbed.fetch_add(1, std::memory_order_relaxed);
  size_t total = 0;
  for (size_t i = 0; i < msg->msg_iovlen; ++i) total += msg->msg_iov[i].iov_len;
  return static_cast<ssize_t>(total);
}

namespace rocedp::pmd {

bool memif_hello_guard_active() {
  return dlsym(RTLD_DEFAULT, "sendmsg") == reinterpret_cast<void*>(&::sendmsg);
}

uint64_t memif_hello_sends_absorbed() {
  return g_absorbed.load(std::memory_order_relaxed);
}

}  // namespace rocedp::pmd
