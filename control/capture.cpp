// librte_pcapng is experimental in DPDK 22.11 (its API, not its file format).
#define ALLOW_EXPERIMENTAL_API 1

#include "control/capture.hpp"

#include <fcntl.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_pcapng.h>
#include <rte_ring.h>
#include <rte_telemetry.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace rocedp::control {
namespace {

constexpr unsigned kBurst = 32;
constexpr unsigned kRingSize = 4096;  // frames between the cores and the writer
constexpr unsigned kPoolSize = kRingSize + 2 * kBurst - 1;
constexpr uint32_t kFrameOverhead = 18;  // Ethernet header + one VLAN tag above the MTU

// The one capture of this process. Static, so a callback that a core entered just before the
// capture stopped still finds valid flags; the pool and ring it would use are guarded by
// `inflight`.
struct Capture {
  std::mutex mutex;  // start/stop/status (telemetry thread, main thread)
  std::atomic<bool> enabled{false};
  std::atomic<uint32_t> inflight{
      0};  // callbacks between their enabled check and their last enqueue
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> written{0};
  std::atomic<bool> writer_stop{false};
  rte_mempool* pool = nullptr;
  rte_ring* ring = nullptr;
  rte_pcapng_t* out = nullptr;
  uint32_t snaplen = 0;
  uint64_t max_packets = 0;
  uint64_t start_ns = 0;  // wall clock and TSC at the start (timestamps)
  uint64_t start_tsc = 0;
  uint64_t tsc_hz = 1;
  bool running = false;  // callbacks installed (under mutex)
  uint16_t port_id = 0;
  std::string path;
  std::string error;  // written by the writer before it stops; read after join or under mutex
  std::mutex error_mutex;
  std::vector<std::pair<uint16_t, const rte_eth_rxtx_callback*>> rx_cbs, tx_cbs;
  std::vector<const rte_eth_rxtx_callback*> retired;  // removed by the last stop, freed by the next
  std::thread writer;
  uint32_t serial = 0;
};
Capture g;

uint64_t wall_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// DPDK 22.11's own TSC -> time conversion in rte_pcapng_copy overflows a few seconds after the
// process started (cycles * 1e9 in 64 bits), so the capture converts from its own start and
// writes the Enhanced Packet Block's timestamp (nanoseconds, the IDB's if_tsresol 9) itself.
uint64_t tsc_to_wall_ns(uint64_t tsc) {
  const unsigned __int128 delta = tsc - g.start_tsc;
  return g.start_ns + static_cast<uint64_t>(delta * 1'000'000'000u / g.tsc_hz);
}

// pcapng EPB: block type, block length, interface id, timestamp high, timestamp low, ...
void set_epb_timestamp(rte_mbuf* copy, uint64_t ns) {
  auto* epb = rte_pktmbuf_mtod(copy, uint32_t*);
  epb[3] = static_cast<uint32_t>(ns >> 32);
  epb[4] = static_cast<uint32_t>(ns);
}

// A polling core offers frames the TX queue did not take again on its next burst, and the TX
// callback runs before the driver takes any: a frame copied once carries this mbuf flag (dynamic,
// ignored by drivers), so it is not copied again. Allocation clears ol_flags, so a recycled mbuf
// is captured afresh.
uint64_t g_captured_flag = 0;

// On a polling core, inside rx_burst/tx_burst: copy and enqueue; never block, never hold frames.
void copy_burst(uint16_t port, uint16_t queue, rte_mbuf** pkts, uint16_t n,
                rte_pcapng_direction dir) {
  g.inflight.fetch_add(1, std::memory_order_seq_cst);
  if (!g.enabled.load(std::memory_order_seq_cst)) {
    g.inflight.fetch_sub(1, std::memory_order_release);
    return;
  }
  const uint64_t ts = rte_get_tsc_cycles();
  const uint64_t ns = tsc_to_wall_ns(ts);
  rte_mbuf* copies[kBurst];
  uint64_t lost = 0;
  for (uint16_t done = 0; done < n;) {
    unsigned k = 0;
    for (; done < n && k < kBurst; ++done) {
      if (dir == RTE_PCAPNG_DIRECTION_OUT) {
        if ((pkts[done]->ol_flags & g_captured_flag) != 0) continue;
        pkts[done]->ol_flags |= g_captured_flag;
      }
      rte_mbuf* c = rte_pcapng_copy(port, queue, pkts[done], g.pool, g.snaplen, ts, dir);
      if (c == nullptr) {
        ++lost;
        continue;
      }
      set_epb_timestamp(c, ns);
      copies[k++] = c;
    }
    const unsigned sent =
        rte_ring_mp_enqueue_burst(g.ring, reinterpret_cast<void**>(copies), k, nullptr);
    if (sent < k) {
      rte_pktmbuf_free_bulk(copies + sent, k - sent);
      lost += k - sent;
    }
  }
  if (lost != 0) g.dropped.fetch_add(lost, std::memory_order_relaxed);
  g.inflight.fetch_sub(1, std::memory_order_release);
}

uint16_t rx_callback(uint16_t port, uint16_t queue, rte_mbuf* pkts[], uint16_t n, uint16_t, void*) {
  if (n != 0) copy_burst(port, queue, pkts, n, RTE_PCAPNG_DIRECTION_IN);
  return n;
}

uint16_t tx_callback(uint16_t port, uint16_t queue, rte_mbuf* pkts[], uint16_t n, void*) {
  if (n != 0) copy_burst(port, queue, pkts, n, RTE_PCAPNG_DIRECTION_OUT);
  return n;
}

void set_error(std::string e) {
  std::lock_guard<std::mutex> lock(g.error_mutex);
  if (g.error.empty()) g.error = std::move(e);
}

// The writer thread: ring -> file, up to max_packets; surplus copies are freed.
void writer_loop() {
  void* batch[kBurst];
  for (;;) {
    const unsigned n = rte_ring_sc_dequeue_burst(g.ring, batch, kBurst, nullptr);
    if (n == 0) {
      if (g.writer_stop.load(std::memory_order_acquire)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    auto** pkts = reinterpret_cast<rte_mbuf**>(batch);
    const uint64_t have = g.written.load(std::memory_order_relaxed);
    unsigned take = n;
    if (g.max_packets != 0)
      take = static_cast<unsigned>(std::min<uint64_t>(n, g.max_packets - have));
    if (take < n) rte_pktmbuf_free_bulk(pkts + take, n - take);
    if (take == 0) continue;
    // DPDK 22.11 writes but does not free them (as dpdk-dumpcap does, the caller frees).
    const ssize_t w = rte_pcapng_write_packets(g.out, pkts, static_cast<uint16_t>(take));
    rte_pktmbuf_free_bulk(pkts, take);
    if (w < 0) {
      set_error(std::string("writing ") + g.path + ": " + std::strerror(errno));
      g.enabled.store(false, std::memory_order_seq_cst);
      continue;  // keep draining so the pool comes back
    }
    g.written.fetch_add(take, std::memory_order_relaxed);
    if (g.max_packets != 0 && have + take >= g.max_packets)
      g.enabled.store(false, std::memory_order_seq_cst);
  }
}

void remove_callbacks() {
  for (auto& [q, cb] : g.rx_cbs) rte_eth_remove_rx_callback(g.port_id, q, cb);
  for (auto& [q, cb] : g.tx_cbs) rte_eth_remove_tx_callback(g.port_id, q, cb);
}

void retire_callbacks() {
  // ethdev leaves removed callback structures to the application, and a core preempted while
  // walking the list may still read one. So a capture's structures are freed only when the next
  // capture stops: by then every core has passed many bursts since they were unlinked.
  for (const rte_eth_rxtx_callback* cb : g.retired)
    rte_free(const_cast<rte_eth_rxtx_callback*>(cb));
  g.retired.clear();
  for (auto& [q, cb] : g.rx_cbs) g.retired.push_back(cb);
  for (auto& [q, cb] : g.tx_cbs) g.retired.push_back(cb);
  g.rx_cbs.clear();
  g.tx_cbs.clear();
}

void release_resources() {
  if (g.out != nullptr) rte_pcapng_close(g.out);  // closes the fd
  g.out = nullptr;
  if (g.ring != nullptr) rte_ring_free(g.ring);
  g.ring = nullptr;
  if (g.pool != nullptr) rte_mempool_free(g.pool);
  g.pool = nullptr;
}

void stop_locked() {
  if (!g.running) return;
  g.enabled.store(false, std::memory_order_seq_cst);
  remove_callbacks();
  while (g.inflight.load(std::memory_order_acquire) != 0)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  retire_callbacks();
  g.writer_stop.store(true, std::memory_order_release);
  if (g.writer.joinable()) g.writer.join();
  rte_pcapng_write_stats(g.out, g.port_id, "rocedp capture", g.start_ns, wall_ns(),
                         g.written.load() + g.dropped.load(), g.dropped.load());
  release_resources();
  g.running = false;
}

CaptureStatus status_locked() {
  CaptureStatus s;
  s.active = g.running && g.enabled.load();
  s.port_id = g.port_id;
  s.path = g.path;
  s.written = g.written.load();
  s.dropped = g.dropped.load();
  s.max_packets = g.max_packets;
  std::lock_guard<std::mutex> lock(g.error_mutex);
  s.error = g.error;
  return s;
}

bool fail(std::string* error, std::string msg) {
  if (error) *error = std::move(msg);
  return false;
}

void format_status(const CaptureStatus& s, rte_tel_data* d) {
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_int(d, "active", s.active ? 1 : 0);
  rte_tel_data_add_dict_int(d, "port", s.port_id);
  rte_tel_data_add_dict_string(d, "path", s.path.c_str());
  rte_tel_data_add_dict_u64(d, "written", s.written);
  rte_tel_data_add_dict_u64(d, "dropped", s.dropped);
  rte_tel_data_add_dict_u64(d, "max_packets", s.max_packets);
  rte_tel_data_add_dict_string(d, "error", s.error.c_str());
}

int cmd_capture(const char*, const char* params, rte_tel_data* d) {
  const std::string p = params != nullptr ? params : "";
  std::string error;
  if (p.rfind("start,", 0) == 0) {
    // start,PORT,MAX,PATH
    const size_t a = p.find(',', 6);
    const size_t b = a == std::string::npos ? a : p.find(',', a + 1);
    if (b == std::string::npos) return -EINVAL;
    char* end = nullptr;
    const std::string port_s = p.substr(6, a - 6), max_s = p.substr(a + 1, b - a - 1);
    const unsigned long port = std::strtoul(port_s.c_str(), &end, 10);
    if (port_s.empty() || *end != '\0' || port > UINT16_MAX) return -EINVAL;
    const unsigned long long max = std::strtoull(max_s.c_str(), &end, 10);
    if (max_s.empty() || *end != '\0') return -EINVAL;
    if (!capture_start(static_cast<uint16_t>(port), p.substr(b + 1), max, &error)) {
      CaptureStatus s = capture_status();
      s.active = false;
      s.error = error;
      format_status(s, d);
      return 0;
    }
  } else if (p == "stop") {
    capture_stop();
  } else if (!p.empty()) {
    return -EINVAL;
  }
  format_status(capture_status(), d);
  return 0;
}

}  // namespace

bool capture_start(uint16_t port_id, const std::string& path, uint64_t max_packets,
                   std::string* error) {
  std::lock_guard<std::mutex> lock(g.mutex);
  if (g.running && g.enabled.load())
    return fail(error, "a capture of port " + std::to_string(g.port_id) + " runs already");
  stop_locked();  // a capture that ended by itself (limit, write error) still holds its file
  if (g_captured_flag == 0) {
    static const rte_mbuf_dynflag desc = {"rocedp_capture_copied", 0};
    const int bit = rte_mbuf_dynflag_register(&desc);
    if (bit < 0)
      return fail(error, std::string("rte_mbuf_dynflag_register: ") + rte_strerror(rte_errno));
    g_captured_flag = 1ULL << bit;
  }
  rte_eth_dev_info info{};
  if (!rte_eth_dev_is_valid_port(port_id) || rte_eth_dev_info_get(port_id, &info) != 0)
    return fail(error, "no port " + std::to_string(port_id));
  uint16_t mtu = 1500;
  rte_eth_dev_get_mtu(port_id, &mtu);
  g.snaplen = mtu + kFrameOverhead;
  g.path = path;
  g.port_id = port_id;
  g.max_packets = max_packets;
  g.written = 0;
  g.dropped = 0;
  {
    std::lock_guard<std::mutex> e(g.error_mutex);
    g.error.clear();
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail(error, "cannot create " + path + ": " + std::strerror(errno));
  g.out = rte_pcapng_fdopen(fd, nullptr, nullptr, "rocedpd", nullptr);
  if (g.out == nullptr) {
    ::close(fd);
    return fail(error, std::string("rte_pcapng_fdopen: ") + rte_strerror(rte_errno));
  }
  const uint32_t serial = g.serial++;
  const std::string pool_name = "rdp_cap_pool_" + std::to_string(serial);
  const std::string ring_name = "rdp_cap_ring_" + std::to_string(serial);
  g.pool = rte_pktmbuf_pool_create(pool_name.c_str(), kPoolSize, 0, 0,
                                   static_cast<uint16_t>(rte_pcapng_mbuf_size(g.snaplen)),
                                   SOCKET_ID_ANY);
  g.ring = g.pool == nullptr
               ? nullptr
               : rte_ring_create(ring_name.c_str(), kRingSize, SOCKET_ID_ANY, RING_F_SC_DEQ);
  if (g.ring == nullptr) {
    const std::string why = rte_strerror(rte_errno);
    release_resources();
    return fail(error, "capture pool/ring: " + why);
  }
  g.start_tsc = rte_get_tsc_cycles();
  g.start_ns = wall_ns();
  g.tsc_hz = std::max<uint64_t>(rte_get_tsc_hz(), 1);
  g.writer_stop = false;
  g.enabled.store(true, std::memory_order_seq_cst);
  g.writer = std::thread(writer_loop);
  g.running = true;
  for (uint16_t q = 0; q < info.nb_rx_queues; ++q)
    if (const auto* cb = rte_eth_add_rx_callback(port_id, q, rx_callback, nullptr))
      g.rx_cbs.emplace_back(q, cb);
  for (uint16_t q = 0; q < info.nb_tx_queues; ++q)
    if (const auto* cb = rte_eth_add_tx_callback(port_id, q, tx_callback, nullptr))
      g.tx_cbs.emplace_back(q, cb);
  if (g.rx_cbs.size() != info.nb_rx_queues || g.tx_cbs.size() != info.nb_tx_queues) {
    const std::string why = rte_strerror(rte_errno);
    stop_locked();
    return fail(error,
                "cannot install capture callbacks on port " + std::to_string(port_id) + ": " + why);
  }
  return true;
}

void capture_stop() {
  std::lock_guard<std::mutex> lock(g.mutex);
  stop_locked();
}

CaptureStatus capture_status() {
  std::lock_guard<std::mutex> lock(g.mutex);
  return status_locked();
}

bool capture_register_telemetry(std::string* error) {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] {
    ok = rte_telemetry_register_cmd(
             "/rocedp/capture", cmd_capture,
             "Packet capture to pcapng. Parameters: none (status), start,PORT,MAX,PATH, or stop") ==
         0;
  });
  if (!ok) return fail(error, "rte_telemetry_register_cmd(/rocedp/capture) failed");
  return true;
}

}  // namespace rocedp::control
