// Header build and parse in ns per packet.
//  * BM_WriteHeaders: Ethernet+IPv4(+checksum)+UDP+BTH+RETH into mbuf-like
//    headroom (the data path's entry point), baseline BM_CopyHeaderTemplate =
//    memcpy of a prebuilt 70-byte header (what a template-patching design costs).
//  * BM_BuildFrame / BM_ParseFrame: a whole 256-byte-payload WRITE_FIRST,
//    ICRC included, and parse with ICRC and IP checksum verification;
//    BM_ParseFrameNoIcrc shows what the checks cost.

#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "dataplane/wire/builder.hpp"
#include "dataplane/wire/parser.hpp"
#include "dataplane/wire/psn.hpp"

namespace {

using namespace rocedp::wire;

PacketFields sample() {
  PacketFields f;
  f.eth.dst = {2, 0, 0, 0, 0, 0x0b};
  f.eth.src = {2, 0, 0, 0, 0, 0x0c};
  f.ip.src = 0xC612000C;
  f.ip.dst = 0xC612000B;
  f.udp.src_port = 49762;
  f.bth.opcode = opcode::kRcWriteFirst;
  f.bth.dqpn = 0x11;
  f.reth = {0x55d1c8455d50, 0x526, 4096};
  return f;
}

void BM_WriteHeaders(benchmark::State& state) {
  PacketFields f = sample();
  alignas(64) std::uint8_t headroom[128];
  std::uint32_t psn = 0;
  for (auto _ : state) {
    f.bth.psn = psn = psn_next(psn);
    benchmark::DoNotOptimize(write_headers(headroom, f, 1024).headers.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_CopyHeaderTemplate(benchmark::State& state) {
  const PacketFields f = sample();
  alignas(64) std::uint8_t tmpl[128];
  const std::size_t n = write_headers(tmpl, f, 1024).headers.size();
  alignas(64) std::uint8_t headroom[128];
  for (auto _ : state) {
    std::memcpy(headroom + sizeof headroom - n, tmpl + sizeof tmpl - n, n);
    benchmark::DoNotOptimize(headroom);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_BuildFrame(benchmark::State& state) {
  PacketFields f = sample();
  std::vector<std::uint8_t> payload(256, 0x5A);
  std::vector<std::uint8_t> out(frame_len(f, payload.size()));
  for (auto _ : state) {
    f.bth.psn = psn_next(f.bth.psn);
    benchmark::DoNotOptimize(build_frame(out, f, payload));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

template <bool kVerify>
void parse_bench(benchmark::State& state) {
  PacketFields f = sample();
  std::vector<std::uint8_t> payload(256, 0x5A);
  std::vector<std::uint8_t> frame(frame_len(f, payload.size()));
  build_frame(frame, f, payload);
  ParseOptions o;
  o.verify_icrc = kVerify;
  o.verify_ip_checksum = kVerify;
  ParsedPacket p;
  for (auto _ : state) {
    benchmark::DoNotOptimize(parse(frame, p, o));
    benchmark::DoNotOptimize(p.f.bth.psn);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
void BM_ParseFrame(benchmark::State& state) {
  parse_bench<true>(state);
}
void BM_ParseFrameNoIcrc(benchmark::State& state) {
  parse_bench<false>(state);
}

BENCHMARK(BM_WriteHeaders);
BENCHMARK(BM_CopyHeaderTemplate);
BENCHMARK(BM_BuildFrame);
BENCHMARK(BM_ParseFrame);
BENCHMARK(BM_ParseFrameNoIcrc);

}  // namespace

BENCHMARK_MAIN();
