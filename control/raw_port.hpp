#pragma once
// rocedp-perf --raw's way to a port: the one internal header a program outside the library
// includes (README "rocedp-perf"). The raw baseline measures the wire under the same EAL, pool
// and port set-up as the RDMA runs but with no RDMA processing at all, so it cannot go through
// the NDK API. RawPort opens EAL, the packet pool and the started ports of a configuration (no
// polling core, no control thread, no adapter) and moves whole frames on queue 0 of the first
// port, from the thread that opened it. No DPDK type crosses this header.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "rocedp/config.hpp"
#include "rocedp/runtime.hpp"

namespace rocedp::control {

class Runtime;

class RawPort {
 public:
  static constexpr unsigned kBurst = 32;  ///< frames per send / receive call, at most
  /// Sees one received frame (its bytes are valid during the call only).
  using FrameFn = void (*)(void* ctx, const uint8_t* frame, uint16_t len);

  /// Brings up EAL, the pool and the ports of `cfg`. Null with *error set on failure.
  static std::unique_ptr<RawPort> open(const config::Config& cfg, const std::string& program,
                                       std::string* error);
  ~RawPort();  // stop()
  RawPort(const RawPort&) = delete;
  RawPort& operator=(const RawPort&) = delete;

  PortInfo port() const;
  bool link_up() const;
  /// Naps until pred() holds or `timeout` passed; returns pred().
  bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

  /// Queues min(n, kBurst) new frames on TX: frame i is lengths[i] bytes and starts with the
  /// `header_len` bytes of `header` (the rest is whatever the buffer held). Returns how many the
  /// TX queue took; the others are freed. 0 also when the pool is short (nothing sent).
  unsigned send(const uint8_t* header, size_t header_len, const uint16_t* lengths, unsigned n);
  /// Takes up to kBurst frames from RX and shows each to `fn` (when not null). Then frees them,
  /// or with `bounce` sends them back unchanged, retrying while the TX ring is full (frames it
  /// still refuses after a second are freed). Returns the number received.
  unsigned receive(FrameFn fn, void* ctx, bool bounce = false);
  /// A short pause (256 CPU pause instructions) for a sender whose TX ring was full: retrying at
  /// once would keep the ring's cache lines bouncing between the two ends and slow the receiver.
  void backoff() const;

  uint64_t no_buffer() const { return no_buffer_; }  ///< send() calls that found the pool short
  uint64_t tx_full() const { return tx_full_; }      ///< send()/bounce attempts TX took none of

  /// Stops and closes the ports and cleans up EAL. Idempotent; false if a step failed.
  bool stop();

 private:
  explicit RawPort(std::unique_ptr<Runtime> runtime);
  std::unique_ptr<Runtime> runtime_;
  uint64_t no_buffer_ = 0;
  uint64_t tx_full_ = 0;
};

}  // namespace rocedp::control
