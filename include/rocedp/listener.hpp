#pragma once
// NDK_LISTENER (NDK.md; seed 004 NdkCreateListener): one local address and ND port on which
// incoming IB CM REQs become connectors handed to the consumer's ConnectEvent callback.
// Threads: any thread may call; everything runs on the control thread
// (rocedp/connection_manager.hpp).

#include <cstdint>

#include "rocedp/adapter.hpp"
#include "rocedp/connection_manager.hpp"
#include "rocedp/ndk_types.hpp"

namespace rocedp {

class Listener;
class Connector;

/// NdkCreateListener. `connect_event` (required) runs on the control thread for each incoming
/// connection request, with a new connector to Accept or Reject (the consumer owns it and must
/// close it). STATUS_SUCCESS with *out (creation is inline; `completion` is never called, kept
/// for NDK's signature); STATUS_INSUFFICIENT_RESOURCES (limits.max_listeners open, or no
/// memory); STATUS_INVALID_PARAMETER (null callback or out); STATUS_INVALID_DEVICE_STATE (no
/// connection manager attached, or the adapter is closing).
NTSTATUS create_listener(Adapter& adapter, NdkConnectEventCallback connect_event,
                         void* connect_event_context, NdkCreateCompletion completion,
                         void* completion_context, Listener** out);

/// NDK_LISTENER.
class Listener : public NdkObjectBase {
 public:
  static constexpr NdkObjectType kType = NdkObjectType::kListener;

  /// NdkListen on `address` (IP 0 = every address of the adapter; port 0 = an ephemeral port,
  /// see get_local_address). STATUS_SUCCESS inline (`completion` not called);
  /// STATUS_SHARING_VIOLATION (address+port bound by a listener, shared endpoint or connector);
  /// STATUS_INVALID_ADDRESS (IP not the adapter's); STATUS_TOO_MANY_ADDRESSES (port 0 and no
  /// ephemeral port left); STATUS_INSUFFICIENT_RESOURCES (binding table full);
  /// STATUS_INVALID_DEVICE_STATE (already listening, or closing).
  NTSTATUS listen(const NdkSockAddr& address, NdkRequestCompletion completion, void* context);

  /// NdkGetListenerAddress: STATUS_SUCCESS; STATUS_BUFFER_TOO_SMALL if *size <
  /// sizeof(NdkSockAddr) (*size is always set to the size needed); STATUS_INVALID_DEVICE_STATE
  /// (not listening).
  NTSTATUS get_local_address(NdkSockAddr* address, uint32_t* size) const;

  /// NdkControlConnectEvents: while paused (true) the listener treats incoming requests as if
  /// it did not exist: the peer gets the no-listener REJ (reason 8, invalid service ID; its
  /// Connect completes STATUS_CONNECTION_REFUSED) and no ConnectEvent fires. Nothing is held:
  /// resuming (false) lets the next request through.
  void control_connect_events(bool pause);

  /// NdkCloseObject: stops listening (new REQs are rejected "invalid service ID"), rejects
  /// requests not yet handed out, and abandons connections it produced that are still being
  /// established and have no Accept completed (their pending Accept completes
  /// STATUS_CONNECTION_ABORTED, the peer sees a REJ). STATUS_SUCCESS (inline; `completion` is not
  /// called). No ConnectEvent fires after it, including from inside a ConnectEvent callback of this
  /// listener. A listener has no asynchronous request of its own (Listen completes inline), so its
  /// close never pends.
  NTSTATUS close(NdkCloseCompletion completion, void* context);

  struct State;  ///< the provider's state of the object (opaque here)

  // ---- provider internals (control thread) ----
 private:
  friend struct ndk_detail::Access;
  State* state_ = nullptr;
};

}  // namespace rocedp
