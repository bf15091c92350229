#pragma once
// Every fuzz target defines the libFuzzer entry point. Built with clang and ROCEDP_FUZZ=ON the
// binaries are real coverage-guided fuzzers (scripts/fuzz.sh); otherwise fuzz_replay_main.cpp
// drives the same entry point over seed inputs and deterministic mutations of them, so the
// targets run in every ctest pass (and under ASan+UBSan in scripts/test.sh).

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// A script input read byte by byte; 0 once it is used up.
struct Script {
  const uint8_t* p;
  size_t n;
  bool more() const { return n > 0; }
  uint8_t next() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
};

// A property a target checks failed: stop loudly so the fuzzer records the input.
#define FUZZ_CHECK(cond)  \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)
