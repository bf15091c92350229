// rocedp::open_adapter: the public face of control::Runtime with an adapter and (optionally) its
// connection manager.

#include <atomic>
#include <chrono>
#include <memory>
#include <utility>

#include "config/config.hpp"
#include "control/connection_telemetry.hpp"
#include "control/control_thread.hpp"
#include "control/neighbour_table.hpp"
#include "control/runtime.hpp"
#include "control/telemetry.hpp"
#include "dataplane/engine_row.hpp"
#include "pmd/log.hpp"
#include "pmd/port.hpp"
#include "rocedp/runtime.hpp"

namespace rocedp {

AdapterRuntime::AdapterRuntime(std::unique_ptr<control::Runtime> runtime)
    : runtime_(std::move(runtime)) {}
AdapterRuntime::~AdapterRuntime() {
  stop();
}

Adapter& AdapterRuntime::adapter(size_t port) {
  return *runtime_->adapter(port);
}
size_t AdapterRuntime::port_count() const {
  return runtime_->port_count();
}
const config::Config& AdapterRuntime::config() const {
  return runtime_->config();
}
size_t AdapterRuntime::core_count() const {
  return runtime_->core_count();
}
bool AdapterRuntime::inline_cores() const {
  return runtime_->inline_cores();
}
bool AdapterRuntime::poll() {
  return runtime_->poll();
}
bool AdapterRuntime::run_on_control(std::function<void()> fn) {
  return runtime_->run_on_control(std::move(fn));
}
bool AdapterRuntime::wait_until(const std::function<bool()>& pred,
                                std::chrono::milliseconds timeout) {
  return runtime_->wait_until(pred, timeout);
}
bool AdapterRuntime::detach_ports() {
  return runtime_->detach_ports();
}
bool AdapterRuntime::stop() {
  return runtime_->stop();
}

PortInfo AdapterRuntime::port(size_t i) const {
  return control::port_info(*runtime_, i);
}

bool AdapterRuntime::link_up(size_t port) const {
  return port < runtime_->port_count() && runtime_->port(port).link().up;
}

namespace {
// A resolution on the control thread's table of port `port` (`start(table, done)` starts it,
// `done` takes the table's result), waited for like wait_until; the MAC when it answered
// reachable.
template <class Start>
bool resolve_on_control(control::Runtime& rt, size_t port, Start start, std::array<uint8_t, 6>* mac,
                        std::chrono::milliseconds timeout) {
  // Shared with the callback: it may still run after a timeout here.
  struct Answer {
    std::atomic<int> done{0};
    bool reachable = false;
    std::array<uint8_t, 6> mac{};
  };
  auto answer = std::make_shared<Answer>();
  control::ControlThread* ct = rt.control();
  auto done = [answer](const auto& r) {
    answer->reachable = r.reachable;
    answer->mac = r.mac.bytes;
    answer->done.store(1, std::memory_order_release);
  };
  if (ct == nullptr || port >= rt.port_count() ||
      !rt.run_on_control([&] { start(ct->neighbour_table_st(port), done); }))
    return false;
  if (!rt.wait_until([&] { return answer->done.load(std::memory_order_acquire) != 0; }, timeout) ||
      !answer->reachable)
    return false;
  *mac = answer->mac;
  return true;
}
}  // namespace

bool AdapterRuntime::resolve_neighbour(uint32_t ip, std::array<uint8_t, 6>* mac,
                                       std::chrono::milliseconds timeout, size_t port) {
  return resolve_on_control(
      *runtime_, port,
      [ip](control::NeighbourTable& t, const auto& done) {
        t.resolve(config::Ipv4Address{ip}, control::NeighbourClock::now(), done);
      },
      mac, timeout);
}

bool AdapterRuntime::resolve_neighbour6(const std::array<uint8_t, 16>& ip,
                                        std::array<uint8_t, 6>* mac,
                                        std::chrono::milliseconds timeout, size_t port) {
  return resolve_on_control(
      *runtime_, port,
      [&ip](control::NeighbourTable& t, const auto& done) {
        t.resolve6(config::Ipv6Address{ip}, control::NeighbourClock::now(), done);
      },
      mac, timeout);
}

std::vector<AdapterRuntime::EngineCounter> AdapterRuntime::engine_counters(size_t core,
                                                                           size_t port) {
  std::vector<EngineCounter> out;
  if (core >= runtime_->core_count() || runtime_->adapter(port) == nullptr) return out;
  // Each core reads its own engine at the control thread's request (inline cores answer while
  // wait_until polls them). Shared with the callback, which may still run after a timeout here.
  struct Answer {
    std::atomic<int> done{0};
    bool ok = false;
    std::vector<dataplane::EngineRow> rows;
  };
  auto answer = std::make_shared<Answer>();
  if (!runtime_->run_on_control([&] {
        control::collect_engine_rows(*runtime_->adapter(port),
                                     [answer](bool ok, std::vector<dataplane::EngineRow> rows) {
                                       answer->ok = ok;
                                       answer->rows = std::move(rows);
                                       answer->done.store(1, std::memory_order_release);
                                     });
      }) ||
      !runtime_->wait_until([&] { return answer->done.load(std::memory_order_acquire) != 0; },
                            std::chrono::seconds(2)) ||
      !answer->ok || core >= answer->rows.size())
    return out;
  const dataplane::EngineRow& e = answer->rows[core];
  for (size_t i = 0; i < rc::kRcCounterCount; ++i)
    out.push_back({std::string(rc::kRcCounterNames[i]), e.counters[i]});
  out.push_back({"tx_no_room", e.tx_no_room});
  return out;
}

std::vector<AdapterRuntime::EngineCounter> AdapterRuntime::drop_counters() {
  std::vector<EngineCounter> out;
  std::string error;
  if (!runtime_->refresh_snapshot(&error)) return out;
  const auto s = runtime_->control()->latest();
  if (!s) return out;
  for (const auto& [name, v] : control::drops_by_reason(s->cores))
    out.push_back({std::string(name), v});
  // Each port has its own fault stage; a user asks what the configured faults did, over all.
  static constexpr std::pair<const char*, uint64_t pmd::FaultStats::*> kFaults[] = {
      {"fault_dropped", &pmd::FaultStats::dropped},
      {"fault_duplicated", &pmd::FaultStats::duplicated},
      {"fault_corrupted", &pmd::FaultStats::corrupted},
      {"fault_ce_marked", &pmd::FaultStats::ce_marked},
      {"fault_reordered", &pmd::FaultStats::reordered},
      {"fault_delayed", &pmd::FaultStats::delayed}};
  for (const auto& [name, member] : kFaults) {
    uint64_t sum = 0;
    for (const auto& p : s->ports) sum += p.stats.fault.*member;
    out.push_back({name, sum});
  }
  return out;
}

std::unique_ptr<AdapterRuntime> open_adapter(const config::Config& cfg, const OpenOptions& options,
                                             std::string* error) {
  control::RuntimeOptions o;
  o.program = options.program;
  o.launch_cores = options.launch_cores;
  o.open_adapter = true;
  o.connection_manager = options.connection_manager;
  o.telemetry = options.telemetry;
  auto rt = control::Runtime::start(cfg, o, error);
  if (!rt) return nullptr;
  return std::unique_ptr<AdapterRuntime>(new AdapterRuntime(std::move(rt)));
}

bool load_config_file(const std::string& yaml_path, config::Config* out, std::string* error) {
  try {
    *out = config::load_file(yaml_path);
  } catch (const config::ConfigError& e) {
    *error = e.what();
    return false;
  }
  return true;
}

std::unique_ptr<AdapterRuntime> open_adapter_from_file(const std::string& yaml_path,
                                                       const OpenOptions& options,
                                                       std::string* error) {
  config::Config cfg;
  if (!load_config_file(yaml_path, &cfg, error)) return nullptr;
  return open_adapter(cfg, options, error);
}

void configure_logging(const config::LoggingConfig& logging) {
  pmd::log_configure(pmd::log_level_from_config(logging.level), logging.file.value_or(""));
}

namespace control {
Runtime& runtime_of(AdapterRuntime& rt) {
  return ndk_detail::RuntimeAccess::runtime(rt);
}

PortInfo port_info(Runtime& rt, size_t i) {
  pmd::Port& p = rt.port(i);
  PortInfo info;
  info.name = p.name();
  info.mac = p.mac().bytes;
  info.ip = p.address().value;
  info.prefix_len = p.prefix_len();
  if (const std::optional<config::Ipv6Address> ip6 = p.address6()) {
    info.ip6 = ip6->bytes;
    info.has_ip6 = true;
  }
  info.mtu = p.mtu();
  return info;
}
}  // namespace control

}  // namespace rocedp
