#pragma once
// The TCP sockets under both exchanges: rocedp-perf's own out-of-band one (oob.hpp) and
// perftest's (perftest_channel.hpp). Each caller keeps its own way of waiting; these are the
// steps they share. -1 means failure with errno set.

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace rocedp::perf::tcp {

/// A socket listening on ip:port (ip in host order), SO_REUSEADDR.
int listen_on(uint32_t ip, uint16_t port);
/// Accepts one connection on `listening` and closes it; the connection has TCP_NODELAY (the
/// exchanges are small request/answer messages).
int accept_one(int listening);
/// The address of "a.b.c.d":port; nullopt for anything else.
std::optional<sockaddr_in> address(const std::string& host, uint16_t port);
/// One connection attempt, TCP_NODELAY on success.
int connect_once(const sockaddr_in& to);
/// Writes all of `data` (partial writes and EINTR looped over). False if the peer is gone.
bool send_all(int fd, const void* data, size_t len);

}  // namespace rocedp::perf::tcp
