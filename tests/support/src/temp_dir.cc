#include "composer/test_support/temp_dir.h"

#include <stdlib.h>  // mkdtemp

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace composer::test_support {

TempDir::TempDir(std::string_view prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" +
                        std::string(prefix) + ".XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) {
    throw std::runtime_error("cannot make a temporary directory from " + pattern + ": " +
                             std::strerror(errno));
  }
  // Canonical, as the kernel names it in /proc/PID/fd and /proc/self/mounts.
  std::error_code ec;
  path_ = std::filesystem::canonical(buffer.data(), ec);
  if (ec) path_ = buffer.data();
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::file(std::string_view name) const { return (path_ / name).string(); }

}  // namespace composer::test_support
