#pragma once
// IB CM message bodies (IBTA Vol 1 §12.6, Tables 106-113) as 256-byte GSI
// MADs carried by a UD SEND_ONLY to QP1 over RoCEv2, byte-compatible with the
// Linux CM (drivers/infiniband/core/cm.c, include/rdma/ibta_vol1_c12.h) and
// with rdma_cm's IP addressing (Annex A11; cma.c): service ID 0x0106<<16|port
// and the 36-byte cma header at the start of the REQ private data.
//
// Field positions below are byte offsets into the CM message body (which
// begins after the 24-byte MAD header) and bit positions counted from the most
// significant bit of that byte, as the IBTA tables and ibta_vol1_c12.h count.
// Every field is a plain value; reserved bits encode as zero (IBTA §12.6: "set
// to zero by the sender, ignored by the receiver"). Pure C++, no DPDK.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <variant>

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/eth.hpp"
#include "dataplane/wire/ip_address.hpp"
#include "dataplane/wire/mad.hpp"

namespace rocedp::wire {

inline constexpr std::size_t kCmBodyLen = kMadLen - kMadHdrLen;  // 232

// Private data sizes (IBTA Tables 106-113).
inline constexpr std::size_t kCmReqPrivateLen = 92, kCmMraPrivateLen = 222, kCmRejPrivateLen = 148,
                             kCmRejAriLen = 72, kCmRepPrivateLen = 196, kCmRtuPrivateLen = 224,
                             kCmDreqPrivateLen = 220, kCmDrepPrivateLen = 224;

// rdma_cm's IP header at the start of REQ private data (cma.c struct cma_hdr).
inline constexpr std::size_t kCmaHdrLen = 36;
// What an rdma_cm peer leaves for the consumer: NDK MaxCallerData / MaxCalleeData.
inline constexpr std::size_t kMaxCallerData = kCmReqPrivateLen - kCmaHdrLen;  // 56
inline constexpr std::size_t kMaxCalleeData = kCmRejPrivateLen;  // 148 (REP has 196, REJ 148)

// rdma_cm port space TCP (rdma_cma.h RDMA_PS_TCP) under the IP CM prefix
// 0x0000000001 (Annex A11): service ID = 0x0000000001060000 | port.
inline constexpr std::uint64_t kRdmaCmTcpServicePrefix = 0x0000000001060000ull;
constexpr std::uint64_t rdma_cm_service_id(std::uint16_t port) {
  return kRdmaCmTcpServicePrefix | port;
}
constexpr bool is_rdma_cm_tcp_service(std::uint64_t sid) {
  return (sid & ~0xFFFFull) == kRdmaCmTcpServicePrefix;
}
constexpr std::uint16_t rdma_cm_port(std::uint64_t sid) {
  return static_cast<std::uint16_t>(sid & 0xFFFF);
}

// REJ reasons (IBTA Table 109; include/rdma/ib_cm.h enum ib_cm_rej_reason).
enum class CmRejReason : std::uint16_t {
  kNoQp = 1,
  kNoEec = 2,
  kNoResources = 3,
  kTimeout = 4,
  kUnsupported = 5,
  kInvalidCommId = 6,
  kInvalidCommInstance = 7,
  kInvalidServiceId = 8,
  kInvalidTransportType = 9,
  kStaleConn = 10,
  kRdcNotExist = 11,
  kInvalidGid = 12,
  kInvalidMtu = 26,
  kInsufficientRespResources = 27,
  kConsumerDefined = 28,
  kInvalidRnrRetry = 29,
  kDuplicateLocalCommId = 30,
  kInvalidClassVersion = 31,
};
std::string_view cm_rej_reason_name(std::uint16_t reason);

// "Message Rejected" (REJ) / "Message MRAed" (MRA), IBTA Tables 107-108 (2 bits).
enum class CmMsgResponse : std::uint8_t { kReq = 0, kRep = 1, kOther = 2 };  // kOther = LAP for MRA

using Gid = std::array<std::uint8_t, 16>;

// RoCEv2 GIDs of IPv4 addresses are IPv4-mapped IPv6 (::ffff:a.b.c.d), as the
// Linux GID table fills them (rdma_gid_table; ipv6_addr_set_v4mapped).
constexpr Gid gid_from_ipv4(std::uint32_t ip) {
  Gid g{};
  g[10] = 0xFF;
  g[11] = 0xFF;
  g[12] = static_cast<std::uint8_t>(ip >> 24);
  g[13] = static_cast<std::uint8_t>(ip >> 16);
  g[14] = static_cast<std::uint8_t>(ip >> 8);
  g[15] = static_cast<std::uint8_t>(ip);
  return g;
}
constexpr bool gid_is_ipv4_mapped(const Gid& g) {
  for (int i = 0; i < 10; ++i)
    if (g[i] != 0) return false;
  return g[10] == 0xFF && g[11] == 0xFF;
}
constexpr std::uint32_t ipv4_from_gid(const Gid& g) {
  return (std::uint32_t{g[12]} << 24) | (std::uint32_t{g[13]} << 16) | (std::uint32_t{g[14]} << 8) |
         g[15];
}

// The EUI-64 node GUID Linux derives from a port MAC (addrconf_ifid_eui48:
// flip the U/L bit, insert ff:fe) — rxe's CA GUID.
constexpr std::uint64_t ca_guid_from_mac(const MacAddr& m) {
  return (std::uint64_t{static_cast<std::uint8_t>(m[0] ^ 0x02)} << 56) |
         (std::uint64_t{m[1]} << 48) | (std::uint64_t{m[2]} << 40) | (0xFFull << 32) |
         (0xFEull << 24) | (std::uint64_t{m[3]} << 16) | (std::uint64_t{m[4]} << 8) | m[5];
}

// One path of a REQ (primary at body offset 52, alternate at 96; IBTA Table 106).
struct CmPath {
  std::uint16_t local_lid = 0xFFFF;  // RoCE: the permissive LID (cm.c, "no LID info")
  std::uint16_t remote_lid = 0xFFFF;
  Gid local_gid{};
  Gid remote_gid{};
  std::uint32_t flow_label = 0;  // 20 bits
  std::uint8_t packet_rate = 0;  // 6 bits
  std::uint8_t traffic_class = 0;
  std::uint8_t hop_limit = 0;
  std::uint8_t sl = 0;  // 4 bits
  bool subnet_local = false;
  std::uint8_t local_ack_timeout = 0;  // 5 bits: 4.096 µs × 2^t
  friend bool operator==(const CmPath&, const CmPath&) = default;
};

struct CmReq {
  std::uint32_t local_comm_id = 0;
  std::uint32_t vendor_id = 0;  // 24 bits
  std::uint64_t service_id = 0;
  std::uint64_t local_ca_guid = 0;
  std::uint32_t local_qkey = 0;
  std::uint32_t local_qpn = 0;  // 24 bits
  std::uint8_t responder_resources = 0;
  std::uint32_t local_eecn = 0;  // 24 bits
  std::uint8_t initiator_depth = 0;
  std::uint32_t remote_eecn = 0;                // 24 bits
  std::uint8_t remote_cm_response_timeout = 0;  // 5 bits
  std::uint8_t transport_service_type = 0;      // 2 bits: 0 = RC
  bool end_to_end_flow_control = false;
  std::uint32_t starting_psn = 0;              // 24 bits
  std::uint8_t local_cm_response_timeout = 0;  // 5 bits
  std::uint8_t retry_count = 0;                // 3 bits
  std::uint16_t pkey = 0xFFFF;
  std::uint8_t path_mtu = 0;  // 4 bits: 1=256 .. 5=4096
  bool rdc_exists = false;
  std::uint8_t rnr_retry_count = 0;  // 3 bits
  std::uint8_t max_cm_retries = 0;   // 4 bits
  bool srq = false;
  std::uint8_t extended_transport_type = 0;  // 3 bits
  CmPath primary;
  CmPath alternate{0, 0};  // absent: all zero
  bool sap_supported = false;
  std::array<std::uint8_t, kCmReqPrivateLen> private_data{};
  friend bool operator==(const CmReq&, const CmReq&) = default;
};

struct CmMra {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  CmMsgResponse message_mraed = CmMsgResponse::kReq;
  std::uint8_t service_timeout = 0;  // 5 bits: 4.096 µs × 2^t
  std::array<std::uint8_t, kCmMraPrivateLen> private_data{};
  friend bool operator==(const CmMra&, const CmMra&) = default;
};

struct CmRej {
  std::uint32_t local_comm_id = 0;  // 0 when rejecting a REQ we never accepted a comm ID for
  std::uint32_t remote_comm_id = 0;
  CmMsgResponse message_rejected = CmMsgResponse::kReq;
  std::uint8_t rejected_info_length = 0;  // 7 bits: ARI bytes used
  std::uint16_t reason = 0;
  std::array<std::uint8_t, kCmRejAriLen> ari{};
  std::array<std::uint8_t, kCmRejPrivateLen> private_data{};
  friend bool operator==(const CmRej&, const CmRej&) = default;
};

struct CmRep {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  std::uint32_t local_qkey = 0;
  std::uint32_t local_qpn = 0;  // 24 bits
  std::uint32_t vendor_id = 0;  // 24 bits, split H/M/L on the wire (bytes 15, 19, 23)
  std::uint32_t local_eecn = 0;
  std::uint32_t starting_psn = 0;
  std::uint8_t responder_resources = 0;
  std::uint8_t initiator_depth = 0;
  std::uint8_t target_ack_delay = 0;   // 5 bits
  std::uint8_t failover_accepted = 0;  // 2 bits
  bool end_to_end_flow_control = false;
  std::uint8_t rnr_retry_count = 0;  // 3 bits
  bool srq = false;
  std::uint64_t local_ca_guid = 0;
  std::array<std::uint8_t, kCmRepPrivateLen> private_data{};
  friend bool operator==(const CmRep&, const CmRep&) = default;
};

struct CmRtu {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  std::array<std::uint8_t, kCmRtuPrivateLen> private_data{};
  friend bool operator==(const CmRtu&, const CmRtu&) = default;
};

struct CmDreq {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  std::uint32_t remote_qpn_eecn = 0;  // 24 bits
  std::array<std::uint8_t, kCmDreqPrivateLen> private_data{};
  friend bool operator==(const CmDreq&, const CmDreq&) = default;
};

struct CmDrep {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  std::array<std::uint8_t, kCmDrepPrivateLen> private_data{};
  friend bool operator==(const CmDrep&, const CmDrep&) = default;
};

using CmBody = std::variant<CmReq, CmMra, CmRej, CmRep, CmRtu, CmDreq, CmDrep>;

// The attribute ID of a body (REQ 0x10 ... DREP 0x16).
std::uint16_t cm_attr_id(const CmBody& body);

// A whole CM MAD. encode_cm_mad() writes hdr as given except attr_id, which
// comes from the body's type, so a decoded MAD re-encodes byte for byte.
struct CmMad {
  MadHeader hdr;
  CmBody body;
  friend bool operator==(const CmMad&, const CmMad&) = default;
};

// A Send MAD with `tid` and the attribute ID of `body`.
inline CmMad make_cm_mad(std::uint64_t tid, CmBody body) {
  CmMad m;
  m.hdr.tid = tid;
  m.hdr.attr_id = cm_attr_id(body);
  m.body = body;  // trivially copyable: a move would copy too
  return m;
}

enum class CmDecodeStatus : std::uint8_t {
  kOk,
  kShort,            // fewer than 256 bytes
  kNotCm,            // base version / class / class version is not CM v2
  kBadMethod,        // CM messages are Send (0x03)
  kUnsupportedAttr,  // SIDR, LAP, APR, ClassPortInfo
};
std::string_view cm_decode_status_name(CmDecodeStatus s);

CmDecodeStatus decode_cm_mad(Bytes mad, CmMad& out);
// Writes exactly kMadLen bytes.
void encode_cm_mad(std::uint8_t* out, const CmMad& m);
inline std::array<std::uint8_t, kMadLen> encode_cm_mad(const CmMad& m) {
  std::array<std::uint8_t, kMadLen> b{};
  encode_cm_mad(b.data(), m);
  return b;
}

// rdma_cm's header at the start of REQ private data (cma.c struct cma_hdr):
// version 0, ip_version<<4, source port, source IP[16], destination IP[16]
// with an IPv4 address in the last 4 bytes of each 16 (the first 12 zero), an IPv6 one in all 16.
// The IP version follows the addresses (4 when both are IPv4).
struct CmaHeader {
  std::uint8_t cma_version = 0;
  std::uint16_t src_port = 0;
  IpAddress src_ip;
  IpAddress dst_ip;
  std::uint8_t ip_version() const { return src_ip.is_v4() && dst_ip.is_v4() ? 4 : 6; }
  friend bool operator==(const CmaHeader&, const CmaHeader&) = default;
};
void encode_cma_header(std::uint8_t* p, const CmaHeader& h);
// False if not a cma header (version 0, ip_version 4 or 6).
bool decode_cma_header(const std::uint8_t* p, CmaHeader& out);

// 4.096 µs × 2^t in ns: CM response timeouts, MRA service timeout, local ACK
// timeout (IBTA §12.7.34, §9.7.6.1.3).
constexpr std::uint64_t ib_time_ns(std::uint8_t t) {
  return 4096ull << (t & 31);
}

// Addressing of a QP1 frame (the control plane fills it from the neighbour table): IPv4 when
// both addresses are, IPv6 otherwise.
struct CmFrameAddr {
  MacAddr src_mac{};
  MacAddr dst_mac{};
  IpAddress src_ip;
  IpAddress dst_ip;
  std::uint16_t udp_src_port = 0xC000;
  std::uint32_t psn = 0;  // QP1's send PSN
  std::uint8_t tos = 0;
  std::uint16_t ip_id = 0;
};

// A whole Ethernet/IP/UDP/BTH(UD SEND_ONLY, dest QP1)/DETH(Q_Key 0x80010000,
// src QP1)/MAD/ICRC frame. Returns its length (kCmFrameLen, IPv6: kCmFrameLen6) or 0 if `out` is
// too small.
inline constexpr std::size_t kCmFrameLen = 14 + 20 + 8 + 12 + 8 + kMadLen + 4;  // 322
inline constexpr std::size_t kCmFrameLen6 = kCmFrameLen + 20;                   // 342
std::size_t build_cm_frame(MutBytes out, const CmFrameAddr& addr, const CmMad& m);

}  // namespace rocedp::wire
