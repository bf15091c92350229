// NDK_SHARED_ENDPOINT (rocedp/shared_endpoint.hpp): a registry binding shared by outgoing
// connections. Control thread only.

#include <new>

#include "control/cm_agent.hpp"
#include "control/ndk_internal.hpp"

namespace rocedp {

using ndk_detail::Access;

using control::agent_of;
using control::CmAgent;

NTSTATUS create_shared_endpoint(Adapter& adapter, const NdkSockAddr& address, NdkCreateCompletion,
                                void*, SharedEndpoint** out) {
  ROCEDP_ON_CONTROL(&adapter, create_shared_endpoint(adapter, address, nullptr, nullptr, out));
  if (out == nullptr) return STATUS_INVALID_PARAMETER;
  CmAgent* a = agent_of(adapter);
  if (a == nullptr || Access::closing(adapter)) return STATUS_INVALID_DEVICE_STATE;
  if (a->open_endpoints >= impl_of(adapter).setup.limits.max_shared_endpoints)
    return STATUS_INSUFFICIENT_RESOURCES;
  // A shared endpoint is a concrete local address (seed 003: "not a valid address for the
  // adapter"): the wildcard is for listeners only.
  if (control::ip_of(address).is_any()) return STATUS_INVALID_ADDRESS;
  uint16_t port = 0;
  const NTSTATUS st = a->registry().bind(control::ip_of(address), address.port,
                                         control::BindingOwner::kSharedEndpoint, &port);
  if (st != STATUS_SUCCESS) return st;
  auto* sep = new (std::nothrow) SharedEndpoint();
  if (sep == nullptr) {
    a->registry().unbind(control::ip_of(address), port);
    return STATUS_INSUFFICIENT_RESOURCES;
  }
  ndk_detail::init_header(*sep, SharedEndpoint::kType, &adapter);
  Access::address(*sep) = address;
  Access::address(*sep).port = port;
  ++a->open_endpoints;
  ++Access::children(adapter);
  *out = sep;
  return STATUS_SUCCESS;
}

NTSTATUS SharedEndpoint::get_local_address(NdkSockAddr* address, uint32_t* size) const {
  ROCEDP_ON_CONTROL(this, get_local_address(address, size));
  if (size == nullptr) return STATUS_INVALID_PARAMETER;
  const uint32_t need = sizeof(NdkSockAddr);
  const bool fits = *size >= need && address != nullptr;
  *size = need;
  if (!fits) return STATUS_BUFFER_TOO_SMALL;
  *address = address_;
  return STATUS_SUCCESS;
}

namespace control {
// The endpoint's binding and object go once it is closed and no connector uses it.
void shared_endpoint_maybe_free(SharedEndpoint* sep) {
  if (!Access::closing(*sep) || Access::users(*sep) != 0) return;
  Adapter* ad = Access::adapter(*sep);
  if (CmAgent* a = agent_of(*ad)) {
    a->registry().unbind(control::ip_of(Access::address(*sep)), Access::address(*sep).port);
    --a->open_endpoints;
  }
  delete sep;
  ndk_detail::release_child(ad);
}
}  // namespace control

NTSTATUS SharedEndpoint::close(NdkCloseCompletion, void*) {
  ROCEDP_ON_CONTROL(this, close(nullptr, nullptr));
  if (closing) return STATUS_INVALID_PARAMETER;
  closing = true;
  control::shared_endpoint_maybe_free(this);
  return STATUS_SUCCESS;
}

}  // namespace rocedp
