#pragma once
// Transmit: one frame of a QP from its prebuilt header template, the per-packet fields patched in
// place, the payload and the ICRC. Inline, because every request, response and ACK passes here and
// a call costs the requester's hot loop its registers (callgrind: 22 instructions per 64-byte
// WRITE).

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dataplane/rc/queue_pair.hpp"
#include "dataplane/wire/bth.hpp"
#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/ipv4.hpp"
#include "dataplane/wire/ipv6.hpp"
#include "dataplane/wire/opcode.hpp"
#include "dataplane/wire/udp.hpp"

namespace rocedp::rc {

/// Where a packet's payload comes from: a contiguous source or a gather list (none when its
/// length is 0).
struct TxPayload {
  const void* flat = nullptr;    ///< contiguous source, or
  const NdkSge* sges = nullptr;  ///< gather list
  uint32_t sge_count = 0;
  uint32_t offset = 0;  ///< into the gather list
  uint32_t length = 0;
};

/// The header prefix of `qp`'s frames: Ethernet, IPv4 or IPv6, UDP, BTH.
inline uint32_t header_template_len(const QueuePair& qp) {
  return qp.ipv6() ? kHeaderTemplateLen6 : kHeaderTemplateLen;
}

/// The bytes of a frame of `qp` with `ext_len` bytes of extension headers and `payload_len` of
/// payload: headers, payload, pad and ICRC (what the pacing clock charges).
inline uint32_t frame_bytes(const QueuePair& qp, uint32_t ext_len, uint32_t payload_len) {
  return header_template_len(qp) + ext_len + payload_len + wire::pad_for(payload_len) +
         wire::kIcrcLen;
}

/// Writes the ICRC of every frame the context deferred it for. Whoever calls the role code with a
/// sink without `send` calls it before a frame can leave: at the end of its call, and before its
/// sink transmits in the middle of one (RcEngine::finish_frames_st).
inline void finish_frames_st(RcContext& ctx) {
  for (uint32_t i = 0; i < ctx.pending_icrcs; ++i) {
    const RcContext::PendingIcrc& f = ctx.pending_icrc[i];
    const uint32_t crc =
        f.ipv6 ? wire::icrc_plain_ipv6(f.l3, f.len) : wire::icrc_plain_ipv4(f.l3, f.len);
    wire::store_le32(f.l3 + f.len, crc);
  }
  ctx.pending_icrcs = 0;
}

namespace transmit_detail {

// The ICRC of a frame whose bytes from `l3` on are written, `len` of them before the ICRC: now
// for a sink that is handed each frame (`send`), else among the deferred.
template <bool kIpv6>
inline void finish_icrc(RcContext& ctx, uint8_t* l3, uint32_t len) {
  if (ctx.sink.send != nullptr) {
    wire::store_le32(l3 + len,
                     kIpv6 ? wire::icrc_plain_ipv6(l3, len) : wire::icrc_plain_ipv4(l3, len));
    return;
  }
  if (ctx.pending_icrcs == RcContext::kMaxPendingIcrc) [[unlikely]]
    finish_frames_st(ctx);
  ctx.pending_icrc[ctx.pending_icrcs++] = {l3, len, kIpv6};
}

// A frame the sink's buffer now holds whole: handed over (a sink whose alloc queued it already
// has no send) and counted.
inline void frame_done(RcContext& ctx, void* handle, size_t total) {
  if (ctx.sink.send != nullptr) ctx.sink.send(ctx.sink.ctx, handle, total);
  ++ctx.tx_packets;
}

inline void copy_payload(uint8_t* pl, const TxPayload& payload) {
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

// Extension headers after the BTH: 0, 4, 12, 16, 20 or 28 bytes, copied in fixed-size pieces.
inline void copy_ext(uint8_t* dst, const TxPacket& pkt) {
  const uint8_t* src = pkt.ext;
  const uint32_t n = pkt.ext_len;
  if (n & 16) {
    std::memcpy(dst, src, 16);
    dst += 16;
    src += 16;
  }
  if (n & 8) {
    std::memcpy(dst, src, 8);
    dst += 8;
    src += 8;
  }
  if (n & 4) std::memcpy(dst, src, 4);
}

// BTH word 0 (opcode, SE, M = 0, pad, TVer = 0, P_Key from the template) and word 2 (AckReq,
// PSN); word 1 (resv8a, DestQP) is the template's.
inline void patch_bth(uint8_t* bth, const TxBth& h, uint32_t pad) {
  const uint32_t flags = (h.se ? wire::bth_bits::kSe : 0u) | (pad << wire::bth_bits::kPadShift);
  wire::store_be16(bth, static_cast<uint16_t>((uint32_t{h.opcode} << 8) | flags));
  wire::store_be32(bth + wire::bth_off::kAckReq,
                   (h.ack_req ? 0x80000000u : 0u) | (h.psn & wire::kPsnMask));
}

// The sink's buffer for a frame of `total` bytes; null (counted, the QP marked stalled) if it has
// none.
inline uint8_t* alloc_frame(QueuePair& qp, RcContext& ctx, size_t total, void** handle) {
  uint8_t* buf = ctx.sink.alloc(ctx.sink.ctx, total, handle);
  if (buf == nullptr) [[unlikely]] {
    ctx.counters->add(RcCounter::kTxNoBuffer);
    qp.sched.tx_stalled = true;
  }
  return buf;
}

// transmit_frame for an IPv6 QP: its own template (Ipv6Path), the payload length patched (no
// header checksum, no ID), the ICRC by the general method. Out of line: IPv4 is the usual frame.
template <class Fill>
[[gnu::noinline]] bool transmit_frame_ipv6(QueuePair& qp, RcContext& ctx, const TxBth& h,
                                           uint32_t payload_len, Fill& fill) {
  const uint32_t pad = wire::pad_for(payload_len);
  const size_t hlen = kHeaderTemplateLen6 + h.ext_len;
  const size_t total = hlen + payload_len + pad + wire::kIcrcLen;
  void* handle = nullptr;
  uint8_t* buf = alloc_frame(qp, ctx, total, &handle);
  if (buf == nullptr) [[unlikely]]
    return false;
  std::memcpy(buf, qp.ipv6_path().hdr, kHeaderTemplateLen6);
  uint8_t* ip = buf + qp.hdr_l3();
  const size_t ip_total = total - qp.hdr_l3();
  const auto l4_len = static_cast<uint16_t>(ip_total - wire::kIpv6HdrLen);
  wire::store_be16(ip + wire::ipv6_off::kPayloadLen, l4_len);
  uint8_t* udp = ip + wire::kIpv6HdrLen;
  wire::store_be16(udp + wire::udp_off::kLen, l4_len);
  uint8_t* bth = udp + wire::kUdpHdrLen;
  patch_bth(bth, h, pad);
  uint8_t* pl = buf + hlen;
  fill(bth + wire::kBthLen, pl);
  uint8_t* tail = pl + payload_len;
  if (pad != 0) std::memset(tail, 0, pad);
  finish_icrc<true>(ctx, ip, static_cast<uint32_t>(ip_total - wire::kIcrcLen));
  frame_done(ctx, handle, total);
  return true;
}

}  // namespace transmit_detail

/// Builds one frame from the QP's template with the BTH
/// fields `h`, `h.ext_len` bytes of extension headers and `payload_len` bytes of payload, both
/// written by `fill(ext, payload)`, then the pad and the ICRC, and hands it to the sink. False
/// if the sink refused a buffer: the caller restores its saved state (item 10). The requester's
/// one-packet WRITE and SEND write their RETH and payload straight into the frame through it;
/// every other packet comes through `transmit`.
/// Which frames a caller of transmit_frame sends: any QP's (tested per frame), or IPv4 or IPv6
/// only (the caller knows: the requester's one-packet path, per visit; transmit()). Testing here
/// costs the caller: its lambda's captures must live in memory for the IPv6 call (callgrind: 6
/// instructions per 64-byte WRITE in the requester's loop).
enum class TxIp : uint8_t { kAny, kV4, kV6 };
template <TxIp kIp = TxIp::kAny, class Fill>
inline bool transmit_frame(QueuePair& qp, RcContext& ctx, const TxBth& h, uint32_t payload_len,
                           Fill&& fill) {
  const uint32_t ext_len = h.ext_len;
  // The role writes exactly the extension headers its opcode carries (debug builds check).
  assert(wire::opcode_info(h.opcode) != nullptr &&
         wire::opcode_info(h.opcode)->length == wire::kBthLen + ext_len);
  if constexpr (kIp == TxIp::kV6) {
    return transmit_detail::transmit_frame_ipv6(qp, ctx, h, payload_len, fill);
  } else if constexpr (kIp == TxIp::kAny) {
    if (qp.ipv6()) [[unlikely]]
      return transmit_detail::transmit_frame_ipv6(qp, ctx, h, payload_len, fill);
  }
  const uint32_t pad = wire::pad_for(payload_len);
  const size_t hlen = kHeaderTemplateLen + ext_len;
  // frame_bytes(qp, ext_len, payload_len), with the pad this frame needs anyway: calling it here
  // cost the requester's loop 8 instructions per 64-byte WRITE (callgrind).
  const size_t total = hlen + payload_len + pad + wire::kIcrcLen;
  void* handle = nullptr;
  uint8_t* buf = transmit_detail::alloc_frame(qp, ctx, total, &handle);
  if (buf == nullptr) [[unlikely]]
    return false;
  // Headers: the QP's prebuilt bytes, then the per-packet fields patched in place.
  std::memcpy(buf, qp.hdr_bytes(), kHeaderTemplateLen);
  const size_t l3 = qp.hdr_l3();
  uint8_t* ip = buf + l3;
  const uint16_t ip_len = static_cast<uint16_t>(total - l3);
  const uint16_t id = (*ctx.ip_id)++;
  static_assert(wire::ipv4_off::kId == wire::ipv4_off::kTotalLen + 2);
  wire::store_be32(ip + wire::ipv4_off::kTotalLen, (uint32_t{ip_len} << 16) | id);
  uint32_t sum = qp.hdr_ip_sum() + ip_len + id;
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  wire::store_be16(ip + wire::ipv4_off::kChecksum, static_cast<uint16_t>(~sum));
  uint8_t* udp = ip + wire::kIpv4MinHdrLen;
  wire::store_be16(udp + wire::udp_off::kLen, static_cast<uint16_t>(ip_len - wire::kIpv4MinHdrLen));
  uint8_t* bth = udp + wire::kUdpHdrLen;
  transmit_detail::patch_bth(bth, h, pad);
  uint8_t* pl = buf + hlen;
  fill(bth + wire::kBthLen, pl);
  uint8_t* tail = pl + payload_len;
  if (pad != 0) std::memset(tail, 0, pad);
  // ICRC (IBTA A17.3.3) over the finished frame: the masking happens inside the CRC.
  transmit_detail::finish_icrc<false>(ctx, ip, ip_len - wire::kIcrcLen);
  transmit_detail::frame_done(ctx, handle, total);
  return true;
}

namespace transmit_detail {
// transmit()'s IPv6 frame, out of line and without a lambda of its caller's (its arguments are
// references already, so the IPv4 path keeps its registers).
[[gnu::noinline]] inline bool transmit_ipv6(QueuePair& qp, RcContext& ctx, const TxPacket& pkt,
                                            const TxPayload& payload) {
  auto fill = [&](uint8_t* ext, uint8_t* pl) {
    copy_ext(ext, pkt);
    copy_payload(pl, payload);
  };
  return transmit_frame_ipv6(qp, ctx, pkt, payload.length, fill);
}
}  // namespace transmit_detail

/// One frame with the BTH fields and extension headers of `pkt` and the payload from `payload`.
inline bool transmit(QueuePair& qp, RcContext& ctx, const TxPacket& pkt, const TxPayload& payload) {
  if (qp.ipv6()) [[unlikely]]
    return transmit_detail::transmit_ipv6(qp, ctx, pkt, payload);
  return transmit_frame<TxIp::kV4>(qp, ctx, pkt, payload.length, [&](uint8_t* ext, uint8_t* pl) {
    transmit_detail::copy_ext(ext, pkt);
    transmit_detail::copy_payload(pl, payload);
  });
}

}  // namespace rocedp::rc
