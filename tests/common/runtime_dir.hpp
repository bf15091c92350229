#pragma once
// EAL leaves its runtime folder behind. A test that starts EAL with a file prefix of its own
// removes it: remove_runtime_dir() after eal_cleanup, or a RuntimeDirRemover declared before the
// object that starts EAL through the public API (the folder then goes on every way out of the
// test, after that object is gone).

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

namespace rocedp::test {

// EAL's runtime directory: /var/run/dpdk/PREFIX as root, else under XDG_RUNTIME_DIR or /tmp.
inline void remove_runtime_dir(const std::string& prefix) {
  std::error_code ec;
  std::filesystem::remove_all("/var/run/dpdk/" + prefix, ec);
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  std::filesystem::remove_all(std::string(xdg != nullptr ? xdg : "/tmp") + "/dpdk/" + prefix, ec);
}

class RuntimeDirRemover {
 public:
  explicit RuntimeDirRemover(std::string prefix) : prefix_(std::move(prefix)) {}
  ~RuntimeDirRemover() { remove_runtime_dir(prefix_); }
  RuntimeDirRemover(const RuntimeDirRemover&) = delete;
  RuntimeDirRemover& operator=(const RuntimeDirRemover&) = delete;
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
};

}  // namespace rocedp::test
