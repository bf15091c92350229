#include "dataplane/core_channel.hpp"

#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdio>

#include "pmd/control_wake.hpp"

namespace rocedp::dataplane {
namespace {

// Bursts in which rings are drained; a request batch is further capped by the caller's `max`.
constexpr unsigned kBatch = 32;

// Ring names are global to the EAL instance; tests create many channels, so number them.
std::atomic<uint32_t> g_channel_serial{0};

}  // namespace

std::unique_ptr<CoreChannel> CoreChannel::create(uint16_t core_index, uint32_t capacity,
                                                 std::string* error) {
  if (capacity == 0) {
    if (error) *error = "core channel capacity must be > 0";
    return nullptr;
  }
  const uint32_t serial = g_channel_serial.fetch_add(1);
  char req_name[RTE_RING_NAMESIZE];
  char cpl_name[RTE_RING_NAMESIZE];
  std::snprintf(req_name, sizeof req_name, "rdp_req_%u_%u", core_index, serial);
  std::snprintf(cpl_name, sizeof cpl_name, "rdp_cpl_%u_%u", core_index, serial);
  // RING_F_EXACT_SZ: the rings hold exactly `capacity` entries, so the completion ring can take
  // back every message of the freelist and the core's enqueue never fails.
  const unsigned flags = RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ;
  rte_ring* req = rte_ring_create(req_name, capacity, SOCKET_ID_ANY, flags);
  if (req == nullptr) {
    if (error)
      *error = std::string("rte_ring_create(") + req_name + "): " + rte_strerror(rte_errno);
    return nullptr;
  }
  rte_ring* cpl = rte_ring_create(cpl_name, capacity, SOCKET_ID_ANY, flags);
  if (cpl == nullptr) {
    if (error)
      *error = std::string("rte_ring_create(") + cpl_name + "): " + rte_strerror(rte_errno);
    rte_ring_free(req);
    return nullptr;
  }
  return std::unique_ptr<CoreChannel>(new CoreChannel(core_index, capacity, req, cpl));
}

CoreChannel::CoreChannel(uint16_t core_index, uint32_t capacity, rte_ring* requests,
                         rte_ring* completions)
    : core_index_(core_index),
      capacity_(capacity),
      requests_(requests),
      completions_(completions),
      messages_(capacity) {
  free_.reserve(capacity);
  for (uint32_t i = capacity; i > 0; --i) free_.push_back(&messages_[i - 1]);
}

CoreChannel::~CoreChannel() {
  rte_ring_free(requests_);
  rte_ring_free(completions_);
}

CoreMessage* CoreChannel::alloc() {
  if (free_.empty()) return nullptr;
  CoreMessage* msg = free_.back();
  free_.pop_back();
  *msg = CoreMessage{};
  return msg;
}

void CoreChannel::free(CoreMessage* msg) {
  free_.push_back(msg);
}

bool CoreChannel::post(CoreMessage* msg) {
  return rte_ring_sp_enqueue(requests_, msg) == 0;
}

unsigned CoreChannel::poll_completions(unsigned max) {
  unsigned handled = 0;
  void* batch[kBatch];
  while (handled < max) {
    const unsigned want = std::min(kBatch, max - handled);
    const unsigned n = rte_ring_sc_dequeue_burst(completions_, batch, want, nullptr);
    for (unsigned i = 0; i < n; ++i) {
      auto* msg = static_cast<CoreMessage*>(batch[i]);
      if (msg->done != nullptr) msg->done(*msg);
      free(msg);
    }
    handled += n;
    if (n < want) break;
  }
  return handled;
}

unsigned CoreChannel::process_requests_st(void* core, unsigned max) {
  unsigned handled = 0;
  void* batch[kBatch];
  while (handled < max) {
    const unsigned want = std::min(kBatch, max - handled);
    const unsigned n = rte_ring_sc_dequeue_burst(requests_, batch, want, nullptr);
    for (unsigned i = 0; i < n; ++i) {
      auto* msg = static_cast<CoreMessage*>(batch[i]);
      msg->run_st(core);
    }
    if (n > 0) {
      // Cannot fail: the completion ring has room for every message control owns.
      [[maybe_unused]] const unsigned back =
          rte_ring_sp_enqueue_burst(completions_, batch, n, nullptr);
      assert(back == n);
    }
    handled += n;
    if (n < want) break;
  }
  // Once per batch of answers, never per packet: control may be napping until it gets them.
  if (handled > 0)
    if (pmd::ControlWake* w = wake_.load(std::memory_order_acquire)) w->wake();
  return handled;
}

}  // namespace rocedp::dataplane
