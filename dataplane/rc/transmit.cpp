#include "dataplane/rc/transmit.hpp"

#include "dataplane/wire/builder.hpp"

namespace rocedp::rc {

// The generic builder: frames whose shape the byte template does not cover (802.1Q, IP options).
bool transmit_generic(QueuePair& qp, RcContext& ctx, const TxPacket& pkt,
                      const TxPayload& payload) {
  wire::PacketFields f = qp.tmpl();
  f.bth.opcode = pkt.opcode;
  f.bth.se = pkt.se;
  f.bth.ack_req = pkt.ack_req;
  f.bth.psn = pkt.psn;
  f.bth.pad = wire::pad_for(payload.length);
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
  // write_headers put the (zero) extension fields of `f`; the packet's own go over them.
  transmit_detail::copy_ext(buf + hlen - pkt.ext_len, pkt);
  uint8_t* pl = buf + hlen;
  transmit_detail::copy_payload(pl, payload);
  const wire::Bytes pls(pl, payload.length);
  wire::finish_packet(wire::MutBytes(pl + payload.length, f.bth.pad + wire::kIcrcLen), hs, {pls},
                      f.bth.pad);
  transmit_detail::frame_done(ctx, handle, total);
  return true;
}

}  // namespace rocedp::rc
