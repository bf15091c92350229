#pragma once
// Pages of a telemetry table (control/telemetry.cpp). DPDK 22.11's telemetry leaves out, without
// a word, what does not fit a reply: an array holds at most RTE_TEL_MAX_ARRAY_ENTRIES (512)
// values, and the whole reply at most the socket's max_output_len (16 KiB) of JSON. So the
// tables (/rocedp/qps, /rocedp/connections, /rocedp/neighbours, /rocedp/listeners,
// /rocedp/cores, /rocedp/rdma) answer with the rows from a first one on that fit, and say which
// (`first`, `returned`, of `count`); a client asks again with `from=N` until it has them all
// (rocedpctl and its metrics do).

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rocedp::control {

/// Rows [first, end) of a table.
struct RowPage {
  size_t first = 0;
  size_t end = 0;
};

/// JSON bytes of one value in a column array: digits and a comma; a string, its quotes too.
inline size_t json_u64_bytes(uint64_t v) {
  size_t n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n + 1;
}
inline size_t json_string_bytes(std::string_view s) {
  return s.size() + 3;
}

/// The page from row `first` of `count`: as many rows as fit `budget` bytes after `fixed` (the
/// column names, the other keys), at most `max_rows`, and at least one (a row never fits less).
/// `cost(i)`: the JSON bytes of row i over all columns. first >= count: an empty page at count.
template <typename Cost>
RowPage page_rows(size_t count, size_t first, size_t fixed, size_t budget, size_t max_rows,
                  Cost cost) {
  RowPage p{first < count ? first : count, first < count ? first : count};
  size_t used = fixed;
  while (p.end < count && p.end - p.first < max_rows) {
    const size_t c = cost(p.end);
    if (p.end > p.first && used + c > budget) break;
    used += c;
    ++p.end;
  }
  return p;
}

/// "from=N" of a table command: true and *first = N; false for anything else.
bool parse_page_param(std::string_view params, size_t* first);

}  // namespace rocedp::control
