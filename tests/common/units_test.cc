#include "composer/common/units.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace composer {
namespace {

TEST(ParseSize, AcceptsSlurmSuffixes) {
  EXPECT_EQ(*parse_size("64G"), 64 * kGiB);
  EXPECT_EQ(*parse_size("512g"), 512 * kGiB);
  EXPECT_EQ(*parse_size("2T"), 2 * kTiB);
  EXPECT_EQ(*parse_size("100M"), 100 * kMiB);
  EXPECT_EQ(*parse_size("8K"), 8 * kKiB);
  EXPECT_EQ(*parse_size("16GiB"), 16 * kGiB);
  EXPECT_EQ(*parse_size("1024"), 1024 * kMiB);  // bare number: megabytes, like --mem
}

TEST(ParseSize, RefusesWithASentence) {
  for (const char* bad :
       {"", "-1G", "G", "1.5G", "10X", "0", "0G", "1 G", "99999999999999999999T", "2048T"}) {
    auto r = parse_size(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_FALSE(r.error().message.empty());
  }
}

// As Slurm 22.05's --mem: "64GB" is 64G, binary (sbatch --mem=64GB takes it so), and every
// refusal says the allowed form.
TEST(ParseSize, ABIsBinary) {
  EXPECT_EQ(*parse_size("64GB"), 64 * kGiB);
  EXPECT_EQ(*parse_size("64gb"), 64 * kGiB);
  EXPECT_EQ(*parse_size("512MB"), 512 * kMiB);
  EXPECT_EQ(*parse_size("2TB"), 2 * kTiB);
  for (const char* bad : {"64B", "64GX", "99999999999999999999T", "2048T", "0G", "1.5G"}) {
    auto r = parse_size(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("expected a whole number of at most 1024T with an optional "
                                     "K, M, G or T suffix (binary, as Slurm's --mem reads them: "
                                     "64G and 64GB are both 64 GiB"),
              std::string::npos)
        << r.error().message;
  }
}

TEST(ParseSize, ZeroIsNoneOnlyWhereAsked) {
  EXPECT_EQ(*parse_size("0", ZeroSize::kNone), 0u);
  EXPECT_EQ(*parse_size("0G", ZeroSize::kNone), 0u);
  EXPECT_EQ(*parse_size("64G", ZeroSize::kNone), 64 * kGiB);
  EXPECT_FALSE(parse_size("0"));
  EXPECT_FALSE(parse_size("", ZeroSize::kNone));
  EXPECT_FALSE(parse_size("-0", ZeroSize::kNone));
}

TEST(Gib, RequestsRoundUpPoolsDown) {
  EXPECT_EQ(gib_rounded_up(0), 0u);
  EXPECT_EQ(gib_rounded_up(1), 1u);
  EXPECT_EQ(gib_rounded_up(1536 * kMiB), 2u);
  EXPECT_EQ(gib_rounded_up(64 * kGiB), 64u);
  EXPECT_EQ(gib_rounded_up(UINT64_MAX), UINT64_MAX / kGiB + 1);
  EXPECT_EQ(gib_rounded_down(1536 * kMiB), 1u);
  EXPECT_EQ(gib_rounded_down(64 * kGiB), 64u);
  EXPECT_EQ(gib_rounded_down(kGiB - 1), 0u);
}

TEST(FormatSize, UsesLargestExactUnit) {
  EXPECT_EQ(format_size(64 * kGiB), "64G");
  EXPECT_EQ(format_size(kTiB), "1T");
  EXPECT_EQ(format_size(1536 * kMiB), "1536M");
  EXPECT_EQ(format_size(0), "0");
  EXPECT_EQ(format_size(1001), "1001");
}

TEST(ParseCount, StrictDigitsWithinMax) {
  EXPECT_EQ(*parse_count("4", 64), 4u);
  EXPECT_EQ(*parse_count("0", 64), 0u);
  EXPECT_FALSE(parse_count("-1", 64).ok());
  EXPECT_FALSE(parse_count("65", 64).ok());
  EXPECT_FALSE(parse_count("4a", 64).ok());
  EXPECT_FALSE(parse_count("", 64).ok());
}

// One reader, one sentence: the whole range of uint64_t, nothing else.
TEST(WholeNumber, DigitsFromMinToMaxAnyWidth) {
  EXPECT_EQ(*parse_whole_number("n", "5000000000", 0, 10000000000), 5000000000u);
  EXPECT_EQ(*parse_whole_number("n", "18446744073709551615", 0, UINT64_MAX), UINT64_MAX);
  EXPECT_EQ(*parse_whole_number("n", "007", 7, 7), 7u);
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1.0", "0x1", "6", "11"}) {
    auto r = parse_whole_number("n", bad, 7, 10);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(r.error().message,
              "n=" + std::string(bad) + ": expected a whole number from 7 to 10");
  }
  EXPECT_EQ(parse_whole_number("n", "18446744073709551616", 0, UINT64_MAX).error().message,
            "n=18446744073709551616: expected a whole number from 0 to 18446744073709551615");
  EXPECT_EQ(whole_number_rule(1, 65535), "a whole number from 1 to 65535");
}

TEST(WholeNumber, ACountSaysWhatItIs) {
  EXPECT_EQ(parse_count("65", 64).error().message,
            "count=65: expected a whole number from 0 to 64");
}

TEST(SlurmDuration, EveryFormSlurmPrintsAndReads) {
  EXPECT_EQ(*parse_slurm_duration("1-02:03:04"), 93784);
  EXPECT_EQ(*parse_slurm_duration("02:03:04"), 7384);
  EXPECT_EQ(*parse_slurm_duration("03:04"), 184);
  EXPECT_EQ(*parse_slurm_duration("5"), 300);
  EXPECT_EQ(*parse_slurm_duration("2-12"), 2 * 86400 + 12 * 3600);
  EXPECT_EQ(*parse_slurm_duration("2-12:30"), 2 * 86400 + 12 * 3600 + 30 * 60);
  EXPECT_EQ(*parse_slurm_duration(" 90 "), 5400);
  EXPECT_EQ(*parse_slurm_duration("999999"), 999999 * 60);
  for (const char* none :
       {"UNLIMITED", "INFINITE", "Partition_Limit", "", "Unknown", "INVALID", "None"}) {
    auto d = parse_slurm_duration(none);
    ASSERT_TRUE(d.ok()) << none;
    EXPECT_FALSE(d->has_value()) << none;
  }
  for (const char* bad : {"1:2:3:4", "-5", "5-", "1-2-3", "1::2", "1000000", "+5", "5m", "1.5",
                          "0x10", "1-1:2:3:4"}) {
    auto d = parse_slurm_duration(bad);
    EXPECT_FALSE(d.ok()) << "'" << bad << "' was read as " << (d.ok() ? d->value_or(-1) : 0);
    if (!d.ok()) {
      EXPECT_EQ(d.error().code, ErrorCode::kInvalidArgument);
      EXPECT_NE(d.error().message.find("D-HH:MM:SS"), std::string::npos) << d.error().message;
    }
  }
}

}  // namespace
}  // namespace composer
