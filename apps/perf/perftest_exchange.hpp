#pragma once
// The carriers' side of perftest's exchange (rocedp/perftest.hpp has its messages): one exchange
// is the client writing then reading, the server reading then writing.

#include <cstddef>
#include <string>

#include "rocedp/perftest.hpp"

namespace rocedp::perf {

/// One side of perftest's exchange channel (TCP socket or rdma_cm control QP). Implementations
/// keep the data path running while they wait.
class PerftestChannel {
 public:
  virtual ~PerftestChannel() = default;
  virtual bool write(const void* data, size_t len, std::string* err) = 0;
  virtual bool read(void* data, size_t len, std::string* err) = 0;
};

/// One exchange: the client writes then reads, the server reads then writes.
bool exchange(PerftestChannel& ch, bool client, const void* mine, void* theirs, size_t len,
              std::string* err);

}  // namespace rocedp::perf
