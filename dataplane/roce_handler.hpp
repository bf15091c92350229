#pragma once
// The seam between a polling core and the RDMA objects it owns (dataplane/core_rdma.hpp):
// the core hands the RoCEv2 frames of each RX burst whose QPNs it owns to the handler in one
// call (the engine parses, checks and executes them, dataplane/rc/rc_engine.hpp) and gives the
// handler one turn per poll loop (timers, transmit, completions).
//
// Both methods run only on the owning lcore, never allocate, lock or make a system call.
// The handler is installed and removed through the core's own request ring, so the core never
// sees it change under its feet.

#include <cstdint>
#include <span>

#include "dataplane/wire/bytes.hpp"

namespace rocedp::dataplane {

class RoceHandler {
 public:
  virtual ~RoceHandler() = default;
  /// The RoCEv2 frames of one RX burst whose destination QPNs this core owns, unparsed. Their
  /// bytes are only valid during the call (the core frees the mbufs afterwards). Each frame
  /// lands in exactly one counter: accepted, a wire drop reason (the core's drop table) or an
  /// engine drop reason. Returns the frames accepted. `tsc`: the TSC the core read when this
  /// poll began (one read per poll, for every call of it).
  virtual uint32_t rx_burst_st(std::span<const wire::Bytes> frames, uint64_t tsc) = 0;
  /// Once per poll loop, after RX and control requests and before the TX flush, with the same
  /// `tsc`. True if it did any work (busy/idle accounting, CONVENTIONS.md item 1).
  virtual bool poll_st(uint64_t tsc) = 0;
};

}  // namespace rocedp::dataplane
