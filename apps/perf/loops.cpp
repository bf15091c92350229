#include "apps/perf/loops.hpp"

#include <algorithm>
#include <cstring>

#include "apps/perf/clock.hpp"
#include "apps/perf/verify.hpp"

namespace rocedp::perf {
namespace {

bool past_deadline() {
  return clock::deadline().passed();
}

// The run stops waiting: its time limit passed, or a peer ended its connection (Run::peer_gone)
// 50 ms ago, time for the completions already on their way (an answer and then the peer's DREQ).
bool must_stop(Run& run) {
  if (past_deadline()) return true;
  if (run.peer_gone == nullptr || run.peer_gone->load(std::memory_order_acquire) == 0) return false;
  const uint64_t now = clock::now();
  if (run.peer_gone_seen == 0) run.peer_gone_seen = now;
  return now - run.peer_gone_seen >= clock::hz() / 20;
}

// Why must_stop ended a run.
std::string stop_reason(const Run& run) {
  return run.peer_gone_seen != 0 ? "the peer disconnected" : "time limit reached";
}

// Completions drained so far, and the first error.
struct CqDrain {
  uint64_t sends = 0, recvs = 0, errors = 0;
  NTSTATUS first_error = STATUS_SUCCESS;
  // With requests posted silent (--cq-mod), per QP: the requests done so far. A completion's
  // request context is its post index, and RC completes a QP's requests in order, so a
  // completion for index i also retires the silent ones before it.
  std::vector<uint64_t> done_through;
  NdkResultEx r[64];
};

// Drains the CQ: send-side completions free their slots of their QP's window; receives are
// counted per QP in recv_done, and those not `size` bytes long in recv_bad_len.
uint32_t poll_cq(Run& run, CqDrain& d, std::vector<uint32_t>& outstanding, uint64_t size,
                 std::vector<uint64_t>* recv_done, std::vector<uint64_t>* recv_bad_len) {
  const uint32_t n = run.ep.cq->get_results_ex(d.r, 64);
  for (uint32_t k = 0; k < n; ++k) {
    const NdkResultEx& x = d.r[k];
    const auto q = reinterpret_cast<uintptr_t>(x.qp_context);
    if (x.status != STATUS_SUCCESS) {
      if (d.errors++ == 0) d.first_error = x.status;
      continue;
    }
    if (x.type == NdkOperationType::kReceive) {
      ++d.recvs;
      if (recv_done != nullptr) {
        (*recv_done)[q]++;
        if (recv_bad_len != nullptr && x.bytes_transferred != size) (*recv_bad_len)[q]++;
      }
    } else if (q < d.done_through.size()) {
      const uint64_t through = reinterpret_cast<uintptr_t>(x.request_context) + 1;
      const uint64_t n_done = through - d.done_through[q];
      d.done_through[q] = through;
      d.sends += n_done;
      outstanding[q] -= static_cast<uint32_t>(std::min<uint64_t>(n_done, outstanding[q]));
    } else {
      ++d.sends;
      if (q < outstanding.size() && outstanding[q] > 0) outstanding[q]--;
    }
  }
  return n;
}

NTSTATUS post_one(Run& run, uint32_t q, uint64_t i, const Slots& s, uint64_t size, Op op,
                  uint32_t flags = 0) {
  Qp* qp = run.ep.qps[q];
  NdkSge sge{run.ep.buf.data() + s.offset(q, i), static_cast<uint32_t>(size),
             run.ep.mr->get_local_token()};
  const uint64_t raddr = run.peer[q].addr + s.offset(q, i);
  void* ctx = reinterpret_cast<void*>(static_cast<uintptr_t>(i));
  switch (op) {
    case Op::kWrite:
      return qp->write(ctx, &sge, 1, raddr, run.peer[q].rkey, flags);
    case Op::kRead:
      return qp->read(ctx, &sge, 1, raddr, run.peer[q].rkey, flags);
    case Op::kSend:
      return qp->send(ctx, &sge, 1, flags);
    case Op::kAtomic:  // --perftest only (perftest_mode.cpp)
      break;
  }
  return STATUS_INVALID_PARAMETER;
}

// Waits until the memory at p (last byte of a message) holds `want`; the core writes it.
bool wait_byte(Run& run, const uint8_t* p, uint8_t want) {
  uint32_t n = 0;
  while (__atomic_load_n(p, __ATOMIC_ACQUIRE) != want) {
    run.rt->poll();
    if ((++n & 0xFFF) == 0 && must_stop(run)) return false;
  }
  return true;
}

uint64_t total_of(const std::vector<uint64_t>& v) {
  uint64_t t = 0;
  for (uint64_t x : v) t += x;
  return t;
}

uint64_t stop_at(uint64_t start, uint32_t duration_s) {
  return duration_s != 0 ? start + duration_s * clock::hz() : UINT64_MAX;
}

}  // namespace

void PeakMeter::start(uint64_t now) {
  window_start = now;
  window_count = 0;
  window_ticks = clock::hz() / 100;
  peak = 0;
}

void PeakMeter::add(uint64_t n, uint64_t now) {
  window_count += n;
  if (now - window_start >= window_ticks) {
    peak = std::max(peak, static_cast<double>(window_count) * static_cast<double>(clock::hz()) /
                              static_cast<double>(now - window_start));
    window_start = now;
    window_count = 0;
  }
}

std::vector<uint16_t> frame_sizes(Op op, uint64_t size, uint32_t pmtu) {
  // Headers: Ethernet 14, IPv4 20, UDP 8, BTH 12, ICRC 4; the first WRITE packet adds RETH (16);
  // READ responses carry AETH (4) on the first and last.
  const uint64_t n = std::max<uint64_t>(1, (size + pmtu - 1) / pmtu);
  std::vector<uint16_t> out;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t payload = i + 1 < n ? pmtu : size - i * pmtu;
    uint64_t len = 14 + 20 + 8 + 12 + 4 + payload;
    if (op == Op::kWrite && i == 0) len += 16;
    if (op == Op::kRead && (i == 0 || i + 1 == n)) len += 4;
    out.push_back(static_cast<uint16_t>(len));
  }
  return out;
}

uint64_t iters_for(const Test& t, uint64_t size) {
  if (t.duration_s) return t.iters;
  const uint64_t cap = std::max<uint64_t>(5, (1ull << 30) / size / t.qps);
  return std::min<uint64_t>(t.iters, cap);
}

// Keeps up to tx_depth requests outstanding per QP (and no more than the CQ holds overall),
// round-robin over the QPs, until every QP posted `iters` (or -D seconds passed).
Row client_bw(Run& run, uint64_t size, uint64_t iters) {
  Row r;
  r.size = size;
  const Test& t = run.test;
  const uint32_t nq = t.qps;
  const Slots s{t.verify, iters, size};
  std::vector<uint32_t> outstanding(nq, 0);
  std::vector<uint64_t> posted(nq, 0);
  uint64_t total_posted = 0, total_out = 0;
  // Outstanding requests overall: what the CQ holds, and no more than the wire's queues absorb
  // without dropping (a memif ring is 1024 frames; with 100,000 QPs x depth in flight every
  // drop costs a full ACK timeout).
  const uint64_t cap = std::min<uint64_t>(run.ep.cq_depth - 16, 1024);
  CqDrain d;
  d.done_through.assign(nq, 0);
  std::vector<uint32_t> silent(nq, 0);  // requests since the last that asks for a completion
  PeakMeter peak;
  const uint64_t t0 = clock::now();
  peak.start(t0);
  const uint64_t stop = stop_at(t0, t.duration_s);
  bool posting = true;
  uint32_t cursor = 0;
  const bool prefetch = nq >= 64;  // a few QPs' lines stay cached anyway
  const uint32_t prefetch_posts = std::min<uint32_t>(run.ep.qp_depth, 8);
  uint64_t last_sends = 0;
  while (true) {
    run.rt->poll();
    // The completions this poll produced free their slots before this pass posts, so the engine
    // sends the new requests on the next poll (reaped after the posts, they waited one more).
    poll_cq(run, d, outstanding, size, nullptr, nullptr);
    if (d.sends != last_sends) {
      total_out -= d.sends - last_sends;
      peak.add(d.sends - last_sends, clock::now());
      last_sends = d.sends;
    }
    if (d.errors > 0) {
      r.ok = false;
      r.error = "completion error " + std::string(status_name(d.first_error));
      return r;
    }
    if (posting) {
      // Up to 64 posts per pass, visiting at most 2 x 64 QPs, so 100,000 QPs cost no full scan;
      // the pass ends early once every QP in a row had no room (with its window full, one QP was
      // otherwise looked at 128 times per pass for nothing: a fifth of the client's time at
      // 1 QP). A QP with room gets as many posts as it takes at once, as perftest fills each
      // QP's TX depth, all but the last with NDK_OP_FLAG_DEFER: the engine's doorbell rings once
      // per run of posts instead of once per post (a locked exchange each). As perftest, only
      // every cq_mod-th request asks for a completion (the rest NDK_OP_FLAG_SILENT_SUCCESS: an
      // error still completes); so does the last of each run, so no request waits uncovered.
      unsigned budget = 64, visits = 128;
      uint32_t full_in_a_row = 0;
      while (budget > 0 && visits-- > 0 && total_out < cap && full_in_a_row < nq) {
        const uint32_t q = cursor;
        cursor = cursor + 1 == nq ? 0 : cursor + 1;
        if (prefetch) {
          // Over many QPs each visit's posts write cold lines (the queue's, the slots, the
          // doorbell's entry), and the doorbell's locked exchange waits for them: fetch the
          // queue's line of the QP 12 visits ahead, and the lines its posts write (found in
          // that line) of the QP 4 visits ahead.
          run.ep.qps[q + 12 < nq ? q + 12 : q + 12 - nq]->prefetch_post(0);
          run.ep.qps[q + 4 < nq ? q + 4 : q + 4 - nq]->prefetch_post(prefetch_posts);
        }
        uint64_t room = outstanding[q] < run.ep.qp_depth ? run.ep.qp_depth - outstanding[q] : 0;
        if (!t.duration_s) room = std::min<uint64_t>(room, iters - posted[q]);
        room = std::min<uint64_t>({room, budget, cap - total_out});
        uint64_t k = 0;
        NTSTATUS st = STATUS_SUCCESS;
        for (; k < room; ++k) {
          const bool last = k + 1 == room, signal = last || silent[q] + 1 >= t.cq_mod;
          st = post_one(run, q, posted[q], s, size, t.op,
                        (last ? 0 : NDK_OP_FLAG_DEFER) | (signal ? 0 : NDK_OP_FLAG_SILENT_SUCCESS));
          // A failed post hands the deferred ones before it to the engine (NDK DEFER).
          if (st != STATUS_SUCCESS) break;
          silent[q] = signal ? 0 : silent[q] + 1;
          outstanding[q]++;
          posted[q]++;
          ++total_posted;
          ++total_out;
          --budget;
        }
        // A full queue is retried on a later pass, unless a silent request would be left with no
        // completion after it (outstanding holds a slot until its completion is reaped, after
        // the engine freed it, so the queue is not expected to be full).
        if (st != STATUS_SUCCESS && (st != STATUS_INSUFFICIENT_RESOURCES || silent[q] != 0)) {
          r.ok = false;
          r.error = "post: " + std::string(status_name(st));
          return r;
        }
        full_in_a_row = k == 0 ? full_in_a_row + 1 : 0;  // no room, or the queue full: later
      }
      if (t.duration_s ? clock::now() >= stop : total_posted == iters * nq) posting = false;
    }
    if (!posting && d.sends == total_posted) break;
    if (must_stop(run)) {
      r.ok = false;
      r.error = stop_reason(run) + " with " + std::to_string(total_posted - d.sends) +
                " requests outstanding";
      return r;
    }
  }
  r.iterations = d.sends;
  r.elapsed_s = clock::to_ns(clock::now() - t0) / 1e9;
  r.peak_msgs_per_s = peak.peak;
  return r;
}

Row client_lat(Run& run, uint64_t size, uint64_t iters) {
  Row r;
  r.size = size;
  const Test& t = run.test;
  const Op op = t.op;
  std::vector<uint32_t> outstanding(1, 0);
  std::vector<uint64_t> recvd(1, 0), badlen(1, 0);
  CqDrain d;
  r.lat_us.reserve(iters);
  uint8_t* local = run.ep.buf.data();
  const uint64_t stop = stop_at(clock::now(), t.duration_s);
  const Slots s{false, iters, size};
  uint64_t bad = 0;
  auto drain = [&] {
    run.rt->poll();
    poll_cq(run, d, outstanding, size, &recvd, &badlen);
  };
  // Until `done` holds, a completion error or the deadline.
  auto drain_until = [&](auto done) {
    while (!done() && d.errors == 0 && !must_stop(run)) drain();
  };
  auto post_reply_receive = [&] {  // into the second half of the buffer
    NdkSge sge{local + size, static_cast<uint32_t>(run.recv_len ? run.recv_len : size),
               run.ep.mr->get_local_token()};
    run.ep.qps[0]->receive(nullptr, &sge, 1);
  };
  for (uint64_t i = 0; t.duration_s ? clock::now() < stop : i < iters; ++i) {
    if (t.verify) fill_slot(local, i, size);
    if (op != Op::kRead) local[size - 1] = marker(i);
    const uint64_t t0 = clock::now();
    NTSTATUS st;
    do {
      st = post_one(run, 0, i, s, size, op);
      if (st == STATUS_INSUFFICIENT_RESOURCES) drain();
    } while (st == STATUS_INSUFFICIENT_RESOURCES && !past_deadline());
    if (st != STATUS_SUCCESS) {
      r.ok = false;
      r.error = "post: " + std::string(status_name(st));
      return r;
    }
    if (op == Op::kRead || (op == Op::kWrite && run.passive)) {
      const uint64_t want = d.sends + 1;
      drain_until([&] { return d.sends >= want; });
    } else if (op == Op::kWrite) {
      // The server writes back into our buffer; the last byte turns to this iteration's marker.
      // Our own buffer was the source of the write: the echo must come from the peer, so clear
      // the byte once our write completed.
      drain_until([&] { return d.sends >= i + 1; });
      if (!wait_byte(run, local + size - 1, static_cast<uint8_t>(marker(i) ^ 0x80))) break;
    } else {
      if (run.recv_delay_ms != 0) {
        // The reply's receive goes up only after our SEND completed and a pause: a peer that
        // answers at once meets RNR NAKs and must retry.
        drain_until([&] { return d.sends >= i + 1; });
        const uint64_t until = clock::now() + run.recv_delay_ms * clock::hz() / 1000;
        while (clock::now() < until && d.errors == 0) drain();
        post_reply_receive();
      }
      drain_until([&] { return recvd[0] >= i + 1; });
    }
    const uint64_t t1 = clock::now();
    if (d.errors > 0 || must_stop(run)) break;
    r.lat_us.push_back(clock::to_ns(t1 - t0) / 1e3);
    if (t.verify) {
      // READ: our buffer now holds the server's slot-0 pattern; SEND/WRITE: the echo of ours.
      // A passive target sends nothing back: the CM client reads its region back after the run.
      if (op == Op::kRead)
        bad += check_slot(local, 0, size);
      else if (!run.passive)
        bad += op == Op::kSend ? check_slot(local + size, i, size - 1) + badlen[0]
                               : check_slot(local, i, size - 1);
    }
    if (op == Op::kSend && run.recv_delay_ms == 0) post_reply_receive();  // the next echo's
  }
  if (d.errors > 0) {
    r.ok = false;
    r.error = "completion error " + std::string(status_name(d.first_error));
  } else if (must_stop(run)) {
    r.ok = false;
    r.error = stop_reason(run);
  } else if (bad > 0) {
    r.ok = false;
    r.error = "verify: " + std::to_string(bad) + " bytes differ";
  }
  r.iterations = r.lat_us.size();
  return r;
}

ReportMsg server_size(Run& run, uint64_t size, uint64_t iters) {
  ReportMsg rep;
  const Test& t = run.test;
  const Op op = t.op;
  const uint32_t nq = t.qps;
  const Slots s{t.verify, iters, size};
  std::vector<uint32_t> outstanding(nq, 0);
  std::vector<uint64_t> recvd(nq, 0), badlen(nq, 0), rposted(nq, 0);
  CqDrain d;
  uint8_t* local = run.ep.buf.data();
  const bool lat = !t.bw();
  auto post_recv = [&](uint32_t q, uint64_t j) {
    const uint64_t off = lat ? size : s.offset(q, j);
    NdkSge sge{local + off, static_cast<uint32_t>(size), run.ep.mr->get_local_token()};
    return run.ep.qps[q]->receive(nullptr, &sge, 1);
  };
  auto drain = [&] {
    run.rt->poll();
    poll_cq(run, d, outstanding, size, &recvd, &badlen);
  };
  if (op == Op::kSend) {
    for (uint32_t q = 0; q < nq; ++q)
      for (uint32_t k = 0; k < run.ep.rx_depth && (t.duration_s || rposted[q] < iters); ++k)
        if (post_recv(q, rposted[q]) == STATUS_SUCCESS) rposted[q]++;
  }
  if (op == Op::kRead && t.verify) {
    for (uint32_t q = 0; q < nq; ++q)
      for (uint64_t i = 0; i < (lat ? 1 : iters); ++i)
        fill_slot(local + s.offset(q, i), s.slot(q, i), size);
  }
  run.oob->send(kSizeReady, nullptr, 0);

  DoneMsg done{};
  bool have_done = false;
  std::vector<uint8_t> payload;
  uint32_t type = 0;
  clock::Ticker oob_check(clock::hz() / 1000);
  for (uint64_t i = 0;;) {
    drain();
    if (op == Op::kSend && !lat) {
      for (uint32_t q = 0; q < nq; ++q)
        while (rposted[q] - recvd[q] < run.ep.rx_depth && (t.duration_s || rposted[q] < iters) &&
               post_recv(q, rposted[q]) == STATUS_SUCCESS)
          rposted[q]++;
    }
    if (lat && op != Op::kRead) {
      // Echo iteration i back as soon as it arrived.
      const bool arrived = op == Op::kWrite
                               ? __atomic_load_n(local + size - 1, __ATOMIC_ACQUIRE) == marker(i)
                               : recvd[0] > i;
      if (arrived) {
        uint8_t* src = op == Op::kWrite ? local : local + size;
        if (t.verify) rep.bad_bytes += check_slot(src, i, size - 1) + badlen[0];
        if (op == Op::kSend) {
          post_recv(0, i + 1);
          rposted[0]++;
        }
        src[size - 1] = static_cast<uint8_t>(marker(i) ^ (op == Op::kWrite ? 0x80 : 0));
        NdkSge sge{src, static_cast<uint32_t>(size), run.ep.mr->get_local_token()};
        NTSTATUS st;
        do {
          st = op == Op::kWrite
                   ? run.ep.qps[0]->write(nullptr, &sge, 1, run.peer[0].addr, run.peer[0].rkey, 0)
                   : run.ep.qps[0]->send(nullptr, &sge, 1, 0);
          if (st == STATUS_INSUFFICIENT_RESOURCES) drain();
        } while (st == STATUS_INSUFFICIENT_RESOURCES && !past_deadline());
        ++i;
        continue;
      }
    }
    if (oob_check.due()) {
      if (!have_done && run.oob->try_recv(&type, &payload)) {
        if (type != kDone || payload.size() != sizeof(DoneMsg)) {
          rep.errors++;
          break;
        }
        std::memcpy(&done, payload.data(), sizeof(done));
        have_done = true;
      }
      if (run.oob->peer_closed() || past_deadline()) {
        rep.errors++;
        break;
      }
    }
    // SEND bw: every message the client completed has been received (it was ACKed after
    // delivery, IBTA 9.7.5.1.1); the rest of the server's work is done.
    if (have_done && (op != Op::kSend || lat || total_of(recvd) >= done.messages)) break;
  }
  rep.received = op == Op::kSend ? total_of(recvd) : done.messages;
  rep.errors += d.errors;
  // Only a run the client finished is checked: after a time limit the unsent slots would
  // read as mismatches (the client reports the time limit itself).
  const bool finished = have_done && done.messages == uint64_t{nq} * iters;
  if (t.verify && !lat && finished && (op == Op::kWrite || op == Op::kSend)) {
    for (uint32_t q = 0; q < nq; ++q)
      for (uint64_t i = 0; i < iters; ++i)
        rep.bad_bytes += check_slot(local + s.offset(q, i), s.slot(q, i), size);
    for (uint32_t q = 0; q < nq; ++q) rep.bad_bytes += badlen[q];
  }
  return rep;
}

Row send_bw_echo(Run& run, EchoState& es, uint64_t size, uint64_t iters) {
  Row r;
  r.size = size;
  const Test& t = run.test;
  const uint32_t nq = t.qps;
  std::vector<uint64_t> posted(nq, 0);
  uint64_t total_posted = 0, total_echoed = 0, total_sends = 0, bad = 0;
  PeakMeter peak;
  const uint64_t t0 = clock::now();
  peak.start(t0);
  const uint64_t stop = stop_at(t0, t.duration_s);
  bool posting = true;
  NdkResultEx res[64];
  auto send_off = [&](uint64_t q, uint64_t k) {
    return t.verify ? (q * es.window + k % es.window) * es.max_size : 0;
  };
  auto recv_off = [&](uint64_t q, uint64_t k) {
    return es.recv_base + (q * es.window + k % es.window) * es.max_size;
  };
  // Our pattern for message k of QP q, unique across QPs.
  auto slot_of = [](uint64_t q, uint64_t k) { return (q << 32) | k; };
  while (true) {
    run.rt->poll();
    if (posting) {
      for (uint32_t q = 0; q < nq; ++q) {
        while (es.sent[q] - std::min(es.send_done[q], es.echoed[q]) < es.window &&
               (t.duration_s || posted[q] < iters)) {
          uint8_t* p = run.ep.buf.data() + send_off(q, es.sent[q]);
          if (t.verify) fill_slot(p, slot_of(q, es.sent[q]), size);
          NdkSge sge{p, static_cast<uint32_t>(size), run.ep.mr->get_local_token()};
          const NTSTATUS st = run.ep.qps[q]->send(nullptr, &sge, 1, 0);
          if (st == STATUS_INSUFFICIENT_RESOURCES) break;
          if (st != STATUS_SUCCESS) {
            r.ok = false;
            r.error = "post: " + std::string(status_name(st));
            return r;
          }
          ++es.sent[q];
          ++posted[q];
          ++total_posted;
        }
      }
      if (t.duration_s ? clock::now() >= stop : total_posted == iters * nq) posting = false;
    }
    const uint32_t n = run.ep.cq->get_results_ex(res, 64);
    for (uint32_t j = 0; j < n; ++j) {
      const NdkResultEx& x = res[j];
      const auto q = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(x.qp_context));
      if (x.status != STATUS_SUCCESS) {
        r.ok = false;
        r.error = "completion error " + std::string(status_name(x.status));
        return r;
      }
      if (x.type == NdkOperationType::kReceive) {
        const uint64_t k = es.echoed[q]++;
        uint8_t* p = run.ep.buf.data() + recv_off(q, k);
        if (t.verify)
          bad += check_slot(p, slot_of(q, k), size) + (x.bytes_transferred != size ? 1 : 0);
        NdkSge sge{p, static_cast<uint32_t>(es.max_size), run.ep.mr->get_local_token()};
        run.ep.qps[q]->receive(nullptr, &sge, 1);  // the slot takes echo k + window
        ++total_echoed;
      } else {
        ++es.send_done[q];
        ++total_sends;
        peak.add(1, clock::now());
      }
    }
    if (!posting && total_sends == total_posted && total_echoed == total_posted) break;
    if (must_stop(run)) {
      r.ok = false;
      r.error = stop_reason(run) + " with " + std::to_string(total_posted - total_echoed) +
                " echoes missing";
      return r;
    }
  }
  r.iterations = total_posted;
  r.elapsed_s = clock::to_ns(clock::now() - t0) / 1e9;
  r.peak_msgs_per_s = peak.peak;
  if (bad > 0) {
    r.ok = false;
    r.error = "verify: " + std::to_string(bad) + " bytes of the echoes differ";
  }
  return r;
}

bool transfer(Run& run, Op op, uint64_t local_off, uint64_t remote_off, uint64_t len,
              std::string* err) {
  constexpr uint64_t kChunk = 65536;
  const uint64_t n = (len + kChunk - 1) / kChunk;
  const uint64_t window = std::min<uint64_t>(run.ep.qp_depth, 8);
  uint64_t posted = 0, done = 0;
  NdkResultEx r[16];
  Qp* qp = run.ep.qps[0];
  while (done < n) {
    while (posted < n && posted - done < window) {
      const uint64_t off = posted * kChunk, k = std::min(kChunk, len - off);
      NdkSge sge{run.ep.buf.data() + local_off + off, static_cast<uint32_t>(k),
                 run.ep.mr->get_local_token()};
      const uint64_t raddr = run.peer[0].addr + remote_off + off;
      const NTSTATUS st = op == Op::kWrite ? qp->write(nullptr, &sge, 1, raddr, run.peer[0].rkey, 0)
                                           : qp->read(nullptr, &sge, 1, raddr, run.peer[0].rkey, 0);
      if (st == STATUS_INSUFFICIENT_RESOURCES) break;
      if (st != STATUS_SUCCESS) {
        *err = "post: " + std::string(status_name(st));
        return false;
      }
      ++posted;
    }
    run.rt->poll();
    const uint32_t k = run.ep.cq->get_results_ex(r, 16);
    for (uint32_t j = 0; j < k; ++j) {
      if (r[j].status != STATUS_SUCCESS) {
        *err = std::string(op == Op::kWrite ? "WRITE" : "READ") +
               " of the region: " + std::string(status_name(r[j].status));
        return false;
      }
      if (r[j].type != NdkOperationType::kReceive) ++done;
    }
    if (past_deadline()) {
      *err = "time limit reached";
      return false;
    }
  }
  return true;
}

}  // namespace rocedp::perf
