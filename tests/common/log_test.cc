// The log's lines: one logfmt line per call, whatever bytes a value carries.
#include "composer/common/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace composer::log {
namespace {

std::string logged(std::string_view value) {
  char path[] = "/tmp/composer-log-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  ::close(fd);
  EXPECT_TRUE(set_file(path));
  info("request refused", {{"user", std::string(value)}});
  set_file("");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(path);
  return text.str();
}

TEST(Log, ControlCharactersAndBadBytesAreEscaped) {
  const std::string line = logged("alice\r\nts=forged level=error\x1b[2J\xff");
  EXPECT_EQ(line.find('\r'), std::string::npos);
  EXPECT_EQ(line.find('\x1b'), std::string::npos);
  EXPECT_EQ(line.find('\xff'), std::string::npos);
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line";
  EXPECT_NE(line.find(R"(user="alice\r\nts=forged level=error\x1b[2J\xff")"), std::string::npos)
      << line;
}

TEST(Log, PlainValuesStayBareAndQuotesAreEscaped) {
  EXPECT_NE(logged("alice").find(" user=alice\n"), std::string::npos);
  EXPECT_NE(logged("say \"hi\"").find(R"( user="say \"hi\"")"), std::string::npos);
  EXPECT_NE(logged("a\\b").find(R"( user="a\\b")"), std::string::npos);
  EXPECT_NE(logged("").find(" user=\"\"\n"), std::string::npos);
}

}  // namespace
}  // namespace composer::log
