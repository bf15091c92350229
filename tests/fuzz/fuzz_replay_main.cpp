// Replay driver for fuzz targets built without libFuzzer: feeds LLVMFuzzerTestOneInput every seed
// input and a fixed number of deterministic mutations of each (bit flips, byte stores,
// truncation, insertion, deletion, chunk duplication). Not a coverage-guided fuzzer; it keeps
// the targets' properties checked in every test run. Usage:
//   fuzz_X [--mutations N] [--seed S] [--slice OFF:LEN] SEED...
// A SEED is a file, a directory of files, or a .pcap whose frames are inputs (optionally cut
// to bytes OFF..OFF+LEN of each frame, e.g. the MAD inside a QP1 frame). A directory's files are
// taken in name order, so a run's mutations are the same on every machine. When a property fails
// (abort) or a sanitizer reports, the driver names the seed and the mutation and writes the input
// to fuzz-failure-TARGET.bin in the working directory, for the target to be run on alone.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "dataplane/wire/pcap_io.hpp"
#include "tests/fuzz/fuzz_target.hpp"

// Set by a sanitizer runtime when one is linked: called before it ends the process.
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace {

using Input = std::vector<uint8_t>;

// The input under test, for the failure report (read from a signal handler: plain data only).
struct Current {
  const uint8_t* data = nullptr;
  size_t size = 0;
  char where[512] = {};
  char file[256] = {};
} g_current;

void write_all(int fd, const void* p, size_t n) {
  const auto* b = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = write(fd, b, n);
    if (w <= 0) return;
    b += w;
    n -= static_cast<size_t>(w);
  }
}

// Async-signal-safe: write() and open() only.
void report_failure() {
  static const char kHead[] = "fuzz replay: failed on ";
  write_all(2, kHead, sizeof kHead - 1);
  write_all(2, g_current.where, strlen(g_current.where));
  const int fd = open(g_current.file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    write_all(fd, g_current.data, g_current.size);
    close(fd);
    static const char kSaved[] = "; the input is in ";
    write_all(2, kSaved, sizeof kSaved - 1);
    write_all(2, g_current.file, strlen(g_current.file));
  }
  write_all(2, "\n", 1);
}

void on_abort(int) {
  report_failure();
  signal(SIGABRT, SIG_DFL);
  raise(SIGABRT);
}

void run_one(const Input& x, const std::string& seed, unsigned mutation) {
  g_current.data = x.data();
  g_current.size = x.size();
  if (mutation == 0)
    std::snprintf(g_current.where, sizeof g_current.where, "seed %s", seed.c_str());
  else
    std::snprintf(g_current.where, sizeof g_current.where, "mutation %u of seed %s", mutation,
                  seed.c_str());
  LLVMFuzzerTestOneInput(x.data(), x.size());
}

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Input mutate(const Input& in, uint64_t& rng) {
  Input out = in;
  const unsigned steps = 1 + splitmix(rng) % 4;
  for (unsigned i = 0; i < steps; ++i) {
    const size_t n = out.size();
    const size_t at = n ? splitmix(rng) % n : 0;
    switch (splitmix(rng) % 6) {
      case 0:
        if (n) out[at] ^= static_cast<uint8_t>(1u << (splitmix(rng) % 8));
        break;
      case 1:
        if (n) out[at] = static_cast<uint8_t>(splitmix(rng));
        break;
      case 2:
        out.resize(n ? splitmix(rng) % n : 0);
        break;
      case 3:
        out.insert(out.begin() + static_cast<long>(at), static_cast<uint8_t>(splitmix(rng)));
        break;
      case 4:
        if (n) out.erase(out.begin() + static_cast<long>(at));
        break;
      case 5: {
        const size_t len = n ? 1 + splitmix(rng) % std::min<size_t>(n - at, 16) : 0;
        Input chunk(out.begin() + static_cast<long>(at), out.begin() + static_cast<long>(at + len));
        out.insert(out.begin() + static_cast<long>(splitmix(rng) % (n + 1)), chunk.begin(),
                   chunk.end());
        break;
      }
    }
  }
  return out;
}

bool load(const std::filesystem::path& p, size_t off, size_t len, std::vector<Input>& seeds,
          std::vector<std::string>& names) {
  if (std::filesystem::is_directory(p)) {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(p))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files)
      if (!load(f, off, len, seeds, names)) return false;
    return true;
  }
  if (p.extension() == ".pcap") {
    rocedp::wire::PcapReader r;
    if (!r.open(p.string())) {
      std::fprintf(stderr, "%s: %s\n", p.c_str(), r.error().c_str());
      return false;
    }
    rocedp::wire::PcapFrame f;
    for (size_t frame = 1; r.next(f); ++frame) {
      if (f.data.size() <= off) continue;
      const size_t take = std::min(len, f.data.size() - off);
      seeds.emplace_back(f.data.begin() + static_cast<long>(off),
                         f.data.begin() + static_cast<long>(off + take));
      names.push_back(p.string() + " frame " + std::to_string(frame));
    }
    return true;
  }
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "%s: cannot read\n", p.c_str());
    return false;
  }
  seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  names.push_back(p.string());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned mutations = 200;
  uint64_t rng = 1;
  size_t off = 0, len = SIZE_MAX;
  std::vector<Input> seeds;
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mutations" && i + 1 < argc) {
      mutations = static_cast<unsigned>(std::stoul(argv[++i]));
    } else if (a == "--seed" && i + 1 < argc) {
      rng = std::stoull(argv[++i]);
    } else if (a == "--slice" && i + 1 < argc) {
      const std::string s = argv[++i];
      off = std::stoul(s.substr(0, s.find(':')));
      len = std::stoul(s.substr(s.find(':') + 1));
    } else if (!load(a, off, len, seeds, names)) {
      return 2;
    }
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "usage: %s [--mutations N] [--seed S] [--slice OFF:LEN] SEED...\n",
                 argv[0]);
    return 2;
  }
  std::snprintf(g_current.file, sizeof g_current.file, "fuzz-failure-%s.bin",
                std::filesystem::path(argv[0]).filename().c_str());
  signal(SIGABRT, on_abort);
  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(report_failure);
  size_t runs = 0;
  for (size_t i = 0; i < seeds.size(); ++i) {
    run_one(seeds[i], names[i], 0);
    ++runs;
    for (unsigned m = 1; m <= mutations; ++m, ++runs) run_one(mutate(seeds[i], rng), names[i], m);
  }
  std::printf("%zu inputs from %zu seeds: no property failed\n", runs, seeds.size());
  return 0;
}
