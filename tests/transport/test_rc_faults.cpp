// Go-back-N under faults: 10,000 mixed operations on several QPs over a wire that drops 5%,
// reorders 5%, duplicates 1% and corrupts 1% of frames in both directions. Every operation must
// complete exactly once, in posting order, byte-exact; corrupted frames die on the ICRC.
// Also: PSN wraparound at 0xFFFFFF.

#include <map>

#include "tests/transport/rc_harness.hpp"

namespace rocedp::rc::test {
namespace {

enum class Kind { kSend, kWrite, kRead, kFetchAdd };

struct Op {
  Kind kind;
  uint32_t size;
  uint64_t slot;  // offset in the data buffers
  uint64_t add = 0;
};

struct Flow {
  Qp* qa;
  Qp* qb;
  Buffer* a_src;  // A's source / READ sink
  Buffer* a_dst;  // READ sink
  Buffer* b_dst;  // WRITE / SEND target
  Buffer* b_src;  // READ source
  Buffer* b_counter;
  Buffer* a_result;
  std::vector<Op> ops;
  size_t posted = 0;
  size_t completed = 0;
  size_t recvs_completed = 0;
  std::vector<size_t> send_index;  // op index of each SEND, in order
  uint64_t counter = 0;
};

void run_mixed(uint32_t total_ops, Faults* faults, uint32_t start_psn, uint64_t seed, Host& a,
               Host& b) {
  constexpr uint32_t kQps = 3;
  const std::vector<uint32_t> sizes = {0, 1, 63, 1023, 1024, 1025, 4000};
  std::mt19937_64 rng(seed);
  Wire w{a, b};
  w.faults = faults;
  std::vector<Flow> flows(kQps);
  ConnectOptions o;
  o.a_psn = start_psn;
  o.b_psn = start_psn ^ 0x5A5A5A;
  for (uint32_t q = 0; q < kQps; ++q) {
    Flow& f = flows[q];
    f.qa = &a.qp(128, 128);
    f.qb = &b.qp(128, 256);
    connect(a, *f.qa, b, *f.qb, o);
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < total_ops / kQps; ++i) {
      Op op;
      const uint32_t r = static_cast<uint32_t>(rng() % 10);
      op.kind = r < 3 ? Kind::kSend : r < 6 ? Kind::kWrite : r < 9 ? Kind::kRead : Kind::kFetchAdd;
      op.size = op.kind == Kind::kFetchAdd ? 8 : sizes[rng() % sizes.size()];
      op.slot = bytes;
      op.add = rng() % 1000;
      bytes += (op.size + 7) / 8 * 8 + 8;
      f.ops.push_back(op);
    }
    f.a_src = &a.buffer(bytes);
    f.a_dst = &a.buffer(bytes, kMrAll, 0);
    f.b_dst = &b.buffer(bytes, kMrAll, 0);
    f.b_src = &b.buffer(bytes);
    f.b_counter = &b.buffer(8, kMrAll, 0);
    f.a_result = &a.buffer(bytes, kMrAll, 0);
    fill_pattern(f.a_src->ptr(), bytes, 1000 + q);
    fill_pattern(f.b_src->ptr(), bytes, 2000 + q);
  }

  auto post_more = [&](Flow& f) {
    // Never more than the send queue depth outstanding, so a post never fails after its
    // receive went in.
    while (f.posted < f.ops.size() && f.posted - f.completed < 128) {
      const Op& op = f.ops[f.posted];
      SendWqe wqe;
      wqe.request_context = tag(f.posted);
      wqe.sge_count = 1;
      switch (op.kind) {
        case Kind::kSend: {
          // The matching receive first (the RQ is deeper than the SQ).
          const RecvWqe rwqe = recv_wqe(tag(f.posted), {f.b_dst->sge(op.slot, op.size)});
          if (f.qb->rq->post(rwqe) != STATUS_SUCCESS) return;
          wqe.opcode = SendOpcode::kSend;
          wqe.sge[0] = f.a_src->sge(op.slot, op.size);
          break;
        }
        case Kind::kWrite:
          wqe.opcode = SendOpcode::kWrite;
          wqe.sge[0] = f.a_src->sge(op.slot, op.size);
          wqe.remote_address = f.b_dst->va() + op.slot;
          wqe.remote_token = f.b_dst->tokens.remote;
          break;
        case Kind::kRead:
          wqe.opcode = SendOpcode::kRead;
          wqe.sge[0] = f.a_dst->sge(op.slot, op.size);
          wqe.remote_address = f.b_src->va() + op.slot;
          wqe.remote_token = f.b_src->tokens.remote;
          break;
        case Kind::kFetchAdd:
          wqe.opcode = SendOpcode::kFetchAdd;
          wqe.sge[0] = f.a_result->sge(op.slot, 8);
          wqe.remote_address = f.b_counter->va();
          wqe.remote_token = f.b_counter->tokens.remote;
          wqe.swap_or_add = op.add;
          break;
      }
      if (f.qa->sq->post(wqe) != STATUS_SUCCESS) {
        ASSERT_NE(op.kind, Kind::kSend) << "receive posted without its send";
        return;
      }
      if (op.kind == Kind::kSend) f.send_index.push_back(f.posted);
      ++f.posted;
    }
  };

  auto all_done = [&]() -> bool {
    for (Flow& f : flows) {
      post_more(f);
      for (const NdkResultEx& r : f.qa->send_cqes()) {
        EXPECT_EQ(r.status, STATUS_SUCCESS);
        EXPECT_EQ(r.request_context, tag(f.completed))
            << "completions in posting order, exactly once";
        const Op& op = f.ops[f.completed];
        if (op.kind == Kind::kFetchAdd) {
          EXPECT_EQ(r.type_specific_completion_output, f.counter)
              << "atomic applied exactly once, in order";
          f.counter += op.add;
        }
        ++f.completed;
      }
      for (const NdkResultEx& r : f.qb->recv_cqes()) {
        EXPECT_EQ(r.status, STATUS_SUCCESS);
        EXPECT_LT(f.recvs_completed, f.send_index.size());
        if (f.recvs_completed >= f.send_index.size()) return true;  // fails above; stop
        const size_t idx = f.send_index[f.recvs_completed];
        EXPECT_EQ(r.request_context, tag(idx));
        EXPECT_EQ(r.bytes_transferred, f.ops[idx].size);
        ++f.recvs_completed;
      }
      if (f.completed < f.ops.size()) return false;
    }
    return true;
  };
  ASSERT_TRUE(w.run_until(all_done, 2'000'000)) << "hang";
  for (Flow& f : flows) {
    EXPECT_EQ(f.qa->qp->state(), QpState::kRts);
    EXPECT_EQ(f.recvs_completed, f.send_index.size());
    uint64_t counter;
    std::memcpy(&counter, f.b_counter->ptr(), 8);
    EXPECT_EQ(counter, f.counter);
    for (const Op& op : f.ops) {
      if (op.kind == Kind::kSend || op.kind == Kind::kWrite) {
        ASSERT_EQ(std::memcmp(f.a_src->ptr() + op.slot, f.b_dst->ptr() + op.slot, op.size), 0);
      } else if (op.kind == Kind::kRead) {
        ASSERT_EQ(std::memcmp(f.b_src->ptr() + op.slot, f.a_dst->ptr() + op.slot, op.size), 0);
      }
    }
  }
}

TEST(RcFaults, TenThousandMixedOperationsUnderDropReorderDuplicateCorrupt) {
  Host a{0, 0xC6120001, 1};
  Host b{0, 0xC6120002, 2};
  Faults faults;
  faults.drop = 0.05;
  faults.reorder = 0.05;
  faults.duplicate = 0.01;
  faults.corrupt = 0.01;
  run_mixed(10'002, &faults, 0x123456, 1, a, b);
  // The faults really happened and were recovered from.
  EXPECT_GT(a.eng->counters().get(RcCounter::kGoBackN) + b.eng->counters().get(RcCounter::kGoBackN),
            0u);
  EXPECT_GT(a.eng->counters().get(RcCounter::kTxRetransmit), 0u);
  EXPECT_GT(b.eng->counters().get(RcCounter::kRxDuplicate), 0u);
  const auto bad_icrc = static_cast<size_t>(wire::DropReason::kBadIcrc);
  EXPECT_GT(a.eng->wire_drops()[bad_icrc] + b.eng->wire_drops()[bad_icrc], 0u);
  EXPECT_GT(a.eng->counters().get(RcCounter::kAckTimeouts), 0u);
}

TEST(RcFaults, PsnWrapsAroundAt24Bits) {
  Host a{0, 0xC6120001, 1};
  Host b{0, 0xC6120002, 2};
  run_mixed(300, nullptr, 0xFFFFF0, 2, a, b);
  EXPECT_EQ(a.eng->counters().get(RcCounter::kTxRetransmit), 0u);
  // The requester's PSN passed 0xFFFFFF -> 0.
  bool saw_max = false, saw_zero = false;
  for (const Frame& f : a.log) {
    const wire::ParsedPacket p = parse_frame(f);
    saw_max |= p.f.bth.psn == 0xFFFFFF;
    saw_zero |= p.f.bth.psn == 0;
  }
  EXPECT_TRUE(saw_max && saw_zero);
}

TEST(RcFaults, PsnWrapUnderLoss) {
  Host a{0, 0xC6120001, 1};
  Host b{0, 0xC6120002, 2};
  Faults faults;
  faults.drop = 0.05;
  faults.reorder = 0.05;
  run_mixed(600, &faults, 0xFFFF00, 3, a, b);
}

}  // namespace
}  // namespace rocedp::rc::test
