#include "composer/policies/parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "policy_fixture.h"

namespace composer::policies {
namespace {

using ::testing::HasSubstr;
using testing::kDayNight;
using testing::parse_error;
using testing::parse_ok;

TEST(PolicyParser, ReadsTheDayNightPolicy) {
  const Policy p = parse_ok(kDayNight);
  EXPECT_EQ(p.time_zone.name(), "Europe/Berlin");
  ASSERT_EQ(p.windows.size(), 1u);
  EXPECT_EQ(p.windows[0].name, "day");
  EXPECT_EQ(p.windows[0].days, kMonToFri);
  EXPECT_EQ(p.windows[0].start_min, 8 * 60);
  EXPECT_EQ(p.windows[0].end_min, 20 * 60);
  EXPECT_EQ(p.windows[0].line, 3);
  ASSERT_EQ(p.classes.size(), 2u);
  EXPECT_EQ(p.classes[0].accounts, std::vector<std::string>{"ml-research"});
  EXPECT_EQ(p.default_class, "inference");
  ASSERT_EQ(p.limits.size(), 4u);
  const Limit* l = p.find_limit("training", "day");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->caps[type_index(DeviceType::kGpu)], (CapSpec{CapSpec::Kind::kShare, 7500}));
  EXPECT_EQ(l->caps[type_index(DeviceType::kNvme)], (CapSpec{CapSpec::Kind::kCount, 4}));
  EXPECT_FALSE(p.find_limit("inference", "day")->caps[type_index(DeviceType::kNvme)]);
  EXPECT_NE(p.find_limit("training", "Default"), nullptr);
}

TEST(PolicyParser, KeysAreCaseInsensitiveAndCommentsIgnored) {
  const Policy p = parse_ok(
      "timezone=UTC   # comment\n"
      "\n"
      "   # only a comment\n"
      "WINDOW=night days=sun-thu START=20:00 end=08:00\n"
      "window=weekend Days=Sat,Sun Start=00:00 End=24:00\n"
      "window=odd Days=Fri-Mon,Wed Start=12:00 End=00:00\n"
      "class=batch\n"
      "limit=batch window=default gpus=2 MEM=64G nvme=0\n");
  ASSERT_EQ(p.windows.size(), 3u);
  EXPECT_TRUE(p.windows[0].crosses_midnight());
  EXPECT_EQ(p.windows[0].days, 0x4f);  // Sun, Mon, Tue, Wed, Thu
  EXPECT_EQ(p.windows[0].nominal_minutes(), 12 * 60);
  EXPECT_EQ(p.windows[1].days, kSatSun);
  EXPECT_EQ(p.windows[1].nominal_minutes(), 1440);
  EXPECT_EQ(p.windows[2].days, 0x75);  // Mon, Wed, Fri, Sat, Sun
  EXPECT_EQ(p.windows[2].end_min, 1440);
  EXPECT_FALSE(p.windows[2].crosses_midnight());
  EXPECT_EQ(p.limits[0].window, "Default");
  EXPECT_EQ(p.limits[0].caps[type_index(DeviceType::kMem)], (CapSpec{CapSpec::Kind::kCount, 64}));
}

TEST(PolicyParser, PlacementLinesGiveEachClassItsRule) {
  const Policy p = parse_ok(
      "Class=train\nClass=crit\nClass=inf\n"
      "Placement=train Rule=spread Level=appliance Count=2 Type=mem\n"
      "placement=crit rule=Avoid-Shared level=enclosure\n"
      "Placement=inf Rule=pack\n");
  ASSERT_EQ(p.placements.size(), 3u);
  EXPECT_EQ(p.placements[0].class_name, "train");
  EXPECT_EQ(p.placements[0].rule.to_string(), "spread appliance 2 mem");
  EXPECT_EQ(p.placements[0].line, 4);
  EXPECT_EQ(p.placements[1].rule.to_string(), "avoid-shared enclosure");
  EXPECT_EQ(p.placements[2].rule.kind, PlacementRule::Kind::kPack);
}

TEST(PolicyParser, OnFailureLinesGiveEachClassItsReaction) {
  const Policy p = parse_ok(
      "Class=train\nClass=crit\nClass=inf\n"
      "OnFailure=train Action=requeue\n"
      "onfailure=crit action=Requeue maxrequeues=7\n"
      "OnFailure=inf Action=none\n");
  ASSERT_EQ(p.reactions.size(), 3u);
  EXPECT_EQ(p.reaction("train").action, FailureReaction::Action::kRequeue);
  EXPECT_EQ(p.reaction("train").max_requeues, FailureReaction::kDefaultMaxRequeues);
  EXPECT_EQ(p.reaction("train").line, 4);
  EXPECT_EQ(p.reaction("crit").max_requeues, 7u);
  EXPECT_EQ(p.reaction("inf").action, FailureReaction::Action::kNone);
  // A class without a line, and a name the policy does not know, are notified.
  const Policy q = parse_ok("Class=a\n");
  EXPECT_EQ(q.reaction("a").action, FailureReaction::Action::kNotify);
  EXPECT_EQ(q.reaction("a").line, 0);
  EXPECT_EQ(q.reaction("zz").action, FailureReaction::Action::kNotify);
}

TEST(PolicyParser, MemPolicyLinesGiveADefaultAndACap) {
  const Policy p = parse_ok(
      "Class=inference\nClass=training\nClass=batch\nClass=free\n"
      "MemPolicy=inference Default=interleave Allow=preferred,interleave,weighted\n"
      "mempolicy=training default=preferred\n"
      "MemPolicy=batch Allow=preferred,bind\n");
  ASSERT_EQ(p.mem_policies.size(), 3u);
  EXPECT_EQ(p.mem_policies[0].line, 5);
  const auto kind = [&](std::string_view cls, std::optional<MemPolicy> asked) {
    Expected<MemPolicy> m = class_mem_policy(p.mem_policies, cls, asked);
    return m ? to_string(*m) : m.error().message;
  };
  const MemPolicy bind{MemPolicy::Kind::kBind, 0, 0};
  const MemPolicy weighted{MemPolicy::Kind::kWeighted, 3, 1};
  // The class's default where the job asks for none; preferred without one, or without a line.
  EXPECT_EQ(kind("inference", std::nullopt), "interleave");
  EXPECT_EQ(kind("training", std::nullopt), "preferred");
  EXPECT_EQ(kind("batch", std::nullopt), "preferred");
  EXPECT_EQ(kind("free", std::nullopt), "preferred");
  // What the job asks for where the class allows it: never changed.
  EXPECT_EQ(kind("inference", weighted), "weighted:3:1");
  EXPECT_EQ(kind("training", bind), "bind");  // no Allow=: every kind
  EXPECT_EQ(kind("batch", bind), "bind");
  EXPECT_EQ(kind("free", bind), "bind");
  // Over the cap: refused with the class, what it allows and the line.
  Expected<MemPolicy> over = class_mem_policy(p.mem_policies, "inference", bind);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(over.error().message,
            "--compose-mem-policy=bind: workload class inference allows only preferred, "
            "interleave or weighted (MemPolicy line 5 of the policy); ask for one of those, or "
            "leave the option out for the class's default (interleave)");
  EXPECT_THAT(kind("batch", weighted), HasSubstr("workload class batch allows only preferred or "
                                                 "bind (MemPolicy line 7 of the policy)"));
}

TEST(PolicyParser, WithoutTimeZoneLineUsesUtc) {
  const Policy p = parse_ok("Class=a\n");
  EXPECT_EQ(p.time_zone.name(), "UTC");
}

struct BadLine {
  const char* text;
  const char* expected;
};

class PolicyParserRefuses : public ::testing::TestWithParam<BadLine> {};

TEST_P(PolicyParserRefuses, NamingLineKeyValueAndRule) {
  const std::string text =
      std::string("Class=a\nWindow=w Start=08:00 End=20:00\n") + GetParam().text;
  EXPECT_THAT(parse_error(text, "site.policy"), HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(
    BadInput, PolicyParserRefuses,
    ::testing::Values(
        BadLine{"Frobnicate=1\n",
                "site.policy line 3: unknown key Frobnicate at the start of a line: a line starts "
                "with TimeZone=, Window=, Class=, DefaultClass=, Limit=, Placement=, "
                "OnFailure= or MemPolicy="},
        BadLine{"MemPolicy=a\n", "line 3: MemPolicy=a needs Default=POLICY, Allow=LIST or both"},
        BadLine{"MemPolicy=a Default=spread\n",
                "line 3: Default=spread is no memory policy: expected bind, preferred, "
                "interleave or weighted:D:C with D and C whole numbers from 1 to 255"},
        BadLine{"MemPolicy=a Default=weighted:0:1\n", "line 3: Default=weighted:0:1 is no memory"},
        BadLine{"MemPolicy=a Allow=preferred,local\n",
                "line 3: Allow=preferred,local: local is no memory policy: list preferred, "
                "bind, interleave or weighted, separated by commas"},
        BadLine{"MemPolicy=a Allow=bind,bind Default=bind\n",
                "line 3: Allow=bind,bind names bind twice"},
        BadLine{"MemPolicy=a Default=bind Allow=preferred,interleave\n",
                "line 3: MemPolicy=a Default=bind is not among Allow=preferred,interleave: a "
                "class's default must be a policy it allows"},
        BadLine{"MemPolicy=a Allow=interleave\n",
                "line 3: MemPolicy=a Allow=interleave leaves out preferred, the default of a "
                "job that asks for none: give Default= one of the allowed policies"},
        BadLine{"MemPolicy=zz Default=bind\n",
                "line 3: MemPolicy=zz names no class: define it with Class=zz"},
        BadLine{"MemPolicy=a Default=bind\nMemPolicy=a Allow=bind,preferred\n",
                "line 4: MemPolicy=a is given twice (first on line 3): one MemPolicy line per "
                "class"},
        BadLine{"MemPolicy=a Default=bind Rule=pack\n",
                "line 3: unknown key Rule on a MemPolicy line: allowed keys are default, allow"},
        BadLine{"OnFailure=a\n",
                "line 3: OnFailure=a needs Action=notify, Action=requeue or Action=none"},
        BadLine{"OnFailure=a Action=reboot\n",
                "line 3: Action=reboot is not a reaction to a failed device: use notify, requeue "
                "or none"},
        BadLine{"OnFailure=a Action=notify MaxRequeues=2\n",
                "line 3: OnFailure=a Action=notify takes no MaxRequeues=: only Action=requeue "
                "requeues a job"},
        BadLine{"OnFailure=a Action=requeue MaxRequeues=0\n",
                "line 3: MaxRequeues=0 is not a number of requeues: a whole number from 1 to 100 "
                "(a job that must never be requeued: Action=notify)"},
        BadLine{"OnFailure=a Action=requeue MaxRequeues=101\n",
                "line 3: MaxRequeues=101 is not a number of requeues"},
        BadLine{"OnFailure=zz Action=none\n",
                "line 3: OnFailure=zz names no class: define it with Class=zz"},
        BadLine{"OnFailure=a Action=none\nOnFailure=a Action=requeue\n",
                "line 4: OnFailure=a is given twice (first on line 3): one reaction per class"},
        BadLine{"OnFailure=a Action=none Level=x\n",
                "line 3: unknown key Level on a OnFailure line: allowed keys are action, "
                "maxrequeues"},
        BadLine{"Placement=a\n",
                "line 3: Placement=a needs Rule=pack, Rule=spread or "
                "Rule=avoid-shared"},
        BadLine{"Placement=a Rule=scatter\n",
                "line 3: Rule=scatter is not a placement rule: use pack, spread or avoid-shared"},
        BadLine{"Placement=a Rule=pack Level=enclosure\n",
                "line 3: Placement=a Rule=pack takes no Level=, Count= or Type="},
        BadLine{"Placement=a Rule=spread Count=2\n",
                "line 3: Placement=a Rule=spread needs Level=<a level of composer.conf's "
                "DomainLevels=>"},
        BadLine{"Placement=a Rule=spread Level=appliance\n",
                "line 3: Placement=a Rule=spread needs Count=N, the domains a job's devices "
                "spread over: a whole number from 2 to 64"},
        BadLine{"Placement=a Rule=spread Level=appliance Count=1\n",
                "a whole number from 2 to 64 (got 1)"},
        BadLine{"Placement=a Rule=spread Level=appliance Count=2 Type=fpga\n",
                "line 3: Type=fpga is not a device type: use gpu, mem or nvme"},
        BadLine{"Placement=a Rule=avoid-shared Level=enclosure Count=2\n",
                "line 3: Placement=a Rule=avoid-shared takes no Count= or Type="},
        BadLine{"Placement=zz Rule=pack\n",
                "line 3: Placement=zz names no class: define it with Class=zz"},
        BadLine{"Placement=a Rule=pack\nPlacement=a Rule=avoid-shared Level=x\n",
                "line 4: Placement=a is given twice (first on line 3)"},
        BadLine{"Placement=a Rule=pack Colour=red\n",
                "line 3: unknown key Colour on a Placement line: allowed keys are rule, level, "
                "count, type"},
        BadLine{"Window=x Start 08:00\n", "line 3: 'Start' is not Key=Value"},
        BadLine{"Window=x Start=8:00 End=20:00\n",
                "line 3: Start=8:00 is not a time of day: write HH:MM from 00:00 to 23:59"},
        BadLine{"Window=x Start=08:00 End=24:30\n", "line 3: End=24:30 is not a time of day"},
        BadLine{"Window=x Start=08:00 End=08:00\n",
                "line 3: Window=x has Start=08:00 and End=08:00: start and end must differ"},
        BadLine{"Window=x Days=Mon-Fry Start=08:00 End=09:00\n",
                "line 3: Days=Mon-Fry is not a list of days: use Mon, Tue"},
        BadLine{"Window=x Days=Mon\n", "line 3: Window=x needs both Start=HH:MM and End=HH:MM"},
        BadLine{"Window=W Start=01:00 End=02:00\n",
                "line 3: Window=W is defined twice (first on line 2)"},
        BadLine{"Window=default Start=01:00 End=02:00\n", "line 3: Window=default is reserved"},
        BadLine{"Window=x Start=01:00 End=02:00 Gpus=3\n",
                "line 3: unknown key Gpus on a Window line: allowed keys are days, start, end"},
        BadLine{"Class=9lives\n",
                "line 3: Class=9lives is not a valid name: a name starts with a letter"},
        BadLine{"Class=b Partitions=a,,b\n",
                "line 3: Partitions=a,,b is not a comma-separated list"},
        BadLine{"Limit=a Window=w Gpus=150%\n",
                "line 3: Gpus=150% is not a share of the pool: write a percentage from 0% to 100%"},
        BadLine{"Limit=a Window=w Gpus=-1\n", "line 3: Gpus=-1 is not a count"},
        BadLine{"Limit=a Window=w Mem=1536M\n",
                "line 3: Mem=1536M is not a whole number of GiB: memory caps are counted in GiB"},
        BadLine{"Limit=a Window=w Mem=lots\n", "line 3: Mem=lots is not a memory size"},
        BadLine{"Limit=a Window=w\n",
                "line 3: Limit=a Window=w caps nothing: give at least one of"},
        BadLine{"Limit=a Gpus=1\n", "line 3: Limit=a needs Window=<name>"},
        BadLine{"Limit=nobody Window=w Gpus=1\n",
                "line 3: Limit=nobody names no class: define it with Class=nobody (classes "
                "defined: a)"},
        BadLine{"Limit=a Window=evening Gpus=1\n",
                "line 3: Window=evening on this Limit line names no window"},
        BadLine{"Limit=a Window=w Gpus=1\nLimit=a Window=w Nvme=1\n",
                "line 4: Limit=a Window=w is given twice (first on line 3)"},
        BadLine{"DefaultClass=zzz\n",
                "line 3: DefaultClass=zzz names no class (classes defined: a)"},
        BadLine{
            "TimeZone=Mars/Olympus\n",
            "line 3: TimeZone=Mars/Olympus cannot be used: time zone 'Mars/Olympus' is unknown"},
        BadLine{"TimeZone=UTC\nTimeZone=UTC\n",
                "line 4: TimeZone is given twice (first on line 3)"},
        BadLine{"Class=b Partitions=p\nClass=c Partitions=p\n",
                "line 4: partition p is claimed by class b (line 3) and by class c"},
        BadLine{"Class=b Days=Mon Days=Tue\n", "line 3: key Days appears twice on one line"},
        BadLine{"Class=b QOS=\n", "line 3: key QOS has no value"}));

TEST(PolicyParser, ReportsEveryProblemNotOnlyTheFirst) {
  const std::string err =
      parse_error("Bogus=1\nWindow=x Start=99:00 End=10:00\nLimit=q Window=x Gpus=1\n");
  EXPECT_THAT(err, HasSubstr("test.policy line 1:"));
  EXPECT_THAT(err, HasSubstr("test.policy line 2:"));
  EXPECT_THAT(err, HasSubstr("test.policy line 3:"));
}

TEST(ShareRounding, FloorButNeverZeroForAPositiveShareOfANonEmptyPool) {
  const CapSpec quarter{CapSpec::Kind::kShare, 2500};
  EXPECT_EQ(resolve_cap(quarter, 16), 4u);
  EXPECT_EQ(resolve_cap(quarter, 10), 2u);                               // 2.5 -> 2
  EXPECT_EQ(resolve_cap(CapSpec{CapSpec::Kind::kShare, 3300}, 10), 3u);  // 3.3 -> 3
  EXPECT_EQ(resolve_cap(CapSpec{CapSpec::Kind::kShare, 9999}, 100), 99u);
  EXPECT_EQ(resolve_cap(CapSpec{CapSpec::Kind::kShare, 100}, 16), 1u);  // 0.16 -> 1, not 0
  EXPECT_EQ(resolve_cap(CapSpec{CapSpec::Kind::kShare, 1250}, 8), 1u);  // 12.5% of 8
  EXPECT_EQ(resolve_cap(CapSpec{CapSpec::Kind::kShare, 0}, 16), 0u);
  EXPECT_EQ(resolve_cap(quarter, 0), 0u);
  EXPECT_EQ(resolve_cap(CapSpec{CapSpec::Kind::kShare, 10000}, 1024), 1024u);
  EXPECT_EQ(resolve_cap(CapSpec{CapSpec::Kind::kCount, 7}, 16), 7u);
  EXPECT_EQ((CapSpec{CapSpec::Kind::kShare, 1250}).to_string(DeviceType::kGpu), "12.5%");
  EXPECT_EQ((CapSpec{CapSpec::Kind::kCount, 64}).to_string(DeviceType::kMem), "64G");
  const Policy p = parse_ok("Class=a\nLimit=a Window=Default Gpus=12.5% Mem=0.25%\n");
  EXPECT_EQ(p.limits[0].caps[0], (CapSpec{CapSpec::Kind::kShare, 1250}));
  EXPECT_EQ(p.limits[0].caps[1], (CapSpec{CapSpec::Kind::kShare, 25}));
}

TEST(DayFormatting, RangesAndLists) {
  EXPECT_EQ(format_days(kMonToFri), "Mon-Fri");
  EXPECT_EQ(format_days(kSatSun), "Sat,Sun");
  EXPECT_EQ(format_days(kAllDays), "every day");
  EXPECT_EQ(format_days(0x1d), "Mon,Wed-Fri");
}

}  // namespace
}  // namespace composer::policies
