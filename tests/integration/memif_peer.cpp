// A minimal net_memif client without DPDK: connects to a memif server socket (rocedpd's port),
// shares one memory region with its rings and buffers, and floods ICMP echo requests at the
// server while it takes back whatever the server sends (the echo replies). Used to kill peers
// (SIGKILL) in the middle of traffic, which a DPDK peer cannot do quickly enough: it starts in
// about a millisecond.
//
//   memif_peer SOCKET DST_MAC DST_IP SRC_IP [--rings N] [--id ID] [--count N] [--die-after-us N]
//              [--hangups N]
//
// Without --count it floods until killed and prints "connected" once the server said so; with
// --die-after-us it kills itself (SIGKILL, nothing cleaned up) after flooding that long. With
// --count N it sends N echo requests (paced), counts the echo replies and exits 0 when at least
// half came back (1 otherwise). With --hangups N it connects and closes at once, N times, and
// exits 0 (a peer that leaves before the server's HELLO). Exit 3: the server refused the connection
// (e.g. still busy with the previous peer); the caller tries again.
//
// Wire format (memif 2.0, as DPDK 22.11 speaks it): 128-byte SOCK_SEQPACKET messages; the client
// answers the server's HELLO with INIT, ADD_REGION (memfd passed as SCM_RIGHTS), ADD_RING per ring
// (an eventfd each), CONNECT; the server acknowledges each and ends with CONNECTED. Rings: a
// 128-byte header (cookie, flags, head | tail) then 16-byte descriptors.

#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr uint32_t kCookie = 0x3E31F20;
constexpr uint16_t kVersion = 0x0200;
constexpr uint16_t kMsgAck = 1, kMsgHello = 2, kMsgInit = 3, kMsgAddRegion = 4, kMsgAddRing = 5,
                   kMsgConnect = 6, kMsgConnected = 7, kMsgDisconnect = 8;
constexpr uint16_t kRingFlagMaskInt = 1;
constexpr uint32_t kLog2Ring = 10;
constexpr uint32_t kRingSlots = 1u << kLog2Ring;
constexpr uint32_t kBufSize = 2048;
constexpr uint32_t kRingBytes = 128 + 16 * kRingSlots;

struct Desc {
  uint16_t flags;
  uint16_t region;
  uint32_t length;
  uint32_t offset;
  uint32_t metadata;
};
static_assert(sizeof(Desc) == 16);

struct Ring {
  uint8_t* base;
  uint32_t& cookie() { return *reinterpret_cast<uint32_t*>(base); }
  uint16_t& flags() { return *reinterpret_cast<uint16_t*>(base + 4); }
  std::atomic<uint16_t>& head() { return *reinterpret_cast<std::atomic<uint16_t>*>(base + 6); }
  std::atomic<uint16_t>& tail() { return *reinterpret_cast<std::atomic<uint16_t>*>(base + 64); }
  Desc& desc(uint32_t i) { return reinterpret_cast<Desc*>(base + 128)[i & (kRingSlots - 1)]; }
};

[[noreturn]] void die(const char* what, int code = 1) {
  std::fprintf(stderr, "memif_peer: %s: %s\n", what, std::strerror(errno));
  std::exit(code);
}

bool send_msg(int fd, const uint8_t (&msg)[128], int pass_fd) {
  iovec iov{const_cast<uint8_t*>(msg), 128};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  if (pass_fd >= 0) {
    mh.msg_control = ctl;
    mh.msg_controllen = sizeof ctl;
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  return sendmsg(fd, &mh, 0) == 128;
}

uint16_t recv_type(int fd) {
  uint8_t msg[128];
  const ssize_t n = recv(fd, msg, sizeof msg, 0);
  if (n != 128) return 0;
  uint16_t type;
  std::memcpy(&type, msg, 2);
  return type;
}

void expect(int fd, uint16_t type) {
  const uint16_t got = recv_type(fd);
  if (got == type) return;
  if (got == kMsgDisconnect || got == 0) {
    std::fprintf(stderr, "memif_peer: the server refused (message %u)\n", got);
    std::exit(3);
  }
  std::fprintf(stderr, "memif_peer: expected message %u, got %u\n", type, got);
  std::exit(1);
}

template <typename T>
void put(uint8_t* msg, std::size_t off, T v) {
  std::memcpy(msg + off, &v, sizeof v);
}

uint16_t csum(const uint8_t* p, std::size_t n) {
  uint32_t s = 0;
  for (std::size_t i = 0; i + 1 < n; i += 2) s += (uint32_t{p[i]} << 8) | p[i + 1];
  if (n & 1) s += uint32_t{p[n - 1]} << 8;
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<uint16_t>(~s);
}

bool parse_mac(const char* s, uint8_t out[6]) {
  unsigned v[6];
  if (std::sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
    return false;
  for (int i = 0; i < 6; ++i) out[i] = static_cast<uint8_t>(v[i]);
  return true;
}

// Ethernet + IPv4 + ICMP echo request with 56 bytes of data, both checksums right.
std::vector<uint8_t> echo_request(const uint8_t dst[6], const uint8_t src[6], uint32_t sip,
                                  uint32_t dip, uint16_t seq) {
  std::vector<uint8_t> f(14 + 20 + 8 + 56, 0);
  std::memcpy(&f[0], dst, 6);
  std::memcpy(&f[6], src, 6);
  f[12] = 0x08;
  uint8_t* ip = &f[14];
  ip[0] = 0x45;
  ip[2] = 0;
  ip[3] = 20 + 8 + 56;
  ip[8] = 64;
  ip[9] = 1;
  std::memcpy(ip + 12, &sip, 4);
  std::memcpy(ip + 16, &dip, 4);
  const uint16_t ic = csum(ip, 20);
  ip[10] = static_cast<uint8_t>(ic >> 8);
  ip[11] = static_cast<uint8_t>(ic);
  uint8_t* icmp = ip + 20;
  icmp[0] = 8;
  icmp[4] = 0x12;
  icmp[5] = 0x34;
  icmp[6] = static_cast<uint8_t>(seq >> 8);
  icmp[7] = static_cast<uint8_t>(seq);
  for (int i = 0; i < 56; ++i) icmp[8 + i] = static_cast<uint8_t>(i);
  const uint16_t cc = csum(icmp, 8 + 56);
  icmp[2] = static_cast<uint8_t>(cc >> 8);
  icmp[3] = static_cast<uint8_t>(cc);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(
        stderr,
        "usage: memif_peer SOCKET DST_MAC DST_IP SRC_IP [--rings N] [--id ID] [--count N]\n");
    return 2;
  }
  uint32_t rings = 1, id = 0;
  long count = -1, die_after_us = -1, hangups = -1;
  for (int i = 5; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--rings") == 0)
      rings = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    else if (std::strcmp(argv[i], "--id") == 0)
      id = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    else if (std::strcmp(argv[i], "--count") == 0)
      count = std::atol(argv[i + 1]);
    else if (std::strcmp(argv[i], "--die-after-us") == 0)
      die_after_us = std::atol(argv[i + 1]);
    else if (std::strcmp(argv[i], "--hangups") == 0)
      hangups = std::atol(argv[i + 1]);
  }
  uint8_t dmac[6], smac[6] = {0x02, 0x6d, 0x65, 0x6d, 0x69, 0x66};
  in_addr dip{}, sip{};
  if (!parse_mac(argv[2], dmac) || inet_pton(AF_INET, argv[3], &dip) != 1 ||
      inet_pton(AF_INET, argv[4], &sip) != 1 || rings == 0 || rings > 8) {
    std::fprintf(stderr, "memif_peer: bad arguments\n");
    return 2;
  }

  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", argv[1]);
  if (hangups >= 0) {
    // Peers that connect and leave before the server's HELLO: the server accepts a connection
    // whose other end is already closed, so its HELLO cannot be sent.
    for (long i = 0; i < hangups; ++i) {
      const int c = socket(AF_UNIX, SOCK_SEQPACKET, 0);
      if (c < 0) die("socket");
      if (connect(c, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) die("connect", 3);
      close(c);
    }
    std::printf("hung up %ld times\n", hangups);
    return 0;
  }

  const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  if (fd < 0) die("socket");
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) die("connect", 3);
  expect(fd, kMsgHello);

  // One region: 2*rings rings (client-to-server first), then a buffer per descriptor.
  const uint32_t n_rings = 2 * rings;
  const uint64_t buffers_at = uint64_t{n_rings} * kRingBytes;
  const uint64_t size = buffers_at + uint64_t{n_rings} * kRingSlots * kBufSize;
  const int mfd = memfd_create("memif_peer", MFD_ALLOW_SEALING);
  if (mfd < 0 || ftruncate(mfd, static_cast<off_t>(size)) != 0) die("memfd");
  auto* region =
      static_cast<uint8_t*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0));
  if (region == MAP_FAILED) die("mmap");
  std::vector<Ring> ring(n_rings);
  for (uint32_t r = 0; r < n_rings; ++r) {
    ring[r].base = region + uint64_t{r} * kRingBytes;
    ring[r].cookie() = kCookie;
    ring[r].flags() = r >= rings ? kRingFlagMaskInt : 0;  // we poll what the server sends
    for (uint32_t j = 0; j < kRingSlots; ++j) {
      ring[r].desc(j) =
          Desc{0, 0, kBufSize,
               static_cast<uint32_t>(buffers_at + (uint64_t{r} * kRingSlots + j) * kBufSize), 0};
    }
  }

  uint8_t msg[128] = {};
  put<uint16_t>(msg, 0, kMsgInit);
  put<uint16_t>(msg, 2, kVersion);
  put<uint32_t>(msg, 4, id);
  std::snprintf(reinterpret_cast<char*>(msg + 33), 32, "rocedp-memif-peer");
  if (!send_msg(fd, msg, -1)) die("send init");
  expect(fd, kMsgAck);
  std::memset(msg, 0, sizeof msg);
  put<uint16_t>(msg, 0, kMsgAddRegion);
  put<uint16_t>(msg, 2, 0);
  put<uint64_t>(msg, 4, size);
  if (!send_msg(fd, msg, mfd)) die("send add_region");
  expect(fd, kMsgAck);
  for (uint32_t r = 0; r < n_rings; ++r) {
    const int efd = eventfd(0, EFD_NONBLOCK);
    std::memset(msg, 0, sizeof msg);
    put<uint16_t>(msg, 0, kMsgAddRing);
    put<uint16_t>(msg, 2, r < rings ? 1 : 0);  // client-to-server ("S2M") rings first
    put<uint16_t>(msg, 4, static_cast<uint16_t>(r % rings));
    put<uint16_t>(msg, 6, 0);
    put<uint32_t>(msg, 8, static_cast<uint32_t>(uint64_t{r} * kRingBytes));
    msg[12] = kLog2Ring;
    if (!send_msg(fd, msg, efd)) die("send add_ring");
    expect(fd, kMsgAck);
  }
  std::memset(msg, 0, sizeof msg);
  put<uint16_t>(msg, 0, kMsgConnect);
  std::snprintf(reinterpret_cast<char*>(msg + 2), 32, "memif_peer");
  if (!send_msg(fd, msg, -1)) die("send connect");
  expect(fd, kMsgConnected);
  // The server reset every ring's head and tail when it connected: hand it our receive buffers.
  for (uint32_t r = rings; r < n_rings; ++r)
    ring[r].head().store(kRingSlots, std::memory_order_release);
  std::printf("connected\n");
  std::fflush(stdout);

  std::vector<uint16_t> last_tail(n_rings, 0);
  uint64_t sent = 0, replies = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::seconds(10);
  const auto die_at = start + std::chrono::microseconds(die_after_us);
  const auto flood_frame = echo_request(dmac, smac, sip.s_addr, dip.s_addr, 0);
  uint16_t seq = 0;
  for (;;) {
    for (uint32_t r = 0; r < rings; ++r) {
      Ring& tx = ring[r];
      uint16_t head = tx.head().load(std::memory_order_relaxed);
      const uint16_t tail = tx.tail().load(std::memory_order_acquire);
      uint16_t room = static_cast<uint16_t>(kRingSlots - static_cast<uint16_t>(head - tail));
      if (count >= 0) room = std::min<uint16_t>(room, sent < static_cast<uint64_t>(count) ? 1 : 0);
      for (uint16_t k = 0; k < room; ++k, ++head) {
        const auto f =
            count >= 0 ? echo_request(dmac, smac, sip.s_addr, dip.s_addr, seq++) : flood_frame;
        Desc& d = tx.desc(head);
        std::memcpy(region + d.offset, f.data(), f.size());
        d.length = static_cast<uint32_t>(f.size());
        d.flags = 0;
        ++sent;
      }
      tx.head().store(head, std::memory_order_release);
    }
    for (uint32_t r = rings; r < n_rings; ++r) {
      Ring& rx = ring[r];
      const uint16_t tail = rx.tail().load(std::memory_order_acquire);
      for (uint16_t s = last_tail[r]; s != tail; ++s) {
        Desc& d = rx.desc(s);
        const uint8_t* f = region + d.offset;
        if (d.length >= 14 + 20 + 8 && f[12] == 0x08 && f[13] == 0 && f[14 + 9] == 1 &&
            f[14 + 20] == 0)
          ++replies;
        d.length = kBufSize;
        d.flags = 0;
      }
      last_tail[r] = tail;
      rx.head().store(static_cast<uint16_t>(tail + kRingSlots), std::memory_order_release);
    }
    if (die_after_us >= 0 && std::chrono::steady_clock::now() >= die_at) raise(SIGKILL);
    if (count >= 0) {
      if (replies >= static_cast<uint64_t>(count) || std::chrono::steady_clock::now() > deadline)
        break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  std::printf("sent %llu replies %llu\n", static_cast<unsigned long long>(sent),
              static_cast<unsigned long long>(replies));
  return replies * 2 >= static_cast<uint64_t>(count) ? 0 : 1;
}
