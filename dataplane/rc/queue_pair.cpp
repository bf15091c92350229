#include "dataplane/rc/queue_pair.hpp"

#include <bit>
#include <cassert>
#include <cstddef>
#include <cstring>
#include <new>

#include "dataplane/rc/congestion.hpp"
#include "dataplane/wire/builder.hpp"
#include "dataplane/wire/ipv4.hpp"
#include "dataplane/wire/psn.hpp"
#include "dataplane/wire/rc_rx.hpp"
#include "dataplane/wire/udp.hpp"
#include "dataplane/wire/udp_sport.hpp"

namespace rocedp::rc {

std::unique_ptr<QueuePair> QueuePair::create(uint32_t qpn, const QpCreateParams& params,
                                             NTSTATUS* status) {
  // The per-packet fields, the header template last, lie within the lines prefetch() covers
  // (offsetof on a class with private members: GCC and Clang lay it out like a struct).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
  static_assert(offsetof(QueuePair, resources_pending) + sizeof(uint32_t) <= 64, "line 0");
  static_assert(offsetof(QueuePair, params_) == 64 && sizeof(QpCreateParams) <= 64, "line 1");
  static_assert(offsetof(QueuePair, hdr_bytes_) == 128 &&
                    offsetof(QueuePair, irl_capacity_) + sizeof(uint32_t) <= 192,
                "line 2");
  static_assert(offsetof(QueuePair, req) == 192, "the roles from line 3");
  // A visit reads the completer's timer fields and the responder's first ones: one line.
  static_assert((offsetof(QueuePair, comp) + offsetof(CompleterState, timer_armed)) / 64 ==
                (offsetof(QueuePair, resp) + offsetof(ResponderState, unacked_packets)) / 64);
  // A WRITE or SEND packet reads the responder's state up to its receive WQE.
  static_assert(offsetof(QueuePair, resp) + offsetof(ResponderState, write_total) <= kHotBytes);
#pragma GCC diagnostic pop
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
  qp->meta_mask_ = static_cast<uint32_t>(slots - 1);  // slots <= 2^31
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
  // At least one entry, so that resource(i) stays defined; with IRL 0 the responder NAKs every
  // READ and atomic (responder.cpp, refuse_rd_atomic).
  const uint32_t irl = p.inbound_read_limit == 0 ? 1 : p.inbound_read_limit;
  resources_.reset(new (std::nothrow) ReadResource[irl]);
  if (!resources_) return STATUS_INSUFFICIENT_RESOURCES;
  if (p.ipv6) {
    ip6_.reset(new (std::nothrow) Ipv6Path);
    if (!ip6_) return STATUS_INSUFFICIENT_RESOURCES;
    ip6_->fold = wire::ipv6_fold(p.remote_ip6.data());
  } else {
    ip6_.reset();
  }
  ipv6_ = p.ipv6;
  irl_capacity_ = irl;
  resources_pending = 0;
  conn_ = p;
  conn_.rq_psn &= wire::kPsnMask;
  conn_.sq_psn &= wire::kPsnMask;
  path_mtu_ = p.path_mtu;
  local_ip_ = p.ipv6 ? wire::kIpv6DstTag : p.local_ip;
  remote_ip_ = p.ipv6 ? 0 : p.remote_ip;
  local_ack_timeout_ = p.local_ack_timeout;
  retry_count_ = p.retry_count;
  rnr_retry_ = p.rnr_retry;

  // Frame template: what rxe puts on the wire (verified against rxe-rping.pcap: DF set, TTL 64,
  // TOS 0, UDP checksum 0, P_Key 0xFFFF, source port from the QPNs' flow label).
  wire::PacketFields& t = tmpl_;
  t = wire::PacketFields{};
  t.eth.src = p.local_mac;
  t.eth.dst = p.remote_mac;
  if (p.ipv6) {
    t.eth.ethertype = wire::kEtherTypeIpv6;
    t.ip6.traffic_class = p.tos;
    t.ip6.flow_label = p.flow_label & 0xFFFFF;
    t.ip6.hop_limit = p.ttl;
    t.ip6.src = p.local_ip6;
    t.ip6.dst = p.remote_ip6;
  } else {
    t.eth.ethertype = wire::kEtherTypeIpv4;
    t.ip.tos = p.tos;
    t.ip.ttl = p.ttl;
    t.ip.flags_frag = wire::kIpv4FlagDf;
    t.ip.src = p.local_ip;
    t.ip.dst = p.remote_ip;
  }
  t.udp.src_port =
      p.udp_sport != 0 ? p.udp_sport : wire::udp_sport(p.flow_label, qpn_, p.remote_qpn);
  t.udp.dst_port = wire::kRoceV2UdpPort;
  t.udp.checksum = 0;
  t.bth.pkey = p.pkey;
  t.bth.dqpn = p.remote_qpn;

  build_header_template();

  // Congestion control starts unlimited; ECT in the ToS makes the QP a reaction point.
  cc = CongestionState{};
  cc_flags = CongestionFlags{};
  conn_.cnp_tos = static_cast<uint8_t>(p.cnp_tos & ~wire::kEcnMask);
  if (conn_.line_rate_mbps == 0) conn_.line_rate_mbps = kDefaultLineRateMbps;
  if (conn_.dcqcn == nullptr) conn_.dcqcn = &kDefaultDcqcn;

  resp = ResponderState{};
  resp.psn = conn_.rq_psn;
  resp.report_writes = p.report_remote_writes;
  state_ = QpState::kRtr;
  return STATUS_SUCCESS;
}

void QueuePair::build_header_template() {
  // Every QP's frames have the one shape the template holds (modify_to_rtr sets no 802.1Q tag
  // and no IP options).
  wire::PacketFields f = tmpl_;
  f.bth.opcode = wire::opcode::kRcSendOnly;  // BTH only
  wire::BuildOptions o;
  o.fill_lengths = false;
  o.fill_ip_checksum = false;
  if (ipv6_) {  // lengths to patch per packet, no header checksum
    assert(wire::header_len(f) == kHeaderTemplateLen6);
    const wire::HeaderSpan hs =
        wire::write_headers(wire::MutBytes(ip6_->hdr, kHeaderTemplateLen6), f, 0, o);
    assert(!hs.headers.empty() && hs.l3_offset == hdr_l3());
    (void)hs;
    hdr_ip_sum_ = 0;
    return;
  }
  assert(wire::header_len(f) == kHeaderTemplateLen);
  const wire::HeaderSpan hs =
      wire::write_headers(wire::MutBytes(hdr_bytes_, kHeaderTemplateLen), f, 0, o);
  assert(!hs.headers.empty() && hs.l3_offset == hdr_l3());
  (void)hs;
  // Sum of the 16-bit words of the IP header with total length, id and checksum at 0.
  const uint8_t* ip = hdr_bytes_ + hdr_l3();
  uint32_t sum = 0;
  for (size_t i = 0; i < wire::kIpv4MinHdrLen; i += 2) sum += wire::load_be16(ip + i);
  hdr_ip_sum_ = sum;
}

NTSTATUS QueuePair::modify_to_rts() {
  if (state_ != QpState::kRtr) return STATUS_INVALID_DEVICE_STATE;
  req = RequesterState{};
  req.cur.psn = conn_.sq_psn;
  req.max_psn_sent = conn_.sq_psn;
  const uint64_t head = comp.sq_head;
  comp = CompleterState{};
  comp.sq_head = head;
  comp.scan_from = static_cast<uint32_t>(head);
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

void scatter_to_sges_walk(const NdkSge* sges, uint32_t count, uint32_t offset, const uint8_t* src,
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

void enter_error(QueuePair& qp, RcContext& ctx, WcError cause, QpErrorReason reason) {
  if (qp.state() == QpState::kError) return;
  qp.set_state(QpState::kError);
  qp.fatal_error = cause;
  // Why, for the consumer (Qp::error_reason) and telemetry: kept with the send queue's
  // connected flag, which every thread may read.
  const QpErrorReason why = reason != QpErrorReason::kNone ? reason : qp_error_reason_of(cause);
  qp.params().sq->set_error_reason(static_cast<uint8_t>(why));
  qp.params().sq->set_connected(false);
  qp.comp.timer_armed = false;
  qp.comp.rnr_wait = false;
  qp.resp.ctl_pending = false;
  ctx.counters->add(RcCounter::kQpErrors);
}

}  // namespace rocedp::rc
