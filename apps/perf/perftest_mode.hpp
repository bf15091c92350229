#pragma once
// rocedp-perf --perftest: one end of a perftest 4.5 pair (ib_{write,read,send}_{bw,lat}), over
// perftest's own TCP exchange (-p, default 18515) or over rdma_cm (-R). See perftest_exchange.hpp
// for the exchange and README.md (rocedp-perf) for the command line.

namespace rocedp::perf {

/// Runs the --perftest mode with the process's arguments ("--perftest" among them). Returns the
/// exit status: 0 success, 1 failure (exchange, connection, completion error, time limit of the
/// exchange), 2 usage, 3 time limit (--timeout) reached.
int perftest_main(int argc, char** argv);

}  // namespace rocedp::perf
