#pragma once
// NTSTATUS, the status type of every rocedp API call and completion, with the values Windows
// defines (ntstatus.h; NDK's ndkpi.h and NetworkDirect's ndstatus.mc use the same numbers).
//
// The constants keep their Windows spelling (STATUS_*) instead of the house kName style on
// purpose: NDK documentation, ntstatus.h and logs from Windows peers all use these names, so
// code and test failures can be checked against them by grep.

#include <cstdint>
#include <string_view>

namespace rocedp {

/// A Windows NTSTATUS: bits 31..30 are the severity (00 success, 01 informational,
/// 10 warning, 11 error). Negative values are warnings or errors.
using NTSTATUS = int32_t;

// X-macro: one row per status rocedp can return. Values: Windows ntstatus.h.
#define ROCEDP_NTSTATUS_LIST(X)                 \
  X(STATUS_SUCCESS, 0x00000000)                 \
  X(STATUS_TIMEOUT, 0x00000102)                 \
  X(STATUS_PENDING, 0x00000103)                 \
  X(STATUS_BUFFER_OVERFLOW, 0x80000005)         \
  X(STATUS_ACCESS_VIOLATION, 0xC0000005)        \
  X(STATUS_INVALID_HANDLE, 0xC0000008)          \
  X(STATUS_INVALID_PARAMETER, 0xC000000D)       \
  X(STATUS_INVALID_DEVICE_REQUEST, 0xC0000010)  \
  X(STATUS_NO_MEMORY, 0xC0000017)               \
  X(STATUS_BUFFER_TOO_SMALL, 0xC0000023)        \
  X(STATUS_INVALID_PARAMETER_MIX, 0xC0000030)   \
  X(STATUS_DATA_OVERRUN, 0xC000003C)            \
  X(STATUS_SHARING_VIOLATION, 0xC0000043)       \
  X(STATUS_INSUFFICIENT_RESOURCES, 0xC000009A)  \
  X(STATUS_IO_TIMEOUT, 0xC00000B5)              \
  X(STATUS_NOT_SUPPORTED, 0xC00000BB)           \
  X(STATUS_INTERNAL_ERROR, 0xC00000E5)          \
  X(STATUS_CANCELLED, 0xC0000120)               \
  X(STATUS_REMOTE_RESOURCES, 0xC000013D)        \
  X(STATUS_INVALID_ADDRESS, 0xC0000141)         \
  X(STATUS_INVALID_DEVICE_STATE, 0xC0000184)    \
  X(STATUS_TOO_MANY_ADDRESSES, 0xC0000209)      \
  X(STATUS_ADDRESS_ALREADY_EXISTS, 0xC000020A)  \
  X(STATUS_CONNECTION_DISCONNECTED, 0xC000020C) \
  X(STATUS_CONNECTION_RESET, 0xC000020D)        \
  X(STATUS_CONNECTION_REFUSED, 0xC0000236)      \
  X(STATUS_CONNECTION_INVALID, 0xC000023A)      \
  X(STATUS_CONNECTION_ACTIVE, 0xC000023B)       \
  X(STATUS_NETWORK_UNREACHABLE, 0xC000023C)     \
  X(STATUS_HOST_UNREACHABLE, 0xC000023D)        \
  X(STATUS_REQUEST_ABORTED, 0xC0000240)         \
  X(STATUS_CONNECTION_ABORTED, 0xC0000241)      \
  X(STATUS_IMPLEMENTATION_LIMIT, 0xC000042B)

#define ROCEDP_NTSTATUS_DEFINE(name, value) \
  inline constexpr NTSTATUS name = static_cast<NTSTATUS>(static_cast<uint32_t>(value));
ROCEDP_NTSTATUS_LIST(ROCEDP_NTSTATUS_DEFINE)
#undef ROCEDP_NTSTATUS_DEFINE

/// NetworkDirect's ND_REMOTE_ERROR (ndstatus.mc) is NT's STATUS_REMOTE_RESOURCES: the peer
/// reported a remote operational error.
inline constexpr NTSTATUS STATUS_REMOTE_ERROR = STATUS_REMOTE_RESOURCES;

/// NT_SUCCESS(): success and informational codes (STATUS_PENDING included) are >= 0.
constexpr bool nt_success(NTSTATUS status) {
  return status >= 0;
}

/// NT_ERROR(): severity 11.
constexpr bool nt_error(NTSTATUS status) {
  return (static_cast<uint32_t>(status) >> 30) == 3;
}

/// The symbolic name of `status` ("STATUS_PENDING"), or "STATUS_UNKNOWN" for codes rocedp
/// never produces. For logs and test failure messages.
constexpr std::string_view status_name(NTSTATUS status) {
  switch (static_cast<uint32_t>(status)) {
#define ROCEDP_NTSTATUS_CASE(name, value) \
  case static_cast<uint32_t>(value):      \
    return #name;
    ROCEDP_NTSTATUS_LIST(ROCEDP_NTSTATUS_CASE)
#undef ROCEDP_NTSTATUS_CASE
    default:
      return "STATUS_UNKNOWN";
  }
}

}  // namespace rocedp
