// rocedp-perf --cm-check: one end of the CM check (cm_check_mode.hpp has the script). One adapter
// runtime with inline polling, as the rest of rocedp-perf: every wait keeps the core and the
// control thread's CM running, so the peer's messages are answered meanwhile.

#include "apps/perf/cm_check_mode.hpp"

#include <array>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/perf/clock.hpp"
#include "apps/perf/endpoint.hpp"
#include "apps/perf/perf_util.hpp"

namespace rocedp::perf {
namespace {

// The server the client connects to: -a ADDR, -p PORT.
NdkSockAddr peer_of(const CmCheckOptions& o) {
  NdkSockAddr a = o.addr;
  a.port = o.port;
  return a;
}

constexpr const char* kMe = "rocedp-perf --cm-check";
constexpr char kAsks[] = "rocedp-asks";
constexpr char kRejects[] = "rocedp-rejects";

bool fail(const std::string& what) {
  std::fprintf(stderr, "%s: FAIL: %s\n", kMe, what.c_str());
  return false;
}

std::string name(NTSTATUS st) {
  return std::string(status_name(st));
}

struct Session {
  const CmCheckOptions& o;
  AdapterRuntime* rt = nullptr;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
  CmLink link;  // the server's listener and request; the client's connector
  // Completions that may come late (a close cancels them): they live as long as the run.
  Pending connected, completed, closed, disconnected;

  explicit Session(const CmCheckOptions& opts) : o(opts) {}
  uint32_t read_limit() const { return rt->config().limits.max_read_limit; }
  void wait_ms(uint32_t ms) const {
    rt->wait_until([] { return false; }, std::chrono::milliseconds(ms));
  }
  bool wait_done(Pending& p) const {
    return rt->wait_until(
        [&] { return p.done.load(std::memory_order_acquire) != 0 || clock::deadline().passed(); },
        std::chrono::seconds(o.timeout_s));
  }
};

// The peer's private data (the REQ's after rdma_cm's header, or the REJ's) as text: up to the
// first zero byte, unprintable bytes as '?'.
std::string peer_data(Session& s) {
  std::array<uint8_t, 256> buf{};
  auto len = static_cast<uint32_t>(buf.size());
  NTSTATUS st = STATUS_PENDING;
  s.rt->run_on_control(
      [&] { st = s.link.conn->get_connection_data(nullptr, nullptr, buf.data(), &len); });
  if (st != STATUS_SUCCESS) return "(get_connection_data: " + name(st) + ")";
  std::string text;
  for (uint32_t i = 0; i < len && buf[i] != 0; ++i)
    text += std::isprint(buf[i]) != 0 ? static_cast<char>(buf[i]) : '?';
  return text;
}

bool data_begins(const std::string& got, const std::string& want, const char* what) {
  if (got.rfind(want, 0) == 0) return true;
  return fail(std::string(what) + "'s private data is '" + got + "', expected it to begin with '" +
              want + "'");
}

bool setup(Session& s) {
  std::string err;
  NTSTATUS st = STATUS_PENDING;
  s.rt->run_on_control([&] { st = s.rt->adapter().create_pd(nullptr, nullptr, &s.pd); });
  if (st != STATUS_SUCCESS) return fail("create_pd: " + name(st));
  std::vector<Qp*> qps;
  if (!create_cq(*s.rt, 8, &s.cq, &err) || !create_qps(*s.rt, s.pd, s.cq, 1, 1, 1, &qps, &err))
    return fail(err);
  s.qp = qps[0];
  return true;
}

// After `ms`, `request` (`what`) must still be pending; then the connector is closed, which must
// complete it: its status in *status. False (printed) otherwise.
bool close_while_pending(Session& s, Pending& request, uint32_t ms, const std::string& what,
                         NTSTATUS* status) {
  s.wait_ms(ms);
  if (request.done.load() != 0)
    return fail(what + " ended with " + name(request.status.load()) + " before the close");
  s.rt->run_on_control([&] { s.link.conn->close(&on_closed, &s.closed); });
  s.link.conn = nullptr;
  if (!s.wait_done(request) || !s.wait_done(s.closed))
    return fail("the close did not complete " + what);
  *status = request.status.load();
  return true;
}

// Starts a Connect with our private data on a new connector.
bool start_connect(Session& s) {
  NTSTATUS st = STATUS_PENDING;
  s.connected.done.store(0);
  s.connected.status.store(STATUS_PENDING);
  s.rt->run_on_control([&] {
    st = create_connector(s.rt->adapter(), nullptr, nullptr, &s.link.conn);
    if (st == STATUS_SUCCESS)
      st = s.link.conn->connect(s.qp, NdkSockAddr{0, 0}, peer_of(s.o), s.read_limit(),
                                s.read_limit(), kAsks, sizeof kAsks - 1, &on_request, &s.connected);
  });
  return st == STATUS_PENDING || fail("connect: " + name(st) + " inline, expected PENDING");
}

// A REJ that says the server is not listening yet (a peer started at the same moment, as two
// processes over memif): refused, and no private data where the check expects some, or any
// refusal where it expects a REP.
bool not_listening_yet(Session& s) {
  if (s.connected.status.load() != STATUS_CONNECTION_REFUSED) return false;
  if (s.o.expect == CmCheckOptions::Expect::kAborted ||
      s.o.expect == CmCheckOptions::Expect::kConnected)
    return true;
  if (s.o.expect == CmCheckOptions::Expect::kCancelled) return peer_data(s).empty();
  return s.o.expect == CmCheckOptions::Expect::kRefused && !s.o.peer_data.empty() &&
         peer_data(s).empty();
}

// The client: Connect with our private data; its status is the check. A server not listening
// yet is tried again (up to 20 times, 200 ms apart), as rocedp-perf's other clients do.
bool run_client(Session& s) {
  const CmCheckOptions& o = s.o;
  NTSTATUS st = STATUS_PENDING;
  const std::string to = format_sockaddr(peer_of(o));
  const auto started = std::chrono::steady_clock::now();
  // `cancelled`: no answer may come, so each attempt waits the whole time instead of for the
  // Connect's completion (which a refusal gives at once).
  const bool cancelled = o.expect == CmCheckOptions::Expect::kCancelled;
  if (!start_connect(s)) return false;
  for (int attempt = 1;; ++attempt) {
    if (cancelled)
      s.wait_ms(o.wait_ms);
    else if (!s.wait_done(s.connected))
      return fail("connect to " + to + ": no completion");
    if (attempt >= 20 || !not_listening_yet(s) || clock::deadline().passed()) break;
    s.rt->run_on_control([&] { s.link.conn->close(nullptr, nullptr); });
    s.link.conn = nullptr;
    s.wait_ms(200);
    if (!start_connect(s)) return false;
  }

  if (cancelled) {
    // Closing the connector ends the pending Connect (the peer gets our REJ).
    if (!close_while_pending(s, s.connected, 0, "the connect to " + to, &st)) return false;
    std::printf("%s: client: connect to %s: no answer in %u ms; closed: %s\n", kMe, to.c_str(),
                o.wait_ms, name(st).c_str());
    return st == STATUS_CANCELLED ||
           fail("connect ended with " + name(st) + ", expected " + "STATUS_CANCELLED");
  }

  st = s.connected.status.load();
  if (o.expect == CmCheckOptions::Expect::kRefused) {
    const std::string data = peer_data(s);
    std::printf("%s: client: connect to %s: %s, the REJ's private data '%s'\n", kMe, to.c_str(),
                name(st).c_str(), data.c_str());
    if (st != STATUS_CONNECTION_REFUSED)
      return fail("connect ended with " + name(st) + ", expected STATUS_CONNECTION_REFUSED");
    return o.peer_data.empty() || data_begins(data, o.peer_data, "the REJ");
  }
  if (o.expect == CmCheckOptions::Expect::kConnected) {
    // However late the server answers (our REQ comes again, it may MRA it): connected, then
    // the server disconnects.
    const double connected_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("%s: client: connect to %s: %s after %.1f s\n", kMe, to.c_str(), name(st).c_str(),
                connected_s);
    if (st != STATUS_SUCCESS) return fail("connect ended with " + name(st) + ", expected SUCCESS");
    st = call_and_wait(
        *s.rt, s.completed,
        [&] {
          return s.link.conn->complete_connect_ex(&cm_on_disconnect, &s.link, &on_request,
                                                  &s.completed);
        },
        std::chrono::seconds(o.timeout_s));
    std::printf("%s: client: complete_connect_ex: %s\n", kMe, name(st).c_str());
    if (st != STATUS_SUCCESS) return fail("complete_connect_ex ended with " + name(st));
    if (!s.rt->wait_until([&] { return s.link.gone.load() != 0 || clock::deadline().passed(); },
                          std::chrono::seconds(o.timeout_s)) ||
        s.link.gone.load() == 0)
      return fail("the server did not disconnect");
    std::printf("%s: client: the server disconnected\n", kMe);
    return true;
  }
  // aborted: the REP came; the server abandons the establishment while we wait.
  std::printf("%s: client: connect to %s: %s\n", kMe, to.c_str(), name(st).c_str());
  if (st != STATUS_SUCCESS)
    return fail("connect ended with " + name(st) + ", expected STATUS_SUCCESS (the REP)");
  s.wait_ms(o.wait_ms);
  st = call_and_wait(
      *s.rt, s.completed,
      [&] { return s.link.conn->complete_connect_ex(nullptr, nullptr, &on_request, &s.completed); },
      std::chrono::seconds(o.timeout_s));
  std::printf("%s: client: complete_connect_ex after %u ms: %s\n", kMe, o.wait_ms,
              name(st).c_str());
  return st == STATUS_CONNECTION_ABORTED || fail("complete_connect_ex ended with " + name(st) +
                                                 ", expected STATUS_CONNECTION_ABORTED");
}

// Accepts the request without waiting: the inline status (STATUS_PENDING: s.completed follows).
NTSTATUS start_accept(Session& s) {
  NTSTATUS st = STATUS_PENDING;
  s.rt->run_on_control([&] {
    st = s.link.conn->accept_ex(s.qp, s.read_limit(), s.read_limit(), nullptr, 0, nullptr, nullptr,
                                &on_request, &s.completed);
  });
  return st;
}

// The request in s.link.conn (`which`): prints its private data and checks it against --peer-data.
bool check_request(Session& s, const std::string& which) {
  const std::string data = peer_data(s);
  std::printf("%s: server: %s, private data '%s'\n", kMe, which.c_str(), data.c_str());
  return s.o.peer_data.empty() || data_begins(data, s.o.peer_data, "the request");
}

// The server: the first request, answered as --answer says.
bool serve(Session& s) {
  const CmCheckOptions& o = s.o;
  std::string err;
  if (!cm_await_request(*s.rt, s.link, o.port, o.timeout_s, kMe, &err)) return fail(err);
  if (!check_request(s, "a connection request")) return false;
  NTSTATUS st = STATUS_PENDING;
  if (o.answer == CmCheckOptions::Answer::kSilent) {
    // No answer; the client gives up meanwhile (its REJ): a late Accept must fail.
    s.wait_ms(o.wait_ms);
    st = start_accept(s);
    std::printf("%s: server: no answer for %u ms, then accept: %s\n", kMe, o.wait_ms,
                name(st).c_str());
    return st == STATUS_CONNECTION_ABORTED ||
           fail("accept: " + name(st) +
                ", expected STATUS_CONNECTION_ABORTED (the client gave up)");
  }
  if (o.answer == CmCheckOptions::Answer::kLate) {
    // The client's REQ times out meanwhile and comes again: our CM answers it with an MRA.
    s.wait_ms(o.wait_ms);
    st = accept_connection(*s.rt, s.link.conn, s.qp, s.read_limit(), &cm_on_disconnect, &s.link,
                           s.completed);
    std::printf("%s: server: accept after %u ms: %s\n", kMe, o.wait_ms, name(st).c_str());
    if (st != STATUS_SUCCESS) return fail("accept: " + name(st));
    st = call_and_wait(*s.rt, s.disconnected,
                       [&] { return s.link.conn->disconnect(&on_request, &s.disconnected); });
    std::printf("%s: server: disconnect: %s\n", kMe, name(st).c_str());
    return st == STATUS_SUCCESS || fail("disconnect: " + name(st));
  }
  if (o.answer == CmCheckOptions::Answer::kReject) {
    for (uint32_t n = 1;; ++n) {
      s.rt->run_on_control([&] { st = s.link.conn->reject(kRejects, sizeof kRejects - 1); });
      std::printf("%s: server: reject with '%s': %s\n", kMe, kRejects, name(st).c_str());
      if (st != STATUS_SUCCESS) return fail("reject: " + name(st));
      if (n == o.requests) return true;
      // A client whose REJ was lost sends its REQ again: the rejected connection is gone, so it
      // is a new request to the listener.
      s.rt->run_on_control([&] { s.link.conn->close(nullptr, nullptr); });
      s.link.conn = nullptr;
      s.link.incoming.store(nullptr);
      if (!cm_next_request(*s.rt, s.link, o.timeout_s, &err))
        return fail(err + " (request " + std::to_string(n + 1) + " of " +
                    std::to_string(o.requests) + ")");
      if (!check_request(s, "request " + std::to_string(n + 1))) return false;
    }
  }
  // abandon: the REP leaves, then the connector goes before the client's RTU (REJ).
  st = start_accept(s);
  if (st != STATUS_PENDING) return fail("accept: " + name(st) + " inline, expected PENDING");
  // The client waits before its RTU, so the Accept is still pending.
  if (!close_while_pending(s, s.completed, 300, "the accept", &st)) return false;
  std::printf("%s: server: accepted, then closed the connector before the RTU: accept %s\n", kMe,
              name(st).c_str());
  return st == STATUS_CANCELLED ||
         fail("accept ended with " + name(st) + ", expected " + "STATUS_CANCELLED (closed first)");
}

void close_session(Session& s) {
  if (s.link.conn != nullptr) {
    s.rt->run_on_control([&] { s.link.conn->close(nullptr, nullptr); });
    s.link.conn = nullptr;
  }
  cm_close(*s.rt, s.link);  // the listener; lets the last REJ leave
  close_objects(*s.rt, {s.qp}, {s.cq}, {}, s.pd);
}

}  // namespace

int run_cm_check(const CmCheckOptions& o) {
  Session s(o);
  return run_endpoint(o.endpoint, o.timeout_s, kMe, [&](AdapterRuntime& rt) {
    s.rt = &rt;
    const bool ok = setup(s) && (o.server ? serve(s) : run_client(s));
    if (ok) std::printf("%s: %s: every check held\n", kMe, o.server ? "server" : "client");
    std::fflush(stdout);
    close_session(s);
    s.rt = nullptr;
    return ok ? 0 : 1;
  });
}

}  // namespace rocedp::perf
