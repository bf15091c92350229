#pragma once
// The round trip of each path an engine's QPs use, one estimate per peer IP. A QP's
// retransmission timer never runs shorter than its path's RTO (completer.cpp): at many QPs each
// QP times few packets, so its own estimate lags the queue all of them build towards that peer.
// Per peer, not per engine, so that a QP to a near peer does not wait as long as the slowest
// peer of its core.
//
// Fixed size, allocated with the engine: a QP finds its slot once (the first time its timer is
// armed after it connects) and keeps the index. Peers beyond kMaxPeers share slot 0, the
// estimate of everything else. Entries stay for the engine's life: a peer that comes back finds
// its estimate again.

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
  static constexpr uint16_t kUnassigned = 0xFFFF;  ///< a QP that has not looked its slot up yet
  static constexpr uint32_t kMaxPeers = 255;       ///< own slots 1..255; slot 0 holds the rest

  /// The slot of `peer_ip`, added if new (slot 0 once the table is full).
  uint16_t slot_for(uint32_t peer_ip) {
    for (uint32_t i = bucket(peer_ip);; i = (i + 1) & (kBuckets - 1)) {
      if (index_[i] == 0) {
        if (peers_ == kMaxPeers) return 0;
        ++peers_;
        index_[i] = static_cast<uint16_t>(peers_);
        ip_[peers_] = peer_ip;
        return index_[i];
      }
      if (ip_[index_[i]] == peer_ip) return index_[i];
    }
  }
  /// The slot of `peer_ip` without adding it (slot 0 if it has none).
  uint16_t find(uint32_t peer_ip) const {
    for (uint32_t i = bucket(peer_ip);; i = (i + 1) & (kBuckets - 1)) {
      if (index_[i] == 0) return 0;
      if (ip_[index_[i]] == peer_ip) return index_[i];
    }
  }
  PathEstimate& at(uint16_t slot) { return est_[slot]; }
  const PathEstimate& at(uint16_t slot) const { return est_[slot]; }
  /// Peers with a slot of their own.
  uint32_t peers() const { return peers_; }

 private:
  // Open addressing at most half full: every probe run ends at an empty bucket.
  static constexpr uint32_t kBuckets = 512;
  static_assert(kBuckets >= 2 * (kMaxPeers + 1));
  static uint32_t bucket(uint32_t ip) { return (ip * 0x9E3779B1u) >> 23; }  // top 9 bits

  std::array<uint16_t, kBuckets> index_{};  // 0: empty, else the slot
  std::array<uint32_t, kMaxPeers + 1> ip_{};
  std::array<PathEstimate, kMaxPeers + 1> est_{};
  uint32_t peers_ = 0;
};

}  // namespace rocedp::rc
