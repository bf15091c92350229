#pragma once
// The round trip of each path an engine's QPs use, one estimate per peer IP. A QP's
// retransmission timer never runs shorter than its path's RTO (completer.cpp): at many QPs each
// QP times few packets, so its own estimate lags the queue all of them build towards that peer.
// Per peer, not per engine, so that a QP to a near peer does not wait as long as the slowest
// peer of its core.
//
// Fixed size, allocated with the engine: a QP takes its peer's slot once (when it connects, or
// the first time its timer is armed) and gives it back when it is destroyed; a slot no QP holds
// is free again, so a long-running daemon serves any number of peers over time. Peers beyond
// kMaxPeers at once share slot 0, the estimate of everything else.

#include <array>
#include <cstdint>

namespace rocedp::rc {

/// RFC 6298 smoothing of every sample of the QPs to one peer, and the RTO it gives (no backoff).
struct PathEstimate {
  uint32_t srtt_ns = 0;  ///< 0: no sample yet
  uint32_t rttvar_ns = 0;
  uint64_t rto_ns = 0;  ///< 0: no floor
};

class PathTable {
 public:
  static constexpr uint16_t kUnassigned = 0xFFFF;  ///< a QP that has not taken a slot yet
  static constexpr uint32_t kMaxPeers = 255;       ///< own slots 1..255; slot 0 holds the rest

  /// The slot of `peer_ip` for one more QP, added if new (slot 0 once every slot is taken).
  uint16_t acquire(uint32_t peer_ip) {
    uint32_t i = bucket(peer_ip);
    for (; index_[i] != 0; i = next(i)) {
      if (ip_[index_[i]] == peer_ip) {
        ++refs_[index_[i]];
        return index_[i];
      }
    }
    if (peers_ == kMaxPeers) return 0;
    const uint16_t slot = free_[kMaxPeers - 1 - peers_];
    ++peers_;
    index_[i] = slot;
    ip_[slot] = peer_ip;
    refs_[slot] = 1;
    est_[slot] = PathEstimate{};
    return slot;
  }
  /// A QP gives its slot back; the last one frees it (and its estimate).
  void release(uint16_t slot) {
    if (slot == 0 || slot == kUnassigned || --refs_[slot] != 0) return;
    uint32_t i = bucket(ip_[slot]);
    while (index_[i] != slot) i = next(i);
    // Backward-shift deletion: every entry after the hole whose home bucket does not lie
    // strictly between the hole and the entry moves into the hole, so no probe run is cut short.
    for (uint32_t j = next(i); index_[j] != 0; j = next(j)) {
      const uint32_t home = bucket(ip_[index_[j]]);
      const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (!stays) {
        index_[i] = index_[j];
        i = j;
      }
    }
    index_[i] = 0;
    --peers_;
    free_[kMaxPeers - 1 - peers_] = slot;
  }
  /// The slot of `peer_ip` without taking it (slot 0 if it has none).
  uint16_t find(uint32_t peer_ip) const {
    for (uint32_t i = bucket(peer_ip); index_[i] != 0; i = next(i))
      if (ip_[index_[i]] == peer_ip) return index_[i];
    return 0;
  }
  PathEstimate& at(uint16_t slot) { return est_[slot]; }
  const PathEstimate& at(uint16_t slot) const { return est_[slot]; }
  /// Peers with a slot of their own.
  uint32_t peers() const { return peers_; }

  PathTable() {
    // Free slots as a stack, handed out from kMaxPeers - 1 - peers_ down: 1, 2, 3, ... first.
    for (uint32_t k = 0; k < kMaxPeers; ++k) free_[k] = static_cast<uint16_t>(kMaxPeers - k);
  }

 private:
  // Open addressing at most half full: every probe run ends at an empty bucket.
  static constexpr uint32_t kBuckets = 512;
  static_assert(kBuckets >= 2 * (kMaxPeers + 1));
  static uint32_t bucket(uint32_t ip) { return (ip * 0x9E3779B1u) >> 23; }  // top 9 bits
  static uint32_t next(uint32_t i) { return (i + 1) & (kBuckets - 1); }

  std::array<uint16_t, kBuckets> index_{};  // 0: empty, else the slot
  std::array<uint32_t, kMaxPeers + 1> ip_{};
  std::array<uint32_t, kMaxPeers + 1> refs_{};  // QPs holding the slot
  std::array<PathEstimate, kMaxPeers + 1> est_{};
  std::array<uint16_t, kMaxPeers> free_{};
  uint32_t peers_ = 0;
};

}  // namespace rocedp::rc
