#pragma once
// DPDK EAL start-up from the typed configuration. PMD plugins come from the distribution's default
// driver directory (Debian: /usr/lib/<triplet>/dpdk/pmds-23.0), which EAL scans by itself.

#include <chrono>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace rocedp::pmd {

// The argv given to rte_eal_init, program name first. Pure (no EAL, no I/O), unit-tested:
//   program -l <eal.lcores ∪ control.lcore, sorted> --main-lcore N -m MB [--no-huge]
//   --file-prefix P --log-level L <eal.extra_args...>
std::vector<std::string> eal_arguments(const config::Config& cfg, const std::string& program);

// rte_eal_init with eal_arguments(cfg, program). Once per process: a second call fails with
// "already initialised". On failure returns false and sets *error (rte_strerror of rte_errno).
bool eal_init(const config::Config& cfg, const std::string& program, std::string* error);

// True between a successful eal_init and eal_cleanup.
bool eal_initialised();

// rte_eal_cleanup. Call after every port is closed and every pool freed. EAL cannot be
// initialised again in the same process afterwards. Skipped (logged) after eal_keep_at_exit();
// returns whether rte_eal_cleanup ran.
bool eal_cleanup();

// DPDK 22.11 never stops EAL's interrupt thread, and net_memif's close frees the listening
// socket's interrupt handle without unregistering it: the thread keeps walking it. rte_eal_cleanup
// then unmaps that memory under the thread (seen as a SIGSEGV in rte_intr_fd_get at exit). A
// port that closed a memif device calls this, and eal_cleanup leaves EAL to the process exit.
void eal_keep_at_exit();

// Waits (at most `timeout`) until EAL's interrupt thread has finished what it was doing: an EAL
// alarm runs after the callbacks that thread had in hand. Drivers such as net_memif run a
// departing peer's teardown there; a port closes its device after this so that no such callback
// still runs on the device it frees. False on timeout (the thread is blocked elsewhere).
bool interrupt_thread_barrier(std::chrono::milliseconds timeout);

}  // namespace rocedp::pmd
