#include "dataplane/wire/builder.hpp"

#include <cstring>

#include "dataplane/wire/icrc.hpp"

namespace rocedp::wire {

std::size_t header_len(const PacketFields& f) {
  const OpcodeInfo* op = opcode_info(f.bth.opcode);
  if (op == nullptr) return 0;
  return f.eth.header_len() + f.ip_header_len() + kUdpHdrLen + op->length;
}

std::size_t frame_len(const PacketFields& f, std::size_t payload_len) {
  const std::size_t h = header_len(f);
  return h == 0 ? 0 : h + payload_len + f.bth.pad + kIcrcLen;
}

HeaderSpan write_headers(MutBytes headroom, const PacketFields& f, std::size_t payload_len,
                         const BuildOptions& opts) {
  const OpcodeInfo* op = opcode_info(f.bth.opcode);
  const std::size_t hlen = header_len(f);
  if (op == nullptr || hlen > headroom.size() || (!f.ipv6() && f.ip.ihl < 5)) return {};
  std::uint8_t* p = headroom.data() + headroom.size() - hlen;
  const std::size_t l3 = f.eth.header_len();
  const std::size_t ip_len = f.ip_header_len();
  const std::size_t l4 = l3 + ip_len;

  encode_eth(p, f.eth);
  UdpFields udp = f.udp;
  const std::size_t l4_len = kUdpHdrLen + op->length + payload_len + f.bth.pad + kIcrcLen;
  if (opts.fill_lengths) udp.length = static_cast<std::uint16_t>(l4_len);
  if (f.ipv6()) {
    Ipv6Fields ip = f.ip6;
    if (opts.fill_lengths) ip.payload_len = static_cast<std::uint16_t>(l4_len);
    encode_ipv6(p + l3, ip);  // no header checksum in IPv6
  } else {
    Ipv4Fields ip = f.ip;
    if (opts.fill_lengths) ip.total_len = static_cast<std::uint16_t>(ip_len + l4_len);
    encode_ipv4(p + l3, ip);
    if (opts.fill_ip_checksum)
      Ipv4View<std::uint8_t>(p + l3).set_checksum(ipv4_header_checksum(p + l3, ip_len));
  }
  encode_udp(p + l4, udp);
  std::uint8_t* bth = p + l4 + kUdpHdrLen;
  encode_bth(bth, f.bth);
  encode_ext_headers(bth, *op, f);
  return HeaderSpan{MutBytes(p, hlen), l3};
}

std::size_t finish_packet(MutBytes tail, const HeaderSpan& hs, std::span<const Bytes> payload,
                          std::uint8_t pad, const BuildOptions& opts) {
  const std::size_t need = std::size_t{pad} + kIcrcLen;
  if (tail.size() < need || hs.headers.empty()) return 0;
  std::memset(tail.data(), 0, pad);
  std::uint32_t icrc = opts.icrc;
  if (opts.fill_icrc) {
    // Headers from hs (only the masked prefix is copied), then each payload
    // segment in place, then the pad we just zeroed.
    icrc = icrc_extend(icrc_compute(hs.l3(), payload), Bytes(tail.data(), pad));
  }
  store_le32(tail.data() + pad, icrc);
  return need;
}

std::size_t build_frame(MutBytes out, const PacketFields& f, Bytes payload,
                        const BuildOptions& opts) {
  const std::size_t total = frame_len(f, payload.size());
  if (total == 0 || total > out.size()) return 0;
  const std::size_t hlen = header_len(f);
  const HeaderSpan hs = write_headers(out.first(hlen), f, payload.size(), opts);
  if (hs.headers.empty()) return 0;
  if (!payload.empty()) std::memcpy(out.data() + hlen, payload.data(), payload.size());
  const Bytes pl(out.data() + hlen, payload.size());
  if (finish_packet(out.subspan(hlen + payload.size()), hs, {pl}, f.bth.pad, opts) == 0) return 0;
  return total;
}

}  // namespace rocedp::wire
