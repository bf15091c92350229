#pragma once
// rocedpctl metrics: a running rocedpd's telemetry as Prometheus metrics, in the text exposition
// format (version 0.0.4) that a Prometheus server scrapes (`rocedpctl metrics --listen`) and
// node_exporter's textfile collector reads (`rocedpctl metrics > FILE`).
//
// Names are rocedp_<view>_<field>, labelled by what names a row: port, core (and lcore),
// listener (port, nd_port, service), drop reason. A field that only grows is a counter and ends
// in _total; what can go down (links, open connections, queues attached) is a gauge. Settings
// (MTU, VLAN, DSCP, DCQCN parameters) are not metrics: rocedp_port_info carries a port's
// addresses and framing as labels, and `rocedpctl ports --json` has the rest. QPs have no series of
// their own (at 100,000 QPs that would be 100,000 series a field): rocedp_qps counts them and
// `rocedpctl qps` lists them.

#include <string>

#include "apps/ctl/telemetry_client.hpp"

namespace rocedp::ctl {

/// What the daemon answered, one telemetry command each, as the daemon sends them (tables as
/// columns). A null member adds nothing.
struct TelemetryViews {
  Json status;     // /rocedp/status
  Json ports;      // /rocedp/ports
  Json cores;      // /rocedp/cores
  Json drops;      // /rocedp/drops
  Json listeners;  // /rocedp/listeners
  Json rdma;       // /rocedp/rdma
};

/// The exposition of `v`, led by rocedp_up 1.
std::string prometheus_text(const TelemetryViews& v);
/// The exposition of a daemon that did not answer: rocedp_up 0 alone.
std::string prometheus_text_down();

/// `rocedpctl metrics --listen`'s [HOST:]PORT: HOST 127.0.0.1 when left out, an IPv6 address in
/// brackets. False if HOST is empty or PORT is not 0..65535.
bool parse_listen_address(const std::string& text, std::string* host, int* port);

/// Asks the daemon of EAL file prefix `prefix` for every view. False (and `error`) if it cannot
/// be reached or a query fails.
bool collect_views(const std::string& prefix, TelemetryViews* v, std::string* error);

}  // namespace rocedp::ctl
