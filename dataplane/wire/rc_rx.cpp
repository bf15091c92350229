#include "dataplane/wire/rc_rx.hpp"

#include "dataplane/wire/parser.hpp"

namespace rocedp::wire {

// Any other shape: the general parser, then the same view of its result.
DropReason parse_rc_general(Bytes frame, RcRxPacket& out) {
  ParsedPacket p;
  const DropReason why = parse(frame, p);
  if (why != DropReason::kNone) return why;
  out.bth = frame.data() + p.bth_offset;
  out.op = p.op;
  out.payload = frame.data() + p.payload_offset;
  out.payload_len = p.payload_len;
  out.psn = p.f.bth.psn;
  out.dqpn = p.f.bth.dqpn;
  out.src_ip = p.f.ip.src;
  out.dst_ip = p.f.ip.dst;
  out.opcode = p.f.bth.opcode;
  out.ack_req = p.f.bth.ack_req;
  out.se = p.f.bth.se;
  return DropReason::kNone;
}

}  // namespace rocedp::wire
