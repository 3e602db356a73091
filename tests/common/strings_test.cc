#include "composer/common/strings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace composer {
namespace {

using Parts = std::vector<std::string>;

TEST(Strings, LowerAndIequalsFoldAsciiOnly) {
  EXPECT_EQ(lower("ListenPort=A1"), "listenport=a1");
  EXPECT_TRUE(iequals("Content-Type", "content-type"));
  EXPECT_FALSE(iequals("abc", "abcd"));
  EXPECT_FALSE(iequals("abc", "abd"));
}

TEST(Strings, TrimLeavesTheMiddle) {
  EXPECT_EQ(trim("  a b \t\n"), "a b");
  EXPECT_EQ(trim(" \t "), "");
  EXPECT_EQ(trim(""), "");
}

TEST(Strings, SplitKeepsOrDropsEmptyParts) {
  EXPECT_EQ(split("a,b,,c", ','), (Parts{"a", "b", "", "c"}));
  EXPECT_EQ(split("", ','), (Parts{""}));
  EXPECT_EQ(split("a,b,", ','), (Parts{"a", "b", ""}));
  EXPECT_EQ(split(" a , b ,", ',', {.trim = true}), (Parts{"a", "b", ""}));
  EXPECT_EQ(split(" a , , b ,", ',', {.trim = true, .skip_empty = true}), (Parts{"a", "b"}));
  EXPECT_EQ(split("", ',', {.skip_empty = true}), Parts{});
  EXPECT_EQ(split("a|b", '|'), (Parts{"a", "b"}));
}

TEST(Strings, JoinIsSplitsInverse) {
  EXPECT_EQ(join({"a", "b", "c"}), "a,b,c");
  EXPECT_EQ(join({"a", "b"}, ", "), "a, b");
  EXPECT_EQ(join({}), "");
  EXPECT_EQ(join(split("x,,y", ',')), "x,,y");
}

}  // namespace
}  // namespace composer
