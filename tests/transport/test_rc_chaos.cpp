// Chaos (ctest label `chaos`): 1,000,000 mixed operations (SEND, SEND and WRITE with immediate
// data, WRITE, READ, fetch-add, compare-swap) over 16 QPs through a wire that drops 10%, reorders
// 5%, duplicates 1% and corrupts 1% of the frames in both directions. Every operation completes
// exactly once, in posting order, with STATUS_SUCCESS; every byte is checked when its operation
// completes (slots are reused only after that); every SEND and every WRITE with immediate
// completes exactly one receive, in order, with its length and its immediate; atomics are applied
// exactly once (each returns the value the previous ones left). Virtual time; a failing run replays
// from its seed (ROCEDP_CHAOS_SEED). ROCEDP_CHAOS_OPS overrides the operation count (for a quick
// local run).

#include <chrono>
#include <cstdlib>

#include "tests/transport/rc_harness.hpp"

namespace rocedp::rc::test {
namespace {

enum class Kind : uint8_t { kSend, kSendImm, kWrite, kWriteImm, kRead, kFetchAdd, kCompareSwap };

bool takes_receive(Kind k) {
  return k == Kind::kSend || k == Kind::kSendImm || k == Kind::kWriteImm;
}
bool writes(Kind k) {
  return k == Kind::kWrite || k == Kind::kWriteImm;
}
uint32_t immediate_of(uint64_t i) {
  return static_cast<uint32_t>(i * 2654435761u);
}

constexpr uint32_t kQps = 16;
constexpr uint32_t kSlots = 256;  // per flow; at most kOutstanding in flight, so a slot is free
constexpr uint32_t kOutstanding = 96;  // when it is reused
constexpr uint32_t kSlotBytes = 4096;
const uint32_t kSizes[] = {0, 1, 63, 64, 1023, 1024, 1025, 2048, 4000, 4096};

struct Op {
  Kind kind;
  uint32_t size;
  uint64_t operand;
};

struct Flow {
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  Buffer* a_src = nullptr;   // WRITE/SEND source
  Buffer* a_sink = nullptr;  // READ sink, atomic results
  Buffer* b_dst = nullptr;   // WRITE target
  Buffer* b_recv = nullptr;  // SEND receive buffers
  Buffer* b_src = nullptr;   // READ source (fixed pattern)
  Buffer* b_word = nullptr;  // atomic target
  std::mt19937_64 rng;
  std::vector<Op> ring;  // op of each outstanding index (by index % kSlots)
  uint64_t total = 0, posted = 0, completed = 0, recv_done = 0;
  std::vector<uint64_t> sends;  // op index of each receive-taking op posted, in order (FIFO)
  size_t sends_head = 0;
  uint64_t word = 0;  // the atomic word's value after every completed atomic
  uint64_t errors = 0;
};

uint8_t* slot(Buffer* b, uint64_t i) {
  return b->ptr() + (i % kSlots) * kSlotBytes;
}

TEST(RcChaos, MillionMixedOperationsExactlyOnceUnderDropReorderDuplicateCorrupt) {
  const auto t_start = std::chrono::steady_clock::now();
  uint64_t total_ops = 1'000'000;
  if (const char* e = std::getenv("ROCEDP_CHAOS_OPS")) total_ops = std::strtoull(e, nullptr, 10);
  uint64_t seed = 20240801;
  if (const char* e = std::getenv("ROCEDP_CHAOS_SEED")) seed = std::strtoull(e, nullptr, 10);
  Host a{0, 0xC6120001, 1};
  Host b{0, 0xC6120002, 2};
  Wire w{a, b};
  Faults faults;
  faults.drop = 0.10;
  faults.reorder = 0.05;
  faults.duplicate = 0.01;
  faults.corrupt = 0.01;
  faults.rng.seed(seed);
  w.faults = &faults;
  ConnectOptions o;
  o.timeout = 14;  // 67 ms, as rocedp-perf: recovery must not depend on it
  o.read_limit = 8;
  std::vector<Flow> flows(kQps);
  for (uint32_t q = 0; q < kQps; ++q) {
    Flow& f = flows[q];
    f.qa = &a.qp(128, 128, 4096);
    f.qb = &b.qp(128, 256, 4096);
    o.a_psn = (q * 0x111111u + 0xFFFF00u) & 0xFFFFFF;  // some flows wrap their PSN
    o.b_psn = (q * 0x0F0F0Fu) & 0xFFFFFF;
    connect(a, *f.qa, b, *f.qb, o);
    f.a_src = &a.buffer(kSlots * kSlotBytes);
    f.a_sink = &a.buffer(kSlots * kSlotBytes, kMrAll, 0);
    f.b_dst = &b.buffer(kSlots * kSlotBytes, kMrAll, 0);
    f.b_recv = &b.buffer(kSlots * kSlotBytes, kMrAll, 0);
    f.b_src = &b.buffer(kSlots * kSlotBytes);
    f.b_word = &b.buffer(8, kMrAll, 0);
    fill_pattern(f.b_src->ptr(), kSlots * kSlotBytes, 5000 + q);
    f.rng.seed(seed * 31 + q);
    f.ring.resize(kSlots);
    f.total = total_ops / kQps + (q < total_ops % kQps ? 1 : 0);
    f.sends.reserve(f.total);
  }

  auto post_more = [&](Flow& f) {
    while (f.posted < f.total && f.posted - f.completed < kOutstanding) {
      const uint64_t i = f.posted;
      Op op;
      const uint32_t r = static_cast<uint32_t>(f.rng() % 24);
      op.kind = r < 5    ? Kind::kSend
                : r < 7  ? Kind::kSendImm
                : r < 12 ? Kind::kWrite
                : r < 14 ? Kind::kWriteImm
                : r < 19 ? Kind::kRead
                : r < 22 ? Kind::kFetchAdd
                         : Kind::kCompareSwap;
      op.size = op.kind == Kind::kFetchAdd || op.kind == Kind::kCompareSwap
                    ? 8
                    : kSizes[f.rng() % std::size(kSizes)];
      op.operand = f.rng() % 100000;
      SendWqe wqe;
      wqe.request_context = tag(i);
      wqe.sge_count = 1;
      if (takes_receive(op.kind) &&
          f.qb->rq->post(recv_wqe(
              tag(i), {f.b_recv->sge((i % kSlots) * kSlotBytes, kSlotBytes)})) != STATUS_SUCCESS) {
        return;
      }
      if (op.kind == Kind::kSendImm || op.kind == Kind::kWriteImm) {
        wqe.has_immediate = true;
        wqe.immediate = immediate_of(i);
      }
      switch (op.kind) {
        case Kind::kSend:
        case Kind::kSendImm:
          fill_pattern(slot(f.a_src, i), op.size, static_cast<uint32_t>(i * 7 + 1));
          wqe.opcode = SendOpcode::kSend;
          wqe.sge[0] = f.a_src->sge((i % kSlots) * kSlotBytes, op.size);
          break;
        case Kind::kWrite:
        case Kind::kWriteImm:
          fill_pattern(slot(f.a_src, i), op.size, static_cast<uint32_t>(i * 7 + 2));
          wqe.opcode = SendOpcode::kWrite;
          wqe.sge[0] = f.a_src->sge((i % kSlots) * kSlotBytes, op.size);
          wqe.remote_address = f.b_dst->va() + (i % kSlots) * kSlotBytes;
          wqe.remote_token = f.b_dst->tokens.remote;
          break;
        case Kind::kRead:
          std::memset(slot(f.a_sink, i), 0, op.size);
          wqe.opcode = SendOpcode::kRead;
          wqe.sge[0] = f.a_sink->sge((i % kSlots) * kSlotBytes, op.size);
          wqe.remote_address = f.b_src->va() + (i % kSlots) * kSlotBytes;
          wqe.remote_token = f.b_src->tokens.remote;
          break;
        case Kind::kFetchAdd:
        case Kind::kCompareSwap:
          wqe.opcode =
              op.kind == Kind::kFetchAdd ? SendOpcode::kFetchAdd : SendOpcode::kCompareSwap;
          wqe.sge[0] = f.a_sink->sge((i % kSlots) * kSlotBytes, 8);
          wqe.remote_address = f.b_word->va();
          wqe.remote_token = f.b_word->tokens.remote;
          wqe.swap_or_add = op.operand;
          // Compare-swap: half of them compare against a value the word never holds (no swap).
          wqe.compare = op.operand % 2 == 0 ? UINT64_MAX : 0;
          break;
      }
      ASSERT_EQ(f.qa->sq->post(wqe), STATUS_SUCCESS);
      if (takes_receive(op.kind)) f.sends.push_back(i);
      f.ring[i % kSlots] = op;
      ++f.posted;
    }
  };

  NdkResultEx res[64];
  auto all_done = [&]() -> bool {
    bool done = true;
    for (Flow& f : flows) {
      post_more(f);
      for (uint32_t n; (n = f.qa->scq->get_results_ex(res, 64)) != 0;) {
        for (uint32_t k = 0; k < n; ++k) {
          const NdkResultEx& r = res[k];
          const uint64_t i = f.completed;
          const Op& op = f.ring[i % kSlots];
          bool ok = r.status == STATUS_SUCCESS && r.request_context == tag(i);
          if (ok && writes(op.kind)) {
            ok = std::memcmp(slot(f.a_src, i), slot(f.b_dst, i), op.size) == 0;
          } else if (ok && op.kind == Kind::kRead) {
            ok = std::memcmp(slot(f.a_sink, i), slot(f.b_src, i), op.size) == 0;
          } else if (ok && (op.kind == Kind::kFetchAdd || op.kind == Kind::kCompareSwap)) {
            uint64_t orig;
            std::memcpy(&orig, slot(f.a_sink, i), 8);
            ok = r.type_specific_completion_output == f.word && orig == f.word;
            if (op.kind == Kind::kFetchAdd) {
              f.word += op.operand;
            } else if ((op.operand % 2 == 0 ? UINT64_MAX : 0) == f.word) {
              f.word = op.operand;
            }
          }
          if (!ok && f.errors++ < 5) {
            ADD_FAILURE() << "flow " << (&f - flows.data()) << " op " << i << " kind "
                          << int(op.kind) << " status " << status_name(r.status) << " context "
                          << r.request_context;
          }
          ++f.completed;
        }
      }
      for (uint32_t n; (n = f.qb->rcq->get_results_ex(res, 64)) != 0;) {
        for (uint32_t k = 0; k < n; ++k) {
          const NdkResultEx& r = res[k];
          const uint64_t i = f.sends_head < f.sends.size() ? f.sends[f.sends_head++] : UINT64_MAX;
          const Op& op = f.ring[i % kSlots];
          // A SEND's bytes are in the receive's slot, a WRITE's in its target; the immediate, if
          // any, is in the completion.
          const uintptr_t want_out =
              op.kind == Kind::kSend ? 0 : kCqeImmediateValid | immediate_of(i);
          const bool ok =
              i != UINT64_MAX && r.status == STATUS_SUCCESS && r.request_context == tag(i) &&
              r.bytes_transferred == op.size && r.type_specific_completion_output == want_out &&
              std::memcmp(slot(f.a_src, i),
                          op.kind == Kind::kWriteImm ? slot(f.b_dst, i) : slot(f.b_recv, i),
                          op.size) == 0;
          if (!ok && f.errors++ < 5)
            ADD_FAILURE() << "flow " << (&f - flows.data()) << " receive of op " << i;
          ++f.recv_done;
        }
      }
      if (f.errors != 0) return true;  // stop early, the failures are reported
      done &= f.completed == f.total;
    }
    return done;
  };
  ASSERT_TRUE(w.run_until(all_done, 200'000'000)) << "hang";
  uint64_t completed = 0;
  for (uint32_t q = 0; q < kQps; ++q) {
    Flow& f = flows[q];
    EXPECT_EQ(f.errors, 0u);
    EXPECT_EQ(f.completed, f.total);
    EXPECT_EQ(f.recv_done, f.sends.size())
        << "every SEND and WRITE with immediate took exactly one receive";
    uint64_t word;
    std::memcpy(&word, f.b_word->ptr(), 8);
    EXPECT_EQ(word, f.word) << "atomics applied exactly once";
    EXPECT_EQ(f.qa->qp->state(), QpState::kRts);
    EXPECT_EQ(f.qb->qp->state(), QpState::kRts);
    completed += f.completed;
  }
  EXPECT_EQ(completed, total_ops);
  // The faults happened and were recovered from.
  const auto& ca = a.eng->counters();
  const auto& cb = b.eng->counters();
  const auto bad_icrc = static_cast<size_t>(wire::DropReason::kBadIcrc);
  EXPECT_GT(a.eng->wire_drops()[bad_icrc] + b.eng->wire_drops()[bad_icrc], 0u);
  EXPECT_GT(cb.get(RcCounter::kRxDuplicate), 0u);
  EXPECT_GT(ca.get(RcCounter::kTxRetransmit), 0u);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::printf(
      "chaos: %lu operations, %.1f s wall, %.3f s virtual; A: %lu packets sent, %lu retransmitted, "
      "%lu "
      "NAKs and %lu timeouts received/fired (%lu probes); B: %lu NAKs sent, %lu duplicates\n",
      static_cast<unsigned long>(completed), secs, static_cast<double>(w.now) / 1e9,
      static_cast<unsigned long>(ca.get(RcCounter::kTxPackets)),
      static_cast<unsigned long>(ca.get(RcCounter::kTxRetransmit)),
      static_cast<unsigned long>(ca.get(RcCounter::kNaksReceived)),
      static_cast<unsigned long>(ca.get(RcCounter::kAckTimeouts)),
      static_cast<unsigned long>(ca.get(RcCounter::kRtoProbes)),
      static_cast<unsigned long>(cb.get(RcCounter::kNaksSent)),
      static_cast<unsigned long>(cb.get(RcCounter::kRxDuplicate)));
}

}  // namespace
}  // namespace rocedp::rc::test
