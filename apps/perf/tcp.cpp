#include "apps/perf/tcp.hpp"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace rocedp::perf::tcp {
namespace {

int no_delay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

}  // namespace

int listen_on(uint32_t ip, uint16_t port) {
  const int ls = socket(AF_INET, SOCK_STREAM, 0);
  if (ls < 0) return -1;
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(ip);
  if (bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(ls, 1) != 0) {
    const int saved = errno;
    close(ls);
    errno = saved;
    return -1;
  }
  return ls;
}

int accept_one(int listening) {
  const int fd = accept(listening, nullptr, nullptr);
  const int saved = errno;
  close(listening);
  errno = saved;
  return fd < 0 ? -1 : no_delay(fd);
}

std::optional<sockaddr_in> address(const std::string& host, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) return std::nullopt;
  return sa;
}

int connect_once(const sockaddr_in& to) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == 0) return no_delay(fd);
  const int saved = errno;
  close(fd);
  errno = saved;
  return -1;
}

bool send_all(int fd, const void* data, size_t len) {
  const auto* b = static_cast<const uint8_t*>(data);
  while (len > 0) {
    const ssize_t n = ::send(fd, b, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    b += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace rocedp::perf::tcp
