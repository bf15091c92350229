#include "control/daemon_connections.hpp"

#include "control/connection_manager_setup.hpp"
#include "control/connection_telemetry.hpp"
#include "control/control_thread.hpp"
#include "control/services.hpp"
#include "pmd/log.hpp"
#include "rocedp/connection_manager.hpp"

namespace rocedp::control {

using pmd::LogLevel;

std::unique_ptr<DaemonConnections> DaemonConnections::attach_st(Adapter& adapter,
                                                                ControlThread& control,
                                                                const config::Config& cfg,
                                                                size_t port_index,
                                                                std::string* error) {
  const std::string port_name = cfg.ports.at(port_index).name;
  std::unique_ptr<DaemonConnections> d(
      new DaemonConnections(adapter, control, port_index, port_name));
  ConnectionManagerSetup setup;
  setup.dispatch = nullptr;  // the control thread reads the control target and hands CM frames over
  setup.tx_core = 0;         // core 0 owns TX queue 0, where control-built frames leave
  NeighbourTable* table = &control.neighbour_table_st(port_index);
  setup.resolve = [table](uint32_t ip, ConnectionManagerSetup::ResolveDone done) {
    config::Ipv4Address a;
    a.value = ip;
    return table->resolve(a, NeighbourClock::now(),
                          [done = std::move(done)](const ResolveResult& r) {
                            done(r.reachable, r.mac.bytes.data());
                          }) == NeighbourTable::ResolveStatus::kCompleted;
  };
  setup.resolve6 = [table](const std::array<uint8_t, 16>& ip,
                           ConnectionManagerSetup::ResolveDone done) {
    config::Ipv6Address a;
    a.bytes = ip;
    return table->resolve6(a, NeighbourClock::now(),
                           [done = std::move(done)](const ResolveResult6& r) {
                             done(r.reachable, r.mac.bytes.data());
                           }) == NeighbourTable::ResolveStatus::kCompleted;
  };
  NTSTATUS st = attach_connection_manager(adapter, setup);
  if (st != STATUS_SUCCESS) {
    *error = "connection manager: " + std::string(status_name(st));
    return nullptr;
  }
  d->attached_ = true;
  Adapter* a = &adapter;
  control.set_cm_handler_st(
      port_index, [a](const uint8_t* frame, size_t len) { cm_receive_frame(*a, frame, len); });
  std::vector<config::ListenerConfig> listeners;
  for (const config::ListenerConfig& l : cfg.listeners)
    if (l.port == port_name) listeners.push_back(l);
  if (!listeners.empty()) {
    // A service that fails leaves the others stopping: the caller stops this object as at
    // shutdown (begin_stop_st, stopped(), detach_st()), which waits for their closes.
    st = Services::start(adapter, listeners, &d->services_, error);
    if (st != STATUS_SUCCESS) return d;
  }
  // Connections and QPs come from one collect_connection_snapshot, so they agree with each
  // other; a round that could not reach every core is not published.
  ControlThread::SnapshotPart part;
  auto rows = d->rows_;
  DaemonConnections* self = d.get();
  auto services = d->service_rows_;
  part.collect = [a, self, rows, services, port_name](std::function<void(bool)> done) {
    Services* svc = self->services_.get();
    // The services' counts now, on the control thread that owns them; published with the rows.
    std::vector<ServiceRow> counts = svc != nullptr ? svc->rows() : std::vector<ServiceRow>{};
    collect_connection_snapshot(
        *a,
        [svc](const Connector* c) { return svc != nullptr ? svc->service_of(c) : std::string(); },
        [rows, services, counts = std::move(counts), port_name, done = std::move(done)](
            bool ok, ConnectionSnapshot snap) mutable {
          if (ok) {
            for (auto& r : snap.connections) r.port = port_name;
            for (auto& r : snap.qps) r.port = port_name;
            for (auto& r : snap.engines) r.port = port_name;
            *rows = std::move(snap);
            *services = std::move(counts);
          }
          done(ok);
        });
  };
  // Each port's adapter adds its rows (the snapshot starts empty every round).
  part.fill = [rows, services](Snapshot& s) {
    s.connections.insert(s.connections.end(), rows->connections.begin(), rows->connections.end());
    s.qps.insert(s.qps.end(), rows->qps.begin(), rows->qps.end());
    s.engines.insert(s.engines.end(), rows->engines.begin(), rows->engines.end());
    s.services.insert(s.services.end(), services->begin(), services->end());
  };
  d->snapshot_part_ = control.add_snapshot_part_st(std::move(part));
  pmd::log(LogLevel::kInfo, "connection_manager_attached",
           {{"port", port_name}, {"listeners", std::to_string(listeners.size())}});
  return d;
}

DaemonConnections::DaemonConnections(Adapter& adapter, ControlThread& control, size_t port_index,
                                     std::string port_name)
    : adapter_(adapter),
      control_(control),
      port_index_(port_index),
      port_name_(std::move(port_name)) {}

std::vector<config::ListenerConfig> DaemonConnections::update_listeners_st(
    const std::vector<config::ListenerConfig>& listeners, std::string* error) {
  std::vector<config::ListenerConfig> mine;
  for (const config::ListenerConfig& l : listeners)
    if (l.port == port_name_) mine.push_back(l);
  if (services_ && services_->stopped()) services_.reset();  // a set whose start had failed
  if (services_) {
    if (services_->update(mine, error) == STATUS_INVALID_DEVICE_STATE)
      add_error(error, "port " + port_name_ + ": its services are still stopping");
  } else if (!mine.empty()) {
    // The port had no listener: its services start now (a failure leaves them stopping).
    std::string why;
    if (Services::start(adapter_, mine, &services_, &why) != STATUS_SUCCESS) add_error(error, why);
  }
  return services_ ? services_->serving() : std::vector<config::ListenerConfig>{};
}

DaemonConnections::~DaemonConnections() {
  if (attached_) detach_st();
  drop_services();
}

void DaemonConnections::drop_services() {
  if (services_ && !services_->stopped())
    (void)services_.release();
  else
    services_.reset();
}

unsigned DaemonConnections::poll_st() {
  unsigned n = poll_connections(adapter_);
  if (services_) n += services_->poll();
  return n;
}

void DaemonConnections::begin_stop_st() {
  if (services_) services_->stop();
}

bool DaemonConnections::stopped() const {
  return !services_ || services_->stopped();
}

bool DaemonConnections::detach_st() {
  if (snapshot_part_ != 0) control_.remove_snapshot_part_st(snapshot_part_);
  snapshot_part_ = 0;
  control_.set_cm_handler_st(port_index_, nullptr);
  if (!attached_) return true;
  if (services_ && !services_->stopped()) {
    pmd::log(LogLevel::kWarning, "services_not_stopped",
             {{"connections", std::to_string(services_->open_connections())}});
  }
  const NTSTATUS st = detach_connection_manager(adapter_);
  if (st != STATUS_SUCCESS) {
    pmd::log(LogLevel::kWarning, "connection_manager_detach_failed",
             {{"status", std::string(status_name(st))}});
    return false;
  }
  attached_ = false;
  drop_services();
  pmd::log(LogLevel::kInfo, "connection_manager_detached");
  return true;
}

}  // namespace rocedp::control
