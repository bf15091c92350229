#include "dataplane/wire/packet.hpp"

namespace rocedp::wire {

void decode_ext_headers(const std::uint8_t* bth, const OpcodeInfo& op, PacketFields& f) {
  using C = const std::uint8_t;
  if (op.has(Hdr::kDeth)) {
    DethView<C> v(bth + op.offset_of(Hdr::kDeth));
    f.deth = DethFields{v.qkey(), v.resv8(), v.src_qp()};
  }
  if (op.has(Hdr::kReth)) {
    RethView<C> v(bth + op.offset_of(Hdr::kReth));
    f.reth = RethFields{v.va(), v.rkey(), v.dma_len()};
  }
  if (op.has(Hdr::kAtomicEth)) {
    AtomicEthView<C> v(bth + op.offset_of(Hdr::kAtomicEth));
    f.atomic_eth = AtomicEthFields{v.va(), v.rkey(), v.swap_add(), v.compare()};
  }
  if (op.has(Hdr::kAeth)) {
    AethView<C> v(bth + op.offset_of(Hdr::kAeth));
    f.aeth = AethFields{v.syndrome(), v.msn()};
  }
  if (op.has(Hdr::kAtomicAckEth))
    f.atomic_ack_eth.orig = AtomicAckEthView<C>(bth + op.offset_of(Hdr::kAtomicAckEth)).orig();
  if (op.has(Hdr::kImmDt)) f.imm = ImmDtView<C>(bth + op.offset_of(Hdr::kImmDt)).value();
  if (op.has(Hdr::kIeth)) f.ieth_rkey = IethView<C>(bth + op.offset_of(Hdr::kIeth)).value();
}

void encode_ext_headers(std::uint8_t* bth, const OpcodeInfo& op, const PacketFields& f) {
  using M = std::uint8_t;
  if (op.has(Hdr::kDeth)) {
    DethView<M> v(bth + op.offset_of(Hdr::kDeth));
    v.set_qkey(f.deth.qkey);
    v.set_resv8(f.deth.resv8);
    v.set_src_qp(f.deth.src_qp);
  }
  if (op.has(Hdr::kReth)) {
    RethView<M> v(bth + op.offset_of(Hdr::kReth));
    v.set_va(f.reth.va);
    v.set_rkey(f.reth.rkey);
    v.set_dma_len(f.reth.dma_len);
  }
  if (op.has(Hdr::kAtomicEth)) {
    AtomicEthView<M> v(bth + op.offset_of(Hdr::kAtomicEth));
    v.set_va(f.atomic_eth.va);
    v.set_rkey(f.atomic_eth.rkey);
    v.set_swap_add(f.atomic_eth.swap_add);
    v.set_compare(f.atomic_eth.compare);
  }
  if (op.has(Hdr::kAeth)) {
    AethView<M> v(bth + op.offset_of(Hdr::kAeth));
    v.set_syndrome(f.aeth.syndrome);
    v.set_msn(f.aeth.msn);
  }
  if (op.has(Hdr::kAtomicAckEth))
    AtomicAckEthView<M>(bth + op.offset_of(Hdr::kAtomicAckEth)).set_orig(f.atomic_ack_eth.orig);
  if (op.has(Hdr::kImmDt)) ImmDtView<M>(bth + op.offset_of(Hdr::kImmDt)).set_value(f.imm);
  if (op.has(Hdr::kIeth)) IethView<M>(bth + op.offset_of(Hdr::kIeth)).set_value(f.ieth_rkey);
}

}  // namespace rocedp::wire
