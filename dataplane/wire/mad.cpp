#include "dataplane/wire/mad.hpp"

namespace rocedp::wire {

std::optional<MadHeader> decode_mad_header(Bytes mad) {
  if (mad.size() < kMadHdrLen) return std::nullopt;
  const std::uint8_t* p = mad.data();
  MadHeader h;
  h.base_version = p[mad_off::kBaseVersion];
  h.mgmt_class = p[mad_off::kMgmtClass];
  h.class_version = p[mad_off::kClassVersion];
  h.method = p[mad_off::kMethod];
  h.status = load_be16(p + mad_off::kStatus);
  h.class_specific = load_be16(p + mad_off::kClassSpecific);
  h.tid = load_be64(p + mad_off::kTid);
  h.attr_id = load_be16(p + mad_off::kAttrId);
  h.resv = load_be16(p + mad_off::kResv);
  h.attr_mod = load_be32(p + mad_off::kAttrMod);
  return h;
}

void encode_mad_header(std::uint8_t* p, const MadHeader& h) {
  p[mad_off::kBaseVersion] = h.base_version;
  p[mad_off::kMgmtClass] = h.mgmt_class;
  p[mad_off::kClassVersion] = h.class_version;
  p[mad_off::kMethod] = h.method;
  store_be16(p + mad_off::kStatus, h.status);
  store_be16(p + mad_off::kClassSpecific, h.class_specific);
  store_be64(p + mad_off::kTid, h.tid);
  store_be16(p + mad_off::kAttrId, h.attr_id);
  store_be16(p + mad_off::kResv, h.resv);
  store_be32(p + mad_off::kAttrMod, h.attr_mod);
}

std::string_view cm_message_name(std::uint16_t attr_id) {
  switch (attr_id) {
    case cm_attr::kClassPortInfo:
      return "ClassPortInfo";
    case cm_attr::kReq:
      return "REQ";
    case cm_attr::kMra:
      return "MRA";
    case cm_attr::kRej:
      return "REJ";
    case cm_attr::kRep:
      return "REP";
    case cm_attr::kRtu:
      return "RTU";
    case cm_attr::kDreq:
      return "DREQ";
    case cm_attr::kDrep:
      return "DREP";
    case cm_attr::kSidrReq:
      return "SIDR_REQ";
    case cm_attr::kSidrRep:
      return "SIDR_REP";
    case cm_attr::kLap:
      return "LAP";
    case cm_attr::kApr:
      return "APR";
    default:
      return "";
  }
}

std::string_view cm_message_name(const MadHeader& h) {
  if (h.base_version != kMadBaseVersion || h.mgmt_class != kMgmtClassCm) return "";
  return cm_message_name(h.attr_id);
}

}  // namespace rocedp::wire
