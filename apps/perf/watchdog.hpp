#pragma once
// The hard end of a run. --timeout bounds the whole run: every wait and loop checks the deadline
// (clock::Deadline) and ends with status 3. What does not look at it (stopping the runtime: the
// CM's goodbyes, the cores' joins, EAL's cleanup; or exit itself) could hang past it, and the
// caller (a script, ctest) would wait for nothing. The watchdog bounds that too: a process still
// alive a grace period after its deadline says what it was doing and ends with status 3.

#include <cstdint>

namespace rocedp::perf::watchdog {

/// The grace after a deadline of `timeout_s` seconds: half of it, at least 5 s.
uint32_t grace_s(uint32_t timeout_s);

/// (Re)arms the hard limit at timeout_s + grace_s(timeout_s) from now; the first call starts the
/// watching thread.
void arm(uint32_t timeout_s);

/// True once arm() ran.
bool armed();

/// What the process does now (a string literal), for the watchdog's message.
void phase(const char* what);

}  // namespace rocedp::perf::watchdog
