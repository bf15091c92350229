#include "dataplane/wire/cm_messages.hpp"

#include <algorithm>
#include <cstring>

#include "dataplane/wire/builder.hpp"
#include "dataplane/wire/opcode.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocedp::wire {
namespace {

// A field of `width` bits inside one byte, `bit` counted from the MSB (the
// IBTA tables' numbering, also IBA_FIELD_BLOC in ibta_vol1_c12.h).
std::uint8_t get_bits(const std::uint8_t* b, std::size_t byte, unsigned bit, unsigned width) {
  return static_cast<std::uint8_t>((b[byte] >> (8 - bit - width)) & ((1u << width) - 1));
}
void set_bits(std::uint8_t* b, std::size_t byte, unsigned bit, unsigned width, unsigned v) {
  const unsigned shift = 8 - bit - width;
  const unsigned mask = ((1u << width) - 1) << shift;
  b[byte] = static_cast<std::uint8_t>((b[byte] & ~mask) | ((v << shift) & mask));
}

template <std::size_t N>
void get_mem(const std::uint8_t* b, std::size_t off, std::array<std::uint8_t, N>& a) {
  std::memcpy(a.data(), b + off, N);
}
template <std::size_t N>
void put_mem(std::uint8_t* b, std::size_t off, const std::array<std::uint8_t, N>& a) {
  std::memcpy(b + off, a.data(), N);
}

// Body offsets (IBTA Table 106; ibta_vol1_c12.h CM_REQ_*).
namespace req_off {
constexpr std::size_t kLocalCommId = 0, kVendorId = 5, kServiceId = 8, kLocalCaGuid = 16,
                      kLocalQkey = 28, kLocalQpn = 32, kRespRes = 35, kLocalEecn = 36,
                      kInitDepth = 39, kRemoteEecn = 40, kByte43 = 43, kStartingPsn = 44,
                      kByte47 = 47, kPkey = 48, kByte50 = 50, kByte51 = 51, kPrimaryPath = 52,
                      kAltPath = 96, kPrivate = 140;
}
static_assert(req_off::kPrivate + kCmReqPrivateLen == kCmBodyLen);

// Path block (44 bytes): LIDs, GIDs, flow label/rate, TC, hop limit, SL/subnet local, ACK timeout.
namespace path_off {
constexpr std::size_t kLocalLid = 0, kRemoteLid = 2, kLocalGid = 4, kRemoteGid = 20,
                      kFlowLabel = 36, kRate = 39, kTrafficClass = 40, kHopLimit = 41, kSl = 42,
                      kAckTimeout = 43, kLen = 44;
}
static_assert(req_off::kPrimaryPath + path_off::kLen == req_off::kAltPath);

void decode_path(const std::uint8_t* p, CmPath& x) {
  x.local_lid = load_be16(p + path_off::kLocalLid);
  x.remote_lid = load_be16(p + path_off::kRemoteLid);
  get_mem(p, path_off::kLocalGid, x.local_gid);
  get_mem(p, path_off::kRemoteGid, x.remote_gid);
  x.flow_label = load_be32(p + path_off::kFlowLabel) >> 12;
  x.packet_rate = get_bits(p, path_off::kRate, 2, 6);
  x.traffic_class = p[path_off::kTrafficClass];
  x.hop_limit = p[path_off::kHopLimit];
  x.sl = get_bits(p, path_off::kSl, 0, 4);
  x.subnet_local = get_bits(p, path_off::kSl, 4, 1);
  x.local_ack_timeout = get_bits(p, path_off::kAckTimeout, 0, 5);
}

void encode_path(std::uint8_t* p, const CmPath& x) {
  store_be16(p + path_off::kLocalLid, x.local_lid);
  store_be16(p + path_off::kRemoteLid, x.remote_lid);
  put_mem(p, path_off::kLocalGid, x.local_gid);
  put_mem(p, path_off::kRemoteGid, x.remote_gid);
  store_be32(p + path_off::kFlowLabel, (x.flow_label & 0xFFFFF) << 12);
  set_bits(p, path_off::kRate, 2, 6, x.packet_rate);
  p[path_off::kTrafficClass] = x.traffic_class;
  p[path_off::kHopLimit] = x.hop_limit;
  set_bits(p, path_off::kSl, 0, 4, x.sl);
  set_bits(p, path_off::kSl, 4, 1, x.subnet_local);
  set_bits(p, path_off::kAckTimeout, 0, 5, x.local_ack_timeout);
}

void decode_req(const std::uint8_t* b, CmReq& m) {
  using namespace req_off;
  m.local_comm_id = load_be32(b + kLocalCommId);
  m.vendor_id = load_be24(b + kVendorId);
  m.service_id = load_be64(b + kServiceId);
  m.local_ca_guid = load_be64(b + kLocalCaGuid);
  m.local_qkey = load_be32(b + kLocalQkey);
  m.local_qpn = load_be24(b + kLocalQpn);
  m.responder_resources = b[kRespRes];
  m.local_eecn = load_be24(b + kLocalEecn);
  m.initiator_depth = b[kInitDepth];
  m.remote_eecn = load_be24(b + kRemoteEecn);
  m.remote_cm_response_timeout = get_bits(b, kByte43, 0, 5);
  m.transport_service_type = get_bits(b, kByte43, 5, 2);
  m.end_to_end_flow_control = get_bits(b, kByte43, 7, 1);
  m.starting_psn = load_be24(b + kStartingPsn);
  m.local_cm_response_timeout = get_bits(b, kByte47, 0, 5);
  m.retry_count = get_bits(b, kByte47, 5, 3);
  m.pkey = load_be16(b + kPkey);
  m.path_mtu = get_bits(b, kByte50, 0, 4);
  m.rdc_exists = get_bits(b, kByte50, 4, 1);
  m.rnr_retry_count = get_bits(b, kByte50, 5, 3);
  m.max_cm_retries = get_bits(b, kByte51, 0, 4);
  m.srq = get_bits(b, kByte51, 4, 1);
  m.extended_transport_type = get_bits(b, kByte51, 5, 3);
  decode_path(b + kPrimaryPath, m.primary);
  decode_path(b + kAltPath, m.alternate);
  // SAP supported shares the alternate path's ACK-timeout byte (bit 5).
  m.sap_supported = get_bits(b, kAltPath + path_off::kAckTimeout, 5, 1);
  get_mem(b, kPrivate, m.private_data);
}

void encode_req(std::uint8_t* b, const CmReq& m) {
  using namespace req_off;
  store_be32(b + kLocalCommId, m.local_comm_id);
  store_be24(b + kVendorId, m.vendor_id);
  store_be64(b + kServiceId, m.service_id);
  store_be64(b + kLocalCaGuid, m.local_ca_guid);
  store_be32(b + kLocalQkey, m.local_qkey);
  store_be24(b + kLocalQpn, m.local_qpn);
  b[kRespRes] = m.responder_resources;
  store_be24(b + kLocalEecn, m.local_eecn);
  b[kInitDepth] = m.initiator_depth;
  store_be24(b + kRemoteEecn, m.remote_eecn);
  set_bits(b, kByte43, 0, 5, m.remote_cm_response_timeout);
  set_bits(b, kByte43, 5, 2, m.transport_service_type);
  set_bits(b, kByte43, 7, 1, m.end_to_end_flow_control);
  store_be24(b + kStartingPsn, m.starting_psn);
  set_bits(b, kByte47, 0, 5, m.local_cm_response_timeout);
  set_bits(b, kByte47, 5, 3, m.retry_count);
  store_be16(b + kPkey, m.pkey);
  set_bits(b, kByte50, 0, 4, m.path_mtu);
  set_bits(b, kByte50, 4, 1, m.rdc_exists);
  set_bits(b, kByte50, 5, 3, m.rnr_retry_count);
  set_bits(b, kByte51, 0, 4, m.max_cm_retries);
  set_bits(b, kByte51, 4, 1, m.srq);
  set_bits(b, kByte51, 5, 3, m.extended_transport_type);
  encode_path(b + kPrimaryPath, m.primary);
  encode_path(b + kAltPath, m.alternate);
  set_bits(b, kAltPath + path_off::kAckTimeout, 5, 1, m.sap_supported);
  put_mem(b, kPrivate, m.private_data);
}

// MRA (Table 107): comm IDs, message MRAed at byte 8 bits 0-1, service timeout byte 9 bits 0-4.
void decode_mra(const std::uint8_t* b, CmMra& m) {
  m.local_comm_id = load_be32(b);
  m.remote_comm_id = load_be32(b + 4);
  m.message_mraed = static_cast<CmMsgResponse>(get_bits(b, 8, 0, 2));
  m.service_timeout = get_bits(b, 9, 0, 5);
  get_mem(b, 10, m.private_data);
}
void encode_mra(std::uint8_t* b, const CmMra& m) {
  store_be32(b, m.local_comm_id);
  store_be32(b + 4, m.remote_comm_id);
  set_bits(b, 8, 0, 2, static_cast<unsigned>(m.message_mraed));
  set_bits(b, 9, 0, 5, m.service_timeout);
  put_mem(b, 10, m.private_data);
}
static_assert(10 + kCmMraPrivateLen == kCmBodyLen);

// REJ (Table 108): message rejected byte 8 bits 0-1, ARI length byte 9 bits 0-6,
// reason at 10, ARI at 12 (72 bytes), private data at 84.
void decode_rej(const std::uint8_t* b, CmRej& m) {
  m.local_comm_id = load_be32(b);
  m.remote_comm_id = load_be32(b + 4);
  m.message_rejected = static_cast<CmMsgResponse>(get_bits(b, 8, 0, 2));
  m.rejected_info_length = get_bits(b, 9, 0, 7);
  m.reason = load_be16(b + 10);
  get_mem(b, 12, m.ari);
  get_mem(b, 84, m.private_data);
}
void encode_rej(std::uint8_t* b, const CmRej& m) {
  store_be32(b, m.local_comm_id);
  store_be32(b + 4, m.remote_comm_id);
  set_bits(b, 8, 0, 2, static_cast<unsigned>(m.message_rejected));
  set_bits(b, 9, 0, 7, m.rejected_info_length);
  store_be16(b + 10, m.reason);
  put_mem(b, 12, m.ari);
  put_mem(b, 84, m.private_data);
}
static_assert(12 + kCmRejAriLen == 84 && 84 + kCmRejPrivateLen == kCmBodyLen);

// REP (Table 110).
void decode_rep(const std::uint8_t* b, CmRep& m) {
  m.local_comm_id = load_be32(b);
  m.remote_comm_id = load_be32(b + 4);
  m.local_qkey = load_be32(b + 8);
  m.local_qpn = load_be24(b + 12);
  m.vendor_id = (std::uint32_t{b[15]} << 16) | (std::uint32_t{b[19]} << 8) | b[23];
  m.local_eecn = load_be24(b + 16);
  m.starting_psn = load_be24(b + 20);
  m.responder_resources = b[24];
  m.initiator_depth = b[25];
  m.target_ack_delay = get_bits(b, 26, 0, 5);
  m.failover_accepted = get_bits(b, 26, 5, 2);
  m.end_to_end_flow_control = get_bits(b, 26, 7, 1);
  m.rnr_retry_count = get_bits(b, 27, 0, 3);
  m.srq = get_bits(b, 27, 3, 1);
  m.local_ca_guid = load_be64(b + 28);
  get_mem(b, 36, m.private_data);
}
void encode_rep(std::uint8_t* b, const CmRep& m) {
  store_be32(b, m.local_comm_id);
  store_be32(b + 4, m.remote_comm_id);
  store_be32(b + 8, m.local_qkey);
  store_be24(b + 12, m.local_qpn);
  b[15] = static_cast<std::uint8_t>(m.vendor_id >> 16);
  store_be24(b + 16, m.local_eecn);
  b[19] = static_cast<std::uint8_t>(m.vendor_id >> 8);
  store_be24(b + 20, m.starting_psn);
  b[23] = static_cast<std::uint8_t>(m.vendor_id);
  b[24] = m.responder_resources;
  b[25] = m.initiator_depth;
  set_bits(b, 26, 0, 5, m.target_ack_delay);
  set_bits(b, 26, 5, 2, m.failover_accepted);
  set_bits(b, 26, 7, 1, m.end_to_end_flow_control);
  set_bits(b, 27, 0, 3, m.rnr_retry_count);
  set_bits(b, 27, 3, 1, m.srq);
  store_be64(b + 28, m.local_ca_guid);
  put_mem(b, 36, m.private_data);
}
static_assert(36 + kCmRepPrivateLen == kCmBodyLen);

// RTU / DREP (Tables 111, 113): two comm IDs and private data. DREQ (112) adds the remote QPN.
template <typename M>
void decode_ids(const std::uint8_t* b, M& m) {
  m.local_comm_id = load_be32(b);
  m.remote_comm_id = load_be32(b + 4);
}
template <typename M>
void encode_ids(std::uint8_t* b, const M& m) {
  store_be32(b, m.local_comm_id);
  store_be32(b + 4, m.remote_comm_id);
}
static_assert(8 + kCmRtuPrivateLen == kCmBodyLen && 12 + kCmDreqPrivateLen == kCmBodyLen &&
              8 + kCmDrepPrivateLen == kCmBodyLen);

}  // namespace

std::string_view cm_rej_reason_name(std::uint16_t reason) {
  switch (static_cast<CmRejReason>(reason)) {
    case CmRejReason::kNoQp:
      return "no QP";
    case CmRejReason::kNoEec:
      return "no EEC";
    case CmRejReason::kNoResources:
      return "no resources";
    case CmRejReason::kTimeout:
      return "timeout";
    case CmRejReason::kUnsupported:
      return "unsupported request";
    case CmRejReason::kInvalidCommId:
      return "invalid communication ID";
    case CmRejReason::kInvalidCommInstance:
      return "invalid communication instance";
    case CmRejReason::kInvalidServiceId:
      return "invalid service ID";
    case CmRejReason::kInvalidTransportType:
      return "invalid transport service type";
    case CmRejReason::kStaleConn:
      return "stale connection";
    case CmRejReason::kRdcNotExist:
      return "RDC does not exist";
    case CmRejReason::kInvalidGid:
      return "invalid GID";
    case CmRejReason::kInvalidMtu:
      return "invalid path MTU";
    case CmRejReason::kInsufficientRespResources:
      return "insufficient responder resources";
    case CmRejReason::kConsumerDefined:
      return "consumer defined";
    case CmRejReason::kInvalidRnrRetry:
      return "invalid RNR retry count";
    case CmRejReason::kDuplicateLocalCommId:
      return "duplicate local communication ID";
    case CmRejReason::kInvalidClassVersion:
      return "invalid class version";
  }
  return "other";
}

std::string_view cm_decode_status_name(CmDecodeStatus s) {
  switch (s) {
    case CmDecodeStatus::kOk:
      return "ok";
    case CmDecodeStatus::kShort:
      return "short MAD";
    case CmDecodeStatus::kNotCm:
      return "not a CM class 2 MAD";
    case CmDecodeStatus::kBadMethod:
      return "not a Send method";
    case CmDecodeStatus::kUnsupportedAttr:
      return "unsupported CM attribute";
  }
  return "?";
}

std::uint16_t cm_attr_id(const CmBody& body) {
  static constexpr std::uint16_t kIds[] = {cm_attr::kReq, cm_attr::kMra, cm_attr::kRej,
                                           cm_attr::kRep, cm_attr::kRtu, cm_attr::kDreq,
                                           cm_attr::kDrep};
  static_assert(std::size(kIds) == std::variant_size_v<CmBody>);
  return kIds[body.index()];
}

CmDecodeStatus decode_cm_mad(Bytes mad, CmMad& out) {
  if (mad.size() < kMadLen) return CmDecodeStatus::kShort;
  const auto h = decode_mad_header(mad);
  if (h->base_version != kMadBaseVersion || h->mgmt_class != kMgmtClassCm ||
      h->class_version != kCmClassVersion)
    return CmDecodeStatus::kNotCm;
  if (h->method != kMadMethodSend) return CmDecodeStatus::kBadMethod;
  out.hdr = *h;
  const std::uint8_t* b = mad.data() + kMadHdrLen;
  switch (h->attr_id) {
    case cm_attr::kReq:
      decode_req(b, out.body.emplace<CmReq>());
      break;
    case cm_attr::kMra:
      decode_mra(b, out.body.emplace<CmMra>());
      break;
    case cm_attr::kRej:
      decode_rej(b, out.body.emplace<CmRej>());
      break;
    case cm_attr::kRep:
      decode_rep(b, out.body.emplace<CmRep>());
      break;
    case cm_attr::kRtu: {
      auto& m = out.body.emplace<CmRtu>();
      decode_ids(b, m);
      get_mem(b, 8, m.private_data);
      break;
    }
    case cm_attr::kDreq: {
      auto& m = out.body.emplace<CmDreq>();
      decode_ids(b, m);
      m.remote_qpn_eecn = load_be24(b + 8);
      get_mem(b, 12, m.private_data);
      break;
    }
    case cm_attr::kDrep: {
      auto& m = out.body.emplace<CmDrep>();
      decode_ids(b, m);
      get_mem(b, 8, m.private_data);
      break;
    }
    default:
      return CmDecodeStatus::kUnsupportedAttr;
  }
  return CmDecodeStatus::kOk;
}

void encode_cm_mad(std::uint8_t* out, const CmMad& m) {
  std::memset(out, 0, kMadLen);
  MadHeader h = m.hdr;
  h.attr_id = cm_attr_id(m.body);
  encode_mad_header(out, h);
  std::uint8_t* b = out + kMadHdrLen;
  std::visit(
      [b](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, CmReq>) {
          encode_req(b, x);
        } else if constexpr (std::is_same_v<T, CmMra>) {
          encode_mra(b, x);
        } else if constexpr (std::is_same_v<T, CmRej>) {
          encode_rej(b, x);
        } else if constexpr (std::is_same_v<T, CmRep>) {
          encode_rep(b, x);
        } else if constexpr (std::is_same_v<T, CmDreq>) {
          encode_ids(b, x);
          store_be24(b + 8, x.remote_qpn_eecn);
          put_mem(b, 12, x.private_data);
        } else {  // RTU, DREP
          encode_ids(b, x);
          put_mem(b, 8, x.private_data);
        }
      },
      m.body);
}

void encode_cma_header(std::uint8_t* p, const CmaHeader& h) {
  std::memset(p, 0, kCmaHdrLen);
  p[0] = h.cma_version;
  const std::uint8_t version = h.ip_version();
  p[1] = static_cast<std::uint8_t>(version << 4);
  store_be16(p + 2, h.src_port);
  if (version == 4) {
    store_be32(p + 4 + 12, h.src_ip.v4());
    store_be32(p + 20 + 12, h.dst_ip.v4());
  } else {
    std::memcpy(p + 4, h.src_ip.bytes.data(), 16);
    std::memcpy(p + 20, h.dst_ip.bytes.data(), 16);
  }
}

bool decode_cma_header(const std::uint8_t* p, CmaHeader& out) {
  out.cma_version = p[0];
  const std::uint8_t version = p[1] >> 4;
  out.src_port = load_be16(p + 2);
  if (version == 6) {
    Ipv6Addr s{}, d{};
    std::memcpy(s.data(), p + 4, 16);
    std::memcpy(d.data(), p + 20, 16);
    out.src_ip = IpAddress::v6(s);
    out.dst_ip = IpAddress::v6(d);
  } else {
    out.src_ip = load_be32(p + 16);
    out.dst_ip = load_be32(p + 32);
  }
  return out.cma_version == 0 && (version == 4 || version == 6);
}

std::size_t build_cm_frame(MutBytes out, const CmFrameAddr& a, const CmMad& m) {
  PacketFields f;
  f.eth.src = a.src_mac;
  f.eth.dst = a.dst_mac;
  if (a.src_ip.is_v4() && a.dst_ip.is_v4()) {
    f.ip.src = a.src_ip.v4();
    f.ip.dst = a.dst_ip.v4();
    f.ip.tos = a.tos;
    f.ip.id = a.ip_id;
  } else {  // as rxe sends over IPv6: flow label 0, hop limit 64 (tests/transport/data)
    f.eth.ethertype = kEtherTypeIpv6;
    f.ip6.src = a.src_ip.bytes;
    f.ip6.dst = a.dst_ip.bytes;
    f.ip6.traffic_class = a.tos;
  }
  f.udp.src_port = a.udp_src_port;
  f.bth.opcode = opcode::kUdSendOnly;
  f.bth.dqpn = kGsiQpn;
  f.bth.ack_req = true;  // as rxe sends its GSI MADs (capture rxe-rping.pcap)
  f.bth.psn = a.psn & 0xFFFFFF;
  f.deth = {kGsiQkey, 0, kGsiQpn};
  std::array<std::uint8_t, kMadLen> mad{};
  encode_cm_mad(mad.data(), m);
  return build_frame(out, f, Bytes(mad));
}

}  // namespace rocedp::wire
