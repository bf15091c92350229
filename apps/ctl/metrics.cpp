#include "apps/ctl/metrics.hpp"

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace rocedp::ctl {

namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

enum class Kind { kCounter, kGauge };

// Label values escape backslash, double quote and newline; HELP text backslash and newline.
std::string escaped(const std::string& s, bool quote) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && quote)
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

std::string number_text(double v) {
  // Whole values (a link speed in bytes) without an exponent.
  if (v == static_cast<double>(static_cast<int64_t>(v)) && v > -9e15 && v < 9e15)
    return std::to_string(static_cast<int64_t>(v));
  char b[32];
  const auto r = std::to_chars(b, b + sizeof(b), v);
  return std::string(b, r.ptr);
}

// A JSON number as the exposition writes it (integers exactly, whatever their size).
std::string number_text(const Json& v) {
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return number_text(v.get<double>());
}

// A label's value from a row's field: strings as they are, numbers as text.
std::string label_text(const Json& v) {
  return v.is_string() ? v.get<std::string>() : v.is_number() ? number_text(v) : v.dump();
}

// The families in the order they first appear; the text format wants every sample of a family
// in one group under its HELP and TYPE lines, while the views give them a row at a time.
class Exposition {
 public:
  void add(const std::string& name, Kind kind, const std::string& help, const Labels& labels,
           const std::string& value) {
    auto [it, fresh] = index_.try_emplace(name, families_.size());
    if (fresh) families_.push_back({name, help, kind, {}});
    std::string& s = families_[it->second].samples;
    s += name;
    if (!labels.empty()) {
      s += '{';
      for (size_t i = 0; i < labels.size(); ++i) {
        if (i != 0) s += ',';
        s += labels[i].first + "=\"" + escaped(labels[i].second, true) + '"';
      }
      s += '}';
    }
    s += ' ' + value + '\n';
  }
  std::string text() const {
    std::string out;
    for (const auto& f : families_) {
      out += "# HELP " + f.name + ' ' + escaped(f.help, false) + '\n';
      out += "# TYPE " + f.name + (f.kind == Kind::kCounter ? " counter\n" : " gauge\n");
      out += f.samples;
    }
    return out;
  }

 private:
  struct Family {
    std::string name, help;
    Kind kind;
    std::string samples;
  };
  std::vector<Family> families_;
  std::map<std::string, size_t> index_;
};

// How one numeric field of a row becomes a sample: its family's name, its kind, a scale (from
// the daemon's unit to the base unit); a field with an empty name is not a metric.
struct Series {
  std::string name;
  Kind kind = Kind::kCounter;
  double scale = 0;  // 0: the value as it is (integers stay exact)
};
using Classify = std::function<Series(const std::string& field)>;

// Every row of the table `cols` (columns, as the daemon sends them): its `label_fields` become
// labels, each other numeric field a sample as `classify` says. `command` names the source in
// HELP.
void add_table(Exposition& e, const Json& cols, const char* command,
               std::initializer_list<std::pair<const char*, const char*>> label_fields,
               const Classify& classify) {
  if (!cols.is_object()) return;
  std::set<std::string> label_keys;
  for (const auto& [field, label] : label_fields) label_keys.insert(field);
  for (const Json& row : rows_of(cols)) {
    Labels labels;
    for (const auto& [field, label] : label_fields)
      if (row.contains(field)) labels.emplace_back(label, label_text(row[field]));
    for (const auto& [field, value] : row.items()) {
      if (!value.is_number() || label_keys.count(field) != 0) continue;
      const Series s = classify(field);
      if (s.name.empty()) continue;
      const std::string text =
          s.scale == 0 ? number_text(value) : number_text(value.get<double>() * s.scale);
      e.add(s.name, s.kind, std::string(command) + " " + field, labels, text);
    }
  }
}

bool starts_with(const std::string& s, const char* p) {
  return s.rfind(p, 0) == 0;
}

void add_status(Exposition& e, const Json& status) {
  if (!status.is_object()) return;
  Labels info;
  for (const auto& [field, value] : status.items()) {
    if (value.is_string()) {
      info.emplace_back(field, value.get<std::string>());
    } else if (field == "uptime_s") {
      e.add("rocedp_uptime_seconds", Kind::kGauge, "/rocedp/status uptime_s", {},
            number_text(value));
    } else if (value.is_number()) {
      e.add("rocedp_" + field, Kind::kGauge, "/rocedp/status " + field, {}, number_text(value));
    }
  }
  e.add("rocedp_info", Kind::kGauge,
        "the daemon: program, version, state, configuration file, DPDK version", info, "1");
}

void add_ports(Exposition& e, const Json& cols) {
  if (!cols.is_object()) return;
  // The port's addresses and framing, as labels of one sample.
  for (const Json& row : rows_of(cols)) {
    Labels info{{"port", label_text(row.value("name", Json("")))}};
    for (const char* field : {"id", "mac", "ip", "ipv6", "mtu", "vlan"})
      if (row.contains(field)) info.emplace_back(field, label_text(row[field]));
    e.add("rocedp_port_info", Kind::kGauge, "/rocedp/ports: a port's addresses and framing", info,
          "1");
  }
  add_table(e, cols, "/rocedp/ports", {{"name", "port"}}, [](const std::string& f) -> Series {
    if (f == "started" || f == "link_up" || f == "queues")
      return {"rocedp_port_" + f, Kind::kGauge};
    if (f == "link_speed_mbps") return {"rocedp_port_speed_bytes", Kind::kGauge, 1e6 / 8};
    if (starts_with(f, "rx_") || starts_with(f, "tx_") || starts_with(f, "fault_"))
      return {"rocedp_port_" + f + "_total", Kind::kCounter};
    return {};  // settings: id, prefix length, MTU, VLAN, DSCP, ECN, DCQCN parameters
  });
}

}  // namespace

std::string prometheus_text(const TelemetryViews& v) {
  Exposition e;
  e.add("rocedp_up", Kind::kGauge, "1 if rocedpd answered on its telemetry socket", {}, "1");
  add_status(e, v.status);
  add_ports(e, v.ports);
  add_table(e, v.cores, "/rocedp/cores", {{"core", "core"}, {"lcore", "lcore"}},
            [](const std::string& f) -> Series {
              if (f == "attached_queues" || f == "neighbours")
                return {"rocedp_core_" + f, Kind::kGauge};
              return {"rocedp_core_" + f + "_total", Kind::kCounter};
            });
  if (v.drops.is_object()) {
    for (const auto& [reason, value] : v.drops.items())
      if (value.is_number())
        e.add("rocedp_drops_total", Kind::kCounter,
              "/rocedp/drops: frames dropped over all cores, by reason", {{"reason", reason}},
              number_text(value));
  }
  add_table(e, v.listeners, "/rocedp/listeners",
            {{"port", "port"}, {"nd_port", "nd_port"}, {"service", "service"}},
            [](const std::string& f) -> Series {
              if (f == "connections" || f == "max_connections")
                return {"rocedp_listener_" + f, Kind::kGauge};
              return {"rocedp_listener_" + f + "_total", Kind::kCounter};
            });
  add_table(e, v.rdma, "/rocedp/rdma", {{"port", "port"}, {"core", "core"}},
            [](const std::string& f) -> Series {
              if (f == "timeout_wait_us")
                return {"rocedp_rdma_timeout_wait_seconds_total", Kind::kCounter, 1e-6};
              return {"rocedp_rdma_" + f + "_total", Kind::kCounter};
            });
  return e.text();
}

std::string prometheus_text_down() {
  Exposition e;
  e.add("rocedp_up", Kind::kGauge, "1 if rocedpd answered on its telemetry socket", {}, "0");
  return e.text();
}

bool parse_listen_address(const std::string& text, std::string* host, int* port) {
  std::string p = text;
  *host = "127.0.0.1";
  const size_t colon = text.rfind(':');
  if (colon != std::string::npos) {
    *host = text.substr(0, colon);
    p = text.substr(colon + 1);
    if (host->size() >= 2 && host->front() == '[' && host->back() == ']')
      *host = host->substr(1, host->size() - 2);
    if (host->empty()) return false;
  }
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos)
    return false;
  const long v = std::strtol(p.c_str(), nullptr, 10);
  if (v > 65535) return false;
  *port = static_cast<int>(v);
  return true;
}

bool collect_views(const std::string& prefix, TelemetryViews* v, std::string* error) {
  TelemetryClient t;
  if (!t.connect(prefix, error)) return false;
  const std::pair<const char*, Json*> asks[] = {
      {"/rocedp/status", &v->status},       {"/rocedp/ports", &v->ports},
      {"/rocedp/cores", &v->cores},         {"/rocedp/drops", &v->drops},
      {"/rocedp/listeners", &v->listeners}, {"/rocedp/rdma", &v->rdma}};
  for (const auto& [command, into] : asks) {
    auto value = t.query_table(command, error);  // the tables that come in pages, joined
    if (!value) return false;
    *into = value->is_object() && !value->contains("error") ? std::move(*value) : Json();
  }
  if (v->status.is_object()) v->status["dpdk"] = t.info().value("version", std::string());
  return true;
}

}  // namespace rocedp::ctl
