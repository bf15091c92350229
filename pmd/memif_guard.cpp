#include "pmd/memif_guard.hpp"

#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_pause.h>
#include <rte_rcu_qsbr.h>
#include <rte_version.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "pmd/log.hpp"

// ethdev's table of devices; exported by librte_ethdev (version INTERNAL) with no public header.
extern "C" void* rte_eth_dev_allocated(const char* name);

namespace rocedp::pmd {
namespace {

// DPDK 22.11 layouts, checked against the installed librte_net_memif.so.23.0: memif_disconnect
// reads dev->data (+0x30), data->dev_private (+0x60), clears the link bit at data+0x6c, clears
// flags bits 0..1 at private+0x08, then spins on private+0x38 before it unmaps anything.
constexpr std::size_t kDevData = 0x30;            // struct rte_eth_dev: data
constexpr std::size_t kDevProcessPrivate = 0x38;  //                  process_private
constexpr std::size_t kDataNbRxQueues = 0x50;     // struct rte_eth_dev_data: nb_rx_queues
constexpr std::size_t kDataNbTxQueues = 0x52;     //                          nb_tx_queues
constexpr std::size_t kDataPrivate = 0x60;        //                          dev_private
constexpr std::size_t kPrivRole = 0x04;           // struct pmd_internals: role (0 server, 1 client)
constexpr std::size_t kPrivFlags = 0x08;          //                       flags
constexpr std::size_t kPrivCc = 0x30;             //                       cc (control channel)
constexpr std::size_t kPrivCcLock = 0x38;         //                       cc_lock
constexpr std::size_t kProcRegionsNum = 0x800;    // struct pmd_process_private: regions_num
// pmd_process_private.regions (256 pointers before regions_num); struct memif_region: addr, then
// region_size (uint32_t).
constexpr std::size_t kRegionAddr = 0x00;
constexpr std::size_t kRegionSize = 0x08;
constexpr uint32_t kKnownFlags = 0x1F;  // connecting, connected, zero-copy, disabled, abstract

// How often the watcher looks at a link. Every look wakes a thread that, in a pinned process (a
// rocedp-perf endpoint under taskset, rocedpd on a machine with no spare CPU), runs on the
// polling core's CPU and preempts it: looking every 100 us (about 5,000 wake-ups a second) cost
// a two-process WRITE 64 B run a fifth of its message rate. So:
//   - kWatchPeriod while something is in motion: the link came up and the lock is to be taken,
//     or a departure drains (memif's interrupt thread spins on the lock meanwhile);
//   - kBurstingPeriod while the link is up and every queue owner that ever burst reported a
//     quiescent state since the last look: the only change left is a departure, and the first
//     owner that sees the peer's flag drop wakes the watcher at once (MemifGuard::enter), so the
//     look is a safety net. At 1 ms the watcher preempted such a core about 900 times a second
//     (4.7 % of a WRITE 64 B run's rate, a fifth of its p99 round trip);
//   - kSettledPeriod otherwise: no peer connected (a link coming up waits at most this long), or
//     connected with an owner that stopped bursting (then only the watcher sees a departure,
//     and the period bounds the interrupt thread's spin). With 10 ms, runs beside a CPU-bound
//     neighbour were bimodal (2.8-6.7 Mmsg/s, hundreds of ACK timeouts in 2 s); with 1 ms they
//     were not (6.8-7.4, alternated with them).
constexpr auto kWatchPeriod = std::chrono::microseconds(100);
constexpr auto kSettledPeriod = std::chrono::milliseconds(1);
constexpr auto kBurstingPeriod = std::chrono::milliseconds(100);

template <typename T>
T read_at(const void* base, std::size_t off) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(base) + off, sizeof v);
  return v;
}

}  // namespace

// One thread for every guarded port of the process: it looks at each link as often as the most
// unsettled of them asks (see kWatchPeriod), and at once when woken. Started with the first
// guard, joined when the last one goes.
class MemifWatcher {
 public:
  static MemifWatcher& get() {
    static MemifWatcher w;
    return w;
  }
  void add(MemifGuard* g) {
    std::lock_guard lock(mutex_);
    guards_.push_back(g);
    wake_ = true;
    if (!thread_.joinable()) {
      quit_ = false;
      thread_ = std::thread([this] { run(); });
    }
  }
  void remove(MemifGuard* g) {
    std::thread done;
    {
      std::unique_lock lock(mutex_);
      // Not while run() is stepping this guard: wait for the end of the round.
      cv_.wait(lock, [this] { return !stepping_; });
      std::erase(guards_, g);
      if (guards_.empty() && thread_.joinable()) {
        quit_ = true;
        done = std::move(thread_);
      }
    }
    cv_.notify_all();
    if (done.joinable()) done.join();
  }
  // Any thread: look at the links now. Called once per event (a guard started, a queue owner
  // saw its peer leave), never per burst.
  void wake() {
    {
      std::lock_guard lock(mutex_);
      wake_ = true;
    }
    cv_.notify_all();
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (!quit_) {
      stepping_ = true;
      wake_ = false;
      std::vector<MemifGuard*> round = guards_;
      lock.unlock();
      std::chrono::microseconds period = kBurstingPeriod;  // the longest any guard asks for
      for (MemifGuard* g : round) period = std::min(period, g->step());
      lock.lock();
      stepping_ = false;
      cv_.notify_all();
      cv_.wait_for(lock, period, [this] { return quit_ || wake_; });
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<MemifGuard*> guards_;
  std::thread thread_;
  bool quit_ = false;
  bool stepping_ = false;
  bool wake_ = false;  // a look was asked for since the last round began
};

std::unique_ptr<MemifGuard> MemifGuard::attach(uint16_t port_id, uint16_t queues,
                                               const std::string& port_name) {
  rte_eth_dev_info info;
  if (rte_eth_dev_info_get(port_id, &info) != 0 || info.driver_name == nullptr ||
      std::strcmp(info.driver_name, "net_memif") != 0) {
    return nullptr;
  }
  auto refuse = [&](const std::string& why) {
    log(LogLevel::kWarning, "memif_guard_unavailable",
        {{"port", port_name},
         {"dpdk", rte_version()},
         {"reason", why},
         {"note", "the peer leaving while a core is inside a burst can crash the process"}});
    return nullptr;
  };
  if (std::strncmp(rte_version(), "DPDK 22.11", 10) != 0) return refuse("not DPDK 22.11");
  // Diagnostic switch: ROCEDP_MEMIF_GUARD=0 runs unguarded, to reproduce the crash it prevents.
  if (const char* env = std::getenv("ROCEDP_MEMIF_GUARD");
      env != nullptr && std::strcmp(env, "0") == 0) {
    return refuse("disabled by ROCEDP_MEMIF_GUARD=0");
  }
  char name[RTE_ETH_NAME_MAX_LEN];
  if (rte_eth_dev_get_name_by_port(port_id, name) != 0) return refuse("no ethdev name");
  void* dev = rte_eth_dev_allocated(name);
  if (dev == nullptr) return refuse("ethdev not found by name");
  void* data = read_at<void*>(dev, kDevData);
  if (data == nullptr || std::strncmp(static_cast<const char*>(data), name, sizeof name) != 0 ||
      read_at<uint16_t>(data, kDataNbRxQueues) != queues ||
      read_at<uint16_t>(data, kDataNbTxQueues) != queues) {
    return refuse("rte_eth_dev_data layout differs");
  }
  void* priv = read_at<void*>(data, kDataPrivate);
  void* proc = read_at<void*>(dev, kDevProcessPrivate);
  if (priv == nullptr || proc == nullptr) return refuse("no dev_private or process_private");
  const auto role = read_at<uint32_t>(priv, kPrivRole);
  const auto flags = read_at<uint32_t>(priv, kPrivFlags);
  const auto lock = read_at<int>(priv, kPrivCcLock);
  if (role > 1 || (flags & ~kKnownFlags) != 0 || (lock != 0 && lock != 1)) {
    return refuse("pmd_internals layout differs");
  }

  std::unique_ptr<MemifGuard> g(new MemifGuard());
  g->name_ = port_name;
  g->port_id_ = port_id;
  g->queues_ = queues;
  g->flags_ = reinterpret_cast<volatile uint32_t*>(static_cast<uint8_t*>(priv) + kPrivFlags);
  g->cc_lock_ = reinterpret_cast<volatile int*>(static_cast<uint8_t*>(priv) + kPrivCcLock);
  g->cc_ = reinterpret_cast<void* volatile*>(static_cast<uint8_t*>(priv) + kPrivCc);
  g->regions_num_ =
      reinterpret_cast<volatile uint16_t*>(static_cast<uint8_t*>(proc) + kProcRegionsNum);
  g->regions_ = static_cast<void* const volatile*>(proc);
  const size_t size = rte_rcu_qsbr_get_memsize(queues);
  g->qsbr_ = static_cast<rte_rcu_qsbr*>(rte_zmalloc("memif_guard", size, RTE_CACHE_LINE_SIZE));
  if (g->qsbr_ == nullptr || rte_rcu_qsbr_init(g->qsbr_, queues) != 0) {
    rte_free(g->qsbr_);
    g->qsbr_ = nullptr;
    return refuse("no memory for the quiescent-state variable");
  }
  g->online_ = std::make_unique<bool[]>(queues);
  MemifWatcher::get().add(g.get());
  return g;
}

MemifGuard::~MemifGuard() {
  stop();
  MemifWatcher::get().remove(this);
  rte_free(qsbr_);
}

void MemifGuard::go_online(uint16_t q) {
  rte_rcu_qsbr_thread_register(qsbr_, q);
  rte_rcu_qsbr_thread_online(qsbr_, q);
  online_[q] = true;
  owners_.fetch_add(1, std::memory_order_release);
}

void MemifGuard::leave(uint16_t q) {
  rte_rcu_qsbr_quiescent(qsbr_, q);
}

void MemifGuard::peer_leaving() {
  // The first owner to see it wakes the watcher; the others (and later bursts) return here.
  if (leaving_seen_.exchange(true, std::memory_order_relaxed)) return;
  MemifWatcher::get().wake();
}

void MemifGuard::start() {
  running_.store(true, std::memory_order_release);
  MemifWatcher::get().wake();
}

void MemifGuard::stop() {
  running_.store(false, std::memory_order_release);
  std::lock_guard lock(step_mutex_);
  polling_.store(false, std::memory_order_release);
  draining_ = false;
  if (!locked_) return;
  // The peer is leaving if the driver cleared its flag: memif_disconnect then waits on the
  // interrupt thread for the lock we let go of now.
  const bool leaving = !connected();
  __atomic_store_n(cc_lock_, 0, __ATOMIC_RELEASE);
  locked_ = false;
  if (!leaving) return;
  // Let that disconnect finish (lock free, control channel gone, regions unmapped) before
  // rte_eth_dev_stop runs memif_disconnect too: the driver must never run it twice at once.
  const auto start = std::chrono::steady_clock::now();
  while (!disconnected() && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (!disconnected()) {
    log(LogLevel::kWarning, "memif_guard_stop_timeout",
        {{"port", name_},
         {"note", "the interrupt thread did not finish the peer's departure in 10 s"}});
  }
}

std::chrono::microseconds MemifGuard::connected_period() {
  // Every online owner reported since the token was taken: they are bursting, and the first to
  // see the peer's flag drop wakes the watcher. rte_rcu_qsbr_check passes with nobody online,
  // hence the count.
  const bool bursting = owners_.load(std::memory_order_acquire) != 0 &&
                        rte_rcu_qsbr_check(qsbr_, bursts_token_, false) == 1;
  bursts_token_ = rte_rcu_qsbr_start(qsbr_);
  return bursting ? kBurstingPeriod : kSettledPeriod;
}

bool MemifGuard::disconnected() const {
  return __atomic_load_n(cc_lock_, __ATOMIC_ACQUIRE) == 0 &&
         __atomic_load_n(cc_, __ATOMIC_ACQUIRE) == nullptr &&
         __atomic_load_n(regions_num_, __ATOMIC_ACQUIRE) == 0;
}

// memif maps the shared memory (the client's memfd "memif_region_N", about 4 MB with the default
// rings) without populating it, so each page costs a fault the first time a burst touches it. A
// ping-pong's first pass over its rings (1,024 round trips, two 2 KiB buffers a page) paid a fault
// every other round trip, a few microseconds each in a VM: the p99 of a run of 20,000 round trips
// was that pass. Called with the lock held while connected (the region stays mapped), before the
// bursts are let in: MADV_POPULATE_READ (Linux 5.14), or a read a page where the kernel lacks it.
// Region 0 only: it holds the rings, and in copy mode the packet buffers; in zero-copy mode the
// other regions are the client's whole EAL memory, which is not memif's to fault in.
void MemifGuard::populate_regions() const {
#ifndef MADV_POPULATE_READ
  constexpr int MADV_POPULATE_READ = 22;
#endif
  if (*regions_num_ == 0 || regions_[0] == nullptr) return;
  auto* addr = read_at<char*>(regions_[0], kRegionAddr);
  const auto len = read_at<uint32_t>(regions_[0], kRegionSize);
  if (addr == nullptr || len == 0) return;
  if (madvise(addr, len, MADV_POPULATE_READ) == 0 || errno != EINVAL) return;
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  for (std::size_t off = 0; off < len; off += page)
    (void)*static_cast<volatile const char*>(addr + off);
}

std::chrono::microseconds MemifGuard::step() {
  std::lock_guard lock(step_mutex_);
  looks_.fetch_add(1, std::memory_order_relaxed);
  if (!running_.load(std::memory_order_acquire)) return kSettledPeriod;  // start() wakes us
  if (!locked_) {
    if (!connected()) return kSettledPeriod;
    int expected = 0;
    // A disconnect in progress holds or wants the lock: try again next round.
    if (!__atomic_compare_exchange_n(cc_lock_, &expected, 1, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED)) {
      return kWatchPeriod;
    }
    // Connected while we hold the lock: the regions stay mapped until we let go.
    if (!connected()) {
      __atomic_store_n(cc_lock_, 0, __ATOMIC_RELEASE);
      return kWatchPeriod;
    }
    locked_ = true;
    draining_ = false;
    populate_regions();
    bursts_token_ = rte_rcu_qsbr_start(qsbr_);  // the first look asks for bursts since now
    leaving_seen_.store(false, std::memory_order_relaxed);  // before bursts may see polling_
    polling_.store(true, std::memory_order_release);
    log(LogLevel::kDebug, "memif_guard_polling", {{"port", name_}});
    return kSettledPeriod;
  }
  if (!draining_) {
    if (connected()) return connected_period();
    // The peer is leaving: memif_disconnect cleared the flag and now waits for the lock. Stop the
    // bursts, then wait (over as many rounds as it takes) until every queue owner is out.
    polling_.store(false, std::memory_order_seq_cst);
    drain_token_ = rte_rcu_qsbr_start(qsbr_);
    draining_ = true;
  }
  if (rte_rcu_qsbr_check(qsbr_, drain_token_, false) == 0) return kWatchPeriod;
  __atomic_store_n(cc_lock_, 0, __ATOMIC_RELEASE);
  locked_ = false;
  draining_ = false;
  teardowns_.fetch_add(1, std::memory_order_relaxed);
  log(LogLevel::kInfo, "memif_peer_left",
      {{"port", name_}, {"note", "bursts quiesced before unmap"}});
  return kWatchPeriod;  // memif finishes its teardown; a new peer may follow
}

}  // namespace rocedp::pmd
