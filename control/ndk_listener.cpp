// NDK_LISTENER (rocedp/listener.hpp) and the passive half of connection setup: a REQ for a
// listening port becomes a connector handed out through the ConnectEvent. Control thread only.

#include <algorithm>
#include <new>

#include "control/cm_agent.hpp"
#include "control/ndk_internal.hpp"

namespace rocedp {

using ndk_detail::Access;

using control::agent_of;
using control::CmAgent;
using control::ConnPhase;

NTSTATUS create_listener(Adapter& adapter, NdkConnectEventCallback connect_event,
                         void* connect_event_context, NdkCreateCompletion, void*, Listener** out) {
  ROCEDP_ON_CONTROL(&adapter, create_listener(adapter, connect_event, connect_event_context,
                                              nullptr, nullptr, out));
  if (out == nullptr || connect_event == nullptr) return STATUS_INVALID_PARAMETER;
  CmAgent* a = agent_of(adapter);
  if (a == nullptr || Access::closing(adapter)) return STATUS_INVALID_DEVICE_STATE;
  if (a->open_listeners >= impl_of(adapter).setup.limits.max_listeners)
    return STATUS_INSUFFICIENT_RESOURCES;
  auto* l = new (std::nothrow) Listener();
  auto* s = new (std::nothrow) Listener::State();
  if (l == nullptr || s == nullptr) {
    delete l;
    delete s;
    return STATUS_INSUFFICIENT_RESOURCES;
  }
  ndk_detail::init_header(*l, Listener::kType, &adapter);
  Access::state(*l) = s;
  s->agent = a;
  s->connect_event = connect_event;
  s->connect_event_context = connect_event_context;
  a->listeners().push_back(l);
  ++a->open_listeners;
  ++Access::children(adapter);
  *out = l;
  return STATUS_SUCCESS;
}

NTSTATUS Listener::listen(const NdkSockAddr& address, NdkRequestCompletion, void*) {
  ROCEDP_ON_CONTROL(this, listen(address, nullptr, nullptr));
  auto& s = *state_;
  if (closing || s.listening) return STATUS_INVALID_DEVICE_STATE;
  uint16_t port = 0;
  const NTSTATUS st = s.agent->registry().bind(control::ip_of(address), address.port,
                                               control::BindingOwner::kListener, &port);
  if (st != STATUS_SUCCESS) return st;
  s.local = address;
  s.local.port = port;
  s.listening = true;
  return STATUS_SUCCESS;
}

NTSTATUS Listener::get_local_address(NdkSockAddr* address, uint32_t* size) const {
  ROCEDP_ON_CONTROL(this, get_local_address(address, size));
  if (size == nullptr) return STATUS_INVALID_PARAMETER;
  const uint32_t need = sizeof(NdkSockAddr);
  const bool fits = *size >= need && address != nullptr;
  *size = need;
  if (!state_->listening) return STATUS_INVALID_DEVICE_STATE;
  if (!fits) return STATUS_BUFFER_TOO_SMALL;
  *address = state_->local;
  return STATUS_SUCCESS;
}

void Listener::control_connect_events(bool pause) {
  ROCEDP_ON_CONTROL_VOID(this, control_connect_events(pause));
  // Requests that arrive while paused are refused at once (CmAgent::route); nothing is held,
  // so resuming only lets the next request through.
  state_->paused = pause;
}

NTSTATUS Listener::close(NdkCloseCompletion, void*) {
  ROCEDP_ON_CONTROL(this, close(nullptr, nullptr));
  if (closing) return STATUS_INVALID_PARAMETER;
  closing = true;
  auto& s = *state_;
  CmAgent* a = s.agent;
  if (s.listening) a->registry().unbind(control::ip_of(s.local), s.local.port);
  s.listening = false;
  // Connections still being established are abandoned (their peer sees a REJ, a pending Accept
  // completes CONNECTION_ABORTED); requests not yet handed out are rejected.
  std::vector<Connector*> spawned;
  spawned.swap(s.spawned);
  for (Connector* c : spawned) control::abandon_by_listener(c);
  auto& ls = a->listeners();
  ls.erase(std::remove(ls.begin(), ls.end(), this), ls.end());
  --a->open_listeners;
  Adapter* ad = adapter;
  delete state_;
  delete this;
  ndk_detail::release_child(ad);
  a->run_deferred();
  return STATUS_SUCCESS;
}

}  // namespace rocedp
