#pragma once
// One RC queue pair as telemetry shows it (/rocedp/qps): filled on the QP's owning core by a
// QpTableRead request (dataplane/core_channel.hpp), then read on the control thread.

#include <cstdint>
#include <string>

namespace rocedp::dataplane {

/// One RC queue pair, read on its owning core.
struct QpRow {
  uint32_t qpn = 0;
  uint32_t core = 0;
  std::string state;  // reset, init, rtr, rts, sqd, error
  std::string error;  // why it entered ERROR (rc::QpErrorReason's name), "" before
  uint32_t peer_qpn = 0;
  uint32_t sq_depth = 0, sq_in_use = 0;  // send queue: depth, requests posted and not completed
  uint32_t rq_depth = 0, rq_in_use = 0;  // receive queue (0 with an SRQ)
  uint32_t next_psn = 0, unacked_psn = 0, expected_psn = 0;
  uint32_t retries_used = 0;      // transport retries spent on the oldest unacknowledged PSN
  uint32_t rnr_retries_used = 0;  // RNR retries spent (7 = infinite: stays 0)
  uint32_t path_mtu = 0;
  uint32_t tos = 0;  // IPv4 ToS of its frames (DSCP << 2)
  // Loss recovery (rc::QpStats), since the QP was created.
  uint64_t retransmits = 0, timeouts = 0, naks_sent = 0, naks_received = 0, duplicates = 0,
           rnr_waits = 0;
  uint64_t timeout_wait_us = 0;      // idle time from the last packet sent to each timeout
  uint64_t srtt_ns = 0, rto_us = 0;  // smoothed RTT; the retransmission timeout now (0: none)
  uint64_t path_srtt_ns = 0;         // smoothed RTT of every QP of its core to the same peer
  // Congestion control (rc::CongestionState): the send rate a CNP set (0: unlimited), packets
  // that arrived marked CE, CNPs sent and received, rate cuts.
  uint64_t rate_mbps = 0, ce_received = 0, cnps_sent = 0, cnps_received = 0, rate_cuts = 0;
  std::string port;  // the port of its adapter (config ports[].name), set by the control thread
};

}  // namespace rocedp::dataplane
