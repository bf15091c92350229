#pragma once
// The two carriers of perftest's exchange (apps/perf/perftest_exchange.hpp): perftest's TCP
// socket (port 18515), and with -R the rdma_cm control connection's QP. Both keep the inline
// polling core running while they wait, so the peer's RDMA traffic is answered meanwhile, and
// stop at the run's deadline.

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "apps/perf/perftest_exchange.hpp"
#include "rocedp/adapter.hpp"
#include "rocedp/runtime.hpp"

namespace rocedp::perf {

class TcpChannel : public PerftestChannel {
 public:
  explicit TcpChannel(AdapterRuntime& rt) : rt_(rt) {}
  ~TcpChannel() override;
  bool listen_and_accept(uint16_t port, std::string* err);
  /// Retries (every 100 ms, until the deadline) while nobody listens yet.
  bool connect_to(const std::string& host, uint16_t port, std::string* err);
  bool write(const void* data, size_t len, std::string* err) override;
  bool read(void* data, size_t len, std::string* err) override;

 private:
  static bool fail(std::string* err, const std::string& why);
  AdapterRuntime& rt_;
  int fd_ = -1;
};

/// perftest's rdma_cm control QP: one SEND at a time (perftest waits for each SEND's
/// completion), receives of kSlot bytes always posted.
class QpChannel : public PerftestChannel {
 public:
  static constexpr uint32_t kSlot = 64, kRecvSlots = 4;
  explicit QpChannel(AdapterRuntime& rt) : rt_(rt), buf_((1 + kRecvSlots) * kSlot, 0) {}
  /// The buffer to register (slot 0 sends, slots 1.. receive).
  std::vector<uint8_t>& buffer() { return buf_; }
  void attach(Qp* qp, Cq* cq, Mr* mr);
  bool post_receives();
  bool write(const void* data, size_t len, std::string* err) override;
  bool read(void* data, size_t len, std::string* err) override;

 private:
  NTSTATUS post_recv(uint32_t slot);
  bool drain(std::string* err);
  AdapterRuntime& rt_;
  std::vector<uint8_t> buf_;
  Qp* qp_ = nullptr;
  Cq* cq_ = nullptr;
  Mr* mr_ = nullptr;
  bool sent_done_ = false;
  uint32_t spins_ = 0;
  std::deque<std::pair<uint32_t, uint32_t>> arrived_;  // receive slot, bytes
};

}  // namespace rocedp::perf
