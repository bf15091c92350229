// rocedp-perf --rping: one end of a Linux rping pair (rping_mode.hpp has the exchange). One
// adapter runtime with inline polling, as the rest of rocedp-perf: every wait keeps the core
// polling, so the peer's traffic is answered meanwhile.

#include "apps/perf/rping_mode.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "apps/perf/clock.hpp"
#include "apps/perf/endpoint.hpp"
#include "apps/perf/perf_util.hpp"
#include "apps/perf/perftest_exchange.hpp"

namespace rocedp::perf {
namespace {

// rping's message: where a buffer is, big-endian (struct rping_rdma_info).
constexpr uint32_t kInfoSize = 16;
struct BufferInfo {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t size = 0;
};

// One registered buffer holds every region: two receive slots, the send slot, the sink (rdma_buf,
// which the server READs into and WRITEs from) and the client's source (start_buf).
constexpr uint64_t kRecvSlots = 2;
constexpr uint64_t kSlot = 64;
constexpr uint64_t kSendAt = kRecvSlots * kSlot;
constexpr uint64_t kSinkAt = 4096;
constexpr uint64_t kMaxSize = 65536;
constexpr uint64_t kSourceAt = kSinkAt + kMaxSize;

bool fail(const std::string& what) {
  std::fprintf(stderr, "rocedp-perf --rping: %s\n", what.c_str());
  return false;
}

struct Session {
  const RpingOptions& o;
  AdapterRuntime* rt = nullptr;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Mr* mr = nullptr;
  Qp* qp = nullptr;
  CmLink link;
  std::vector<uint8_t> buf = std::vector<uint8_t>(kSourceAt + kMaxSize, 0);
  std::deque<BufferInfo> received;  // the peer's messages not yet acted on
  uint64_t reads = 0, writes = 0, sends = 0;
  bool failed = false;
  explicit Session(const RpingOptions& options) : o(options) {}
  uint8_t* at(uint64_t off) { return buf.data() + off; }
};

bool post_receive(Session& s, uint64_t slot) {
  const NdkSge sge{s.at(slot * kSlot), kInfoSize, s.mr->get_local_token()};
  const NTSTATUS st = s.qp->receive(reinterpret_cast<void*>(slot), &sge, 1);
  return st == STATUS_SUCCESS || fail("post receive: " + std::string(status_name(st)));
}

// Takes every completion there is: a receive is rping's 16-byte message (queued, its slot posted
// again); reads, writes and sends are counted.
void drain(Session& s) {
  s.rt->poll();
  NdkResultEx r[16];
  const uint32_t n = s.cq->get_results_ex(r, 16);
  for (uint32_t k = 0; k < n; ++k) {
    if (r[k].status != STATUS_SUCCESS) {
      // Work the disconnect flushed is not a failure.
      if (!(r[k].status == STATUS_CANCELLED && s.link.gone.load()))
        s.failed = fail("completion error " + std::string(status_name(r[k].status)));
      continue;
    }
    switch (r[k].type) {
      case NdkOperationType::kReceive: {
        if (r[k].bytes_transferred != kInfoSize) {
          s.failed = fail("received " + std::to_string(r[k].bytes_transferred) +
                          " bytes, not rping's 16-byte message");
          continue;
        }
        const auto slot = reinterpret_cast<uint64_t>(r[k].request_context);
        const uint8_t* m = s.at(slot * kSlot);
        s.received.push_back(BufferInfo{get_be64(m), get_be32(m + 8), get_be32(m + 12)});
        if (!post_receive(s, slot)) s.failed = true;
        break;
      }
      case NdkOperationType::kRead:
        ++s.reads;
        break;
      case NdkOperationType::kWrite:
        ++s.writes;
        break;
      default:
        ++s.sends;
        break;
    }
  }
}

// Polls until `done` holds; false on a failure, a disconnect (unless `disconnect_ok`, then the
// caller sees s.gone), or the time limit.
template <typename Done>
bool wait_for(Session& s, const char* what, Done done, bool disconnect_ok = false) {
  while (!done()) {
    drain(s);
    if (s.failed) return false;
    if (s.link.gone.load() && !done())
      return disconnect_ok || fail(std::string("the peer disconnected ") + what);
    if (clock::deadline().passed()) return fail(std::string("time limit reached ") + what);
  }
  return true;
}

BufferInfo next_message(Session& s) {
  BufferInfo b = s.received.front();
  s.received.pop_front();
  return b;
}

bool send_info(Session& s, uint64_t off, uint32_t size) {
  uint8_t* m = s.at(kSendAt);
  if (size == 0) {
    std::memset(m, 0, kInfoSize);  // "go ahead": rping's server sends its unused message, zeros
  } else {
    put_be64(m, reinterpret_cast<uint64_t>(s.at(off)));
    put_be32(m + 8, s.mr->get_remote_token());
    put_be32(m + 12, size);
  }
  const NdkSge sge{m, kInfoSize, s.mr->get_local_token()};
  const uint64_t want = s.sends + 1;
  const NTSTATUS st = s.qp->send(nullptr, &sge, 1, 0);
  if (st != STATUS_SUCCESS) return fail("post send: " + std::string(status_name(st)));
  // The one send slot is reused: the next message waits until this one left.
  return wait_for(s, "before a SEND completed", [&] { return s.sends >= want; });
}

bool setup(Session& s) {
  std::string err;
  AdapterRuntime& rt = *s.rt;
  NTSTATUS st = STATUS_PENDING;
  rt.run_on_control([&] { st = rt.adapter().create_pd(nullptr, nullptr, &s.pd); });
  if (st != STATUS_SUCCESS) return fail("create_pd: " + std::string(status_name(st)));
  std::vector<Qp*> qps;
  if (!create_cq(rt, 64, &s.cq, &err) ||
      !register_buffer(rt, s.pd, s.buf.data(), s.buf.size(), &s.mr, &err) ||
      !create_qps(rt, s.pd, s.cq, 1, kRecvSlots, 16, &qps, &err))
    return fail(err);
  s.qp = qps[0];
  for (uint64_t slot = 0; slot < kRecvSlots; ++slot)
    if (!post_receive(s, slot)) return false;
  return true;
}

bool accept(Session& s) {
  std::string err;
  return cm_accept_one(*s.rt, s.link, s.o.port, s.qp, s.o.timeout_s, "rocedp-perf --rping", &err) ||
         fail(err);
}

bool connect(Session& s) {
  std::string err;
  return cm_connect(*s.rt, s.link, s.qp, s.o.addr, s.o.port, &err) || fail(err);
}

// The server: READ the client's source, "go ahead", WRITE it into the client's sink, "go ahead";
// until the client disconnects between two pings.
bool serve(Session& s, uint64_t* pings) {
  for (;;) {
    if (!wait_for(
            s, "before its source", [&] { return !s.received.empty(); }, true))
      return false;
    if (s.received.empty()) return true;  // disconnected between pings: rping's normal end
    const BufferInfo src = next_message(s);
    if (src.size == 0 || src.size > s.o.size)
      return fail("the client's source holds " + std::to_string(src.size) + " bytes; -S is " +
                  std::to_string(s.o.size));
    NdkSge sge{s.at(kSinkAt), src.size, s.mr->get_local_token()};
    const uint64_t reads = s.reads + 1;
    NTSTATUS st = s.qp->read(nullptr, &sge, 1, src.addr, src.rkey, 0);
    if (st != STATUS_SUCCESS) return fail("post READ: " + std::string(status_name(st)));
    if (!wait_for(s, "during the READ", [&] { return s.reads >= reads; })) return false;
    if (s.o.verbose)
      std::printf("server ping data: %.*s\n", static_cast<int>(src.size - 1), s.at(kSinkAt));
    if (!send_info(s, 0, 0)) return false;
    if (!wait_for(s, "before its sink", [&] { return !s.received.empty(); })) return false;
    const BufferInfo sink = next_message(s);
    // rping writes the string it read, with its NUL.
    const auto* data = reinterpret_cast<const char*>(s.at(kSinkAt));
    const auto len =
        static_cast<uint32_t>(std::min<size_t>({strnlen(data, src.size) + 1, src.size, sink.size}));
    sge.length = len;
    const uint64_t writes = s.writes + 1;
    st = s.qp->write(nullptr, &sge, 1, sink.addr, sink.rkey, 0);
    if (st != STATUS_SUCCESS) return fail("post WRITE: " + std::string(status_name(st)));
    if (!wait_for(s, "during the WRITE", [&] { return s.writes >= writes; })) return false;
    if (!send_info(s, 0, 0)) return false;
    ++*pings;
  }
}

// rping's ping data: "rdma-ping-N: ", then letters from `start` on (65..122, wrapping), NUL last.
void fill_source(uint8_t* p, uint32_t size, uint64_t ping, int start) {
  int cc =
      std::snprintf(reinterpret_cast<char*>(p), size, "rdma-ping-%d: ", static_cast<int>(ping));
  unsigned char c = static_cast<unsigned char>(start);
  for (uint32_t i = static_cast<uint32_t>(cc); i < size; ++i) {
    p[i] = c;
    if (++c > 122) c = 65;
  }
  p[size - 1] = 0;
}

bool ping(Session& s, uint64_t* pings) {
  int start = 65;
  for (uint64_t n = 0; s.o.count == 0 || n < s.o.count; ++n) {
    fill_source(s.at(kSourceAt), s.o.size, n, start);
    if (++start > 122) start = 65;
    std::memset(s.at(kSinkAt), 0, s.o.size);
    if (!send_info(s, kSourceAt, s.o.size)) return false;
    if (!wait_for(s, "before the server read", [&] { return !s.received.empty(); })) return false;
    next_message(s);
    if (!send_info(s, kSinkAt, s.o.size)) return false;
    if (!wait_for(s, "before the server wrote", [&] { return !s.received.empty(); })) return false;
    next_message(s);
    if (s.o.validate && std::memcmp(s.at(kSourceAt), s.at(kSinkAt), s.o.size) != 0)
      return fail("data mismatch in ping " + std::to_string(n));
    if (s.o.verbose) std::printf("ping data: %s\n", reinterpret_cast<const char*>(s.at(kSinkAt)));
    ++*pings;
    if (s.o.count == 0 && clock::deadline().passed()) break;
  }
  return true;
}

void close_session(Session& s) {
  cm_close(*s.rt, s.link);
  close_objects(*s.rt, {s.qp}, {s.cq}, {s.mr}, s.pd);
}

}  // namespace

int run_rping(const RpingOptions& o) {
  Session s(o);
  return run_endpoint(o.endpoint, o.timeout_s, "rocedp-perf --rping", [&](AdapterRuntime& rt) {
    s.rt = &rt;
    uint64_t pings = 0;
    const bool ok =
        setup(s) && (o.server ? accept(s) && serve(s, &pings) : connect(s) && ping(s, &pings));
    if (ok)
      std::printf("rocedp-perf --rping: %lu pings of %u bytes%s\n",
                  static_cast<unsigned long>(pings), o.size,
                  o.validate && !o.server ? ", each validated" : "");
    close_session(s);
    s.rt = nullptr;
    return ok ? 0 : 1;
  });
}

}  // namespace rocedp::perf
