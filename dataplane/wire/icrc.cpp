#include "dataplane/wire/icrc.hpp"

#include <isa-l/crc.h>

#include <immintrin.h>

#include <array>
#include <atomic>
#include <cstring>
#include <vector>

#include "dataplane/wire/bth.hpp"
#include "dataplane/wire/ipv4.hpp"
#include "dataplane/wire/ipv6.hpp"
#include "dataplane/wire/udp.hpp"

namespace rocedp::wire {

namespace {
constexpr std::size_t kMaxPrefix = kIpv4MaxHdrLen + kUdpHdrLen + kBthLen;
static_assert(kMaxPrefix >= kIpv6HdrLen + kUdpHdrLen + kBthLen);

// Sets the variant fields of the prefix to 1s. `ip_len` is the IP header length.
inline void mask_prefix(std::uint8_t* b, std::size_t ip_len, bool ipv6) {
  if (ipv6) {
    b[0] |= 0x0F;  // traffic class, high nibble of the byte after version
    b[1] = 0xFF;   // traffic class low nibble + flow label
    b[2] = 0xFF;
    b[3] = 0xFF;
    b[7] = 0xFF;  // hop limit
  } else {
    b[ipv4_off::kTos] = 0xFF;
    b[ipv4_off::kTtl] = 0xFF;
    b[ipv4_off::kChecksum] = 0xFF;
    b[ipv4_off::kChecksum + 1] = 0xFF;
  }
  b[ip_len + udp_off::kChecksum] = 0xFF;
  b[ip_len + udp_off::kChecksum + 1] = 0xFF;
  b[ip_len + kUdpHdrLen + bth_off::kResv8a] = 0xFF;
}

inline std::size_t ip_header_len(Bytes l3, bool& ipv6) {
  if (l3.empty()) return 0;
  const std::uint8_t ver = l3[0] >> 4;
  ipv6 = ver == 6;
  if (ver == 6) return kIpv6HdrLen;
  if (ver == 4) return std::size_t{l3[0] & 0x0Fu} * 4;
  return 0;
}

// ---- Fast path: CRC the unmasked bytes in one pass, then correct. ----
// CRC-32 is affine: for equal-length A, B and any seed,
//   crc(seed, A) ^ crc(seed, B) == lin(A ^ B)
// where lin() is the CRC register run from 0 without inversions. The masked
// packet differs from the real one only in four 32-bit words of the prefix
// (IP bytes 0-3 and 8-11, UDP bytes 4-7, BTH bytes 4-7), so
//   ICRC = crc(seed, packet as is) ^ sum_w lin(delta_w followed by the rest).
// lin(word w at offset o of an N-byte message) = w * x^(8(N-o)) mod P, a
// carry-less multiplication (PCLMULQDQ) plus a 4-byte table reduction. This
// keeps ISA-L's one long call over the whole buffer (no small dependent call,
// no store-forwarding stall on a masked copy) and does the correction off the
// critical path. Polynomials are in zlib's reflected form: bit 31 is x^0.

constexpr std::uint32_t kPolyRefl = 0xEDB88320;

constexpr std::array<std::uint32_t, 256> make_byte_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (kPolyRefl & (0u - (c & 1u)));
    t[i] = c;
  }
  return t;
}
constexpr std::array<std::uint32_t, 256> kByteTable = make_byte_table();

// v * x^8 mod P: the CRC register after one zero byte.
constexpr std::uint32_t mul_x8(std::uint32_t v) {
  return (v >> 8) ^ kByteTable[v & 0xFF];
}
constexpr std::uint32_t mul_x32_steps(std::uint32_t v) {
  return mul_x8(mul_x8(mul_x8(mul_x8(v))));
}
// v * x^32 mod P with four independent lookups (slicing): one byte of v each.
constexpr std::array<std::array<std::uint32_t, 256>, 4> make_x32_tables() {
  std::array<std::array<std::uint32_t, 256>, 4> t{};
  for (std::uint32_t j = 0; j < 4; ++j)
    for (std::uint32_t b = 0; b < 256; ++b) t[j][b] = mul_x32_steps(b << (8 * j));
  return t;
}
constexpr auto kX32 = make_x32_tables();
constexpr std::uint32_t mul_x32(std::uint32_t v) {
  return kX32[0][v & 0xFF] ^ kX32[1][(v >> 8) & 0xFF] ^ kX32[2][(v >> 16) & 0xFF] ^
         kX32[3][v >> 24];
}
static_assert(mul_x32(0x12345678) == mul_x32_steps(0x12345678));

// a * b mod P, bit by bit (constexpr tables, fallback without PCLMULQDQ).
constexpr std::uint32_t mulmod_bitwise(std::uint32_t a, std::uint32_t b) {
  std::uint32_t p = 0;
  for (std::uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if (a & m) p ^= b;
    b = (b & 1) ? (b >> 1) ^ kPolyRefl : b >> 1;  // b *= x
  }
  return p;
}

constexpr std::size_t kPowStep = 128;  // X[k] = kPowHi[k / 128] * kPowLo[k % 128]
constexpr std::size_t kPowMaxBytes = kPowStep * kPowStep;
struct PowTables {
  std::array<std::uint32_t, kPowStep> lo{};  // x^(8j)
  std::array<std::uint32_t, kPowStep> hi{};  // x^(8*128*i)
};
constexpr PowTables make_pow_tables() {
  PowTables t;
  std::uint32_t v = 1u << 31;  // x^0
  for (std::size_t j = 0; j < kPowStep; ++j) {
    t.lo[j] = v;
    v = mul_x8(v);
  }
  const std::uint32_t step = v;  // x^(8*128)
  std::uint32_t h = 1u << 31;
  for (std::size_t i = 0; i < kPowStep; ++i) {
    t.hi[i] = h;
    h = mulmod_bitwise(h, step);
  }
  return t;
}
constexpr PowTables kPow = make_pow_tables();

__attribute__((target("pclmul,sse4.1"))) inline std::uint32_t mulmod_clmul(std::uint32_t a,
                                                                           std::uint32_t b) {
  const __m128i r = _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(a)),
                                         _mm_cvtsi32_si128(static_cast<int>(b)), 0x00);
  const std::uint64_t v = static_cast<std::uint64_t>(_mm_cvtsi128_si64(r))
                          << 1;  // bit t <-> x^(63-t)
  return static_cast<std::uint32_t>(v >> 32) ^ mul_x32(static_cast<std::uint32_t>(v));
}

// The CPU's features, read where they are needed: by the flags below and by icrc_plain_ipv4's
// resolver, which may run from a static initialiser before these flags are set.
bool cpu_has_pclmul() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1") &&
         __builtin_cpu_supports("ssse3");
}
bool cpu_has_avx() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx");
}
bool cpu_has_vpclmul512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vpclmulqdq") &&
         cpu_has_pclmul();
}
const bool kHavePclmul = cpu_has_pclmul();
const bool kHaveAvx = cpu_has_avx();

// ISA-L's CRC on a CPU with VPCLMULQDQ folds inputs of 256 bytes and more in 512-bit registers
// and returns with their upper halves dirty. Every SSE (non-VEX) instruction after that, in our
// fold, in the payload copies and header writes of the next frame, then pays a transition
// penalty until the state is cleared: on such a CPU a 256-byte WRITE ran at half the rate of a
// 192-byte one, with crc32_gzip_refl and the SSE code around it three to four times slower.
// One VZEROUPPER after the call ends it.
__attribute__((target("avx"))) void clear_upper_vector_state() {
  _mm256_zeroupper();
}

// The masked words of an IPv4 prefix: offsets and masks (little-endian words):
// IP byte 1 (TOS); IP 8 (TTL), 10, 11 (checksum); UDP 6, 7; BTH 4.
constexpr std::uint32_t kWordMask[4] = {0x0000FF00u, 0xFFFF00FFu, 0xFFFF0000u, 0x000000FFu};
#define ROCEDP_IPV4_CORRECTION(MUL)                                              \
  const std::size_t off[4] = {0, 8, ip_len + 4, ip_len + kUdpHdrLen + 4};        \
  const std::size_t last = off[3];                                               \
  const std::size_t k = total - last;                                            \
  const std::uint32_t shift = MUL(kPow.hi[k / kPowStep], kPow.lo[k % kPowStep]); \
  std::uint32_t d = 0;                                                           \
  for (int i = 0; i < 4; ++i)                                                    \
    d ^= MUL(~load_le32(l3 + off[i]) & kWordMask[i], kPow.lo[last - off[i]]);    \
  return MUL(d, shift);

__attribute__((target("pclmul,sse4.1"))) std::uint32_t ipv4_correction_clmul(const std::uint8_t* l3,
                                                                             std::size_t ip_len,
                                                                             std::size_t total){
    ROCEDP_IPV4_CORRECTION(mulmod_clmul)} std::uint32_t
    ipv4_correction_bitwise(const std::uint8_t* l3, std::size_t ip_len, std::size_t total) {
  ROCEDP_IPV4_CORRECTION(mulmod_bitwise)
}
#undef ROCEDP_IPV4_CORRECTION
inline std::uint32_t ipv4_correction(const std::uint8_t* l3, std::size_t ip_len,
                                     std::size_t total) {
  return kHavePclmul ? ipv4_correction_clmul(l3, ip_len, total)
                     : ipv4_correction_bitwise(l3, ip_len, total);
}

// ---- The same correction for the common shape (IPv4 without options), by byte tables. ----
// The seven masked bytes sit at fixed offsets of the 40-byte prefix (IP 20 + UDP 8 + BTH 12).
// kMasked5[j][b] = lin(byte b at offset kPos5[j], zeros up to the end of the prefix), so the
// correction is one multiplication by x^(8(total-40)) of seven XORed lookups instead of five
// multiplications (each with its own reduction). Same result as ipv4_correction (the tests
// compare both against zlib with random values in every masked byte).
constexpr std::size_t kPrefix5 = kIpv4MinHdrLen + kUdpHdrLen + kBthLen;
constexpr std::size_t kPos5[7] = {ipv4_off::kTos,
                                  ipv4_off::kTtl,
                                  ipv4_off::kChecksum,
                                  ipv4_off::kChecksum + 1,
                                  kIpv4MinHdrLen + udp_off::kChecksum,
                                  kIpv4MinHdrLen + udp_off::kChecksum + 1,
                                  kIpv4MinHdrLen + kUdpHdrLen + bth_off::kResv8a};
constexpr std::array<std::array<std::uint32_t, 256>, 7> make_masked5_tables() {
  std::array<std::array<std::uint32_t, 256>, 7> t{};
  for (std::size_t j = 0; j < 7; ++j)
    for (std::uint32_t b = 0; b < 256; ++b)
      t[j][b] = mulmod_bitwise(b, kPow.lo[kPrefix5 - kPos5[j]]);
  return t;
}
constexpr auto kMasked5 = make_masked5_tables();

__attribute__((target("pclmul,sse4.1"))) std::uint32_t ipv4_correction5_clmul(
    const std::uint8_t* l3, std::size_t total) {
  std::uint32_t d = 0;
  for (std::size_t j = 0; j < 7; ++j) d ^= kMasked5[j][static_cast<std::uint8_t>(~l3[kPos5[j]])];
  const std::size_t k = total - kPrefix5;
  const std::uint32_t shift =
      k < kPowStep ? kPow.lo[k] : mulmod_clmul(kPow.hi[k / kPowStep], kPow.lo[k % kPowStep]);
  return mulmod_clmul(d, shift);
}
inline std::uint32_t ipv4_correction_any(const std::uint8_t* l3, std::size_t ip_len,
                                         std::size_t total) {
  if (ip_len == kIpv4MinHdrLen && kHavePclmul) return ipv4_correction5_clmul(l3, total);
  return ipv4_correction(l3, ip_len, total);
}

// The same tables for IPv6 (no extension headers): its 60-byte prefix (IP 40 + UDP 8 + BTH 12)
// masks the low nibble of IP byte 0 (the version stays), IP bytes 1-3 (traffic class and flow
// label), IP 7 (hop limit), UDP 6, 7 and BTH 4.
constexpr std::size_t kPrefix6 = kIpv6HdrLen + kUdpHdrLen + kBthLen;
constexpr std::size_t kPos6[8] = {0,
                                  1,
                                  2,
                                  3,
                                  ipv6_off::kHopLimit,
                                  kIpv6HdrLen + udp_off::kChecksum,
                                  kIpv6HdrLen + udp_off::kChecksum + 1,
                                  kIpv6HdrLen + kUdpHdrLen + bth_off::kResv8a};
constexpr std::uint8_t kByteMask6[8] = {0x0F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
constexpr std::array<std::array<std::uint32_t, 256>, 8> make_masked6_tables() {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  for (std::size_t j = 0; j < 8; ++j)
    for (std::uint32_t b = 0; b < 256; ++b)
      t[j][b] = mulmod_bitwise(b, kPow.lo[kPrefix6 - kPos6[j]]);
  return t;
}
constexpr auto kMasked6 = make_masked6_tables();

__attribute__((target("pclmul,sse4.1"))) std::uint32_t ipv6_correction_clmul(const std::uint8_t* l3,
                                                                             std::size_t total) {
  std::uint32_t d = 0;
  for (std::size_t j = 0; j < 8; ++j)
    d ^= kMasked6[j][static_cast<std::uint8_t>(~l3[kPos6[j]] & kByteMask6[j])];
  const std::size_t k = total - kPrefix6;
  const std::uint32_t shift =
      k < kPowStep ? kPow.lo[k] : mulmod_clmul(kPow.hi[k / kPowStep], kPow.lo[k % kPowStep]);
  return mulmod_clmul(d, shift);
}

// ---- The RC data path's own CRC: PCLMULQDQ folding with the masking done in registers. ----
// Why not only ISA-L here: most data-path frames are one buffer of ~50-170 bytes, where ISA-L's
// crc32_gzip_refl costs ~100 instructions a frame and the receive side adds the masking
// correction above (~60-85 more; callgrind, WRITE 64 B). Folding 16 bytes per step with the
// 8x0xFF prefix and the seven masked bytes ORed into the first three blocks in registers needs
// neither a correction nor a masked copy, and the transmit side no longer writes 1s into the
// frame and back. A long frame gets the masked prefix folded here and the rest from ISA-L (its
// eight accumulators beat one chain of multiplies beyond a few blocks). IPv6 frames of the RC
// data path get the same fold with their own masked prefix (four blocks, icrc_plain_ipv6). ISA-L
// stays the ICRC of everything else (icrc_compute: the codec, chained payload segments). Tested
// against zlib for every length 0..300 and random buffers and against the Soft-RoCE capture
// (tests/wire/test_icrc.cpp, test_rc_rx.cpp).
//
// Representation: a 16-byte block loaded little-endian holds bit k of the stream at bit k of the
// register, the stream's first bit being the highest power of x (zlib's reflected order). A
// 64-bit half a (a_i <-> x^(63-i)) times a constant whose x^d sits at bit 32-d gives the product
// at bit k <-> x^(95-k); read as a 128-bit block (bit k <-> x^(127-k)) that is the product times
// x^32. So folding a block forward by 128 bits multiplies its first half by x^(192-32) and its
// second half by x^(128-32), both mod P; a product shifted left by 4 bytes reads as itself.

// x^n mod P in the reflected form (bit 31 is x^0).
constexpr std::uint32_t xpow_mod(std::uint32_t n) {
  std::uint32_t v = 1u << 31;
  for (std::uint32_t i = 0; i < n; ++i) v = (v >> 1) ^ (kPolyRefl & (0u - (v & 1u)));
  return v;
}
// As a PCLMULQDQ multiplier: x^d at bit 32 - d.
constexpr std::uint64_t clmul_const(std::uint32_t n) {
  return std::uint64_t{xpow_mod(n)} << 1;
}
// Folding forward by 256 bits (two interleaved chains, icrc_ipv4_clmul): x^(320-32), x^(256-32).
constexpr std::uint64_t kFold2First = clmul_const(288), kFold2Second = clmul_const(224);
constexpr std::uint64_t kFoldFirst = clmul_const(160), kFoldSecond = clmul_const(96),
                        kReduce96 = clmul_const(96), kReduce64 = clmul_const(64);
// Barrett's mu = floor(x^64 / P) (33 bits) and P itself, x^d at bit 32 - d.
constexpr std::uint64_t barrett_mu() {
  const std::uint64_t p = (std::uint64_t{1} << 32) | 0x04C11DB7u;  // P in the normal order
  std::uint64_t q = 0;
  unsigned __int128 r = static_cast<unsigned __int128>(1) << 64;
  for (int s = 32; s >= 0; --s) {
    if ((r >> (32 + s)) & 1) {
      q |= std::uint64_t{1} << s;
      r ^= static_cast<unsigned __int128>(p) << s;
    }
  }
  std::uint64_t m = 0;
  for (int d = 0; d <= 32; ++d) m |= ((q >> d) & 1) << (32 - d);
  return m;
}
constexpr std::uint64_t kBarrettMu = barrett_mu();
constexpr std::uint64_t kBarrettP = std::uint64_t{kPolyRefl} << 1;

// pshufb indices for the last partial block (0x80 clears a byte) and a keep-mask.
alignas(16) constexpr std::uint8_t kShuffle[48] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0,    1,    2,    3,    4,    5,    6,    7,    8,    9,    10,   11,   12,   13,   14,   15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};
alignas(16) constexpr std::uint8_t kKeep[32] = {
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};

#define ROCEDP_CLMUL __attribute__((target("pclmul,ssse3,sse4.1")))

ROCEDP_CLMUL inline __m128i load128(const std::uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
ROCEDP_CLMUL inline __m128i fold_constants() {
  return _mm_set_epi64x(static_cast<long long>(kFoldSecond), static_cast<long long>(kFoldFirst));
}
// The same for folding forward by 256 bits (a block of one of two interleaved chains).
ROCEDP_CLMUL inline __m128i fold2_constants() {
  return _mm_set_epi64x(static_cast<long long>(kFold2Second), static_cast<long long>(kFold2First));
}
// The block `a` moved forward by 128 bits (mod P), still 128 bits.
ROCEDP_CLMUL inline __m128i fold128(__m128i a, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11));
}

// Folds the n bytes at p into `a` (the remainder of everything before p); at least 16 bytes
// before p are readable (the last partial block is read as the 16 bytes ending at p + n).
ROCEDP_CLMUL inline __m128i fold_rest(__m128i a, const std::uint8_t* p, std::size_t n) {
  const __m128i k = fold_constants();
  for (const std::uint8_t* end = p + (n & ~std::size_t{15}); p != end; p += 16)
    a = _mm_xor_si128(fold128(a, k), load128(p));
  n &= 15;
  if (n != 0) {
    // a followed by n bytes = (the first n bytes of a) * x^128 + (the rest of a, then the n
    // bytes) as one block.
    const __m128i head = _mm_shuffle_epi8(a, load128(kShuffle + n));
    const __m128i tail = _mm_or_si128(_mm_shuffle_epi8(a, load128(kShuffle + 16 + n)),
                                      _mm_and_si128(load128(p + n - 16), load128(kKeep + n)));
    a = _mm_xor_si128(fold128(head, k), tail);
  }
  return a;
}

// The CRC register (before the final inversion) for the remainder `a`: a * x^32 mod P.
// a * x^32 = first half * x^96 + second half * x^32 -> below 96 bits (products shifted by 4
// bytes into place); its first 32 bits * x^64 -> below 64 bits, t1 * x^32 + t0; then Barrett:
// q = (t1 * mu) div x^32 and the remainder is t0 ^ (q * P) mod x^32.
ROCEDP_CLMUL inline std::uint32_t reduce128(__m128i a) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i low32 = _mm_set_epi64x(0, 0xFFFFFFFF);
  const __m128i k =
      _mm_set_epi64x(static_cast<long long>(kReduce64), static_cast<long long>(kReduce96));
  const __m128i u = _mm_xor_si128(_mm_slli_si128(_mm_clmulepi64_si128(a, k, 0x00), 4),
                                  _mm_srli_si128(_mm_unpackhi_epi64(zero, a), 4));
  const __m128i t = _mm_xor_si128(_mm_slli_si128(_mm_clmulepi64_si128(u, k, 0x10), 4),
                                  _mm_unpackhi_epi64(zero, u));
  const __m128i b =
      _mm_set_epi64x(static_cast<long long>(kBarrettP), static_cast<long long>(kBarrettMu));
  const __m128i q = _mm_clmulepi64_si128(_mm_and_si128(_mm_srli_si128(t, 8), low32), b, 0x00);
  const __m128i r = _mm_clmulepi64_si128(_mm_and_si128(q, low32), b, 0x10);
  return static_cast<std::uint32_t>(_mm_extract_epi32(r, 1)) ^
         static_cast<std::uint32_t>(_mm_extract_epi32(t, 3));
}

std::uint32_t crc32_bytewise(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
  crc = ~crc;
  for (std::size_t i = 0; i < n; ++i) crc = (crc >> 8) ^ kByteTable[(crc ^ p[i]) & 0xFF];
  return ~crc;
}

ROCEDP_CLMUL std::uint32_t crc32_clmul(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
  if (n < 16) return crc32_bytewise(crc, p, n);
  // The register (~crc) XORed into the first 4 bytes, then the whole stream from 0.
  const __m128i a = _mm_xor_si128(load128(p), _mm_cvtsi32_si128(static_cast<int>(~crc)));
  return ~reduce128(fold_rest(a, p + 16, n - 16));
}

// ---- Long runs in 256-bit registers (AVX2 with VPCLMULQDQ, no AVX-512). ----
// ISA-L 2.30 folds in 128-bit registers unless the CPU has AVX-512, where it takes 512-bit ones.
// CPUs with VPCLMULQDQ on 256-bit registers alone (AMD Zen 3, Intel Alder Lake, VMs that hide
// AVX-512) fold two blocks per multiply here: eight accumulators of 32 bytes take 256 bytes a
// step, then join pairwise (by 1024, 512, 256 bits), taking what is left of the run at each
// stride, and fold_rest takes the last 16 bytes and partial block. On an AMD EPYC (Zen 4, AVX-512
// hidden), where ISA-L's CRC of a 1 KiB frame cost eight copies of it: 1 KiB 54 ns against ISA-L's
// 93, 4 KiB 189 against 363. Checked against zlib for every length from 256 to 4,400 bytes and
// random seeds (tests/wire/test_icrc.cpp).
#define ROCEDP_VPCLMUL256 __attribute__((target("avx2,vpclmulqdq,pclmul,ssse3,sse4.1")))

// Each 128-bit lane of `a` moved forward by `bits` (mod P): k holds x^(bits+32) and x^(bits-32)
// per lane (fold_constants for 128 bits).
ROCEDP_VPCLMUL256 inline __m256i fold256(__m256i a, __m256i k) {
  return _mm256_xor_si256(_mm256_clmulepi64_epi128(a, k, 0x00),
                          _mm256_clmulepi64_epi128(a, k, 0x11));
}
template <std::uint32_t kBits>
ROCEDP_VPCLMUL256 inline __m256i fold256_constants() {
  constexpr auto first = static_cast<long long>(clmul_const(kBits + 32)),
                 second = static_cast<long long>(clmul_const(kBits - 32));
  return _mm256_set_epi64x(second, first, second, first);
}
ROCEDP_VPCLMUL256 inline __m256i load256(const std::uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// crc32_gzip_refl(crc, p, n) for n >= 256.
ROCEDP_VPCLMUL256 std::uint32_t crc32_vpclmul256(std::uint32_t crc, const std::uint8_t* p,
                                                 std::size_t n) {
  constexpr int kAcc = 8;
  __m256i a[kAcc];
  for (int j = 0; j < kAcc; ++j) a[j] = load256(p + 32 * j);
  // The register (~crc) XORed into the first 4 bytes, then the whole stream from 0.
  a[0] = _mm256_xor_si256(a[0], _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(~crc))));
  p += 32 * kAcc;
  n -= 32 * kAcc;
  const __m256i k2048 = fold256_constants<2048>();
  for (; n >= 32 * kAcc; p += 32 * kAcc, n -= 32 * kAcc) {
    for (int j = 0; j < kAcc; ++j)
      a[j] = _mm256_xor_si256(fold256(a[j], k2048), load256(p + 32 * j));
  }
  // Halving the accumulators halves their stride; each stride takes the rest's bytes once more if
  // they hold a whole one (n < 256 here, so once at most).
  const __m256i k1024 = fold256_constants<1024>(), k512 = fold256_constants<512>(),
                k256 = fold256_constants<256>();
  for (int j = 0; j < 4; ++j) a[j] = _mm256_xor_si256(fold256(a[j], k1024), a[j + 4]);
  if (n >= 128) {
    for (int j = 0; j < 4; ++j) a[j] = _mm256_xor_si256(fold256(a[j], k1024), load256(p + 32 * j));
    p += 128;
    n -= 128;
  }
  for (int j = 0; j < 2; ++j) a[j] = _mm256_xor_si256(fold256(a[j], k512), a[j + 2]);
  if (n >= 64) {
    for (int j = 0; j < 2; ++j) a[j] = _mm256_xor_si256(fold256(a[j], k512), load256(p + 32 * j));
    p += 64;
    n -= 64;
  }
  __m256i b = _mm256_xor_si256(fold256(a[0], k256), a[1]);
  if (n >= 32) {
    b = _mm256_xor_si256(fold256(b, k256), load256(p));
    p += 32;
    n -= 32;
  }
  const __m128i x = _mm_xor_si128(fold128(_mm256_castsi256_si128(b), fold_constants()),
                                  _mm256_extracti128_si256(b, 1));
  return ~reduce128(fold_rest(x, p, n));
}
#undef ROCEDP_VPCLMUL256

bool cpu_has_vpclmul256() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq") && cpu_has_pclmul();
}
// Where ISA-L has its 512-bit path, it stays.
const bool kHaveVpclmul256 = cpu_has_vpclmul256() && !cpu_has_vpclmul512();
// Runs this long and longer fold in 256-bit registers (crc32_vpclmul256) where ISA-L has no path
// wider than 128 bits; below it ISA-L's shorter latency wins (bench/bench_icrc.cpp: 256 bytes
// 25 ns against 37, 512 bytes 48 against 42).
constexpr std::size_t kLong256Min = 512;

// The CRC of runs of any length (zlib's crc32(crc, p, n)): the payload of the RC data path's
// long frames, the codec's segments.
std::uint32_t crc_run(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
  if (n >= kLong256Min && kHaveVpclmul256) return crc32_vpclmul256(crc, p, n);
  crc = crc32_gzip_refl(crc, p, n);
  if (n >= 256 && kHaveAvx) clear_upper_vector_state();
  return crc;
}

// crc_run over l3 and then each of `more`, from `crc`.
std::uint32_t crc_spans(std::uint32_t crc, Bytes l3, std::span<const Bytes> more) {
  crc = crc_run(crc, l3.data(), l3.size());
  for (const Bytes& seg : more) {
    if (!seg.empty()) crc = crc_run(crc, seg.data(), seg.size());
  }
  return crc;
}

// Bytes after the masked prefix that icrc_ipv4_clmul folds itself (a 64-byte WRITE or SEND and
// every ACK, READ request and atomic); longer frames hand the rest to crc_run.
constexpr std::size_t kOwnFoldMax = 128;

// ICRC of an IPv4 packet without options, len >= 40: the stream is 8 bytes of 0xFF, then the
// packet with TOS (1), TTL (8), checksum (10, 11), UDP checksum (26, 27) and BTH byte 4 (32) at
// 1s, all in its first 48 bytes, so in the first three blocks. Inlined into its two encodings
// below.
// The bytes after a masked prefix folded as two chains: `y` and `x` hold the prefix's blocks, x
// the one whose last block is the prefix's last and y the one just before it; `p` the n bytes
// after the prefix. One chain of folds is bound by the multiplier's latency (a block per ~7
// cycles); two halve it: y takes the even blocks from here, x the odd ones, each folded forward by
// two blocks; then the one whose last block comes first joins the other.
[[gnu::always_inline]] ROCEDP_CLMUL inline std::uint32_t fold_two_chains(__m128i x, __m128i y,
                                                                         const std::uint8_t* p,
                                                                         std::size_t n) {
  const __m128i k = fold_constants();
  const __m128i k2 = fold2_constants();
  __m128i a;
  for (; n >= 32; p += 32, n -= 32) {
    y = _mm_xor_si128(fold128(y, k2), load128(p));
    x = _mm_xor_si128(fold128(x, k2), load128(p + 16));
  }
  if (n >= 16) {
    y = _mm_xor_si128(fold128(y, k2), load128(p));
    a = _mm_xor_si128(fold128(x, k), y);
    p += 16;
    n -= 16;
  } else {
    a = _mm_xor_si128(fold128(y, k), x);
  }
  return ~reduce128(fold_rest(a, p, n));
}

// ICRC of an IPv4 packet without options, len >= 40: the stream is 8 bytes of 0xFF, then the
// packet with TOS (1), TTL (8), checksum (10, 11), UDP checksum (26, 27) and BTH byte 4 (32) at
// 1s, all in its first 48 bytes, so in the first three blocks. Inlined into its two encodings
// below.
[[gnu::always_inline]] ROCEDP_CLMUL inline std::uint32_t icrc_ipv4_fold(const std::uint8_t* l3,
                                                                        std::size_t len) {
  std::uint64_t w;
  std::memcpy(&w, l3, 8);
  const __m128i k = fold_constants();
  // Block 0: the 8 bytes of 0xFF (the first 4 XORed with the initial register ~0, so 0), then
  // IP bytes 0-7 with the TOS masked.
  const __m128i s0 = _mm_set_epi64x(static_cast<long long>(w | 0xFF00u),
                                    static_cast<long long>(0xFFFFFFFF00000000ull));
  // Blocks 1 and 2: IP bytes 8-23 and 24-39 with their masked bytes at 1s.
  const __m128i s1 = _mm_or_si128(load128(l3 + 8), _mm_set_epi64x(0, 0xFFFF00FF));
  const __m128i s2 = _mm_or_si128(load128(l3 + 24), _mm_set_epi64x(0xFF, 0xFFFF0000));
  // Past a few blocks the rest goes to crc_run (ISA-L's eight chains, or 256-bit folds), chained on
  // the masked prefix.
  if (len - 40 > kOwnFoldMax) [[unlikely]] {
    const __m128i a = _mm_xor_si128(fold128(_mm_xor_si128(fold128(s0, k), s1), k), s2);
    return crc_run(~reduce128(a), l3 + 40, len - 40);
  }
  const __m128i k2 = fold2_constants();
  return fold_two_chains(_mm_xor_si128(fold128(s0, k2), s2), s1, l3 + 40, len - 40);
}

// ICRC of an IPv6 packet without extension headers (next header UDP), len >= 60: 8 bytes of 0xFF,
// then the packet with traffic class and flow label (the low nibble of byte 0, bytes 1-3), hop
// limit (7), UDP checksum (46, 47) and BTH byte 4 (52) at 1s, all in the first four blocks.
[[gnu::always_inline]] ROCEDP_CLMUL inline std::uint32_t icrc_ipv6_fold(const std::uint8_t* l3,
                                                                        std::size_t len) {
  std::uint64_t w;
  std::memcpy(&w, l3, 8);
  const __m128i k = fold_constants();
  // Block 0: the 0xFF bytes as for IPv4, then IPv6 bytes 0-7 with their variant bits at 1s.
  const __m128i s0 = _mm_set_epi64x(static_cast<long long>(w | 0xFF000000FFFFFF0Full),
                                    static_cast<long long>(0xFFFFFFFF00000000ull));
  const __m128i s1 = load128(l3 + 8);   // the source address
  const __m128i s2 = load128(l3 + 24);  // the destination address
  // Block 3: the UDP header with its checksum at 1s, BTH bytes 0-7 with byte 4 at 1s.
  const __m128i s3 =
      _mm_or_si128(load128(l3 + 40),
                   _mm_set_epi64x(0xFF00000000ll, static_cast<long long>(0xFFFF000000000000ull)));
  if (len - 56 > kOwnFoldMax) [[unlikely]] {
    const __m128i a = _mm_xor_si128(
        fold128(_mm_xor_si128(fold128(_mm_xor_si128(fold128(s0, k), s1), k), s2), k), s3);
    return crc_run(~reduce128(a), l3 + 56, len - 56);
  }
  const __m128i k2 = fold2_constants();
  return fold_two_chains(_mm_xor_si128(fold128(s1, k2), s3), _mm_xor_si128(fold128(s0, k2), s2),
                         l3 + 56, len - 56);
}

ROCEDP_CLMUL std::uint32_t icrc_ipv6_clmul(const std::uint8_t* l3, std::size_t len) {
  return icrc_ipv6_fold(l3, len);
}
__attribute__((target("avx,pclmul,ssse3,sse4.1"))) std::uint32_t icrc_ipv6_clmul_vex(
    const std::uint8_t* l3, std::size_t len) {
  return icrc_ipv6_fold(l3, len);
}

// The fold in SSE encoding, for CPUs without AVX.
ROCEDP_CLMUL std::uint32_t icrc_ipv4_clmul(const std::uint8_t* l3, std::size_t len) {
  return icrc_ipv4_fold(l3, len);
}
// The same instructions in VEX encoding (CPUs with AVX): their three-operand forms need no
// register copy ahead of each destructive SSE operation (PCLMULQDQ, PXOR, PSHUFB), which saves
// about 14 instructions of the ~100 a 64-byte WRITE frame costs (callgrind).
__attribute__((target("avx,pclmul,ssse3,sse4.1"))) std::uint32_t icrc_ipv4_clmul_vex(
    const std::uint8_t* l3, std::size_t len) {
  return icrc_ipv4_fold(l3, len);
}

// ---- The same ICRC in 512-bit registers (AVX-512 with VPCLMULQDQ). ----
// The stream after the register's initial ~0 has cancelled the first four of the eight 0xFF bytes
// is M = 4 x 0xFF, then the packet with its variant bytes at 1s, CRCed from a zero register. Zero
// bytes ahead of such a stream change nothing, so M is read as whole 64-byte chunks, the first
// led by zeros: masked loads (which never fault on the bytes they leave out) bring in the packet,
// and one OR per chunk puts in the 1s. A chunk folds into the next with two multiplies, and
// the four 128-bit lanes of the last one join in one more pair. A 64-byte WRITE is two chunks:
// about 40 instructions against icrc_ipv4_clmul's 100.
constexpr std::size_t kWideMax = 256;  // bytes of M; a longer frame goes to icrc_ipv4_clmul
constexpr std::size_t kOnesAt = 128;   // kOnes[kOnesAt + i] is 0xFF where M's byte i is a 1
constexpr std::array<std::uint8_t, 256> make_ones() {
  std::array<std::uint8_t, 256> t{};
  for (std::size_t i = 0; i < 4; ++i) t[kOnesAt + i] = 0xFF;
  for (std::size_t pos : kPos5) t[kOnesAt + 4 + pos] = 0xFF;
  return t;
}
alignas(64) constexpr std::array<std::uint8_t, 256> kOnes = make_ones();

// GCC 12's AVX-512 intrinsics start some results from _mm512_undefined_*(), which -Wuninitialized
// reports once they are inlined (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#define ROCEDP_VPCLMUL \
  __attribute__((target("avx512f,avx512bw,avx512vl,vpclmulqdq,pclmul,ssse3,sse4.1")))

// 64 bytes from `from`, the first `skip` of them left out (read as zeros).
ROCEDP_VPCLMUL inline __m512i load_chunk(std::uintptr_t from, std::size_t skip) {
  const __mmask64 keep = skip >= 64 ? 0 : ~__mmask64{0} << skip;
  return _mm512_maskz_loadu_epi8(keep, reinterpret_cast<const void*>(from));
}

ROCEDP_VPCLMUL std::uint32_t icrc_ipv4_vpclmul(const std::uint8_t* l3, std::size_t len) {
  const std::size_t m = len + 4;
  const std::size_t lead = (0 - m) & 63;  // zeros ahead of M
  const std::size_t at = lead + 4;        // where the packet starts in the first chunk
  const std::size_t chunks = (m + lead) / 64;
  // Chunk j is read from l3 - at + 64 j, its bytes before l3 left out by the mask.
  const std::uintptr_t from = reinterpret_cast<std::uintptr_t>(l3) - at;
  __m512i acc =
      _mm512_or_si512(load_chunk(from, at), _mm512_loadu_si512(kOnes.data() + kOnesAt - lead));
  const auto f1 = static_cast<long long>(clmul_const(544)),
             f2 = static_cast<long long>(clmul_const(480));
  const __m512i k512 = _mm512_set_epi64(f2, f1, f2, f1, f2, f1, f2, f1);
  for (std::size_t j = 1; j < chunks; ++j) {
    __m512i c = load_chunk(from + 64 * j, at > 64 * j ? at - 64 * j : 0);
    if (j == 1) c = _mm512_or_si512(c, _mm512_loadu_si512(kOnes.data() + kOnesAt + 64 - lead));
    acc = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k512, 0x00),
                                    _mm512_clmulepi64_epi128(acc, k512, 0x11), c, 0x96);
  }
  // Lanes 0-2 move forward by 384, 256 and 128 bits onto lane 3, then all four are XORed.
  const __m512i kl = _mm512_set_epi64(
      0, 0, static_cast<long long>(clmul_const(96)), static_cast<long long>(clmul_const(160)),
      static_cast<long long>(clmul_const(224)), static_cast<long long>(clmul_const(288)),
      static_cast<long long>(clmul_const(352)), static_cast<long long>(clmul_const(416)));
  const __m512i t = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, kl, 0x00),
                                              _mm512_clmulepi64_epi128(acc, kl, 0x11),
                                              _mm512_maskz_mov_epi64(0xC0, acc), 0x96);
  const __m512i h = _mm512_xor_si512(t, _mm512_shuffle_i64x2(t, t, 0x4E));  // lanes 2 3 0 1
  return ~reduce128(_mm512_castsi512_si128(_mm512_xor_si512(h, _mm512_shuffle_i64x2(h, h, 0xB1))));
}

#undef ROCEDP_VPCLMUL
#pragma GCC diagnostic pop

const bool kHaveVpclmul512 = cpu_has_vpclmul512();

#undef ROCEDP_CLMUL

}  // namespace

std::size_t icrc_masked_prefix_len(Bytes l3) {
  bool ipv6 = false;
  const std::size_t ip_len = ip_header_len(l3, ipv6);
  if (ip_len < kIpv4MinHdrLen) return 0;
  const std::size_t n = ip_len + kUdpHdrLen + kBthLen;
  return n <= l3.size() ? n : 0;
}

std::uint32_t icrc_compute(Bytes l3, std::span<const Bytes> more) {
  // The usual shape first (IPv4 without options), with no more tests than it needs; the same
  // arithmetic as the general fast path below.
  if (l3.size() >= kPrefix5 && l3[0] == 0x45 && kHavePclmul) [[likely]] {
    std::size_t total = l3.size();
    for (const Bytes& seg : more) total += seg.size();
    if (total < kPowMaxBytes) [[likely]] {
      const std::uint32_t correction = ipv4_correction5_clmul(l3.data(), total);
      return crc_spans(kIcrcSeed, l3, more) ^ correction;
    }
  }
  bool ipv6 = false;
  const std::size_t ip_len = ip_header_len(l3, ipv6);
  if (ip_len < kIpv4MinHdrLen) return 0;
  const std::size_t prefix = ip_len + kUdpHdrLen + kBthLen;
  if (prefix > l3.size()) return 0;
  std::size_t total = l3.size();
  for (const Bytes& seg : more) total += seg.size();

  if (ipv6 && total < kPowMaxBytes && kHavePclmul) {
    // IPv6: the same one pass over the bytes as they are, and its own correction.
    const std::uint32_t correction = ipv6_correction_clmul(l3.data(), total);
    return crc_spans(kIcrcSeed, l3, more) ^ correction;
  }
  if (!ipv6 && total < kPowMaxBytes) {
    // The masking correction first (independent of the long CRC, so the CPU
    // overlaps the two), then one pass over the bytes as they are.
    const std::uint32_t correction = ipv4_correction_any(l3.data(), ip_len, total);
    return crc_spans(kIcrcSeed, l3, more) ^ correction;
  }

  // General path (jumbo; IPv6 without PCLMULQDQ): CRC a masked copy of the prefix, then the rest
  // in place.
  std::uint8_t tmp[kMaxPrefix];
  std::memcpy(tmp, l3.data(), prefix);
  mask_prefix(tmp, ip_len, ipv6);
  return crc_spans(crc_run(kIcrcSeed, tmp, prefix), l3.subspan(prefix), more);
}

namespace {
// icrc_plain_ipv4's paths: the 512-bit one for the frames it covers, else the 128-bit one.
[[gnu::always_inline]] inline std::uint32_t plain_narrow(const std::uint8_t* l3, std::size_t len) {
  if (kHavePclmul) [[likely]]
    return kHaveAvx ? icrc_ipv4_clmul_vex(l3, len) : icrc_ipv4_clmul(l3, len);
  return icrc_compute(Bytes(l3, len));
}
[[gnu::always_inline]] inline std::uint32_t plain_wide(const std::uint8_t* l3, std::size_t len) {
  return len + 4 <= kWideMax ? icrc_ipv4_vpclmul(l3, len) : plain_narrow(l3, len);
}
}  // namespace

namespace {
using PlainFn = std::uint32_t (*)(const std::uint8_t*, std::size_t);
std::uint32_t plain_wide_any(const std::uint8_t* l3, std::size_t len) {
  return plain_wide(l3, len);
}
std::uint32_t plain_portable(const std::uint8_t* l3, std::size_t len) {
  return icrc_compute(Bytes(l3, len));
}
std::uint32_t plain_resolve(const std::uint8_t* l3, std::size_t len);
// icrc_plain_ipv4's path for this CPU, chosen by its first call: one indirect call per frame
// instead of three feature tests. Constant-initialised, so a call from any static initialiser
// finds the resolver, which reads the CPU itself (cpu_has_*, not the flags above).
constinit std::atomic<PlainFn> g_plain{plain_resolve};
std::uint32_t plain_resolve(const std::uint8_t* l3, std::size_t len) {
  PlainFn f = plain_portable;
  if (cpu_has_vpclmul512()) {
    f = plain_wide_any;
  } else if (cpu_has_pclmul()) {
    f = cpu_has_avx() ? icrc_ipv4_clmul_vex : icrc_ipv4_clmul;
  }
  g_plain.store(f, std::memory_order_relaxed);
  return f(l3, len);
}
}  // namespace

std::uint32_t icrc_plain_ipv4(const std::uint8_t* l3, std::size_t len) {
  return g_plain.load(std::memory_order_relaxed)(l3, len);
}

std::uint32_t icrc_plain_ipv6(const std::uint8_t* l3, std::size_t len) {
  if (kHavePclmul) [[likely]]
    return kHaveAvx ? icrc_ipv6_clmul_vex(l3, len) : icrc_ipv6_clmul(l3, len);
  return icrc_compute(Bytes(l3, len));
}

namespace detail {
bool icrc_wide_available() {
  return kHaveVpclmul512;
}
bool crc_long256_available() {
  return cpu_has_vpclmul256();
}
std::uint32_t crc32_long256(std::uint32_t crc, Bytes data) {
  return crc32_vpclmul256(crc, data.data(), data.size());
}
std::uint32_t icrc_plain_ipv4_narrow(const std::uint8_t* l3, std::size_t len) {
  return plain_narrow(l3, len);
}
std::uint32_t icrc_plain_ipv4_sse(const std::uint8_t* l3, std::size_t len) {
  return kHavePclmul ? icrc_ipv4_clmul(l3, len) : icrc_compute(Bytes(l3, len));
}
std::uint32_t icrc_plain_ipv4_wide(const std::uint8_t* l3, std::size_t len) {
  return plain_wide(l3, len);
}
std::uint32_t icrc_plain_ipv6_sse(const std::uint8_t* l3, std::size_t len) {
  return kHavePclmul ? icrc_ipv6_clmul(l3, len) : icrc_compute(Bytes(l3, len));
}
}  // namespace detail

std::uint32_t crc32_refl(std::uint32_t crc, Bytes data) {
  return kHavePclmul ? crc32_clmul(crc, data.data(), data.size())
                     : crc32_bytewise(crc, data.data(), data.size());
}

std::uint32_t icrc_extend(std::uint32_t crc, Bytes more) {
  return more.empty() ? crc : crc_run(crc, more.data(), more.size());
}

bool icrc_verify(Bytes l3_with_icrc) {
  if (l3_with_icrc.size() < kIcrcLen) return false;
  const Bytes body = l3_with_icrc.first(l3_with_icrc.size() - kIcrcLen);
  if (icrc_masked_prefix_len(body) == 0) return false;
  return icrc_compute(body) == load_le32(l3_with_icrc.data() + body.size());
}

std::uint32_t icrc_reference(Bytes l3) {
  std::vector<std::uint8_t> b(8, 0xFF);
  b.insert(b.end(), l3.begin(), l3.end());
  bool ipv6 = false;
  const std::size_t ip_len = ip_header_len(l3, ipv6);
  if (ip_len < kIpv4MinHdrLen || ip_len + kUdpHdrLen + kBthLen > l3.size()) return 0;
  mask_prefix(b.data() + 8, ip_len, ipv6);
  return detail::crc32_bitwise(0, b.data(), b.size());
}

}  // namespace rocedp::wire
