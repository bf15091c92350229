// rocedpd's perftest service (control/services.hpp): a perftest client's session, its control
// connection's messages answered as perftest's server answers them (rocedp/perftest.hpp has the
// messages). Control thread only; the data connections run as the echo's do (services.cpp).

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "control/cm_agent.hpp"
#include "control/ndk_internal.hpp"
#include "control/service_state.hpp"
#include "control/services.hpp"
#include "control/sock_addr.hpp"
#include "pmd/log.hpp"
#include "rocedp/perftest.hpp"

namespace rocedp::control {

using pmd::LogLevel;
namespace slots = control_slots;

// A connection from a client whose session is between its two zero messages is one of its data
// connections; any other starts a session as its control connection (perftest connects that one
// first). Two clients of one address setting up at the same time cannot be told apart here: the
// first such session takes the connection, and a key, which names its client's QP, moves it to
// its own session (data_for_key).
void Services::join_session(Conn* c, const NdkSockAddr& peer) {
  const wire::IpAddress client = ip_of(peer);
  if (const Connector::State* st = ndk_detail::Access::state(*c->connector))
    c->peer_qpn = st->remote_qpn;
  for (const auto& s : sessions_) {
    if (s->svc == c->svc && s->client == client && s->phase == Session::Phase::kConnecting &&
        s->control != nullptr && !s->control->closing) {
      c->session = s.get();
      s->data.push_back(c);
      return;
    }
  }
  auto s = std::make_unique<Session>();
  s->svc = c->svc;
  s->client = client;
  s->control = c;
  c->session = s.get();
  sessions_.push_back(std::move(s));
  ++c->svc->counts.sessions;
}

// A connection closed: its session forgets it, and ends once none of its connections is left.
void Services::leave_session(Conn* c) {
  Session* s = c->session;
  if (s == nullptr) return;
  if (s->control == c)
    s->control = nullptr;
  else
    s->data.erase(std::remove(s->data.begin(), s->data.end(), c), s->data.end());
  c->session = nullptr;
  if (s->control != nullptr || !s->data.empty() || s->tcp_fd >= 0) return;
  sessions_.erase(std::find_if(sessions_.begin(), sessions_.end(),
                               [s](const auto& owned) { return owned.get() == s; }));
}

namespace {
// Whether `other` is a session of `s`'s client (the same listener and address) past its preamble,
// so one whose data connections may be `s`'s.
bool same_client(const Services::Session& s, const Services::Session& other) {
  return other.svc == s.svc && other.client == s.client && !other.tcp &&
         other.phase != Services::Session::Phase::kPreamble;
}
}  // namespace

// The data connection of `s` whose client QP is `qpn`, the QP its key names: in `s`, or in a
// session of the same client that took it while both set up (then it moves to `s`). Null when no
// data connection of that client has it.
Services::Conn* Services::data_for_key(Session& s, uint32_t qpn) {
  for (const auto& other : sessions_) {
    if (!same_client(s, *other)) continue;
    const auto it = std::find_if(other->data.begin(), other->data.end(),
                                 [qpn](const Conn* d) { return d->peer_qpn == qpn; });
    if (it == other->data.end()) continue;
    Conn* d = *it;
    if (other.get() != &s) {
      other->data.erase(it);
      s.data.push_back(d);
      d->session = &s;
      ++s.svc->counts.data_moved;
    }
    return d;
  }
  return nullptr;
}

NTSTATUS Services::post_control_receives(Conn* c) {
  NTSTATUS st = STATUS_SUCCESS;
  for (uint32_t slot = slots::kFirstReceive; slot < slots::kFirstReceive + slots::kReceives;
       ++slot) {
    NdkSge sge{c->buf.get() + slot * slots::kBytes, slots::kBytes, c->mr->get_local_token()};
    st = c->qp->receive(slot_context(slot, false), &sge, 1);
    if (st != STATUS_SUCCESS) break;
  }
  c->receives_posted = st == STATUS_SUCCESS;
  return st;
}

// The control connection's completions: each message that arrived is answered; the keepalive's
// completion clears it. Not STATUS_SUCCESS once the connection must end: a request failed (the
// client is gone), or the client sent what perftest never sends.
NTSTATUS Services::poll_control(Conn* c, std::chrono::steady_clock::time_point now) {
  NdkResultEx results[8];
  uint32_t n;
  while ((n = c->cq->get_results_ex(results, 8)) != 0) {
    for (uint32_t i = 0; i < n; ++i) {
      const NdkResultEx& r = results[i];
      if (r.status == STATUS_CANCELLED) continue;  // flushed: the connection is ending
      if (r.status != STATUS_SUCCESS) return r.status;
      const auto ctx = reinterpret_cast<uintptr_t>(r.request_context);
      if (ctx == 0) {
        c->probe_outstanding = false;  // the keepalive
        continue;
      }
      if ((ctx & 1) != 0) continue;  // a reply left
      if (const NTSTATUS st = answer(c, static_cast<uint32_t>(ctx >> 1), r.bytes_transferred);
          st != STATUS_SUCCESS)
        return st;
    }
  }
  return keepalive(c, now);
}

namespace {

// As perftest prints them: bandwidth with 2 decimals, the message rate with 6.
std::string number(double v, int decimals) {
  char text[48];
  std::snprintf(text, sizeof(text), "%.*f", decimals, v);
  return text;
}

}  // namespace

// What every key of data connection `d` names, over either exchange: its QP, the reads it takes
// and the listener's region (the caller adds the GID, and over TCP the PSN).
perf::PerftestKey Services::service_key(const Conn* d) const {
  perf::PerftestKey key;
  key.out_reads = max_inbound_reads();
  key.qpn = d->qp != nullptr ? d->qp->qpn() : 0;
  key.rkey = d->svc->mr->get_remote_token();
  key.vaddr = reinterpret_cast<uint64_t>(d->svc->region.get());
  return key;
}

// The messages both exchanges answer alike: the version, the system data and the fields of the
// client's bandwidth report (logged once whole). The reply, of the same length, goes to `out`.
void Services::answer_common(Session& s, const uint8_t* in, size_t len, uint8_t* out,
                             std::string* refused, const std::string& peer) {
  if (len == perf::kVersionSize) {
    std::string version;
    if (!perf::version_compatible(in, &version))
      *refused = "perftest version " + version + " (older than 5.70)";
    perf::encode_version(out);
  } else if (len == 4) {
    // System data: the cycle buffer (a page), then the cache line.
    perf::put_be32(out, s.system_messages++ == 0 ? 4096 : 64);
  } else {
    // The client's bandwidth report (WRITE and READ bandwidth), a field at a time; ours is zeros
    // (perftest's server prints the client's).
    std::memcpy(s.report[s.report_fields++], in, perf::kReportFieldSize);
    if (s.report_fields == 5) {
      s.report_fields = 0;
      ++s.svc->counts.reports;
      pmd::log(LogLevel::kInfo, "perftest_report",
               {{"peer", peer},
                {"size", std::to_string(perf::get_be64(s.report[0]))},
                {"iterations", std::to_string(perf::get_be64(s.report[1]))},
                {"bw_peak", number(perf::get_be_double(s.report[2]), 2)},
                {"bw_average", number(perf::get_be_double(s.report[3]), 2)},
                {"mpps", number(perf::get_be_double(s.report[4]), 6)}});
    }
  }
}

// One message of the client's (in receive slot `slot`, `len` bytes), answered as perftest's
// server answers it: the client writes first in every exchange, so each message gets one reply
// of the same size.
NTSTATUS Services::answer(Conn* c, uint32_t slot, uint32_t len) {
  using perf::kKeyStructSize;
  using perf::kReportFieldSize;
  using perf::kVersionSize;
  Session& s = *c->session;
  const uint8_t* in = c->buf.get() + slot * slots::kBytes;
  uint8_t out[slots::kBytes] = {};
  std::string refused;
  if (len == kVersionSize || len == 4 || len == kReportFieldSize) {
    answer_common(s, in, len, out, &refused, peer_text(c->connector));
  } else if (len == 2) {
    // The MTU: the client's own. The data connections' path MTU is the CM's (REQ and REP).
    std::memcpy(out, in, 2);
  } else if (len == kKeyStructSize && std::all_of(in, in + len, [](uint8_t b) { return b == 0; })) {
    // The zero messages around the data connections (which another session of the client's
    // address may hold until the keys sort them).
    size_t client_data = 0;
    if (s.phase == Session::Phase::kConnecting) {
      for (const auto& other : sessions_)
        client_data += same_client(s, *other) ? other->data.size() : 0;
    }
    if (s.phase == Session::Phase::kPreamble)
      s.phase = Session::Phase::kConnecting;
    else if (s.phase == Session::Phase::kConnecting && client_data != 0)
      s.phase = Session::Phase::kRunning;
    else
      refused = s.phase == Session::Phase::kConnecting
                    ? "no data connection between the zero messages"
                    : "a third zero message";
  } else if (len == kKeyStructSize) {
    // A key (the keys, the syncs): answered with the key of the data connection whose client
    // QP it names (the i-th of a round if none does). Every key names the listener's region;
    // with rdma_cm the QPN and PSN come from the CM.
    perf::PerftestKey theirs;
    Conn* named = s.phase == Session::Phase::kRunning && perf::decode_key_struct(in, len, &theirs)
                      ? data_for_key(s, theirs.qpn)
                      : nullptr;
    if (s.phase != Session::Phase::kRunning) {
      refused = "a key before its data connections";
    } else if (s.data.empty()) {
      refused = "a key after its data connections ended";
    } else {
      Conn* d = named != nullptr ? named : s.data[s.keys % s.data.size()];
      ++s.keys;
      // ib_write_lat: the first key that names a data connection's client QP says where its
      // WRITEs go.
      if (named != nullptr && s.svc->writes_echo() && !d->writing && d->qp != nullptr) {
        if (const NTSTATUS st = start_writes(d, theirs.vaddr, theirs.rkey); st != STATUS_SUCCESS)
          d->mark_failed(st);
      }
      perf::PerftestKey key = service_key(d);
      NdkSockAddr local;
      uint32_t size = sizeof(local);
      if (c->connector->get_local_address(&local, &size) == STATUS_SUCCESS) {
        if (local.ipv6)
          std::memcpy(key.gid, local.ip6.data(), sizeof(key.gid));
        else
          key.set_ipv4(local.ip);
      }
      perf::encode_key_struct(key, out);
    }
  } else {
    refused = "a message of " + std::to_string(len) + " bytes";
  }
  if (!refused.empty()) {
    pmd::log(LogLevel::kWarning, "perftest_refused",
             {{"peer", peer_text(c->connector)}, {"why", refused}});
    return STATUS_INVALID_DEVICE_REQUEST;
  }
  NdkSge again{c->buf.get() + slot * slots::kBytes, slots::kBytes, c->mr->get_local_token()};
  NTSTATUS st = c->qp->receive(slot_context(slot, false), &again, 1);
  if (st != STATUS_SUCCESS) return st;
  // Replies rotate over their slots: one still retransmitting keeps its bytes.
  const uint32_t reply = slots::kFirstSend + c->next_send++ % slots::kSends;
  uint8_t* at = c->buf.get() + reply * slots::kBytes;
  std::memcpy(at, out, len);
  NdkSge sge{at, len, c->mr->get_local_token()};
  st = c->qp->send(slot_context(reply, true), &sge, 1, 0);
  return st;
}

}  // namespace rocedp::control
