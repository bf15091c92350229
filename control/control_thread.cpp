#include "control/control_thread.hpp"

#include <pthread.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <utility>

#include "dataplane/arp_icmp.hpp"
#include "dataplane/ndp.hpp"
#include "pmd/log.hpp"
#include "pmd/packet_pool.hpp"
#include "pmd/rx_dispatch.hpp"

namespace rocedp::control {

using dataplane::CoreMessage;
using dataplane::CoreStats;
using pmd::LogLevel;
using Done = std::function<void(bool, std::string)>;

namespace {
constexpr unsigned kInboxBatch = 64;       // tasks per loop iteration
constexpr unsigned kCompletionBatch = 64;  // completions per channel per iteration
constexpr uint16_t kFrameBatch = 32;       // control-path frames per iteration
// When nothing happened in an iteration the control thread naps: it is not a polling core, and
// on a shared machine a spinning control thread steals a core from the data path. Each nap ends
// in a wake-up that preempts whatever runs on the CPU, which in a pinned process is the polling
// core (200 us naps cost a two-process WRITE 64 B run a tenth of its message rate; 800 us ones
// still about 4.5 %). So whatever hands control something ends the nap (pmd/control_wake.hpp):
// post(), a core's completions, a core's frames for control. A nap lasts Setup::max_idle_nap,
// but never past the next stats round or neighbour-table deadline, which nobody wakes for. It
// used to start short after work and double, so that a core's answer to a request just sent was
// picked up soon; the wake does that now, and the short naps only cost wake-ups (about seven
// after every QP probe, which the CM sends every 10 ms per connection).
constexpr auto kMinNap = std::chrono::microseconds(200);  // a deadline due now (see below)
}  // namespace

// An operation waiting for the answers of several cores. Lives on the heap from the first post
// to the last completion; touched on the control thread only (completions run there).
struct ControlThread::Pending {
  ControlThread* self = nullptr;
  int outstanding = 0;
  int failures = 0;
  NTSTATUS first_status = STATUS_SUCCESS;
  std::vector<CoreStats> stats;  // snapshot rounds: one slot per core, written by that core
  std::vector<uint64_t> parts;   // snapshot rounds: the parts that collected in this round
  std::function<void(Pending&)> then;

  // Call after posting: runs `then` now when nothing was posted (or everything failed to post).
  static void arm(Pending* p) {
    if (p->outstanding == 0) {
      p->then(*p);
      delete p;
    }
  }
};

void ControlThread::on_core_done(const CoreMessage& msg) {
  auto* p = static_cast<Pending*>(msg.done_ctx);
  if (!msg.result.ok() && p->failures++ == 0) p->first_status = msg.result.status;
  if (--p->outstanding == 0) {
    p->then(*p);
    delete p;
  }
}

ControlThread::ControlThread(Setup setup) : setup_(std::move(setup)) {
  const config::Config& cfg = *setup_.cfg;
  for (size_t i = 0; i < setup_.ports.size(); ++i) {
    const config::PortConfig* pc = nullptr;
    for (const auto& p : cfg.ports)
      if (p.name == setup_.ports[i]->name()) pc = &p;
    config::PortConfig fallback;
    if (pc == nullptr) {
      fallback.address = setup_.ports[i]->address();
      fallback.prefix_len = setup_.ports[i]->prefix_len();
      fallback.address6 = setup_.ports[i]->address6();
      pc = &fallback;
    }
    NeighbourTableHooks hooks;
    hooks.send_request = [this, i](config::Ipv4Address target) {
      send_frame_st(i, dataplane::build_arp_request(setup_.pool->get(), local_of(i), target),
                    "arp_request");
    };
    hooks.on_change = [this](const NeighbourChange& c) { push_neighbour_st(c); };
    hooks.send_request6 = [this, i](const config::Ipv6Address& target) {
      send_frame_st(
          i, dataplane::build_neighbor_solicitation(setup_.pool->get(), local6_of(i), target),
          "neighbor_solicitation");
    };
    hooks.on_change6 = [](const config::Ipv6Address& ip, const config::MacAddress& mac,
                          bool removed) {
      pmd::log(LogLevel::kInfo, removed ? "neighbour_removed" : "neighbour_set",
               {{"ip", config::format_ipv6(ip)}, {"mac", config::format_mac(mac)}});
    };
    tables_.push_back(std::make_unique<NeighbourTable>(
        NeighbourTableOptions::from_config(cfg.control, *pc), pc->neighbours, std::move(hooks)));
    last_defence_.emplace_back();
  }
}

ControlThread::~ControlThread() {
  exit_.store(true, std::memory_order_release);
  wake_.wake();
  if (thread_.joinable()) thread_.join();
  wire_wake(nullptr);
}

void ControlThread::wire_wake(pmd::ControlWake* wake) {
  for (auto* ch : setup_.channels) ch->set_control_wake(wake);
  if (setup_.dispatch != nullptr) setup_.dispatch->set_control_wake(wake);
}

bool ControlThread::start(std::string* error) {
  if (thread_.joinable()) {
    if (error) *error = "control thread already started";
    return false;
  }
  if (!wake_.open(error)) return false;
  running_.store(true, std::memory_order_release);
  next_stats_ = std::chrono::steady_clock::now();
  wire_wake(&wake_);
  thread_ = std::thread([this] { loop(); });
  pthread_setname_np(thread_.native_handle(), "rocedp-control");
  const auto& lcore = setup_.cfg->control.lcore;
  if (!lcore.has_value()) {
    // A std::thread inherits the EAL main lcore's affinity; "unpinned" means any online CPU
    // (the kernel intersects this with the process's cpuset).
    cpu_set_t any;
    CPU_ZERO(&any);
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < n && c < CPU_SETSIZE; ++c) CPU_SET(static_cast<int>(c), &any);
    if (pthread_setaffinity_np(thread_.native_handle(), sizeof(any), &any) != 0)
      pmd::log(LogLevel::kWarning, "control_thread_affinity",
               {{"note", "kept the main lcore's CPUs"}});
  } else {
    // Pin to the CPUs EAL gave that lcore (with --lcores maps, lcore id != CPU id).
    rte_cpuset_t cpus = rte_lcore_cpuset(*lcore);
    if (CPU_COUNT(&cpus) == 0) CPU_SET(*lcore, &cpus);
    const int rc = pthread_setaffinity_np(thread_.native_handle(), sizeof(cpus), &cpus);
    if (rc != 0) {
      if (error) *error = "cannot pin the control thread to lcore " + std::to_string(*lcore);
      exit_.store(true);
      wake_.wake();
      thread_.join();
      wire_wake(nullptr);
      running_.store(false);
      return false;
    }
  }
  pmd::log(LogLevel::kInfo, "control_thread_started",
           {{"lcore", lcore ? std::to_string(*lcore) : std::string("unpinned")},
            {"cores", std::to_string(setup_.channels.size())},
            {"ports", std::to_string(setup_.ports.size())}});
  return true;
}

bool ControlThread::post(Task task) {
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    if (inbox_closed_) return false;
    inbox_.push(std::move(task));
  }
  wake_.wake();
  return true;
}

uint64_t ControlThread::add_poll_hook_st(PollHook hook) {
  // Joins hooks_ after the current pass, so a hook may add hooks without moving the one running.
  added_hooks_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

uint64_t ControlThread::add_snapshot_part_st(SnapshotPart part) {
  parts_.emplace_back(next_hook_id_, std::move(part));
  return next_hook_id_++;
}

void ControlThread::remove_snapshot_part_st(uint64_t id) {
  std::erase_if(parts_, [id](const auto& p) { return p.first == id; });
}

void ControlThread::remove_poll_hook_st(uint64_t id) {
  for (auto& h : hooks_)
    if (h.first == id) h.first = 0;  // erased after the loop's pass, never under a running hook
  std::erase_if(added_hooks_, [id](const auto& h) { return h.first == id; });
}

std::shared_ptr<const Snapshot> ControlThread::latest() const {
  std::lock_guard<std::mutex> lock(snapshot_mutex_);
  return latest_;
}

bool ControlThread::run_sync(std::function<void(Done)> op, std::string* error) {
  if (!running()) {
    if (error) *error = "control thread is not running";
    return false;
  }
  auto promise = std::make_shared<std::promise<std::pair<bool, std::string>>>();
  auto future = promise->get_future();
  const bool posted = post([op = std::move(op), promise](ControlThread&) {
    op([promise](bool ok, std::string why) { promise->set_value({ok, std::move(why)}); });
  });
  if (!posted) {
    if (error) *error = "control thread is not running";
    return false;
  }
  auto [ok, why] = future.get();
  if (!ok && error) *error = why;
  return ok;
}

bool ControlThread::start_ports(std::string* error) {
  return run_sync([this](Done done) { start_ports_st(std::move(done)); }, error);
}
bool ControlThread::stop_port(size_t index, std::string* error) {
  return run_sync([this, index](Done done) { stop_port_st(index, std::move(done)); }, error);
}
bool ControlThread::shutdown(std::string* error) {
  const bool ok = run_sync([this](Done done) { shutdown_st(std::move(done)); }, error);
  if (thread_.joinable()) thread_.join();
  running_.store(false, std::memory_order_release);
  return ok;
}
bool ControlThread::refresh(std::string* error) {
  return run_sync([this](Done done) { request_snapshot_st(std::move(done)); }, error);
}

void ControlThread::loop() {
  const auto interval = std::chrono::milliseconds(
      setup_.cfg->telemetry.stats_interval_ms == 0 ? 100 : setup_.cfg->telemetry.stats_interval_ms);
  bool armed = false;  // wake_ armed: the next idle pass naps
  while (!exit_.load(std::memory_order_acquire)) {
    bool work = false;
    Task task;
    for (unsigned k = 0; k < kInboxBatch && inbox_.try_pop(task); ++k) {
      task(*this);
      work = true;
    }
    for (auto* ch : setup_.channels)
      if (ch->poll_completions(kCompletionBatch) > 0) work = true;
    if (poll_frames_st() > 0) work = true;
    for (auto& [id, hook] : hooks_)
      if (id != 0 && hook() > 0) work = true;
    if (!added_hooks_.empty() ||
        std::any_of(hooks_.begin(), hooks_.end(), [](const auto& h) { return h.first == 0; })) {
      std::erase_if(hooks_, [](const auto& h) { return h.first == 0; });
      for (auto& h : added_hooks_) hooks_.push_back(std::move(h));
      added_hooks_.clear();
    }

    const auto now = std::chrono::steady_clock::now();
    if (now >= next_stats_) {
      next_stats_ = now + interval;
      // Rounds run even with telemetry off: they also carry learned ARP requesters to control.
      if (!cores_stopping_ && !snapshot_in_flight_) request_snapshot_st(nullptr);
    }
    for (auto& t : tables_) t->on_timer(now);
    if (work) {
      if (armed) wake_.disarm();
      armed = false;
    } else if (!armed) {
      // Raise the flag, then one more pass: what a core handed over before it saw the flag is
      // found by that pass, what it hands over after ends the nap.
      wake_.arm();
      armed = true;
    } else {
      wake_.nap(nap_length_st(now));
      armed = false;
    }
  }
  // The tasks posted before the inbox closed still run: their callers wait for an answer. No core
  // is polled any more, so nothing more goes to the cores and requests that need one fail.
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    inbox_closed_ = true;
  }
  cores_stopping_ = true;
  for (Task task; inbox_.try_pop(task);) task(*this);
  // Whatever the cores still handed us goes back to the pool before the pool is freed.
  while (poll_frames_st() > 0) {
  }
  running_.store(false, std::memory_order_release);
}

std::chrono::microseconds ControlThread::nap_length_st(
    std::chrono::steady_clock::time_point now) const {
  auto until = next_stats_;
  for (const auto& t : tables_) until = std::min(until, t->next_deadline());
  // A deadline due now still naps kMinNap: its timer ran in this pass, and a table whose
  // deadline did not move must not make the loop spin.
  const auto left = std::max(std::chrono::duration_cast<std::chrono::microseconds>(until - now),
                             std::min(kMinNap, setup_.max_idle_nap));
  return std::min(setup_.max_idle_nap, left);
}

void ControlThread::start_ports_st(Done done) {
  if (cores_stopping_) {
    done(false, "cores are stopped");
    return;
  }
  for (auto* port : setup_.ports) {
    if (port->started()) continue;
    std::string err;
    if (!port->start(&err)) {
      pmd::log(LogLevel::kError, "port_start_failed", {{"port", port->name()}, {"error", err}});
      done(false, port->name() + ": " + err);
      return;
    }
    pmd::log(LogLevel::kInfo, "port_started",
             {{"port", port->name()}, {"id", std::to_string(port->id())}});
  }
  // Queue c of every port belongs to core c. Attach only after rte_eth_dev_start: in DPDK 22.11 a
  // stopped port's burst functions are stubs that log an error on every call.
  auto* p = new Pending;
  p->self = this;
  p->then = [this, done = std::move(done)](Pending& pd) {
    if (pd.failures > 0) {
      done(false, "attaching queues failed on " + std::to_string(pd.failures) +
                      " core(s), first status " + std::string(status_name(pd.first_status)));
      return;
    }
    for (size_t i = 0; i < setup_.ports.size(); ++i) {
      pmd::Port* port = setup_.ports[i];
      const pmd::LinkStatus link = port->link();
      pmd::log(
          LogLevel::kInfo, "port_ready",
          {{"port", port->name()},
           {"mac", config::format_mac(port->mac())},
           {"ip", config::format_ipv4(port->address()) + "/" + std::to_string(port->prefix_len())},
           {"mtu", std::to_string(port->mtu())},
           {"queues", std::to_string(port->queue_count())},
           {"link", link.up ? "up" : "down"}});
      // RFC 5227 §2.3 announcement, so peers replace a stale MAC for our address at once.
      send_frame_st(i, dataplane::build_gratuitous_arp(setup_.pool->get(), local_of(i)),
                    "gratuitous_arp");
      // RFC 4861 7.2.6, the same for IPv6.
      if (port->address6())
        send_frame_st(i,
                      dataplane::build_unsolicited_advertisement(setup_.pool->get(), local6_of(i)),
                      "unsolicited_na");
      tables_[i]->publish_all();
    }
    done(true, {});
  };
  for (auto* port : setup_.ports) {
    const uint16_t queues =
        std::min<uint16_t>(port->queue_count(), static_cast<uint16_t>(setup_.channels.size()));
    for (uint16_t c = 0; c < queues; ++c) {
      if (dataplane::core_requests::attach_port(*setup_.channels[c], port, c, &on_core_done, p))
        p->outstanding++;
      else if (p->failures++ == 0)
        p->first_status = STATUS_INSUFFICIENT_RESOURCES;  // the core's ring is full
    }
  }
  Pending::arm(p);
}

void ControlThread::stop_port_st(size_t index, Done done) {
  if (index >= setup_.ports.size()) {
    done(false, "no port " + std::to_string(index));
    return;
  }
  pmd::Port* port = setup_.ports[index];
  auto* p = new Pending;
  p->self = this;
  p->then = [port, done = std::move(done)](Pending& pd) {
    // The cores no longer poll it (or the detach failed and we stop anyway: stopping is final).
    port->stop();
    pmd::log(LogLevel::kInfo, "port_stopped",
             {{"port", port->name()}, {"detach_failures", std::to_string(pd.failures)}});
    done(pd.failures == 0, pd.failures == 0 ? std::string() : "detach failed on some cores");
  };
  if (!cores_stopping_) {
    const uint16_t queues =
        std::min<uint16_t>(port->queue_count(), static_cast<uint16_t>(setup_.channels.size()));
    for (uint16_t c = 0; c < queues; ++c) {
      if (dataplane::core_requests::detach_port(*setup_.channels[c], port->id(), &on_core_done, p))
        p->outstanding++;
      else
        p->failures++;
    }
  }
  Pending::arm(p);
}

void ControlThread::shutdown_st(Done done) {
  if (cores_stopping_) {
    done(false, "already shutting down");
    return;
  }
  pmd::log(LogLevel::kInfo, "shutdown_begin", {{"cores", std::to_string(setup_.channels.size())}});
  // From here nothing more goes to the cores: a core answers nothing queued behind its stop, so a
  // request posted now (a stats round, a port's detach) would wait for ever.
  cores_stopping_ = true;
  auto* p = new Pending;
  p->self = this;
  p->then = [this, done = std::move(done)](Pending& pd) {
    pmd::log(LogLevel::kInfo, "cores_stopped", {{"failures", std::to_string(pd.failures)}});
    for (auto* port : setup_.ports) {
      port->stop();
      pmd::log(LogLevel::kInfo, "port_stopped", {{"port", port->name()}});
    }
    exit_.store(true, std::memory_order_release);
    done(pd.failures == 0, pd.failures == 0 ? std::string() : "some cores did not stop cleanly");
  };
  // Stop requests queue behind anything already posted (a snapshot round, a transmit), so those
  // complete first: the rings are FIFO.
  for (auto* ch : setup_.channels) {
    if (dataplane::core_requests::stop(*ch, &on_core_done, p))
      p->outstanding++;
    else
      p->failures++;
  }
  Pending::arm(p);
}

void ControlThread::request_snapshot_st(Done done) {
  if (cores_stopping_) {
    if (done) done(false, "cores are stopped");
    return;
  }
  snapshot_in_flight_ = true;
  auto* p = new Pending;
  p->self = this;
  p->stats.resize(setup_.channels.size());  // never resized again: the cores write into it
  p->then = [this, done = std::move(done)](Pending& pd) {
    snapshot_in_flight_ = false;
    if (pd.failures > 0) {
      if (done) done(false, "snapshot request failed");
      return;
    }
    counters_.snapshots++;
    Snapshot s;
    s.sequence = ++sequence_;
    s.taken = std::chrono::steady_clock::now();
    s.cores = std::move(pd.stats);
    // Requesters the cores answered: RFC 826 lets the target of a request add its sender.
    for (const auto& c : s.cores) {
      for (uint32_t k = 0; k < c.n_learned_peers; ++k) {
        const dataplane::ArpPeer& peer = c.learned_peers[k];
        for (size_t i = 0; i < setup_.ports.size(); ++i) {
          if (tables_[i]->options().local_ip == peer.ip) continue;
          if (dataplane::LocalAddress{setup_.ports[i]->mac(), setup_.ports[i]->address(),
                                      setup_.ports[i]->prefix_len()}
                  .on_link(peer.ip)) {
            tables_[i]->learn(peer.ip, peer.mac, s.taken, LearnMode::kCreate);
            break;
          }
        }
      }
    }
    // Solicitors of the Neighbor Solicitations the cores answered (RFC 4861 7.2.3).
    for (const auto& c : s.cores) {
      for (uint32_t k = 0; k < c.n_learned_peers6; ++k) {
        const dataplane::NdpPeer& peer = c.learned_peers6[k];
        const int idx = port_index_of(peer.port_id);
        if (idx >= 0) tables_[idx]->learn6(peer.ip, peer.mac, s.taken, LearnMode::kCreate);
      }
    }
    for (auto* port : setup_.ports) {
      PortSnapshot ps;
      ps.name = port->name();
      ps.id = port->id();
      ps.mac = port->mac();
      ps.address = port->address();
      ps.prefix_len = port->prefix_len();
      ps.address6 = port->address6();
      ps.mtu = port->mtu();
      ps.vlan = port->vlan();
      ps.vlan_priority = port->vlan_priority();
      ps.dscp = port->dscp();
      ps.ecn = port->ecn();
      ps.cnp_dscp = port->cnp_dscp();
      ps.dcqcn = port->dcqcn();
      ps.queues = port->queue_count();
      ps.started = port->started();
      ps.link = port->link();
      ps.stats = port->stats();
      s.ports.push_back(std::move(ps));
    }
    for (size_t i = 0; i < tables_.size(); ++i)
      for (const auto& e : tables_[i]->snapshot(s.taken))
        s.neighbours.push_back({setup_.ports[i]->name(), e, std::nullopt});
    for (size_t i = 0; i < tables_.size(); ++i)
      for (const auto& e : tables_[i]->snapshot6(s.taken))
        s.neighbours.push_back({setup_.ports[i]->name(),
                                {{}, e.mac, e.state, e.expires_in_ms, e.requests_sent, e.waiters},
                                e.ip});
    s.control = counters_;
    s.control.naps = wake_.naps();
    s.control.naps_woken = wake_.woken();
    s.mbufs_available = setup_.pool != nullptr ? setup_.pool->available() : 0;
    // Only the parts that collected in this round: one added meanwhile has nothing of it yet.
    for (auto& [id, part] : parts_)
      if (part.fill && std::find(pd.parts.begin(), pd.parts.end(), id) != pd.parts.end())
        part.fill(s);
    {
      std::lock_guard<std::mutex> lock(snapshot_mutex_);
      latest_ = std::make_shared<const Snapshot>(std::move(s));
    }
    if (done) done(true, {});
  };
  for (size_t c = 0; c < setup_.channels.size(); ++c) {
    if (dataplane::core_requests::snapshot(*setup_.channels[c], &p->stats[c], &on_core_done, p))
      p->outstanding++;
    else
      p->failures++;
  }
  // A collect may finish inline: hold one count so the round cannot end inside this loop.
  p->outstanding++;
  for (auto& [id, part] : parts_) {
    p->parts.push_back(id);
    if (!part.collect) continue;
    p->outstanding++;
    part.collect([p](bool ok) {
      if (!ok) p->failures++;
      if (--p->outstanding == 0) {
        p->then(*p);
        delete p;
      }
    });
  }
  p->outstanding--;
  Pending::arm(p);
}

unsigned ControlThread::poll_frames_st() {
  if (setup_.dispatch == nullptr) return 0;
  rte_mbuf* pkts[kFrameBatch];
  const uint16_t n = setup_.dispatch->receive(setup_.dispatch->control_target(), pkts, kFrameBatch);
  const auto now = std::chrono::steady_clock::now();
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    counters_.frames++;
    switch (dataplane::frame_kind(m)) {
      case dataplane::FrameKind::kArpToControl: {
        counters_.arp_frames++;
        const int idx = port_index_of(m->port);
        dataplane::ArpPeer peer;
        if (idx >= 0 && dataplane::extract_arp_peer(m, local_of(idx), &peer)) {
          if (peer.conflict) {
            defend_address_st(static_cast<size_t>(idx), false, peer.mac, now);
          } else if (peer.ip.value != 0) {
            // RFC 826: the target of an ARP frame adds its sender; third parties only refresh.
            tables_[idx]->learn(peer.ip, peer.mac, now,
                                peer.targets_us ? LearnMode::kCreate : LearnMode::kUpdateOnly);
          }
        }
        break;
      }
      case dataplane::FrameKind::kNdpToControl: {
        counters_.ndp_frames++;
        const int idx = port_index_of(m->port);
        dataplane::NdpPeer peer;
        // RFC 4861 7.2.5: an advertisement updates an entry (or completes a resolution), never
        // creates one; without the Override flag it does not change a known address.
        if (idx >= 0 && setup_.ports[idx]->address6() &&
            dataplane::extract_ndp_peer(m, local6_of(idx), &peer)) {
          if (peer.conflict)
            defend_address_st(static_cast<size_t>(idx), true, peer.mac, now);
          else
            tables_[idx]->learn6(
                peer.ip, peer.mac, now,
                peer.override_flag ? LearnMode::kUpdateOnly : LearnMode::kUpdateNoOverride);
        }
        break;
      }
      case dataplane::FrameKind::kCm: {
        counters_.cm_frames++;
        const int idx = port_index_of(m->port);
        if (idx >= 0 && static_cast<size_t>(idx) < cm_handlers_.size() && cm_handlers_[idx] &&
            m->nb_segs == 1)
          cm_handlers_[idx](rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
        break;
      }
      default:
        counters_.other_frames++;
        break;
    }
    rte_pktmbuf_free(m);
  }
  return n;
}

// RFC 5227 §2.4 (c) for IPv4, RFC 4862 5.4.4 for IPv6: a configured address is kept and defended.
// Each conflict is logged; at most one announcement of ours per family per DEFEND_INTERVAL (10 s)
// answers them (an ARP announcement; an unsolicited NA with Override), so that hosts which took
// the claimant's MAC for our address take ours again, and two nodes that both defend do not flood
// the link.
void ControlThread::defend_address_st(size_t port_index, bool ipv6,
                                      const config::MacAddress& claimant,
                                      std::chrono::steady_clock::time_point now) {
  constexpr auto kDefendInterval = std::chrono::seconds(10);
  auto& last = last_defence_[port_index][ipv6 ? 1 : 0];
  const bool defend =
      last == std::chrono::steady_clock::time_point{} || now - last >= kDefendInterval;
  pmd::log(LogLevel::kWarning, "address_conflict",
           {{"port", setup_.ports[port_index]->name()},
            {"ip", ipv6 ? config::format_ipv6(local6_of(port_index).ip)
                        : config::format_ipv4(local_of(port_index).ip)},
            {"claimed_by", config::format_mac(claimant)},
            {"defended", defend ? "yes" : "no"}});  // no: one announcement per 10 s
  if (!defend) return;
  last = now;
  ++counters_.address_defences;
  if (ipv6)
    send_frame_st(
        port_index,
        dataplane::build_unsolicited_advertisement(setup_.pool->get(), local6_of(port_index)),
        "na_defence");
  else
    send_frame_st(port_index,
                  dataplane::build_gratuitous_arp(setup_.pool->get(), local_of(port_index)),
                  "arp_defence");
}

namespace {
void on_tx_done(const CoreMessage& msg) {
  if (!msg.result.ok()) {
    auto* failures = static_cast<uint64_t*>(msg.done_ctx);
    ++*failures;
  }
}
void on_neighbour_done(const CoreMessage& msg) {
  if (!msg.result.ok())
    pmd::log(LogLevel::kWarning, "neighbour_update_refused",
             {{"status", std::string(status_name(msg.result.status))}});
}
}  // namespace

void ControlThread::send_frame_st(size_t port_index, rte_mbuf* m, const char* what) {
  pmd::Port* port = setup_.ports[port_index];
  if (m == nullptr) {
    counters_.send_failures++;
    pmd::log(LogLevel::kWarning, "send_failed",
             {{"port", port->name()}, {"frame", what}, {"reason", "no mbuf"}});
    return;
  }
  // Core 0 owns TX queue 0 of every port; frames control builds leave there.
  if (setup_.channels.empty() || cores_stopping_ ||
      !dataplane::core_requests::transmit(*setup_.channels[0], port->id(), m, &on_tx_done,
                                          &counters_.send_failures)) {
    rte_pktmbuf_free(m);
    counters_.send_failures++;
    pmd::log(LogLevel::kWarning, "send_failed",
             {{"port", port->name()}, {"frame", what}, {"reason", "channel"}});
    return;
  }
  counters_.frames_sent++;
  pmd::log(LogLevel::kDebug, "frame_sent", {{"port", port->name()}, {"frame", what}});
}

void ControlThread::push_neighbour_st(const NeighbourChange& change) {
  dataplane::NeighbourUpdate u;
  u.ip = change.ip;
  u.mac = change.mac;
  u.remove = change.removed;
  for (auto* ch : setup_.channels) {
    if (dataplane::core_requests::neighbour_update(*ch, u, &on_neighbour_done, nullptr))
      counters_.neighbour_updates++;
    else
      pmd::log(LogLevel::kWarning, "neighbour_update_dropped",
               {{"core", std::to_string(ch->core_index())}});
  }
  pmd::log(LogLevel::kInfo, change.removed ? "neighbour_removed" : "neighbour_set",
           {{"ip", config::format_ipv4(change.ip)}, {"mac", config::format_mac(change.mac)}});
}

dataplane::LocalAddress ControlThread::local_of(size_t port_index) const {
  const pmd::Port* port = setup_.ports[port_index];
  dataplane::LocalAddress a;
  a.mac = port->mac();
  a.ip = port->address();
  a.prefix_len = port->prefix_len();
  return a;
}

dataplane::LocalAddress6 ControlThread::local6_of(size_t port_index) const {
  const pmd::Port* port = setup_.ports[port_index];
  return dataplane::LocalAddress6{port->mac(), port->address6().value_or(config::Ipv6Address{})};
}

int ControlThread::port_index_of(uint16_t port_id) const {
  for (size_t i = 0; i < setup_.ports.size(); ++i)
    if (setup_.ports[i]->id() == port_id) return static_cast<int>(i);
  return -1;
}

}  // namespace rocedp::control
