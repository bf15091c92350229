#include "dataplane/wire/decode.hpp"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <vector>

#include "dataplane/wire/builder.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/mad.hpp"
#include "dataplane/wire/parser.hpp"
#include "dataplane/wire/pcap_io.hpp"

namespace rocedp::wire {

namespace {

std::string ip_str(std::uint32_t a) {
  char b[16];
  std::snprintf(b, sizeof b, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xFF, (a >> 8) & 0xFF, a & 0xFF);
  return b;
}

void appendf(std::string& s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string& s, const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0)
    s.append(buf, static_cast<std::size_t>(n) < sizeof buf ? static_cast<std::size_t>(n)
                                                           : sizeof buf - 1);
}

std::string aeth_str(const AethFields& a) {
  std::string s;
  switch (a.syndrome & kAethTypeMask) {
    case kAethAck:
      appendf(s, "ACK credits=%u", a.syndrome & 0x1F);
      break;
    case kAethRnrNak:
      appendf(s, "RNR_NAK timer=%u", a.syndrome & 0x1F);
      break;
    case kAethNak:
      appendf(s, "NAK code=%u", a.syndrome & 0x1F);
      break;
    default:
      appendf(s, "syndrome=0x%02x", a.syndrome);
      break;
  }
  appendf(s, " msn=%u", a.msn);
  return s;
}

std::string_view ethertype_name(std::uint16_t t) {
  switch (t) {
    case kEtherTypeArp:
      return "ARP";
    case kEtherTypeIpv4:
      return "IPv4";
    case kEtherTypeIpv6:
      return "IPv6";
    default:
      return "other";
  }
}

}  // namespace

FrameVerdict check_frame(Bytes frame) {
  FrameVerdict v;
  v.reason = parse(frame, v.pkt);
  if (v.reason == DropReason::kNotRoce) {
    v.kind = FrameKind::kSkipped;
    return v;
  }
  if (v.reason != DropReason::kNone) {
    v.kind = FrameKind::kFailed;
    if (v.reason == DropReason::kBadIcrc) {
      const ParsedPacket& p = v.pkt;
      v.icrc_computed = icrc_compute(frame.subspan(p.l3_offset, p.l3_end - kIcrcLen - p.l3_offset));
    }
    return v;
  }
  const ParsedPacket& p = v.pkt;
  if (p.f.bth.dqpn == kGsiQpn && p.f.bth.opcode == opcode::kUdSendOnly) {
    if (auto mad = decode_mad_header(p.payload())) v.cm_message = cm_message_name(*mad);
  }
  // Re-encode from the decoded fields alone (lengths, checksum and ICRC recomputed).
  std::vector<std::uint8_t> out(p.l3_end);
  const std::size_t n = build_frame(out, p.f, p.payload());
  v.roundtrip_ok = n == p.l3_end && std::memcmp(out.data(), frame.data(), n) == 0;
  if (!v.roundtrip_ok) {
    std::size_t i = 0;
    while (i < n && i < frame.size() && out[i] == frame[i]) ++i;
    v.mismatch_at = i;
  }
  v.kind = v.roundtrip_ok ? FrameKind::kRoce : FrameKind::kFailed;
  return v;
}

std::string describe_frame(std::size_t frame_no, const FrameVerdict& v) {
  std::string s;
  appendf(s, "#%zu ", frame_no);
  const ParsedPacket& p = v.pkt;
  const PacketFields& f = p.f;
  if (v.kind == FrameKind::kSkipped) {
    appendf(s, "skipped: not RoCEv2 (%.*s)",
            static_cast<int>(ethertype_name(f.eth.ethertype).size()),
            ethertype_name(f.eth.ethertype).data());
    return s;
  }
  if (v.kind == FrameKind::kFailed && v.reason != DropReason::kNone) {
    const auto name = drop_reason_name(v.reason);
    const auto desc = drop_reason_description(v.reason);
    appendf(s, "FAIL %.*s (%.*s)", static_cast<int>(name.size()), name.data(),
            static_cast<int>(desc.size()), desc.data());
    if (v.reason == DropReason::kBadIcrc)
      appendf(s, ": stored 0x%08x, computed 0x%08x", p.icrc, v.icrc_computed);
    if (p.op != nullptr)
      appendf(s, " opcode %.*s", static_cast<int>(p.op->name.size()), p.op->name.data());
    return s;
  }
  const std::string_view name = p.op->name;
  appendf(s, "%.*s %s:%u -> %s QPN 0x%06x PSN %u AckReq=%d", static_cast<int>(name.size()),
          name.data(), ip_str(f.ip.src).c_str(), f.udp.src_port, ip_str(f.ip.dst).c_str(),
          f.bth.dqpn, f.bth.psn, f.bth.ack_req ? 1 : 0);
  appendf(s, " | BTH[se=%d m=%d pad=%u tver=%u pkey=0x%04x fecn=%d becn=%d]", f.bth.se, f.bth.mig,
          f.bth.pad, f.bth.tver, f.bth.pkey, f.bth.fecn, f.bth.becn);
  const OpcodeInfo& op = *p.op;
  if (op.has(Hdr::kDeth)) appendf(s, " DETH[qkey=0x%08x srcqp=0x%06x]", f.deth.qkey, f.deth.src_qp);
  if (op.has(Hdr::kReth))
    appendf(s, " RETH[va=0x%016" PRIx64 " rkey=0x%08x len=%u]", f.reth.va, f.reth.rkey,
            f.reth.dma_len);
  if (op.has(Hdr::kAtomicEth))
    appendf(s,
            " AtomicETH[va=0x%016" PRIx64 " rkey=0x%08x swap_add=0x%" PRIx64 " compare=0x%" PRIx64
            "]",
            f.atomic_eth.va, f.atomic_eth.rkey, f.atomic_eth.swap_add, f.atomic_eth.compare);
  if (op.has(Hdr::kAeth)) appendf(s, " AETH[%s]", aeth_str(f.aeth).c_str());
  if (op.has(Hdr::kAtomicAckEth))
    appendf(s, " AtomicAckETH[orig=0x%" PRIx64 "]", f.atomic_ack_eth.orig);
  if (op.has(Hdr::kImmDt)) appendf(s, " ImmDt[0x%08x]", f.imm);
  if (op.has(Hdr::kIeth)) appendf(s, " IETH[rkey=0x%08x]", f.ieth_rkey);
  appendf(s, " | payload %u", p.payload_len);
  if (f.bth.dqpn == kGsiQpn) {
    if (auto mad = decode_mad_header(p.payload())) {
      appendf(
          s,
          " | MAD[class=0x%02x ver=%u method=0x%02x status=0x%04x tid=0x%016" PRIx64 " attr=0x%04x",
          mad->mgmt_class, mad->class_version, mad->method, mad->status, mad->tid, mad->attr_id);
      if (!v.cm_message.empty())
        appendf(s, " CM %.*s", static_cast<int>(v.cm_message.size()), v.cm_message.data());
      s += "]";
    }
  }
  appendf(s, " | ICRC 0x%08x ok", p.icrc);
  if (v.roundtrip_ok) {
    s += ", round-trip ok";
  } else {
    appendf(s, " | FAIL round-trip: re-encoded bytes differ at offset %zu", v.mismatch_at);
  }
  return s;
}

bool decode_capture(const std::string& path, std::ostream* out, DecodeStats& stats,
                    std::string& error) {
  PcapReader reader;
  if (!reader.open(path)) {
    error = reader.error();
    return false;
  }
  PcapFrame frame;
  while (reader.next(frame)) {
    ++stats.frames;
    const FrameVerdict v = check_frame(frame.data);
    switch (v.kind) {
      case FrameKind::kRoce: {
        ++stats.roce;
        std::string key =
            v.cm_message.empty() ? std::string(v.pkt.op->name) : "CM " + std::string(v.cm_message);
        ++stats.by_type[key];
        break;
      }
      case FrameKind::kSkipped:
        ++stats.skipped;
        break;
      case FrameKind::kFailed:
        ++stats.failed;
        break;
    }
    if (out) *out << describe_frame(stats.frames, v) << '\n';
  }
  if (!reader.error().empty()) {
    error = reader.error();
    return false;
  }
  return true;
}

}  // namespace rocedp::wire
