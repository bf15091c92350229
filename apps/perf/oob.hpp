#pragma once
// The out-of-band exchange of --server/--client: length-prefixed messages over one TCP connection
// on loopback, as perftest's port 18515 (QPN, PSN, MAC, IP, MR address and token per QP). The
// client sends HELLO (the test); both send INFO; then per message size SIZE -> SIZE_READY ->
// the run -> DONE -> REPORT; BYE (or FAIL) ends the test, and DETACHED both ways ends the link
// (apps/perf/native_mode.cpp). Messages are host byte order: both ends are on this machine.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "apps/perf/options.hpp"

namespace rocedp::perf {

enum MsgType : uint32_t {
  kHello = 1,
  kInfo,
  kReady,
  kSize,
  kSizeReady,
  kDone,
  kReport,
  kBye,
  kFail,
  kDetached
};

constexpr uint32_t kMagic = 0x52445046;  // "RDPF"

struct Hello {
  uint32_t magic = kMagic;
  uint32_t op = 0, kind = 0, raw = 0, verify = 0, qps = 1, tx_depth = 128, duration_s = 0;
  uint32_t cq_mod = 100, reserved = 0;
  uint64_t size = 0, iters = 0;
};
Hello hello_of(const Test& t);
Test test_of(const Hello& h);

struct QpInfo {  // per QP, as perftest exchanges it
  uint32_t qpn = 0, psn = 0, ip = 0, rkey = 0;
  uint8_t mac[6] = {};
  uint16_t mtu = 0;
  uint64_t addr = 0, len = 0;
  uint8_t ip6[16] = {};  ///< the port's IPv6 address (--ip6), when has_ip6
  uint8_t has_ip6 = 0;
};

struct SizeMsg {
  uint64_t size = 0, iters = 0;
};
struct DoneMsg {
  uint64_t messages = 0, frames = 0;
};
struct ReportMsg {
  uint64_t received = 0;   // messages (RDMA) or frames (raw) the server saw
  uint64_t bad_bytes = 0;  // --verify mismatches on the server side
  uint64_t span_ns = 0;    // raw bw: first to last frame received
  double peak_per_s = 0;   // raw bw: peak frame rate over 10 ms windows
  uint64_t errors = 0;     // completions with an error status
};

/// What a wait for the peer does between its checks (keep_polling: the peer's traffic must be
/// answered meanwhile). Null: nap.
using IdleFn = std::function<void()>;

class Oob {
 public:
  ~Oob();
  bool listen_and_accept(uint16_t port, int timeout_ms, std::string* err);
  bool connect_to(const std::string& host, uint16_t port, int timeout_ms, std::string* err);
  /// Sends one message (loops over partial writes; the peer is always reading when we send).
  bool send(uint32_t type, const void* data, size_t len);
  template <typename T>
  bool send(uint32_t type, const T& v) {
    return send(type, &v, sizeof(v));
  }
  bool send_fail(const std::string& why) { return send(kFail, why.data(), why.size()); }
  /// Non-blocking: true and the message when a whole one arrived.
  bool try_recv(uint32_t* type, std::vector<uint8_t>* payload);
  bool peer_closed() const { return closed_; }

  /// Waits for one message of `want` type (bounded by the run's deadline). A FAIL from the peer,
  /// another type, a closed exchange or the deadline: false with *err set.
  bool recv(uint32_t want, std::vector<uint8_t>* payload, const IdleFn& idle, std::string* err);
  template <typename T>
  bool recv_struct(uint32_t want, T* out, const IdleFn& idle, std::string* err) {
    std::vector<uint8_t> p;
    if (!recv(want, &p, idle, err)) return false;
    if (p.size() != sizeof(T)) {
      *err = "bad message size";
      return false;
    }
    std::memcpy(out, p.data(), sizeof(T));
    return true;
  }
  bool send_infos(const std::vector<QpInfo>& v);
  bool recv_infos(std::vector<QpInfo>* out, const IdleFn& idle, std::string* err);

 private:
  static bool fail(std::string* err, const std::string& why);
  int fd_ = -1;
  bool closed_ = false;
  std::vector<uint8_t> buf_;
};

}  // namespace rocedp::perf
