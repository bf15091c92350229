#pragma once
// YAML parsing and validation of the configuration (the plain structs are public:
// rocedp/config.hpp). config/ depends on nothing else of ours but that header.

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "rocedp/config.hpp"

namespace rocedp::config {

// One problem of a rejected configuration: where (file, 1-based line and column, key path such
// as "ports[1].address") and why.
struct ConfigProblem {
  std::string file;
  int line = 0;
  int column = 0;
  std::string key;
  std::string reason;
  std::string text() const;  // "file:line:column: key: reason"
};

// A rejected configuration with every problem found in it, in file order. file(), line(),
// column(), key() and reason() describe the first; what() is one "file:line:column: key: reason"
// line per problem.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string file, int line, int column, std::string key, std::string reason);
  explicit ConfigError(std::vector<ConfigProblem> problems);  // at least one
  const std::vector<ConfigProblem>& problems() const { return problems_; }
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& key() const { return key_; }
  const std::string& reason() const { return reason_; }

 private:
  ConfigError(std::vector<ConfigProblem> sorted, int);
  std::string file_;
  int line_;
  int column_;
  std::string key_;
  std::string reason_;
  std::vector<ConfigProblem> problems_;
};

// Reads and validates a YAML file. Throws ConfigError (also for an unreadable file).
Config load_file(const std::string& path);
// Parses and validates YAML text; `source` names it in errors.
Config parse(std::string_view yaml, const std::string& source);

std::string format_mac(const MacAddress& mac);   // "02:00:00:00:00:01"
std::string format_ipv4(Ipv4Address ip);         // "198.18.0.1"
std::string format_ipv6(const Ipv6Address& ip);  // "fd52::20" (inet_ntop, RFC 5952 form)

// Strict text forms: "a.b.c.d" with decimal octets 0..255 and no leading zeros (inet_aton would
// read "010" as octal); six colon-separated pairs of hex digits. nullopt when malformed.
std::optional<Ipv4Address> parse_ipv4(std::string_view text);
std::optional<MacAddress> parse_mac(std::string_view text);
// Any text form inet_pton(AF_INET6) takes ("fd52::20", "fe80::1", "::ffff:1.2.3.4"); nullopt
// when malformed.
std::optional<Ipv6Address> parse_ipv6(std::string_view text);

// The keys of `ports[].dcqcn`, each with its member: the YAML reader, rocedp-perf's --dcqcn and
// telemetry name them from here.
struct DcqcnField {
  std::string_view key;
  uint32_t DcqcnConfig::*member;
};
std::span<const DcqcnField> dcqcn_fields();

// The YAML spellings: "rx" / "tx" / "both"; "error" / "warning" / "info" / "debug".
std::string_view to_string(FaultConfig::Direction direction);
std::string_view to_string(LoggingConfig::Level level);
std::string_view to_string(ListenerConfig::Service service);  // "echo" / "memory" / "perftest"

}  // namespace rocedp::config
