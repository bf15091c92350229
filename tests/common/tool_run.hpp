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

/// roce_check for a capture of RoCEv2 over IPv6: roce-check's own checks (scapy: ICRC, fields)
/// without its tshark pass, then tshark's infiniband dissector with roce-check's filter, every
/// finding but one counted: "Illegal checksum value (0)" of a UDP header in IPv6, which tshark
/// reports after RFC 8200 and which RoCEv2 keeps anyway. Linux rxe sends UDP checksum 0 over IPv6
/// (tests/transport/data/rxe-ipv6-pingpong.pcap), and so does rocedp.
inline RunResult roce_check_ipv6(const std::string& pcap) {
  RunResult r =
      run("/usr/bin/python3 " + env("ROCEDP_SHARED_DIR") + "/tools/roce-check --no-tshark " + pcap);
  const RunResult t =
      run("{ tshark -r " + pcap +
          " -d udp.port==4791,infiniband -Y '_ws.malformed || _ws.expert.severity >= 8388608' "
          "-T fields -e frame.number -e _ws.expert.message 2>/dev/null; }");
  if (t.status != 0) {
    r.status = 1;
    r.output += "tshark failed: " + t.output;
  }
  size_t findings = 0;
  size_t at = 0;
  while (at < t.output.size()) {
    size_t end = t.output.find('\n', at);
    if (end == std::string::npos) end = t.output.size();
    const std::string line = t.output.substr(at, end - at);
    at = end + 1;
    if (line.empty()) continue;
    const size_t tab = line.find('\t');
    std::string msgs = tab == std::string::npos ? "" : line.substr(tab + 1);
    for (const std::string& ok : {std::string("Illegal checksum value (0)")}) {
      for (size_t k; (k = msgs.find(ok)) != std::string::npos;) msgs.erase(k, ok.size());
    }
    if (msgs.find_first_not_of(", ") != std::string::npos ||
        (msgs.empty() && tab == std::string::npos)) {
      ++findings;
      r.output += "tshark: frame " + line + "\n";
    }
  }
  if (findings != 0) r.status = 1;
  if (FILE* f = std::fopen((pcap + ".roce-check.txt").c_str(), "w")) {
    std::fwrite(r.output.data(), 1, r.output.size(), f);
    std::fclose(f);
  }
  return r;
}

}  // namespace rocedp::test
