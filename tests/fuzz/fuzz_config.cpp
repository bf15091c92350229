// Fuzzes the YAML configuration parser. Property: any input yields a Config or a ConfigError
// that names a position; nothing else escapes, nothing hangs (yaml-cpp 0.7 LoadAll once did).
#include <string>

#include "config/config.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    rocedp::config::parse(text, "fuzz.yaml");
  } catch (const rocedp::config::ConfigError& e) {
    FUZZ_CHECK(!e.reason().empty());
  }
  return 0;
}
