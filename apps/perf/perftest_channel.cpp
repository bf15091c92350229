#include "apps/perf/perftest_channel.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "apps/perf/clock.hpp"
#include "apps/perf/endpoint.hpp"
#include "apps/perf/tcp.hpp"

namespace rocedp::perf {

TcpChannel::~TcpChannel() {
  if (fd_ >= 0) close(fd_);
}

bool TcpChannel::listen_and_accept(uint16_t port, std::string* err) {
  const int ls = tcp::listen_on(INADDR_ANY, port);
  if (ls < 0) return fail(err, "bind/listen on TCP port " + std::to_string(port));
  for (;;) {
    pollfd p{ls, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) break;
    keep_polling(rt_);
    usleep(200);
    if (clock::deadline().passed()) {
      close(ls);
      return fail(err, "no client connected in time");
    }
  }
  fd_ = tcp::accept_one(ls);
  return fd_ >= 0 || fail(err, "accept");
}

bool TcpChannel::connect_to(const std::string& host, uint16_t port, std::string* err) {
  const auto to = tcp::address(host, port);
  if (!to) return fail(err, "bad host " + host);
  while (!clock::deadline().passed()) {
    fd_ = tcp::connect_once(*to);
    if (fd_ >= 0) return true;
    rt_.wait_until([] { return false; }, std::chrono::milliseconds(100));
  }
  return fail(err, "cannot connect to " + host + ":" + std::to_string(port));
}

bool TcpChannel::write(const void* data, size_t len, std::string* err) {
  return tcp::send_all(fd_, data, len) || fail(err, "TCP write");
}

bool TcpChannel::read(void* data, size_t len, std::string* err) {
  auto* b = static_cast<uint8_t*>(data);
  size_t got = 0;
  uint32_t spins = 0;
  while (got < len) {
    const ssize_t n = recv(fd_, b + got, len - got, MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return fail(err, "the peer closed the TCP exchange");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return fail(err, "TCP read");
    keep_polling(rt_);
    if ((++spins & 0xFF) == 0 && clock::deadline().passed())
      return fail(err, "time limit reached in the TCP exchange");
  }
  return true;
}

bool TcpChannel::fail(std::string* err, const std::string& why) {
  *err = why + (errno ? std::string(": ") + std::strerror(errno) : "");
  return false;
}

void QpChannel::attach(Qp* qp, Cq* cq, Mr* mr) {
  qp_ = qp;
  cq_ = cq;
  mr_ = mr;
}

bool QpChannel::post_receives() {
  for (uint32_t s = 1; s <= kRecvSlots; ++s)
    if (post_recv(s) != STATUS_SUCCESS) return false;
  return true;
}

bool QpChannel::write(const void* data, size_t len, std::string* err) {
  std::memcpy(buf_.data(), data, len);
  NdkSge sge{buf_.data(), static_cast<uint32_t>(len), mr_->get_local_token()};
  const NTSTATUS st = qp_->send(nullptr, &sge, 1, 0);
  if (st != STATUS_SUCCESS) {
    *err = "control SEND: " + std::string(status_name(st));
    return false;
  }
  sent_done_ = false;
  while (!sent_done_)
    if (!drain(err)) return false;
  return true;
}

bool QpChannel::read(void* data, size_t len, std::string* err) {
  while (arrived_.empty())
    if (!drain(err)) return false;
  const auto [slot, bytes] = arrived_.front();
  arrived_.pop_front();
  if (bytes != len) {
    *err = "control message of " + std::to_string(bytes) + " bytes, wanted " + std::to_string(len);
    return false;
  }
  std::memcpy(data, buf_.data() + slot * kSlot, len);
  if (post_recv(slot) == STATUS_SUCCESS) return true;
  *err = "control receive";
  return false;
}

NTSTATUS QpChannel::post_recv(uint32_t slot) {
  NdkSge sge{buf_.data() + slot * kSlot, kSlot, mr_->get_local_token()};
  return qp_->receive(reinterpret_cast<void*>(static_cast<uintptr_t>(slot)), &sge, 1);
}

bool QpChannel::drain(std::string* err) {
  keep_polling(rt_);
  NdkResultEx r[8];
  const uint32_t n = cq_->get_results_ex(r, 8);
  for (uint32_t k = 0; k < n; ++k) {
    if (r[k].status != STATUS_SUCCESS) {
      *err = "control QP completion " + std::string(status_name(r[k].status));
      return false;
    }
    if (r[k].type == NdkOperationType::kReceive)
      arrived_.emplace_back(
          static_cast<uint32_t>(reinterpret_cast<uintptr_t>(r[k].request_context)),
          r[k].bytes_transferred);
    else
      sent_done_ = true;
  }
  if (n == 0 && (++spins_ & 0xFF) == 0 && clock::deadline().passed()) {
    *err = "time limit reached in the rdma_cm exchange";
    return false;
  }
  return true;
}

}  // namespace rocedp::perf
