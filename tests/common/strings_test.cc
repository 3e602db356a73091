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

TEST(Strings, AndListReadsAsASentence) {
  EXPECT_EQ(and_list({}), "");
  EXPECT_EQ(and_list({"a"}), "a");
  EXPECT_EQ(and_list({"a", "b"}), "a and b");
  EXPECT_EQ(and_list({"a", "b", "c"}), "a, b and c");
}

}  // namespace
}  // namespace composer

namespace composer {
namespace {

TEST(Text, IsValidUtf8WithoutControlCharacters) {
  EXPECT_TRUE(valid_utf8("", false));
  EXPECT_TRUE(valid_utf8("alice", false));
  EXPECT_TRUE(valid_utf8("Zoë, 東京, 🚀", false));
  for (const std::string& control :
       {std::string("a\0b", 3), std::string("a\rb"), std::string("tab\there"), std::string("\x7f"),
        std::string("\xc2\x85")}) {  // U+0085, a C1 control character
    EXPECT_TRUE(valid_utf8(control)) << printable(control);
    EXPECT_FALSE(valid_utf8(control, false)) << printable(control);
  }
  for (const std::string& bad : {std::string("\xff"),                 // never UTF-8
                                 std::string("\xc3"),                 // cut short
                                 std::string("\xc0\xaf"),             // overlong '/'
                                 std::string("\xed\xa0\x80"),         // a surrogate
                                 std::string("\xf4\x90\x80\x80")}) {  // past U+10FFFF
    EXPECT_FALSE(valid_utf8(bad)) << printable(bad);
  }
}

TEST(Text, PrintableNeverShowsARawByte) {
  EXPECT_EQ(printable("plain Zoë"), "plain Zoë");
  EXPECT_EQ(printable("a\r\nb\tc"), "a\\r\\nb\\tc");
  EXPECT_EQ(printable(std::string("nul\0!", 5)), "nul\\x00!");
  EXPECT_EQ(printable("\xff\xc3(\x1b[31m"), "\\xff\\xc3(\\x1b[31m");
  EXPECT_EQ(printable("back\\slash"), "back\\\\slash");
  EXPECT_EQ(printable("\xc2\x85"), "\\xc2\\x85");
  EXPECT_TRUE(valid_utf8(printable(std::string("\0\x01\xfe", 3)), false));
}

}  // namespace
}  // namespace composer
