#pragma once
// DPDK EAL start-up from the typed configuration. PMD plugins come from the distribution's default
// driver directory (Debian: /usr/lib/<triplet>/dpdk/pmds-23.0), which EAL scans by itself.

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
// initialised again in the same process afterwards.
void eal_cleanup();

}  // namespace rocedp::pmd
