// ICRC (IBTA Annex A17.3.3) against zlib's crc32 over the masked pseudo-packet.
#include "dataplane/wire/icrc.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <stdexcept>
#include <vector>

#include "tests/wire/wire_test_util.hpp"

namespace rocedp::wire {
namespace {

// Independent model: 8 x 0xFF, then the L3 packet with TOS, TTL, IP checksum,
// UDP checksum and BTH byte 4 forced to 0xFF, CRC'd by zlib.
std::uint32_t zlib_icrc(Bytes l3) {
  std::vector<std::uint8_t> b(8, 0xFF);
  b.insert(b.end(), l3.begin(), l3.end());
  std::uint8_t* ip = b.data() + 8;
  const std::size_t ihl = std::size_t{ip[0] & 0x0Fu} * 4;
  ip[1] = 0xFF;
  ip[8] = 0xFF;
  ip[10] = ip[11] = 0xFF;
  ip[ihl + 6] = ip[ihl + 7] = 0xFF;
  ip[ihl + 8 + 4] = 0xFF;
  return static_cast<std::uint32_t>(crc32(0L, b.data(), static_cast<uInt>(b.size())));
}

// The same model for IPv6 (no extension headers): traffic class (the low nibble of byte 0 and the
// high one of byte 1), flow label (the rest of bytes 1-3) and hop limit (byte 7) forced to 1s.
std::uint32_t zlib_icrc6(Bytes l3) {
  std::vector<std::uint8_t> b(8, 0xFF);
  b.insert(b.end(), l3.begin(), l3.end());
  std::uint8_t* ip = b.data() + 8;
  ip[0] |= 0x0F;
  ip[1] = ip[2] = ip[3] = 0xFF;
  ip[7] = 0xFF;
  ip[40 + 6] = ip[40 + 7] = 0xFF;
  ip[40 + 8 + 4] = 0xFF;
  return static_cast<std::uint32_t>(crc32(0L, b.data(), static_cast<uInt>(b.size())));
}

// RoCEv2 over IPv6: every opcode, random variant fields and payloads up to 4 KiB, against zlib,
// through icrc_compute (one pass plus a correction) and the reference (a masked copy); and a flip
// of any byte changes it unless the byte is a variant field.
TEST(Icrc, Ipv6MatchesZlibForEveryOpcodeAndIgnoresOnlyVariantFields) {
  std::mt19937 rng(17);
  for (const OpcodeInfo& op : kOpcodeTable) {
    if (!op.valid()) continue;
    const auto code = static_cast<std::uint8_t>(&op - kOpcodeTable.data());
    for (int i = 0; i < 20; ++i) {
      PacketFields f = test::sample_fields(code, rng);
      f.eth.ethertype = kEtherTypeIpv6;
      f.ip6.traffic_class = static_cast<std::uint8_t>(rng());
      f.ip6.flow_label = rng() & 0xFFFFF;
      f.ip6.hop_limit = static_cast<std::uint8_t>(rng());
      for (auto& x : f.ip6.src) x = static_cast<std::uint8_t>(rng());
      for (auto& x : f.ip6.dst) x = static_cast<std::uint8_t>(rng());
      f.udp.checksum = static_cast<std::uint16_t>(rng());
      f.bth.becn = rng() & 1;
      const std::size_t len = test::legal_payload_len(op, rng() % 4097);
      f.bth.pad = pad_for(len);
      const auto fr = test::build(f, test::make_payload(len, static_cast<std::uint8_t>(i)));
      ASSERT_FALSE(fr.empty());
      const std::size_t l3_at = f.eth.header_len();
      const Bytes l3 = Bytes(fr).subspan(l3_at, fr.size() - l3_at - kIcrcLen);
      const std::uint32_t want = zlib_icrc6(l3);
      EXPECT_EQ(icrc_compute(l3), want) << op.name << " len " << len;
      EXPECT_EQ(icrc_reference(l3), want);
      EXPECT_TRUE(icrc_verify(Bytes(fr).subspan(l3_at)));
    }
  }
  PacketFields f = test::sample_fields(opcode::kRcWriteOnly, rng);
  f.eth.ethertype = kEtherTypeIpv6;
  f.bth.pad = pad_for(21);
  auto fr = test::build(f, test::make_payload(21, 2));
  const Bytes l3 = Bytes(fr).subspan(kEthHdrLen);
  ASSERT_TRUE(icrc_verify(l3));
  for (std::size_t i = 0; i + 4 < l3.size(); ++i) {
    for (std::uint8_t bit = 1; bit != 0; bit = static_cast<std::uint8_t>(bit << 1)) {
      fr[kEthHdrLen + i] ^= bit;
      const bool variant = (i == 0 && bit < 0x10) || (i >= 1 && i <= 3) || i == 7 || i == 40 + 6 ||
                           i == 40 + 7 || i == 40 + 8 + 4;
      EXPECT_EQ(icrc_verify(l3), variant) << "byte " << i << " bit " << int(bit);
      fr[kEthHdrLen + i] ^= bit;
    }
  }
}

TEST(Icrc, SeedIsCrcOfEightOnes) {
  const std::uint8_t ff[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  EXPECT_EQ(kIcrcSeed, static_cast<std::uint32_t>(crc32(0L, ff, 8)));
}

TEST(Icrc, MatchesZlibForEveryOpcodeAndRandomPackets) {
  std::mt19937 rng(7);
  int checked = 0;
  for (const OpcodeInfo& op : kOpcodeTable) {
    if (!op.valid()) continue;
    const auto code = static_cast<std::uint8_t>(&op - kOpcodeTable.data());
    for (int i = 0; i < 40; ++i) {
      PacketFields f = test::sample_fields(code, rng);
      // Variant fields get random values: they must not change the ICRC.
      f.ip.ttl = static_cast<std::uint8_t>(rng());
      f.udp.checksum = static_cast<std::uint16_t>(rng());
      f.bth.fecn = rng() & 1;
      f.bth.becn = rng() & 1;
      f.bth.resv6 = rng() & 0x3F;
      const std::size_t len = test::legal_payload_len(op, rng() % 4097);
      f.bth.pad = pad_for(len);
      const auto payload = test::make_payload(len, static_cast<std::uint8_t>(i));
      const auto fr = test::build(f, payload);
      ASSERT_FALSE(fr.empty());
      const Bytes l3 = Bytes(fr).subspan(kEthHdrLen, fr.size() - kEthHdrLen - kIcrcLen);
      const std::uint32_t want = zlib_icrc(l3);
      EXPECT_EQ(icrc_compute(l3), want) << op.name << " len " << len;
      if (!f.eth.has_vlan && l3[0] == 0x45) {
        EXPECT_EQ(icrc_plain_ipv4(l3.data(), l3.size()), want);
      }
      EXPECT_EQ(icrc_reference(l3), want);
      EXPECT_EQ(load_le32(fr.data() + fr.size() - 4), want) << "stored little-endian";
      EXPECT_TRUE(icrc_verify(Bytes(fr).subspan(kEthHdrLen)));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 26 * 40);
}

TEST(Icrc, ChainsOverOneToManyPayloadSegments) {
  std::mt19937 rng(11);
  for (std::size_t len : {0u, 1u, 3u, 64u, 255u, 1024u, 4096u}) {
    PacketFields f = test::sample_fields(opcode::kRcWriteOnly, rng);
    f.bth.pad = pad_for(len);
    const auto payload = test::make_payload(len, 3);
    const auto fr = test::build(f, payload);
    const std::size_t hdr = header_len(f);
    const Bytes l3_hdrs = Bytes(fr).subspan(kEthHdrLen, hdr - kEthHdrLen);
    const Bytes body = Bytes(fr).subspan(hdr, len + f.bth.pad);
    const std::uint32_t want =
        zlib_icrc(Bytes(fr).subspan(kEthHdrLen, fr.size() - kEthHdrLen - kIcrcLen));
    for (std::size_t nseg = 1; nseg <= 8; ++nseg) {
      std::vector<Bytes> segs;
      std::size_t at = 0;
      for (std::size_t s = 0; s < nseg; ++s) {
        const std::size_t take = s + 1 == nseg
                                     ? body.size() - at
                                     : std::min(body.size() - at, rng() % (body.size() + 1));
        segs.push_back(body.subspan(at, take));
        at += take;
      }
      EXPECT_EQ(icrc_compute(l3_hdrs, segs), want) << "len " << len << " segments " << nseg;
    }
    // Split inside the masked prefix's successor: headers that stop right after the BTH.
    const std::size_t prefix = icrc_masked_prefix_len(l3_hdrs);
    const Bytes rest =
        Bytes(fr).subspan(kEthHdrLen + prefix, fr.size() - kEthHdrLen - prefix - kIcrcLen);
    EXPECT_EQ(icrc_compute(l3_hdrs.first(prefix), {rest}), want);
  }
}

TEST(Icrc, DetectsAnyInvariantByteFlipButIgnoresVariantFields) {
  std::mt19937 rng(3);
  PacketFields f = test::sample_fields(opcode::kRcSendOnly, rng);
  f.bth.pad = pad_for(37);
  auto fr = test::build(f, test::make_payload(37, 1));
  const Bytes l3 = Bytes(fr).subspan(kEthHdrLen);
  ASSERT_TRUE(icrc_verify(l3));
  const std::size_t variant[] = {1, 8, 10, 11, 20 + 6, 20 + 7, 20 + 8 + 4};
  for (std::size_t i = 0; i + 4 < l3.size(); ++i) {
    fr[kEthHdrLen + i] ^= 0x01;
    const bool is_variant =
        std::find(std::begin(variant), std::end(variant), i) != std::end(variant);
    EXPECT_EQ(icrc_verify(l3), is_variant) << "byte " << i;
    fr[kEthHdrLen + i] ^= 0x01;
  }
}

// The RC data path's own CRC (PCLMULQDQ folding, icrc.cpp) is zlib's crc32: every length 0..300
// at every alignment of a random buffer, with several seeds, and random lengths up to 4 KiB.
TEST(Icrc, OwnCrcMatchesZlibForEveryLengthAndRandomBuffers) {
  std::mt19937 rng(21);
  std::vector<std::uint8_t> buf(4096 + 64);
  for (auto& b : buf) b = static_cast<std::uint8_t>(rng());
  for (std::size_t len = 0; len <= 300; ++len) {
    for (std::size_t align = 0; align < 16; align += 5) {
      for (std::uint32_t seed : {0u, kIcrcSeed, 0xFFFFFFFFu, static_cast<std::uint32_t>(rng())}) {
        const Bytes b(buf.data() + align, len);
        EXPECT_EQ(crc32_refl(seed, b),
                  static_cast<std::uint32_t>(crc32(seed, b.data(), static_cast<uInt>(len))))
            << "length " << len << " alignment " << align << " seed " << seed;
      }
    }
  }
  for (int i = 0; i < 2000; ++i) {
    for (auto& b : buf) b = static_cast<std::uint8_t>(rng());
    const std::size_t len = rng() % 4097;
    const std::size_t align = rng() % 64;
    const Bytes b(buf.data() + align, len);
    EXPECT_EQ(crc32_refl(0, b),
              static_cast<std::uint32_t>(crc32(0L, b.data(), static_cast<uInt>(len))))
        << "length " << len;
  }
}

// icrc_plain_ipv4 masks in registers: the same ICRC as zlib over the masked copy, for every
// length an RC frame can have (40 bytes up) and random bytes everywhere, variant fields included.
TEST(Icrc, PlainIpv4IcrcMatchesZlibForEveryLengthAndRandomBytes) {
  std::mt19937 rng(22);
  for (std::size_t len = 40; len <= 600; ++len) {
    for (int rep = 0; rep < 8; ++rep) {
      std::vector<std::uint8_t> l3(len);
      for (auto& b : l3) b = static_cast<std::uint8_t>(rng());
      l3[0] = 0x45;
      ASSERT_EQ(icrc_plain_ipv4(l3.data(), len), zlib_icrc(l3)) << "length " << len;
    }
  }
  for (int i = 0; i < 500; ++i) {
    const std::size_t len = 40 + rng() % 9000;
    std::vector<std::uint8_t> l3(len);
    for (auto& b : l3) b = static_cast<std::uint8_t>(rng());
    l3[0] = 0x45;
    EXPECT_EQ(icrc_plain_ipv4(l3.data(), len), zlib_icrc(l3)) << "length " << len;
  }
}

// `pages` readable pages between two unmapped ones: a load past either end faults. Unmapped
// again when it goes out of scope, also when an assertion fails.
class GuardedPages {
 public:
  explicit GuardedPages(std::size_t pages)
      : page_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))) {
    size_ = (pages + 2) * page_;
    void* map = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) throw std::runtime_error("mmap failed");
    area_ = static_cast<std::uint8_t*>(map);
    if (mprotect(area_, page_, PROT_NONE) != 0 ||
        mprotect(area_ + size_ - page_, page_, PROT_NONE) != 0)
      throw std::runtime_error("mprotect failed");
  }
  ~GuardedPages() { munmap(area_, size_); }
  GuardedPages(const GuardedPages&) = delete;
  GuardedPages& operator=(const GuardedPages&) = delete;
  std::uint8_t* first() const { return area_ + page_; }
  std::uint8_t* end() const { return area_ + size_ - page_; }

 private:
  std::size_t page_;
  std::size_t size_ = 0;
  std::uint8_t* area_ = nullptr;
};

// The 256-bit fold of long runs against zlib: every length from 256 to past four 1 KiB frames
// (each count of 256-byte steps, 32-byte steps and last partial block), alignments and seeds; and
// the CRC of long runs as this CPU takes it (icrc_extend), whichever path that is.
TEST(Icrc, LongRunsMatchZlibOnEveryPath) {
  std::mt19937 rng(23);
  std::vector<std::uint8_t> buf(4400 + 64);
  for (auto& b : buf) b = static_cast<std::uint8_t>(rng());
  const bool own = detail::crc_long256_available();
  if (!own) std::printf("this CPU has no VPCLMULQDQ: the 256-bit fold is not run\n");
  for (std::size_t len = 256; len <= 4400; ++len) {
    const std::size_t align = len % 37;
    const std::uint32_t seed = len % 3 == 0 ? 0u : static_cast<std::uint32_t>(rng());
    const Bytes b(buf.data() + align, len);
    const auto want = static_cast<std::uint32_t>(crc32(seed, b.data(), static_cast<uInt>(len)));
    if (own) {
      ASSERT_EQ(detail::crc32_long256(seed, b), want) << "length " << len;
    }
    ASSERT_EQ(icrc_extend(seed, b), want) << "length " << len;
  }
  if (own) {
    // Against an unmapped page on either side: no load outside the run.
    GuardedPages pages(2);
    for (std::size_t len : {256, 257, 300, 1024, 1089, 4096, 8192}) {
      for (std::uint8_t* p : {pages.first(), pages.end() - len}) {
        for (std::size_t i = 0; i < len; ++i) p[i] = static_cast<std::uint8_t>(rng());
        EXPECT_EQ(detail::crc32_long256(7, Bytes(p, len)),
                  static_cast<std::uint32_t>(crc32(7, p, static_cast<uInt>(len))))
            << "length " << len;
      }
    }
  }
}

// Both SIMD paths of icrc_plain_ipv4 against zlib: every length from 40 to past the 512-bit
// path's limit, random bytes everywhere. The packet sits against an unmapped page on either side,
// so a load that reached outside it (the 512-bit path reads whole 64-byte chunks, masked) would
// fault here.
TEST(Icrc, PlainIpv4BothPathsMatchZlibAtPageEdges) {
  const GuardedPages pages(2);
  std::uint8_t* first = pages.first();
  std::uint8_t* end = pages.end();
  std::mt19937 rng(23);
  const bool wide = detail::icrc_wide_available();
  if (!wide) std::printf("this CPU has no AVX-512 VPCLMULQDQ: only the 128-bit path runs\n");
  for (std::size_t len = 40; len <= 400; ++len) {
    for (std::uint8_t* l3 : {first, end - len, first + 7, end - len - 9}) {
      for (std::size_t i = 0; i < len; ++i) l3[i] = static_cast<std::uint8_t>(rng());
      l3[0] = 0x45;
      const std::uint32_t want = zlib_icrc(Bytes(l3, len));
      ASSERT_EQ(detail::icrc_plain_ipv4_narrow(l3, len), want) << "length " << len;
      ASSERT_EQ(detail::icrc_plain_ipv4_sse(l3, len), want) << "length " << len;
      if (wide) {
        ASSERT_EQ(detail::icrc_plain_ipv4_wide(l3, len), want) << "length " << len;
      }
      ASSERT_EQ(icrc_plain_ipv4(l3, len), want) << "length " << len;
    }
  }
}

// icrc_plain_ipv6 (the RC data path's IPv6 frames) masks in registers: against zlib over the
// masked copy for every length from 60 (IPv6 + UDP + BTH) past its own fold's limit, random bytes
// everywhere, both encodings, and long frames that hand the rest to ISA-L. The packet sits
// against an unmapped page on either side, so a load outside it would fault.
TEST(Icrc, PlainIpv6IcrcMatchesZlibForEveryLengthAndRandomBytes) {
  const GuardedPages pages(3);
  std::uint8_t* first = pages.first();
  std::uint8_t* end = pages.end();
  std::mt19937 rng(24);
  for (std::size_t len = 60; len <= 400; ++len) {
    for (std::uint8_t* l3 : {first, end - len, first + 5, end - len - 11}) {
      for (std::size_t i = 0; i < len; ++i) l3[i] = static_cast<std::uint8_t>(rng());
      const std::uint32_t want = zlib_icrc6(Bytes(l3, len));
      ASSERT_EQ(icrc_plain_ipv6(l3, len), want) << "length " << len;
      ASSERT_EQ(detail::icrc_plain_ipv6_sse(l3, len), want) << "length " << len;
    }
  }
  for (int i = 0; i < 300; ++i) {
    const std::size_t len = 60 + rng() % (static_cast<std::size_t>(end - first) - 60);
    std::uint8_t* l3 = end - len;
    for (std::size_t b = 0; b < len; ++b) l3[b] = static_cast<std::uint8_t>(rng());
    ASSERT_EQ(icrc_plain_ipv6(l3, len), zlib_icrc6(Bytes(l3, len))) << "length " << len;
  }
}

TEST(Icrc, RejectsTooShortInput) {
  const std::uint8_t small[10] = {0x45};
  EXPECT_EQ(icrc_masked_prefix_len(Bytes(small)), 0u);
  EXPECT_EQ(icrc_compute(Bytes(small)), 0u);
  EXPECT_FALSE(icrc_verify(Bytes(small)));
}

}  // namespace
}  // namespace rocedp::wire
