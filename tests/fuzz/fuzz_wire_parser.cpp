// Fuzzes the RoCEv2 parser with whole frames. Properties: no read past the frame (ASan), and a
// frame the parser accepts is one the builder reproduces byte for byte (up to an Ethernet
// trailer), except the pad bytes: senders write zeros and receivers ignore them (IBTA 9.2.1.4). A
// mutated frame almost never keeps a valid ICRC or IPv4 checksum, so the input is parsed twice: as
// given, and with both checks off (as behind a NIC that verified them), which lets mutations reach
// every later check and the builder.
#include <cstring>
#include <vector>

#include "dataplane/wire/builder.hpp"
#include "dataplane/wire/parser.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

void check(const std::vector<uint8_t>& frame, const rocedp::wire::ParseOptions& po) {
  using namespace rocedp::wire;
  ParsedPacket p;
  if (parse(Bytes(frame.data(), frame.size()), p, po) != DropReason::kNone) return;
  std::vector<uint8_t> out(frame.size() + 64);
  BuildOptions bo;
  bo.fill_icrc = false;  // keep the stored ICRC, which may be wrong when checks are off
  bo.icrc = p.icrc;
  bo.fill_ip_checksum = po.verify_ip_checksum;
  const size_t n = build_frame(MutBytes(out.data(), out.size()), p.f, p.payload(), bo);
  FUZZ_CHECK(n == p.l3_end);
  const size_t pad_at = p.payload_offset + p.payload_len;
  std::memcpy(out.data() + pad_at, frame.data() + pad_at, p.f.bth.pad);
  FUZZ_CHECK(std::memcmp(out.data(), frame.data(), n) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exact-size copy, so ASan sees any read past the end of the frame.
  const std::vector<uint8_t> frame(data, data + size);
  check(frame, {});
  check(frame, {.verify_ip_checksum = false, .verify_icrc = false});
  return 0;
}
