#pragma once
// --server / --client: two rocedp-perf processes meet over the out-of-band exchange
// (apps/perf/oob.hpp), connect their QPs with each other's QPN, PSN, MAC and IP (Qp::connect,
// no connection manager), and run the client's test, RDMA or --raw.

#include "apps/perf/options.hpp"

namespace rocedp::perf {

/// Runs the mode; returns the exit status (0, 1 failure, 2 usage, 3 time limit).
int run_native(const Options& o);

}  // namespace rocedp::perf
