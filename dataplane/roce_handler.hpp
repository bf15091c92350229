#pragma once
// The seam between a polling core and the RDMA objects it owns (dataplane/core_rdma.hpp):
// the core hands every RoCEv2 frame it owns (already parsed, ICRC verified) to the handler and
// gives the handler one turn per poll loop (timers, transmit, completions).
//
// Both methods run only on the owning lcore, never allocate, lock or make a system call.
// The handler is installed and removed through the core's own request ring, so the core never
// sees it change under its feet.

#include <cstdint>

namespace rocedp::wire {
struct ParsedPacket;
}

namespace rocedp::dataplane {

class RoceHandler {
 public:
  virtual ~RoceHandler() = default;
  /// One RoCEv2 frame whose destination QPN this core owns. The frame's bytes are only valid
  /// during the call (the core frees the mbuf afterwards).
  virtual void rx_lc(const wire::ParsedPacket& pkt) = 0;
  /// Once per poll loop, after RX and control requests and before the TX flush. True if it did
  /// any work (busy/idle accounting, CONVENTIONS.md item 1).
  virtual bool poll_lc() = 0;
};

}  // namespace rocedp::dataplane
