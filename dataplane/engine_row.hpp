#pragma once
// One polling core's RC engine counters as telemetry shows them (/rocedp/rdma): copied on the
// owning core by the QpTableRead request that also reads its QPs (dataplane/core_channel.hpp),
// then read on the control thread.

#include <array>
#include <cstdint>
#include <string>

#include "dataplane/rc/queue_pair.hpp"

namespace rocedp::dataplane {

/// The engine of one core, since it was created.
struct EngineRow {
  uint32_t core = 0;
  std::array<uint64_t, rc::kRcCounterCount> counters{};  // named by rc::kRcCounterNames
  uint64_t tx_no_mbuf = 0;  // frames not built: the packet pool had no mbuf (resent later)
  uint64_t tx_no_room = 0;  // frames held back: the core's TX buffer was full or had no queue
  std::string port;  // the port of its adapter (config ports[].name), set by the control thread
};

}  // namespace rocedp::dataplane
