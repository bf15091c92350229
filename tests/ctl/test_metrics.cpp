// rocedpctl metrics (apps/ctl/metrics.cpp): the daemon's views, as the telemetry socket sends
// them (tables as columns), become Prometheus text exposition: counters with _total, gauges for
// what can go down, rows told apart by labels, each family's samples under one HELP and TYPE.

#include "apps/ctl/metrics.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace {

using rocedp::ctl::Json;
using rocedp::ctl::TelemetryViews;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const auto& l : lines_of(text))
    if (l == line) return true;
  return false;
}

size_t count_prefix(const std::string& text, const std::string& prefix) {
  size_t n = 0;
  for (const auto& l : lines_of(text)) n += l.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

TelemetryViews two_core_views() {
  TelemetryViews v;
  v.status = Json::parse(R"({"program": "rocedpd", "version": "0.1.0", "state": "running",
      "uptime_s": 42, "config": "/etc/rocedp/a \"b\"\\c.yaml", "ports": 1, "qps": 7})");
  v.ports = Json::parse(R"({"name": ["p0"], "mac": ["02:00:00:00:00:01"], "ip": ["198.18.0.1"],
      "ipv6": [""], "id": [0], "mtu": [1500], "vlan": [7], "link_up": [1],
      "link_speed_mbps": [10000], "rx_packets": [127], "tx_bytes": [18446744073709551615],
      "fault_dropped": [3], "dscp": [26], "dcqcn_alpha_keep": [1019]})");
  v.cores = Json::parse(R"({"core": [0, 1], "lcore": [1, 2], "busy_cycles": [10, 20],
      "rx_packets": [5, 6], "attached_queues": [1, 1]})");
  v.drops = Json::parse(R"({"bad_icrc": 2, "unknown_qpn": 60})");
  v.listeners = Json::parse(R"({"port": ["p0"], "nd_port": [7471], "service": ["echo"],
      "connections": [2], "max_connections": [64], "accepted": [9], "echo_bytes": [4096]})");
  v.rdma = Json::parse(R"({"port": ["p0", "p0"], "core": [0, 1], "acks_sent": [11, 12],
      "timeout_wait_us": [1500000, 250]})");
  return v;
}

TEST(Metrics, CountersGaugesAndLabels) {
  const std::string t = rocedp::ctl::prometheus_text(two_core_views());
  EXPECT_TRUE(has_line(t, "rocedp_up 1"));
  EXPECT_TRUE(has_line(t, "rocedp_uptime_seconds 42"));
  EXPECT_TRUE(has_line(t, "rocedp_qps 7"));
  EXPECT_TRUE(has_line(t, "# TYPE rocedp_qps gauge"));
  // Ports: counters, gauges, the link speed in bytes per second, the settings left out.
  EXPECT_TRUE(has_line(t, "rocedp_port_rx_packets_total{port=\"p0\"} 127"));
  EXPECT_TRUE(has_line(t, "# TYPE rocedp_port_rx_packets_total counter"));
  EXPECT_TRUE(has_line(t, "rocedp_port_tx_bytes_total{port=\"p0\"} 18446744073709551615"));
  EXPECT_TRUE(has_line(t, "rocedp_port_fault_dropped_total{port=\"p0\"} 3"));
  EXPECT_TRUE(has_line(t, "rocedp_port_link_up{port=\"p0\"} 1"));
  EXPECT_TRUE(has_line(t, "rocedp_port_speed_bytes{port=\"p0\"} 1250000000"));
  EXPECT_TRUE(has_line(t,
                       "rocedp_port_info{port=\"p0\",id=\"0\",mac=\"02:00:00:00:00:01\","
                       "ip=\"198.18.0.1\",ipv6=\"\",mtu=\"1500\",vlan=\"7\"} 1"));
  EXPECT_EQ(t.find("dscp"), std::string::npos);
  EXPECT_EQ(t.find("dcqcn"), std::string::npos);
  // Cores: one family, a sample per core, core and lcore as labels.
  EXPECT_EQ(count_prefix(t, "# TYPE rocedp_core_busy_cycles_total counter"), 1U);
  EXPECT_TRUE(has_line(t, "rocedp_core_busy_cycles_total{core=\"0\",lcore=\"1\"} 10"));
  EXPECT_TRUE(has_line(t, "rocedp_core_busy_cycles_total{core=\"1\",lcore=\"2\"} 20"));
  EXPECT_TRUE(has_line(t, "rocedp_core_attached_queues{core=\"1\",lcore=\"2\"} 1"));
  // Drops by reason; listeners by port, ND port and service.
  EXPECT_TRUE(has_line(t, "rocedp_drops_total{reason=\"unknown_qpn\"} 60"));
  EXPECT_TRUE(has_line(t, "rocedp_drops_total{reason=\"bad_icrc\"} 2"));
  EXPECT_TRUE(
      has_line(t, "rocedp_listener_connections{port=\"p0\",nd_port=\"7471\",service=\"echo\"} 2"));
  EXPECT_TRUE(has_line(t, "# TYPE rocedp_listener_connections gauge"));
  EXPECT_TRUE(has_line(
      t, "rocedp_listener_accepted_total{port=\"p0\",nd_port=\"7471\",service=\"echo\"} 9"));
  // The RC engines: microseconds waited become seconds.
  EXPECT_TRUE(has_line(t, "rocedp_rdma_acks_sent_total{port=\"p0\",core=\"1\"} 12"));
  EXPECT_TRUE(has_line(t, "rocedp_rdma_timeout_wait_seconds_total{port=\"p0\",core=\"0\"} 1.5"));
  EXPECT_TRUE(
      has_line(t, "rocedp_rdma_timeout_wait_seconds_total{port=\"p0\",core=\"1\"} 0.00025"));
}

TEST(Metrics, EveryFamilyOnceWithItsSamplesTogether) {
  const std::string t = rocedp::ctl::prometheus_text(two_core_views());
  std::vector<std::string> seen;
  std::string current;
  for (const auto& l : lines_of(t)) {
    if (l.rfind("# HELP ", 0) == 0) {
      current = l.substr(7, l.find(' ', 7) - 7);
      for (const auto& s : seen) EXPECT_NE(s, current) << "family twice: " << current;
      seen.push_back(current);
      continue;
    }
    if (l.rfind("# TYPE ", 0) == 0) {
      EXPECT_EQ(l.substr(7, current.size()), current);
      continue;
    }
    // A sample belongs to the family above it.
    EXPECT_EQ(l.substr(0, current.size()), current) << l;
    const char next = l[current.size()];
    EXPECT_TRUE(next == '{' || next == ' ') << l;
  }
  EXPECT_GT(seen.size(), 20U);
}

TEST(Metrics, LabelValuesAreEscaped) {
  const std::string t = rocedp::ctl::prometheus_text(two_core_views());
  EXPECT_NE(t.find(R"(config="/etc/rocedp/a \"b\"\\c.yaml")"), std::string::npos) << t;
  TelemetryViews v;
  v.drops = Json::parse(R"({"two\nlines": 1})");
  EXPECT_TRUE(
      has_line(rocedp::ctl::prometheus_text(v), R"(rocedp_drops_total{reason="two\nlines"} 1)"));
}

TEST(Metrics, MissingViewsAndADaemonThatDoesNotAnswer) {
  const std::string t = rocedp::ctl::prometheus_text(TelemetryViews{});
  EXPECT_EQ(lines_of(t).size(), 3U) << t;  // HELP, TYPE and rocedp_up 1
  EXPECT_TRUE(has_line(t, "rocedp_up 1"));
  const std::string down = rocedp::ctl::prometheus_text_down();
  EXPECT_EQ(lines_of(down).size(), 3U);
  EXPECT_TRUE(has_line(down, "# TYPE rocedp_up gauge"));
  EXPECT_TRUE(has_line(down, "rocedp_up 0"));
}

TEST(Metrics, ListenAddress) {
  std::string host;
  int port = -1;
  ASSERT_TRUE(rocedp::ctl::parse_listen_address("9470", &host, &port));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 9470);
  ASSERT_TRUE(rocedp::ctl::parse_listen_address("0.0.0.0:0", &host, &port));
  EXPECT_EQ(host, "0.0.0.0");
  EXPECT_EQ(port, 0);
  ASSERT_TRUE(rocedp::ctl::parse_listen_address("[::1]:65535", &host, &port));
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 65535);
  for (const char* bad : {"", ":80", "host:", "65536", "80x", "+80", " 80", "[::1]", "a:-1"})
    EXPECT_FALSE(rocedp::ctl::parse_listen_address(bad, &host, &port)) << bad;
}

}  // namespace
