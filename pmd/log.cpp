#include "pmd/log.hpp"

#include <rte_log.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace rocedp::pmd {
namespace {

struct LogState {
  std::mutex mutex;
  LogLevel level = LogLevel::kInfo;
  FILE* out = nullptr;  // nullptr = stderr
};

LogState& state() {
  static LogState s;
  return s;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "info";
}

bool needs_quotes(std::string_view v) {
  if (v.empty()) return true;
  for (char c : v) {
    if (c == ' ' || c == '=' || c == '"' || static_cast<unsigned char>(c) < 0x20) return true;
  }
  return false;
}

void append_value(std::string& line, std::string_view v) {
  if (!needs_quotes(v)) {
    line.append(v);
    return;
  }
  line.push_back('"');
  for (char c : v) {
    if (c == '"' || c == '\\') {
      line.push_back('\\');
      line.push_back(c);
    } else if (c == '\n') {
      line.append("\\n");
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      line.append(buf);
    } else {
      line.push_back(c);
    }
  }
  line.push_back('"');
}

void append_timestamp(std::string& line) {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  line.append(buf);
}

}  // namespace

int dpdk_log_level(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return RTE_LOG_ERR;
    case LogLevel::kWarning:
      return RTE_LOG_WARNING;
    case LogLevel::kInfo:
      return RTE_LOG_NOTICE;
    case LogLevel::kDebug:
      return RTE_LOG_DEBUG;
  }
  return RTE_LOG_NOTICE;
}

void log_configure(LogLevel level, const std::string& file) {
  LogState& s = state();
  std::lock_guard lock(s.mutex);
  s.level = level;
  rte_log_set_global_level(static_cast<uint32_t>(dpdk_log_level(level)));
  if (s.out != nullptr) {
    std::fclose(s.out);
    s.out = nullptr;
  }
  if (!file.empty()) {
    s.out = std::fopen(file.c_str(), "a");
    if (s.out == nullptr) {
      std::fprintf(stderr, "level=warning event=log_open_failed file=%s (logging to stderr)\n",
                   file.c_str());
    } else {
      std::setvbuf(s.out, nullptr, _IOLBF, 0);  // a line per event, visible at once
    }
  }
}

LogLevel log_level_from_config(config::LoggingConfig::Level level) {
  switch (level) {
    case config::LoggingConfig::Level::kError:
      return LogLevel::kError;
    case config::LoggingConfig::Level::kWarning:
      return LogLevel::kWarning;
    case config::LoggingConfig::Level::kInfo:
      return LogLevel::kInfo;
    case config::LoggingConfig::Level::kDebug:
      return LogLevel::kDebug;
  }
  return LogLevel::kInfo;
}

bool log_enabled(LogLevel level) {
  LogState& s = state();
  std::lock_guard lock(s.mutex);
  return static_cast<int>(level) <= static_cast<int>(s.level);
}

void log(LogLevel level, std::string_view event,
         std::initializer_list<std::pair<std::string_view, std::string>> fields) {
  // Build the line outside the lock; only the threshold check and the write are serialised.
  std::string line;
  line.reserve(128);
  append_timestamp(line);
  line.append(" level=");
  line.append(level_name(level));
  line.append(" event=");
  append_value(line, event);
  for (const auto& [key, value] : fields) {
    line.push_back(' ');
    line.append(key);
    line.push_back('=');
    append_value(line, value);
  }
  line.push_back('\n');

  LogState& s = state();
  std::lock_guard lock(s.mutex);
  if (static_cast<int>(level) > static_cast<int>(s.level)) return;
  FILE* out = s.out != nullptr ? s.out : stderr;
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

}  // namespace rocedp::pmd
