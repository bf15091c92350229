#pragma once
// rocedp-perf --perftest: one end of a perftest 4.5 pair (ib_{write,read,send}_{bw,lat}), over
// perftest's own TCP exchange (-p, default 18515) or over rdma_cm (-R). See perftest_exchange.hpp
// for the exchange and README.md (rocedp-perf) for the command line.

#include "apps/perf/options.hpp"

namespace rocedp::perf {

/// Runs the --perftest mode. Returns the exit status: 0 success, 1 failure (exchange,
/// connection, completion error, time limit of the exchange), 3 time limit (--timeout) reached.
int run_perftest(const PerftestOptions& o);

}  // namespace rocedp::perf
