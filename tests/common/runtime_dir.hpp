#pragma once
// EAL leaves its runtime folder (/var/run/dpdk/PREFIX as root) behind. A test that starts EAL
// through the public API, with a file prefix of its own, declares one of these before the object
// that starts it: the folder goes on every way out of the test, after that object is gone.

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

namespace rocedp::test {

class RuntimeDirRemover {
 public:
  explicit RuntimeDirRemover(std::string prefix) : prefix_(std::move(prefix)) {}
  ~RuntimeDirRemover() {
    std::error_code ec;
    std::filesystem::remove_all("/var/run/dpdk/" + prefix_, ec);
  }
  RuntimeDirRemover(const RuntimeDirRemover&) = delete;
  RuntimeDirRemover& operator=(const RuntimeDirRemover&) = delete;
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
};

}  // namespace rocedp::test
