#pragma once
// The connection both CM state-machine harnesses set up (tests/cm/test_cm_connection.cpp and
// tests/fuzz/fuzz_cm_connection.cpp): active side A (10.0.0.1, QP 0x11) connects to passive side
// B (10.0.0.2, port 445, QP 0x22).
#include <cstdint>
#include <span>

#include "control/cm_connection.hpp"

namespace rocedp::control::test {

inline constexpr std::uint32_t kPassiveCommId = 0xB0000002;
inline std::uint64_t passive_ca_guid() {
  return wire::ca_guid_from_mac({0x02, 0, 0, 0, 0, 2});
}

inline CmConnectParams pair_connect_params(std::span<const std::uint8_t> private_data) {
  CmConnectParams p;
  p.local_comm_id = 0xA0000001;
  p.local_ca_guid = wire::ca_guid_from_mac({0x02, 0, 0, 0, 0, 1});
  p.local_qpn = 0x11;
  p.starting_psn = 0xAAAAAA;
  p.src_ip = 0x0A000001;
  p.dst_ip = 0x0A000002;
  p.src_port = 50000;
  p.dst_port = 445;
  p.responder_resources = 4;
  p.initiator_depth = 8;
  p.cm_response_timeout = 20;
  p.max_cm_retries = 15;
  p.private_data = private_data;
  return p;
}

inline CmAcceptParams pair_accept_params(std::span<const std::uint8_t> private_data) {
  CmAcceptParams p;
  p.local_qpn = 0x22;
  p.starting_psn = 0xBBBBBB;
  p.responder_resources = 2;
  p.initiator_depth = 3;
  p.private_data = private_data;
  return p;
}

}  // namespace rocedp::control::test
