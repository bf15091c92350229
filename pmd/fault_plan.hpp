#pragma once
// The decision half of fault injection, kept free of DPDK so it can be unit-tested
// deterministically: the same FaultConfig and seed give the same sequence of decisions.
// FaultStage (fault_stage.hpp) applies these decisions to mbufs.

#include <cstdint>
#include <span>

#include "config/config.hpp"

namespace rocedp::pmd {

// splitmix64 (Steele, Lea, Flood 2014): one add and three xor-shift-multiply steps per draw,
// good enough statistically for impairment decisions, and any 64-bit seed (even 0) works.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound) (bound > 0), by Lemire's multiply-shift (bias < 2^-32 for our bounds).
  uint32_t below(uint32_t bound) {
    return static_cast<uint32_t>((static_cast<unsigned __int128>(next()) * bound) >> 64);
  }

 private:
  uint64_t state_;
};

// What happens to one frame.
struct FaultDecision {
  bool drop = false;
  bool duplicate = false;
  bool corrupt = false;
  bool reorder = false;         // with a reorder window: the frame takes part in its shuffle
  bool mark_ce = false;         // ECN = CE if the frame is ECN-capable IPv4 (FaultStage)
  uint32_t corrupt_offset = 0;  // byte index in the frame, >= kEthernetHeaderLen
  uint8_t corrupt_mask = 0;     // XORed into that byte; never 0, so the byte always changes
};

class FaultPlan {
 public:
  // Corruption never touches the Ethernet header: the frame must still reach its port so the
  // layer above (ICRC, IP checksum) is what detects it.
  static constexpr uint32_t kEthernetHeaderLen = 14;

  // `stream` separates independent streams from one config seed (each queue and direction has
  // its own), so queues do not share random sequences yet stay replayable.
  FaultPlan(const config::FaultConfig& cfg, uint64_t stream);

  // Decides for one frame of `frame_len` bytes. A dropped frame is neither corrupted nor
  // duplicated. Frames of <= 14 bytes are never corrupted. With a reorder window, reorder_pct
  // picks the frames that take part in the shuffle (at 100 every one, with no draw).
  FaultDecision decide(uint32_t frame_len);

  // A uniformly random permutation (Fisher-Yates) of order[0..n): order[i] is the input index
  // that leaves in position i. Returns how many positions moved (order[i] != i).
  uint32_t permute(std::span<uint32_t> order);

  const config::FaultConfig& config() const { return cfg_; }

 private:
  config::FaultConfig cfg_;
  SplitMix64 rng_;
  // Probabilities as 64-bit thresholds: an event happens when next() < threshold.
  uint64_t drop_threshold_;
  uint64_t duplicate_threshold_;
  uint64_t corrupt_threshold_;
  uint64_t reorder_threshold_;  // 0 without a window
  uint64_t ce_threshold_;
  bool roll(uint64_t threshold);
};

}  // namespace rocedp::pmd
