// rocedp-perf --ops-check: one end of the ops check (ops_check_mode.hpp has the script). One
// adapter runtime with inline polling, as the rest of rocedp-perf: every wait keeps the core
// polling, so the peer's traffic is answered meanwhile.

#include "apps/perf/ops_check_mode.hpp"

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "apps/perf/clock.hpp"
#include "apps/perf/endpoint.hpp"
#include "apps/perf/perf_util.hpp"
#include "apps/perf/perftest_exchange.hpp"

namespace rocedp::perf {
namespace {

constexpr uint64_t kBufLen = 65536, kSlot = 4096, kServerRecvs = 5;
constexpr uint64_t kTargetAt = 16384, kWindowAt = 24576, kWindowLen = 4096, kInfoAt = 32768,
                   kSourceAt = 36864;
constexpr uint32_t kInfoLen = 24, kGoLen = 4, kBigLen = 3000, kWindowWriteLen = 512, kSmallLen = 64;
constexpr uint32_t kImm1 = 0x5EED0001u, kImm2 = 0x5EED0002u;
// A receive completion's TypeSpecificCompletionOutput: bit 32 says an immediate came, in the low
// 32 bits (Qp::send_with_immediate).
constexpr uint64_t kImmediateValid = 1ull << 32;
constexpr const char* kMe = "rocedp-perf --ops-check";

bool fail(const std::string& what) {
  std::fprintf(stderr, "%s: FAIL: %s\n", kMe, what.c_str());
  return false;
}

uint8_t pattern(uint32_t k, uint32_t i) {
  return static_cast<uint8_t>(k * 37 + i * 13 + (i >> 8));
}
void fill(uint8_t* p, uint32_t k, uint32_t len) {
  for (uint32_t i = 0; i < len; ++i) p[i] = pattern(k, i);
}
bool holds(const uint8_t* p, uint32_t k, uint32_t len) {
  for (uint32_t i = 0; i < len; ++i)
    if (p[i] != pattern(k, i)) return false;
  return true;
}

struct Session {
  const OpsCheckOptions& o;
  AdapterRuntime* rt = nullptr;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Mr* mr = nullptr;
  Mw* mw = nullptr;
  Mr* fr = nullptr;  // --fast-register: the window is this region, not mw
  Qp* qp = nullptr;
  CmLink link;
  std::atomic<int> notified{0};  // CQ notifications (the server arms for solicited completions)
  std::vector<uint8_t> buf = std::vector<uint8_t>(kBufLen, 0);
  // Completions not yet looked at, in order, of the send queue and of the receive queue: the two
  // queues complete in no fixed order between them (a peer's answer may come before the ACK).
  std::deque<NdkResultEx> sent, received;
  explicit Session(const OpsCheckOptions& options) : o(options) {}
  uint8_t* at(uint64_t off) { return buf.data() + off; }
  NdkSge sge(uint64_t off, uint32_t len) { return NdkSge{at(off), len, mr->get_local_token()}; }
};

void on_notify(void* ctx, NTSTATUS) {
  static_cast<Session*>(ctx)->notified.fetch_add(1);
}

bool is_receive(const NdkResultEx& r) {
  return r.type == NdkOperationType::kReceive || r.type == NdkOperationType::kReceiveAndInvalidate;
}

// Polls once and queues the completions there are.
void collect(Session& s) {
  s.rt->poll();
  NdkResultEx r[16];
  const uint32_t n = s.cq->get_results_ex(r, 16);
  for (uint32_t k = 0; k < n; ++k) (is_receive(r[k]) ? s.received : s.sent).push_back(r[k]);
}

// The next completion of the receive queue or of the send queue, polling until it comes; false
// on the time limit, or when the peer left and nothing more can come (`past_disconnect`: a
// request whose completion still comes when the peer has left, from our own retries).
bool next_result(Session& s, const char* what, bool receive, NdkResultEx* out,
                 bool past_disconnect = false) {
  std::deque<NdkResultEx>& q = receive ? s.received : s.sent;
  for (collect(s); q.empty(); collect(s)) {
    if (s.link.gone.load() && !past_disconnect)
      return fail(std::string("the peer disconnected ") + what);
    if (clock::deadline().passed()) return fail(std::string("time limit reached ") + what);
    keep_polling(*s.rt);
  }
  *out = q.front();
  q.pop_front();
  return true;
}

std::string describe(const NdkResultEx& r) {
  char b[160];
  std::snprintf(b, sizeof b, "status %s, type %u, %u bytes, output 0x%" PRIx64,
                std::string(status_name(r.status)).c_str(), static_cast<unsigned>(r.type),
                r.bytes_transferred, static_cast<uint64_t>(r.type_specific_completion_output));
  return b;
}

// Awaits the completion of the request just posted (status `st`): it must be of `type` and end
// with `want` (or `also`); `past_disconnect` as next_result.
bool await(Session& s, const char* what, NdkOperationType type, NTSTATUS st,
           NTSTATUS want = STATUS_SUCCESS, NTSTATUS also = STATUS_SUCCESS,
           bool past_disconnect = false) {
  if (st != STATUS_SUCCESS)
    return fail(std::string(what) + ": post: " + std::string(status_name(st)));
  NdkResultEx r;
  if (!next_result(s, what, false, &r, past_disconnect)) return false;
  if ((r.status != want && r.status != also) || r.type != type)
    return fail(std::string(what) + ": " + describe(r) + ", expected " +
                std::string(status_name(want)) + ", type " +
                std::to_string(static_cast<unsigned>(type)));
  std::printf("%s: %s: %s\n", kMe, what, std::string(status_name(r.status)).c_str());
  return true;
}

bool setup(Session& s, uint32_t recvs) {
  std::string err;
  AdapterRuntime& rt = *s.rt;
  NTSTATUS st = STATUS_PENDING;
  rt.run_on_control([&] {
    st = rt.adapter().create_pd(nullptr, nullptr, &s.pd);
    if (st == STATUS_SUCCESS && !s.o.fast_register) st = s.pd->create_mw(nullptr, nullptr, &s.mw);
    if (st == STATUS_SUCCESS && s.o.fast_register)
      st = s.pd->create_mr(true, nullptr, nullptr, &s.fr);
    // The window need not start on a page: room for one page more.
    if (st == STATUS_SUCCESS && s.o.fast_register)
      st = s.fr->initialize_fast_register_mr(kWindowLen / 4096 + 1, true, nullptr, nullptr);
  });
  if (st != STATUS_SUCCESS)
    return fail("create_pd and the window's object: " + std::string(status_name(st)));
  std::vector<Qp*> qps;
  if (!create_cq(rt, 64, &s.cq, &err, &on_notify, &s) ||
      !register_buffer(rt, s.pd, s.buf.data(), s.buf.size(), &s.mr, &err) ||
      !create_qps(rt, s.pd, s.cq, 1, recvs, 16, &qps, &err))
    return fail(err);
  s.qp = qps[0];
  return true;
}

bool post_receive(Session& s, uint64_t slot, uint64_t off) {
  const NdkSge sge = s.sge(off, kSlot);
  const NTSTATUS st = s.qp->receive(reinterpret_cast<void*>(slot), &sge, 1);
  return st == STATUS_SUCCESS || fail("post receive: " + std::string(status_name(st)));
}

// A receive completion of type `type` and `len` bytes whose output is `output`.
bool expect_receive(Session& s, const char* what, NdkOperationType type, uint32_t len,
                    uint64_t output, NdkResultEx* out) {
  if (!next_result(s, what, true, out)) return false;
  const NdkResultEx& r = *out;
  if (r.status != STATUS_SUCCESS || r.type != type || r.bytes_transferred != len ||
      r.type_specific_completion_output != output) {
    char want[96];
    std::snprintf(want, sizeof want, "type %u, %u bytes, output 0x%" PRIx64,
                  static_cast<unsigned>(type), len, output);
    return fail(std::string(what) + ": " + describe(r) + "; expected " + want);
  }
  return true;
}

bool serve(Session& s) {
  for (uint64_t slot = 0; slot < kServerRecvs; ++slot)
    if (!post_receive(s, slot, slot * kSlot)) return false;
  std::string err;
  if (!cm_accept_one(*s.rt, s.link, s.o.port, s.qp, s.o.timeout_s, kMe, &err)) return fail(err);

  constexpr uint32_t kRemote = NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE;
  if (s.fr != nullptr) {
    // NdkFastRegister, as SMB Direct registers the buffers it offers its peer.
    if (!await(s, "fast-register the window", NdkOperationType::kFastRegister,
               s.qp->fast_register(nullptr, s.fr, reinterpret_cast<uint64_t>(s.at(kWindowAt)),
                                   kWindowLen, kRemote | NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0)))
      return false;
  } else if (!await(s, "bind the window", NdkOperationType::kBind,
                    s.qp->bind(nullptr, s.mr, s.mw, s.at(kWindowAt), kWindowLen, kRemote, 0))) {
    return false;
  }
  const uint32_t window = s.fr != nullptr ? s.fr->get_remote_token() : s.mw->get_remote_token();
  // Only the solicited SEND (step 4) may notify: the SEND and WRITE with immediate come first.
  s.cq->arm(NdkCqNotifyType::kSolicited);
  uint8_t* info = s.at(kInfoAt);
  put_be64(info, reinterpret_cast<uint64_t>(s.at(kTargetAt)));
  put_be32(info + 8, s.mr->get_remote_token());
  put_be64(info + 12, reinterpret_cast<uint64_t>(s.at(kWindowAt)));
  put_be32(info + 20, window);
  const NdkSge info_sge = s.sge(kInfoAt, kInfoLen);
  if (!await(s, "send where to write", NdkOperationType::kSend,
             s.qp->send(nullptr, &info_sge, 1, 0)))
    return false;

  NdkResultEx r;
  if (!expect_receive(s, "receive 1 (SEND with immediate)", NdkOperationType::kReceive, kBigLen,
                      kImmediateValid | kImm1, &r))
    return false;
  if (!holds(s.at(reinterpret_cast<uint64_t>(r.request_context) * kSlot), 1, kBigLen))
    return fail("receive 1: wrong bytes");
  std::printf("%s: SEND with immediate 0x%08x, %u bytes: ok\n", kMe, kImm1, kBigLen);
  if (!expect_receive(s, "receive 2 (RDMA WRITE with immediate)", NdkOperationType::kReceive,
                      kBigLen, kImmediateValid | kImm2, &r))
    return false;
  if (!holds(s.at(kTargetAt), 2, kBigLen))
    return fail("receive 2: the WRITE's target holds wrong bytes");
  std::printf("%s: RDMA WRITE with immediate 0x%08x, %u bytes: ok\n", kMe, kImm2, kBigLen);
  // The notification runs on the polling core when it publishes the completion, which here is
  // this thread: receives 1 and 2 would have raised it by now. The client waits for the go-ahead
  // before its solicited SEND, so nothing else can have.
  if (s.notified.load() != 0) return fail("an unsolicited receive notified the CQ");
  const NdkSge go = s.sge(kInfoAt + 64, kGoLen);
  if (!await(s, "send the go-ahead", NdkOperationType::kSend, s.qp->send(nullptr, &go, 1, 0)))
    return false;
  if (!expect_receive(s, "receive 3 (solicited SEND)", NdkOperationType::kReceive, kSmallLen, 0,
                      &r))
    return false;
  if (!holds(s.at(reinterpret_cast<uint64_t>(r.request_context) * kSlot), 6, kSmallLen))
    return fail("receive 3: wrong bytes");
  // Receive 3 raised it in the poll that brought it, if at all (the client waits for a second
  // go-ahead before it goes on; its refused WRITE flushes a receive, an error completion, which
  // would raise it too).
  if (s.notified.load() != 1)
    return fail("the CQ armed for solicited completions was notified " +
                std::to_string(s.notified.load()) + " times by the solicited SEND, expected once");
  std::printf("%s: solicited SEND: the CQ notified once, not for the two before it: ok\n", kMe);
  // With --lossy the go-ahead's ACK may be lost while the client, which got the go-ahead, goes on
  // to its refused WRITE: our NAK ends the QP and flushes the go-ahead before its ACK comes again.
  // Receive 4 below shows the client went on.
  if (!await(s, "send the second go-ahead", NdkOperationType::kSend, s.qp->send(nullptr, &go, 1, 0),
             STATUS_SUCCESS, s.o.lossy ? STATUS_CANCELLED : STATUS_SUCCESS))
    return false;
  if (!expect_receive(s, "receive 4 (SEND with Invalidate)",
                      NdkOperationType::kReceiveAndInvalidate, kSmallLen, window, &r))
    return false;
  if (!holds(s.at(reinterpret_cast<uint64_t>(r.request_context) * kSlot), 4, kSmallLen))
    return fail("receive 4: wrong bytes");
  if (!holds(s.at(kWindowAt), 3, kWindowWriteLen))
    return fail("the window does not hold the WRITE through it");
  std::printf("%s: RDMA WRITE through the window, SEND with Invalidate of 0x%08x: ok\n", kMe,
              window);
  // The WRITE through the invalidated window is refused: the QP's last receive is flushed (the
  // access error ends the QP), or the peer disconnects first.
  for (collect(s); s.received.empty() && !s.link.gone.load(); collect(s)) {
    if (clock::deadline().passed()) return fail("time limit reached before the refused WRITE");
    keep_polling(*s.rt);
  }
  if (!s.received.empty() && s.received.front().status == STATUS_SUCCESS)
    return fail("a receive after the invalidation: " + describe(s.received.front()));
  if (!holds(s.at(kWindowAt), 3, kWindowWriteLen))
    return fail("the WRITE through the invalidated window changed it");
  std::printf("%s: server: every check held\n", kMe);
  return true;
}

bool run_client(Session& s) {
  if (!post_receive(s, 0, kInfoAt) || !post_receive(s, 1, 0) || !post_receive(s, 2, kSlot))
    return false;
  std::string err;
  if (!cm_connect(*s.rt, s.link, s.qp, s.o.addr, s.o.port, &err)) return fail(err);
  NdkResultEx r;
  if (!expect_receive(s, "the server's 24-byte message", NdkOperationType::kReceive, kInfoLen, 0,
                      &r))
    return false;
  const uint8_t* info = s.at(kInfoAt);
  const uint64_t target = get_be64(info), window = get_be64(info + 12);
  const uint32_t target_token = get_be32(info + 8), window_token = get_be32(info + 20);
  uint8_t* src = s.at(kSourceAt);
  auto source = [&](uint32_t k, uint32_t len) {
    fill(src, k, len);
    return s.sge(kSourceAt, len);
  };
  NdkSge sge = source(1, kBigLen);
  if (!await(s, "SEND with immediate", NdkOperationType::kSend,
             s.qp->send_with_immediate(nullptr, &sge, 1, kImm1, 0)))
    return false;
  sge = source(2, kBigLen);
  if (!await(s, "RDMA WRITE with immediate", NdkOperationType::kWrite,
             s.qp->write_with_immediate(nullptr, &sge, 1, target, target_token, kImm2, 0)))
    return false;
  sge = source(3, kWindowWriteLen);
  if (!await(s, "RDMA WRITE through the window", NdkOperationType::kWrite,
             s.qp->write(nullptr, &sge, 1, window, window_token, 0)))
    return false;
  std::memset(src, 0, kWindowWriteLen);  // the READ brings pattern 3 back
  sge = s.sge(kSourceAt, kWindowWriteLen);
  if (!await(s, "RDMA READ through the window", NdkOperationType::kRead,
             s.qp->read(nullptr, &sge, 1, window, window_token, 0)))
    return false;
  if (!holds(src, 3, kWindowWriteLen))
    return fail("RDMA READ through the window: the bytes read are not what was written");
  if (!expect_receive(s, "the server's go-ahead", NdkOperationType::kReceive, kGoLen, 0, &r))
    return false;
  sge = source(6, kSmallLen);
  if (!await(s, "solicited SEND", NdkOperationType::kSend,
             s.qp->send(nullptr, &sge, 1, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT)))
    return false;
  if (!expect_receive(s, "the server's second go-ahead", NdkOperationType::kReceive, kGoLen, 0, &r))
    return false;
  sge = source(4, kSmallLen);
  if (!await(s, "SEND with Invalidate", NdkOperationType::kSend,
             s.qp->send_and_invalidate(nullptr, &sge, 1, window_token, 0)))
    return false;
  sge = source(5, kSmallLen);
  // The server's NAK ends its QP (IBTA: a remote access error is fatal), so a lost NAK is never
  // sent again: on a lossy link the WRITE may run out of retries instead, and the server, its QP
  // in error, may disconnect first (the WRITE's retries still end it: our QP is not flushed by
  // the peer's disconnect).
  if (!await(s, "RDMA WRITE through the invalidated window", NdkOperationType::kWrite,
             s.qp->write(nullptr, &sge, 1, window, window_token, 0), STATUS_ACCESS_VIOLATION,
             s.o.lossy ? STATUS_IO_TIMEOUT : STATUS_ACCESS_VIOLATION, s.o.lossy))
    return false;
  std::printf("%s: client: every check held\n", kMe);
  return true;
}

void close_session(Session& s) {
  cm_close(*s.rt, s.link);
  if (s.mw != nullptr) {
    Pending p;
    // The close completes on the cores; `p` waits for it however long that takes.
    call_and_wait(
        *s.rt, p, [&] { return s.mw->close(&on_closed, &p); }, std::chrono::hours(1));
  }
  close_objects(*s.rt, {s.qp}, {s.cq}, {s.mr, s.fr}, s.pd);
}

}  // namespace

int run_ops_check(const OpsCheckOptions& o) {
  Session s(o);
  return run_endpoint(o.endpoint, o.timeout_s, kMe, [&](AdapterRuntime& rt) {
    s.rt = &rt;
    const bool ok = setup(s, o.server ? kServerRecvs : 3) && (o.server ? serve(s) : run_client(s));
    close_session(s);
    s.rt = nullptr;
    return ok ? 0 : 1;
  });
}

}  // namespace rocedp::perf
