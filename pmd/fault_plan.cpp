#include "pmd/fault_plan.hpp"

#include <utility>

namespace rocedp::pmd {
namespace {

// Probability in percent -> threshold on a uniform 64-bit draw. 100% and above = always.
uint64_t threshold(double pct) {
  if (!(pct > 0)) return 0;
  if (pct >= 100) return UINT64_MAX;
  return static_cast<uint64_t>(pct / 100.0 * 18446744073709551616.0);
}

}  // namespace

FaultPlan::FaultPlan(const config::FaultConfig& cfg, uint64_t stream)
    : cfg_(cfg),
      // Distinct odd multiplier so stream 0 of seed s differs from stream 1 of seed s-1 etc.
      rng_(cfg.seed ^ (stream * 0xd1b54a32d192ed03ULL)),
      drop_threshold_(threshold(cfg.drop_pct)),
      duplicate_threshold_(threshold(cfg.duplicate_pct)),
      corrupt_threshold_(threshold(cfg.corrupt_pct)),
      reorder_threshold_(cfg.reorder_window > 1 ? threshold(cfg.reorder_pct) : 0),
      ce_threshold_(threshold(cfg.ce_pct)) {}

bool FaultPlan::roll(uint64_t t) {
  if (t == 0) return false;  // no draw at all: turning a fault off does not shift the others
  uint64_t x = rng_.next();
  return t == UINT64_MAX || x < t;
}

FaultDecision FaultPlan::decide(uint32_t frame_len) {
  FaultDecision d;
  if (roll(drop_threshold_)) {
    d.drop = true;
    return d;
  }
  if (roll(corrupt_threshold_) && frame_len > kEthernetHeaderLen) {
    d.corrupt = true;
    d.corrupt_offset = kEthernetHeaderLen + rng_.below(frame_len - kEthernetHeaderLen);
    d.corrupt_mask = static_cast<uint8_t>(1 + rng_.below(255));
  }
  d.duplicate = roll(duplicate_threshold_);
  // Every frame of the window at 100% without a draw: replays of older seeds stay the same.
  d.reorder = reorder_threshold_ == UINT64_MAX || roll(reorder_threshold_);
  d.mark_ce = roll(ce_threshold_);  // last: a seed's other decisions stay what they were
  return d;
}

uint32_t FaultPlan::permute(std::span<uint32_t> order) {
  const uint32_t n = static_cast<uint32_t>(order.size());
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  for (uint32_t i = n; i > 1; --i) {
    uint32_t j = rng_.below(i);
    std::swap(order[i - 1], order[j]);
  }
  uint32_t moved = 0;
  for (uint32_t i = 0; i < n; ++i) moved += order[i] != i;
  return moved;
}

}  // namespace rocedp::pmd
