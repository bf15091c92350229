#pragma once
// The services' state (control/services.hpp), shared by services.cpp and perftest_service.cpp:
// a listening service, one connection of it, one perftest client's session.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "control/services.hpp"
#include "dataplane/wire/ip_address.hpp"
#include "rocedp/listener.hpp"

namespace rocedp::control {

// Receive request contexts carry the buffer slot; send contexts the slot with bit 0 set.
inline void* slot_context(uint32_t slot, bool send) {
  return reinterpret_cast<void*>((uintptr_t{slot} << 1) | (send ? 1u : 0u));
}

struct Services::Listening {
  Services* owner = nullptr;
  config::ListenerConfig cfg;
  Listener* listener = nullptr;
  std::unique_ptr<uint8_t[]> region;  // memory and perftest: what clients READ, WRITE and update
  Mr* mr = nullptr;
  uint32_t connections = 0;
  bool retiring = false;        // stop() or a reload: no new connections, the open ones end
  bool region_closing = false;  // its region's close completes later (on_region_closed)
  int tcp_fd = -1;    // perftest's TCP exchange (tcp_exchange): the listening socket, or -1
  ServiceRow counts;  // its port and nd_port, the outcomes of its connections (rows())
  bool echo() const { return cfg.service == config::ListenerConfig::Service::kEcho; }
  /// perftest's ib_write_lat: its data connections write first and answer each landed WRITE.
  bool writes_echo() const {
    return perftest() && cfg.writes == config::ListenerConfig::Writes::kEcho;
  }
  bool memory() const { return cfg.service == config::ListenerConfig::Service::kMemory; }
  bool perftest() const { return cfg.service == config::ListenerConfig::Service::kPerftest; }
};

// perftest's control connection: 64-byte slots, receives in 1..4 and replies in 5..8 (slot 0 is
// not used: its receive context would be null, the keepalive's).
namespace control_slots {
constexpr uint32_t kBytes = 64, kFirstReceive = 1, kReceives = 4, kFirstSend = 5, kSends = 4;
constexpr uint32_t kAll = kFirstSend + kSends;
}  // namespace control_slots

// One perftest client: its control connection (rdma_cm) or its TCP exchange (a client without
// -R, perftest_tcp.cpp), and its data connections, in the order they came. Control thread only.
struct Services::Session {
  enum class Phase {
    kPreamble,    // version, system data, MTU
    kConnecting,  // after the first zero message: the client's data connections join
    kRunning,     // after the second: keys, syncs, the run, the report
  };
  Listening* svc = nullptr;
  wire::IpAddress client;
  Conn* control = nullptr;  // null once closed
  std::vector<Conn*> data;  // open ones
  Phase phase = Phase::kPreamble;
  uint32_t system_messages = 0;  // the cycle buffer's answer first, then the cache line's
  uint32_t keys = 0;             // keys answered
  uint32_t report_fields = 0;
  uint8_t report[5][8] = {};  // the client's bandwidth report (size, iterations, peak, avg, rate)
  // TCP: the exchange's socket (-1 for an rdma_cm session, or once closed), the bytes read that
  // are not a whole message yet, the replies not written yet, and the preamble's messages so far.
  bool tcp = false;
  int tcp_fd = -1;
  std::vector<uint8_t> in, out;
  uint32_t preamble = 0;
  uint32_t path_mtu = 1024;     // TCP: the smaller of the client's MTU and the port's
  bool keys_done = false;       // TCP: a key named a QP we made: the syncs have begun
  Conn* waiting_for = nullptr;  // TCP: a data QP whose creation the next reply waits for
  bool ending = false;          // TCP: the exchange failed or closed; the data connections end
  bool serving = false;         // TCP: serve_tcp is running (a callback inside it must not)
  std::chrono::steady_clock::time_point setup_by{};  // TCP: the keys must be done by then
};

struct Services::Conn {
  Services* owner = nullptr;
  Listening* svc = nullptr;
  Connector* connector = nullptr;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
  Mr* mr = nullptr;  // echo, perftest: the receive/send buffers
  std::unique_ptr<uint8_t[]> buf;
  uint32_t core = 0;
  bool creating = false;     // a create completion is outstanding
  bool closing_obj = false;  // a close completion is outstanding
  bool closing = false;
  bool established = false;
  bool receives_posted = false;  // echo: receive_delay_ms defers them past the Accept
  std::chrono::steady_clock::time_point post_receives_at{};
  bool disconnecting = false;
  bool close_retry = false;  // an object's close found its core's ring full: poll() retries
  // perftest: its client's session (the session's control connection, or one of its data ones).
  Session* session = nullptr;
  // perftest: the client's QPN (its CM REQ's), which its key names; kept, because the connector
  // is closed before the session lets the connection go
  uint32_t peer_qpn = 0;
  // perftest over TCP (no connector): the client's first PSN and GID from its key, our first PSN;
  // the QP connects out of band (oob_connect) once our key went back.
  bool oob = false;
  uint32_t peer_psn = 0, local_psn = 0, peer_out_reads = 0;
  wire::IpAddress peer_ip;  // the client's GID
  uint64_t serial = 0;  // tells a resolution's late callback whether this Conn is still the same
  bool is_control() const;
  uint32_t next_send = 0;  // control: the reply slot after the last one used
  // memory, perftest's control: the keepalive in flight, and when the next one is due.
  bool probe_outstanding = false;
  std::chrono::steady_clock::time_point next_probe{};
  // perftest `writes: echo`: where the client's key said our WRITEs go (its buffer), set with the
  // first WRITE (control thread) before the CQ is first armed; the core's from then on.
  uint64_t write_to = 0;
  uint32_t write_token = 0;
  bool writing = false;      // control thread: the first WRITE left, the core answers the rest
  uint64_t writes_seen = 0;  // core: the client's WRITEs that landed
  // echo: echoes_done when poll() last saw it change, and when (the idle timeout).
  uint64_t idle_seen = 0;
  std::chrono::steady_clock::time_point active_at{};

  // The echo on the polling core (on_cq_notify). Set before the CQ is first armed, then read
  // only: the control thread clears qp/cq/mr on teardown, the core keeps its own copies.
  Qp* core_qp = nullptr;
  Cq* core_cq = nullptr;
  uint32_t local_token = 0;
  std::atomic<bool> core_stop{false};    // control thread: teardown began, the core lets go
  std::atomic<bool> core_failed{false};  // core: the CQ overran or a request failed; the control
                                         // thread ends the connection
  std::atomic<NTSTATUS> core_error{STATUS_SUCCESS};  // why (stored before core_failed)
  /// The connection failed with `why` (on the core, or before the core took it); the control
  /// thread ends it (poll()).
  void mark_failed(NTSTATUS why) {
    core_error.store(why, std::memory_order_relaxed);
    core_failed.store(true, std::memory_order_release);
  }
  /// `writes: echo`: the slot after the receive buffers, what the connection's WRITEs carry.
  uint8_t* write_data() const {
    return buf.get() + uint64_t{svc->cfg.queue_depth} * svc->cfg.message_bytes;
  }
  // Written by the core only (a single writer: relaxed load + store), read by the control thread.
  std::atomic<uint64_t> echoes_done{0};  // echo SENDs completed (disconnect_after)
  std::atomic<uint64_t> echo_messages{0}, echo_bytes{0};
  // perftest's sink: SENDs taken; `writes: echo`: the client's WRITEs that landed
  std::atomic<uint64_t> received_messages{0}, received_bytes{0};
};

inline bool Services::Conn::is_control() const {
  return session != nullptr && session->control == this;
}

inline void bump(std::atomic<uint64_t>& counter, uint64_t by) {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

}  // namespace rocedp::control
