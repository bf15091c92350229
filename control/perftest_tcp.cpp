// rocedpd's perftest service for clients without -R (control/services.hpp): perftest's own set-up
// over TCP, on the host's kernel stack at the listener's tcp_exchange address and nd_port. The
// messages are the rdma_cm session's (rocedp/perftest.hpp), with the keys as text and no zero
// messages: version, system data, MTU, then one key per client QP, each answered by the key of a
// data QP made for it, which connects out of band to the GID, QPN and PSN the client's key
// carries; then the syncs (keys of known QPs), the report, "done". Control thread only.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "control/cm_agent.hpp"
#include "control/service_state.hpp"
#include "control/services.hpp"
#include "pmd/log.hpp"
#include "rocedp/perftest.hpp"

namespace rocedp::control {

using pmd::LogLevel;

namespace {
constexpr uint8_t kDone[5] = {'d', 'o', 'n', 'e', 0};  // TCP's last exchange, each side's
// perftest waits for each reply before its next message; a client this far ahead is not perftest.
constexpr size_t kMaxUnanswered = 64 * 1024;
// perftest sends its set-up (up to the first sync) within milliseconds; a client that connects
// and stays silent would hold a session (of max_connections) for ever.
constexpr auto kSetupTime = std::chrono::seconds(10);

// TCP keepalives on the exchange, which is silent during the run: a client whose host went away
// (no FIN, no RST) is found after `idle` plus three unanswered probes a second apart, and its
// session and data connections end. A killed process closes the socket at once anyway.
void keep_alive(int fd, uint32_t idle_ms) {
  const int on = 1, idle = static_cast<int>(std::max<uint32_t>(1, idle_ms / 1000)), every = 1,
            count = 3;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &every, sizeof(every));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

std::string address_text(uint32_t ip_host_order, uint16_t port) {
  return wire::to_string(wire::IpAddress(ip_host_order)) + ":" + std::to_string(port);
}

// The length of the session's next message, or 0 while too few bytes tell it. In the preamble
// the order fixes it; after it the first bytes do: a key is text ("0000:..."), a report field a
// big-endian integer or double (a size or count below 2^56 starts with a zero byte), and the
// end is "done\0".
size_t next_message(const Services::Session& s) {
  static constexpr size_t kPreamble[] = {perf::kVersionSize, 4, 4, 2};
  if (s.preamble < std::size(kPreamble)) return kPreamble[s.preamble];
  if (s.report_fields != 0) return perf::kReportFieldSize;
  if (s.in.empty()) return 0;
  if (s.in[0] == 0) return perf::kReportFieldSize;
  if (s.in[0] != kDone[0]) return perf::kKeyTextSize;
  if (s.in.size() < sizeof(kDone)) return 0;
  return std::memcmp(s.in.data(), kDone, sizeof(kDone)) == 0 ? sizeof(kDone) : perf::kKeyTextSize;
}
}  // namespace

// The listening socket of `l`'s TCP exchange, non-blocking; poll_tcp() accepts its clients.
NTSTATUS Services::listen_tcp(Listening* l, std::string* error) {
  const uint32_t ip = l->cfg.tcp_exchange->value;
  const std::string where = address_text(ip, l->cfg.nd_port);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(l->cfg.nd_port);
  a.sin_addr.s_addr = htonl(ip);
  const int one = 1;
  if (fd < 0 || ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 64) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    *error = "perftest listener on nd_port " + std::to_string(l->cfg.nd_port) +
             ": TCP exchange on " + where + ": " + std::strerror(err);
    return err == EADDRINUSE ? STATUS_ADDRESS_ALREADY_EXISTS : STATUS_INVALID_ADDRESS;
  }
  l->tcp_fd = fd;
  pmd::log(LogLevel::kInfo, "service_listening_tcp",
           {{"port", l->cfg.port}, {"service", "perftest"}, {"tcp_exchange", where}});
  return STATUS_SUCCESS;
}

// Control thread, every loop pass: new TCP clients become sessions; each session's bytes are
// read and answered, its replies written; ended sessions end their data connections.
unsigned Services::poll_tcp() {
  unsigned work = 0;
  for (const auto& l : listening_) {
    if (l->tcp_fd < 0 || l->retiring) continue;
    for (;;) {
      sockaddr_in peer{};
      socklen_t len = sizeof(peer);
      const int fd = ::accept4(l->tcp_fd, reinterpret_cast<sockaddr*>(&peer), &len,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;  // none waiting (or an error the next pass sees again)
      // At most max_connections clients set up or run at once (each holds a socket).
      const auto open = std::count_if(sessions_.begin(), sessions_.end(), [&](const auto& s) {
        return s->svc == l.get() && s->tcp && s->tcp_fd >= 0;
      });
      if (static_cast<uint64_t>(open) >= l->cfg.max_connections) {
        ::close(fd);
        ++l->counts.rejected;
        continue;
      }
      auto s = std::make_unique<Session>();
      s->svc = l.get();
      s->client = wire::IpAddress(ntohl(peer.sin_addr.s_addr));
      s->tcp = true;
      s->tcp_fd = fd;
      s->setup_by = std::chrono::steady_clock::now() + kSetupTime;
      if (l->cfg.keepalive_ms != 0) keep_alive(fd, l->cfg.keepalive_ms);
      ++l->counts.sessions;
      pmd::log(LogLevel::kInfo, "perftest_tcp_session",
               {{"peer", address_text(ntohl(peer.sin_addr.s_addr), ntohs(peer.sin_port))},
                {"nd_port", std::to_string(l->cfg.nd_port)}});
      sessions_.push_back(std::move(s));
      ++work;
    }
  }
  std::vector<Session*> tcp;
  for (const auto& s : sessions_)
    if (s->tcp && s->tcp_fd >= 0) tcp.push_back(s.get());
  const auto now = std::chrono::steady_clock::now();
  for (Session* s : tcp) {
    serve_tcp(*s);
    if (!s->ending && !s->keys_done && now >= s->setup_by) {
      pmd::log(LogLevel::kWarning, "perftest_refused",
               {{"peer", wire::to_string(s->client)}, {"why", "no set-up within 10 s"}});
      s->ending = true;
    }
    if (s->ending) {
      end_tcp(s);  // may free s
      ++work;
    }
  }
  return work;
}

// Reads what the client sent, answers every whole message it can (a reply that waits for a data
// QP stops there until the QP is ready), and writes the replies it has. A closed or failed
// exchange, or a message perftest never sends, marks the session ending.
void Services::serve_tcp(Session& s) {
  // Not again from inside itself: a data QP made inline (tcp_key_ready) lets this pass go on.
  if (s.ending || s.tcp_fd < 0 || s.serving) return;
  s.serving = true;
  serve_tcp_pass(s);
  s.serving = false;
}

void Services::serve_tcp_pass(Session& s) {
  uint8_t chunk[4096];
  for (;;) {
    const ssize_t n = ::recv(s.tcp_fd, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (n > 0) {
      s.in.insert(s.in.end(), chunk, chunk + n);
      if (s.in.size() <= kMaxUnanswered) continue;
      pmd::log(LogLevel::kWarning, "perftest_refused",
               {{"peer", wire::to_string(s.client)}, {"why", "more than 64 KiB unanswered"}});
      s.ending = true;
      return;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      s.ending = true;  // the client closed the exchange (after "done", or gone)
    }
    break;
  }
  std::string refused;
  while (s.waiting_for == nullptr && !s.ending) {
    const size_t len = next_message(s);
    if (len == 0 || s.in.size() < len) break;
    const TcpStep step = tcp_message(s, s.in.data(), len, &refused);
    if (step == TcpStep::kWait) break;
    if (step == TcpStep::kRefused) {
      pmd::log(LogLevel::kWarning, "perftest_refused",
               {{"peer", wire::to_string(s.client)}, {"why", refused}});
      s.ending = true;
      return;
    }
    s.in.erase(s.in.begin(), s.in.begin() + static_cast<std::ptrdiff_t>(len));
  }
  while (!s.out.empty()) {
    const ssize_t n = ::send(s.tcp_fd, s.out.data(), s.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) s.ending = true;
      break;
    }
    s.out.erase(s.out.begin(), s.out.begin() + n);
  }
}

// One whole message: its reply appended to s.out (a new key's comes once its QP exists), kWait
// when it must wait (a sync before every data QP is connected: the client sends its first
// request right after the syncs), kRefused with *refused saying why.
Services::TcpStep Services::tcp_message(Session& s, const uint8_t* in, size_t len,
                                        std::string* refused) {
  uint8_t out[perf::kKeyTextSize] = {};
  if (s.preamble < 4) {
    if (s.preamble++ == 3) {
      // The MTU: the smaller of the client's and the port's; each side takes the smaller.
      CmAgent* agent = agent_of(adapter_);
      const uint32_t port_mtu = agent != nullptr ? agent->max_path_mtu() : 1024;
      const uint32_t theirs = perf::decode_mtu(in);
      s.path_mtu = theirs != 0 ? std::min(theirs, port_mtu) : port_mtu;
      perf::encode_mtu(port_mtu, out);
    } else {
      answer_common(s, in, len, out, refused, wire::to_string(s.client));
    }
  } else if (len == perf::kReportFieldSize) {
    answer_common(s, in, len, out, refused, wire::to_string(s.client));
  } else if (len == sizeof(kDone)) {
    std::memcpy(out, kDone, sizeof(kDone));
  } else {
    perf::PerftestKey theirs;
    if (!perf::decode_key_text(in, len, &theirs)) {
      *refused = "a key that is not perftest's text";
      return TcpStep::kRefused;
    }
    const auto it = std::find_if(s.data.begin(), s.data.end(),
                                 [&](const Conn* d) { return d->peer_qpn == theirs.qpn; });
    if (it == s.data.end()) {
      if (s.keys_done) {
        *refused = "a key of an unknown QP after the syncs began";
        return TcpStep::kRefused;
      }
      return new_tcp_data(s, theirs, refused) ? TcpStep::kAnswered : TcpStep::kRefused;
    }
    // A sync: every data QP must be connected first (the run starts right after the syncs).
    s.keys_done = true;
    if (!std::all_of(s.data.begin(), s.data.end(), [](const Conn* d) { return d->established; }))
      return TcpStep::kWait;
    Conn* d = *it;
    // ib_write_lat: the client's key says where our WRITEs go; the first goes now.
    if (s.svc->writes_echo() && !d->writing) {
      if (const NTSTATUS st = start_writes(d, theirs.vaddr, theirs.rkey); st != STATUS_SUCCESS)
        d->mark_failed(st);
    }
    encode_tcp_key(d, out);
  }
  if (!refused->empty()) return TcpStep::kRefused;
  s.out.insert(s.out.end(), out, out + len);
  return TcpStep::kAnswered;
}

// The key of data connection `c` as text: its QP, its first PSN, the listener's region and the
// port's address of the client's family as the GID.
void Services::encode_tcp_key(const Conn* c, uint8_t out[]) const {
  perf::PerftestKey key = service_key(c);
  key.psn = c->local_psn;
  if (const CmAgent* agent = agent_of(adapter_))
    std::memcpy(key.gid, agent->local_ip_for(c->peer_ip).bytes.data(), sizeof(key.gid));
  perf::encode_key_text(key, out);
}

// A key of a client QP not seen yet: a data connection for it (buffers, CQ, QP on a core, as a
// CM connection's), whose key goes back once its QP exists (tcp_key_ready). False (and *refused)
// when the listener takes no more connections.
bool Services::new_tcp_data(Session& s, const perf::PerftestKey& k, std::string* refused) {
  Listening* l = s.svc;
  if (l->retiring || l->connections >= l->cfg.max_connections) {
    ++l->counts.rejected;
    *refused = "max_connections reached";
    return false;
  }
  auto owned = std::make_unique<Conn>();
  Conn* c = owned.get();
  c->owner = this;
  c->svc = l;
  c->oob = true;
  c->serial = ++next_serial_;
  c->core = next_core_++ % std::max<uint32_t>(1, adapter_.core_count());
  c->session = &s;
  c->peer_qpn = k.qpn;
  c->peer_psn = k.psn & 0xFFFFFF;
  c->peer_out_reads = k.out_reads;
  wire::Ipv6Addr gid;
  std::memcpy(gid.data(), k.gid, gid.size());
  c->peer_ip = wire::IpAddress::v6(gid);
  // Our first PSN: anything in 24 bits; a different one per connection, as perftest's lrand48.
  c->local_psn =
      static_cast<uint32_t>(
          (std::chrono::steady_clock::now().time_since_epoch().count() ^ c->serial) * 2654435761u) &
      0xFFFFFF;
  conns_[c] = std::move(owned);
  ++l->connections;
  s.data.push_back(c);
  s.waiting_for = c;
  const char* step = "buffers";
  if (const NTSTATUS st = create_objects(c, &step); st != STATUS_SUCCESS && st != STATUS_PENDING)
    fail_setup(c, step, st);  // the session ends (teardown marks it)
  return true;
}

// A TCP data connection's QP exists, its receives are posted and its core has it: its key goes
// back to the client, then the QP connects out of band.
void Services::tcp_key_ready(Conn* c) {
  Session& s = *c->session;
  if (s.ending) return;  // poll_tcp ends the session and this connection with it
  uint8_t out[perf::kKeyTextSize];
  encode_tcp_key(c, out);
  s.out.insert(s.out.end(), out, out + sizeof(out));
  if (s.waiting_for == c) s.waiting_for = nullptr;
  oob_connect(c);
  serve_tcp(s);
}

// The client's GID resolved to a MAC (ARP or neighbour discovery on the port), then the QP moves
// to RTR and RTS with the client's QPN and PSN (Qp::connect).
void Services::oob_connect(Conn* c) {
  CmAgent* agent = agent_of(adapter_);
  if (agent == nullptr) {
    fail_setup(c, "connect", STATUS_INVALID_DEVICE_STATE);
    return;
  }
  const wire::IpAddress peer = c->peer_ip;
  c->creating = true;  // a completion is owed: teardown waits for it (close_next)
  std::shared_ptr<bool> alive = alive_;
  const uint64_t serial = c->serial;
  agent->resolve(peer, [this, alive, c, serial, peer](bool reachable, const wire::MacAddr& mac) {
    if (!*alive || !conns_.contains(c) || c->serial != serial) return;
    c->creating = false;
    if (c->closing) {
      close_next(c);
      return;
    }
    if (!reachable) {
      fail_setup(c, "resolve", STATUS_HOST_UNREACHABLE);
      return;
    }
    NdkQpConnectParams p;
    p.remote_qpn = c->peer_qpn;
    if (peer.is_v4())
      p.remote_ip = peer.v4();
    else
      std::memcpy(p.remote_ip6, peer.bytes.data(), sizeof(p.remote_ip6));
    std::memcpy(p.remote_mac, mac.data(), sizeof(p.remote_mac));
    p.path_mtu = c->session != nullptr ? c->session->path_mtu : 1024;
    p.local_psn = c->local_psn;
    p.remote_psn = c->peer_psn;
    p.inbound_read_limit = max_inbound_reads();
    p.outbound_read_limit =
        std::max<uint32_t>(1, std::min(p.inbound_read_limit, c->peer_out_reads));
    c->creating = true;
    const NTSTATUS st = c->qp->connect(p, &Services::on_oob_connected, c);
    if (st != STATUS_PENDING) on_oob_connected(c, st);
  });
}

void Services::on_oob_connected(void* context, NTSTATUS status) {
  auto* c = static_cast<Conn*>(context);
  Services& self = *c->owner;
  c->creating = false;
  if (c->closing) {
    self.close_next(c);
    return;
  }
  if (status != STATUS_SUCCESS) {
    self.fail_setup(c, "connect", status);
    return;
  }
  c->established = true;
  c->active_at = std::chrono::steady_clock::now();
  ++c->svc->counts.accepted;
  pmd::log(LogLevel::kInfo, "service_connected",
           {{"service", "perftest"},
            {"peer", wire::to_string(c->session->client) + " (TCP exchange)"},
            {"qpn", std::to_string(c->qp->qpn())},
            {"core", std::to_string(c->core)}});
  self.serve_tcp(*c->session);  // a sync may be waiting for this QP
}

// The session's exchange closes and its data connections end; the session goes with the last of
// them (leave_session), or at once without any.
void Services::end_tcp(Session* s) {
  if (s->tcp_fd >= 0) {
    ::close(s->tcp_fd);
    s->tcp_fd = -1;
  }
  s->ending = true;
  s->waiting_for = nullptr;
  if (s->data.empty()) {
    std::erase_if(sessions_, [s](const auto& owned) { return owned.get() == s; });
    return;
  }
  const std::vector<Conn*> data = s->data;
  for (Conn* d : data) teardown(d);  // the last one's close frees s
}

}  // namespace rocedp::control
