// pcap write -> read through libpcap keeps frames and order; bad files fail.
#include "dataplane/wire/pcap_io.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace rocedp::wire {
namespace {

struct TempPath {
  TempPath() {
    char tmpl[] = "/tmp/rocedp-pcap-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd >= 0) close(fd);
    path = tmpl;
  }
  ~TempPath() { std::remove(path.c_str()); }
  std::string path;
};

TEST(PcapIo, WriteThenReadBack) {
  TempPath t;
  {
    PcapWriter w;
    ASSERT_TRUE(w.open(t.path)) << w.error();
    for (std::uint8_t i = 0; i < 5; ++i) {
      std::vector<std::uint8_t> fr(60 + i, i);
      w.write(fr);
    }
  }
  std::vector<PcapFrame> frames;
  std::string err;
  ASSERT_TRUE(read_pcap(t.path, frames, err)) << err;
  ASSERT_EQ(frames.size(), 5u);
  for (std::uint8_t i = 0; i < 5; ++i) {
    EXPECT_EQ(frames[i].data.size(), 60u + i);
    EXPECT_EQ(frames[i].data[0], i);
    EXPECT_EQ(frames[i].orig_len, 60u + i);
  }
  EXPECT_LT(frames[0].ts_usec, frames[1].ts_usec);
}

TEST(PcapIo, MissingOrGarbageFileFails) {
  std::vector<PcapFrame> frames;
  std::string err;
  EXPECT_FALSE(read_pcap("/nonexistent/rocedp.pcap", frames, err));
  EXPECT_FALSE(err.empty());
  TempPath t;
  std::ofstream(t.path) << "this is not a pcap file at all";
  err.clear();
  EXPECT_FALSE(read_pcap(t.path, frames, err));
  EXPECT_FALSE(err.empty());
}

}  // namespace
}  // namespace rocedp::wire
