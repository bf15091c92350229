#pragma once
// Every fuzz target defines the libFuzzer entry point. Built with clang and ROCEDP_FUZZ=ON the
// binaries are real coverage-guided fuzzers (scripts/fuzz.sh); otherwise fuzz_replay_main.cpp
// drives the same entry point over seed inputs and deterministic mutations of them, so the
// targets run in every ctest pass (and under ASan+UBSan in scripts/test.sh).

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// A property a target checks failed: stop loudly so the fuzzer records the input.
#define FUZZ_CHECK(cond)  \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)
