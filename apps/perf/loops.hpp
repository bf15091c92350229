#pragma once
// The measured RDMA loops, on the thread that drives the inline polling core (every loop polls
// it between posts, so the engine and the benchmark share one CPU, as an SPDK reactor would):
//   * bandwidth: up to tx_depth requests in flight per QP, round robin over the QPs;
//   * latency: one request in flight; a round trip per iteration (ping-pong for WRITE and SEND,
//     one READ at a time);
//   * the native server's side of both (apps/perf/native_mode.cpp);
//   * against rocedpd's echo service: SENDs that come back (apps/perf/cm_mode.cpp).
// With --verify every message has its own slot (apps/perf/verify.hpp) and is checked.

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "apps/perf/endpoint.hpp"
#include "apps/perf/oob.hpp"
#include "apps/perf/options.hpp"
#include "apps/perf/report.hpp"

namespace rocedp::perf {

/// One RDMA run's state.
struct Run {
  AdapterRuntime* rt = nullptr;
  Endpoint ep;
  Test test;
  std::vector<QpInfo> mine, peer;  ///< per QP; the peer's region address and token
  Oob* oob = nullptr;              ///< the native server learns from it that the client is done
  bool passive = false;   ///< --connect to a memory service: nobody writes back (WRITE latency)
  uint64_t recv_len = 0;  ///< SEND latency: receive length (0: the message size)
  uint32_t recv_delay_ms = 0;  ///< SEND latency: post each reply's receive this much later
  /// CM client: non-zero once a peer ended its connection (its DisconnectEvent). What the run
  /// still waits for may never come then: the loops stop, after a grace for what is in flight.
  const std::atomic<int>* peer_gone = nullptr;
  uint64_t peer_gone_seen = 0;  ///< clock::now() when a loop first saw it (0: not yet)
};

/// A peak-rate meter over 10 ms windows (perftest's "BW peak").
struct PeakMeter {
  uint64_t window_start = 0, window_count = 0, window_ticks = 0;
  double peak = 0;
  void start(uint64_t now);
  void add(uint64_t n, uint64_t now);
};

/// Frames per message and their sizes, as the RC requester cuts them (IBTA 9.7.2: every packet
/// but the last carries exactly path-MTU payload).
std::vector<uint16_t> frame_sizes(Op op, uint64_t size, uint32_t path_mtu);

/// Messages per QP of one size's bandwidth run: -n, but with -a at most 1 GiB moved per size
/// (perftest has no such cap).
uint64_t iters_for(const Test& t, uint64_t size);

Row client_bw(Run& run, uint64_t size, uint64_t iters);
Row client_lat(Run& run, uint64_t size, uint64_t iters);
/// The native server's side of one size: passive for WRITE/READ bandwidth (the core answers),
/// keeping receives posted for SEND, echoing the latency ping-pongs. Ends at the client's DONE.
ReportMsg server_size(Run& run, uint64_t size, uint64_t iters);

/// SEND bandwidth against a target that echoes every SEND: state that lives across sizes (-a).
/// The k-th receive completion of a QP holds the echo of its k-th SEND (RC delivers in order and
/// the echo answers in arrival order).
struct EchoState {
  std::vector<uint64_t> sent, send_done, echoed;
  uint64_t max_size = 0, window = 0, recv_base = 0;
};
Row send_bw_echo(Run& run, EchoState& es, uint64_t size, uint64_t iters);

/// Moves [local_off, local_off + len) of our buffer to (WRITE) or from (READ) the peer's region
/// at remote_off over QP 0, in 64 KiB requests, and waits for every completion: --verify's
/// pre-fill and read-back around the timed runs against a region.
bool transfer(Run& run, Op op, uint64_t local_off, uint64_t remote_off, uint64_t len,
              std::string* err);

}  // namespace rocedp::perf
