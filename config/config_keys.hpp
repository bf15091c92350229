#pragma once
// The one table of configuration keys: config.cpp validates the YAML against it (which keys a
// section allows, the range of every number) and config_reference() renders it as the README's
// configuration reference (`rocedpd --print-config-reference`; tests/config checks that the
// README holds exactly that text).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace rocedp::config {

struct KeySpec {
  enum class Kind {
    kUint,     // unsigned integer in lo..hi
    kPow2,     // power of two in lo..hi
    kPercent,  // number in 0..100
    kBool,
    kString,
    kChoice,   // one of `type`'s words (a/b/c)
    kLcores,   // list of lcore ids
    kList,     // a list of strings or of mappings (items checked by their own keys)
    kMapping,  // a nested mapping whose keys are rows of section "<section>.<key>"
  };
  std::string_view section;  // YAML path of the mapping: "eal", "ports", "ports.fault", ...
  std::string_view key;
  Kind kind;
  std::string_view type;    // as shown: "int", "list of int", "`rx`/`tx`/`both`"
  std::string_view def;     // default as shown; "required" for required keys
  uint64_t lo = 0, hi = 0;  // kUint / kPow2
  std::string_view rule;    // further rules, shown after the range
  std::string_view meaning;
};

/// Every key of every section, in reference order.
std::span<const KeySpec> config_keys();
/// The entry of `section`.`key`; the program aborts on a key the table does not hold (a bug).
const KeySpec& config_key(std::string_view section, std::string_view key);
/// The configuration reference in Markdown: one table per top-level section.
std::string config_reference();

}  // namespace rocedp::config
