#include "dataplane/rc/receive.hpp"

#include "dataplane/rc/completer.hpp"
#include "dataplane/rc/responder.hpp"

namespace rocedp::rc {

void receive_dispatch_st(QueuePair* qp, RcContext& ctx, const wire::RcRxPacket& pkt,
                         uint64_t now_ns) {
  if (qp == nullptr) {
    ctx.counters->add(RcCounter::kRxDropNoQp);
    return;
  }
  const QpState s = qp->state();
  if (s != QpState::kRtr && s != QpState::kRts) {
    ctx.counters->add(RcCounter::kRxDropState);
    return;
  }
  // RC has no source QPN on the wire: the peer is identified by its address (rxe_recv.c
  // check_addr).
  if (pkt.src_ip != qp->conn().remote_ip || pkt.dst_ip != qp->conn().local_ip) {
    ctx.counters->add(RcCounter::kRxDropSource);
    return;
  }
  ++ctx.rx_packets;
  if ((pkt.op->flags & wire::op_flag::kRequest) != 0) {
    responder_receive_st(*qp, ctx, pkt, now_ns);
  } else {
    completer_receive_st(*qp, ctx, pkt, now_ns);
  }
}

}  // namespace rocedp::rc
