#pragma once
// --raw: the wire's ceiling. The same number of frames of the same sizes as the RDMA run, over
// the same port set-up, with no RDMA processing at all (client -> server for bw, bounced back
// for lat). It cannot go through the NDK API, so this is the one part of rocedp-perf that uses
// an internal header: control/raw_port.hpp, included by raw.cpp alone.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "apps/perf/oob.hpp"
#include "apps/perf/options.hpp"
#include "apps/perf/report.hpp"
#include "rocedp/config.hpp"
#include "rocedp/runtime.hpp"

namespace rocedp::control {
class RawPort;
}

namespace rocedp::perf {

/// A raw endpoint: EAL, pool and the started port; no polling core, no adapter. Its methods
/// mirror the AdapterRuntime calls the out-of-band driver makes.
class RawBaseline {
 public:
  static std::unique_ptr<RawBaseline> open(const config::Config& cfg, std::string* err);
  ~RawBaseline();

  PortInfo port() const;
  bool link_up() const;
  bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout);
  bool detach_ports() { return true; }  // nobody but the caller polls the port
  bool stop();

  /// The client's side of one size: sends the frames (bw: within a credit window; lat: one
  /// message's frames, then waits for them to come back), DONE, then the server's REPORT.
  Row client(const Test& t, const QpInfo& peer, uint64_t size, uint64_t iters, Oob& oob,
             ReportMsg* rep, std::string* err);
  /// --reflector: one size of a latency test against a frame reflector at peer.mac that returns
  /// every frame (dpdk-testpmd macswap): the client's bounce without the out-of-band peer.
  Row reflected(const Test& t, const QpInfo& peer, uint64_t size, uint64_t iters);
  /// The server's side of one size: counts (bw, returning credits) or bounces (lat) frames until
  /// the client's DONE.
  ReportMsg server_size(const Test& t, const QpInfo& peer, uint64_t size, Oob& oob);

 private:
  explicit RawBaseline(std::unique_ptr<control::RawPort> port);
  std::unique_ptr<control::RawPort> port_;
};

}  // namespace rocedp::perf
