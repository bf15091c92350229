// eal_arguments: the argv rte_eal_init gets from the configuration (pure, no EAL started).

#include "pmd/eal.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace rocedp::pmd {
namespace {

// The value that follows `flag`, or "<missing>".
std::string value_of(const std::vector<std::string>& args, const std::string& flag) {
  auto it = std::find(args.begin(), args.end(), flag);
  if (it == args.end() || it + 1 == args.end()) return "<missing>";
  return *(it + 1);
}

bool has(const std::vector<std::string>& args, const std::string& flag) {
  return std::find(args.begin(), args.end(), flag) != args.end();
}

TEST(EalArguments, DefaultsGiveLcoresMainMemoryNoHugeAndPrefix) {
  config::Config cfg;
  auto args = eal_arguments(cfg, "rocedpd");
  ASSERT_FALSE(args.empty());
  EXPECT_EQ(args[0], "rocedpd");
  EXPECT_EQ(value_of(args, "-l"), "0,1");
  EXPECT_EQ(value_of(args, "--main-lcore"), "0");
  EXPECT_EQ(value_of(args, "-m"), "256");
  EXPECT_TRUE(has(args, "--no-huge"));
  EXPECT_EQ(value_of(args, "--file-prefix"), "rocedp");
  EXPECT_EQ(value_of(args, "--log-level"), "6");
}

TEST(EalArguments, ControlLcoreJoinsTheSortedUniqueLcoreList) {
  config::Config cfg;
  cfg.eal.lcores = {3, 1, 2};
  cfg.eal.main_lcore = 1;
  cfg.control.lcore = 5;
  EXPECT_EQ(value_of(eal_arguments(cfg, "p"), "-l"), "1,2,3,5");
  cfg.control.lcore = 2;  // already in the list: not repeated
  EXPECT_EQ(value_of(eal_arguments(cfg, "p"), "-l"), "1,2,3");
  EXPECT_EQ(value_of(eal_arguments(cfg, "p"), "--main-lcore"), "1");
}

TEST(EalArguments, MainLcoreCpuMapsEveryLcoreWithLcoresAt) {
  config::Config cfg;
  cfg.eal.lcores = {0, 1, 2};
  cfg.eal.main_lcore = 2;
  cfg.eal.main_lcore_cpu = 0;
  auto args = eal_arguments(cfg, "p");
  EXPECT_FALSE(has(args, "-l"));
  EXPECT_EQ(value_of(args, "--lcores"), "0@0,1@1,2@0");
  EXPECT_EQ(value_of(args, "--main-lcore"), "2");
}

TEST(EalArguments, HugepagesDropNoHugeButKeepMemory) {
  config::Config cfg;
  cfg.eal.hugepages = true;
  cfg.eal.memory_mb = 1024;
  auto args = eal_arguments(cfg, "p");
  EXPECT_FALSE(has(args, "--no-huge"));
  EXPECT_EQ(value_of(args, "-m"), "1024");
}

TEST(EalArguments, LogLevelFollowsTheLoggingSection) {
  config::Config cfg;
  using L = config::LoggingConfig::Level;
  const std::pair<L, const char*> cases[] = {
      {L::kError, "4"}, {L::kWarning, "5"}, {L::kInfo, "6"}, {L::kDebug, "8"}};
  for (auto [level, want] : cases) {
    cfg.logging.level = level;
    EXPECT_EQ(value_of(eal_arguments(cfg, "p"), "--log-level"), want);
  }
}

TEST(EalArguments, ExtraArgumentsComeLastInOrder) {
  config::Config cfg;
  cfg.eal.file_prefix = "node-b";
  cfg.eal.extra_args = {"--no-pci", "-a", "0000:03:00.0", "--vdev", "net_null0"};
  auto args = eal_arguments(cfg, "p");
  ASSERT_GE(args.size(), 5u);
  std::vector<std::string> tail(args.end() - 5, args.end());
  EXPECT_EQ(tail, cfg.eal.extra_args);
  EXPECT_EQ(value_of(args, "--file-prefix"), "node-b");
}

TEST(EalInit, IsNotStartedByTheArgumentBuilder) {
  config::Config cfg;
  eal_arguments(cfg, "p");
  EXPECT_FALSE(eal_initialised());
}

}  // namespace
}  // namespace rocedp::pmd
