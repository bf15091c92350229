#include "pmd/fault_stage.hpp"

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <bit>

#include "pmd/port.hpp"

namespace rocedp::pmd {

void FaultCounters::add_to(FaultStats& out) const {
  out.dropped += dropped.load(std::memory_order_relaxed);
  out.duplicated += duplicated.load(std::memory_order_relaxed);
  out.corrupted += corrupted.load(std::memory_order_relaxed);
  out.reordered += reordered.load(std::memory_order_relaxed);
  out.delayed += delayed.load(std::memory_order_relaxed);
  out.ce_marked += ce_marked.load(std::memory_order_relaxed);
  out.duplicate_failed += duplicate_failed.load(std::memory_order_relaxed);
  out.flushed += flushed.load(std::memory_order_relaxed);
}

FaultStage::FaultStage(const config::FaultConfig& cfg, uint64_t stream, rte_mempool* dup_pool,
                       uint32_t capacity, double cycles_per_us)
    : plan_(cfg, stream),
      dup_pool_(dup_pool),
      delay_cycles_(static_cast<uint64_t>(cfg.delay_us * cycles_per_us)),
      window_hold_cycles_(static_cast<uint64_t>(kWindowHoldUs * cycles_per_us)) {
  const uint32_t window = cfg.reorder_window > 1 ? cfg.reorder_window : 0;
  // The FIFO must take a whole window plus a burst that may all be duplicated.
  uint32_t cap = std::max<uint32_t>({capacity, 4 * window + 256, 64});
  cap = std::bit_ceil(cap);
  fifo_.assign(cap, Held{nullptr, 0});
  mask_ = cap - 1;
  window_.assign(window, nullptr);
  order_.assign(window, 0);
}

FaultStage::~FaultStage() {
  flush();
}

uint32_t FaultStage::held() const {
  return (tail_ - head_) + window_fill_;
}

uint32_t FaultStage::room() const {
  // Window slots count as reserved FIFO space; every frame may become two (duplicate).
  const uint32_t cap = mask_ + 1;
  const uint32_t used = (tail_ - head_) + static_cast<uint32_t>(window_.size());
  return used >= cap ? 0 : (cap - used) / 2;
}

void FaultStage::corrupt(rte_mbuf* m, const FaultDecision& d) {
  uint32_t off = d.corrupt_offset;
  for (rte_mbuf* seg = m; seg != nullptr; seg = seg->next) {
    if (off < seg->data_len) {
      rte_pktmbuf_mtod(seg, uint8_t*)[off] ^= d.corrupt_mask;
      bump(counters_.corrupted);
      return;
    }
    off -= seg->data_len;
  }
}

// Never write into data someone else still references (a clone, or a frame the sender keeps for
// retransmission): a private copy instead (the frame as it is when no mbuf is left for one).
rte_mbuf* FaultStage::writable(rte_mbuf* m) {
  if (!RTE_MBUF_CLONED(m) && !RTE_MBUF_HAS_EXTBUF(m) && rte_mbuf_refcnt_read(m) == 1) return m;
  rte_mbuf* copy = rte_pktmbuf_copy(m, dup_pool_, 0, UINT32_MAX);
  if (copy == nullptr) return nullptr;
  rte_pktmbuf_free(m);
  return copy;
}

// An untagged IPv4 frame whose ECN field says ECT(0) or ECT(1) gets CE (RFC 3168: a router marks
// only ECN-capable packets). The checksum is updated for the changed word (RFC 1624), so a header
// that was wrong stays wrong.
void FaultStage::mark_ce(rte_mbuf* m) {
  if (m->data_len < sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr)) return;
  const auto* eth = rte_pktmbuf_mtod(m, const rte_ether_hdr*);
  auto* ip = rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr*, sizeof(rte_ether_hdr));
  if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) || (ip->version_ihl >> 4) != 4)
    return;
  const uint8_t ecn = ip->type_of_service & RTE_IPV4_HDR_ECN_MASK;
  if (ecn == 0 || ecn == RTE_IPV4_HDR_ECN_CE) return;
  const uint16_t old_word = static_cast<uint16_t>((ip->version_ihl << 8) | ip->type_of_service);
  ip->type_of_service |= RTE_IPV4_HDR_ECN_CE;
  const uint16_t new_word = static_cast<uint16_t>((ip->version_ihl << 8) | ip->type_of_service);
  // HC' = ~(~HC + ~m + m'), in host order.
  uint32_t sum = static_cast<uint16_t>(~rte_be_to_cpu_16(ip->hdr_checksum));
  sum += static_cast<uint16_t>(~old_word);
  sum += new_word;
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  // A result of 0x0000 is written as 0xFFFF (-0), as Linux's nftables does when a switch sets CE
  // (nft_payload.c: CSUM_MANGLED_0). Receivers must take it (RFC 1071's check), so every test
  // that marks CE sends some, as a real path would.
  uint16_t hc = static_cast<uint16_t>(~sum);
  if (hc == 0) hc = 0xFFFF;
  ip->hdr_checksum = rte_cpu_to_be_16(hc);
  bump(counters_.ce_marked);
}

void FaultStage::push(rte_mbuf** pkts, uint32_t n, uint64_t now) {
  for (uint32_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    FaultDecision d = plan_.decide(rte_pktmbuf_pkt_len(m));
    if (d.drop) {
      rte_pktmbuf_free(m);
      bump(counters_.dropped);
      continue;
    }
    if (d.corrupt || d.mark_ce) {
      if (rte_mbuf* w = writable(m)) {
        m = w;
        if (d.corrupt) corrupt(m, d);
        if (d.mark_ce) mark_ce(m);
      }
    }
    rte_mbuf* dup = nullptr;
    if (d.duplicate) {
      dup = rte_pktmbuf_copy(m, dup_pool_, 0, UINT32_MAX);
      bump(dup != nullptr ? counters_.duplicated : counters_.duplicate_failed);
    }
    enqueue(m, d.reorder, now);
    if (dup != nullptr) enqueue(dup, d.reorder, now);
  }
}

void FaultStage::enqueue(rte_mbuf* m, bool reorder, uint64_t now) {
  if (window_.empty() || !reorder) {
    fifo_[tail_++ & mask_] = Held{m, now + delay_cycles_};
    if (delay_cycles_ != 0) bump(counters_.delayed);
    return;
  }
  if (window_fill_ == 0) window_start_ = now;
  window_[window_fill_++] = m;
  if (window_fill_ == window_.size()) release_window(now);
}

void FaultStage::release_window(uint64_t now) {
  if (window_fill_ == 0) return;
  uint32_t moved = plan_.permute(std::span<uint32_t>(order_.data(), window_fill_));
  bump(counters_.reordered, moved);
  for (uint32_t i = 0; i < window_fill_; ++i) {
    fifo_[tail_++ & mask_] = Held{window_[order_[i]], now + delay_cycles_};
    window_[order_[i]] = nullptr;
  }
  if (delay_cycles_ != 0) bump(counters_.delayed, window_fill_);
  window_fill_ = 0;
}

uint32_t FaultStage::peek_ready(rte_mbuf** out, uint32_t max, uint64_t now) {
  if (window_fill_ != 0 && now - window_start_ >= window_hold_cycles_) release_window(now);
  uint32_t k = 0;
  // The FIFO is ordered by release time: every frame gets the same delay from a clock that
  // never goes back.
  while (k < max && head_ + k != tail_) {
    const Held& h = fifo_[(head_ + k) & mask_];
    if (h.release > now) break;
    out[k++] = h.m;
  }
  return k;
}

void FaultStage::consume(uint32_t k) {
  head_ += k;
}

uint32_t FaultStage::pop_ready(rte_mbuf** out, uint32_t max, uint64_t now) {
  uint32_t k = peek_ready(out, max, now);
  consume(k);
  return k;
}

uint32_t FaultStage::flush() {
  uint32_t n = 0;
  for (uint32_t i = 0; i < window_fill_; ++i) {
    rte_pktmbuf_free(window_[i]);
    window_[i] = nullptr;
    ++n;
  }
  window_fill_ = 0;
  while (head_ != tail_) {
    rte_pktmbuf_free(fifo_[head_++ & mask_].m);
    ++n;
  }
  bump(counters_.flushed, n);
  return n;
}

}  // namespace rocedp::pmd
