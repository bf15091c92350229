#pragma once
// Extended transport headers (IBTA Vol 1 §9.3; rxe_hdr.h sizes). Each has a
// raw view (byte order only), a decoded struct, and encode/decode helpers.

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "dataplane/wire/bytes.hpp"

namespace rocedp::wire {

inline constexpr std::size_t kRethLen = 16;         // VA(64) R_Key(32) DMA length(32)
inline constexpr std::size_t kAethLen = 4;          // syndrome(8) MSN(24)
inline constexpr std::size_t kAtomicEthLen = 28;    // VA(64) R_Key(32) swap/add(64) compare(64)
inline constexpr std::size_t kAtomicAckEthLen = 8;  // original remote data(64)
inline constexpr std::size_t kImmDtLen = 4;
inline constexpr std::size_t kIethLen = 4;  // R_Key to invalidate
inline constexpr std::size_t kDethLen = 8;  // Q_Key(32) resv(8) SrcQP(24)

namespace reth_off {
inline constexpr std::size_t kVa = 0, kRkey = 8, kLen = 12;
}
namespace aeth_off {
inline constexpr std::size_t kSyndrome = 0, kMsn = 1;
}
namespace atmeth_off {
inline constexpr std::size_t kVa = 0, kRkey = 8, kSwapAdd = 12, kCompare = 20;
}
namespace deth_off {
inline constexpr std::size_t kQkey = 0, kResv = 4, kSrcQp = 5;
}
static_assert(reth_off::kLen + 4 == kRethLen);
static_assert(aeth_off::kMsn + 3 == kAethLen);
static_assert(atmeth_off::kCompare + 8 == kAtomicEthLen);
static_assert(deth_off::kSrcQp + 3 == kDethLen);

#define ROCEDP_SETTER requires(!std::is_const_v<B>)

template <class B>
class RethView {
 public:
  explicit RethView(B* p) : p_(p) {}
  std::uint64_t va() const { return load_be64(p_ + reth_off::kVa); }
  std::uint32_t rkey() const { return load_be32(p_ + reth_off::kRkey); }
  std::uint32_t dma_len() const { return load_be32(p_ + reth_off::kLen); }
  void set_va(std::uint64_t v) ROCEDP_SETTER { store_be64(p_ + reth_off::kVa, v); }
  void set_rkey(std::uint32_t v) ROCEDP_SETTER { store_be32(p_ + reth_off::kRkey, v); }
  void set_dma_len(std::uint32_t v) ROCEDP_SETTER { store_be32(p_ + reth_off::kLen, v); }

 private:
  B* p_;
};

// AETH syndrome (IBTA §9.7.5.2.2; rxe_hdr.h): bits 7:5 = 000 ACK, 001 RNR NAK, 011 NAK.
inline constexpr std::uint8_t kAethTypeMask = 0xE0;
inline constexpr std::uint8_t kAethAck = 0x00, kAethRnrNak = 0x20, kAethNak = 0x60;
inline constexpr std::uint8_t kAethNakPsnSeqError = 0x60, kAethNakInvalidRequest = 0x61,
                              kAethNakRemoteAccess = 0x62, kAethNakRemoteOperational = 0x63;
inline constexpr std::uint8_t kAethAckUnlimitedCredits = 0x1F;

template <class B>
class AethView {
 public:
  explicit AethView(B* p) : p_(p) {}
  std::uint8_t syndrome() const { return p_[aeth_off::kSyndrome]; }
  std::uint32_t msn() const { return load_be24(p_ + aeth_off::kMsn); }
  void set_syndrome(std::uint8_t v) ROCEDP_SETTER { p_[aeth_off::kSyndrome] = v; }
  void set_msn(std::uint32_t v) ROCEDP_SETTER { store_be24(p_ + aeth_off::kMsn, v & 0xFFFFFF); }

 private:
  B* p_;
};

template <class B>
class AtomicEthView {
 public:
  explicit AtomicEthView(B* p) : p_(p) {}
  std::uint64_t va() const { return load_be64(p_ + atmeth_off::kVa); }
  std::uint32_t rkey() const { return load_be32(p_ + atmeth_off::kRkey); }
  std::uint64_t swap_add() const { return load_be64(p_ + atmeth_off::kSwapAdd); }
  std::uint64_t compare() const { return load_be64(p_ + atmeth_off::kCompare); }
  void set_va(std::uint64_t v) ROCEDP_SETTER { store_be64(p_ + atmeth_off::kVa, v); }
  void set_rkey(std::uint32_t v) ROCEDP_SETTER { store_be32(p_ + atmeth_off::kRkey, v); }
  void set_swap_add(std::uint64_t v) ROCEDP_SETTER { store_be64(p_ + atmeth_off::kSwapAdd, v); }
  void set_compare(std::uint64_t v) ROCEDP_SETTER { store_be64(p_ + atmeth_off::kCompare, v); }

 private:
  B* p_;
};

template <class B>
class AtomicAckEthView {
 public:
  explicit AtomicAckEthView(B* p) : p_(p) {}
  std::uint64_t orig() const { return load_be64(p_); }
  void set_orig(std::uint64_t v) ROCEDP_SETTER { store_be64(p_, v); }

 private:
  B* p_;
};

// ImmDt and IETH are a single 32-bit big-endian word.
template <class B>
class Be32View {
 public:
  explicit Be32View(B* p) : p_(p) {}
  std::uint32_t value() const { return load_be32(p_); }
  void set_value(std::uint32_t v) ROCEDP_SETTER { store_be32(p_, v); }

 private:
  B* p_;
};
template <class B>
using ImmDtView = Be32View<B>;
template <class B>
using IethView = Be32View<B>;

template <class B>
class DethView {
 public:
  explicit DethView(B* p) : p_(p) {}
  std::uint32_t qkey() const { return load_be32(p_ + deth_off::kQkey); }
  std::uint8_t resv8() const { return p_[deth_off::kResv]; }
  std::uint32_t src_qp() const { return load_be24(p_ + deth_off::kSrcQp); }
  void set_qkey(std::uint32_t v) ROCEDP_SETTER { store_be32(p_ + deth_off::kQkey, v); }
  void set_resv8(std::uint8_t v) ROCEDP_SETTER { p_[deth_off::kResv] = v; }
  void set_src_qp(std::uint32_t v) ROCEDP_SETTER {
    store_be24(p_ + deth_off::kSrcQp, v & 0xFFFFFF);
  }

 private:
  B* p_;
};

#undef ROCEDP_SETTER

// GSI (QP1) Q_Key (IBTA §13.5.1; rxe GSI_QKEY).
inline constexpr std::uint32_t kGsiQkey = 0x80010000;

struct RethFields {
  std::uint64_t va = 0;
  std::uint32_t rkey = 0;
  std::uint32_t dma_len = 0;
  friend bool operator==(const RethFields&, const RethFields&) = default;
};
struct AethFields {
  std::uint8_t syndrome = 0;
  std::uint32_t msn = 0;
  friend bool operator==(const AethFields&, const AethFields&) = default;
};
struct AtomicEthFields {
  std::uint64_t va = 0;
  std::uint32_t rkey = 0;
  std::uint64_t swap_add = 0;
  std::uint64_t compare = 0;
  friend bool operator==(const AtomicEthFields&, const AtomicEthFields&) = default;
};
struct AtomicAckEthFields {
  std::uint64_t orig = 0;
  friend bool operator==(const AtomicAckEthFields&, const AtomicAckEthFields&) = default;
};
struct DethFields {
  std::uint32_t qkey = 0;
  std::uint8_t resv8 = 0;
  std::uint32_t src_qp = 0;
  friend bool operator==(const DethFields&, const DethFields&) = default;
};

}  // namespace rocedp::wire
