#pragma once
// rocedp-perf --rping: one end of a Linux rping pair (librdmacm's example, rdma-core 44), as the
// server (-s) or the client (-c), through rdma_cm (the IB CM) on port -p (7174). Each ping, as
// rping runs it: the client SENDs the address, rkey and length of its source buffer (16 bytes,
// big-endian); the server READs the source and SENDs "go ahead"; the client SENDs its sink; the
// server WRITEs what it read into the sink and SENDs "go ahead" again; with -V the client checks
// the sink against the source. The client ends the connection after -C pings; the server serves
// until its peer disconnects.

#include "apps/perf/options.hpp"

namespace rocedp::perf {

/// Runs the --rping mode. Returns the exit status: 0 success, 1 failure (connection, completion
/// error, a message that is not rping's, a -V mismatch), 3 time limit (--timeout) reached.
int run_rping(const RpingOptions& o);

}  // namespace rocedp::perf
