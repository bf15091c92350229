#pragma once
// Structured key=value logging for control-path events (port up/down, EAL init, faults configured).
// Never call it per packet: it takes a lock and writes to a FILE*.
// Thread-safe: any thread may log; lines are never interleaved.

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "config/config.hpp"

namespace rocedp::pmd {

enum class LogLevel { kError, kWarning, kInfo, kDebug };

// Sets the threshold and the destination. `file` empty = stderr; otherwise the file is opened for
// appending (if it cannot be opened, logging falls back to stderr and says so once). DPDK's own
// messages take the same threshold (dpdk_log_level), also when called again at run time.
void log_configure(LogLevel level, const std::string& file /* empty = stderr */);

// DPDK's log threshold for `level` (rte_log.h: RTE_LOG_ERR = 4 ... RTE_LOG_DEBUG = 8); info is
// RTE_LOG_NOTICE, since EAL's INFO is per-device noise.
int dpdk_log_level(LogLevel level);

// Maps the YAML `logging.level` onto LogLevel.
LogLevel log_level_from_config(config::LoggingConfig::Level level);

// True when a message at `level` would be written (lets callers skip building costly fields).
bool log_enabled(LogLevel level);

// Prints one line:
//   2026-11-29T18:55:59.123Z level=info event=port_up port=p0 mac=02:00:00:00:00:01
// Values containing spaces, '=', '"' or control characters are double-quoted with \" and
// \\ escapes.
void log(LogLevel level, std::string_view event,
         std::initializer_list<std::pair<std::string_view, std::string>> fields = {});

}  // namespace rocedp::pmd
