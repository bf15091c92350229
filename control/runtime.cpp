#include "control/runtime.hpp"

#include <rte_eal.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_pause.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <thread>

#include "control/adapter_setup.hpp"
#include "control/control_thread.hpp"
#include "control/daemon_connections.hpp"
#include "control/ndk_internal.hpp"
#include "control/services.hpp"
#include "control/telemetry.hpp"
#include "dataplane/core_channel.hpp"
#include "dataplane/polling_core.hpp"
#include "pmd/eal.hpp"
#include "pmd/log.hpp"
#include "pmd/packet_pool.hpp"
#include "pmd/port.hpp"
#include "pmd/rx_dispatch.hpp"
#include "rocedp/adapter.hpp"

namespace rocedp::control {

namespace {
// How long stop() waits for the adapter's CloseCompletion.
constexpr int kCloseWaitS = 10;
}  // namespace

using pmd::log;
using pmd::LogLevel;

Runtime::Runtime(config::Config cfg, const RuntimeOptions& options)
    : cfg_(std::move(cfg)), options_(options) {}

Runtime::~Runtime() {
  stop();
}

std::unique_ptr<Runtime> Runtime::start(config::Config cfg, const RuntimeOptions& options,
                                        std::string* error) {
  std::unique_ptr<Runtime> rt(new Runtime(std::move(cfg), options));
  if (!rt->start_all(error)) {
    rt->stop();
    return nullptr;
  }
  return rt;
}

bool Runtime::start_all(std::string* error) {
  if (!pmd::eal_init(cfg_, options_.program, error)) return false;
  eal_ = true;
  log(LogLevel::kInfo, "eal_ready",
      {{"file_prefix", cfg_.eal.file_prefix}, {"main_lcore", std::to_string(rte_lcore_id())}});

  const auto n_cores =
      options_.ports_only ? uint16_t{1} : static_cast<uint16_t>(cfg_.dataplane.lcores.size());
  if (n_cores == 0) {
    *error = "no polling core configured";
    return false;
  }
  uint16_t max_mtu = 0;
  for (const auto& p : cfg_.ports) max_mtu = std::max(max_mtu, p.mtu);
  pool_ =
      pmd::PacketPool::create("rdp_pool", cfg_.dataplane.mbuf_count, cfg_.dataplane.mbuf_cache_size,
                              pmd::PacketPool::data_room_for_mtu(max_mtu), SOCKET_ID_ANY, error);
  if (!pool_) return false;
  log(LogLevel::kInfo, "mempool_created",
      {{"mbufs", std::to_string(pool_->size())},
       {"data_room", std::to_string(pool_->data_room())}});

  for (const auto& pc : cfg_.ports) {
    auto port = pmd::Port::open(pc, n_cores, *pool_, cfg_.dataplane, error);
    if (!port) return false;  // *error names the port and its devargs
    log(LogLevel::kInfo, "port_opened",
        {{"port", port->name()},
         {"id", std::to_string(port->id())},
         {"queues", std::to_string(port->queue_count())}});
    ports_.push_back(std::move(port));
  }
  if (options_.ports_only) {
    for (auto& p : ports_)
      if (!p->start(error)) return false;
    return true;
  }

  try {
    dispatch_ = std::make_unique<pmd::RxDispatch>(n_cores, cfg_.dataplane.control_ring_size);
  } catch (const std::exception& e) {
    *error = std::string("rx dispatch: ") + e.what();
    return false;
  }
  for (uint16_t i = 0; i < n_cores; ++i) {
    auto ch = dataplane::CoreChannel::create(i, cfg_.dataplane.control_ring_size, error);
    if (!ch) return false;
    channels_.push_back(std::move(ch));
    // Inline cores run on this (the main) lcore.
    const unsigned lcore = options_.launch_cores ? cfg_.dataplane.lcores[i] : rte_lcore_id();
    cores_.push_back(std::make_unique<dataplane::PollingCore>(i, lcore, cfg_.dataplane.burst_size,
                                                              *dispatch_, *channels_.back()));
    cores_.back()->set_idle_sleep_us(cfg_.dataplane.idle_sleep_us);
  }
  launched_.assign(n_cores, false);
  if (options_.launch_cores) {
    for (uint16_t i = 0; i < n_cores; ++i) {
      const unsigned lcore = cfg_.dataplane.lcores[i];
      const int rc =
          rte_eal_remote_launch(&dataplane::PollingCore::lcore_main, cores_[i].get(), lcore);
      if (rc != 0) {
        *error =
            "rte_eal_remote_launch on lcore " + std::to_string(lcore) + ": " + std::strerror(-rc);
        return false;
      }
      launched_[i] = true;
      log(LogLevel::kInfo, "core_launched",
          {{"core", std::to_string(i)}, {"lcore", std::to_string(lcore)}});
    }
  } else {
    log(LogLevel::kInfo, "cores_inline",
        {{"cores", std::to_string(n_cores)}, {"lcore", std::to_string(rte_lcore_id())}});
  }

  ControlThread::Setup setup;
  setup.cfg = &cfg_;
  for (auto& p : ports_) setup.ports.push_back(p.get());
  for (auto& c : channels_) setup.channels.push_back(c.get());
  setup.dispatch = dispatch_.get();
  setup.pool = pool_.get();
  control_ = std::make_unique<ControlThread>(std::move(setup));
  if (!control_->start(error)) {
    control_.reset();
    return false;
  }
  if (options_.telemetry && cfg_.telemetry.enabled) {
    auto* ct = control_.get();
    if (!telemetry_install([ct] { return ct->latest(); }, error)) return false;
    telemetry_ = true;
    log(LogLevel::kInfo, "telemetry_ready",
        {{"socket", "/var/run/dpdk/" + cfg_.eal.file_prefix + "/dpdk_telemetry.v2"}});
  }
  std::string err;
  if (!blocking([&] { return control_->start_ports(&err); })) {
    *error = err;
    return false;
  }
  return options_.open_adapter ? open_adapter(error) : true;
}

bool Runtime::open_adapter(std::string* error) {
  if (ports_.empty()) {
    *error = "adapter: no port";
    return false;
  }
  adapters_.assign(ports_.size(), nullptr);
  connections_.resize(ports_.size());
  // Adapter::open and every later adapter call belong to the control thread (adapter.hpp), and so
  // does poll_control(): one poll hook of the control loop drives every port's adapter. It is in
  // place before the first opens, so an adapter opened before a later one failed still closes.
  run_on_control([&] {
    adapter_hook_ = control_->add_poll_hook_st([this] {
      unsigned n = 0;
      for (size_t i = 0; i < adapters_.size(); ++i) {
        if (adapters_[i] == nullptr) continue;
        n += adapters_[i]->poll_control();
        if (connections_[i]) n += connections_[i]->poll_st();
      }
      return n;
    });
  });
  for (size_t i = 0; i < ports_.size(); ++i) {
    AdapterSetup setup;
    setup.limits = cfg_.limits;
    setup.port = ports_[i].get();
    setup.pool = pool_.get();
    for (auto& c : cores_) setup.cores.push_back(c.get());
    for (auto& c : channels_) setup.channels.push_back(c.get());
    setup.control_wake = &control_->wake();
    NTSTATUS st = STATUS_PENDING;
    std::string cm_error;
    run_on_control([&] {
      st = open_adapter_on(setup, &adapters_[i]);
      if (st == STATUS_SUCCESS && options_.connection_manager)
        connections_[i] =
            DaemonConnections::attach_st(*adapters_[i], *control_, cfg_, i, &cm_error);
    });
    if (st != STATUS_SUCCESS) {
      adapters_[i] = nullptr;
      *error = "adapter of port " + ports_[i]->name() + ": " + std::string(status_name(st));
      return false;
    }
    if (options_.connection_manager && (!connections_[i] || !cm_error.empty())) {
      // stop() stops what attached (services half started included) and closes the adapters.
      *error = "port " + ports_[i]->name() + ": " + cm_error;
      return false;
    }
    log(LogLevel::kInfo, "adapter_opened",
        {{"port", ports_[i]->name()}, {"cores", std::to_string(cores_.size())}});
  }
  return true;
}

// Stop accepting, end the services' connections (DREQ), close their objects, detach the CMs.
bool Runtime::stop_connections() {
  bool any = false;
  for (auto& c : connections_) any |= c != nullptr;
  if (!any) return true;
  if (!control_ || !control_->running()) {
    for (auto& c : connections_) (void)c.release();  // their objects belong to the control thread
    return false;
  }
  run_on_control([&] {
    for (auto& c : connections_)
      if (c) c->begin_stop_st();
  });
  const bool stopped = wait_until(
      [&] {
        for (auto& c : connections_)
          if (c && !c->stopped()) return false;
        return true;
      },
      std::chrono::seconds(kCloseWaitS));  // closes go through the cores: slow when loaded
  if (!stopped) log(LogLevel::kWarning, "services_stop_timeout");
  bool detached = true;
  run_on_control([&] {
    for (auto& c : connections_) {
      if (c) detached &= c->detach_st();
      c.reset();
    }
  });
  return stopped && detached;
}

bool Runtime::close_adapter() {
  size_t open = 0;
  for (Adapter* a : adapters_) open += a != nullptr ? 1 : 0;
  if (!control_ || !control_->running()) return true;
  if (open == 0) {
    if (adapter_hook_ != 0) run_on_control([&] { control_->remove_poll_hook_st(adapter_hook_); });
    adapter_hook_ = 0;
    return true;
  }
  // Shared with the callbacks: a close that completes after the wait below gave up (during the
  // control thread's shutdown) still finds its counter.
  auto closed = std::make_shared<std::atomic<size_t>>(0);
  bool ok = true;
  struct CloseContext {
    Adapter** slot;
    std::shared_ptr<std::atomic<size_t>> closed;
  };
  run_on_control([&] {
    for (Adapter*& a : adapters_) {
      if (a == nullptr) continue;
      auto* ctx = new CloseContext{&a, closed};
      const NTSTATUS st = a->close(
          [](void* c) {
            auto* self = static_cast<CloseContext*>(c);
            *self->slot = nullptr;  // freed right after this callback (adapter.hpp)
            self->closed->fetch_add(1, std::memory_order_release);
            delete self;
          },
          ctx);
      if (st != STATUS_PENDING && st != STATUS_SUCCESS) {
        delete ctx;
        log(LogLevel::kWarning, "adapter_close_failed", {{"status", std::string(status_name(st))}});
        ok = false;
        closed->fetch_add(1, std::memory_order_release);  // nothing to wait for
      }
    }
  });
  // A context leaks if its close never completes (objects left open); the process is ending then.
  // Closing children may still wait on a core's answer or a DREP: on a loaded machine that takes
  // seconds, so the bound is generous (it only matters when something was left open).
  const bool all = wait_until([&] { return closed->load(std::memory_order_acquire) == open; },
                              std::chrono::seconds(kCloseWaitS));
  run_on_control([&] { control_->remove_poll_hook_st(adapter_hook_); });
  if (!all) {
    uint32_t open_children = 0;
    run_on_control([&] {
      for (Adapter* a : adapters_)
        open_children += a != nullptr ? ndk_detail::Access::children(*a) : 0;
    });
    log(LogLevel::kWarning, "adapter_close_timeout",
        {{"open_children", std::to_string(open_children)},
         {"note", "objects left open; shutting down anyway"}});
    return false;
  }
  log(LogLevel::kInfo, "adapter_closed", {{"adapters", std::to_string(open)}});
  return ok;
}

bool Runtime::detach_ports() {
  if (!control_ || !control_->running()) return true;
  std::atomic<int> left{0};
  bool posted_all = true;
  run_on_control([&] {
    for (auto& p : ports_) {
      for (auto& ch : channels_) {
        // The completion runs on the control thread too, never before this task returns.
        if (dataplane::core_requests::detach_port(
                *ch, p->id(),
                [](const dataplane::CoreMessage& m) {
                  static_cast<std::atomic<int>*>(m.done_ctx)->fetch_sub(1);
                },
                &left))
          left.fetch_add(1);
        else
          posted_all = false;
      }
    }
  });
  const bool ok = wait_until([&] { return left.load() == 0; }, std::chrono::seconds(2));
  if (ok) log(LogLevel::kInfo, "ports_detached");
  return ok && posted_all;
}

bool Runtime::poll() {
  if (options_.launch_cores) return false;
  bool work = false;
  for (auto& c : cores_) work |= c->poll_once();
  return work;
}

bool Runtime::blocking(const std::function<bool()>& op) {
  if (options_.launch_cores || cores_.empty()) return op();
  std::atomic<bool> done{false};
  bool ok = false;
  std::thread t([&] {
    ok = op();
    done.store(true, std::memory_order_release);
  });
  while (!done.load(std::memory_order_acquire)) poll();
  t.join();
  return ok;
}

std::vector<config::ListenerConfig> Runtime::update_listeners(
    const std::vector<config::ListenerConfig>& listeners, std::string* error) {
  std::vector<config::ListenerConfig> served;
  if (!options_.connection_manager) {
    if (listeners.empty()) return served;
    if (options_.open_adapter) {
      add_error(error,
                "this runtime's adapters have no connection managers: no listener can start");
      return served;
    }
    // Started without listeners (a plain data plane): the adapters and their connection managers
    // come now, as at start; a failure leaves what opened to stop().
    options_.open_adapter = options_.connection_manager = true;
    std::string why;
    if (!open_adapter(&why)) {
      add_error(error, "opening the adapters for the first listeners: " + why);
      return served;
    }
    log(LogLevel::kInfo, "adapters_opened_for_listeners",
        {{"ports", std::to_string(ports_.size())}});
  }
  for (const config::ListenerConfig& l : listeners) {
    const bool known = std::any_of(ports_.begin(), ports_.end(),
                                   [&](const auto& p) { return p->name() == l.port; });
    if (!known)
      add_error(error, "nd_port " + std::to_string(l.nd_port) + " on port " + l.port +
                           ": not a running port (a new port needs a restart)");
  }
  const bool ran = run_on_control([&] {
    for (auto& port : connections_) {
      if (!port) continue;
      auto now = port->update_listeners_st(listeners, error);
      served.insert(served.end(), now.begin(), now.end());
    }
  });
  if (!ran) add_error(error, "the control thread is not running");
  // In the order of the configuration.
  std::vector<config::ListenerConfig> ordered;
  for (const config::ListenerConfig& l : listeners)
    if (std::find(served.begin(), served.end(), l) != served.end()) ordered.push_back(l);
  return ordered;
}

bool Runtime::run_on_control(std::function<void()> fn) {
  if (!control_ || !control_->running()) return false;
  std::atomic<bool> done{false};
  const bool posted = control_->post([&](ControlThread&) {
    fn();
    done.store(true, std::memory_order_release);
  });
  if (!posted) return false;  // the control loop ended since the check above
  while (!done.load(std::memory_order_acquire)) {
    if (!poll()) rte_pause();
  }
  return true;
}

bool Runtime::refresh_snapshot(std::string* error) {
  if (!control_ || !control_->running()) {
    *error = "no control thread";
    return false;
  }
  return blocking([&] { return control_->refresh(error); });
}

bool Runtime::wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    if (!poll()) std::this_thread::sleep_for(std::chrono::microseconds(inline_cores() ? 0 : 20));
  }
  return true;
}

// Start-up failed before the control thread ran: this thread plays control for the stop requests.
void Runtime::stop_cores_without_control() {
  for (size_t i = 0; i < cores_.size(); ++i) {
    if (!launched_[i]) continue;
    auto& ch = *channels_[i];
    if (!dataplane::core_requests::stop(ch, nullptr, nullptr)) continue;
    while (ch.in_flight() > 0) {
      ch.poll_completions(16);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (auto& p : ports_) p->stop();
}

bool Runtime::stop() {
  if (stopped_) return true;
  stopped_ = true;
  bool ok = true;
  if (telemetry_) telemetry_uninstall();
  ok &= stop_connections();
  ok &= close_adapter();
  if (control_ && control_->running()) {
    std::string error;
    if (!blocking([&] { return control_->shutdown(&error); })) {
      log(LogLevel::kWarning, "shutdown_incomplete", {{"error", error}});
      ok = false;
    }
  } else {
    stop_cores_without_control();
  }
  for (size_t i = 0; i < cores_.size(); ++i) {
    if (launched_[i]) rte_eal_wait_lcore(cfg_.dataplane.lcores[i]);
    const unsigned freed = cores_[i]->drain_after_stop();
    if (launched_[i] || !options_.launch_cores)
      log(LogLevel::kInfo, "core_joined",
          {{"core", std::to_string(i)},
           {"lcore", std::to_string(cores_[i]->lcore_id())},
           {"frames_freed", std::to_string(freed)}});
  }
  control_.reset();
  cores_.clear();
  for (auto& p : ports_) {
    const std::string name = p->name();
    p.reset();
    log(LogLevel::kInfo, "port_closed", {{"port", name}});
  }
  ports_.clear();
  dispatch_.reset();  // frees frames still in handoff rings
  channels_.clear();
  if (pool_) {
    const uint32_t available = pool_->available(), size = pool_->size();
    pool_.reset();
    log(LogLevel::kInfo, "mempool_freed",
        {{"mbufs", std::to_string(size)}, {"were_free", std::to_string(available)}});
  }
  if (eal_) {
    const bool cleaned = pmd::eal_cleanup();
    eal_ = false;
    if (cleaned) log(LogLevel::kInfo, "eal_cleaned_up");
  }
  return ok;
}

}  // namespace rocedp::control
