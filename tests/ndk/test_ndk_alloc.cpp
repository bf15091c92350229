// The per-packet path allocates nothing. This binary counts every operator new
// (dataplane/alloc_counter.hpp); after a warm-up, thousands of mixed operations (posts, engine
// and CQ polling on both adapters' cores, completions, control polling) run with the count
// unchanged.

#include <execinfo.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "dataplane/alloc_counter.hpp"
#include "tests/ndk/ndk_traffic.hpp"

ROCEDP_DEFINE_ALLOC_COUNTER()

namespace rocedp::test {
namespace {

class NdkAlloc : public TrafficFixture {
 protected:
  void TearDown() override {
    close_pairs();
    TrafficFixture::TearDown();
  }
};

TEST_F(NdkAlloc, SteadyTrafficMakesNoAllocation) {
  make_pairs(2);
  ASSERT_EQ(run(2'000, std::chrono::seconds(300)),
            "");  // warm-up: rings, caches, lazily sized state
  // ROCEDP_ALLOC_TRACE=1 prints a backtrace of every allocation made during the measured run.
  if (std::getenv("ROCEDP_ALLOC_TRACE") != nullptr) {
    debug::alloc_hook() = [](std::size_t) {
      static thread_local bool inside = false;
      if (inside) return;
      inside = true;
      void* frames[16];
      backtrace_symbols_fd(frames, backtrace(frames, 16), 2);
      inside = false;
    };
  }
  const uint64_t before = debug::alloc_count();
  const std::string err = run(12'000, std::chrono::seconds(300));
  const uint64_t after = debug::alloc_count();
  debug::alloc_hook() = nullptr;
  ASSERT_EQ(err, "");
  EXPECT_EQ(after - before, 0u) << "allocations during 20,000 operations";
  // The counter itself works: one allocation is seen.
  auto probe = std::make_unique<int>(1);
  EXPECT_EQ(debug::alloc_count(), after + 1);
}

}  // namespace
}  // namespace rocedp::test
