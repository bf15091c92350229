#pragma once
// NDK_SHARED_ENDPOINT (NDK.md; seed 003 NdkCreateSharedEndpoint): one local address and ND port
// used by many outgoing connections to different remote addresses (ConnectWithSharedEndpoint);
// each connection's 4-tuple must be unique. The outgoing twin of a listener.
// Threads: any thread may call; everything runs on the control thread
// (rocedp/connection_manager.hpp).

#include <cstdint>

#include "rocedp/adapter.hpp"
#include "rocedp/connection_manager.hpp"
#include "rocedp/ndk_types.hpp"

namespace rocedp {

/// NDK_SHARED_ENDPOINT.
class SharedEndpoint : public NdkObjectBase {
 public:
  static constexpr NdkObjectType kType = NdkObjectType::kSharedEndpoint;

  /// NdkGetSharedEndpointAddress: STATUS_SUCCESS; STATUS_BUFFER_TOO_SMALL if *size <
  /// sizeof(NdkSockAddr) (*size is always set to the size needed).
  NTSTATUS get_local_address(NdkSockAddr* address, uint32_t* size) const;

  /// NdkCloseObject: STATUS_SUCCESS (inline; `completion` is not called). Connectors that
  /// connected through it keep using the address; it is released when the last of them closes.
  /// Connecting through it after close fails STATUS_INVALID_PARAMETER.
  NTSTATUS close(NdkCloseCompletion completion, void* context);

  // ---- provider internals (control thread) ----
 private:
  friend struct ndk_detail::Access;
  NdkSockAddr address_{};
  uint32_t users_ = 0;  ///< connectors connected through it and not yet closed
};

/// NdkCreateSharedEndpoint on `address` (an IP of the adapter; port 0 = an ephemeral port).
/// STATUS_SUCCESS with *out (inline; `completion` is never called);
/// STATUS_SHARING_VIOLATION (address+port in use); STATUS_INVALID_ADDRESS (IP 0 or not the
/// adapter's); STATUS_TOO_MANY_ADDRESSES (port 0 and no port of 49152-65535 left);
/// STATUS_INSUFFICIENT_RESOURCES (limits.max_shared_endpoints open, or the binding table full);
/// STATUS_INVALID_PARAMETER (null out); STATUS_INVALID_DEVICE_STATE (no connection manager).
NTSTATUS create_shared_endpoint(Adapter& adapter, const NdkSockAddr& address,
                                NdkCreateCompletion completion, void* completion_context,
                                SharedEndpoint** out);

}  // namespace rocedp
