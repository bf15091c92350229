// Fuzzes the CM MAD decoder with MAD-sized inputs given at their exact length.
// Property: decoding never reads outside the MAD, and whatever decodes can be encoded again.
#include <array>
#include <cstring>
#include <vector>

#include "dataplane/wire/cm_messages.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rocedp::wire;
  std::vector<uint8_t> mad(data, data + size);  // exact size: the decoder must check it
  CmMad m;
  if (decode_cm_mad(Bytes(mad.data(), mad.size()), m) != CmDecodeStatus::kOk) return 0;
  auto again = encode_cm_mad(m);
  CmMad m2;
  FUZZ_CHECK(decode_cm_mad(Bytes(again.data(), again.size()), m2) == CmDecodeStatus::kOk);
  return 0;
}
