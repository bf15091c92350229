// resolve6_probe CONFIG.yaml IPV6 [TIMEOUT_MS]: opens an adapter from CONFIG.yaml (polling cores
// inline, no connection manager, no telemetry), resolves IPV6 on its port with
// AdapterRuntime::resolve_neighbour6 and prints "mac xx:xx:xx:xx:xx:xx" (exit 0) or "unreachable"
// (exit 1); 2 for usage, configuration or start-up errors. For netns_ping6.sh, whose namespace's
// kernel answers the Neighbor Solicitations. Links only the public API.

#include <arpa/inet.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "rocedp/rocedp.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CONFIG.yaml IPV6 [TIMEOUT_MS]\n", argv[0]);
    return 2;
  }
  std::array<uint8_t, 16> ip{};
  if (inet_pton(AF_INET6, argv[2], ip.data()) != 1) {
    std::fprintf(stderr, "not an IPv6 address: %s\n", argv[2]);
    return 2;
  }
  const long timeout_ms = argc > 3 ? std::strtol(argv[3], nullptr, 10) : 5000;
  rocedp::config::Config cfg;
  std::string error;
  if (!rocedp::load_config_file(argv[1], &cfg, &error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 2;
  }
  rocedp::configure_logging(cfg.logging);
  rocedp::OpenOptions options;
  options.program = "resolve6_probe";
  options.launch_cores = false;
  options.connection_manager = false;
  options.telemetry = false;
  auto rt = rocedp::open_adapter(cfg, options, &error);
  if (!rt) {
    std::fprintf(stderr, "open_adapter: %s\n", error.c_str());
    return 2;
  }
  const rocedp::PortInfo port = rt->port();
  if (!port.has_ip6) {
    std::fprintf(stderr, "port %s has no ipv6 address\n", port.name.c_str());
    return 2;
  }
  std::array<uint8_t, 6> mac{};
  const bool ok = rt->resolve_neighbour6(ip, &mac, std::chrono::milliseconds(timeout_ms));
  if (ok)
    std::printf("mac %02x:%02x:%02x:%02x:%02x:%02x\n", mac[0], mac[1], mac[2], mac[3], mac[4],
                mac[5]);
  else
    std::printf("unreachable\n");
  std::fflush(stdout);
  rt->stop();
  return ok ? 0 : 1;
}
