#pragma once
// Test hooks into an adapter: fault injection and observation points that tests use and
// consumers never see (they are not in include/rocedp/).

#include <cstddef>
#include <cstdint>

#include "rocedp/adapter.hpp"

namespace rocedp {
namespace dataplane {
class CoreRdma;
}

/// Where new CQ rings come from (provokes STATUS_INSUFFICIENT_RESOURCES).
struct CqRingAllocatorHook {
  void* (*allocate)(size_t bytes, void* context) = nullptr;
  void (*release)(void* memory, size_t bytes, void* context) = nullptr;
  void* context = nullptr;
};

namespace test_hooks {
/// For CQs created from now on (null functions: the default allocator). Control thread.
void set_cq_ring_allocator(Adapter& adapter, const CqRingAllocatorHook& hook);
/// Every frame the adapter's RC engines transmit, on the transmitting core. Set before any
/// traffic (takes effect through the cores' rings).
void set_tx_tap(Adapter& adapter, void (*tap)(void* context, const uint8_t* frame, size_t len),
                void* context);
/// The RDMA state of polling core `core` (its RC engine and counters).
dataplane::CoreRdma& core_rdma(Adapter& adapter, uint32_t core);
}  // namespace test_hooks

}  // namespace rocedp
