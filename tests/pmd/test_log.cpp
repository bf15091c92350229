// Structured logging: line format, quoting, threshold, file destination, and whole lines when
// many threads log at once.

#include "pmd/log.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>
#include <vector>

namespace rocedp::pmd {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("rocedp-log-test-" + std::to_string(getpid()) + ".log");
    std::filesystem::remove(path_);
  }
  void TearDown() override {
    log_configure(LogLevel::kInfo, "");
    std::filesystem::remove(path_);
  }
  std::vector<std::string> lines() {
    std::ifstream in(path_);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  std::filesystem::path path_;
};

TEST_F(LogTest, WritesTimestampLevelEventAndFields) {
  log_configure(LogLevel::kInfo, path_.string());
  log(LogLevel::kInfo, "port_up", {{"port", "p0"}, {"mac", "02:00:00:00:00:01"}});
  auto l = lines();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_TRUE(std::regex_match(
      l[0], std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=info event=port_up )"
                       R"(port=p0 mac=02:00:00:00:00:01)")))
      << l[0];
}

TEST_F(LogTest, QuotesValuesThatWouldBreakTheKeyValueFormat) {
  log_configure(LogLevel::kInfo, path_.string());
  log(LogLevel::kWarning, "x",
      {{"reason", "no such device"},
       {"a", "k=v"},
       {"q", "say \"hi\"\\"},
       {"empty", ""},
       {"nl", "a\nb"}});
  auto l = lines();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_NE(l[0].find(R"(reason="no such device" a="k=v" q="say \"hi\"\\" empty="" nl="a\nb")"),
            std::string::npos)
      << l[0];
}

TEST_F(LogTest, MessagesBelowTheThresholdAreDropped) {
  log_configure(LogLevel::kWarning, path_.string());
  EXPECT_FALSE(log_enabled(LogLevel::kInfo));
  EXPECT_TRUE(log_enabled(LogLevel::kError));
  log(LogLevel::kDebug, "d");
  log(LogLevel::kInfo, "i");
  log(LogLevel::kWarning, "w");
  log(LogLevel::kError, "e");
  auto l = lines();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_NE(l[0].find("level=warning event=w"), std::string::npos);
  EXPECT_NE(l[1].find("level=error event=e"), std::string::npos);
}

TEST_F(LogTest, ConfigLevelsMapOneToOne) {
  using L = config::LoggingConfig::Level;
  EXPECT_EQ(log_level_from_config(L::kError), LogLevel::kError);
  EXPECT_EQ(log_level_from_config(L::kWarning), LogLevel::kWarning);
  EXPECT_EQ(log_level_from_config(L::kInfo), LogLevel::kInfo);
  EXPECT_EQ(log_level_from_config(L::kDebug), LogLevel::kDebug);
}

TEST_F(LogTest, ConcurrentLoggersNeverInterleaveLines) {
  log_configure(LogLevel::kInfo, path_.string());
  constexpr int kThreads = 8, kPerThread = 500;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kPerThread; ++i) {
        log(LogLevel::kInfo, "tick",
            {{"thread", std::to_string(t)},
             {"i", std::to_string(i)},
             {"pad", std::string(200, 'x')}});
      }
    });
  }
  for (auto& th : threads) th.join();
  auto l = lines();
  ASSERT_EQ(l.size(), static_cast<size_t>(kThreads * kPerThread));
  std::regex whole(R"(\S+ level=info event=tick thread=\d+ i=\d+ pad=x{200})");
  for (const auto& line : l) ASSERT_TRUE(std::regex_match(line, whole)) << line;
}

TEST_F(LogTest, AnUnwritableFileFallsBackToStderr) {
  log_configure(LogLevel::kInfo, "/nonexistent-dir/x.log");
  log(LogLevel::kInfo, "still_works");  // must not crash; goes to stderr
  EXPECT_FALSE(std::filesystem::exists("/nonexistent-dir/x.log"));
}

}  // namespace
}  // namespace rocedp::pmd
