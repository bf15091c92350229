#pragma once
// Requester (IBTA §9.7.4 "Requester: generating request packets"; rxe_req.c): turns send-queue
// WQEs into request packets. It segments messages by path MTU, assigns PSNs, sets AckReq on the
// last packet of a message, on PSNs about a quarter window apart (at most kAckReqInterval) and on
// the first packet resent after a go-back, times one AckReq packet at a time for the RTT, enforces
// the outbound read/atomic limit (ORL) and READ_FENCE, executes local work requests (fast register,
// invalidate) in send-queue order, and resends from any PSN after a go-back-N.
//
// Transmit failure (the sink has no buffer): the cursor saved before the packet is restored, so
// the same packet is built again on the next poll (CONVENTIONS.md item 10).

#include <cstdint>

#include "dataplane/rc/queue_pair.hpp"

namespace rocedp::rc {

/// Longest AckReq spacing in PSNs (a quarter of the window when that is shorter), so the window
/// keeps moving when ACKs are lost.
inline constexpr uint32_t kAckReqInterval = 32;

/// Sends up to `budget` packets of `qp` (RTS only). Returns the packets sent. Owning core only.
uint32_t requester_run_st(QueuePair& qp, RcContext& ctx, uint64_t now_ns, uint32_t budget);

/// Go-back-N: the next packet the requester sends is `psn` (a PSN already sent and not yet
/// acknowledged). A READ restarts mid-message with an adjusted RETH (IBTA §9.7.4.1.5).
void requester_go_back_st(QueuePair& qp, RcContext& ctx, uint32_t psn);

/// Moves the requester's cursor to `psn` (or to the first PSN not sent yet, when every WQE
/// started before it is finished) without counting a go-back-N: for a cursor that moves forward,
/// past packets that turned out to have arrived. True if `psn` lies in an unfinished WQE.
bool requester_seek_st(QueuePair& qp, uint32_t psn);

}  // namespace rocedp::rc
