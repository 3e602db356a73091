#include "composer/config/conf_file.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "composer/common/units.h"

namespace composer::config {
namespace {

// The sentence names the range the reader takes, and the reader takes all of it: a maximum
// above UINT32_MAX was once refused under a sentence that allowed it.
TEST(ConfFile, AWholeNumberReachesTheMaximumItsSentenceNames) {
  constexpr int64_t kMax = 10000000000;  // above UINT32_MAX
  Expected<int64_t> big = whole_number("Big", "5000000000", 0, kMax);
  ASSERT_TRUE(big.ok()) << big.error();
  EXPECT_EQ(*big, 5000000000);
  EXPECT_EQ(*whole_number("Big", "10000000000", 0, kMax), kMax);
  Expected<int64_t> over = whole_number("Big", "10000000001", 0, kMax);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().message, "Big=10000000001: expected a whole number from 0 to 10000000000");
}

// One rule, worded once (common's whole_number_rule), whatever frames it.
TEST(ConfFile, AWholeNumberStatesCommonsRule) {
  for (const char* bad : {"", "-1", "+5", "5 ", "0x10", "1e3", "65536", "0"}) {
    Expected<int64_t> n = whole_number("ListenPort", bad, 1, 65535);
    ASSERT_FALSE(n.ok()) << bad;
    EXPECT_EQ(n.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(n.error().message,
              "ListenPort=" + std::string(bad) + ": expected " + whole_number_rule(1, 65535));
    // One frame too: a flag or a URL parameter read by common's reader says it alike.
    EXPECT_EQ(n.error().message, parse_whole_number("ListenPort", bad, 1, 65535).error().message);
  }
  EXPECT_EQ(*whole_number("ListenPort", "65535", 1, 65535), 65535);
}

TEST(ConfFile, ANameListRefusesTheFirstBadName) {
  Expected<std::vector<std::string>> ok = name_list("AdminUsers", "root, slurm");
  ASSERT_TRUE(ok.ok()) << ok.error();
  EXPECT_EQ(*ok, (std::vector<std::string>{"root", "slurm"}));
  Expected<std::vector<std::string>> bad = name_list("AdminUsers", "root,sl urm");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "AdminUsers=sl urm: names may hold only letters, digits, '-', '_' and '.'");
  EXPECT_EQ(name_list("AdminUsers", "").error().message, "AdminUsers needs a value");
}

}  // namespace
}  // namespace composer::config
