#pragma once
// Receive (rxe_recv.c): the first stop of every inbound frame on the owning core. The codec
// parses it and verifies the IP checksum and ICRC (drop reasons counted per DropReason); the RC
// checks follow: RC transport only, destination QPN owned by this core, source IP = the
// connected peer, QP state. Requests go to the responder, responses to the completer.

#include <array>
#include <cstdint>

#include "dataplane/rc/queue_pair.hpp"
#include "dataplane/wire/drop_reason.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocedp::rc {

using WireDropCounters = std::array<uint64_t, wire::kDropReasonCount>;

/// Parses `frame` into `out` (ICRC verified). False if the codec refused it (counted in
/// `drops`, indexed by wire::DropReason) or it is not RC: a CNP is counted (kRxCnp), any other
/// non-RC opcode dropped (kRxDropNotRc).
bool receive_parse_st(wire::Bytes frame, wire::ParsedPacket& out, RcCounters& counters,
                      uint64_t* drops);

/// Hands a parsed RC packet to `qp` (null: unknown QPN, counted). Owning core only.
void receive_dispatch_st(QueuePair* qp, RcContext& ctx, const wire::ParsedPacket& pkt,
                         uint64_t now_ns);

}  // namespace rocedp::rc
