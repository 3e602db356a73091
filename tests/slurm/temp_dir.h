// The shared temporary directory (composer::test_support::TempDir) with the small file helpers
// the plugin tests use to lay out fake sysfs, proc and config trees.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "composer/test_support/temp_dir.h"

namespace composer::slurm::testing {

class TempDir : public test_support::TempDir {
 public:
  TempDir() : test_support::TempDir("composer-slurm") {}

  std::string operator/(const std::string& rel) const { return file(rel); }

  // Writes `text` to path()/rel, creating parent folders.
  void write(const std::string& rel, const std::string& text) const {
    const std::filesystem::path p = file(rel);
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string read(const std::string& rel) const {
    std::ifstream in(file(rel));
    std::ostringstream text;
    if (in) text << in.rdbuf();
    return text.str();
  }
};

}  // namespace composer::slurm::testing
