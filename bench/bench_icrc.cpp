// ICRC throughput (IBTA Annex A17 masking included) side by side with its two
// baselines over the same bytes: ISA-L's bare crc32_gzip_refl (the ceiling,
// target >= 85%) and memcpy (what touching the bytes once costs).
// Size = bytes the ICRC covers: IPv4 header .. pad of one RoCEv2 packet.

#include <benchmark/benchmark.h>
#include <isa-l/crc.h>

#include <cstring>
#include <vector>

#include "dataplane/wire/builder.hpp"
#include "dataplane/wire/icrc.hpp"

namespace {

using namespace rocedp::wire;

// A RDMA WRITE_FIRST whose ICRC-covered part is exactly `covered` bytes.
std::vector<std::uint8_t> make_packet(std::size_t covered, std::size_t& l3_off) {
  PacketFields f;
  f.bth.opcode = opcode::kRcWriteFirst;
  f.bth.dqpn = 0x11;
  f.ip.src = 0xC612000C;
  f.ip.dst = 0xC612000B;
  const std::size_t hdr = f.ip.header_len() + kUdpHdrLen + kBthLen + kRethLen;  // 56
  const std::size_t payload = covered > hdr ? covered - hdr : 0;
  std::vector<std::uint8_t> pl(payload, 0xA5);
  std::vector<std::uint8_t> out(frame_len(f, payload));
  build_frame(out, f, pl);
  l3_off = f.eth.header_len();
  return out;
}

// Runs `crc(p, n)` over the ICRC-covered n bytes of a packet (n: the benchmark's argument) for
// as long as the state asks; counts n bytes an iteration.
template <class Crc>
void time_crc(benchmark::State& state, Crc crc) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::size_t l3 = 0;
  const auto pkt = make_packet(n, l3);
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc(pkt.data() + l3, n));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

void BM_Icrc(benchmark::State& state) {
  time_crc(state, [](const std::uint8_t* p, std::size_t n) { return icrc_compute(Bytes(p, n)); });
}

void BM_Crc32GzipRefl(benchmark::State& state) {
  time_crc(state, [](const std::uint8_t* p, std::size_t n) { return crc32_gzip_refl(0, p, n); });
}

// The CRC of long runs in 256-bit registers (what icrc_compute and the RC frames' payloads take
// instead of crc32_gzip_refl where the CPU has VPCLMULQDQ but not AVX-512).
void BM_CrcLong256(benchmark::State& state) {
  if (!detail::crc_long256_available()) {
    state.SkipWithError("this CPU has no VPCLMULQDQ");
    return;
  }
  time_crc(state, [](const std::uint8_t* p, std::size_t n) {
    return detail::crc32_long256(0, Bytes(p, n));
  });
}

void BM_Memcpy(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::size_t l3 = 0;
  const auto pkt = make_packet(n, l3);
  std::vector<std::uint8_t> dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), pkt.data() + l3, n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

// The RC engine's ICRC (icrc_plain_ipv4) on its two SIMD paths, over whole frames as the
// engine has them: 44 bytes is an ACK, 120 a 64-byte WRITE ONLY, 248 the 512-bit path's longest.
template <bool kWide>
void BM_IcrcPlain(benchmark::State& state) {
  if (kWide && !detail::icrc_wide_available()) {
    state.SkipWithError("this CPU has no AVX-512 VPCLMULQDQ");
    return;
  }
  time_crc(state, [](const std::uint8_t* p, std::size_t n) {
    return kWide ? detail::icrc_plain_ipv4_wide(p, n) : detail::icrc_plain_ipv4_narrow(p, n);
  });
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK_TEMPLATE(BM_IcrcPlain, true)->Arg(44)->Arg(120)->Arg(248);
BENCHMARK_TEMPLATE(BM_IcrcPlain, false)->Arg(44)->Arg(120)->Arg(248);

BENCHMARK(BM_Icrc)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096);
BENCHMARK(BM_Crc32GzipRefl)->Arg(64)->Arg(256)->Arg(512)->Arg(1024)->Arg(4096);
BENCHMARK(BM_CrcLong256)->Arg(256)->Arg(512)->Arg(1024)->Arg(4096);
BENCHMARK(BM_Memcpy)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096);

}  // namespace

BENCHMARK_MAIN();
