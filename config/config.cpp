// YAML -> Config. Two passes: the reader walks the document once, checking shapes, types and
// ranges of every key as it meets it and noting where each key was written; validate() then
// checks the rules that relate keys to each other (lcore sets, port uniqueness, subnets) and
// points at the offending key with the position noted in the first pass.
//
// yaml-cpp is lenient in ways a daemon's configuration must not be: it keeps duplicate keys
// silently, converts "yes" to true and "0x10" to 16. So only the tree and the marks come from
// yaml-cpp; every scalar is converted here with strict rules.

#include "config/config.hpp"

#include "config/config_keys.hpp"

#include <arpa/inet.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <utility>

namespace rocedp::config {

namespace {

std::string format_what(const std::string& file, int line, int column, const std::string& key,
                        const std::string& reason) {
  std::string s = file;
  if (line > 0) s += ":" + std::to_string(line) + ":" + std::to_string(column);
  s += ": ";
  if (!key.empty()) s += key + ": ";
  return s + reason;
}

}  // namespace

std::string ConfigProblem::text() const {
  return format_what(file, line, column, key, reason);
}

ConfigError::ConfigError(std::string file, int line, int column, std::string key,
                         std::string reason)
    : std::runtime_error(format_what(file, line, column, key, reason)),
      file_(file),
      line_(line),
      column_(column),
      key_(key),
      reason_(reason),
      problems_{{std::move(file), line, column, std::move(key), std::move(reason)}} {}

namespace {
std::vector<ConfigProblem> in_file_order(std::vector<ConfigProblem> problems) {
  std::stable_sort(problems.begin(), problems.end(),
                   [](const ConfigProblem& a, const ConfigProblem& b) {
                     return std::pair(a.line, a.column) < std::pair(b.line, b.column);
                   });
  return problems;
}
std::string all_text(const std::vector<ConfigProblem>& problems) {
  std::string s;
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on "" + text() here.
  for (const ConfigProblem& p : problems) {
    if (!s.empty()) s += '\n';
    s += p.text();
  }
  return s;
}
}  // namespace

ConfigError::ConfigError(std::vector<ConfigProblem> problems)
    : ConfigError(in_file_order(std::move(problems)), 0) {}

ConfigError::ConfigError(std::vector<ConfigProblem> sorted, int)
    : std::runtime_error(all_text(sorted)),
      file_(sorted.at(0).file),
      line_(sorted[0].line),
      column_(sorted[0].column),
      key_(sorted[0].key),
      reason_(sorted[0].reason),
      problems_(std::move(sorted)) {}

std::string format_mac(const MacAddress& mac) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(17);
  for (size_t i = 0; i < mac.bytes.size(); ++i) {
    if (i != 0) s += ':';
    s += kHex[mac.bytes[i] >> 4];
    s += kHex[mac.bytes[i] & 0xf];
  }
  return s;
}

std::string format_ipv4(Ipv4Address ip) {
  return std::to_string(ip.value >> 24) + "." + std::to_string((ip.value >> 16) & 0xff) + "." +
         std::to_string((ip.value >> 8) & 0xff) + "." + std::to_string(ip.value & 0xff);
}

std::optional<Ipv4Address> parse_ipv4(std::string_view text) {
  uint32_t value = 0;
  for (int part = 0; part < 4; ++part) {
    if (part != 0) {
      if (text.empty() || text.front() != '.') return std::nullopt;
      text.remove_prefix(1);
    }
    size_t digits = 0;
    while (digits < text.size() && digits < 4 && text[digits] >= '0' && text[digits] <= '9')
      ++digits;
    // "010" is octal to inet_aton and decimal to others: refuse the ambiguity.
    if (digits == 0 || digits > 3 || (digits > 1 && text[0] == '0')) return std::nullopt;
    unsigned octet = 0;
    std::from_chars(text.data(), text.data() + digits, octet);
    if (octet > 255) return std::nullopt;
    value = (value << 8) | octet;
    text.remove_prefix(digits);
  }
  if (!text.empty()) return std::nullopt;
  return Ipv4Address{value};
}

std::string format_ipv6(const Ipv6Address& ip) {
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(AF_INET6, ip.bytes.data(), text, sizeof text) == nullptr) return "?";
  return text;
}

std::optional<Ipv6Address> parse_ipv6(std::string_view text) {
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  const std::string copy(text);  // inet_pton wants a terminated string
  Ipv6Address ip;
  if (inet_pton(AF_INET6, copy.c_str(), ip.bytes.data()) != 1) return std::nullopt;
  return ip;
}

std::optional<MacAddress> parse_mac(std::string_view text) {
  if (text.size() != 17) return std::nullopt;
  MacAddress mac;
  for (size_t i = 0; i < 6; ++i) {
    if (i != 0 && text[i * 3 - 1] != ':') return std::nullopt;
    const char* first = text.data() + i * 3;
    auto [end, ec] = std::from_chars(first, first + 2, mac.bytes[i], 16);
    if (ec != std::errc{} || end != first + 2) return std::nullopt;
  }
  return mac;
}

std::span<const DcqcnField> dcqcn_fields() {
  using C = DcqcnConfig;
  static constexpr DcqcnField kFields[] = {
      {"cnp_interval_us", &C::cnp_interval_us},
      {"rate_reduce_period_us", &C::rate_reduce_period_us},
      {"alpha_period_us", &C::alpha_period_us},
      {"alpha_keep", &C::alpha_keep},
      {"time_reset_us", &C::time_reset_us},
      {"byte_reset", &C::byte_reset},
      {"fast_recovery", &C::fast_recovery},
      {"ai_rate_mbps", &C::ai_rate_mbps},
      {"hai_rate_mbps", &C::hai_rate_mbps},
      {"min_rate_mbps", &C::min_rate_mbps},
      {"first_cnp_rate_mbps", &C::first_cnp_rate_mbps},
  };
  return kFields;
}

bool set_dcqcn_parameter(DcqcnConfig* dcqcn, std::string_view key, std::string_view value,
                         std::string* error) {
  const auto fields = dcqcn_fields();
  const auto f =
      std::find_if(fields.begin(), fields.end(), [&](const DcqcnField& d) { return d.key == key; });
  if (f == fields.end()) {
    std::string allowed;
    for (const DcqcnField& d : fields)
      allowed += (allowed.empty() ? "" : ", ") + std::string(d.key);
    *error = "unknown DCQCN parameter '" + std::string(key) + "'; allowed: " + allowed;
    return false;
  }
  const KeySpec& k = config_key("ports.dcqcn", key);
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc{} || end != value.data() + value.size() || v < k.lo ||
      v > k.hi) {
    *error = std::string(key) + " must be in " + std::to_string(k.lo) + ".." +
             std::to_string(k.hi) + ", got '" + std::string(value) + "'";
    return false;
  }
  dcqcn->*(f->member) = static_cast<uint32_t>(v);
  return true;
}

std::string_view to_string(FaultConfig::Direction direction) {
  switch (direction) {
    case FaultConfig::Direction::kRx:
      return "rx";
    case FaultConfig::Direction::kTx:
      return "tx";
    case FaultConfig::Direction::kBoth:
      return "both";
  }
  return "?";
}

std::string_view to_string(LoggingConfig::Level level) {
  switch (level) {
    case LoggingConfig::Level::kError:
      return "error";
    case LoggingConfig::Level::kWarning:
      return "warning";
    case LoggingConfig::Level::kInfo:
      return "info";
    case LoggingConfig::Level::kDebug:
      return "debug";
  }
  return "?";
}

std::string_view to_string(ListenerConfig::Service service) {
  switch (service) {
    case ListenerConfig::Service::kEcho:
      return "echo";
    case ListenerConfig::Service::kMemory:
      return "memory";
    case ListenerConfig::Service::kPerftest:
      return "perftest";
  }
  return "?";
}

namespace {

// Ranges, allowed keys and their documentation come from the key table (config_keys.cpp).

// 1-based line and column; 0 = no position (the file could not be read).
struct Pos {
  int line = 0;
  int column = 0;
};

Pos pos_of(const YAML::Mark& mark) {
  if (mark.is_null()) return {1, 1};
  return {mark.line + 1, mark.column + 1};
}

// A node together with its key path and where it was written.
struct Field {
  YAML::Node node;
  std::string path;
  Pos at;
};

struct Entry {
  std::string key;
  Pos key_at;
  Field value;
};

struct Mapping {
  Field self;
  std::vector<Entry> entries;  // document order, keys unique

  const Field* find(std::string_view key) const {
    for (const Entry& e : entries)
      if (e.key == key) return &e.value;
    return nullptr;
  }
};

std::string join(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

std::string index_path(const std::string& parent, size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

std::string at_text(Pos p) {
  return "line " + std::to_string(p.line) + ", column " + std::to_string(p.column);
}

// How a node looks, for "expected X, got Y"; long scalars are cut to keep the message one line.
std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Scalar: {
      std::string text =
          node.Scalar().size() > 64 ? node.Scalar().substr(0, 61) + "..." : node.Scalar();
      if (node.Tag() == "!") return "the quoted string \"" + text + "\"";
      return "'" + text + "'";
    }
    default:
      return "an empty value";
  }
}

bool is_plain_scalar(const YAML::Node& node) {
  return node.IsScalar() && node.Tag() != "!";
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_power_of_two(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

uint32_t subnet_mask(unsigned prefix_len) {
  return prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - prefix_len);
}

template <class Names>
std::string list_text(const Names& names) {
  std::string s;
  for (std::string_view n : names) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

std::string lcores_text(const std::vector<unsigned>& lcores) {
  std::string s = "[";
  for (size_t i = 0; i < lcores.size(); ++i) s += (i ? ", " : "") + std::to_string(lcores[i]);
  return s + "]";
}

bool contains(const std::vector<unsigned>& v, unsigned x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Port names appear in logs and telemetry paths: keep them to a safe alphabet.
bool is_simple_name(std::string_view s) {
  return !s.empty() && s.size() <= 32 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  Config read(std::string_view yaml);

 private:
  void read_document(std::string_view yaml, Config& c);
  // Every problem is recorded; fail() then abandons the key (or item, or section) being read, and
  // guard() resumes with the next one, so one run reports every error of the file.
  struct KeyFailed {};
  void report(Pos at, const std::string& path, const std::string& reason) const {
    // One problem per key: a rule between keys says nothing new about a key already rejected.
    if (!path.empty() && !failed_paths_.insert(path).second) return;
    problems_.push_back({source_, at.line, at.column, path, reason});
  }
  [[noreturn]] void fail(Pos at, const std::string& path, const std::string& reason) const {
    report(at, path, reason);
    throw KeyFailed{};
  }
  template <class F>
  void guard(F&& read_key) {
    try {
      read_key();
    } catch (const KeyFailed&) {
    }
  }
  // unsigned_in / power_of_two_in with the range of `section`.`key` from the key table.
  uint64_t number(const Field& f, std::string_view section, std::string_view key) {
    const KeySpec& k = config_key(section, key);
    return k.kind == KeySpec::Kind::kPow2 ? power_of_two_in(f, k.lo, k.hi)
                                          : unsigned_in(f, k.lo, k.hi);
  }
  [[noreturn]] void fail(const Field& f, const std::string& reason) const {
    fail(f.at, f.path, reason);
  }

  // Where a key was written; the first of `paths` that the document contains, else line 1.
  Pos where(std::initializer_list<std::string> paths) const {
    for (const std::string& p : paths) {
      auto it = written_.find(p);
      if (it != written_.end()) return it->second;
    }
    return {1, 1};
  }
  void note(const Field& f) { written_[f.path] = f.at; }

  // --- shapes and scalars ---
  Mapping mapping(const Field& f, std::string_view section);  // allowed keys: the table's
  const Field& require(const Mapping& m, std::string_view key) const;
  std::vector<Field> sequence(const Field& f);
  uint64_t unsigned_in(const Field& f, uint64_t lo, uint64_t hi);
  uint64_t power_of_two_in(const Field& f, uint64_t lo, uint64_t hi);
  unsigned lcore(const Field& f) { return static_cast<unsigned>(number(f, "eal", "lcores")); }
  std::vector<unsigned> lcore_list(const Field& f);
  double percentage(const Field& f);
  bool boolean(const Field& f);
  std::string string(const Field& f);
  size_t choice(const Field& f, std::initializer_list<std::string_view> names);
  Ipv4Address host_address(const Field& f, std::string_view text);
  MacAddress unicast_mac(const Field& f);
  Ipv6Address unicast_ipv6(const Field& f);

  // --- sections ---
  EalConfig eal(const Field& f);
  PortConfig port(const Field& f);
  void port_address(const Mapping& m, PortConfig& c);
  FaultConfig fault(const Field& f);
  DcqcnConfig dcqcn(const Field& f);
  DataplaneConfig dataplane(const Field& f);
  ControlConfig control(const Field& f);
  TelemetryConfig telemetry(const Field& f);
  LoggingConfig logging(const Field& f);
  LimitsConfig limits(const Field& f);
  ListenerConfig listener(const Field& f);

  void validate(const Config& c) const;

  const std::string& source_;
  std::map<std::string, Pos> written_;  // key path -> position, for validate()
  mutable std::vector<ConfigProblem> problems_;
  mutable std::set<std::string> failed_paths_;
  bool ports_failed_ = false;
  bool rejected(const std::string& path) const { return failed_paths_.count(path) != 0; }
};

Mapping Reader::mapping(const Field& f, std::string_view section) {
  std::vector<std::string_view> allowed;
  for (const KeySpec& k : config_keys())
    if (k.section == section) allowed.push_back(k.key);
  Mapping m{f, {}};
  if (f.node.IsNull()) return m;  // "section:" with nothing under it: all defaults
  if (!f.node.IsMap()) fail(f, "expected a mapping, got " + describe(f.node));
  for (const auto& pair : f.node) {  // yaml-cpp yields the pair by value
    const YAML::Node key = pair.first;
    Pos key_at = pos_of(key.Mark());
    if (!key.IsScalar()) {
      report(key_at, f.path, "expected a key name, got " + describe(key));
      continue;
    }
    std::string name = key.Scalar();
    std::string path = join(f.path, name);
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      report(key_at, path, "unknown key '" + name + "'; allowed keys: " + list_text(allowed));
      continue;
    }
    const auto first = std::find_if(m.entries.begin(), m.entries.end(),
                                    [&](const Entry& e) { return e.key == name; });
    if (first != m.entries.end()) {
      report(key_at, path, "duplicate key (first given at " + at_text(first->key_at) + ")");
      continue;
    }
    // An empty value's own mark points at the next token; the key is where the user looks.
    const YAML::Node value = pair.second;
    Pos value_at = value.IsNull() ? key_at : pos_of(value.Mark());
    m.entries.push_back({name, key_at, Field{value, path, value_at}});
    note(m.entries.back().value);
  }
  return m;
}

const Field& Reader::require(const Mapping& m, std::string_view key) const {
  if (const Field* f = m.find(key)) return *f;
  fail(m.self.at, join(m.self.path, key), "missing required key '" + std::string(key) + "'");
}

std::vector<Field> Reader::sequence(const Field& f) {
  if (!f.node.IsSequence()) fail(f, "expected a sequence, got " + describe(f.node));
  std::vector<Field> items;
  for (size_t i = 0; i < f.node.size(); ++i) {
    items.push_back(Field{f.node[i], index_path(f.path, i), pos_of(f.node[i].Mark())});
    note(items.back());
  }
  return items;
}

uint64_t Reader::unsigned_in(const Field& f, uint64_t lo, uint64_t hi) {
  const std::string range = "must be in " + std::to_string(lo) + ".." + std::to_string(hi);
  if (!is_plain_scalar(f.node)) fail(f, "expected an unsigned integer, got " + describe(f.node));
  const std::string& s = f.node.Scalar();
  // A negative or huge integer is a range error, not a type error.
  if (s.size() > 1 && s[0] == '-' && all_digits(s.substr(1))) fail(f, range + ", got " + s);
  if (!all_digits(s)) fail(f, "expected an unsigned integer, got " + describe(f.node));
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || v < lo || v > hi) fail(f, range + ", got " + s);
  return v;
}

uint64_t Reader::power_of_two_in(const Field& f, uint64_t lo, uint64_t hi) {
  uint64_t v = unsigned_in(f, lo, hi);
  if (!is_power_of_two(v))
    fail(f, "must be a power of two in " + std::to_string(lo) + ".." + std::to_string(hi) +
                ", got " + std::to_string(v));
  return v;
}

std::vector<unsigned> Reader::lcore_list(const Field& f) {
  std::vector<unsigned> lcores;
  std::vector<Field> items = sequence(f);
  try {
    for (size_t i = 0; i < items.size(); ++i) {
      unsigned id = lcore(items[i]);
      for (size_t j = 0; j < i; ++j)
        if (lcores[j] == id)
          fail(items[i],
               "lcore " + std::to_string(id) + " is listed twice (first as " + items[j].path + ")");
      lcores.push_back(id);
    }
  } catch (const KeyFailed&) {
    // A bad element rejects the list: validate() must not check the default left in its place.
    failed_paths_.insert(f.path);
    throw;
  }
  return lcores;
}

double Reader::percentage(const Field& f) {
  if (!is_plain_scalar(f.node)) fail(f, "expected a number, got " + describe(f.node));
  const std::string& s = f.node.Scalar();
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || !std::isfinite(v))
    fail(f, "expected a number, got " + describe(f.node));
  if (v < 0 || v > 100) fail(f, "must be in 0..100 (percent), got " + s);
  return v;
}

bool Reader::boolean(const Field& f) {
  // YAML 1.2 core schema only: "yes", "on", "y" are strings there, and ambiguous to readers.
  if (is_plain_scalar(f.node)) {
    const std::string& s = f.node.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  fail(f, "expected true or false, got " + describe(f.node));
}

std::string Reader::string(const Field& f) {
  if (!f.node.IsScalar()) fail(f, "expected a string, got " + describe(f.node));
  if (f.node.Scalar().empty()) fail(f, "must not be empty");
  return f.node.Scalar();
}

size_t Reader::choice(const Field& f, std::initializer_list<std::string_view> names) {
  if (f.node.IsScalar()) {
    size_t i = 0;
    for (std::string_view n : names) {
      if (f.node.Scalar() == n) return i;
      ++i;
    }
  }
  fail(f, "expected one of " + list_text(std::vector<std::string_view>(names)) + "; got " +
              describe(f.node));
}

// Addresses a port can own or a neighbour can have (the subnet rules come in validate()).
Ipv4Address Reader::host_address(const Field& f, std::string_view text) {
  std::optional<Ipv4Address> ip = parse_ipv4(text);
  if (!ip) fail(f, "expected an IPv4 address such as 198.18.0.1, got '" + std::string(text) + "'");
  uint32_t v = ip->value;
  if (v >> 24 == 0 || v >> 24 == 127 || v >> 28 == 0xe || v == 0xffffffff)
    fail(f, "expected a unicast host address, got " + std::string(text) +
                " (0/8, loopback, multicast and broadcast are not)");
  return *ip;
}

MacAddress Reader::unicast_mac(const Field& f) {
  std::string text = string(f);
  std::optional<MacAddress> mac = parse_mac(text);
  if (!mac) fail(f, "expected a MAC address such as \"02:00:00:00:00:01\", got '" + text + "'");
  // IEEE 802: the I/G bit (LSB of the first octet) marks group addresses.
  if (mac->bytes[0] & 1) fail(f, "expected a unicast MAC address, got multicast " + text);
  if (*mac == MacAddress{}) fail(f, "expected a unicast MAC address, got all zeros");
  return *mac;
}

// A unicast IPv6 address a port can own (RFC 4291 2.5): not the unspecified address, not
// loopback, not multicast (ff00::/8), not IPv4-mapped (::ffff:0:0/96, an IPv4 node's address).
Ipv6Address Reader::unicast_ipv6(const Field& f) {
  std::string text = string(f);
  std::optional<Ipv6Address> ip = parse_ipv6(text);
  if (!ip) fail(f, "expected an IPv6 address such as fd52::20, got '" + text + "'");
  const std::array<uint8_t, 16>& b = ip->bytes;
  const std::array<uint8_t, 12> mapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  Ipv6Address loopback;
  loopback.bytes[15] = 1;
  std::string kind;
  if (b[0] == 0xff)
    kind = "multicast";
  else if (*ip == Ipv6Address{})
    kind = "the unspecified address";
  else if (*ip == loopback)
    kind = "the loopback address";
  else if (std::equal(mapped.begin(), mapped.end(), b.begin()))
    kind = "IPv4-mapped";
  if (!kind.empty())
    fail(f, "expected a unicast IPv6 address, got " + text + " (" + kind +
                "; ff00::/8, ::, ::1 and ::ffff:0:0/96 are not)");
  return *ip;
}

EalConfig Reader::eal(const Field& f) {
  EalConfig c;
  Mapping m = mapping(f, "eal");
  guard([&] {
    if (const Field* v = m.find("lcores")) {
      c.lcores = lcore_list(*v);
      if (c.lcores.empty()) fail(*v, "must list at least one lcore");
    }
  });
  guard([&] {
    if (const Field* v = m.find("main_lcore")) c.main_lcore = lcore(*v);
  });
  guard([&] {
    if (const Field* v = m.find("main_lcore_cpu"); v && !v->node.IsNull())
      c.main_lcore_cpu = lcore(*v);
  });
  guard([&] {
    if (const Field* v = m.find("memory_mb"))
      c.memory_mb = static_cast<unsigned>(number(*v, "eal", "memory_mb"));
  });
  guard([&] {
    if (const Field* v = m.find("hugepages")) c.hugepages = boolean(*v);
  });
  guard([&] {
    if (const Field* v = m.find("file_prefix")) {
      // The prefix names files under /var/run/dpdk: no path separators.
      c.file_prefix = string(*v);
      if (!is_simple_name(c.file_prefix))
        fail(*v, "must be 1..32 characters of letters, digits, '_', '-' or '.', got '" +
                     c.file_prefix + "'");
    }
  });
  guard([&] {
    if (const Field* v = m.find("extra_args")) {
      // Options we derive from the keys above would silently fight them.
      static constexpr std::pair<std::string_view, std::string_view> kOwned[] = {
          {"-l", "eal.lcores"},           {"--lcores", "eal.lcores"},
          {"-c", "eal.lcores"},           {"--main-lcore", "eal.main_lcore"},
          {"-m", "eal.memory_mb"},        {"--socket-mem", "eal.memory_mb"},
          {"--no-huge", "eal.hugepages"}, {"--file-prefix", "eal.file_prefix"}};
      for (const Field& item : sequence(*v)) {
        std::string arg = string(item);
        // EAL parses long options with getopt_long, which takes any unambiguous abbreviation
        // ("--file=x" is --file-prefix): a long option is ours when its name begins ours.
        const std::string_view name = std::string_view(arg).substr(0, arg.find('='));
        for (auto [option, key] : kOwned) {
          bool is_long = option.size() > 2;
          bool same = is_long
                          ? name.size() > 2 && name.starts_with("--") && option.starts_with(name)
                          : arg.starts_with(option);
          if (same)
            fail(item, "'" + std::string(option) + "' is set from " + std::string(key) +
                           "; use that key");
        }
        c.extra_args.push_back(arg);
      }
    }
  });
  return c;
}

DcqcnConfig Reader::dcqcn(const Field& f) {
  DcqcnConfig c;
  Mapping m = mapping(f, "ports.dcqcn");
  for (const DcqcnField& d : dcqcn_fields()) {
    guard([&] {
      if (const Field* v = m.find(d.key))
        c.*(d.member) = static_cast<uint32_t>(number(*v, "ports.dcqcn", d.key));
    });
  }
  return c;
}

FaultConfig Reader::fault(const Field& f) {
  FaultConfig c;
  Mapping m = mapping(f, "ports.fault");
  guard([&] {
    if (const Field* v = m.find("direction"))
      c.direction = static_cast<FaultConfig::Direction>(choice(*v, {"rx", "tx", "both"}));
  });
  guard([&] {
    if (const Field* v = m.find("drop_pct")) c.drop_pct = percentage(*v);
  });
  guard([&] {
    if (const Field* v = m.find("duplicate_pct")) c.duplicate_pct = percentage(*v);
  });
  guard([&] {
    if (const Field* v = m.find("corrupt_pct")) c.corrupt_pct = percentage(*v);
  });
  guard([&] {
    if (const Field* v = m.find("ce_pct")) c.ce_pct = percentage(*v);
  });
  guard([&] {
    if (const Field* v = m.find("reorder_window"))
      c.reorder_window = static_cast<uint32_t>(number(*v, "ports.fault", "reorder_window"));
  });
  guard([&] {
    if (const Field* v = m.find("reorder_pct")) c.reorder_pct = percentage(*v);
  });
  guard([&] {
    if (const Field* v = m.find("delay_us"))
      c.delay_us = static_cast<uint32_t>(number(*v, "ports.fault", "delay_us"));
  });
  guard([&] {
    if (const Field* v = m.find("seed")) c.seed = number(*v, "ports.fault", "seed");
  });
  return c;
}

void Reader::port_address(const Mapping& m, PortConfig& c) {
  const Field& address = require(m, "address");
  std::string text = string(address);
  size_t slash = text.find('/');
  if (slash == std::string::npos)
    fail(address,
         "expected an IPv4 address with prefix length such as 198.18.0.1/24, got '" + text + "'");
  c.address = host_address(address, std::string_view(text).substr(0, slash));
  std::string prefix = text.substr(slash + 1);
  uint64_t prefix_len = 0;
  if (!all_digits(prefix) || prefix.size() > 2 ||
      std::from_chars(prefix.data(), prefix.data() + prefix.size(), prefix_len).ec != std::errc{})
    fail(address, "expected a prefix length after '/', got '" + text + "'");
  if (prefix_len < 1 || prefix_len > 32)
    fail(address, "prefix length must be in 1..32, got " + prefix);
  c.prefix_len = static_cast<uint8_t>(prefix_len);
  // RFC 3021 lets /31 (and /32) use every address; shorter prefixes reserve two.
  uint32_t host = c.address.value & ~subnet_mask(c.prefix_len);
  if (c.prefix_len <= 30 && (host == 0 || host == ~subnet_mask(c.prefix_len)))
    fail(address, "is the " + std::string(host == 0 ? "network" : "broadcast") +
                      " address of its subnet, not a host address");
}

PortConfig Reader::port(const Field& f) {
  PortConfig c;
  Mapping m = mapping(f, "ports");
  guard([&] {
    const Field& name = require(m, "name");
    c.name = string(name);
    if (!is_simple_name(c.name))
      fail(name,
           "must be 1..32 characters of letters, digits, '_', '-' or '.', got '" + c.name + "'");
  });
  guard([&] {
    const Field& devargs = require(m, "devargs");
    c.devargs = string(devargs);
    if (std::any_of(c.devargs.begin(), c.devargs.end(),
                    [](char ch) { return ch == ' ' || ch == '\t'; }))
      fail(devargs, "must not contain spaces, got '" + c.devargs + "'");
    if (c.devargs.front() == ',') fail(devargs, "must start with a device name or PCI address");
  });
  guard([&] { port_address(m, c); });
  guard([&] {
    if (const Field* v = m.find("ipv6")) c.address6 = unicast_ipv6(*v);
  });

  guard([&] {
    if (const Field* v = m.find("mac")) c.mac = unicast_mac(*v);
  });
  guard([&] {
    if (const Field* v = m.find("mtu")) c.mtu = static_cast<uint16_t>(number(*v, "ports", "mtu"));
  });
  guard([&] {
    if (const Field* v = m.find("vlan"))
      c.vlan = static_cast<uint16_t>(number(*v, "ports", "vlan"));
  });
  guard([&] {
    if (const Field* v = m.find("vlan_priority"))
      c.vlan_priority = static_cast<uint8_t>(number(*v, "ports", "vlan_priority"));
  });
  guard([&] {
    if (const Field* v = m.find("dscp")) c.dscp = static_cast<uint8_t>(number(*v, "ports", "dscp"));
  });
  guard([&] {
    if (const Field* v = m.find("ecn")) c.ecn = boolean(*v);
  });
  guard([&] {
    if (const Field* v = m.find("cnp_dscp"))
      c.cnp_dscp = static_cast<uint8_t>(number(*v, "ports", "cnp_dscp"));
  });
  guard([&] {
    if (const Field* v = m.find("dcqcn")) c.dcqcn = dcqcn(*v);
  });
  guard([&] {
    if (const Field* v = m.find("neighbours")) {
      for (const Field& item : sequence(*v)) {
        guard([&] {
          Mapping n = mapping(item, "ports.neighbours");
          const Field& ip = require(n, "ip");
          StaticNeighbour neighbour;
          // An IPv6 neighbour is written as IPv6 addresses are, with colons.
          if (string(ip).find(':') != std::string::npos)
            neighbour.ip6 = unicast_ipv6(ip);
          else
            neighbour.ip = host_address(ip, string(ip));
          neighbour.mac = unicast_mac(require(n, "mac"));
          c.neighbours.push_back(neighbour);
        });
      }
    }
  });
  guard([&] {
    if (const Field* v = m.find("fault")) c.fault = fault(*v);
  });
  return c;
}

DataplaneConfig Reader::dataplane(const Field& f) {
  DataplaneConfig c;
  Mapping m = mapping(f, "dataplane");
  guard([&] {
    if (const Field* v = m.find("lcores")) {
      c.lcores = lcore_list(*v);
      if (c.lcores.empty()) fail(*v, "no polling lcores: list at least one");
    }
  });
  guard([&] {
    if (const Field* v = m.find("burst_size"))
      c.burst_size = static_cast<uint16_t>(number(*v, "dataplane", "burst_size"));
  });
  guard([&] {
    if (const Field* v = m.find("rx_ring_size"))
      c.rx_ring_size = static_cast<uint16_t>(number(*v, "dataplane", "rx_ring_size"));
  });
  guard([&] {
    if (const Field* v = m.find("tx_ring_size"))
      c.tx_ring_size = static_cast<uint16_t>(number(*v, "dataplane", "tx_ring_size"));
  });
  guard([&] {
    if (const Field* v = m.find("control_ring_size"))
      c.control_ring_size = static_cast<uint32_t>(number(*v, "dataplane", "control_ring_size"));
  });
  guard([&] {
    if (const Field* v = m.find("mbuf_count"))
      c.mbuf_count = static_cast<uint32_t>(number(*v, "dataplane", "mbuf_count"));
  });
  guard([&] {
    if (const Field* v = m.find("mbuf_cache_size"))
      c.mbuf_cache_size = static_cast<uint32_t>(number(*v, "dataplane", "mbuf_cache_size"));
  });
  guard([&] {
    if (const Field* v = m.find("idle_sleep_us"))
      c.idle_sleep_us = static_cast<uint32_t>(number(*v, "dataplane", "idle_sleep_us"));
  });
  return c;
}

ControlConfig Reader::control(const Field& f) {
  ControlConfig c;
  Mapping m = mapping(f, "control");
  guard([&] {
    if (const Field* v = m.find("lcore"); v && !v->node.IsNull()) c.lcore = lcore(*v);
  });
  guard([&] {
    if (const Field* v = m.find("arp_retry_ms"))
      c.arp_retry_ms = static_cast<uint32_t>(number(*v, "control", "arp_retry_ms"));
  });
  guard([&] {
    if (const Field* v = m.find("arp_retries"))
      c.arp_retries = static_cast<uint32_t>(number(*v, "control", "arp_retries"));
  });
  guard([&] {
    if (const Field* v = m.find("neighbour_expiry_s"))
      c.neighbour_expiry_s = static_cast<uint32_t>(number(*v, "control", "neighbour_expiry_s"));
  });
  return c;
}

TelemetryConfig Reader::telemetry(const Field& f) {
  TelemetryConfig c;
  Mapping m = mapping(f, "telemetry");
  guard([&] {
    if (const Field* v = m.find("enabled")) c.enabled = boolean(*v);
  });
  guard([&] {
    if (const Field* v = m.find("stats_interval_ms"))
      c.stats_interval_ms = static_cast<uint32_t>(number(*v, "telemetry", "stats_interval_ms"));
  });
  return c;
}

LoggingConfig Reader::logging(const Field& f) {
  LoggingConfig c;
  Mapping m = mapping(f, "logging");
  guard([&] {
    if (const Field* v = m.find("level"))
      c.level =
          static_cast<LoggingConfig::Level>(choice(*v, {"error", "warning", "info", "debug"}));
  });
  guard([&] {
    if (const Field* v = m.find("file")) c.file = string(*v);
  });
  return c;
}

// Only notes where each document starts. yaml-cpp 0.7 never consumes a stray ',' at the top
// level: LoadAll() then appends empty documents forever (jbeder/yaml-cpp#1040, fixed after 0.8).
// Driving the parser one document at a time lets us see that no progress is made, and stop.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

LimitsConfig Reader::limits(const Field& f) {
  LimitsConfig c;
  Mapping m = mapping(f, "limits");
  auto u32 = [&](std::string_view key, uint32_t& out) {
    guard([&] {
      if (const Field* v = m.find(key)) out = static_cast<uint32_t>(number(*v, "limits", key));
    });
  };
  u32("max_qps", c.max_qps);
  u32("max_cqs", c.max_cqs);
  u32("max_srqs", c.max_srqs);
  u32("max_pds", c.max_pds);
  u32("max_mrs", c.max_mrs);
  u32("max_cq_depth", c.max_cq_depth);
  u32("max_qp_depth", c.max_qp_depth);
  u32("max_srq_depth", c.max_srq_depth);
  u32("max_sge", c.max_sge);
  u32("max_inline_data", c.max_inline_data);
  u32("max_read_limit", c.max_read_limit);
  guard([&] {
    if (const Field* v = m.find("max_registration_size"))
      c.max_registration_size = number(*v, "limits", "max_registration_size");
  });
  u32("max_transfer_length", c.max_transfer_length);
  u32("frmr_page_count", c.frmr_page_count);
  u32("max_listeners", c.max_listeners);
  u32("max_shared_endpoints", c.max_shared_endpoints);
  u32("max_connectors", c.max_connectors);
  return c;
}

ListenerConfig Reader::listener(const Field& f) {
  ListenerConfig c;
  Mapping m = mapping(f, "listeners");
  // Each key on its own, so one run names every bad key of the item; validate() skips the rules
  // over the keys rejected here.
  guard([&] { c.port = string(require(m, "port")); });
  // The ND port is the rdma_cm port (service ID 0x0106 << 16 | port); 0 would be ephemeral,
  // which no client could find.
  guard([&] {
    c.nd_port = static_cast<uint16_t>(number(require(m, "nd_port"), "listeners", "nd_port"));
  });
  bool service_known = false;
  guard([&] {
    const Field& service = require(m, "service");
    c.service =
        static_cast<ListenerConfig::Service>(choice(service, {"echo", "memory", "perftest"}));
    service_known = true;
  });
  using S = ListenerConfig::Service;
  // A key of another service's is refused (only when the service is known).
  auto of_service = [&](const Field& v, std::initializer_list<S> services, const char* which) {
    if (service_known && std::find(services.begin(), services.end(), c.service) == services.end())
      fail(v, std::string("applies to service: ") + which + " (this listener is '" +
                  std::string(to_string(c.service)) + "')");
  };
  guard([&] {
    if (const Field* v = m.find("memory_bytes")) {
      of_service(*v, {S::kMemory, S::kPerftest}, "memory and perftest only");
      c.memory_bytes = number(*v, "listeners", "memory_bytes");
    }
  });
  guard([&] {
    if (const Field* v = m.find("keepalive_ms")) {
      of_service(*v, {S::kMemory, S::kPerftest}, "memory and perftest only");
      c.keepalive_ms = static_cast<uint32_t>(number(*v, "listeners", "keepalive_ms"));
    }
  });
  guard([&] {
    if (const Field* v = m.find("sends")) {
      of_service(*v, {S::kPerftest}, "perftest only");
      c.sends = static_cast<ListenerConfig::Sends>(choice(*v, {"sink", "echo"}));
    }
  });
  guard([&] {
    if (const Field* v = m.find("writes")) {
      of_service(*v, {S::kPerftest}, "perftest only");
      c.writes = static_cast<ListenerConfig::Writes>(choice(*v, {"sink", "echo"}));
    }
  });
  for (const char* key :
       {"message_bytes", "queue_depth", "receive_delay_ms", "disconnect_after", "idle_timeout_ms"})
    guard([&] {
      const Field* v = m.find(key);
      if (v == nullptr) return;
      const std::string_view name(key);
      if (name == "message_bytes" || name == "queue_depth")
        of_service(*v, {S::kEcho, S::kPerftest}, "echo and perftest only");
      else
        of_service(*v, {S::kEcho}, "echo only");
      const std::string_view k(key);
      uint32_t& out = k == "message_bytes"      ? c.message_bytes
                      : k == "queue_depth"      ? c.queue_depth
                      : k == "receive_delay_ms" ? c.receive_delay_ms
                      : k == "idle_timeout_ms"  ? c.idle_timeout_ms
                                                : c.disconnect_after;
      out = static_cast<uint32_t>(number(*v, "listeners", key));
    });
  guard([&] {
    if (const Field* v = m.find("tcp_exchange")) {
      of_service(*v, {S::kPerftest}, "perftest only");
      const std::string text = string(*v);
      const std::optional<Ipv4Address> ip = parse_ipv4(text);
      if (!ip || ip->value >> 28 == 0xe || ip->value == 0xffffffff)
        fail(*v, "expected a host IPv4 address such as 198.18.0.1 (or 0.0.0.0 for any), got '" +
                     text + "'");
      c.tcp_exchange = *ip;
    }
  });
  guard([&] {
    if (const Field* v = m.find("max_connections"))
      c.max_connections = static_cast<uint32_t>(number(*v, "listeners", "max_connections"));
  });
  return c;
}

Config Reader::read(std::string_view yaml) {
  Config c;
  guard([&] { read_document(yaml, c); });
  if (!problems_.empty()) throw ConfigError(std::move(problems_));
  return c;
}

void Reader::read_document(std::string_view yaml, Config& c) {
  const std::string text(yaml);
  YAML::Node document;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentStarts docs;
    // Two documents are enough to know there are too many; a third call catches a stuck second.
    for (int i = 0; i < 3 && parser.HandleNextDocument(docs); ++i) {
      size_t n = docs.starts.size();
      if (n >= 2 && docs.starts[n - 1].pos == docs.starts[n - 2].pos) {
        const YAML::Mark& at = docs.starts[n - 1];
        std::string what = at.pos >= 0 && static_cast<size_t>(at.pos) < text.size()
                               ? "'" + std::string(1, text[static_cast<size_t>(at.pos)]) + "'"
                               : "token";
        fail(pos_of(at), "", "YAML syntax error: unexpected " + what);
      }
    }
    if (docs.starts.size() > 1)
      fail(pos_of(docs.starts[1]), "", "expected one YAML document, found more than one");
    // One document, so Load() (a single HandleNextDocument) cannot hit the loop above.
    if (!docs.starts.empty()) document = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    fail(pos_of(e.mark), "", "YAML syntax error: " + e.msg);
  }
  if (!document.IsDefined() || document.IsNull())
    fail({1, 1}, "", "empty document: at least a 'ports' section is required");

  Field root{document, "", pos_of(document.Mark())};
  if (!root.node.IsMap())
    fail(root, "expected a mapping of sections at the top level, got " + describe(root.node));
  Mapping m = mapping(root, "");

  c.source = source_;
  guard([&] {
    if (const Field* v = m.find("eal")) c.eal = eal(*v);
  });
  guard([&] {
    const Field& ports = require(m, "ports");
    const std::vector<Field> items = sequence(ports);
    if (items.empty()) fail(ports, "no ports: list at least one");
    if (items.size() > kMaxPorts)
      fail(ports, std::to_string(items.size()) + " ports: at most " + std::to_string(kMaxPorts) +
                      " (a polling core serves every port)");
    for (const Field& item : items) {
      // Keys that failed keep their defaults, and validate() skips the rules over them. A port
      // that is not there at all, or has no name, would make the listener rules misread.
      bool read = false;
      guard([&] {
        c.ports.push_back(port(item));
        read = true;
      });
      if (!read || rejected(item.path + ".name")) ports_failed_ = true;
    }
  });
  guard([&] {
    if (const Field* v = m.find("dataplane")) c.dataplane = dataplane(*v);
  });
  guard([&] {
    if (const Field* v = m.find("control")) c.control = control(*v);
  });
  guard([&] {
    if (const Field* v = m.find("telemetry")) c.telemetry = telemetry(*v);
  });
  guard([&] {
    if (const Field* v = m.find("logging")) c.logging = logging(*v);
  });
  guard([&] {
    if (const Field* v = m.find("limits")) c.limits = limits(*v);
  });
  guard([&] {
    // "listeners:" with nothing under it: none, as an empty section takes its defaults.
    if (const Field* v = m.find("listeners"); v != nullptr && !v->node.IsNull())
      for (const Field& item : sequence(*v)) {
        // Pushed even when a key failed (listener() keeps its default; validate() skips the
        // rules over it), so listeners[i] stays the document's i-th item.
        ListenerConfig l;
        guard([&] { l = listener(item); });
        c.listeners.push_back(std::move(l));
      }
  });
  validate(c);
}

// Rules between keys. Each failure names the key that breaks the rule; when that key was left
// at its default it points at the key it conflicts with instead.
void Reader::validate(const Config& c) const {
  const EalConfig& eal = c.eal;
  // A rejected list or lcore kept its default: rules over it would report values never written.
  const bool eal_lcores_ok = !rejected("eal.lcores");
  const bool main_ok = !rejected("eal.main_lcore");
  if (eal_lcores_ok && main_ok && !contains(eal.lcores, eal.main_lcore))
    report(where({"eal.main_lcore", "eal.lcores"}), "eal.main_lcore",
           "lcore " + std::to_string(eal.main_lcore) + " is not in eal.lcores " +
               lcores_text(eal.lcores));

  const std::vector<unsigned>& polling = c.dataplane.lcores;
  const bool polling_ok = !rejected("dataplane.lcores");
  for (size_t i = 0; polling_ok && i < polling.size(); ++i) {
    std::string path = index_path("dataplane.lcores", i);
    // The main lcore runs main(); rte_eal_remote_launch only reaches worker lcores.
    if (main_ok && polling[i] == eal.main_lcore)
      report(where({path, "eal.main_lcore"}), path,
             "lcore " + std::to_string(polling[i]) +
                 " is eal.main_lcore; polling lcores must be worker lcores");
    if (eal_lcores_ok && !contains(eal.lcores, polling[i]))
      report(where({path, "eal.lcores"}), path,
             "lcore " + std::to_string(polling[i]) + " is not in eal.lcores " +
                 lcores_text(eal.lcores));
  }

  if (c.control.lcore) {
    unsigned id = *c.control.lcore;
    if (eal_lcores_ok && !contains(eal.lcores, id))
      report(where({"control.lcore"}), "control.lcore",
             "lcore " + std::to_string(id) + " is not in eal.lcores " + lcores_text(eal.lcores));
    for (size_t i = 0; polling_ok && i < polling.size(); ++i)
      if (polling[i] == id)
        report(where({"control.lcore"}), "control.lcore",
               "lcore " + std::to_string(id) + " is a polling lcore (dataplane.lcores[" +
                   std::to_string(i) + "]); a busy-polling core would starve the control thread");
  }

  for (size_t i = 0; i < c.ports.size(); ++i) {
    const PortConfig& p = c.ports[i];
    const std::string base = index_path("ports", i);
    // Two ports with one device would make EAL probe it twice; compare the device part only.
    std::string_view device = std::string_view(p.devargs).substr(0, p.devargs.find(','));
    for (size_t j = 0; j < i; ++j) {
      const PortConfig& q = c.ports[j];
      const std::string other = index_path("ports", j);
      if (q.name == p.name && !rejected(base + ".name") && !rejected(other + ".name"))
        report(where({base + ".name"}), base + ".name",
               "duplicate port name '" + p.name + "' (also " + other + ")");
      if (std::string_view(q.devargs).substr(0, q.devargs.find(',')) == device)
        report(where({base + ".devargs"}), base + ".devargs",
               "device '" + std::string(device) + "' is already used by " + other);
      if (q.address == p.address && !rejected(base + ".address") && !rejected(other + ".address"))
        report(where({base + ".address"}), base + ".address",
               "duplicate port address " + format_ipv4(p.address) + " (also " + other + ")");
      if (p.address6 && q.address6 && *p.address6 == *q.address6)
        report(where({base + ".ipv6"}), base + ".ipv6",
               "duplicate port IPv6 address " + format_ipv6(*p.address6) + " (also " + other + ")");
      if (p.mac && q.mac && *p.mac == *q.mac)
        report(where({base + ".mac"}), base + ".mac",
               "duplicate MAC " + format_mac(*p.mac) + " (also " + other + ")");
    }

    if (rejected(base + ".address")) continue;  // no subnet to check the neighbours against
    uint32_t mask = subnet_mask(p.prefix_len);
    for (size_t k = 0; k < p.neighbours.size(); ++k) {
      const StaticNeighbour& n = p.neighbours[k];
      const std::string path = index_path(base + ".neighbours", k) + ".ip";
      const Pos at = where({path});
      if (n.ip6) {  // IPv6 has no subnet here (ports[].ipv6 is an address alone)
        if (rejected(base + ".ipv6")) continue;
        const std::string ip6 = format_ipv6(*n.ip6);
        if (!p.address6)
          report(at, path, "IPv6 neighbour " + ip6 + " on a port without an ipv6 address");
        else if (*n.ip6 == *p.address6)
          report(at, path, ip6 + " is the port's own address");
        for (size_t l = 0; l < k; ++l)
          if (p.neighbours[l].ip6 == n.ip6)
            report(at, path,
                   "duplicate neighbour " + ip6 + " (also " + index_path(base + ".neighbours", l) +
                       ")");
        continue;
      }
      const std::string ip = format_ipv4(n.ip);
      const std::string subnet =
          format_ipv4(Ipv4Address{p.address.value & mask}) + "/" + std::to_string(p.prefix_len);
      if ((n.ip.value & mask) != (p.address.value & mask))
        report(at, path, ip + " is outside the port's subnet " + subnet);
      if (n.ip == p.address) report(at, path, ip + " is the port's own address");
      uint32_t host = n.ip.value & ~mask;
      if (p.prefix_len <= 30 && (host == 0 || host == ~mask))
        report(at, path,
               ip + " is the " + (host == 0 ? "network" : "broadcast") + " address of " + subnet);
      for (size_t l = 0; l < k; ++l)
        if (!p.neighbours[l].ip6 && p.neighbours[l].ip == n.ip)
          report(
              at, path,
              "duplicate neighbour " + ip + " (also " + index_path(base + ".neighbours", l) + ")");
    }
  }

  // What a listener's connection creates must fit the adapter's limits: refused at start-up or
  // at every connection otherwise, after the ports and the adapters had opened.
  const LimitsConfig& lim = c.limits;
  for (size_t i = 0; i < c.listeners.size(); ++i) {
    const ListenerConfig& l = c.listeners[i];
    const std::string base = index_path("listeners", i);
    if (rejected(base)) continue;  // not a mapping: nothing of it was read
    const std::string port_key = base + ".port", nd_key = base + ".nd_port";
    const bool port_ok = !rejected(port_key), nd_ok = !rejected(nd_key);
    const bool service_ok = !rejected(base + ".service");
    if (port_ok && !ports_failed_ &&  // else the port may be one of those rejected
        std::none_of(c.ports.begin(), c.ports.end(),
                     [&](const PortConfig& p) { return p.name == l.port; })) {
      report(where({port_key}), port_key, "no port named '" + l.port + "' in ports");
      continue;
    }
    for (size_t j = 0; port_ok && nd_ok && j < i; ++j) {
      const std::string other = index_path("listeners", j);
      if (c.listeners[j].port == l.port && c.listeners[j].nd_port == l.nd_port &&
          !rejected(other + ".port") && !rejected(other + ".nd_port") && !rejected(other))
        report(where({nd_key}), nd_key,
               "port " + l.port + " nd_port " + std::to_string(l.nd_port) + " is already used by " +
                   other);
    }
    if (!service_ok) continue;
    // `what` (needing `need`) is more than limits.`limit` (`have`): reported on `key`.
    auto over = [&](const std::string& key, const std::string& what, uint64_t need,
                    const char* limit, uint64_t have) {
      if (need > have && !rejected(base + "." + key) && !rejected(std::string("limits.") + limit))
        report(where({base + "." + key, base + ".service", base}), base + "." + key,
               what + " is more than limits." + limit + " (" + std::to_string(have) + ")");
    };
    if (l.service != ListenerConfig::Service::kEcho)
      over("memory_bytes", std::to_string(l.memory_bytes) + " bytes (one registration)",
           l.memory_bytes, "max_registration_size", lim.max_registration_size);
    if (l.service == ListenerConfig::Service::kMemory) continue;
    // Echo and perftest's data connections (control/services.cpp): a buffer of queue_depth x
    // message_bytes registered at once, a QP of queue_depth each way, a CQ of twice that.
    const uint64_t buffers = uint64_t{l.queue_depth} * l.message_bytes;
    over("message_bytes",
         "queue_depth x message_bytes = " + std::to_string(buffers) + " bytes (one registration)",
         buffers, "max_registration_size", lim.max_registration_size);
    over("queue_depth", "a QP of " + std::to_string(l.queue_depth), l.queue_depth, "max_qp_depth",
         lim.max_qp_depth);
    over("queue_depth", "a CQ of 2 x queue_depth = " + std::to_string(2 * uint64_t{l.queue_depth}),
         2 * uint64_t{l.queue_depth}, "max_cq_depth", lim.max_cq_depth);
  }
  // Each polling core serves a share of the QPN space, which a listener's adapter splits in at
  // most 64 (control/ndk_adapter.cpp).
  constexpr size_t kMaxCoresWithListeners = 64;
  if (!c.listeners.empty() && polling_ok && polling.size() > kMaxCoresWithListeners)
    report(where({"dataplane.lcores"}), "dataplane.lcores",
           std::to_string(polling.size()) + " polling lcores: at most " +
               std::to_string(kMaxCoresWithListeners) + " with listeners");
}

}  // namespace

Config parse(std::string_view yaml, const std::string& source) {
  return Reader(source).read(yaml);
}

Config load_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(path, 0, 0, "", "cannot read file: is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ConfigError(path, 0, 0, "", std::string("cannot read file: ") + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    throw ConfigError(path, 0, 0, "", std::string("cannot read file: ") + std::strerror(errno));
  return parse(text.str(), path);
}

}  // namespace rocedp::config
