#pragma once
// How the provider opens an adapter on parts it already built: a running port, the polling cores
// that serve it and their channels. rocedp::open_adapter (control/open_adapter.cpp, through
// control::Runtime) and tests that assemble cores by hand call it; consumers call open_adapter.

#include <cstdint>
#include <vector>

#include "rocedp/adapter.hpp"
#include "rocedp/config.hpp"

namespace rocedp {

namespace pmd {
class ControlWake;
class Port;
class PacketPool;
}  // namespace pmd
namespace dataplane {
class PollingCore;
class CoreChannel;
}  // namespace dataplane

/// What an adapter is opened on: a running runtime's port and the polling cores that serve it
/// (core i polls queue i of the port; core indexes are the dispatch targets 0..n-1, which are
/// also the high bits of every QPN, dataplane/qpn_map.hpp).
struct AdapterSetup {
  config::LimitsConfig limits;
  pmd::Port* port = nullptr;
  pmd::PacketPool* pool = nullptr;  ///< TX mbufs of the RC engines
  std::vector<dataplane::PollingCore*> cores;
  std::vector<dataplane::CoreChannel*> channels;  ///< channels[i] reaches cores[i]
  uint32_t vendor_id = 0;  ///< NDK_ADAPTER_INFO VendorId (IEEE OUI); 0 = rocedp's default
  uint32_t device_id = 0;
  /// Ends the nap of the thread that runs poll_control() when another thread hands it a call
  /// (control::ControlThread::wake()); null when that thread does not nap (it polls anyway).
  pmd::ControlWake* control_wake = nullptr;
};

/// Opens an adapter on `setup`'s port and cores and installs its RDMA objects on every core
/// (through each core's request ring; later requests queue behind the installation).
/// STATUS_SUCCESS; STATUS_INVALID_PARAMETER (no port, pool or core, channel count differs,
/// more than 64 cores); STATUS_INSUFFICIENT_RESOURCES (a ring is full or a table cannot be
/// allocated). The calling thread becomes the control thread (adapter.hpp).
NTSTATUS open_adapter_on(const AdapterSetup& setup, Adapter** out);

}  // namespace rocedp
