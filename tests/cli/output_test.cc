#include "composer/cli/output.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <sstream>

#include "composer/api/codec.h"
#include "composer/common/units.h"

namespace composer::cli {
namespace {

std::string printed(const Table& t, Format f, bool header = true) {
  std::ostringstream out;
  t.print(out, f, header);
  return out.str();
}

class CliUtcTime : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tz = std::getenv("TZ");
    saved_ = tz != nullptr ? std::optional<std::string>(tz) : std::nullopt;
    ::setenv("TZ", "UTC", 1);
    ::tzset();
  }
  void TearDown() override {
    if (saved_) {
      ::setenv("TZ", saved_->c_str(), 1);
    } else {
      ::unsetenv("TZ");
    }
    ::tzset();
  }
  std::optional<std::string> saved_;
};

TEST(CliTable, AlignsColumnsToTheWidestCellAndNumbersToTheRight) {
  Table t({{"ID"}, {"COUNT", true}, {"NOTE"}});
  t.add_row({"gpu-a-00", "2", "x"});
  t.add_row({"m", "1024", ""});
  EXPECT_EQ(printed(t, Format::kTable),
            "ID        COUNT  NOTE\n"
            "gpu-a-00      2  x\n"
            "m          1024\n");
}

TEST(CliTable, WidthCountsCharactersNotBytes) {
  Table t({{"USER"}, {"N", true}});
  t.add_row({"jürgen", "1"});
  t.add_row({"bob", "2"});
  EXPECT_EQ(printed(t, Format::kTable),
            "USER    N\n"
            "jürgen  1\n"
            "bob     2\n");
}

TEST(CliTable, ParsableIsPipeSeparatedWithoutATrailingPipe) {
  Table t({{"ID"}, {"COUNT", true}, {"NOTE"}});
  t.add_row({"gpu-a-00", "2", ""});
  EXPECT_EQ(printed(t, Format::kParsable), "ID|COUNT|NOTE\ngpu-a-00|2|\n");
  EXPECT_EQ(printed(t, Format::kParsable, false), "gpu-a-00|2|\n");
  EXPECT_EQ(printed(t, Format::kTable, false), "gpu-a-00  2\n");
}

TEST(CliTable, KeepsEachRowOnOneLineAndEveryColumnPresent) {
  Table t({{"A"}, {"B"}});
  t.add_row({"two\nlines"});
  t.add_row({"x", "y", "dropped"});
  EXPECT_EQ(printed(t, Format::kParsable), "A|B\ntwo lines|\nx|y\n");
}

TEST(CliTable, EmptyTableIsItsHeader) {
  EXPECT_EQ(
      printed(device_table({}), Format::kParsable),
      "ID|TYPE|MODEL|SIZE|ZONE|ADDRESS|HEALTH|STATE|NODE|COMPOSITION|HOLDER|REASON|DOMAINS\n");
}

TEST(CliTables, PoolShowsSizesForMemoryAndNotForGpus) {
  std::vector<PoolRow> rows = {
      {.type = DeviceType::kGpu,
       .model = "A100-80G",
       .zone = "z1",
       .total = 8,
       .free = 6,
       .attached = 2},
      {.type = DeviceType::kMem,
       .model = "CXL-DDR5",
       .zone = "z1",
       .total = 4,
       .free = 3,
       .attached = 1,
       .total_bytes = 1 * kTiB,
       .free_bytes = 768 * kGiB,
       .schedulable_bytes = 1 * kTiB},
  };
  EXPECT_EQ(printed(pool_table(rows), Format::kTable),
            "TYPE  MODEL     ZONE  TOTAL  FREE  ATTACHED  DRAINED  FAILED  FOREIGN  TOTAL_SIZE  "
            "FREE_SIZE\n"
            "gpu   A100-80G  z1        8     6         2        0       0        0\n"
            "mem   CXL-DDR5  z1        4     3         1        0       0        0          1T     "
            "  768G\n");
  EXPECT_EQ(printed(pool_table(rows), Format::kParsable, false),
            "gpu|A100-80G|z1|8|6|2|0|0|0||\nmem|CXL-DDR5|z1|4|3|1|0|0|0|1T|768G\n");
}

TEST(CliTables, DevicesShowOwnerAndDrainReason) {
  Device a;
  a.id = "gpu-a-00";
  a.model = "A100-80G";
  a.zone = "z1";
  a.address = "0000:41:00.0";
  a.composition_id = 12;
  a.node = "node1";
  Device m;
  m.id = "mem-b-03";
  m.type = DeviceType::kMem;
  m.model = "CXL-DDR5";
  m.capacity_bytes = 256 * kGiB;
  m.zone = "z2";
  m.address = "numa2";
  m.drained = true;
  m.drain_reason = "ECC errors";
  m.domains = {{"appliance", "mem-b"}, {"power", "pdu-2"}};
  EXPECT_EQ(printed(device_table({a, m}), Format::kParsable, false),
            "gpu-a-00|gpu|A100-80G||z1|0000:41:00.0|ok|attached|node1|12|||\n"
            "mem-b-03|mem|CXL-DDR5|256G|z2|numa2|ok|drained||||ECC errors|"
            "appliance:mem-b,power:pdu-2\n");
}

TEST_F(CliUtcTime, CompositionsShowRequestDevicesAndLocalTime) {
  Composition c;
  c.id = 12;
  c.owner.job_id = 4711;
  c.node = "node1";
  c.owner.user = "alice";
  c.owner.account = "physics";
  c.owner.workload = "training";
  c.request = Request{2, "A100-80G", 64 * kGiB, 0};
  c.state = CompositionState::kReady;
  c.created_ms = 1714564800000;  // 2024-05-01T12:00:00Z
  c.mem_policy = "interleave";
  Device d1, d2;
  d1.id = "gpu-a-00";
  d2.id = "gpu-a-01";
  c.devices = {d1, d2};
  EXPECT_EQ(printed(composition_table({c}), Format::kTable),
            "ID  JOBID  NODE   USER   ACCOUNT  WORKLOAD  STATE  REQUEST                  "
            "MEMPOLICY   DEVICES            CREATED              ERROR  HOLD\n"
            "12   4711  node1  alice  physics  training  ready  gpus=A100-80G:2 mem=64G  "
            "interleave  gpu-a-00,gpu-a-01  2024-05-01T12:00:00\n");
  c.hold = "pid 9 holds gpu-a-00 (/dev/nvidia0)";
  EXPECT_EQ(
      printed(composition_table({c}), Format::kParsable),
      "ID|JOBID|NODE|USER|ACCOUNT|WORKLOAD|STATE|REQUEST|MEMPOLICY|DEVICES|CREATED|ERROR|HOLD\n"
      "12|4711|node1|alice|physics|training|ready|gpus=A100-80G:2 mem=64G|interleave|"
      "gpu-a-00,gpu-a-01|2024-05-01T12:00:00||pid 9 holds gpu-a-00 (/dev/nvidia0)\n");
}

TEST_F(CliUtcTime, EventsAndHealth) {
  Event e;
  e.id = 3;
  e.ts_ms = 1714564800000;
  e.kind = "drain";
  e.devices = {"gpu-a-00"};
  e.detail = "fan";
  EXPECT_EQ(printed(event_table({e}), Format::kParsable),
            "ID|TIME|KIND|JOBID|NODE|USER|FROM|TO|DEVICES|DETAIL\n"
            "3|2024-05-01T12:00:00|drain||||||gpu-a-00|fan\n");
  EXPECT_EQ(printed(health_table({"ok", "sim", "0.1.0", 90061}), Format::kTable),
            "STATUS  FABRIC  VERSION      UPTIME  WARNINGS\n"
            "ok      sim     0.1.0    1-01:01:01\n");
}

TEST(CliFormat, TimeAndElapsed) {
  EXPECT_EQ(format_time(0), "Unknown");
  EXPECT_EQ(format_elapsed(0), "00:00:00");
  EXPECT_EQ(format_elapsed(3723), "01:02:03");
  EXPECT_EQ(format_elapsed(86400 * 3), "3-00:00:00");
}

// The time arguments (events --since/--until, report -S/-E, policy explain --start) are read
// by accounting::parse_slurm_time: tests/accounting/time_spec_test.cc.

TEST(CliFields, FormatPicksColumnsInItsOrderInAnyCase) {
  Table t({{"ID"}, {"COUNT", true}, {"NOTE"}});
  t.add_row({"gpu-a-00", "2", "x"});
  ASSERT_TRUE(t.select("note,Id").ok());
  EXPECT_EQ(printed(t, Format::kParsable), "NOTE|ID\nx|gpu-a-00\n");
}

TEST(CliFields, WidthsCutAndAlignLikeSacct) {
  Table t({{"ID"}, {"COUNT", true}, {"NOTE"}});
  t.add_row({"gpu-a-00", "2", "jürgen"});
  ASSERT_TRUE(t.select("id%4,note%-8,count%3").ok());
  EXPECT_EQ(printed(t, Format::kTable),
            "  ID  NOTE      COU\n"
            "gpu-  jürgen      2\n");
  // -P ignores the widths, as sacct -P does.
  EXPECT_EQ(printed(t, Format::kParsable, false), "gpu-a-00|jürgen|2\n");
}

TEST(CliFields, UnknownFieldIsNamedWithTheAllowedOnes) {
  Table t = pool_table({});
  Status s = t.select("type,colour");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.error().message,
            "-o/--format: no field 'colour'; the fields are TYPE,MODEL,ZONE,TOTAL,FREE,ATTACHED,"
            "DRAINED,FAILED,FOREIGN,TOTAL_SIZE,FREE_SIZE (any case)");
  for (const char* bad : {"", "type,", "type%", "type%0", "type%x", "type%-", "type%5x"}) {
    EXPECT_FALSE(pool_table({}).select(bad).ok()) << bad;
  }
}

TEST(CliFields, PrintTableAppliesTheOptions) {
  std::ostringstream out;
  ASSERT_TRUE(print_table(out, health_table({"ok", "sim", "0.1.0", 61}),
                          {Format::kTable, false, "version,status"})
                  .ok());
  EXPECT_EQ(out.str(), "0.1.0  ok\n");
  std::ostringstream none;
  EXPECT_FALSE(print_table(none, health_table({}), {Format::kTable, true, "nope"}).ok());
  EXPECT_EQ(none.str(), "");
}

TEST(CliJson, PrintsTheApiObjectIndented) {
  std::ostringstream out;
  print_json(out, api::to_json(api::HealthInfo{"ok", "sim", "0.1.0", 5}));
  auto back = api::from_text<api::HealthInfo>(out.str());
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->uptime_s, 5);
  EXPECT_NE(out.str().find("\n  \"fabric\" : \"sim\""), std::string::npos) << out.str();
}

}  // namespace
}  // namespace composer::cli
