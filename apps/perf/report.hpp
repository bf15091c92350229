#pragma once
// What rocedp-perf prints. Its own runs: perftest's table layout (scripts match the header and
// the rows), and with --json one JSON object per line on stdout for scripts/bench_*.py (the
// table then goes to stderr). --perftest runs: perftest 4.5's banner and rows, so a result reads
// the same on both ends of a pair.

#include <cstdint>
#include <string>
#include <vector>

#include "apps/perf/options.hpp"
#include "apps/perf/perftest_exchange.hpp"
#include "rocedp/runtime.hpp"

namespace rocedp::perf {

/// One message size's result.
struct Row {
  uint64_t size = 0, iterations = 0;
  double elapsed_s = 0, peak_msgs_per_s = 0;
  uint32_t frames_per_msg = 1;
  std::vector<double> lat_us;  // per-iteration round trips
  bool ok = true;
  std::string error;
};

/// How the rows of one run are printed.
struct Report {
  Test test;
  bool json = false;
  bool report_gbits = false;
  /// Latency: the round trip reported whole (READ; a WRITE nobody answers) instead of halved.
  bool full_rtt = false;
  std::vector<std::string> notes;  ///< extra lines under the table's title
};

void print_header(const Report& r);
void print_row(const Report& r, const Row& row);
/// " verify: N messages of S bytes checked byte for byte" (not with --json).
void print_verified(const Report& r, uint64_t messages, uint64_t size);
/// {"rc_counters": {...}}: this endpoint's RC engine counters (--json, --counters).
void print_engine_counters(AdapterRuntime& rt);
/// {"drops": {...}}: AdapterRuntime::drop_counters (frames dropped by reason, the fault stage).
void print_drop_counters(AdapterRuntime& rt);
/// Process memory per QP: a JSON object with --json, a line on stderr with more than one QP.
void print_qp_memory(const Report& r, uint64_t bytes_per_qp);

// --perftest: perftest's banner (test, link, every QP's key) and rows.
struct PerftestBanner {
  Op op = Op::kWrite;
  Kind kind = Kind::kBw;
  uint32_t qps = 1, tx_depth = 1, rx_depth = 1, path_mtu = 1024;
  bool rdma_cm = false, report_gbits = false;
  bool cmp_swap = false;  ///< atomic: CMP_AND_SWAP, otherwise FETCH_AND_ADD
  bool srq = false;       ///< SEND tests: receives through one SRQ
  std::vector<PerftestKey> mine, peer;
};
void print_perftest_banner(const PerftestBanner& b);
void print_perftest_bw_row(const BwReport& r);
/// perftest's latency row: samples are one-way times in microseconds.
void print_perftest_lat_row(uint64_t size, uint64_t iters, std::vector<double> samples);
void print_perftest_end();

}  // namespace rocedp::perf
