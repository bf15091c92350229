#pragma once
// rocedp-perf --rc-pingpong: one end of a Linux ibv_rc_pingpong pair (libibverbs' example,
// rdma-core 44), as the server (no HOST) or the client (HOST). Its set-up, as the example runs
// it: both ends post -r receives; the client connects to TCP port -p (18515) and writes its
// "LID:QPN:PSN:GID" text (perftest_exchange.hpp); the server reads it, moves its QP to RTR/RTS
// with the client's QPN and PSN and writes its own; the client writes "done" and connects its QP.
// No CM. Then SEND ping-pong: the client sends first, and each end sends its next message once its
// last SEND completed and a message arrived, -n messages each way of -s bytes (0x7b, as the
// example fills its buffer). Both print the example's two result lines.

#include "apps/perf/options.hpp"

namespace rocedp::perf {

/// Runs the --rc-pingpong mode. Returns the exit status: 0 success, 1 failure (the exchange, a
/// completion error, a --verify mismatch), 3 time limit (--timeout) reached.
int run_rc_pingpong(const RcPingpongOptions& o);

}  // namespace rocedp::perf
