// EAL from the configuration with hugepages (the other EAL tests prove --no-huge). Needs root:
// reserves 2 MiB pages through sysfs (the old count is restored afterwards, also on failure),
// mounts a private hugetlbfs if none is mounted, and skips if the kernel gives no pages.

#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_memory.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "pmd/eal.hpp"
#include "pmd/log.hpp"
#include "pmd/packet_pool.hpp"
#include "tests/common/runtime_dir.hpp"

namespace rocedp::pmd {
namespace {

constexpr const char* kNrHugepages = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
constexpr const char* kFreeHugepages = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages";
constexpr long kPagesWanted = 96;  // 192 MiB: EAL -m 128 plus slack

long read_long(const char* path) {
  std::ifstream in(path);
  long v = -1;
  in >> v;
  return in ? v : -1;
}

bool write_long(const char* path, long v) {
  std::ofstream out(path);
  out << v << "\n";
  out.flush();
  return static_cast<bool>(out);
}

std::string existing_2m_hugetlbfs() {
  std::ifstream in("/proc/mounts");
  std::string dev, dir, type, opts, rest;
  while (in >> dev >> dir >> type >> opts && std::getline(in, rest)) {
    if (type == "hugetlbfs" && (opts.find("pagesize=2M") != std::string::npos ||
                                opts.find("pagesize=") == std::string::npos)) {
      return dir;
    }
  }
  return "";
}

// Everything the test changed on the machine, undone in reverse order whatever happens.
struct HugepageReservation {
  long old_pages = -1;
  std::string mount_dir;  // non-empty when we mounted it
  ~HugepageReservation() {
    if (!mount_dir.empty()) {
      if (::umount2(mount_dir.c_str(), 0) != 0) ::umount2(mount_dir.c_str(), MNT_DETACH);
      std::error_code ec;
      std::filesystem::remove(mount_dir, ec);
    }
    if (old_pages >= 0) write_long(kNrHugepages, old_pages);
  }
};

TEST(EalHugepages, StartsOnReservedTwoMegabytePagesAndServesPoolsFromThem) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to reserve hugepages";
  HugepageReservation r;
  r.old_pages = read_long(kNrHugepages);
  if (r.old_pages < 0) GTEST_SKIP() << "no 2 MiB hugepage support (" << kNrHugepages << ")";
  if (!write_long(kNrHugepages, r.old_pages + kPagesWanted) ||
      read_long(kFreeHugepages) < kPagesWanted) {
    GTEST_SKIP() << "the kernel could not reserve " << kPagesWanted << " 2 MiB pages (free "
                 << read_long(kFreeHugepages) << ")";
  }
  std::string huge_dir = existing_2m_hugetlbfs();
  if (huge_dir.empty()) {
    std::string dir = "/tmp/rocedp-huge-" + std::to_string(getpid());
    std::filesystem::create_directories(dir);
    if (::mount("nodev", dir.c_str(), "hugetlbfs", 0, "pagesize=2M") != 0) {
      std::filesystem::remove(dir);
      GTEST_SKIP() << "cannot mount hugetlbfs on " << dir;
    }
    r.mount_dir = dir;
    huge_dir = dir;
  }

  config::Config cfg;
  cfg.eal.lcores = {0};
  cfg.eal.main_lcore = 0;
  cfg.eal.hugepages = true;
  cfg.eal.memory_mb = 128;
  cfg.eal.file_prefix = "rocedp-pmdtest-huge-" + std::to_string(getpid());
  // --huge-unlink: no rtemap files outlive the process, so the pages return to the kernel.
  cfg.eal.extra_args = {"--no-pci", "--no-telemetry", "--huge-dir", huge_dir, "--huge-unlink"};
  log_configure(LogLevel::kWarning, "");
  std::string error;
  ASSERT_TRUE(eal_init(cfg, "pmd-huge-test", &error)) << error;
  EXPECT_TRUE(eal_initialised());
  EXPECT_EQ(rte_eal_has_hugepages(), 1);
  EXPECT_LT(read_long(kFreeHugepages), kPagesWanted) << "EAL took no hugepage";

  {
    auto pool = PacketPool::create("huge_pool", 4095, 128, PacketPool::data_room_for_mtu(1500),
                                   SOCKET_ID_ANY, &error);
    ASSERT_TRUE(pool) << error;
    rte_mbuf* m = rte_pktmbuf_alloc(pool->get());
    ASSERT_NE(m, nullptr);
    const rte_memseg* seg = rte_mem_virt2memseg(rte_pktmbuf_mtod(m, void*), nullptr);
    ASSERT_NE(seg, nullptr);
    EXPECT_EQ(seg->hugepage_sz, RTE_PGSIZE_2M) << "the mbuf is not on a 2 MiB page";
    rte_pktmbuf_free(m);
    EXPECT_EQ(pool->available(), 4095u);
  }
  eal_cleanup();
  EXPECT_FALSE(eal_initialised());
  test::remove_runtime_dir(cfg.eal.file_prefix);
}

TEST(EalInit, RunsOncePerProcess) {
  config::Config cfg;
  cfg.eal.lcores = {0};
  cfg.eal.main_lcore = 0;
  cfg.eal.file_prefix = "rocedp-pmdtest-once-" + std::to_string(getpid());
  cfg.eal.extra_args = {"--no-pci", "--no-telemetry"};
  std::string error;
  // Whether or not the hugepage test ran, at most the first of these calls can succeed.
  bool first = eal_init(cfg, "pmd-once-test", &error);
  EXPECT_FALSE(eal_init(cfg, "pmd-once-test", &error));
  EXPECT_NE(error.find("already initialised"), std::string::npos) << error;
  if (first) eal_cleanup();
  test::remove_runtime_dir(cfg.eal.file_prefix);
}

}  // namespace
}  // namespace rocedp::pmd
