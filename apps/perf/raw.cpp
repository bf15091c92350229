#include "apps/perf/raw.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "apps/perf/clock.hpp"
#include "apps/perf/loops.hpp"
#include "apps/perf/perf_util.hpp"
#include "control/raw_port.hpp"  // the one internal header of rocedp-perf (README "rocedp-perf")

namespace rocedp::perf {
namespace {

using control::RawPort;

bool past_deadline() {
  return clock::deadline().passed();
}

// Ethernet + IPv4 + UDP (destination 4791) of every frame, from a template (the RDMA run also
// builds every frame's headers into a fresh buffer); BTH and payload are left as the buffer held.
constexpr size_t kHeaderLen = 42;
struct Header {
  uint8_t bytes[kHeaderLen] = {};
};

void put_be(uint8_t* p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}

Header header_for(const PortInfo& me, const QpInfo& peer) {
  Header h;
  uint8_t* b = h.bytes;
  std::memcpy(b, peer.mac, 6);
  std::memcpy(b + 6, me.mac.data(), 6);
  put_be(b + 12, 0x0800, 2);  // IPv4
  b[14] = 0x45;               // version 4, 20-byte header
  b[22] = 64;                 // TTL
  b[23] = 17;                 // UDP
  put_be(b + 26, me.ip, 4);
  put_be(b + 30, peer.ip, 4);
  put_be(b + 34, 0xC000, 2);  // UDP source port
  put_be(b + 36, 4791, 2);    // RoCEv2
  return h;
}

// Sends `n` frames, sizes cycling through `sizes` from index `first`; false on the time limit.
bool send_frames(RawPort& port, const Header& h, const std::vector<uint16_t>& sizes, uint64_t first,
                 uint64_t n) {
  uint16_t lens[RawPort::kBurst];
  uint64_t sent = 0;
  while (sent < n) {
    const unsigned want = static_cast<unsigned>(std::min<uint64_t>(RawPort::kBurst, n - sent));
    for (unsigned k = 0; k < want; ++k) lens[k] = sizes[(first + sent + k) % sizes.size()];
    unsigned done = 0;
    while (done < want) {
      const unsigned k = port.send(h.bytes, kHeaderLen, lens + done, want - done);
      done += k;
      if (k == 0) {
        port.backoff();
        if (past_deadline()) return false;
      }
    }
    sent += want;
  }
  return true;
}

// Flow control of raw bw, so the baseline is a fair wire ceiling rather than a flood: like
// RDMA's send window, the sender keeps at most min(tx_depth x QPs, 1024) messages' frames
// unacknowledged; the receiver returns a credit frame (cumulative frames received) every
// credit_every frames, as an RC responder returns coalesced ACKs.
constexpr uint8_t kCreditMagic[4] = {'R', 'D', 'P', 'C'};
constexpr size_t kCreditLen = kHeaderLen + 4 + 8;  // header, magic, u64 frames

uint64_t window_frames(const Test& t, uint64_t fpm) {
  return std::min<uint64_t>(static_cast<uint64_t>(t.tx_depth) * t.qps, 1024) * fpm;
}
uint64_t credit_every(uint64_t window) {
  return std::max<uint64_t>(1, std::min<uint64_t>(32, window / 4));
}

// Receiver: one credit frame; false if no buffer or no TX room (the caller tries again later).
bool send_credit(RawPort& port, const Header& h, uint64_t frames) {
  uint8_t b[kCreditLen];
  std::memcpy(b, h.bytes, kHeaderLen);
  std::memcpy(b + kHeaderLen, kCreditMagic, 4);
  std::memcpy(b + kHeaderLen + 4, &frames, 8);
  const uint16_t len = 64;  // padded to Ethernet's minimum
  return port.send(b, sizeof(b), &len, 1) == 1;
}

// Sender: drains RX; the highest credit seen, or `credited` if none came.
uint64_t take_credits(RawPort& port, uint64_t credited) {
  port.receive(
      [](void* ctx, const uint8_t* p, uint16_t len) {
        auto* c = static_cast<uint64_t*>(ctx);
        if (len >= kCreditLen && std::memcmp(p + kHeaderLen, kCreditMagic, 4) == 0) {
          uint64_t v = 0;
          std::memcpy(&v, p + kHeaderLen + 4, 8);
          *c = std::max(*c, v);
        }
      },
      &credited);
  return credited;
}

uint64_t frames_per_message(const Test& t, const PortInfo& me, const QpInfo& peer, uint64_t size,
                            std::vector<uint16_t>* sizes = nullptr) {
  const uint32_t pmtu = std::min(path_mtu_for(me.mtu), path_mtu_for(peer.mtu));
  std::vector<uint16_t> s = frame_sizes(t.op, size, pmtu);
  const uint64_t n = s.size();
  if (sizes != nullptr) *sizes = std::move(s);
  return n;
}

// Latency: one message's frames out, then wait until as many frames came back (bounced by a
// rocedp-perf server or a reflector); the round trip of each. Fewer rows than asked when the time
// limit passed.
void bounce_loop(RawPort& port, const Test& t, const Header& h, const std::vector<uint16_t>& sizes,
                 uint64_t iters, Row* r) {
  const uint64_t fpm = sizes.size();
  const uint64_t stop = t.duration_s ? clock::now() + t.duration_s * clock::hz() : UINT64_MAX;
  r->lat_us.reserve(t.duration_s ? 1 << 16 : iters);
  for (uint64_t i = 0; t.duration_s ? clock::now() < stop : i < iters; ++i) {
    const uint64_t t0 = clock::now();
    if (!send_frames(port, h, sizes, 0, fpm)) break;
    uint64_t back = 0;
    while (back < fpm && !past_deadline()) back += port.receive(nullptr, nullptr);
    if (back < fpm) break;
    r->lat_us.push_back(clock::to_ns(clock::now() - t0) / 1e3);
  }
  r->iterations = r->lat_us.size();
}

}  // namespace

RawBaseline::RawBaseline(std::unique_ptr<RawPort> port) : port_(std::move(port)) {}
RawBaseline::~RawBaseline() = default;

std::unique_ptr<RawBaseline> RawBaseline::open(const config::Config& cfg, std::string* err) {
  auto port = RawPort::open(cfg, "rocedp-perf", err);
  if (!port) return nullptr;
  return std::unique_ptr<RawBaseline>(new RawBaseline(std::move(port)));
}

PortInfo RawBaseline::port() const {
  return port_->port();
}
bool RawBaseline::link_up() const {
  return port_->link_up();
}
bool RawBaseline::wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  return port_->wait_until(pred, timeout);
}
bool RawBaseline::stop() {
  return port_->stop();
}

Row RawBaseline::client(const Test& t, const QpInfo& peer, uint64_t size, uint64_t iters, Oob& oob,
                        ReportMsg* rep, std::string* err) {
  Row r;
  r.size = size;
  const PortInfo me = port();
  std::vector<uint16_t> sizes;
  const uint64_t fpm = frames_per_message(t, me, peer, size, &sizes);
  r.frames_per_msg = static_cast<uint32_t>(fpm);
  const Header h = header_for(me, peer);
  const uint64_t stop = t.duration_s ? clock::now() + t.duration_s * clock::hz() : UINT64_MAX;
  uint64_t msgs = 0;
  if (t.bw()) {
    // Messages in chunks of 32 frames' worth, so -D is checked often.
    const uint64_t chunk = std::max<uint64_t>(1, RawPort::kBurst / fpm);
    // The same number of messages as the RDMA run: iters per QP, over every QP.
    const uint64_t total = iters * t.qps;
    const uint64_t window = window_frames(t, fpm);
    uint64_t credited = 0;  // frames the receiver said it has
    while (t.duration_s ? clock::now() < stop : msgs < total) {
      const uint64_t k = t.duration_s ? chunk : std::min(chunk, total - msgs);
      credited = take_credits(*port_, credited);
      if ((msgs + k) * fpm - credited > window) {  // window full: wait for a credit
        if (past_deadline()) break;
        continue;
      }
      if (!send_frames(*port_, h, sizes, msgs * fpm, k * fpm)) break;
      msgs += k;
    }
    r.iterations = msgs;
  } else {
    bounce_loop(*port_, t, h, sizes, iters, &r);
    msgs = r.iterations;
  }
  if (std::getenv("ROCEDP_PERF_DEBUG") != nullptr)
    std::fprintf(stderr, "raw: no_mbuf %lu tx_full %lu\n",
                 static_cast<unsigned long>(port_->no_buffer()),
                 static_cast<unsigned long>(port_->tx_full()));
  const DoneMsg d{msgs, msgs * fpm};
  oob.send(kDone, d);
  if (!oob.recv_struct(kReport, rep, nullptr, err)) {
    r.ok = false;
    r.error = *err;
    return r;
  }
  if (past_deadline()) {
    r.ok = false;
    r.error = "time limit reached";
  } else if (t.bw()) {
    if (rep->received != d.frames) {
      r.ok = false;
      r.error = "raw: the server received " + std::to_string(rep->received) + " of " +
                std::to_string(d.frames) + " frames";
    }
    // The wire's rate is what the receiver saw: first to last frame.
    r.elapsed_s = static_cast<double>(rep->span_ns) / 1e9;
    r.peak_msgs_per_s = rep->peak_per_s / static_cast<double>(fpm);
  }
  return r;
}

Row RawBaseline::reflected(const Test& t, const QpInfo& peer, uint64_t size, uint64_t iters) {
  Row r;
  r.size = size;
  std::vector<uint16_t> sizes;
  r.frames_per_msg = static_cast<uint32_t>(frames_per_message(t, port(), peer, size, &sizes));
  const Header h = header_for(port(), peer);
  // A reflector drops what comes before it forwards (testpmd starts forwarding after its link is
  // up, and so after ours): one message at a time until one comes back whole (100 ms each), then
  // whatever else comes back late is drained, so the timed bounces start on an empty link.
  for (bool back = false; !back;) {
    if (past_deadline() || !send_frames(*port_, h, sizes, 0, sizes.size())) {
      r.ok = false;
      r.error = "time limit reached: nothing came back from the reflector";
      return r;
    }
    uint64_t got = 0;
    const uint64_t until = clock::now() + clock::hz() / 10;
    while (got < sizes.size() && clock::now() < until) got += port_->receive(nullptr, nullptr);
    back = got >= sizes.size();
  }
  for (const uint64_t until = clock::now() + clock::hz() / 100; clock::now() < until;)
    port_->receive(nullptr, nullptr);
  bounce_loop(*port_, t, h, sizes, iters, &r);
  if (r.iterations == 0 || (t.duration_s == 0 && r.iterations < iters)) {
    r.ok = false;
    r.error = past_deadline() ? "time limit reached: the reflector did not return every frame"
                              : "the port did not take the frames";
  }
  return r;
}

ReportMsg RawBaseline::server_size(const Test& t, const QpInfo& peer, uint64_t size, Oob& oob) {
  ReportMsg rep;
  const bool lat = !t.bw();
  const PortInfo me = port();
  const uint64_t fpm = frames_per_message(t, me, peer, size);
  oob.send(kSizeReady, nullptr, 0);
  uint64_t first = 0, last = 0, last_progress = clock::now();
  clock::Ticker oob_check(clock::hz() / 1000);
  PeakMeter peak;
  DoneMsg done{};
  bool have_done = false;
  std::vector<uint8_t> payload;
  uint32_t type = 0;
  const Header credit_header = header_for(me, peer);
  const uint64_t every = credit_every(window_frames(t, fpm));
  uint64_t credited = 0;
  for (;;) {
    const unsigned n = port_->receive(nullptr, nullptr, /*bounce=*/lat);
    if (n > 0) {
      const uint64_t now = clock::now();
      if (rep.received == 0) {
        first = now;
        peak.start(now);
      }
      last = now;
      last_progress = now;
      rep.received += n;
      peak.add(n, now);
      if (!lat && rep.received - credited >= every &&
          send_credit(*port_, credit_header, rep.received))
        credited = rep.received;
      continue;
    }
    // Idle: a credit owed for fewer than `every` frames still goes out (the sender may be
    // waiting for it at the end of a window).
    if (!lat && rep.received != credited && send_credit(*port_, credit_header, rep.received))
      credited = rep.received;
    if (oob_check.due()) {
      if (!have_done && oob.try_recv(&type, &payload) && type == kDone &&
          payload.size() == sizeof(DoneMsg)) {
        std::memcpy(&done, payload.data(), sizeof(done));
        have_done = true;
      }
      if (oob.peer_closed() || past_deadline()) {
        rep.errors++;
        break;
      }
      // Done when every frame the client sent is here, or nothing came for 0.5 s after its DONE.
      if (have_done &&
          (lat || rep.received >= done.frames || clock::now() - last_progress > clock::hz() / 2))
        break;
    }
  }
  // The span from the first to the last frame covers received-1 inter-frame gaps.
  rep.span_ns = rep.received > 1 ? static_cast<uint64_t>(clock::to_ns(last - first) *
                                                         static_cast<double>(rep.received) /
                                                         static_cast<double>(rep.received - 1))
                                 : 0;
  rep.peak_per_s = peak.peak;
  return rep;
}

}  // namespace rocedp::perf
