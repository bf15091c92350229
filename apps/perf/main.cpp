// rocedp-perf: a perftest-style benchmark and check tool for rocedp. One process is one endpoint:
// its own EAL (unique file prefix), one port, one polling core, the control thread and the NDK
// adapter, opened through the public API (rocedp::open_adapter) like any consumer's. The modes:
//   --server / --client   two processes meet over an out-of-band TCP exchange   native_mode.cpp
//   --raw                 the same frames with no RDMA processing (baseline)     raw.cpp
//   --listen / --connect  through the IB CM, also against rocedpd's services     cm_mode.cpp
//   --perftest            one end of a Linux perftest 4.5 pair                   perftest_mode.cpp
//   --rping               one end of a Linux rping pair                          rping_mode.cpp
//   --rc-pingpong         one end of a Linux ibv_rc_pingpong pair rc_pingpong_mode.cpp
//   --ops-check           immediate data, memory windows, SEND with Invalidate   ops_check_mode.cpp
//   --cm-check            connections refused, rejected, abandoned, given up     cm_check_mode.cpp
// Exit status: 0 success, 1 failure (a completion error, a verify mismatch, lost frames),
// 2 usage, 3 time limit (--timeout) reached.

#include <unistd.h>

#include <cstdlib>

#include "apps/perf/clock.hpp"
#include "apps/perf/cm_check_mode.hpp"
#include "apps/perf/cm_mode.hpp"
#include "apps/perf/native_mode.hpp"
#include "apps/perf/ops_check_mode.hpp"
#include "apps/perf/options.hpp"
#include "apps/perf/perftest_mode.hpp"
#include "apps/perf/rc_pingpong_mode.hpp"
#include "apps/perf/rping_mode.hpp"
#include "apps/perf/verify.hpp"
#include "apps/perf/watchdog.hpp"
#include "rocedp/runtime.hpp"

namespace {

// A mode's exit status once the process is past its run: the watchdog's last phase.
int finish(int status) {
  rocedp::perf::watchdog::phase("exiting");
  // Test hook (tests/perf/perf_watchdog.sh): stay here as a process stuck on its way out would.
  if (std::getenv("ROCEDP_PERF_TEST_HANG_AT_EXIT") != nullptr && rocedp::perf::watchdog::armed())
    for (;;) pause();
  return status;
}

void set_log_level(rocedp::config::LoggingConfig::Level level) {
  rocedp::config::LoggingConfig logging;
  logging.level = level;
  rocedp::configure_logging(logging);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rocedp::perf;
  clock::start();
  if (wants_perftest(argc, argv)) {
    PerftestOptions o;
    if (const int status = parse_perftest_options(argc, argv, &o); status >= 0) return status;
    set_log_level(o.endpoint.log_level);
    return finish(run_perftest(o));
  }
  if (wants_rping(argc, argv)) {
    RpingOptions o;
    if (const int status = parse_rping_options(argc, argv, &o); status >= 0) return status;
    set_log_level(o.endpoint.log_level);
    return finish(run_rping(o));
  }
  if (wants_rc_pingpong(argc, argv)) {
    RcPingpongOptions o;
    if (const int status = parse_rc_pingpong_options(argc, argv, &o); status >= 0) return status;
    set_log_level(o.endpoint.log_level);
    return finish(run_rc_pingpong(o));
  }
  if (wants_ops_check(argc, argv)) {
    OpsCheckOptions o;
    if (const int status = parse_ops_check_options(argc, argv, &o); status >= 0) return status;
    set_log_level(o.endpoint.log_level);
    return finish(run_ops_check(o));
  }
  if (wants_cm_check(argc, argv)) {
    CmCheckOptions o;
    if (const int status = parse_cm_check_options(argc, argv, &o); status >= 0) return status;
    set_log_level(o.endpoint.log_level);
    return finish(run_cm_check(o));
  }
  Options o;
  if (const int status = parse_options(argc, argv, &o); status >= 0) return status;
  set_log_level(o.endpoint.log_level);
  g_pattern_seed = o.verify_seed;
  return finish(o.connect || o.listen ? run_cm(o) : run_native(o));
}
