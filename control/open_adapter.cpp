// rocedp::open_adapter: the public face of control::Runtime with an adapter and (optionally) its
// connection manager.

#include <utility>

#include "config/config.hpp"
#include "control/runtime.hpp"
#include "pmd/port.hpp"
#include "rocedp/runtime.hpp"

namespace rocedp {

AdapterRuntime::AdapterRuntime(std::unique_ptr<control::Runtime> runtime)
    : runtime_(std::move(runtime)) {}
AdapterRuntime::~AdapterRuntime() {
  stop();
}

Adapter& AdapterRuntime::adapter() {
  return *runtime_->adapter();
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

PortInfo AdapterRuntime::port() const {
  pmd::Port& p = runtime_->port(0);
  PortInfo info;
  info.name = p.name();
  info.mac = p.mac().bytes;
  info.ip = p.address().value;
  info.prefix_len = runtime_->config().ports.at(0).prefix_len;
  info.mtu = p.mtu();
  return info;
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

std::unique_ptr<AdapterRuntime> open_adapter_from_file(const std::string& yaml_path,
                                                       const OpenOptions& options,
                                                       std::string* error) {
  config::Config cfg;
  try {
    cfg = config::load_file(yaml_path);
  } catch (const config::ConfigError& e) {
    *error = e.what();
    return nullptr;
  }
  return open_adapter(cfg, options, error);
}

namespace control {
Runtime& runtime_of(AdapterRuntime& rt) {
  return ndk_detail::RuntimeAccess::runtime(rt);
}
}  // namespace control

}  // namespace rocedp
