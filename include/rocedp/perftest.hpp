#pragma once
// perftest's connection set-up messages, as Debian 12's perftest 4.5 (protocol version "6.06")
// speaks it: rocedp-perf --perftest pairs with ib_{write,read,send}_{bw,lat} on a Linux RoCE host
// with them, and rocedpd's perftest service (README "Services") answers perftest -R clients.
//
// Both transports carry the same sequence of fixed-size exchanges. In every exchange the client
// writes first and then reads; the server reads first and then writes (perftest's
// ctx_xchg_data / ctx_hand_shake). Learned from the rig's captures of perftest pairs:
//
//   version    16 bytes  "6.06", NUL padded; perftest refuses a peer below 5.70
//   sys data    4 + 4    cycle buffer (page size) and cache-line size, big-endian int32
//   mtu         2        the IB MTU enum as a decimal string ("3" = 1024) and a NUL
//   -R only:   56 zeros, then the data connections (rdma_cm REQ/REP/RTU), then 56 zeros
//   keys       one per QP, then 2 (write/read bw) or 3 (other tests) syncs: the first is every
//              QP's key again, in QP order, the others QP 0's alone (all one key with -q 1)
//   ... the measured run ...
//   write/read bw only: a sync, then the client's report: 5 x 8 bytes (size, iterations,
//              BW peak, BW average, message rate; big-endian u64 and IEEE doubles)
//   a sync (close), except after WRITE latency
//   TCP only, same tests:  "done\0": each side writes, then reads (no order)
//
// A key over TCP is the text "%04x:%04x:%06x:%06x:%08x:%016x:" + 16 x "%02x:" + "%08x:" and a
// NUL, 108 bytes (LID, outstanding reads, QPN, PSN, rkey, address, GID, SRQ number). Over the
// rdma_cm control QP it is a 56-byte struct of big-endian fields (LID, outstanding reads, QPN, PSN,
// rkey, 4 bytes of padding, address u64, GID, SRQ number, GID index). Over TCP the PSN is the
// first PSN its sender transmits (the receiver uses it as its expected PSN); with rdma_cm the
// PSNs come from the CM and the key's are not used.

#include <cstddef>
#include <cstdint>
#include <string>

namespace rocedp::perf {

constexpr const char* kPerftestVersion = "6.06";
constexpr size_t kVersionSize = 16;
constexpr size_t kKeyTextSize = 108;
constexpr size_t kKeyStructSize = 56;
constexpr size_t kReportFieldSize = 8;
constexpr uint16_t kPerftestPort = 18515;

/// One QP's key (perftest's struct pingpong_dest).
struct PerftestKey {
  uint32_t lid = 0;
  uint32_t out_reads = 0;
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint32_t rkey = 0;
  uint64_t vaddr = 0;
  uint8_t gid[16] = {};
  uint32_t srqn = 0;
  int32_t gid_index = 0;

  /// The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d), host order; 0 otherwise.
  uint32_t ipv4() const;
  void set_ipv4(uint32_t ip);  ///< gid = ::ffff:ip
};

/// The TCP form: exactly kKeyTextSize bytes into out.
void encode_key_text(const PerftestKey& k, uint8_t out[kKeyTextSize]);
/// false if the text is not a GID key (fields missing or not hex).
bool decode_key_text(const uint8_t* in, size_t len, PerftestKey* k);
/// libibverbs' ibv_rc_pingpong (rdma-core 44) exchanges a shorter text over its TCP socket:
/// "%04x:%06x:%06x:" (LID, QPN, PSN) and the GID's 16 bytes as 32 hex digits in memory order,
/// with a NUL: kPingpongTextSize bytes. Only lid, qpn, psn and gid of the key are carried.
constexpr size_t kPingpongTextSize = 52;
void encode_pingpong_text(const PerftestKey& k, uint8_t out[kPingpongTextSize]);
/// false if it is not that text (fields missing, not hex, a GID of other than 32 digits).
bool decode_pingpong_text(const uint8_t* in, size_t len, PerftestKey* k);

/// The rdma_cm form: exactly kKeyStructSize bytes.
void encode_key_struct(const PerftestKey& k, uint8_t out[kKeyStructSize]);
bool decode_key_struct(const uint8_t* in, size_t len, PerftestKey* k);

/// The version message ("6.06" NUL padded) and its check (perftest: >= 5.70).
void encode_version(uint8_t out[kVersionSize]);
bool version_compatible(const uint8_t in[kVersionSize], std::string* printable);

/// The MTU message: the IB MTU enum (1 = 256 ... 5 = 4096) as text, 2 bytes.
void encode_mtu(uint32_t path_mtu_bytes, uint8_t out[2]);
/// Path MTU in bytes of a peer's MTU message; 0 if invalid.
uint32_t decode_mtu(const uint8_t in[2]);

void put_be32(uint8_t* p, uint32_t v);
uint32_t get_be32(const uint8_t* p);
void put_be64(uint8_t* p, uint64_t v);
uint64_t get_be64(const uint8_t* p);
void put_be_double(uint8_t* p, double v);
double get_be_double(const uint8_t* p);

/// The client's bandwidth report (perftest's xchg_bw_reports), in the units printed
/// (MB/sec = 2^20 bytes, or Gb/sec) and Mpps.
struct BwReport {
  uint64_t size = 0, iterations = 0;
  double bw_peak = 0, bw_avg = 0, msg_rate = 0;
};

/// How many syncs follow the per-QP keys before the run (perftest's syncs after RTR and before the
/// run): write/read bandwidth 2, every other test 3. The first carries every QP's key.
inline int pre_run_syncs(bool bw, bool send) {
  return bw && !send ? 2 : 3;
}
/// Whether the client's report is exchanged after the run (write/read bandwidth only).
inline bool exchanges_report(bool bw, bool send) {
  return bw && !send;
}
/// Whether a closing key (and, over TCP, "done") follows the run: every test but WRITE latency,
/// whose ping-pong ends the exchange.
inline bool closes_with_key(bool bw, bool write) {
  return bw || !write;
}

}  // namespace rocedp::perf
