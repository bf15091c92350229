// Fuzzes the CM state machine (control/cm_connection.*) with scripts: an active connection A and a
// passive one B exchange MADs through queues (encoded and decoded on the way, as on the wire),
// and the input decides, step by step, which consumer call runs, which message is delivered,
// lost, duplicated or altered, when time jumps and when a peer's arbitrary MAD arrives.
// Properties: no memory error or undefined behaviour (ASan+UBSan); every MAD a machine sends
// decodes; each outcome event at most once (Connect's and Accept's completions, the peer's
// disconnect, our disconnect's completion); nothing but kReleased after the consumer's close,
// nothing at all after kReleased; and once both consumers closed, the exchange ends: both machines
// reach CLOSED and report kReleased within bounded time (an entry the agent never frees is a leak).
//
// Each script byte is an operation (byte % kOps, below); some read argument bytes after it.
// Seeds: tests/fuzz/seeds/cm_connection/, written by tests/fuzz/make_seeds.py.
#include <array>
#include <deque>
#include <vector>

#include "control/cm_connection.hpp"
#include "tests/cm/cm_pair_params.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

using namespace rocedp;
using namespace rocedp::control;
using namespace rocedp::wire;

constexpr std::uint64_t kMs = 1'000'000;

struct Side : CmSink {
  std::deque<CmMad> out;  // sent, not yet delivered
  std::array<int, static_cast<std::size_t>(CmEventType::kReleased) + 1> count{};  // per event type
  bool closed = false;    // the consumer closed it
  bool released = false;  // kReleased came

  void cm_send(const CmMad& m) override {
    const auto bytes = encode_cm_mad(m);
    CmMad d;
    FUZZ_CHECK(decode_cm_mad(bytes, d) == CmDecodeStatus::kOk);
    out.push_back(d);
  }
  void cm_event(const CmEvent& e) override {
    FUZZ_CHECK(!released);
    if (closed) FUZZ_CHECK(e.type == CmEventType::kReleased);
    const auto t = static_cast<std::size_t>(e.type);
    ++count.at(t);
    FUZZ_CHECK(count[t] == 1);  // each outcome once (one connect, one accept per machine)
    released = e.type == CmEventType::kReleased;
  }
};

struct World {
  CmConfig cfg_a{.tid_hi = 7, .mra_service_timeout = 16, .timewait_ns = 500 * kMs};
  CmConfig cfg_b{.tid_hi = 9, .mra_service_timeout = 16, .timewait_ns = 500 * kMs};
  Side sa, sb;
  CmConnection a{sa, cfg_a};
  CmConnection b{sb, cfg_b};
  std::uint64_t now = 1000;
  std::vector<std::uint8_t> pd = std::vector<std::uint8_t>(kMaxCallerData, 0xC1);

  CmConnectParams connect_params() const {
    CmConnectParams p = test::pair_connect_params(pd);
    p.cm_response_timeout = 14;  // 67 ms a try
    p.max_cm_retries = 3;
    return p;
  }

  // What B's owner does: a REQ while B is idle starts the passive side; the rest is B's.
  void to_b(const CmMad& m) {
    if (b.state() == CmState::kIdle && std::holds_alternative<CmReq>(m.body)) {
      (void)b.on_request(m, test::kPassiveCommId, test::passive_ca_guid(), now);
      return;
    }
    b.on_message(m, now);
  }
  void deliver(bool a_to_b, const CmMad& m) {
    if (a_to_b)
      to_b(m);
    else
      a.on_message(m, now);
  }
  std::deque<CmMad>& queue(bool a_to_b) { return a_to_b ? sa.out : sb.out; }
  bool pop(bool a_to_b, CmMad& m) {
    auto& q = queue(a_to_b);
    if (q.empty()) return false;
    m = q.front();
    q.pop_front();
    return true;
  }
  void timers() {
    if (now >= a.next_timeout_ns()) a.on_timer(now);
    if (now >= b.next_timeout_ns()) b.on_timer(now);
  }
  // Jumps to the earliest deadline and fires it; false when none is armed.
  bool tick() {
    const std::uint64_t t = std::min(a.next_timeout_ns(), b.next_timeout_ns());
    if (t == CmConnection::kNoTimeout) return false;
    now = std::max(now, t);
    timers();
    return true;
  }
  void close(bool side) {
    Side& s = side ? sa : sb;
    s.closed = true;
    (side ? a : b).close(now);
  }

  void run(Script& s) {
    CmMad m;
    switch (s.next() % 19) {
      case 0:
        (void)a.connect(connect_params(), now);
        break;
      case 1:
        if (pop(true, m)) deliver(true, m);
        break;
      case 2:
        if (pop(false, m)) deliver(false, m);
        break;
      case 3:
        (void)b.accept(test::pair_accept_params(pd), now);
        break;
      case 4:
        (void)b.reject(pd, now);
        break;
      case 5:
        (void)b.send_mra(now);
        break;
      case 6:
        (void)a.complete_connect(now);
        break;
      case 7:
        (void)a.disconnect(now);
        break;
      case 8:
        (void)b.disconnect(now);
        break;
      case 9:
        close(true);
        break;
      case 10:
        close(false);
        break;
      case 11:
        tick();
        break;
      case 12:
        now += s.next() * kMs;
        timers();
        break;
      case 13: {  // the next message of a direction, one byte of it altered
        const std::uint8_t dir = s.next();
        const std::uint8_t at = s.next();
        const std::uint8_t x = s.next();
        if (!pop((dir & 1) != 0, m)) break;
        auto bytes = encode_cm_mad(m);
        bytes[at % bytes.size()] ^= x;
        CmMad d;
        if (decode_cm_mad(bytes, d) == CmDecodeStatus::kOk) deliver((dir & 1) != 0, d);
        break;
      }
      case 14:
        (void)pop((s.next() & 1) != 0, m);
        break;    // lost
      case 15: {  // duplicated
        auto& q = queue((s.next() & 1) != 0);
        if (!q.empty()) q.push_back(q.front());
        break;
      }
      case 16:
        b.communication_established(now);
        break;
      case 17:
        if ((s.next() & 1) != 0)
          a.stale(now);
        else
          b.stale(now);
        break;
      case 18: {  // a MAD of the peer's making, to either side
        const bool a_to_b = (s.next() & 1) != 0;
        std::array<std::uint8_t, kMadLen> bytes{};
        for (auto& byte : bytes) byte = s.next();
        CmMad d;
        if (decode_cm_mad(bytes, d) == CmDecodeStatus::kOk) deliver(a_to_b, d);
        break;
      }
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  World w;
  Script s{data, size};
  for (int ops = 0; s.more() && ops < 256; ++ops) w.run(s);
  // Both consumers close; the machines finish their exchange over a clean wire.
  if (!w.sa.closed) w.close(true);
  if (!w.sb.closed) w.close(false);
  for (int i = 0; i < 1000 && !(w.sa.released && w.sb.released); ++i) {
    for (int guard = 0; guard < 1000 && !(w.sa.out.empty() && w.sb.out.empty()); ++guard) {
      CmMad m;
      if (w.pop(true, m)) w.deliver(true, m);
      if (w.pop(false, m)) w.deliver(false, m);
    }
    if (!w.tick()) break;
  }
  FUZZ_CHECK(w.sa.released && w.sb.released);
  FUZZ_CHECK(w.a.state() == CmState::kClosed && w.b.state() == CmState::kClosed);
  return 0;
}
