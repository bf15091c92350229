#pragma once
// Test helpers shared by every test folder: the environment ctest sets (ROCEDP_SHARED_DIR,
// ROCEDP_ARTIFACT_DIR, ROCEDP_BIN_DIR, ROCEDP_SOURCE_DIR), running a command with its output,
// and the independent capture checker ../shared/tools/roce-check.

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace rocedp::test {

/// The value of an environment variable, empty when unset.
inline std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

struct RunResult {
  int status = -1;     ///< exit status, -1 if the command did not exit normally
  std::string output;  ///< stdout and stderr
};

/// Runs a shell command and captures its output and exit status.
inline RunResult run(const std::string& cmd) {
  RunResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

/// Runs ../shared/tools/roce-check (scapy + tshark) on a capture; status 0 means every RoCEv2
/// packet passed. The output is also kept next to the capture as PCAP.roce-check.txt.
inline RunResult roce_check(const std::string& pcap) {
  RunResult r = run("/usr/bin/python3 " + env("ROCEDP_SHARED_DIR") + "/tools/roce-check " + pcap);
  if (FILE* f = std::fopen((pcap + ".roce-check.txt").c_str(), "w")) {
    std::fwrite(r.output.data(), 1, r.output.size(), f);
    std::fclose(f);
  }
  return r;
}

/// roce_check for a capture of RoCEv2 over IPv6: tests/common/roce-check-ipv6, roce-check with
/// tshark's one finding about IPv6's zero UDP checksum left out (RoCEv2 sends it; Linux rxe too).
inline RunResult roce_check_ipv6(const std::string& pcap) {
  RunResult r =
      run("/usr/bin/python3 " + env("ROCEDP_SOURCE_DIR") + "/tests/common/roce-check-ipv6 " + pcap);
  if (FILE* f = std::fopen((pcap + ".roce-check.txt").c_str(), "w")) {
    std::fwrite(r.output.data(), 1, r.output.size(), f);
    std::fclose(f);
  }
  return r;
}

}  // namespace rocedp::test
