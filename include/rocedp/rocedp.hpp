#pragma once
// Everything a consumer of rocedp uses: open an adapter (runtime.hpp), then the NDK-shaped
// objects (adapter.hpp) and connection management (listener.hpp, connector.hpp,
// shared_endpoint.hpp; memory_service.hpp for rocedpd's memory service; perftest.hpp for
// perftest's set-up messages). No DPDK header and no internal header is reached from here.

#include "rocedp/adapter.hpp"
#include "rocedp/config.hpp"
#include "rocedp/connection_manager.hpp"
#include "rocedp/connector.hpp"
#include "rocedp/listener.hpp"
#include "rocedp/memory_service.hpp"
#include "rocedp/ndk_types.hpp"
#include "rocedp/perftest.hpp"
#include "rocedp/runtime.hpp"
#include "rocedp/shared_endpoint.hpp"
#include "rocedp/status.hpp"
