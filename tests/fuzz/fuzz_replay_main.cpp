// Replay driver for fuzz targets built without libFuzzer: feeds LLVMFuzzerTestOneInput every seed
// input and a fixed number of deterministic mutations of each (bit flips, byte stores,
// truncation, insertion, deletion, chunk duplication). Not a coverage-guided fuzzer; it keeps
// the targets' properties checked in every test run. Usage:
//   fuzz_X [--mutations N] [--seed S] [--slice OFF:LEN] SEED...
// A SEED is a file, a directory of files, or a .pcap whose frames are inputs (optionally cut
// to bytes OFF..OFF+LEN of each frame, e.g. the MAD inside a QP1 frame).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "dataplane/wire/pcap_io.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

using Input = std::vector<uint8_t>;

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

bool load(const std::filesystem::path& p, size_t off, size_t len, std::vector<Input>& seeds) {
  if (std::filesystem::is_directory(p)) {
    for (const auto& e : std::filesystem::directory_iterator(p))
      if (e.is_regular_file() && !load(e.path(), off, len, seeds)) return false;
    return true;
  }
  if (p.extension() == ".pcap") {
    rocedp::wire::PcapReader r;
    if (!r.open(p.string())) {
      std::fprintf(stderr, "%s: %s\n", p.c_str(), r.error().c_str());
      return false;
    }
    rocedp::wire::PcapFrame f;
    while (r.next(f)) {
      if (f.data.size() <= off) continue;
      const size_t take = std::min(len, f.data.size() - off);
      seeds.emplace_back(f.data.begin() + static_cast<long>(off),
                         f.data.begin() + static_cast<long>(off + take));
    }
    return true;
  }
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "%s: cannot read\n", p.c_str());
    return false;
  }
  seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned mutations = 200;
  uint64_t rng = 1;
  size_t off = 0, len = SIZE_MAX;
  std::vector<Input> seeds;
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
    } else if (!load(a, off, len, seeds)) {
      return 2;
    }
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "usage: %s [--mutations N] [--seed S] [--slice OFF:LEN] SEED...\n",
                 argv[0]);
    return 2;
  }
  size_t runs = 0;
  for (const Input& s : seeds) {
    LLVMFuzzerTestOneInput(s.data(), s.size());
    ++runs;
    for (unsigned m = 0; m < mutations; ++m, ++runs) {
      const Input x = mutate(s, rng);
      LLVMFuzzerTestOneInput(x.data(), x.size());
    }
  }
  std::printf("%zu inputs from %zu seeds: no property failed\n", runs, seeds.size());
  return 0;
}
