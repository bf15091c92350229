#include "apps/perf/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

namespace rocedp::perf {
namespace {

// Key order matters to the scripts that grep the lines: insertion order, not sorted.
using Json = nlohmann::ordered_json;

const char* kLine =
    "---------------------------------------------------------------------------------------\n";

// The precision each field had in the printf days: no script needs more, and rows stay short.
double fixed(double v, int digits) {
  const double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

void print_json(const Json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i =
      std::min(sorted.size() - 1,
               static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())) - 1));
  return sorted[i];
}

void print_bw_row(const Report& r, const Row& row, std::FILE* out) {
  const double bytes = static_cast<double>(row.size) * static_cast<double>(row.iterations);
  const double avg = row.elapsed_s > 0 ? bytes / row.elapsed_s : 0;
  const double peak = std::max(avg, row.peak_msgs_per_s * static_cast<double>(row.size));
  const double msg_rate =
      row.elapsed_s > 0 ? static_cast<double>(row.iterations) / row.elapsed_s : 0;
  const double div = r.report_gbits ? 1e9 / 8 : 1048576.0;  // perftest: MB = 2^20, Gb = 10^9 bits
  std::fprintf(out, " %-7lu    %-10lu     %-9.2f          %-9.2f            %-9.6f\n",
               static_cast<unsigned long>(row.size), static_cast<unsigned long>(row.iterations),
               peak / div, avg / div, msg_rate / 1e6);
  if (!r.json) return;
  Json j;
  j["test"] = std::string(op_name(r.test.op)) + "_bw";
  j["mode"] = r.test.raw ? "raw" : "rdma";
  j["size"] = row.size;
  j["iterations"] = row.iterations;
  j["qps"] = r.test.qps;
  j["tx_depth"] = r.test.tx_depth;
  j["elapsed_s"] = fixed(row.elapsed_s, 6);
  j["bw_peak_MBps"] = fixed(peak / 1048576.0, 3);
  j["bw_avg_MBps"] = fixed(avg / 1048576.0, 3);
  j["bw_avg_Gbps"] = fixed(avg * 8 / 1e9, 4);
  j["msg_rate_Mpps"] = fixed(msg_rate / 1e6, 6);
  j["frames_per_msg"] = row.frames_per_msg;
  j["frame_rate_Mpps"] = fixed(msg_rate * row.frames_per_msg / 1e6, 6);
  print_json(j);
}

void print_lat_row(const Report& r, const Row& row, std::FILE* out) {
  std::vector<double> s = row.lat_us;
  std::sort(s.begin(), s.end());
  // perftest reports half the round trip for WRITE and SEND ping-pong, the full one for READ.
  const double f = r.test.op == Op::kRead || r.full_rtt ? 1.0 : 0.5;
  double sum = 0, sq = 0;
  for (double v : s) sum += v * f;
  const double avg = s.empty() ? 0 : sum / static_cast<double>(s.size());
  for (double v : s) sq += (v * f - avg) * (v * f - avg);
  const double stdev = s.empty() ? 0 : std::sqrt(sq / static_cast<double>(s.size()));
  const double mn = s.empty() ? 0 : s.front() * f, mx = s.empty() ? 0 : s.back() * f;
  std::fprintf(out,
               " %-7lu %-10lu     %-9.2f      %-9.2f    %-9.2f        %-9.2f      %-9.2f         "
               " %-9.2f               %-9.2f\n",
               static_cast<unsigned long>(row.size), static_cast<unsigned long>(s.size()), mn, mx,
               percentile(s, 0.5) * f, avg, stdev, percentile(s, 0.99) * f,
               percentile(s, 0.999) * f);
  if (!r.json) return;
  Json j;
  j["test"] = std::string(op_name(r.test.op)) + "_lat";
  j["mode"] = r.test.raw ? "raw" : "rdma";
  j["size"] = row.size;
  j["iterations"] = s.size();
  j["t_min_usec"] = fixed(mn, 3);
  j["t_max_usec"] = fixed(mx, 3);
  j["t_typical_usec"] = fixed(percentile(s, 0.5) * f, 3);
  j["t_avg_usec"] = fixed(avg, 3);
  j["t_stdev_usec"] = fixed(stdev, 3);
  j["p99_usec"] = fixed(percentile(s, 0.99) * f, 3);
  j["p999_usec"] = fixed(percentile(s, 0.999) * f, 3);
  j["rtt_p50_usec"] = fixed(percentile(s, 0.5), 3);
  j["rtt_p99_usec"] = fixed(percentile(s, 0.99), 3);
  j["frames_per_msg"] = row.frames_per_msg;
  print_json(j);
}

}  // namespace

void print_header(const Report& r) {
  std::FILE* out = r.json ? stderr : stdout;
  const Test& t = r.test;
  std::fprintf(out, "%s", kLine);
  std::fprintf(out, "                    RDMA_%s %s Test%s\n",
               t.op == Op::kWrite  ? "Write"
               : t.op == Op::kRead ? "Read"
                                   : "Send",
               t.bw() ? "BW" : "Latency", t.raw ? " (raw baseline: no RDMA processing)" : "");
  std::fprintf(out, " Number of qps   : %u\t\tTransport type : %s\n", t.qps,
               t.raw ? "raw frames" : "RoCEv2 RC (rocedp)");
  std::fprintf(out, " TX depth        : %u\n", t.tx_depth);
  if (t.bw() && !t.raw) std::fprintf(out, " CQ Moderation   : %u\n", t.cq_mod);
  for (const auto& line : r.notes) std::fprintf(out, " %s\n", line.c_str());
  std::fprintf(out, "%s", kLine);
  if (t.bw())
    std::fprintf(out, r.report_gbits ? " #bytes     #iterations    BW peak[Gb/sec]    BW "
                                       "average[Gb/sec]   MsgRate[Mpps]\n"
                                     : " #bytes     #iterations    BW peak[MB/sec]    BW "
                                       "average[MB/sec]   MsgRate[Mpps]\n");
  else
    std::fprintf(out,
                 " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
                 "t_avg[usec]    t_stdev[usec]   "
                 "99%% percentile[usec]   99.9%% percentile[usec]\n");
}

void print_row(const Report& r, const Row& row) {
  std::FILE* out = r.json ? stderr : stdout;
  if (r.test.bw())
    print_bw_row(r, row, out);
  else
    print_lat_row(r, row, out);
}

void print_verified(const Report& r, uint64_t messages, uint64_t size) {
  if (r.json) return;
  std::fprintf(stderr, " verify: %lu messages of %lu bytes checked byte for byte\n",
               static_cast<unsigned long>(messages), static_cast<unsigned long>(size));
}

namespace {
// {"KEY": {name: value, ...}}, nothing when there are no counters (a core that did not answer).
void print_counters(const char* key, const std::vector<AdapterRuntime::EngineCounter>& counters) {
  if (counters.empty()) return;
  Json c = Json::object();
  for (const auto& x : counters) c[x.name] = x.value;
  print_json(Json{{key, c}});
}
}  // namespace

void print_engine_counters(AdapterRuntime& rt) {
  print_counters("rc_counters", rt.engine_counters(0));
}

void print_drop_counters(AdapterRuntime& rt) {
  print_counters("drops", rt.drop_counters());
}

void print_qp_memory(const Report& r, uint64_t bytes_per_qp) {
  if (r.json) {
    Json m;
    m["qps"] = r.test.qps;
    m["rss_bytes_per_qp"] = bytes_per_qp;
    print_json(Json{{"qp_memory", m}});
  } else if (r.test.qps > 1) {
    std::fprintf(stderr, " memory per QP (RSS growth while creating %u QPs): %lu bytes\n",
                 r.test.qps, static_cast<unsigned long>(bytes_per_qp));
  }
}

void print_perftest_banner(const PerftestBanner& b) {
  const char* op = b.op == Op::kWrite  ? "RDMA_Write"
                   : b.op == Op::kRead ? "RDMA_Read"
                   : b.op == Op::kSend ? "Send"
                                       : "Atomic";
  std::printf("%s", kLine);
  std::printf("                    %s %s Test\n", op, b.kind == Kind::kBw ? "BW" : "Latency");
  std::printf(" Dual-port       : OFF\t\tDevice         : rocedp\n");
  std::printf(" Number of qps   : %u\t\tTransport type : IB\n", b.qps);
  std::printf(" Connection type : RC\t\tUsing SRQ      : %s\n", b.srq ? "ON" : "OFF");
  std::printf(" TX depth        : %u\n", b.tx_depth);
  if (b.op == Op::kSend) std::printf(" RX depth        : %u\n", b.rx_depth);
  std::printf(" Mtu             : %u[B]\n", b.path_mtu);
  std::printf(" Link type       : Ethernet\n");
  if (b.op == Op::kRead || b.op == Op::kAtomic)
    std::printf(" Outstand reads  : %u\n", b.mine.empty() ? 0 : b.mine[0].out_reads);
  if (b.op == Op::kAtomic)
    std::printf(" Atomic type     : %s\n", b.cmp_swap ? "CMP_AND_SWAP" : "FETCH_AND_ADD");
  std::printf(" rdma_cm QPs\t : %s\n", b.rdma_cm ? "ON" : "OFF");
  std::printf(" Data ex. method : %s\n", b.rdma_cm ? "rdma_cm" : "Ethernet");
  std::printf("%s", kLine);
  auto addr = [&](const char* side, const PerftestKey& k) {
    std::printf(" %s address: LID %04x QPN %#06x PSN %#06x", side, k.lid, k.qpn, k.psn);
    if (b.op == Op::kRead || b.op == Op::kAtomic) std::printf(" OUT %#04x", k.out_reads);
    if (b.op != Op::kSend)
      std::printf(" RKey %#08x VAddr %#016llx", k.rkey, static_cast<unsigned long long>(k.vaddr));
    std::printf("\n GID:");
    for (int i = 0; i < 16; ++i) std::printf("%s%02d", i ? ":" : " ", k.gid[i]);
    std::printf("\n");
  };
  for (const auto& k : b.mine) addr("local", k);
  for (const auto& k : b.peer) addr("remote", k);
  std::printf("%s", kLine);
  if (b.kind == Kind::kBw)
    std::printf(
        b.report_gbits
            ? " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
            : " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
  else
    std::printf(
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
        "t_stdev[usec]   "
        "99%% percentile[usec]   99.9%% percentile[usec] \n");
  std::fflush(stdout);
}

void print_perftest_bw_row(const BwReport& r) {
  std::printf(" %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t   %-7.6lf\n",
              static_cast<unsigned long>(r.size), static_cast<unsigned long>(r.iterations),
              r.bw_peak, r.bw_avg, r.msg_rate);
  std::fflush(stdout);
}

void print_perftest_lat_row(uint64_t size, uint64_t iters, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  double sum = 0, sq = 0;
  for (double x : v) sum += x;
  const double avg = n ? sum / static_cast<double>(n) : 0;
  for (double x : v) sq += (x - avg) * (x - avg);
  auto pct = [&](double p) {
    if (n == 0) return 0.0;
    const size_t i = std::min(n - 1, static_cast<size_t>(std::ceil(p * static_cast<double>(n))) -
                                         (p * static_cast<double>(n) >= 1 ? 1 : 0));
    return v[i];
  };
  std::printf(
      " %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     "
      "\t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
      static_cast<unsigned long>(size), static_cast<unsigned long>(iters), n ? v.front() : 0.0,
      n ? v.back() : 0.0, n ? v[n / 2] : 0.0, avg, n ? std::sqrt(sq / static_cast<double>(n)) : 0.0,
      pct(0.99), pct(0.999));
  std::fflush(stdout);
}

void print_perftest_end() {
  std::printf("%s", kLine);
  std::fflush(stdout);
}

}  // namespace rocedp::perf
