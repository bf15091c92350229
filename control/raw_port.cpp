// control/raw_port.hpp: a ports-only Runtime and the frame moves of rocedp-perf --raw.

#include "control/raw_port.hpp"

#include <rte_mbuf.h>
#include <rte_pause.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "control/runtime.hpp"
#include "pmd/packet_pool.hpp"
#include "pmd/port.hpp"

namespace rocedp::control {

RawPort::RawPort(std::unique_ptr<Runtime> runtime) : runtime_(std::move(runtime)) {}
RawPort::~RawPort() {
  stop();
}

std::unique_ptr<RawPort> RawPort::open(const config::Config& cfg, const std::string& program,
                                       std::string* error) {
  RuntimeOptions o;
  o.program = program;
  o.launch_cores = false;
  o.telemetry = false;
  o.ports_only = true;
  auto rt = Runtime::start(cfg, o, error);
  if (!rt) return nullptr;
  return std::unique_ptr<RawPort>(new RawPort(std::move(rt)));
}

PortInfo RawPort::port() const {
  return port_info(*runtime_);
}

bool RawPort::link_up() const {
  return runtime_->port(0).link().up;
}

bool RawPort::wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  return runtime_->wait_until(pred, timeout);
}

unsigned RawPort::send(const uint8_t* header, size_t header_len, const uint16_t* lengths,
                       unsigned n) {
  rte_mbuf* m[kBurst];
  n = std::min(n, kBurst);
  if (n == 0) return 0;
  if (rte_pktmbuf_alloc_bulk(runtime_->pool().get(), m, n) != 0) {
    ++no_buffer_;
    return 0;
  }
  for (unsigned k = 0; k < n; ++k) {
    m[k]->data_len = lengths[k];
    m[k]->pkt_len = lengths[k];
    std::memcpy(rte_pktmbuf_mtod(m[k], uint8_t*), header, std::min<size_t>(header_len, lengths[k]));
  }
  const uint16_t taken = runtime_->port(0).tx_burst(0, m, static_cast<uint16_t>(n));
  if (taken == 0) ++tx_full_;
  if (taken < n) rte_pktmbuf_free_bulk(m + taken, n - taken);
  return taken;
}

unsigned RawPort::receive(FrameFn fn, void* ctx, bool bounce) {
  rte_mbuf* m[kBurst];
  pmd::Port& port = runtime_->port(0);
  const uint16_t n = port.rx_burst(0, m, kBurst);
  if (n == 0) return 0;
  if (fn != nullptr)
    for (uint16_t k = 0; k < n; ++k)
      fn(ctx, rte_pktmbuf_mtod(m[k], const uint8_t*), rte_pktmbuf_data_len(m[k]));
  uint16_t sent = 0;
  if (bounce) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (sent < n) {
      const uint16_t k = port.tx_burst(0, m + sent, static_cast<uint16_t>(n - sent));
      sent += k;
      if (k != 0) continue;
      ++tx_full_;
      if (std::chrono::steady_clock::now() > give_up) break;
      backoff();
    }
  }
  if (sent < n) rte_pktmbuf_free_bulk(m + sent, n - sent);
  return n;
}

void RawPort::backoff() const {
  for (int i = 0; i < 256; ++i) rte_pause();
}

bool RawPort::stop() {
  return runtime_->stop();
}

}  // namespace rocedp::control
