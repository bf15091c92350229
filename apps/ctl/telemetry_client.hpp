#pragma once
// rocedpctl's client of DPDK's telemetry socket (v2: SOCK_SEQPACKET, JSON replies) at
// <runtime dir>/<file prefix>/dpdk_telemetry.v2, the socket dpdk-telemetry.py uses too.
// DPDK 22.11 cannot nest dictionaries, so rocedpd answers a table as one column per field;
// rows_of turns the columns back into rows.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace rocedp::ctl {

using Json = nlohmann::ordered_json;  // keeps the daemon's field order

/// DPDK's runtime directory for `prefix` (eal_common_filesystem: /var/run/dpdk for root, else
/// $XDG_RUNTIME_DIR/dpdk or /tmp/dpdk) and the socket in it.
std::string telemetry_socket_path(const std::string& prefix);

class TelemetryClient {
 public:
  TelemetryClient() = default;
  ~TelemetryClient();
  TelemetryClient(const TelemetryClient&) = delete;
  TelemetryClient& operator=(const TelemetryClient&) = delete;

  /// Connects to the daemon of EAL file prefix `prefix` and reads the socket's greeting.
  bool connect(const std::string& prefix, std::string* error);
  /// The value of `command` in the reply; null JSON if the daemon knows no such command or
  /// refused the parameter; nullopt (and `error`) if the socket failed.
  std::optional<Json> query(const std::string& command, std::string* error);
  /// A paged table (/rocedp/qps, /rocedp/connections: control/telemetry_page.hpp): `command`,
  /// then `command,from=N` until every row came; the columns joined, `count` the rows got. Each
  /// page is a snapshot of its own: rows that come or go between pages may be missed or seen
  /// twice. A reply without pages is returned as it came. As query() otherwise.
  std::optional<Json> query_table(const std::string& command, std::string* error);
  /// The greeting: version (DPDK's), pid, max_output_len.
  const Json& info() const { return info_; }

 private:
  std::optional<Json> receive(size_t max, std::string* error);
  int fd_ = -1;
  size_t max_len_ = 16384;
  Json info_;
};

/// Columns {"a": [..], "b": [..]} (plus scalars such as "count") -> an array of row objects.
Json rows_of(const Json& cols);

}  // namespace rocedp::ctl
