#pragma once
// Packet capture inside the running process: the frames one port receives and sends, written to a
// pcapng file (DPDK's librte_pcapng, the format dpdk-dumpcap writes).
//
// Why inside: dpdk-dumpcap is a DPDK secondary process and needs the primary's memory shared
// through hugepage files; under --no-huge (every test and demo here) there is nothing to attach
// to. So rocedpd also captures by itself, on request over telemetry (`/rocedp/capture`, used by
// `rocedpctl capture`). With hugepages, rocedpd also initialises pdump, and dpdk-dumpcap works.
//
// How: ethdev RX/TX callbacks on every queue of the port copy each frame (rte_pcapng_copy, from a
// pool of their own) into a multi-producer ring; a writer thread drains it into the file. The
// callbacks exist only while a capture runs, so the data path pays nothing otherwise. A frame
// that finds the pool or the ring exhausted is not captured and is counted (`dropped`); the
// traffic itself is never held back. Stopping removes the callbacks, waits until no polling core
// can still be inside one, drains the ring and closes the file.

#include <cstdint>
#include <string>

struct rte_tel_data;

namespace rocedp::control {

struct CaptureStatus {
  bool active = false;       ///< callbacks installed, the writer runs
  uint16_t port_id = 0;      ///< the port of the last capture
  std::string path;          ///< the file of the last capture
  uint64_t written = 0;      ///< frames written to the file
  uint64_t dropped = 0;      ///< frames not captured (capture pool or ring full)
  uint64_t max_packets = 0;  ///< 0 = no limit; at the limit the capture stops by itself
  std::string error;  ///< why the last capture ended early (write error), empty if it did not
};

/// Any thread (not a polling core), after EAL init. Starts capturing `port_id` (every queue, both
/// directions) into `path` (created or truncated). One capture at a time. False and *error when a
/// capture runs already, the port does not exist, or the file, pool or ring cannot be made.
bool capture_start(uint16_t port_id, const std::string& path, uint64_t max_packets,
                   std::string* error);
/// Any thread (not a polling core). Stops the capture if one runs and closes the file; the frames
/// copied before the call are written. Call before the ports stop.
void capture_stop();
CaptureStatus capture_status();

/// Registers `/rocedp/capture` (once per process):
///   /rocedp/capture                          status: active, port, path, written, dropped, ...
///   /rocedp/capture,start,PORT,MAX,PATH      start (MAX 0 = until stopped); PATH may hold commas
///   /rocedp/capture,stop                     stop, then the final status
/// A refused start answers with the status and its `error`.
bool capture_register_telemetry(std::string* error);

}  // namespace rocedp::control
