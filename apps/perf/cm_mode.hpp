#pragma once
// --connect IP:PORT / --listen PORT: the test through the IB CM (include/rocedp/connector.hpp),
// no out-of-band exchange. Each of the -q connections is an NDK Connect (REQ) / Accept (REP) /
// CompleteConnect (RTU) on its own QP. The target is rocedpd's memory service (write|read into
// its region), its echo service (send), or another rocedp-perf --listen.

#include "apps/perf/options.hpp"

namespace rocedp::perf {

/// Runs the mode; returns the exit status (0, 1 failure, 2 usage, 3 time limit).
int run_cm(const Options& o);

}  // namespace rocedp::perf
