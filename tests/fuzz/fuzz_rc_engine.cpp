// Fuzzes the RC engine with a conversation: two connected QPs (A has requests in flight: WRITEs,
// READs, SENDs, an atomic; B has receives posted and a region any peer may write, read and swap
// in), and the input is a run of frames for them, mixed with the frames the engines send each
// other. Properties: no memory error or undefined behaviour (ASan+UBSan), no request completed
// twice or from nowhere, and once the fuzzed frames stop and the wire runs clean every request of
// A completes (answered, or flushed when a fuzzed frame broke the connection); without fuzzed
// frames every one succeeds. With a second pair (the first record's 0x80), A's two QPs share
// their completion queues, and so do B's (and B's shared receive queue, when it has one): each
// completion must name the QP whose request it is. B also has a fast-register region (made
// valid before the conversation): once a SEND with invalidate of it completes, no byte of it may
// change again. And B lends a memory window over the middle half of a region of its own (bound
// before the conversation): unless a fuzzed frame named that region's own key, no byte outside
// the window ever changes, and none at all once a SEND with invalidate of the window completed.
//
// A record is [ctl][len_hi][len_lo] then len bytes of transport (BTH, extension headers,
// payload), wrapped here in the receiver's Ethernet/IPv4/UDP header with a valid IPv4 checksum
// and ICRC: a mutated frame would otherwise never pass them. ctl bits:
//   0x01 the frame goes to A (else to B)
//   0x02 the PSN as given (else the receiver's expected PSN: B's next request, A's oldest unacked)
//   0x04 the QPN as given (else the receiver's QP)
//   0x08 a RETH or AtomicETH addressed into the receiver's region (VA modulo its size, its rkey;
//        to B with the rkey field's bit 0 set: into B's fast-register region instead; with bit
//        1 set and bit 0 clear: into the region under B's window, with the window's key), and an
//        IETH with its bit 0 set naming B's fast-register region (a SEND with invalidate of it),
//        with bit 1 set and bit 0 clear naming B's window
//   0x10 the wire runs one step after it (both engines poll and exchange what they sent)
//   0x20 in the first record only: B's QP takes its receives from a shared receive queue
//   0x40 in the first record only: the QPs speak RoCEv2 over IPv6 (the frames then have an IPv6
//        header, whose payload length and the ICRC are made valid as well)
//   0x80 in the first record: a second pair of QPs (A2 with requests of its own, B2 with its
//        receives), on the CQs of the first; in every record: the frame goes to A2 or B2
//        (its QPN, PSN and region as above)
// Seeds: tests/fuzz/seeds/rc_engine/, written by tests/fuzz/make_seeds.py.
#include <cstring>
#include <set>
#include <vector>

#include "dataplane/wire/ipv6.hpp"
#include "tests/fuzz/fuzz_target.hpp"
#include "tests/transport/rc_harness.hpp"
#include "tests/wire/wire_test_util.hpp"

namespace {

using namespace rocedp;
using namespace rocedp::rc;
using namespace rocedp::rc::test;

constexpr uint32_t kRegion = 4096;
constexpr int kRequests = 9;   // A's, tags 1..9
constexpr int kRequests2 = 4;  // A2's, tags 11..14

// Memory B lends by a key that a peer's SEND with invalidate can take back (a fast-register
// region, a memory window): once that invalidation completed, no byte of it may change (every
// packet's key is checked).
struct Lent {
  Buffer* buf = nullptr;
  uint32_t key = 0;
  std::vector<uint8_t> after;  // its bytes when the invalidation completed
  bool invalidated = false;

  void note(const NdkResultEx& r) {
    if (invalidated || r.status != STATUS_SUCCESS ||
        r.type != NdkOperationType::kReceiveAndInvalidate ||
        r.type_specific_completion_output != key)
      return;
    invalidated = true;
    after = buf->data;
  }
  bool intact() const { return !invalidated || buf->data == after; }
};

struct World {
  Host a{0, 0x0A000001, 1};
  Host b{1, 0x0A000002, 2};
  Wire w{a, b};
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  Qp* a2 = nullptr;  // the second pair, on the first pair's CQs (null without one)
  Qp* b2 = nullptr;
  Buffer* a_src = nullptr;
  Buffer* a_dst = nullptr;
  Buffer* b_region = nullptr;
  Buffer* b_recv = nullptr;
  Frame to_a, to_b;  // Ethernet/IP/UDP of a frame each way, from the engines' own
  bool ipv6;
  size_t ip_hdr;                            // the IP header's length
  size_t hdrs;                              // up to the BTH
  std::unique_ptr<SharedReceiveQueue> srq;  // B's receives, when its QP has a shared queue
  Lent fr;  // B's fast-register region (its key: the region's remote token)
  // B's memory window: [kWindowOffset, +kWindowLength) of its buffer (the region under it),
  // remote read, write and atomics.
  static constexpr uint32_t kWindowOffset = 1024, kWindowLength = 2048;
  Lent mw;
  std::vector<uint8_t> mw_before;    // the region's bytes at the start
  bool mw_region_key_named = false;  // a fuzzed frame carried the region's own key: no property

  World(bool v6, bool shared, bool two)
      : ipv6(v6),
        ip_hdr(v6 ? wire::kIpv6HdrLen : wire::kIpv4MinHdrLen),
        hdrs(wire::kEthHdrLen + ip_hdr + wire::kUdpHdrLen) {
    qa = &a.qp(64, 64, 256);
    if (shared) {
      NTSTATUS st;
      srq = SharedReceiveQueue::create(64, 4, nullptr, nullptr, &st);
      FUZZ_CHECK(st == STATUS_SUCCESS);
    }
    qb = &b.qp(64, 64, 256, kDefaultMaxUnackedPsns, srq.get());
    ConnectOptions o;  // A's PSNs from 100, as make_seeds.py has them
    o.rnr_retry = 3;   // not infinite: fuzzed SENDs may take B's receives for good
    o.ipv6 = ipv6;
    connect(a, *qa, b, *qb, o);
    if (two) {
      a2 = &a.qp(64, 64, 256, kDefaultMaxUnackedPsns, nullptr, qa);
      b2 = &b.qp(64, 64, 256, kDefaultMaxUnackedPsns, srq.get(), qb);
      ConnectOptions o2 = o;
      o2.a_psn = 7000;
      o2.b_psn = 9000;
      connect(a, *a2, b, *b2, o2);
    }
    a_src = &a.buffer(kRegion, kMrAll, 0x11);
    a_dst = &a.buffer(kRegion, kMrAll, 0x22);
    b_region = &b.buffer(kRegion, kMrAll, 0x33);
    b_recv = &b.buffer(8 * 2048, kMrAll, 0x44);
    // B's fast-register region, made valid by a FastRegister on B's send queue, and B's window,
    // bound by a Bind there.
    fr.buf = &b.buffer(kRegion, kMrAll, 0x55);
    MrTokens fr_tokens{};
    FUZZ_CHECK(b.mrs->create_fast_register(1, 1, true, &fr_tokens) == STATUS_SUCCESS);
    fr.key = fr_tokens.remote;
    SendWqe reg = send_wqe(SendOpcode::kFastRegister, tag(50), {});
    reg.local_token = fr_tokens.local;
    reg.fr_address = fr.buf->va();
    reg.fr_length = kRegion;
    reg.fr_access = kMrAll;
    mw.buf = &b.buffer(kRegion, kMrAll, 0x66);
    mw_before = mw.buf->data;
    FUZZ_CHECK(b.mrs->create_window(1, &mw.key) == STATUS_SUCCESS);
    SendWqe bind = send_wqe(SendOpcode::kBind, tag(51), {});
    bind.local_token = mw.key;
    bind.bind_mr_token = mw.buf->tokens.local;
    bind.fr_address = mw.buf->va() + kWindowOffset;
    bind.fr_length = kWindowLength;
    bind.fr_access = kMrAll;
    FUZZ_CHECK(qb->sq->post(reg) == STATUS_SUCCESS && qb->sq->post(bind) == STATUS_SUCCESS);
    b.eng->poll_st(w.now);
    const std::vector<NdkResultEx> regd = qb->send_cqes();
    FUZZ_CHECK(regd.size() == 2 && regd[0].status == STATUS_SUCCESS &&
               regd[1].status == STATUS_SUCCESS);
    for (uint32_t i = 0; i < 8; ++i) {
      const RecvWqe r = recv_wqe(tag(100 + i), {b_recv->sge(i * 2048, 2048)});
      (void)(srq ? srq->post(r) : qb->rq->post(r));
      if (b2 != nullptr && !srq)
        (void)b2->rq->post(recv_wqe(tag(200 + i), {b_recv->sge(i * 2048, 2048)}));
    }
    // A's requests: on the wire once A polls, then lost (never delivered) so they wait for
    // answers, which the fuzzed frames and A's retries provide.
    uintptr_t t = 1;
    for (uint32_t i = 0; i < 3; ++i)
      (void)qa->sq->post(write_wqe(tag(t++), *a_src, *b_region, i * 64, 64));
    (void)qa->sq->post(write_wqe(tag(t++), *a_src, *b_region, 1024, 2048));
    (void)qa->sq->post(read_wqe(tag(t++), *a_dst, *b_region, 128));
    (void)qa->sq->post(send_wqe(SendOpcode::kSend, tag(t++), {a_src->sge(0, 100)}));
    (void)qa->sq->post(fetch_add_wqe(tag(t++), *a_dst, *b_region, 5));
    (void)qa->sq->post(read_wqe(tag(t++), *a_dst, *b_region, 3000));
    (void)qa->sq->post(send_wqe(SendOpcode::kSend, tag(t++), {a_src->sge(0, 1500)}));
    if (a2 != nullptr) {
      t = 11;
      (void)a2->sq->post(write_wqe(tag(t++), *a_src, *b_region, 2048, 64));
      (void)a2->sq->post(read_wqe(tag(t++), *a_dst, *b_region, 256));
      (void)a2->sq->post(send_wqe(SendOpcode::kSend, tag(t++), {a_src->sge(0, 64)}));
      (void)a2->sq->post(fetch_add_wqe(tag(t++), *a_dst, *b_region, 7));
    }
    a.eng->poll_st(w.now);
    FUZZ_CHECK(!a.tx.empty());
    to_b.assign(a.tx.front().begin(), a.tx.front().begin() + static_cast<long>(hdrs));
    to_a = to_b;
    std::memcpy(to_a.data(), to_b.data() + 6, 6);  // the MACs swapped
    std::memcpy(to_a.data() + 6, to_b.data(), 6);
    // The addresses swapped.
    const size_t src = wire::kEthHdrLen + (ipv6 ? wire::ipv6_off::kSrc : wire::ipv4_off::kSrc);
    const size_t dst = wire::kEthHdrLen + (ipv6 ? wire::ipv6_off::kDst : wire::ipv4_off::kDst);
    const size_t n = ipv6 ? 16 : 4;
    std::memcpy(to_a.data() + src, to_b.data() + dst, n);
    std::memcpy(to_a.data() + dst, to_b.data() + src, n);
    a.tx.clear();
  }

  // The record's frame for its receiver, headers and checks made valid.
  Frame frame(uint8_t ctl, const uint8_t* t, size_t len) {
    const bool for_a = (ctl & 0x01) != 0;
    Frame f = for_a ? to_a : to_b;
    f.insert(f.end(), t, t + len);
    f.resize(f.size() + wire::kIcrcLen);
    uint8_t* bth = f.data() + hdrs;
    const bool second = (ctl & 0x80) != 0 && a2 != nullptr;
    QueuePair& rx = *(second ? (for_a ? a2 : b2) : (for_a ? qa : qb))->qp;
    if (len >= wire::kBthLen) {
      if ((ctl & 0x04) == 0) {
        const uint32_t word = wire::load_be32(bth + 4);
        wire::store_be32(bth + 4, (word & 0xFF000000u) | rx.qpn());
      }
      if ((ctl & 0x02) == 0) {
        const uint32_t word = wire::load_be32(bth + 8);
        const uint32_t psn = for_a ? rx.comp.unacked_psn : rx.resp.psn;
        wire::store_be32(bth + 8, (word & 0xFF000000u) | (psn & wire::kPsnMask));
      }
      const wire::OpcodeInfo* op = wire::opcode_info(bth[0]);
      if ((ctl & 0x08) != 0 && op != nullptr) {
        if (op->has(wire::Hdr::kIeth) && op->offset_of(wire::Hdr::kIeth) + 4 <= len) {
          uint8_t* x = bth + op->offset_of(wire::Hdr::kIeth);
          const uint32_t aim = wire::load_be32(x) & 3;
          if (aim != 0) wire::store_be32(x, (aim & 1) != 0 ? fr.key : mw.key);
        }
      }
      for (wire::Hdr h : {wire::Hdr::kReth, wire::Hdr::kAtomicEth}) {
        if (op == nullptr || !op->has(h) || op->offset_of(h) + 12 > len) continue;
        uint8_t* x = bth + op->offset_of(h);
        if ((ctl & 0x08) != 0) {
          const uint32_t aim = for_a ? 0 : wire::load_be32(x + 8) & 3;
          const bool to_fr = (aim & 1) != 0, to_mw = aim == 2;
          const Buffer& region = for_a ? *a_dst : to_fr ? *fr.buf : to_mw ? *mw.buf : *b_region;
          wire::store_be64(x, region.va() + wire::load_be64(x) % kRegion);
          wire::store_be32(x + 8, to_fr ? fr.key : to_mw ? mw.key : region.tokens.remote);
        }
        // The window's properties hold only while no frame reached its region by the region's
        // own key (the fuzzer may find it; a WRITE's later packets use its first one's key).
        if (!for_a && wire::load_be32(x + 8) == mw.buf->tokens.remote) mw_region_key_named = true;
      }
    }
    // The lengths for the new size, then the checksum and the ICRC.
    uint8_t* ip = f.data() + wire::kEthHdrLen;
    const size_t ip_len = f.size() - wire::kEthHdrLen;
    const auto udp_len = static_cast<uint16_t>(ip_len - ip_hdr);
    wire::store_be16(ip + ip_hdr + wire::udp_off::kLen, udp_len);
    if (ipv6)
      wire::store_be16(ip + wire::ipv6_off::kPayloadLen, udp_len);
    else
      wire::store_be16(ip + wire::ipv4_off::kTotalLen, static_cast<uint16_t>(ip_len));
    wire::test::reseal(f);
    return f;
  }
};

// A's completions (A's and A2's, from their shared CQ): each request at most once, only the ones
// posted, each named with the QP that posted it.
void collect(World& w, std::set<uintptr_t>& done, int& failed) {
  for (const NdkResultEx& r : w.qa->send_cqes()) {
    const auto t = reinterpret_cast<uintptr_t>(r.request_context);
    if (w.a2 != nullptr && r.qp_context == w.a2) {
      FUZZ_CHECK(t >= 11 && t < 11 + kRequests2);
    } else {
      FUZZ_CHECK(r.qp_context == w.qa && t >= 1 && t <= kRequests);
    }
    FUZZ_CHECK(done.insert(t).second);
    failed += r.status != STATUS_SUCCESS ? 1 : 0;
  }
}

// B's receive completions (B's and B2's): each names its QP, and a receive B2 completes from its
// own queue is one of B2's.
void collect_receives(World& w) {
  for (const NdkResultEx& r : w.qb->recv_cqes()) {
    const auto t = reinterpret_cast<uintptr_t>(r.request_context);
    FUZZ_CHECK(r.qp_context == w.qb || (w.b2 != nullptr && r.qp_context == w.b2));
    if (!w.srq) FUZZ_CHECK((t >= 200) == (r.qp_context == w.b2));
    w.fr.note(r);
    w.mw.note(r);
  }
  FUZZ_CHECK(w.fr.intact());
  // The window lends its range only, and only until its invalidation.
  if (!w.mw_region_key_named) {
    const auto* now = w.mw.buf->data.data();
    const auto* before = w.mw_before.data();
    const uint32_t end = World::kWindowOffset + World::kWindowLength;
    FUZZ_CHECK(std::memcmp(now, before, World::kWindowOffset) == 0);
    FUZZ_CHECK(std::memcmp(now + end, before + end, kRegion - end) == 0);
    FUZZ_CHECK(w.mw.intact());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World world(size > 0 && (data[0] & 0x40) != 0, size > 0 && (data[0] & 0x20) != 0,
              size > 0 && (data[0] & 0x80) != 0);
  const size_t requests = kRequests + (world.a2 != nullptr ? kRequests2 : 0);
  std::set<uintptr_t> done;
  int failed = 0;
  bool transport = false;  // a record with a BTH's worth of bytes (shorter ones are dropped runts)
  size_t at = 0;
  for (int records = 0; at + 3 <= size && records < 64; ++records) {
    const uint8_t ctl = data[at];
    const size_t len = std::min<size_t>((size_t{data[at + 1]} << 8) | data[at + 2], size - at - 3);
    transport |= len >= wire::kBthLen;
    Frame f = world.frame(ctl, data + at + 3, std::min<size_t>(len, 4200));
    at += 3 + len;
    std::vector<Frame> one{std::move(f)};
    Wire::deliver((ctl & 0x01) != 0 ? world.a : world.b, one, world.w.now);
    if ((ctl & 0x10) != 0) world.w.step();
    collect(world, done, failed);
    collect_receives(world);
  }
  // The fuzzed frames stop; the wire runs clean until A's requests are all answered.
  QueuePair& qa = *world.qa->qp;
  const bool rested = world.w.run_until(
      [&] {
        collect(world, done, failed);
        collect_receives(world);
        return done.size() == requests;
      },
      20000);
  FUZZ_CHECK(rested);
  // Without fuzzed frames (none, or runts only) every request completes, and successfully.
  if (!transport) {
    FUZZ_CHECK(failed == 0 && qa.state() == QpState::kRts);
    FUZZ_CHECK(world.a2 == nullptr || world.a2->qp->state() == QpState::kRts);
  }
  return 0;
}
