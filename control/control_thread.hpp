#pragma once
// The control thread: the one thread that orchestrates the polling cores (DESIGN.md §1).
//
// It owns the per-port neighbour tables (control/neighbour_table.hpp), receives the frames the
// cores classified for the control path (ARP replies/announcements -> neighbour table -> updates
// pushed to every core's NeighbourCache; QP1/CM MADs to the CM handler of their port, set with
// set_cm_handler_st, counted and dropped when none is set), asks every
// core for a stats snapshot each telemetry.stats_interval_ms and publishes the latest one for
// telemetry, sends a gratuitous ARP per port once it is up, and runs port start/stop and the
// shutdown sequence over the cores' CoreChannels.
//
// Threads: the control thread alone touches its state. Other threads (main, signal side,
// telemetry) reach it only through post() — a oneTBB concurrent_queue inbox, closed when the loop
// ends — or through the blocking helpers below, which post and wait. When idle it naps
// (pmd/control_wake.hpp): post(), a core's completions and a core's frames for control end the nap
// at once. latest() is the one read path for other threads: a shared_ptr to an immutable snapshot,
// swapped under a mutex that the polling cores never take. Every CoreMessage completion callback
// issued here runs on the control thread.

#include <tbb/concurrent_queue.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "control/connection_rows.hpp"
#include "control/neighbour_table.hpp"
#include "dataplane/polling_core.hpp"
#include "pmd/control_wake.hpp"
#include "pmd/port.hpp"

namespace rocedp::pmd {
class PacketPool;
class RxDispatch;
}  // namespace rocedp::pmd

namespace rocedp::control {

/// One port as telemetry shows it.
struct PortSnapshot {
  std::string name;
  uint16_t id = 0;
  config::MacAddress mac;
  config::Ipv4Address address;
  uint8_t prefix_len = 0;
  std::optional<config::Ipv6Address> address6;  ///< ports[].ipv6
  uint16_t mtu = 0;
  uint16_t vlan = 0;  ///< 802.1Q VLAN ID, 0: untagged
  uint8_t vlan_priority = 0;
  uint8_t dscp = 0;
  bool ecn = false;
  uint8_t cnp_dscp = 0;
  config::DcqcnConfig dcqcn;
  uint16_t queues = 0;
  bool started = false;
  pmd::LinkStatus link;
  pmd::PortStats stats;
};

/// One neighbour of one port, as telemetry shows it.
struct NeighbourRow {
  std::string port;
  NeighbourSnapshotEntry entry;            ///< for an IPv6 row: entry.ip is 0, the rest as for IPv4
  std::optional<config::Ipv6Address> ip6;  ///< set: an IPv6 neighbour (RFC 4861)
};

/// What the control thread itself counts.
struct ControlCounters {
  uint64_t frames = 0;      // frames received from the cores
  uint64_t arp_frames = 0;  // ARP frames learned from (or ignored)
  uint64_t ndp_frames = 0;  // Neighbor Advertisements learned from (or ignored)
  uint64_t cm_frames = 0;   // QP1 MADs (to the CM handler when one is set, else dropped)
  uint64_t other_frames = 0;
  uint64_t frames_sent = 0;        // ARP requests / gratuitous ARP / NS handed to a core for TX
  uint64_t send_failures = 0;      // no mbuf, channel full, or the core had no TX queue
  uint64_t neighbour_updates = 0;  // NeighbourUpdate messages sent to cores
  uint64_t snapshots = 0;          // stats rounds completed
  uint64_t naps = 0;               // idle naps that blocked (pmd/control_wake.hpp)
  uint64_t naps_woken = 0;         // of them, ended by a wake (a core's hand-off, a post)
  uint64_t address_defences = 0;   // announcements (ARP, NA) against a node claiming our address
};

/// Everything telemetry prints, taken at one stats round. Immutable once published.
struct Snapshot {
  uint64_t sequence = 0;
  std::chrono::steady_clock::time_point taken;
  std::vector<dataplane::CoreStats> cores;
  std::vector<PortSnapshot> ports;
  std::vector<NeighbourRow> neighbours;
  ControlCounters control;
  uint32_t mbufs_available = 0;
  std::vector<ConnectionRow> connections;  // from snapshot parts (the runtime's adapter)
  std::vector<QpRow> qps;
  std::vector<EngineRow> engines;    // the RC engine of each core (same snapshot part as qps)
  std::vector<ServiceRow> services;  // the daemon's listening services (same part)
};

class ControlThread {
 public:
  static constexpr std::chrono::microseconds kMaxIdleNap{10'000};
  struct Setup {
    const config::Config* cfg = nullptr;            // outlives the thread
    std::vector<pmd::Port*> ports;                  // started/stopped by this thread
    std::vector<dataplane::CoreChannel*> channels;  // index = polling core index
    pmd::RxDispatch* dispatch = nullptr;            // control target = channels.size()
    pmd::PacketPool* pool = nullptr;                // for ARP frames built here
    // How long an idle nap lasts. Nothing with a deadline waits for it (stats rounds, neighbour
    // timers); the poll hooks' own timers (CM retransmissions, QP probes) may run this late.
    std::chrono::microseconds max_idle_nap = kMaxIdleNap;
  };
  using Task = std::function<void(ControlThread&)>;

  /// From start() on, the cores of setup.channels and setup.dispatch wake this thread when they
  /// hand it something: stop them before destroying it.
  explicit ControlThread(Setup setup);
  ~ControlThread();  // asks the loop to exit (without the shutdown sequence) and joins
  ControlThread(const ControlThread&) = delete;
  ControlThread& operator=(const ControlThread&) = delete;

  /// Spawns the thread, pinned to the CPUs of control.lcore when set. False and *error if its
  /// wake (an eventfd) or the thread cannot be created, or the thread cannot be pinned.
  bool start(std::string* error);

  /// Any thread: runs `task` on the control thread (FIFO). False, and the task dropped, once the
  /// loop has ended; a task accepted before that runs, the last ones after the loop's final pass
  /// with nothing more going to the cores (their requests fail at once). Waits only for another
  /// post or the loop's end, never for the control thread's work.
  bool post(Task task);
  /// Any thread, after it left something for a poll hook (e.g. the adapter's inbox): ends the
  /// control thread's nap. No system call while the control thread is awake.
  /// Its naps() and woken() count the idle naps taken and those a wake ended.
  pmd::ControlWake& wake() { return wake_; }

  // ---- blocking helpers for other threads (post + wait for the outcome) ----
  /// Starts every port (rte_eth_dev_start), then attaches queue c of it to core c on every core
  /// through the channel, then sends a gratuitous ARP per port and publishes static neighbours.
  bool start_ports(std::string* error);
  /// Detaches port `index` from every core (the cores stop polling it), then stops it.
  bool stop_port(size_t index, std::string* error);
  /// The shutdown sequence: stop every polling core (channel), then stop every port; after it
  /// the control loop exits. The caller then waits for the lcores (rte_eal_wait_lcore), closes
  /// the ports and frees the pools. Logs every step.
  bool shutdown(std::string* error);
  /// Asks every core for a snapshot now and waits until it is published (tests, first telemetry).
  bool refresh(std::string* error);

  /// Control thread only (from a posted task, or before start()): adds a function the loop calls
  /// once per iteration, after the cores' completion rings. It returns the work it did (0 =
  /// idle). This is how Adapter::poll_control() runs on this thread (adapter.hpp requires it).
  /// Returns an id for remove_poll_hook_st().
  using PollHook = std::function<unsigned()>;
  uint64_t add_poll_hook_st(PollHook hook);
  /// Control thread only; may be called from inside a hook (it stops being called at once).
  void remove_poll_hook_st(uint64_t id);

  /// Control thread only: QP1/CM frames the cores handed to the control path from port
  /// `port_index` go to `handler` (the whole frame) instead of being counted and dropped (null
  /// removes it). This thread stays the one reader of the dispatch's control target, and ARP
  /// stays with its neighbour tables.
  using FrameHandler = std::function<void(const uint8_t* frame, size_t len)>;
  void set_cm_handler_st(size_t port_index, FrameHandler handler) {
    if (cm_handlers_.size() <= port_index) cm_handlers_.resize(port_index + 1);
    cm_handlers_[port_index] = std::move(handler);
  }
  /// Control thread only: the neighbour table of port `index` (the CM resolves through it).
  NeighbourTable& neighbour_table_st(size_t index) { return *tables_.at(index); }
  /// Control thread only: more content for every snapshot round. `collect(done)` starts
  /// gathering (e.g. requests to the cores) and calls done(ok) once on this thread; the round is
  /// published after every collect finished, and `fill` then adds its rows to the Snapshot (a
  /// part added while a round was under way is filled from the next round on).
  /// done(false) means the part could not gather all of it (a core's ring was full): like a
  /// core whose stats request could not be posted, the round is then not published and the
  /// previous snapshot stays, so a snapshot never shows a part with rows missing.
  struct SnapshotPart {
    std::function<void(std::function<void(bool ok)> done)> collect;
    std::function<void(Snapshot&)> fill;
  };
  uint64_t add_snapshot_part_st(SnapshotPart part);
  void remove_snapshot_part_st(uint64_t id);

  /// Any thread: the latest published snapshot (null before the first round).
  std::shared_ptr<const Snapshot> latest() const;
  bool running() const { return running_.load(std::memory_order_acquire); }

 private:
  struct Pending;  // an operation waiting for N core completions
  static void on_core_done(const dataplane::CoreMessage& msg);

  void loop();
  void wire_wake(pmd::ControlWake* wake);  // the cores' hand-offs wake `wake` (null: nobody)
  // Idle: how long the next nap may last (Setup::max_idle_nap, cut at the next deadline).
  std::chrono::microseconds nap_length_st(std::chrono::steady_clock::time_point now) const;
  bool run_sync(std::function<void(std::function<void(bool, std::string)>)> op, std::string* error);
  // Control-thread only (_st):
  void start_ports_st(std::function<void(bool, std::string)> done);
  void stop_port_st(size_t index, std::function<void(bool, std::string)> done);
  void shutdown_st(std::function<void(bool, std::string)> done);
  void request_snapshot_st(std::function<void(bool, std::string)> done);
  unsigned poll_frames_st();
  void send_frame_st(size_t port_index, rte_mbuf* m, const char* what);
  void defend_address_st(size_t port_index, bool ipv6, const config::MacAddress& claimant,
                         std::chrono::steady_clock::time_point now);
  void push_neighbour_st(const NeighbourChange& change);
  dataplane::LocalAddress local_of(size_t port_index) const;
  dataplane::LocalAddress6 local6_of(size_t port_index) const;  // the port has an IPv6 address
  int port_index_of(uint16_t port_id) const;

  Setup setup_;
  std::vector<std::unique_ptr<NeighbourTable>> tables_;  // one per port
  // Per port, IPv4 and IPv6: the last announcement against a conflict (defend_address_st).
  std::vector<std::array<std::chrono::steady_clock::time_point, 2>> last_defence_;
  bool snapshot_in_flight_ = false;
  bool cores_stopping_ = false;  // shutdown posted the cores' stop requests: post nothing more
  uint64_t sequence_ = 0;
  ControlCounters counters_;
  std::chrono::steady_clock::time_point next_stats_;

  std::vector<std::pair<uint64_t, PollHook>> hooks_;        // control thread; id 0 = removed
  std::vector<std::pair<uint64_t, PollHook>> added_hooks_;  // joins hooks_ after a loop pass
  uint64_t next_hook_id_ = 1;
  std::vector<FrameHandler> cm_handlers_;  // by port index
  std::vector<std::pair<uint64_t, SnapshotPart>> parts_;

  tbb::concurrent_queue<Task> inbox_;
  // Taken by post() and by the loop's end, so no task lands in the inbox after the loop emptied
  // it for the last time (its caller would wait for ever).
  std::mutex inbox_mutex_;
  bool inbox_closed_ = false;  // under inbox_mutex_
  pmd::ControlWake wake_;      // the idle nap (control_thread.cpp, nap_length_st) and its end
  std::atomic<bool> exit_{false};
  std::atomic<bool> running_{false};
  std::thread thread_;

  mutable std::mutex snapshot_mutex_;  // control and telemetry only; never a polling core
  std::shared_ptr<const Snapshot> latest_;
};

}  // namespace rocedp::control
