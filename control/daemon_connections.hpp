#pragma once
// Connection management inside a runtime (rocedpd), one per port: the connection manager of the
// port's adapter wired to the control thread, the built-in services of the config `listeners` on
// that port, and the port's connection, QP and engine rows in every telemetry snapshot.
//
//  * Frames: the control thread stays the one reader of the RX dispatch's control target. It
//    hands QP1/CM frames to cm_receive_frame (ConnectionManagerSetup::dispatch is null), and
//    keeps ARP frames for its own neighbour table.
//  * Neighbours, one source of truth: the CM resolves peers through the control thread's
//    neighbour table of the adapter's port (ConnectionManagerSetup::resolve), the same table
//    that learns from ARP, pushes entries to the cores' caches and shows in /rocedp/neighbours.
//    The CM's own table stays unused.
//  * Telemetry: a snapshot part collects the connection rows on the control thread and then the
//    QP rows from the cores (each core reads its own QPs) in the same round, in that order so
//    the two agree (collect_connection_snapshot).
//
// Threads: every method on the control thread, except stopped().

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "control/connection_telemetry.hpp"

namespace rocedp {
class Adapter;
}

namespace rocedp::control {

class ControlThread;
class Services;

class DaemonConnections {
 public:
  /// Attaches the connection manager to `adapter` (opened on `control`'s port `port_index`),
  /// installs the port's CM frame handler and the snapshot part, and starts the services of the
  /// cfg.listeners on that port. Null and *error if the manager could not attach (nothing left
  /// attached). A service that could not start sets *error and returns the object with its
  /// services stopping: the caller stops it as at shutdown (begin_stop_st, stopped(), detach_st).
  static std::unique_ptr<DaemonConnections> attach_st(Adapter& adapter, ControlThread& control,
                                                      const config::Config& cfg, size_t port_index,
                                                      std::string* error);
  ~DaemonConnections();

  /// A reload: the services on this port serve the `listeners` of this port from now on
  /// (Services::update; started here if the port had none). Returns the entries served
  /// afterwards; *error names each that failed to start.
  std::vector<config::ListenerConfig> update_listeners_st(
      const std::vector<config::ListenerConfig>& listeners, std::string* error);
  /// The loop's turn: poll_connections + services. Returns work done.
  unsigned poll_st();
  /// Shutdown, first step: the services stop accepting and end their connections.
  void begin_stop_st();
  /// Any thread: every service object is closed (or there were none).
  bool stopped() const;
  /// Shutdown, last step (after stopped(), or giving up): removes the handler and the snapshot
  /// part and detaches the manager. False if objects were left open (logged).
  bool detach_st();

 private:
  // Frees the services, unless their closes are still pending: then they stay allocated, since
  // the completions come later and reach them (a leak at shutdown, not a use after free).
  void drop_services();
  DaemonConnections(Adapter& adapter, ControlThread& control, size_t port_index,
                    std::string port_name);
  Adapter& adapter_;
  ControlThread& control_;
  const size_t port_index_;
  const std::string port_name_;
  std::unique_ptr<Services> services_;
  uint64_t snapshot_part_ = 0;
  bool attached_ = false;
  // The rows of the last complete collection (connection_telemetry.hpp).
  std::shared_ptr<ConnectionSnapshot> rows_ = std::make_shared<ConnectionSnapshot>();
  // The services' counts of the same collection.
  std::shared_ptr<std::vector<ServiceRow>> service_rows_ =
      std::make_shared<std::vector<ServiceRow>>();
};

}  // namespace rocedp::control
