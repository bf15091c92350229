#pragma once
// One EAL per test process (DESIGN.md §6): a gtest Environment that starts EAL with --no-huge and
// a file prefix unique to the process, creates the packet pool the tests share, and at the end
// checks that every mbuf came back, frees the pool, cleans EAL up and removes its runtime folder.
// Each test folder's env header registers one with its own options:
//   inline const auto* const kEnv = ::testing::AddGlobalTestEnvironment(
//       new rocedp::test::EalSession({.tag = "ndk-test", .mbufs = 16383}));

#include <gtest/gtest.h>
#include <rte_eal.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "pmd/eal.hpp"
#include "pmd/log.hpp"
#include "pmd/packet_pool.hpp"

namespace rocedp::test {

struct EalSessionOptions {
  std::string tag;                  ///< names the file prefix "rdp-TAG-PID" and the pool
  std::vector<unsigned> lcores{0};  ///< EAL lcores; main lcore is the first
  unsigned memory_mb = 256;
  uint32_t mbufs = 8191;
  uint32_t mbuf_cache = 0;
  std::vector<std::string> extra_args{"--no-telemetry", "--no-pci"};
  pmd::LogLevel log_level = pmd::LogLevel::kWarning;
  bool check_leaks = true;  ///< every mbuf must be back in the pool at the end
};

/// The pool of the process's EAL session (valid between SetUp and TearDown).
inline std::unique_ptr<pmd::PacketPool>& session_pool() {
  static std::unique_ptr<pmd::PacketPool> p;
  return p;
}

inline std::string session_prefix(const std::string& tag) {
  return "rdp-" + tag + "-" + std::to_string(getpid());
}

class EalSession : public ::testing::Environment {
 public:
  explicit EalSession(EalSessionOptions o) : o_(std::move(o)) {}

  void SetUp() override {
    config::Config cfg;
    cfg.eal.lcores = o_.lcores;
    cfg.eal.main_lcore = o_.lcores.front();
    cfg.eal.memory_mb = o_.memory_mb;
    cfg.eal.hugepages = false;
    cfg.eal.file_prefix = session_prefix(o_.tag);
    cfg.eal.extra_args = o_.extra_args;
    pmd::log_configure(o_.log_level, "");
    std::string error;
    ASSERT_TRUE(pmd::eal_init(cfg, o_.tag, &error)) << error;
    session_pool() =
        pmd::PacketPool::create(o_.tag + "_pool", o_.mbufs, o_.mbuf_cache,
                                pmd::PacketPool::data_room_for_mtu(1500), SOCKET_ID_ANY, &error);
    ASSERT_TRUE(session_pool()) << error;
  }

  void TearDown() override {
    if (session_pool() && o_.check_leaks) {
      EXPECT_EQ(session_pool()->available(), o_.mbufs) << "mbufs not returned to the pool";
    }
    session_pool().reset();
    const std::string runtime_dir = rte_eal_get_runtime_dir();
    pmd::eal_cleanup();
    // EAL leaves its runtime folder (/var/run/dpdk/PREFIX as root) behind; this process made it.
    if (runtime_dir.find(session_prefix(o_.tag)) != std::string::npos) {
      std::error_code ec;
      std::filesystem::remove_all(runtime_dir, ec);
    }
  }

 private:
  EalSessionOptions o_;
};

}  // namespace rocedp::test
