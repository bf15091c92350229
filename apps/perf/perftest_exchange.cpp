#include "apps/perf/perftest_exchange.hpp"

namespace rocedp::perf {

bool exchange(PerftestChannel& ch, bool client, const void* mine, void* theirs, size_t len,
              std::string* err) {
  if (client) return ch.write(mine, len, err) && ch.read(theirs, len, err);
  return ch.read(theirs, len, err) && ch.write(mine, len, err);
}

}  // namespace rocedp::perf
