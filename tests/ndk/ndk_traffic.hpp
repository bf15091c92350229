#pragma once
// Mixed traffic over several QP pairs: WRITE, SEND, READ and fetch-add in a fixed
// pattern, a bounded window per QP, every completion checked for order and every byte checked
// when its request completes. Used by the fault run and the allocation-counter run.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/ndk/ndk_helpers.hpp"

namespace rocedp::test {

struct TrafficPair {
  Endpoint x, y;
  std::unique_ptr<Buffer> src, sink, dst, recv, remote;  // src/sink on A, dst/recv/remote on B
  uint64_t posted = 0, completed = 0, recv_posted = 0, recv_done = 0;
  uint64_t fetch_adds = 0;
  std::vector<uint64_t> send_seq;  // op index of every SEND, in posting order
  std::string error;
};

class TrafficFixture : public NdkFixture {
 protected:
  static constexpr uint32_t kSlots = 64;
  static constexpr uint32_t kSlotBytes = 4096;
  static constexpr uint32_t kWindow = 16;

  static uint8_t pattern(uint64_t op, uint32_t i) {
    return static_cast<uint8_t>(op * 131 + i * 7 + (op >> 8));
  }
  static uint32_t op_len(uint64_t op) { return static_cast<uint32_t>((op * 37) % 3000 + 1); }

  void make_pairs(size_t n, uint8_t timeout = 7) {
    for (size_t i = 0; i < n; ++i) {
      auto p = std::make_unique<TrafficPair>();
      p->x.host = &a_;
      p->y.host = &b_;
      for (Endpoint* e : {&p->x, &p->y}) {
        e->pd = make_pd(*e->host);
        e->cq = make_cq(*e->host, 4096, static_cast<uint32_t>((i + (e == &p->y ? 1 : 0)) % kCores),
                        &e->notes);
        e->qp = make_qp(e->pd, e->cq, e->cq, e, 64);
      }
      p->src = buffer(p->x.pd, kSlots * kSlotBytes);
      p->sink = buffer(p->x.pd, kSlots * kSlotBytes);
      p->dst = buffer(p->y.pd, kSlots * kSlotBytes);
      p->recv = buffer(p->y.pd, kSlots * kSlotBytes);
      p->remote = buffer(p->y.pd, kSlots * kSlotBytes + 64);
      for (uint32_t k = 0; k < kSlots * kSlotBytes; ++k)
        p->remote->data[k] = static_cast<uint8_t>(k * 13 + 5);
      NdkQpConnectParams px =
          params_to(b_, p->y.qp, 100 + static_cast<uint32_t>(i), 0xFFFF00);  // PSN wraps
      NdkQpConnectParams py = params_to(a_, p->x.qp, 0xFFFF00, 100 + static_cast<uint32_t>(i));
      px.local_ack_timeout = py.local_ack_timeout = timeout;
      px.rnr_retry = py.rnr_retry = 7;
      connect(p->x, p->y, &px, &py);
      p->send_seq.reserve(100000);  // no allocation while traffic runs
      pairs_.push_back(std::move(p));
    }
  }

  void close_pairs() {
    for (auto& p : pairs_) {
      std::vector<std::unique_ptr<Buffer>> bx, by;
      bx.push_back(std::move(p->src));
      bx.push_back(std::move(p->sink));
      by.push_back(std::move(p->dst));
      by.push_back(std::move(p->recv));
      by.push_back(std::move(p->remote));
      close_endpoint(p->x, &bx);
      close_endpoint(p->y, &by);
    }
    pairs_.clear();
  }

  /// Posts what the window allows on pair p; false on a post error (recorded in p.error).
  bool post_some(TrafficPair& p, uint64_t total) {
    // Receives ahead on B for the SENDs.
    while (p.recv_posted - p.recv_done < kWindow * 2) {
      const NdkSge rs = p.recv->sge((p.recv_posted % kSlots) * kSlotBytes, kSlotBytes);
      if (p.y.qp->receive(reinterpret_cast<void*>(uintptr_t{p.recv_posted}), &rs, 1) !=
          STATUS_SUCCESS) {
        p.error = "receive post failed";
        return false;
      }
      ++p.recv_posted;
    }
    while (p.posted < total && p.posted - p.completed < kWindow) {
      const uint64_t op = p.posted;
      const uint32_t len = op_len(op);
      const uint64_t slot = (op % kSlots) * kSlotBytes;
      void* ctx = reinterpret_cast<void*>(uintptr_t{op});
      NTSTATUS st = STATUS_SUCCESS;
      switch (op % 4) {
        case 0: {  // WRITE
          for (uint32_t i = 0; i < len; ++i) p.src->data[slot + i] = pattern(op, i);
          const NdkSge s = p.src->sge(slot, len);
          st = p.x.qp->write(ctx, &s, 1, p.dst->va() + slot, p.dst->mr->get_remote_token(), 0);
          break;
        }
        case 1: {  // SEND
          for (uint32_t i = 0; i < len; ++i) p.src->data[slot + i] = pattern(op, i);
          const NdkSge s = p.src->sge(slot, len);
          st = p.x.qp->send(ctx, &s, 1, 0);
          p.send_seq.push_back(op);
          break;
        }
        case 2: {  // READ
          const NdkSge s = p.sink->sge(slot, len);
          st = p.x.qp->read(ctx, &s, 1, p.remote->va() + slot, p.remote->mr->get_remote_token(), 0);
          break;
        }
        default: {  // fetch-add on the 8-byte counter past the slots
          const NdkSge s = p.sink->sge(slot, 8);
          st = p.x.qp->fetch_add(ctx, s, p.remote->va() + kSlots * kSlotBytes,
                                 p.remote->mr->get_remote_token(), 1, 0);
          break;
        }
      }
      if (st != STATUS_SUCCESS) {
        p.error = "post failed: " + std::string(status_name(st));
        return false;
      }
      ++p.posted;
    }
    return true;
  }

  /// Checks the completions of pair p; false on the first wrong one.
  bool reap(TrafficPair& p) {
    NdkResultEx r[32];
    for (uint32_t n; (n = p.x.cq->get_results_ex(r, 32)) != 0;) {
      for (uint32_t k = 0; k < n; ++k) {
        const uint64_t op = p.completed;
        if (r[k].status != STATUS_SUCCESS ||
            reinterpret_cast<uintptr_t>(r[k].request_context) != op) {
          p.error = "op " + std::to_string(op) + ": status " +
                    std::string(status_name(r[k].status)) + " context " +
                    std::to_string(reinterpret_cast<uintptr_t>(r[k].request_context));
          return false;
        }
        const uint32_t len = op_len(op);
        const uint64_t slot = (op % kSlots) * kSlotBytes;
        if (op % 4 == 0) {
          for (uint32_t i = 0; i < len; ++i) {
            if (p.dst->data[slot + i] != pattern(op, i)) {
              p.error = "WRITE " + std::to_string(op) + " byte " + std::to_string(i);
              return false;
            }
          }
        } else if (op % 4 == 2) {
          if (std::memcmp(p.sink->ptr() + slot, p.remote->ptr() + slot, len) != 0) {
            p.error = "READ " + std::to_string(op);
            return false;
          }
        } else if (op % 4 == 3) {
          uint64_t orig;
          std::memcpy(&orig, p.sink->ptr() + slot, 8);
          if (orig != p.fetch_adds) {
            p.error = "fetch-add " + std::to_string(op) + " original " + std::to_string(orig) +
                      " expected " + std::to_string(p.fetch_adds);
            return false;
          }
          ++p.fetch_adds;
        }
        ++p.completed;
      }
    }
    for (uint32_t n; (n = p.y.cq->get_results_ex(r, 32)) != 0;) {
      for (uint32_t k = 0; k < n; ++k) {
        const uint64_t j = p.recv_done;
        if (r[k].status != STATUS_SUCCESS ||
            reinterpret_cast<uintptr_t>(r[k].request_context) != j || j >= p.send_seq.size()) {
          p.error = "receive " + std::to_string(j) + ": " + std::string(status_name(r[k].status));
          return false;
        }
        const uint64_t op = p.send_seq[j];
        const uint32_t len = op_len(op);
        if (r[k].bytes_transferred != len) {
          p.error = "receive length";
          return false;
        }
        const uint64_t slot = (j % kSlots) * kSlotBytes;
        for (uint32_t i = 0; i < len; ++i) {
          if (p.recv->data[slot + i] != pattern(op, i)) {
            p.error = "SEND " + std::to_string(op) + " byte " + std::to_string(i);
            return false;
          }
        }
        ++p.recv_done;
      }
    }
    return true;
  }

  /// Runs `per_pair` operations on every pair; returns "" or the first error.
  std::string run(uint64_t per_pair, std::chrono::seconds deadline) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    for (uint64_t round = 0;; ++round) {
      bool all_done = true;
      for (auto& p : pairs_) {
        if (!post_some(*p, per_pair) || !reap(*p)) return p->error;
        if (p->completed < per_pair || p->recv_done < p->send_seq.size()) all_done = false;
      }
      if (all_done) return "";
      poll(1);
      if ((round & 1023) == 0 && std::chrono::steady_clock::now() > end) {
        std::string s = "deadline:";
        for (auto& p : pairs_)
          s += " " + std::to_string(p->completed) + "/" + std::to_string(per_pair);
        return s;
      }
    }
  }

  std::vector<std::unique_ptr<TrafficPair>> pairs_;
};

}  // namespace rocedp::test
