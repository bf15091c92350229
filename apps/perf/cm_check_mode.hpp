#pragma once
// rocedp-perf --cm-check: one end of the CM check against tests/interop/cm_check_peer.c (Linux
// librdmacm) or another rocedp-perf, through rdma_cm (the IB CM) on port -p (7476). It covers the
// connections that do not come about, which no data-path test reaches: who refuses, with which
// REJ and private data, and which status each side's consumer gets.
//   client (-c -a ADDR --expect E): connects once (no retry), its private data "rocedp-asks":
//     refused    Connect must end with STATUS_CONNECTION_REFUSED: no listener on the port (REJ
//                reason 8) or the server's consumer rejected (reason 28). With --peer-data TEXT
//                the REJ's private data (NdkGetConnectionData) must begin with TEXT.
//     aborted    Connect must succeed (the REP); --wait-ms later (2000) CompleteConnectEx must end
//                with STATUS_CONNECTION_ABORTED: the server abandoned the establishment meanwhile
//                (its REJ after the REP; NdkCompleteConnectEx, seed 000).
//     cancelled  the server does not answer: after --wait-ms the Connect must still be pending;
//                the connector is closed, Connect must end with STATUS_CANCELLED and the server
//                gets a REJ (reason 4, as cm.c rejects an abandoned REQ).
//     connected  however late the server answers (within --timeout), Connect and
//                CompleteConnectEx must succeed; then the server must disconnect.
//   server (-s --answer A): listens and answers the first request:
//     reject     NdkReject with the private data "rocedp-rejects" (REJ reason 28), after checking
//                with --peer-data TEXT that the request's private data begins with TEXT
//     abandon    NdkAccept (the REP leaves), then the connector is closed before the client's RTU
//                (REJ reason 28): the client's CompleteConnect must fail.
//     silent     no answer for --wait-ms (2000), while the client gives up (--expect cancelled
//                with a shorter wait): then NdkAccept must fail with STATUS_CONNECTION_ABORTED.
//     late       NdkAccept only after --wait-ms: past the client's REQ timeout its REQ comes
//                again, and our CM answers with an MRA (more time); the accept must succeed, then
//                the server disconnects.
// A client that meets a server not listening yet (refused without the expected private data, or
// refused where a REP is expected) tries again, up to 20 times 200 ms apart.
// Each side prints "rocedp-perf --cm-check: client|server: every check held" when it did.

#include "apps/perf/options.hpp"

namespace rocedp::perf {

/// Runs one end; the exit status (0 every check held, 1 failure, 3 time limit).
int run_cm_check(const CmCheckOptions& o);

}  // namespace rocedp::perf
