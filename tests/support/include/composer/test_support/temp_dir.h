// A fresh directory under $TMPDIR (or /tmp), removed with everything in it when destroyed.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace composer::test_support {

class TempDir {
 public:
  // Throws std::runtime_error if no directory can be made (a test cannot go on without it).
  explicit TempDir(std::string_view prefix = "composer-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // path() / name, as a string, for APIs that take one.
  std::string file(std::string_view name) const;

 private:
  std::filesystem::path path_;
};

}  // namespace composer::test_support
