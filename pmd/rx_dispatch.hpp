#pragma once
// Hands frames from the core that received them to the owner: another polling core, or the
// control path. Targets 0..n_cores-1 are polling cores; target n_cores is the control path.
// One single-producer/single-consumer rte_ring per (source core, other target) pair, so no
// enqueue or dequeue ever contends (CONVENTIONS 2). receive() drains in bounded batches (3).

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct rte_mbuf;
struct rte_ring;

namespace rocedp::pmd {

class ControlWake;

class RxDispatch {
 public:
  static constexpr uint16_t kDrop = 0xFFFF;
  static constexpr uint16_t kMaxBurst = 64;  // dispatch() works in chunks of this many
  using Classifier = uint16_t (*)(void* ctx, rte_mbuf* m);  // returns a target index or kDrop

  // One SPSC rte_ring per (source core, other target), each holding exactly ring_size frames.
  // Requires EAL. Throws std::runtime_error if a ring cannot be created.
  RxDispatch(uint16_t n_cores, uint32_t ring_size);
  ~RxDispatch();  // frees every frame still in a ring, then the rings
  RxDispatch(const RxDispatch&) = delete;
  RxDispatch& operator=(const RxDispatch&) = delete;

  // Only the lcore `source` may call. Frames for `source` itself come back in local[] (the
  // return value counts them, local must hold n); the others are enqueued, one burst per target;
  // a frame that meets a full ring is freed and counted, so is one the classifier drops
  // (or for which it returns an index > n_cores).
  uint16_t dispatch(uint16_t source, rte_mbuf** pkts, uint16_t n, Classifier cls, void* ctx,
                    rte_mbuf** local);
  // Only the owner of `target` may call. Up to n frames handed to target, taken round-robin
  // over the sources so none starves.
  uint16_t receive(uint16_t target, rte_mbuf** pkts, uint16_t n);

  uint16_t core_count() const { return n_cores_; }
  uint16_t control_target() const { return n_cores_; }
  // Any time: dispatch() wakes `wake` after it handed frames to the control target (null: none).
  // `wake` must outlive the cores' dispatch() calls.
  void set_control_wake(ControlWake* wake) { control_wake_.store(wake, std::memory_order_release); }
  uint64_t ring_full_drops(uint16_t source) const;
  uint64_t classifier_drops(uint16_t source) const;
  uint64_t forwarded(uint16_t source) const;  // enqueued to another target
  uint64_t received(uint16_t target) const;   // handed out by receive()

 private:
  struct alignas(64) SourceState {
    std::atomic<uint64_t> ring_full{0}, classifier{0}, forwarded{0};
    std::vector<rte_mbuf*> staging;  // (n_cores + 1) * kMaxBurst, grouped by target
    std::vector<uint16_t> fill;      // per target
  };
  struct alignas(64) TargetState {
    std::atomic<uint64_t> received{0};
    uint16_t next_source = 0;
  };
  rte_ring* ring(uint16_t source, uint16_t target) const {
    return rings_[static_cast<size_t>(source) * (n_cores_ + 1) + target];
  }

  uint16_t n_cores_;
  std::atomic<ControlWake*> control_wake_{nullptr};
  std::vector<rte_ring*> rings_;  // [source][target], nullptr where source == target
  std::unique_ptr<SourceState[]> sources_;
  std::unique_ptr<TargetState[]> targets_;
};

}  // namespace rocedp::pmd
