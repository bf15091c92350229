#pragma once
// NDK_CONNECTOR (NDK.md; seed 000 NdkCompleteConnectEx): one RC connection's establishment and
// teardown over IB CM (DESIGN.md §3):
//
//   active:  connect()/connect_with_shared_endpoint()  -> REQ
//            RequestCompletion(SUCCESS) when the REP arrives (GetConnectionData may look at it)
//            complete_connect()/complete_connect_ex()  -> QP to RTR/RTS on its core, then RTU
//            (or reject() after the REP, e.g. unacceptable read limits: REJ reason 28)
//   passive: ConnectEvent hands a connector; accept()/accept_ex() -> QP to RTR/RTS, then REP;
//            RequestCompletion(SUCCESS) when the RTU arrives; or reject() -> REJ
//   both:    disconnect() -> DREQ/DREP, the QP is flushed (outstanding work completes with
//            STATUS_CANCELLED); a peer's DREQ fires the disconnect callback and does NOT flush
//            the QP (NDK disconnect event pages: the consumer flushes, with Qp::flush or
//            disconnect()); the peer's death (the QP's transport retries ran out) fires the
//            disconnect callback with the QP already in error (its work completed by the
//            transport: the failing request with its error, the rest STATUS_CANCELLED).
//
// Threads: any thread may call (a call from another thread is handed to the control thread and
// waits for its inline status there, rocedp/connection_manager.hpp); every callback
// (RequestCompletion, DisconnectEvent, CloseCompletion) runs on the control thread, from
// poll_connections()/poll_control() or from a later poll. Callbacks must not block. A connector may
// be closed from inside any of its callbacks; close pends while a request is pending (that request
// completes first, see close()); nothing of it fires after its close completed.

#include <cstdint>

#include "rocedp/adapter.hpp"
#include "rocedp/connection_manager.hpp"
#include "rocedp/ndk_types.hpp"

namespace rocedp {

class SharedEndpoint;
class Connector;

/// NDK_FN_DISCONNECT_EVENT_CALLBACK_EX (NDKPI 2.1): the connection ended; fires once. `reason`
/// (NDK: a provider-specific code, 0 = no reason given) is STATUS_SUCCESS (0) when the peer
/// disconnected normally (DREQ), STATUS_IO_TIMEOUT when the peer stopped
/// answering (the QP's retries ran out), STATUS_CONNECTION_ABORTED when the peer's CM tore the
/// connection down otherwise (REJ / stale). Runs on the control thread; must not block.
using NdkDisconnectEventCallbackEx = void (*)(void* context, NTSTATUS reason);

/// The NDK_CONNECTOR a ConnectEvent delivers (rocedp's Connector derives from it).
struct NdkConnector : public NdkObjectBase {};

/// NdkCreateConnector. STATUS_SUCCESS with *out (inline; `completion` is never called);
/// STATUS_INSUFFICIENT_RESOURCES (limits.max_connectors open); STATUS_INVALID_PARAMETER (null
/// out); STATUS_INVALID_DEVICE_STATE (no connection manager attached).
NTSTATUS create_connector(Adapter& adapter, NdkCreateCompletion completion,
                          void* completion_context, Connector** out);

/// NDK_CONNECTOR.
class Connector : public NdkConnector {
 public:
  static constexpr NdkObjectType kType = NdkObjectType::kConnector;
  /// The connector a ConnectEvent handed out.
  static Connector* from(NdkConnector* c) { return static_cast<Connector*>(c); }

  /// NdkConnect: connects `qp` from `source` (an adapter IP; port 0 = ephemeral) to
  /// `destination`, with our read limits (IRL: reads we accept, ORL: reads we issue) and up to
  /// 56 bytes (MaxCallerData) of private data. STATUS_PENDING and `completion` (control thread)
  /// with STATUS_SUCCESS (the peer accepted: call complete_connect(_ex) or reject()),
  /// STATUS_CONNECTION_REFUSED (no listener, or the peer rejected: its REJ private data is in
  /// get_connection_data()), STATUS_IO_TIMEOUT (no answer after the CM retries),
  /// STATUS_HOST_UNREACHABLE (ARP got no answer). Inline (no callback): STATUS_HOST_UNREACHABLE
  /// (not resolvable: off-link, broadcast), STATUS_INVALID_ADDRESS (source IP not the
  /// adapter's), STATUS_SHARING_VIOLATION (source port bound), STATUS_TOO_MANY_ADDRESSES (port 0,
  /// ephemeral range exhausted), STATUS_ADDRESS_ALREADY_EXISTS (4-tuple in use or in TimeWait),
  /// STATUS_INVALID_PARAMETER (null QP/callback, private data > 56, read limits above the
  /// adapter's), STATUS_CONNECTION_ACTIVE (this connector already connected or connecting).
  NTSTATUS connect(Qp* qp, const NdkSockAddr& source, const NdkSockAddr& destination,
                   uint32_t inbound_read_limit, uint32_t outbound_read_limit,
                   const void* private_data, uint32_t private_data_length,
                   NdkRequestCompletion completion, void* context);

  /// NdkConnectWithSharedEndpoint: as connect() from the shared endpoint's address and port
  /// (many connectors may share it; each to a different destination). Same statuses minus
  /// SHARING_VIOLATION / INVALID_ADDRESS / TOO_MANY_ADDRESSES; STATUS_ADDRESS_ALREADY_EXISTS
  /// when a connection of this endpoint already goes to `destination`.
  NTSTATUS connect_with_shared_endpoint(Qp* qp, SharedEndpoint* endpoint,
                                        const NdkSockAddr& destination, uint32_t inbound_read_limit,
                                        uint32_t outbound_read_limit, const void* private_data,
                                        uint32_t private_data_length,
                                        NdkRequestCompletion completion, void* context);

  /// NdkCompleteConnect: the active side finishes after the peer accepted. Installs
  /// `disconnect_event` (optional). STATUS_PENDING and `completion` with STATUS_SUCCESS
  /// (connected: QP in RTS, RTU sent), STATUS_CONNECTION_ABORTED (the peer abandoned the
  /// establishment meanwhile: REJ, DREQ, its connector or listener closed) or STATUS_IO_TIMEOUT.
  /// Asynchronously also STATUS_CONNECTION_INVALID (seed 000): the QP could not be connected by
  /// the time the request ran on its core (flushed, in error, already connected, closing); the
  /// peer gets a REJ. STATUS_CANCELLED if the connector is closed first.
  /// Inline: STATUS_CONNECTION_INVALID (no REP received yet, already connected, closed, a
  /// CompleteConnect in progress, or the QP given to Connect is closing or closed),
  /// STATUS_CONNECTION_ABORTED (the peer abandoned before this call), STATUS_IO_TIMEOUT (the
  /// peer stopped waiting for our RTU before this call), STATUS_INVALID_PARAMETER (null
  /// completion), STATUS_INSUFFICIENT_RESOURCES (the QP's core ring is full).
  NTSTATUS complete_connect(NdkDisconnectEventCallback disconnect_event, void* disconnect_context,
                            NdkRequestCompletion completion, void* context);
  /// NdkCompleteConnectEx (NDKPI 2.1, seed 000): complete_connect with a disconnect callback
  /// that also reports why the connection ended. Same statuses.
  NTSTATUS complete_connect_ex(NdkDisconnectEventCallbackEx disconnect_event,
                               void* disconnect_context, NdkRequestCompletion completion,
                               void* context);

  /// NdkAccept on a connector from a ConnectEvent: moves `qp` to RTR/RTS with the requester's
  /// QPN and PSN and sends the REP with up to 148 bytes (MaxCalleeData) of private data.
  /// STATUS_PENDING and `completion` with STATUS_SUCCESS (RTU arrived, or traffic did),
  /// STATUS_IO_TIMEOUT (the peer never completed: REP retries ran out) or
  /// STATUS_CONNECTION_ABORTED (the peer rejected, disconnected or went away first, or our
  /// listener closed). Inline: STATUS_CONNECTION_ABORTED (the peer already gave up),
  /// STATUS_CONNECTION_INVALID (not a passive connector with a pending request),
  /// STATUS_INVALID_PARAMETER (null QP/callback, private data > 148, limits above the adapter's).
  NTSTATUS accept(Qp* qp, uint32_t inbound_read_limit, uint32_t outbound_read_limit,
                  const void* private_data, uint32_t private_data_length,
                  NdkDisconnectEventCallback disconnect_event, void* disconnect_context,
                  NdkRequestCompletion completion, void* context);
  /// NdkAcceptEx (NDKPI 2.1): accept with the Ex disconnect callback. Same statuses.
  NTSTATUS accept_ex(Qp* qp, uint32_t inbound_read_limit, uint32_t outbound_read_limit,
                     const void* private_data, uint32_t private_data_length,
                     NdkDisconnectEventCallbackEx disconnect_event, void* disconnect_context,
                     NdkRequestCompletion completion, void* context);

  /// NdkReject (synchronous): passive before accept, or active after Connect completed
  /// (NDK allows it, e.g. for unacceptable read limits). Sends a REJ with reason 28 (consumer
  /// defined) and up to 148 bytes of private data. STATUS_SUCCESS; STATUS_CONNECTION_ABORTED
  /// (the peer already gave up); STATUS_CONNECTION_INVALID (nothing to reject);
  /// STATUS_INVALID_PARAMETER (private data > 148).
  NTSTATUS reject(const void* private_data, uint32_t private_data_length);

  /// NdkGetConnectionData: the effective read limits, min(ours, the peer's, the adapter's)
  /// (before our accept/complete: min(the peer's, the adapter's)), and the peer's private data
  /// (REQ: 56 bytes after the rdma_cm header; REP: 196; REJ: 148 — IB CM carries no length, so
  /// the whole field). Null limit pointers are allowed. *private_data_length is always set to
  /// the size needed; a null buffer with length 0 is a size query (STATUS_SUCCESS).
  /// STATUS_SUCCESS; STATUS_BUFFER_TOO_SMALL (buffer shorter than the data: limits are still
  /// written); STATUS_CONNECTION_INVALID (no peer message yet); STATUS_INVALID_PARAMETER (null
  /// length).
  NTSTATUS get_connection_data(uint32_t* inbound_read_limit, uint32_t* outbound_read_limit,
                               void* private_data, uint32_t* private_data_length) const;

  /// NdkGetLocalAddress / NdkGetPeerAddress: STATUS_SUCCESS; STATUS_BUFFER_TOO_SMALL if *size <
  /// sizeof(NdkSockAddr) (*size is always set); STATUS_CONNECTION_INVALID (not connecting or
  /// connected yet).
  NTSTATUS get_local_address(NdkSockAddr* address, uint32_t* size) const;
  NTSTATUS get_peer_address(NdkSockAddr* address, uint32_t* size) const;

  /// NdkDisconnect: sends the DREQ and flushes the QP (outstanding work completes with
  /// STATUS_CANCELLED). STATUS_PENDING and `completion` with STATUS_SUCCESS (DREP, or the peer
  /// disconnected at the same time) or STATUS_IO_TIMEOUT (no DREP after the retries), or
  /// STATUS_CANCELLED if the connector is closed first.
  /// Inline: STATUS_SUCCESS (the peer already disconnected, or it died: the QP is flushed now),
  /// STATUS_CONNECTION_INVALID (never connected), STATUS_INVALID_PARAMETER (null completion).
  NTSTATUS disconnect(NdkRequestCompletion completion, void* context);

  /// NDK_FN_DISCONNECT_EX: `abortive` false is disconnect(). `abortive` true ends the connection
  /// without waiting for the peer: the DREQ leaves (the CM finishes that exchange on its own; no
  /// DREP is awaited by this call), the QP is
  /// flushed (outstanding work completes with STATUS_CANCELLED) and the call completes inline
  /// with STATUS_SUCCESS (`completion` is not called); a graceful Disconnect still pending
  /// completes STATUS_SUCCESS first. The peer sees a disconnect event. STATUS_SUCCESS also when
  /// the peer already disconnected; STATUS_CONNECTION_INVALID (never connected);
  /// STATUS_INVALID_PARAMETER (null completion).
  NTSTATUS disconnect_ex(bool abortive, NdkRequestCompletion completion, void* context);

  /// NdkCloseObject: ends the connection if any (REJ before establishment, DREQ after; the QP is
  /// flushed). NDKPI object lifetime: the close does not complete before every pending request
  /// of the connector has. STATUS_SUCCESS (inline, `completion` not called) when nothing is
  /// pending; otherwise STATUS_PENDING: the pending Connect/Accept/CompleteConnect/Disconnect
  /// completes once with STATUS_CANCELLED (a completion already decided keeps its status), then
  /// `completion` runs; both on the control thread from a later poll_connections(), never inside
  /// this call. No disconnect event fires after the call. STATUS_INVALID_PARAMETER (closing).
  NTSTATUS close(NdkCloseCompletion completion, void* context);

  struct State;  ///< the provider's state of the object (opaque here)

  // ---- provider internals (control thread) ----
 private:
  friend struct ndk_detail::Access;
  State* state_ = nullptr;
};

}  // namespace rocedp
