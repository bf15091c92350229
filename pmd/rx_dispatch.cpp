#include "pmd/rx_dispatch.hpp"

#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <stdexcept>

#include "pmd/control_wake.hpp"

namespace rocedp::pmd {
namespace {

std::atomic<unsigned> g_instance{0};

void bump(std::atomic<uint64_t>& c, uint64_t n) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

}  // namespace

RxDispatch::RxDispatch(uint16_t n_cores, uint32_t ring_size)
    : n_cores_(n_cores),
      rings_(static_cast<size_t>(n_cores) * (n_cores + 1), nullptr),
      sources_(new SourceState[n_cores]),
      targets_(new TargetState[n_cores + 1]) {
  if (n_cores == 0) throw std::invalid_argument("RxDispatch: no polling core");
  const unsigned instance = g_instance.fetch_add(1);
  for (uint16_t s = 0; s < n_cores; ++s) {
    sources_[s].staging.assign(static_cast<size_t>(n_cores + 1) * kMaxBurst, nullptr);
    sources_[s].fill.assign(n_cores + 1, 0);
    for (uint16_t t = 0; t <= n_cores; ++t) {
      if (t == s) continue;
      char name[RTE_RING_NAMESIZE];
      std::snprintf(name, sizeof name, "rxd%u_%u_%u", instance, s, t);
      // SP: only lcore s enqueues; SC: only the owner of t dequeues. EXACT_SZ: ring_size usable.
      rte_ring* r = rte_ring_create(name, ring_size, static_cast<int>(rte_socket_id()),
                                    RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
      if (r == nullptr) {
        std::string why =
            std::string("RxDispatch: rte_ring_create ") + name + ": " + rte_strerror(rte_errno);
        for (rte_ring* x : rings_) rte_ring_free(x);
        throw std::runtime_error(why);
      }
      rings_[static_cast<size_t>(s) * (n_cores + 1) + t] = r;
    }
  }
}

RxDispatch::~RxDispatch() {
  for (rte_ring* r : rings_) {
    if (r == nullptr) continue;
    void* obj;
    while (rte_ring_dequeue(r, &obj) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(obj));
    rte_ring_free(r);
  }
}

uint16_t RxDispatch::dispatch(uint16_t source, rte_mbuf** pkts, uint16_t n, Classifier cls,
                              void* ctx, rte_mbuf** local) {
  SourceState& st = sources_[source];
  uint16_t n_local = 0;
  uint64_t classifier_drops = 0, full_drops = 0, forwarded = 0;
  bool to_control = false;
  for (uint16_t base = 0; base < n; base += kMaxBurst) {
    const uint16_t chunk = std::min<uint16_t>(kMaxBurst, n - base);
    for (uint16_t i = 0; i < chunk; ++i) {
      rte_mbuf* m = pkts[base + i];
      const uint16_t t = cls(ctx, m);
      if (t == source) {
        local[n_local++] = m;
      } else if (t > n_cores_) {  // kDrop, or an index that names no target
        rte_pktmbuf_free(m);
        ++classifier_drops;
      } else {
        st.staging[static_cast<size_t>(t) * kMaxBurst + st.fill[t]++] = m;
      }
    }
    // One burst per target keeps the ring's cache-line traffic to one per target per chunk.
    for (uint16_t t = 0; t <= n_cores_; ++t) {
      const uint16_t k = st.fill[t];
      if (k == 0) continue;
      rte_mbuf** group = &st.staging[static_cast<size_t>(t) * kMaxBurst];
      const unsigned sent = rte_ring_sp_enqueue_burst(
          ring(source, t), reinterpret_cast<void* const*>(group), k, nullptr);
      forwarded += sent;
      if (sent < k) {
        rte_pktmbuf_free_bulk(group + sent, k - sent);
        full_drops += k - sent;
      }
      st.fill[t] = 0;
      if (t == n_cores_ && sent > 0) to_control = true;
    }
  }
  // Once per burst that carried control frames (ARP, CM MADs), never per data packet.
  if (to_control)
    if (ControlWake* w = control_wake_.load(std::memory_order_acquire)) w->wake();
  if (classifier_drops) bump(st.classifier, classifier_drops);
  if (full_drops) bump(st.ring_full, full_drops);
  if (forwarded) bump(st.forwarded, forwarded);
  return n_local;
}

uint16_t RxDispatch::receive(uint16_t target, rte_mbuf** pkts, uint16_t n) {
  TargetState& ts = targets_[target];
  uint16_t got = 0;
  const uint16_t start = ts.next_source;
  for (uint16_t k = 0; k < n_cores_ && got < n; ++k) {
    const uint16_t s = static_cast<uint16_t>((start + k) % n_cores_);
    if (s == target) continue;
    got += static_cast<uint16_t>(rte_ring_sc_dequeue_burst(
        ring(s, target), reinterpret_cast<void**>(pkts + got), n - got, nullptr));
  }
  // Start with the next source next time, so a busy source cannot starve the others.
  ts.next_source = static_cast<uint16_t>((start + 1) % n_cores_);
  if (got) bump(ts.received, got);
  return got;
}

uint64_t RxDispatch::ring_full_drops(uint16_t source) const {
  return sources_[source].ring_full.load(std::memory_order_relaxed);
}
uint64_t RxDispatch::classifier_drops(uint16_t source) const {
  return sources_[source].classifier.load(std::memory_order_relaxed);
}
uint64_t RxDispatch::forwarded(uint16_t source) const {
  return sources_[source].forwarded.load(std::memory_order_relaxed);
}
uint64_t RxDispatch::received(uint16_t target) const {
  return targets_[target].received.load(std::memory_order_relaxed);
}

}  // namespace rocedp::pmd
