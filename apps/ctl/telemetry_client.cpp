#include "apps/ctl/telemetry_client.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace rocedp::ctl {

namespace {
bool fail(std::string* error, std::string msg) {
  *error = std::move(msg);
  return false;
}
}  // namespace

std::string telemetry_socket_path(const std::string& prefix) {
  std::string base = "/var/run";
  if (getuid() != 0) {
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    base = xdg != nullptr ? xdg : "/tmp";
  }
  return base + "/dpdk/" + prefix + "/dpdk_telemetry.v2";
}

TelemetryClient::~TelemetryClient() {
  if (fd_ >= 0) close(fd_);
}

bool TelemetryClient::connect(const std::string& prefix, std::string* error) {
  const std::string path = telemetry_socket_path(prefix);
  fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return fail(error, "socket: " + std::string(std::strerror(errno)));
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  if (path.size() >= sizeof(sun.sun_path)) return fail(error, "socket path too long: " + path);
  std::memcpy(sun.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&sun), sizeof(sun)) != 0)
    return fail(error, "no rocedpd with file prefix '" + prefix + "' (" + path + ": " +
                           std::strerror(errno) + ")");
  // The first message describes the socket: version, pid, max_output_len.
  auto hello = receive(16384, error);
  if (!hello) return false;
  info_ = *hello;
  max_len_ = info_.value("max_output_len", size_t{16384});
  return true;
}

std::optional<Json> TelemetryClient::query(const std::string& command, std::string* error) {
  if (send(fd_, command.data(), command.size(), MSG_NOSIGNAL) < 0) {
    fail(error, "send: " + std::string(std::strerror(errno)));
    return std::nullopt;
  }
  auto reply = receive(max_len_, error);
  if (!reply) return std::nullopt;
  const std::string key = command.substr(0, command.find(','));
  return reply->contains(key) ? (*reply)[key] : Json();
}

std::optional<Json> TelemetryClient::receive(size_t max, std::string* error) {
  std::string buf(max, '\0');
  const ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
  if (n <= 0) {
    fail(error,
         n == 0 ? "the daemon closed the socket" : "recv: " + std::string(std::strerror(errno)));
    return std::nullopt;
  }
  buf.resize(static_cast<size_t>(n));
  try {
    return Json::parse(buf);
  } catch (const Json::exception& e) {
    fail(error, std::string("bad reply: ") + e.what());
    return std::nullopt;
  }
}

std::optional<Json> TelemetryClient::query_table(const std::string& command, std::string* error) {
  std::optional<Json> all = query(command, error);
  if (!all || !all->is_object() || !all->contains("returned")) return all;
  auto number = [](const Json& reply, const char* key) {
    const auto it = reply.find(key);
    return it != reply.end() && it->is_number_unsigned() ? it->get<uint64_t>() : uint64_t{0};
  };
  uint64_t next = number(*all, "first") + number(*all, "returned");
  uint64_t count = number(*all, "count");
  while (next < count) {
    std::optional<Json> page = query(command + ",from=" + std::to_string(next), error);
    if (!page) return std::nullopt;
    if (!page->is_object() || !page->contains("returned")) break;  // the table went away
    const uint64_t got = number(*page, "returned");
    if (got == 0) break;  // the rows shrank below `next` meanwhile
    for (auto& [k, v] : page->items())
      if (v.is_array() && (*all)[k].is_array())
        for (auto& x : v) (*all)[k].push_back(std::move(x));
    next = number(*page, "first") + got;
    count = number(*page, "count");
  }
  uint64_t rows = 0;
  for (const auto& [k, v] : all->items())
    if (v.is_array()) rows = std::max<uint64_t>(rows, v.size());
  (*all)["count"] = rows;
  all->erase("first");
  all->erase("returned");
  return all;
}

Json rows_of(const Json& cols) {
  Json rows = Json::array();
  size_t n = 0;
  for (const auto& [k, v] : cols.items())
    if (v.is_array()) n = std::max(n, v.size());
  for (size_t i = 0; i < n; ++i) {
    Json row = Json::object();
    for (const auto& [k, v] : cols.items())
      if (v.is_array() && i < v.size()) row[k] = v[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace rocedp::ctl
