#include "dataplane/rc/queue_pair.hpp"

#include <bit>
#include <cstring>
#include <new>

#include "dataplane/wire/builder.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/ipv4.hpp"
#include "dataplane/wire/udp.hpp"
#include "dataplane/wire/udp_sport.hpp"

namespace rocedp::rc {

std::unique_ptr<QueuePair> QueuePair::create(uint32_t qpn, const QpCreateParams& params,
                                             NTSTATUS* status) {
  const bool one_rq = (params.rq != nullptr) != (params.srq != nullptr);
  if (params.sq == nullptr || !one_rq || params.send_cq == nullptr || params.recv_cq == nullptr ||
      params.max_inbound_read_limit == 0 || params.max_unacked_psns == 0 ||
      params.max_unacked_psns >= (1u << 23)) {
    *status = STATUS_INVALID_PARAMETER;
    return nullptr;
  }
  std::unique_ptr<QueuePair> qp(new (std::nothrow) QueuePair(qpn, params));
  if (!qp) {
    *status = STATUS_INSUFFICIENT_RESOURCES;
    return nullptr;
  }
  // One bookkeeping entry per send-queue slot: the ring capacity is a power of two, and a WQE's
  // slot stays occupied until it completes, so absolute sequence & mask never collides.
  const uint64_t slots = std::bit_ceil(static_cast<uint64_t>(params.sq->ring().capacity()));
  qp->meta_.reset(new (std::nothrow) WqeMeta[slots]);
  qp->meta_mask_ = slots - 1;
  qp->sq_ring_ = &params.sq->ring();
  // Responder resources wait for RTR: they are sized by the negotiated inbound read limit,
  // which is usually far below the maximum (and 0 for a peer that never reads).
  if (!qp->meta_) {
    *status = STATUS_INSUFFICIENT_RESOURCES;
    return nullptr;
  }
  qp->state_ = QpState::kInit;
  *status = STATUS_SUCCESS;
  return qp;
}

NTSTATUS QueuePair::modify_to_rtr(const QpConnectParams& p) {
  if (state_ != QpState::kInit) return STATUS_INVALID_DEVICE_STATE;
  const bool mtu_ok =
      p.path_mtu >= kMinPathMtu && p.path_mtu <= kMaxPathMtu && std::has_single_bit(p.path_mtu);
  if (!mtu_ok || p.retry_count > 7 || p.rnr_retry > 7 || p.local_ack_timeout > 31 ||
      p.min_rnr_timer > 31 || p.inbound_read_limit > params_.max_inbound_read_limit ||
      p.remote_qpn > wire::kQpnMask || p.remote_qpn <= 1) {
    return STATUS_INVALID_PARAMETER;
  }
  // At least one entry, so that resource(i) stays defined; with IRL 0 take_resource refuses.
  const uint32_t irl = p.inbound_read_limit == 0 ? 1 : p.inbound_read_limit;
  resources_.reset(new (std::nothrow) ReadResource[irl]);
  if (!resources_) return STATUS_INSUFFICIENT_RESOURCES;
  irl_capacity_ = irl;
  resources_pending = 0;
  conn_ = p;
  conn_.rq_psn &= wire::kPsnMask;
  conn_.sq_psn &= wire::kPsnMask;

  // Frame template: what rxe puts on the wire (verified against rxe-rping.pcap: DF set, TTL 64,
  // TOS 0, UDP checksum 0, P_Key 0xFFFF, source port from the QPNs' flow label).
  wire::PacketFields& t = tmpl_;
  t = wire::PacketFields{};
  t.eth.src = p.local_mac;
  t.eth.dst = p.remote_mac;
  t.eth.ethertype = wire::kEtherTypeIpv4;
  t.ip.tos = p.tos;
  t.ip.ttl = p.ttl;
  t.ip.flags_frag = wire::kIpv4FlagDf;
  t.ip.src = p.local_ip;
  t.ip.dst = p.remote_ip;
  t.udp.src_port =
      p.udp_sport != 0 ? p.udp_sport : wire::udp_sport(p.flow_label, qpn_, p.remote_qpn);
  t.udp.dst_port = wire::kRoceV2UdpPort;
  t.udp.checksum = 0;
  t.bth.pkey = p.pkey;
  t.bth.dqpn = p.remote_qpn;

  build_header_template();

  resp = ResponderState{};
  resp.psn = conn_.rq_psn;
  state_ = QpState::kRtr;
  return STATUS_SUCCESS;
}

void QueuePair::build_header_template() {
  hdr_len_ = 0;
  // The byte template covers the common shape only; anything else keeps the generic builder.
  if (tmpl_.eth.header_len() != wire::kEthHdrLen || tmpl_.ip.ihl != 5) return;
  wire::PacketFields f = tmpl_;
  f.bth.opcode = wire::opcode::kRcSendOnly;  // BTH only
  const size_t n = wire::header_len(f);
  if (n != kHeaderTemplateLen) return;
  wire::BuildOptions o;
  o.fill_lengths = false;
  o.fill_ip_checksum = false;
  const wire::HeaderSpan hs =
      wire::write_headers(wire::MutBytes(hdr_bytes_, kHeaderTemplateLen), f, 0, o);
  if (hs.headers.empty()) return;
  hdr_l3_ = static_cast<uint8_t>(hs.l3_offset);
  // Sum of the 16-bit words of the IP header with total length, id and checksum at 0.
  const uint8_t* ip = hdr_bytes_ + hdr_l3_;
  uint32_t sum = 0;
  for (size_t i = 0; i < wire::kIpv4MinHdrLen; i += 2) sum += wire::load_be16(ip + i);
  hdr_ip_sum_ = sum;
  // The checksum bytes hold 1s in the template: masked as the ICRC wants them until the real
  // checksum is written (transmit).
  hdr_bytes_[hdr_l3_ + wire::ipv4_off::kChecksum] = 0xFF;
  hdr_bytes_[hdr_l3_ + wire::ipv4_off::kChecksum + 1] = 0xFF;
  hdr_len_ = static_cast<uint8_t>(n);
}

NTSTATUS QueuePair::modify_to_rts() {
  if (state_ != QpState::kRtr) return STATUS_INVALID_DEVICE_STATE;
  req = RequesterState{};
  req.cur.psn = conn_.sq_psn;
  req.max_psn_sent = conn_.sq_psn;
  const uint64_t head = comp.sq_head;
  comp = CompleterState{};
  comp.sq_head = head;
  comp.unacked_psn = conn_.sq_psn;
  comp.retry_left = conn_.retry_count;
  comp.rnr_retry_left = conn_.rnr_retry;
  comp.window = params_.max_unacked_psns;
  comp.recover_psn = conn_.sq_psn;
  state_ = QpState::kRts;
  params_.sq->set_connected(true);
  return STATUS_SUCCESS;
}

NTSTATUS QueuePair::connect(const QpConnectParams& params) {
  const NTSTATUS s = modify_to_rtr(params);
  return s != STATUS_SUCCESS ? s : modify_to_rts();
}

// ---------------------------------------------------------------------------------------------

void gather_from_sges(const NdkSge* sges, uint32_t count, uint32_t offset, uint8_t* dst,
                      uint32_t len) {
  for (uint32_t i = 0; i < count && len != 0; ++i) {
    const uint32_t l = sges[i].length;
    if (offset >= l) {
      offset -= l;
      continue;
    }
    const uint32_t n = l - offset < len ? l - offset : len;
    std::memcpy(dst, static_cast<const uint8_t*>(sges[i].virtual_address) + offset, n);
    dst += n;
    len -= n;
    offset = 0;
  }
}

void scatter_to_sges(const NdkSge* sges, uint32_t count, uint32_t offset, const uint8_t* src,
                     uint32_t len) {
  for (uint32_t i = 0; i < count && len != 0; ++i) {
    const uint32_t l = sges[i].length;
    if (offset >= l) {
      offset -= l;
      continue;
    }
    const uint32_t n = l - offset < len ? l - offset : len;
    std::memcpy(static_cast<uint8_t*>(sges[i].virtual_address) + offset, src, n);
    src += n;
    len -= n;
    offset = 0;
  }
}

namespace {

void copy_payload(uint8_t* pl, const TxPayload& payload) {
  if (payload.length == 0) return;
  if (payload.flat != nullptr) {
    std::memcpy(pl, payload.flat, payload.length);
  } else if (payload.sge_count == 1 && payload.offset + payload.length <= payload.sges[0].length) {
    std::memcpy(pl, static_cast<const uint8_t*>(payload.sges[0].virtual_address) + payload.offset,
                payload.length);
  } else {
    gather_from_sges(payload.sges, payload.sge_count, payload.offset, pl, payload.length);
  }
}

// The generic builder: frames whose shape the byte template does not cover.
[[gnu::noinline]] bool transmit_generic(QueuePair& qp, RcContext& ctx, wire::PacketFields& f,
                                        const TxPayload& payload) {
  f.ip.id = (*ctx.ip_id)++;
  const size_t hlen = wire::header_len(f);
  const size_t total = hlen + payload.length + f.bth.pad + wire::kIcrcLen;
  void* handle = nullptr;
  uint8_t* buf = ctx.sink.alloc(ctx.sink.ctx, total, &handle);
  if (buf == nullptr) {
    --*ctx.ip_id;
    ctx.counters->add(RcCounter::kTxNoBuffer);
    qp.sched.tx_stalled = true;
    return false;
  }
  const wire::HeaderSpan hs = wire::write_headers(wire::MutBytes(buf, hlen), f, payload.length);
  uint8_t* pl = buf + hlen;
  copy_payload(pl, payload);
  const wire::Bytes pls(pl, payload.length);
  wire::finish_packet(wire::MutBytes(pl + payload.length, f.bth.pad + wire::kIcrcLen), hs, {pls},
                      f.bth.pad);
  ctx.sink.send(ctx.sink.ctx, handle, total);
  ++ctx.tx_packets;
  return true;
}

}  // namespace

bool transmit(QueuePair& qp, RcContext& ctx, wire::PacketFields& f, const TxPayload& payload) {
  f.bth.pad = wire::pad_for(payload.length);
  if (qp.hdr_len() == 0) [[unlikely]]
    return transmit_generic(qp, ctx, f, payload);
  const wire::OpcodeInfo* op = wire::opcode_info(f.bth.opcode);
  const size_t hlen = kHeaderTemplateLen + op->length - wire::kBthLen;
  const size_t total = hlen + payload.length + f.bth.pad + wire::kIcrcLen;
  void* handle = nullptr;
  uint8_t* buf = ctx.sink.alloc(ctx.sink.ctx, total, &handle);
  if (buf == nullptr) [[unlikely]] {
    ctx.counters->add(RcCounter::kTxNoBuffer);
    qp.sched.tx_stalled = true;
    return false;
  }
  // Headers: the QP's prebuilt bytes, then the per-packet fields patched in place.
  const uint8_t* tmpl = qp.hdr_bytes();
  std::memcpy(buf, tmpl, kHeaderTemplateLen);
  const size_t l3 = qp.hdr_l3();
  uint8_t* ip = buf + l3;
  const uint16_t ip_len = static_cast<uint16_t>(total - l3);
  const uint16_t id = (*ctx.ip_id)++;
  wire::store_be16(ip + wire::ipv4_off::kTotalLen, ip_len);
  wire::store_be16(ip + wire::ipv4_off::kId, id);
  uint8_t* udp = ip + wire::kIpv4MinHdrLen;
  wire::store_be16(udp + wire::udp_off::kLen, static_cast<uint16_t>(ip_len - wire::kIpv4MinHdrLen));
  uint8_t* bth = udp + wire::kUdpHdrLen;
  bth[wire::bth_off::kOpcode] = f.bth.opcode;
  wire::BthView<uint8_t> v(bth);
  v.set_flags(f.bth.se, false, f.bth.pad, 0);
  v.set_ack_req_psn(f.bth.ack_req, 0, f.bth.psn);
  if (op->length != wire::kBthLen) wire::encode_ext_headers(bth, *op, f);
  uint8_t* pl = buf + hlen;
  copy_payload(pl, payload);
  uint8_t* tail = pl + payload.length;
  for (uint8_t i = 0; i < f.bth.pad; ++i) tail[i] = 0;
  // ICRC (IBTA A17.3.3) in one pass: the variant fields hold 1s while it is computed (the
  // template's checksum bytes are 1s already, see build_header_template), then get their values.
  ip[wire::ipv4_off::kTos] = 0xFF;
  ip[wire::ipv4_off::kTtl] = 0xFF;
  udp[wire::udp_off::kChecksum] = 0xFF;
  udp[wire::udp_off::kChecksum + 1] = 0xFF;
  bth[wire::bth_off::kResv8a] = 0xFF;
  wire::store_le32(tail + f.bth.pad,
                   wire::icrc_of_masked(wire::Bytes(ip, ip_len - wire::kIcrcLen)));
  ip[wire::ipv4_off::kTos] = tmpl[l3 + wire::ipv4_off::kTos];
  ip[wire::ipv4_off::kTtl] = tmpl[l3 + wire::ipv4_off::kTtl];
  udp[wire::udp_off::kChecksum] = 0;  // RoCEv2 over IPv4: no UDP checksum (as rxe)
  udp[wire::udp_off::kChecksum + 1] = 0;
  bth[wire::bth_off::kResv8a] =
      tmpl[l3 + wire::kIpv4MinHdrLen + wire::kUdpHdrLen + wire::bth_off::kResv8a];
  uint32_t sum = qp.hdr_ip_sum() + ip_len + id;
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  wire::store_be16(ip + wire::ipv4_off::kChecksum, static_cast<uint16_t>(~sum));
  ctx.sink.send(ctx.sink.ctx, handle, total);
  ++ctx.tx_packets;
  return true;
}

void enter_error(QueuePair& qp, RcContext& ctx, WcError cause) {
  if (qp.state() == QpState::kError) return;
  qp.set_state(QpState::kError);
  qp.fatal_error = cause;
  qp.params().sq->set_connected(false);
  qp.comp.timer_armed = false;
  qp.comp.rnr_wait = false;
  qp.resp.ctl_pending = false;
  ctx.counters->add(RcCounter::kQpErrors);
}

}  // namespace rocedp::rc
