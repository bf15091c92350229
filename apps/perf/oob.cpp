#include "apps/perf/oob.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "apps/perf/clock.hpp"
#include "apps/perf/tcp.hpp"

namespace rocedp::perf {

namespace {

// The test's fields from one form to the other: the same names, Hello's as fixed-width integers.
template <typename To, typename From>
To copy_test(const From& f) {
  To t;
  t.op = static_cast<decltype(t.op)>(f.op);
  t.kind = static_cast<decltype(t.kind)>(f.kind);
  t.raw = static_cast<decltype(t.raw)>(f.raw);
  t.verify = static_cast<decltype(t.verify)>(f.verify);
  t.qps = f.qps;
  t.tx_depth = f.tx_depth;
  t.duration_s = f.duration_s;
  t.cq_mod = f.cq_mod;
  t.size = f.size;
  t.iters = f.iters;
  return t;
}

}  // namespace

Hello hello_of(const Test& t) {
  return copy_test<Hello>(t);
}

Test test_of(const Hello& h) {
  return copy_test<Test>(h);
}

Oob::~Oob() {
  if (fd_ >= 0) close(fd_);
}

bool Oob::listen_and_accept(uint16_t port, int timeout_ms, std::string* err) {
  const int ls = tcp::listen_on(INADDR_LOOPBACK, port);
  if (ls < 0) return fail(err, "bind/listen 127.0.0.1:" + std::to_string(port));
  pollfd p{ls, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) {
    close(ls);
    return fail(err, "no client connected in time");
  }
  fd_ = tcp::accept_one(ls);
  return fd_ >= 0 || fail(err, "accept");
}

bool Oob::connect_to(const std::string& host, uint16_t port, int timeout_ms, std::string* err) {
  const auto to = tcp::address(host, port);
  if (!to) return fail(err, "bad host " + host);
  for (int waited = 0; waited < timeout_ms; waited += 50) {
    fd_ = tcp::connect_once(*to);
    if (fd_ >= 0) return true;
    usleep(50000);
  }
  return fail(err, "cannot connect to " + host + ":" + std::to_string(port));
}

bool Oob::send(uint32_t type, const void* data, size_t len) {
  uint32_t head[2] = {type, static_cast<uint32_t>(len)};
  return tcp::send_all(fd_, head, sizeof(head)) && (len == 0 || tcp::send_all(fd_, data, len));
}

bool Oob::try_recv(uint32_t* type, std::vector<uint8_t>* payload) {
  uint8_t tmp[65536];
  for (;;) {
    const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), MSG_DONTWAIT);
    if (n > 0) {
      buf_.insert(buf_.end(), tmp, tmp + n);
      continue;
    }
    if (n == 0) closed_ = true;
    break;
  }
  if (buf_.size() < 8) return false;
  uint32_t head[2];
  std::memcpy(head, buf_.data(), 8);
  if (buf_.size() < 8 + static_cast<size_t>(head[1])) return false;
  *type = head[0];
  payload->assign(buf_.begin() + 8, buf_.begin() + 8 + head[1]);
  buf_.erase(buf_.begin(), buf_.begin() + 8 + head[1]);
  return true;
}

bool Oob::recv(uint32_t want, std::vector<uint8_t>* payload, const IdleFn& idle, std::string* err) {
  uint32_t type = 0;
  for (;;) {
    if (try_recv(&type, payload)) {
      if (type == want) return true;
      if (type == kFail) {
        *err = "peer failed: " + std::string(payload->begin(), payload->end());
        return false;
      }
      *err =
          "unexpected message " + std::to_string(type) + " (wanted " + std::to_string(want) + ")";
      return false;
    }
    if (peer_closed()) {
      *err = "peer closed the exchange";
      return false;
    }
    if (clock::deadline().passed()) {
      *err = "time limit reached waiting for the peer";
      return false;
    }
    if (idle)
      idle();
    else
      usleep(20);
  }
}

bool Oob::send_infos(const std::vector<QpInfo>& v) {
  return send(kInfo, v.data(), v.size() * sizeof(QpInfo));
}

bool Oob::recv_infos(std::vector<QpInfo>* out, const IdleFn& idle, std::string* err) {
  std::vector<uint8_t> p;
  if (!recv(kInfo, &p, idle, err)) return false;
  if (p.size() % sizeof(QpInfo) != 0 || p.empty()) {
    *err = "bad QP info";
    return false;
  }
  out->resize(p.size() / sizeof(QpInfo));
  std::memcpy(out->data(), p.data(), p.size());
  return true;
}

bool Oob::fail(std::string* err, const std::string& why) {
  *err = "oob: " + why + (errno ? std::string(": ") + std::strerror(errno) : "");
  return false;
}

}  // namespace rocedp::perf
