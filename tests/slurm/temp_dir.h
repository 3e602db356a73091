// A temporary directory removed with everything in it at the end of the test.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace composer::slurm::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "composer-slurm-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

  // Writes `text` to path()/rel, creating parent folders.
  void write(const std::string& rel, const std::string& text) const {
    const std::filesystem::path p = path_ + "/" + rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string read(const std::string& rel) const {
    std::ifstream in(path_ + "/" + rel);
    std::ostringstream text;
    if (in) text << in.rdbuf();
    return text.str();
  }

 private:
  std::string path_;
};

}  // namespace composer::slurm::testing
