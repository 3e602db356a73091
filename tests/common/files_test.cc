#include "composer/common/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace composer {
namespace {

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/composer-files-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string dir_;
};

TEST_F(FilesTest, ReplacesTheFileAndLeavesNoTemporary) {
  const std::string path = dir_ + "/state.json";
  ASSERT_TRUE(write_file_atomically(path, "old\n"));
  ASSERT_TRUE(write_file_atomically(path, "new\n"));
  EXPECT_EQ(read(path), "new\n");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    ++files;
    EXPECT_EQ(e.path().filename(), "state.json");
  }
  EXPECT_EQ(files, 1);
}

TEST_F(FilesTest, GivesTheModeWhateverTheUmask) {
  const std::string path = dir_ + "/snapshot.json";
  const mode_t old = ::umask(077);
  Status s = write_file_atomically(path, "{}", 0644);
  ::umask(old);
  ASSERT_TRUE(s) << s.error();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  ASSERT_TRUE(write_file_atomically(path, "{}", 0600));
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(FilesTest, AFailureNamesTheStepAndKeepsTheOldFile) {
  Status s = write_file_atomically(dir_ + "/no/such/dir/x", "x");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(s.error().message.rfind("cannot create " + dir_ + "/no/such/dir/x.tmp.", 0), 0u)
      << s.error().message;
  EXPECT_NE(s.error().message.find("No such file or directory"), std::string::npos);
  // A directory where the file should be: the rename fails, nothing is left behind.
  const std::string path = dir_ + "/taken";
  std::filesystem::create_directories(path + "/inside");
  s = write_file_atomically(path, "x");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message.rfind("cannot rename into " + path + ": ", 0), 0u)
      << s.error().message;
  EXPECT_TRUE(std::filesystem::is_directory(path + "/inside"));
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1);
}

}  // namespace
}  // namespace composer
