#pragma once
// The per-core, read-mostly copy of the neighbour table: IPv4 -> MAC.
//
// The control thread owns the authoritative table (control/neighbour_table.hpp) and sends each
// change as a NeighbourUpdate over the control->core ring; the owning core applies it with
// apply_st(). lookup_st() is the per-packet operation. Only the owning core may call the *_st
// methods (the eRPC "_st" convention): there is no lock and no atomic, by design.
//
// Layout: open addressing with linear probing in a power-of-two slot array sized at construction
// (at least twice the entry capacity, so probes stay short); deletion shifts later entries back
// instead of leaving tombstones, so lookups never degrade over time. No allocation after the
// constructor. Header-only and DPDK-free so it is unit-testable without EAL.

#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "config/config.hpp"

namespace rocedp::dataplane {

// One change of the neighbour table, as carried in a control->core ring message.
struct NeighbourUpdate {
  config::Ipv4Address ip;  // host byte order, never 0
  config::MacAddress mac;  // ignored when remove is true
  bool remove = false;
};

class NeighbourCache {
 public:
  // Holds up to `max_entries` neighbours (at least 1).
  explicit NeighbourCache(uint32_t max_entries)
      : max_entries_(max_entries == 0 ? 1 : max_entries),
        slots_(std::bit_ceil(uint64_t{max_entries_} * 2)),
        mask_(static_cast<uint32_t>(slots_.size() - 1)) {}

  uint32_t size() const { return size_; }
  uint32_t max_entries() const { return max_entries_; }
  // Updates refused because the cache was full (the table and the caches disagree on capacity).
  uint64_t full_rejects() const { return full_rejects_; }

  // Per-packet lookup. Returns false if `ip` is unknown.
  bool lookup_st(config::Ipv4Address ip, config::MacAddress* mac) const {
    if (ip.value == kEmpty) return false;
    for (uint32_t i = home(ip.value);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.ip == ip.value) {
        std::memcpy(mac->bytes.data(), s.mac, sizeof(s.mac));
        return true;
      }
      if (s.ip == kEmpty) return false;
    }
  }

  // Inserts or replaces. Returns false if `ip` is 0 or the cache already holds max_entries.
  bool upsert_st(config::Ipv4Address ip, const config::MacAddress& mac) {
    if (ip.value == kEmpty) return false;
    uint32_t i = home(ip.value);
    for (; slots_[i].ip != kEmpty; i = (i + 1) & mask_) {
      if (slots_[i].ip == ip.value) {
        std::memcpy(slots_[i].mac, mac.bytes.data(), sizeof(slots_[i].mac));
        return true;
      }
    }
    if (size_ >= max_entries_) {
      ++full_rejects_;
      return false;
    }
    slots_[i].ip = ip.value;
    std::memcpy(slots_[i].mac, mac.bytes.data(), sizeof(slots_[i].mac));
    ++size_;
    return true;
  }

  // Removes `ip`. Returns false if it was not present.
  bool erase_st(config::Ipv4Address ip) {
    if (ip.value == kEmpty) return false;
    uint32_t i = home(ip.value);
    for (; slots_[i].ip != ip.value; i = (i + 1) & mask_) {
      if (slots_[i].ip == kEmpty) return false;
    }
    // Backward-shift deletion: move each later entry of the probe run into the hole if the hole
    // lies on its path from its home slot.
    for (uint32_t j = (i + 1) & mask_; slots_[j].ip != kEmpty; j = (j + 1) & mask_) {
      const uint32_t h = home(slots_[j].ip);
      const bool hole_on_path = ((j - h) & mask_) >= ((j - i) & mask_);
      if (hole_on_path) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = Slot{};
    --size_;
    return true;
  }

  // Applies one control message. Returns false if an insert was refused (cache full).
  bool apply_st(const NeighbourUpdate& u) {
    if (u.remove) {
      erase_st(u.ip);
      return true;
    }
    return upsert_st(u.ip, u.mac);
  }

  void clear_st() {
    for (Slot& s : slots_) s = Slot{};
    size_ = 0;
  }

 private:
  static constexpr uint32_t kEmpty = 0;  // 0.0.0.0 is never a neighbour
  struct Slot {
    uint32_t ip = kEmpty;
    uint8_t mac[6] = {};
    uint16_t pad = 0;
  };
  static_assert(sizeof(Slot) == 12);

  // Fibonacci hashing: neighbours usually differ only in their low bits.
  uint32_t home(uint32_t ip) const {
    return static_cast<uint32_t>((uint64_t{ip} * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
  }

  uint32_t max_entries_;
  std::vector<Slot> slots_;
  uint32_t mask_;
  uint32_t size_ = 0;
  uint64_t full_rejects_ = 0;
};

}  // namespace rocedp::dataplane
