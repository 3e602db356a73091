// composerctl simulate and simulate compare, run in-process on files written here: the
// figures a script reads (-P, --csv, --json), the ratios to the first scenario, and the
// sentences of bad input and of jobs a cluster can never run.

#include <gtest/gtest.h>
#include <json/reader.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "composer/cli/composerctl.h"
#include "composer/cli/simulate_command.h"
#include "composer/test_support/temp_dir.h"

namespace composer::cli {
namespace {

struct Ran {
  int rc = 0;
  std::string out;
  std::string err;
};

Ran ctl(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"composerctl"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  Ran r;
  r.rc = run(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

class SimulateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    write("trace.csv",
          "submit_time_s,duration_s,gpus,mem_gb,cpus,type,wait_s,censored,extra\n"
          "0,100,3,,,training,0,0,\n0,100,3,,,training,0,0,\n0,50,2,,,training,0,0,\n");
    write("fixed.conf", "FixedNode=n[1-2] Gpus=4\n");
    write("pool.conf",
          "Fabric=sim\nNodeName=n[1-2] Zones=z GpuSlots=8\n"
          "DeviceGroup=g Type=gpu Model=A100 Zone=z Count=8\n");
  }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name)) << text;
    return dir.file(name);
  }
  std::string f(const std::string& name) const { return dir.file(name); }
  test_support::TempDir dir{"simulate-cli"};
};

TEST_F(SimulateCli, OneScenarioParsable) {
  const Ran r = ctl({"simulate", "--trace", f("trace.csv"), "--cluster", f("fixed.conf"), "-P",
                     "-o", "GPUS,RAN,GPU_UTIL,STRANDED_GPU_H,WAIT_MAX,MAKESPAN"});
  ASSERT_EQ(r.rc, kExitOk) << r.err;
  EXPECT_EQ(r.out, "GPUS|RAN|GPU_UTIL|STRANDED_GPU_H|WAIT_MAX|MAKESPAN\n8|3|58.3%|0.1|100|150\n");
}

TEST_F(SimulateCli, CompareGivesRatiosToTheFirst) {
  const Ran r = ctl({"simulate", "compare", "--trace", f("trace.csv"), f("fixed.conf"),
                     f("pool.conf"), "--csv", "-o", "MAKESPAN,MAKESPAN_RATIO,WAIT_MEAN_RATIO"});
  ASSERT_EQ(r.rc, kExitOk) << r.err;
  EXPECT_EQ(r.out, "MAKESPAN,MAKESPAN_RATIO,WAIT_MEAN_RATIO\n150,1.00,1.00\n100,0.67,0.00\n");

  const Ran j = ctl({"simulate", "compare", "--trace", f("trace.csv"), f("fixed.conf"),
                     f("pool.conf"), "--json"});
  ASSERT_EQ(j.rc, kExitOk) << j.err;
  Json::Value v;
  std::istringstream in(j.out);
  ASSERT_TRUE(Json::parseFromStream(Json::CharReaderBuilder(), in, &v, nullptr));
  ASSERT_EQ(v["scenarios"].size(), 2u);
  EXPECT_EQ(v["scenarios"][0]["stranded_gpu_hours"].asDouble(), 200.0 / 3600);
  EXPECT_EQ(v["scenarios"][1]["stranded_gpu_hours"].asDouble(), 0.0);
  EXPECT_EQ(v["scenarios"][1]["ratio_to_first"]["makespan_ratio"].asDouble(), 100.0 / 150);
  EXPECT_EQ(v["scenarios"][0]["trace_rules"]["no_memory"].asUInt64(), 3u);
}

// compare sets every kind of stranded capacity side by side, with ratios; --sizes the waits
// by job size.
TEST_F(SimulateCli, CompareShowsEveryStrandedFigure) {
  const Ran r = ctl({"simulate", "compare", "--trace", f("trace.csv"), f("fixed.conf"),
                     f("pool.conf"), "--csv", "-o",
                     "STRANDED_GPU_H,STRANDED_MEM_GIBH,IDLE_WAITING_GPU_H,MEM_ROUNDING_GIBH,"
                     "WAIT_GPU_MEAN,STRANDED_MEM_GIBH_RATIO,IDLE_WAITING_GPU_H_RATIO,"
                     "WAIT_GPU_MEAN_RATIO"});
  ASSERT_EQ(r.rc, kExitOk) << r.err;
  // Fixed: the 2-GPU job waits 100 s beside 2 free GPUs; GPU-weighted wait 2 x 100 / 8.
  EXPECT_EQ(r.out,
            "STRANDED_GPU_H,STRANDED_MEM_GIBH,IDLE_WAITING_GPU_H,MEM_ROUNDING_GIBH,WAIT_GPU_MEAN,"
            "STRANDED_MEM_GIBH_RATIO,IDLE_WAITING_GPU_H_RATIO,WAIT_GPU_MEAN_RATIO\n"
            "0.1,0.0,0.1,0.0,25,1.00,1.00,1.00\n0.0,0.0,0.0,0.0,0,1.00,0.00,0.00\n");
  const Ran sizes =
      ctl({"simulate", "--trace", f("trace.csv"), "--cluster", f("fixed.conf"), "--sizes", "-P"});
  ASSERT_EQ(sizes.rc, kExitOk) << sizes.err;
  EXPECT_EQ(sizes.out, "SCENARIO|SIZE|JOBS|WAIT_MEAN|WAIT_P50|WAIT_P95|WAIT_MAX\n" +
                           f("fixed.conf") + "|2-4 GPUs|3|33|0|100|100\n" + f("fixed.conf") +
                           "|all|3|33|0|100|100\n");
}

TEST_F(SimulateCli, JobsACLusterCanNeverRunAreNamed) {
  write("big.csv",
        "submit_time_s,duration_s,gpus,mem_gb,cpus,type,wait_s,censored,extra\n"
        "0,100,16,,,,0,0,\n0,100,2,,,,0,0,\n");
  const Ran r = ctl({"simulate", "--trace", f("big.csv"), "--cluster", f("fixed.conf"), "-P", "-o",
                     "JOBS,RAN,NEVER"});
  ASSERT_EQ(r.rc, kExitOk) << r.err;
  EXPECT_EQ(r.out, "JOBS|RAN|NEVER\n2|1|1\n");
  EXPECT_EQ(r.err, "composerctl: cluster " + f("fixed.conf") +
                       " can never run 1 job of the trace (" + f("big.csv") +
                       " line 2): 16 GPUs on 4 nodes: the cluster has only 8 GPUs\n");

  // --strict: the same figures, and a failure that says why.
  const Ran strict = ctl({"simulate", "--trace", f("big.csv"), "--cluster", f("fixed.conf"), "-P",
                          "-o", "JOBS,RAN,NEVER", "--strict"});
  EXPECT_EQ(strict.rc, kExitFailed);
  EXPECT_EQ(strict.out, r.out);
  EXPECT_EQ(strict.err, r.err + "composerctl: error: --strict: 1 job of the trace can never run\n");
  const Ran fine =
      ctl({"simulate", "--trace", f("trace.csv"), "--cluster", f("fixed.conf"), "-P", "--strict"});
  EXPECT_EQ(fine.rc, kExitOk) << fine.err;
}

TEST_F(SimulateCli, BadInputIsRefusedWithASentence) {
  write("bad.csv",
        "submit_time_s,duration_s,gpus,mem_gb,cpus,type,wait_s,censored,extra\n0,x,1,,,,0,0,\n");
  Ran r = ctl({"simulate", "--trace", f("bad.csv"), "--cluster", f("fixed.conf")});
  EXPECT_EQ(r.rc, kExitFailed);
  EXPECT_EQ(r.err, "composerctl: error: " + f("bad.csv") +
                       " line 2: duration_s='x': expected whole seconds from 0\n");
  EXPECT_EQ(r.out, "");

  r = ctl({"simulate", "--cluster", f("fixed.conf")});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_NE(r.err.find("--trace FILE is required"), std::string::npos);

  r = ctl({"simulate", "--trace", f("trace.csv"), "--cluster", f("fixed.conf"), "--csv", "-P"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_NE(r.err.find("--csv cannot be combined with -P or --json"), std::string::npos);

  r = ctl({"simulate", "compare", "--trace", f("trace.csv"), f("fixed.conf") + ":"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_NE(r.err.find("expected CLUSTER or CLUSTER:POLICY"), std::string::npos);

  r = ctl({"simulate", "--trace", f("trace.csv"), "--cluster", f("missing.conf")});
  EXPECT_EQ(r.rc, kExitFailed);
  EXPECT_NE(r.err.find("cannot read " + f("missing.conf")), std::string::npos);

  // A cluster file's junk bytes come back escaped.
  write("junk.conf", "FixedNode=n1 Gpus=4\n\x1b[31mKey\xfe=1\n");
  r = ctl({"simulate", "--trace", f("trace.csv"), "--cluster", f("junk.conf")});
  EXPECT_EQ(r.rc, kExitFailed);
  EXPECT_EQ(r.err, "composerctl: error: " + f("junk.conf") +
                       " line 2: unknown key '\\x1b[31mKey\\xfe' (allowed in a cluster file: "
                       "FixedNode, NodeName, DeviceGroup, Fabric, FabricName)\n");
}

// sweep: one cluster file with ${NAME} in it, a point per value, and the frontier. The trace's
// three jobs on a pool of 4, 8 and 16 GPUs: on 4 they wait 0, 100 and 200 s, 8 run them at once,
// and 16 are no better than 8 for twice the GPUs, so 4 and 8 are on the frontier.
TEST_F(SimulateCli, SweepPrintsTheFrontier) {
  write("sweep.conf",
        "Fabric=sim\nNodeName=n[1-2] Zones=z GpuSlots=16\n"
        "DeviceGroup=g Type=gpu Model=A100 Zone=z Count=${GPUS}\n");
  const Ran r = ctl({"simulate", "sweep", "--trace", f("trace.csv"), "--cluster", f("sweep.conf"),
                     "--vary", "GPUS=4,8,16", "-P", "-o", "SCENARIO,GPUS,WAIT_MEAN,FRONTIER"});
  ASSERT_EQ(r.rc, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "SCENARIO|GPUS|WAIT_MEAN|FRONTIER\nGPUS=4|4|100|yes\nGPUS=8|8|0|yes\n"
            "GPUS=16|16|0|no\n");

  Ran bad = ctl({"simulate", "sweep", "--trace", f("trace.csv"), "--cluster", f("sweep.conf"),
                 "--vary", "BLOCK=16G"});
  EXPECT_EQ(bad.rc, kExitUsage);
  EXPECT_NE(bad.err.find("--vary BLOCK: neither " + f("sweep.conf") + " uses ${BLOCK}"),
            std::string::npos)
      << bad.err;
  bad = ctl({"simulate", "sweep", "--trace", f("trace.csv"), "--cluster", f("sweep.conf"), "--vary",
             "GPUS=4,8", "--vary", "X=1"});
  EXPECT_EQ(bad.rc, kExitUsage);
  EXPECT_NE(bad.err.find("--vary X has 1 values, --vary GPUS 2"), std::string::npos) << bad.err;
  bad = ctl({"simulate", "sweep", "--trace", f("trace.csv"), "--cluster", f("sweep.conf"), "--vary",
             "GPUS"});
  EXPECT_EQ(bad.rc, kExitUsage);
  EXPECT_NE(bad.err.find("expected NAME=V1,V2,..."), std::string::npos) << bad.err;
}

// A site's own history: sacct -P output as the trace, its times in the zone sacct printed
// them in (--time-zone), else UTC.
TEST_F(SimulateCli, SacctExportIsATrace) {
  write("sacct.txt",
        "JobID|Submit|Start|End|Elapsed|Timelimit|ReqTRES|AllocTRES|Partition|Account|QOS|"
        "AdminComment|State\n"
        "7|2024-03-04T10:00:00|2024-03-04T10:00:00|2024-03-04T11:00:00|01:00:00|02:00:00|"
        "cpu=8,node=1,gres/gpu=4|cpu=8,node=1,gres/gpu=4|train|ml|normal||COMPLETED\n"
        "7.batch|2024-03-04T10:00:00|2024-03-04T10:00:00|2024-03-04T11:00:00|01:00:00|||||ml|||"
        "COMPLETED\n"
        "8|2024-03-04T10:10:00|2024-03-04T10:20:00|2024-03-04T10:50:00|00:30:00|01:00:00|"
        "cpu=4,node=1,gres/gpu=4|cpu=4,node=1,gres/gpu=4|train|ml|normal||COMPLETED\n");
  Ran r = ctl({"simulate", "--trace", f("sacct.txt"), "--cluster", f("fixed.conf"), "--json"});
  ASSERT_EQ(r.rc, kExitOk) << r.err;
  Json::Value v;
  std::istringstream in(r.out);
  ASSERT_TRUE(Json::parseFromStream(Json::CharReaderBuilder(), in, &v, nullptr));
  const Json::Value& s = v["scenarios"][0];
  EXPECT_EQ(s["jobs"].asUInt64(), 2u);
  EXPECT_EQ(s["trace_rules"]["steps"].asUInt64(), 1u);
  EXPECT_EQ(s["first_submit_s"].asInt64(), 1709546400);  // 2024-03-04T10:00:00Z
  EXPECT_EQ(s["wait"]["max_s"].asInt64(), 0);            // two 4-GPU servers
  r = ctl({"simulate", "--trace", f("sacct.txt"), "--cluster", f("fixed.conf"), "--json",
           "--time-zone", "America/New_York"});
  ASSERT_EQ(r.rc, kExitOk) << r.err;
  EXPECT_NE(r.out.find("\"first_submit_s\" : 1709564400"), std::string::npos);  // 15:00Z
}

// The progress line (shown only while stderr is a terminal, never with --quiet): how far,
// how fast, how long still.
TEST(SimulateProgress, LineSaysRateAndEta) {
  EXPECT_EQ(progress_line("fixed.conf", 0, 1000, 0),
            "simulate fixed.conf: 0 of 1000 jobs "
            "submitted (0.0%)");
  EXPECT_EQ(progress_line("fixed.conf", 250000, 1000000, 10),
            "simulate fixed.conf: 250000 of 1000000 jobs submitted (25.0%), 25000 jobs/s, ETA "
            "00:00:30");
  const Ran quiet =
      ctl({"simulate", "--trace", "/nonexistent.csv", "--cluster", "/nonexistent.conf", "--quiet"});
  EXPECT_EQ(quiet.rc, kExitFailed);  // --quiet is an option; the files are what fails
}

// Times are UTC unless the trace or --time-zone says otherwise: the same trace and policy
// give byte for byte the same output under two machine zones, and the trace's wall clock is
// read as UTC (2024-03-04 is a Monday: the first submit at 07:30 UTC lies before the policy's
// 08:00 window). An offset in the trace, and --time-zone, move it.
TEST_F(SimulateCli, SameResultUnderEveryTz) {
  write("tz.csv",
        "submit_time_s,duration_s,gpus,mem_gb,cpus,type,wait_s,censored,extra\n"
        "0,3600,4,,,training,0,0,submitted=2024-03-04 07:30:00\n"
        "1800,600,2,,,training,0,0,\n7200,600,2,,,training,0,0,\n");
  write("tz.policy",
        "TimeZone=UTC\nWindow=day Start=08:00 End=20:00\nClass=training\n"
        "DefaultClass=training\nLimit=training Window=day Gpus=2\n");
  const std::vector<std::string> args = {"simulate",     "--trace",  f("tz.csv"),    "--cluster",
                                         f("pool.conf"), "--policy", f("tz.policy"), "--json"};
  const char* before = std::getenv("TZ");
  const std::string saved = before == nullptr ? "" : before;
  std::vector<Ran> runs;
  for (const char* tz : {"UTC", "America/Los_Angeles", "Asia/Kolkata"}) {
    setenv("TZ", tz, 1);
    tzset();
    runs.push_back(ctl(args));
  }
  if (before == nullptr) {
    unsetenv("TZ");
  } else {
    setenv("TZ", saved.c_str(), 1);
  }
  tzset();
  ASSERT_EQ(runs[0].rc, kExitOk) << runs[0].err;
  EXPECT_EQ(runs[1].out, runs[0].out);
  EXPECT_EQ(runs[2].out, runs[0].out);
  Json::Value v;
  std::istringstream in(runs[0].out);
  ASSERT_TRUE(Json::parseFromStream(Json::CharReaderBuilder(), in, &v, nullptr));
  // 2024-03-04T07:30:00Z.
  EXPECT_EQ(v["scenarios"][0]["first_submit_s"].asInt64(), 1709537400);

  write("tz-offset.csv",
        "submit_time_s,duration_s,gpus,mem_gb,cpus,type,wait_s,censored,extra\n"
        "0,3600,4,,,training,0,0,submitted=2024-03-04 07:30:00+01:00\n");
  Ran r = ctl({"simulate", "--trace", f("tz-offset.csv"), "--cluster", f("pool.conf"), "--json"});
  ASSERT_EQ(r.rc, kExitOk) << r.err;
  EXPECT_NE(r.out.find("\"first_submit_s\" : 1709533800"), std::string::npos) << r.out;
  r = ctl({"simulate", "--trace", f("tz.csv"), "--cluster", f("pool.conf"), "--time-zone",
           "Europe/Berlin", "--json"});
  ASSERT_EQ(r.rc, kExitOk) << r.err;
  EXPECT_NE(r.out.find("\"first_submit_s\" : 1709533800"), std::string::npos) << r.out;
  r = ctl({"simulate", "--trace", f("tz.csv"), "--cluster", f("pool.conf"), "--time-zone",
           "Mars/Olympus"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_NE(r.err.find("--time-zone: "), std::string::npos) << r.err;
}

}  // namespace
}  // namespace composer::cli
