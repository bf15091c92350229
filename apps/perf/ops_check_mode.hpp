#pragma once
// rocedp-perf --ops-check: one end of the ops check against tests/interop/ops_check_peer.c (the
// Linux side, libibverbs and librdmacm) or another rocedp-perf, through rdma_cm (the IB CM) on
// port -p (7475). It covers the requests that no Linux example tool sends. The script:
//   server: a 64 KiB buffer; 5 receives of 4 KiB (slots 0..4); accepts; arms its CQ for solicited
//     completions; binds a memory window over [24 KiB, 28 KiB) for remote READ and WRITE; SENDs 24
//     bytes, big-endian: the WRITE target's address (16 KiB in) and the region's token, the
//     window's address and token.
//   client: after those 24 bytes, one request at a time, each awaited:
//     1. SEND with immediate 0x5EED0001, 3000 bytes of pattern 1
//     2. RDMA WRITE with immediate 0x5EED0002, 3000 bytes of pattern 2 to the target
//     3. RDMA WRITE, 512 bytes of pattern 3 through the window, then an RDMA READ of them back
//        through the window (the client checks what it read)
//     4. after the server's go-ahead (a 4-byte SEND, once it saw receive 2 raise no CQ
//        notification), SEND with the solicited event bit, 64 bytes of pattern 6; then it waits
//        for a second go-ahead (the server saw the notification)
//     5. SEND with Invalidate of the window's token, 64 bytes of pattern 4
//     6. RDMA WRITE, 64 bytes of pattern 5 through the invalidated window: must complete with
//        STATUS_ACCESS_VIOLATION (the server's NAK: remote access error)
//   server: receive 1 carries the immediate and the bytes; receive 2 (the WRITE's) the immediate,
//     the target the bytes; neither notifies the CQ, receive 3 (solicited) does, once; receive 4
//     completes as kReceiveAndInvalidate with the window's token, and the window holds pattern 3;
//     after the refused WRITE (the last receive flushed, or the peer gone) the window still holds
//     pattern 3.
// With --fast-register (server) the window is a region fast-registered by a FastRegister work
// request (NdkFastRegister, as SMB Direct offers its buffers) instead of a memory window.
// Pattern k, byte i: (k * 37 + i * 13 + (i >> 8)) & 0xff.

#include "apps/perf/options.hpp"

namespace rocedp::perf {

/// Runs the --ops-check mode. Returns the exit status: 0 every check held, 1 one failed (printed),
/// 3 time limit (--timeout) reached.
int run_ops_check(const OpsCheckOptions& o);

}  // namespace rocedp::perf
