// composer/simulate: hand-computed traces with exact figures (fixed servers strand what pools
// do not, EASY backfill, a policy window boundary), conservation over random traces, the trace
// and cluster rules, and every bad input's sentence.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "composer/common/units.h"
#include "composer/policies/parser.h"
#include "composer/simulate/simulate.h"

namespace composer::simulate {
namespace {

constexpr const char* kHeader =
    "submit_time_s,duration_s,gpus,mem_gb,cpus,type,wait_s,censored,extra\n";

Cluster cluster(const std::string& text) {
  auto c = parse_cluster(text, "test.conf");
  EXPECT_TRUE(c) << (c ? "" : c.error().message);
  return c ? *c : Cluster{};
}

Trace csv(const std::string& rows, int64_t epoch_s = 0) {
  auto t = parse_csv_trace(std::string(kHeader) + rows, "trace.csv", epoch_s);
  EXPECT_TRUE(t) << (t ? "" : t.error().message);
  return t ? *t : Trace{};
}

struct Outcome {
  Result result;
  std::vector<JobOutcome> jobs;
};

Outcome simulate(const Cluster& c, const Trace& t, const policies::Policy* p = nullptr) {
  Outcome r;
  auto result = run(c, t, p, {}, &r.jobs);
  EXPECT_TRUE(result) << (result ? "" : result.error().message);
  if (result) r.result = *result;
  return r;
}

policies::Policy policy(const std::string& text) {
  auto p = policies::parse_policy(text, "test.policy", [](std::string_view) {
    return Expected<policies::TimeZone>(policies::TimeZone::utc());
  });
  EXPECT_TRUE(p) << (p ? "" : p.error().message);
  return p ? *p : policies::Policy{};
}

// Three jobs on 8 GPUs: two of 3 GPUs, then one of 2. Two fixed servers of 4 GPUs each hold
// one 3-GPU job, leaving 1 + 1 free: the 2-GPU job fits the free total but no server, so both
// free GPUs are stranded for the 100 s until the big jobs end. A pool of the same 8 GPUs
// places all three at once.
TEST(SimulateHandComputed, FixedServersStrandWhatPoolsPlace) {
  const Trace t = csv("0,100,3,,,training,0,0,\n0,100,3,,,training,0,0,\n0,50,2,,,training,0,0,\n");
  const Outcome on_fixed = simulate(cluster("FixedNode=n[1-2] Gpus=4\n"), t);
  EXPECT_EQ(on_fixed.result.gpus, 8u);
  EXPECT_EQ(on_fixed.result.started, 3u);
  EXPECT_EQ(on_fixed.jobs[2].start_s, 100);
  EXPECT_EQ(on_fixed.result.stranded_gpu_s, 2 * 100);
  EXPECT_EQ(on_fixed.result.makespan_s, 150);
  EXPECT_EQ(on_fixed.result.gpu_s, 3 * 100 + 3 * 100 + 2 * 50);
  EXPECT_DOUBLE_EQ(on_fixed.result.gpu_utilisation(), 700.0 / (8 * 150));
  EXPECT_EQ(on_fixed.result.wait.max_s, 100);
  EXPECT_DOUBLE_EQ(on_fixed.result.wait.mean_s, 100.0 / 3);
  EXPECT_EQ(on_fixed.jobs[0].nodes, std::vector<std::string>{"n1"});
  EXPECT_EQ(on_fixed.jobs[1].nodes, std::vector<std::string>{"n2"});

  const Outcome pool = simulate(cluster("Fabric=sim\nNodeName=n[1-2] Zones=z GpuSlots=8\n"
                                        "DeviceGroup=g Type=gpu Model=A100 Zone=z Count=8\n"),
                                t);
  EXPECT_EQ(pool.result.gpus, 8u);
  EXPECT_EQ(pool.jobs[2].start_s, 0);
  EXPECT_EQ(pool.result.stranded_gpu_s, 0);
  EXPECT_EQ(pool.result.makespan_s, 100);
  EXPECT_DOUBLE_EQ(pool.result.gpu_utilisation(), 700.0 / (8 * 100));
  EXPECT_EQ(pool.result.gpu_s, 700);
  EXPECT_EQ(pool.result.wait.max_s, 0);
}

// Memory strands the same way: two servers of 64G, jobs of 40G, 40G, then 40G... the third
// fits the 48G free in total but neither server's 24G.
TEST(SimulateHandComputed, FixedMemoryStrands) {
  const Trace t = csv("0,10,0,40,,,0,0,\n0,10,0,40,,,0,0,\n0,10,0,40,,,0,0,\n");
  const Outcome on_fixed = simulate(cluster("FixedNode=n[1-2] Memory=64G MemBlock=8G\n"), t);
  EXPECT_EQ(on_fixed.result.mem_bytes, 128 * kGiB);
  EXPECT_EQ(on_fixed.jobs[2].start_s, 10);
  // 2 x 24G free for 10 s.
  EXPECT_EQ(on_fixed.result.stranded_mem_mib_s, 48 * 1024 * 10);
  EXPECT_DOUBLE_EQ(on_fixed.result.stranded_mem_gib_hours(), 48.0 * 10 / 3600);
  EXPECT_EQ(on_fixed.jobs[0].mem_bytes, 40 * kGiB);
  EXPECT_EQ(on_fixed.result.mem_mib_s, 3 * 40 * 1024 * 10);
}

// EASY backfill on one 4-GPU server. A (2 GPUs, 0-100) runs; B (4 GPUs, submitted at 1)
// waits for A's time limit: its reservation is at 100. C (2 GPUs for 50 s, at 2) ends by 100
// and is backfilled. D (2 GPUs for 200 s, at 60) fits the free GPUs but would delay B, so it
// waits for B (100-110) and starts at 110; D is held by the reservation, not stranded.
TEST(SimulateHandComputed, EasyBackfill) {
  const Trace t = csv("0,100,2,,,,0,0,\n1,10,4,,,,0,0,\n2,50,2,,,,0,0,\n60,200,2,,,,0,0,\n");
  const Outcome r = simulate(cluster("FixedNode=n1 Gpus=4\n"), t);
  ASSERT_EQ(r.jobs.size(), 4u);
  EXPECT_EQ(r.jobs[0].start_s, 0);
  EXPECT_EQ(r.jobs[1].start_s, 100);
  EXPECT_EQ(r.jobs[2].start_s, 2);
  EXPECT_EQ(r.jobs[3].start_s, 110);
  EXPECT_EQ(r.result.backfilled, 1u);
  EXPECT_EQ(r.result.makespan_s, 310);
  EXPECT_EQ(r.result.stranded_gpu_s, 0);
  EXPECT_EQ(r.result.wait.max_s, 99);
  EXPECT_EQ(r.result.wait.p50_s, 0);  // nearest rank: waits 0, 0, 50, 99
  EXPECT_EQ(r.result.wait.p95_s, 99);
  EXPECT_DOUBLE_EQ(r.result.wait.mean_s, (0 + 99 + 0 + 50) / 4.0);
}

// EASY backfill by place on three 4-GPU servers. j0 (2 GPUs, 0-100) and j2 (3 GPUs) share
// n1 and n3 with j1 (4 GPUs) on n2. C (4 GPUs, at 1) needs a whole server: n1 at 100, its
// shadow time. D (1 GPU for 500 s, at 2) runs past it. Free in total at 100 are 4 + 1 GPUs,
// one more than C takes, so a test of totals lets D take n1's first free GPU and C waits for
// D until 502. By place D may not take n1's GPUs: it runs on n3, and C starts at 100.
TEST(SimulateBackfill, FixedServersKeepTheReservedServer) {
  const Trace t =
      csv("0,100,2,,,,0,0,\n0,1000,4,,,,0,0,\n0,1000,3,,,,0,0,\n1,10,4,,,,0,0,\n2,500,1,,,,0,0,\n");
  const Outcome r = simulate(cluster("FixedNode=n[1-3] Gpus=4\n"), t);
  ASSERT_EQ(r.jobs.size(), 5u);
  EXPECT_EQ(r.jobs[0].nodes, std::vector<std::string>{"n1"});
  EXPECT_EQ(r.jobs[2].nodes, std::vector<std::string>{"n3"});
  EXPECT_EQ(r.jobs[3].start_s, 100);
  EXPECT_EQ(r.jobs[3].nodes, std::vector<std::string>{"n1"});
  EXPECT_EQ(r.jobs[4].start_s, 2);
  EXPECT_EQ(r.jobs[4].nodes, std::vector<std::string>{"n3"});
  EXPECT_EQ(r.result.backfilled, 1u);
}

// The same on a memory pool of four 64G blocks on one host. j0 holds two blocks until 100, j1
// one. C asks 130G: three blocks, at 100. D asks 2G for 500 s. Requested bytes against whole
// blocks would leave 192G - 130G = 62G for D at the shadow time, so D would take the last
// free block and C would wait for it; in whole blocks nothing is left over: D waits for C.
TEST(SimulateBackfill, MemoryBlocksAreComparedWhole) {
  const Trace t =
      csv("0,100,0,128,,,0,0,\n0,1000,0,64,,,0,0,\n1,10,0,130,,,0,0,\n2,500,0,2,,,0,0,\n");
  const Outcome r = simulate(cluster("Fabric=sim\nNodeName=n1 Zones=z MemSlots=4\n"
                                     "DeviceGroup=m Type=mem Model=CXL Zone=z Count=4 Size=64G\n"),
                             t);
  ASSERT_EQ(r.jobs.size(), 4u);
  EXPECT_EQ(r.jobs[2].start_s, 100);
  EXPECT_EQ(r.jobs[2].mem_bytes, 192 * kGiB);
  EXPECT_EQ(r.jobs[3].start_s, 110);
  EXPECT_EQ(r.result.backfilled, 0u);
}

// Zones of a pool: hosts n1 and n2 each reach their own zone of 4 GPUs. j0 (2 GPUs until 100)
// is on z1, j1 (3 GPUs) on z2. C (4 GPUs, at 1) is reserved on z1 at 100. D (1 GPU for 500 s)
// fits z1's free GPUs now and z2's: first fit would take z1's and delay C to 502; by place it
// takes z2's and C starts at 100. E (1 GPU for 500 s) finds nothing beside C and waits for it.
TEST(SimulateBackfill, PoolZonesKeepTheReservedDevices) {
  const Trace t =
      csv("0,100,2,,,,0,0,\n0,1000,3,,,,0,0,\n1,10,4,,,,0,0,\n2,500,1,,,,0,0,\n3,500,1,,,,0,0,\n");
  const Outcome r = simulate(
      cluster("Fabric=sim\nNodeName=n1 Zones=z1 GpuSlots=8\nNodeName=n2 Zones=z2 GpuSlots=8\n"
              "DeviceGroup=a Type=gpu Model=A100 Zone=z1 Count=4\n"
              "DeviceGroup=b Type=gpu Model=A100 Zone=z2 Count=4\n"),
      t);
  ASSERT_EQ(r.jobs.size(), 5u);
  EXPECT_EQ(r.jobs[0].nodes, std::vector<std::string>{"n1"});
  EXPECT_EQ(r.jobs[1].nodes, std::vector<std::string>{"n2"});
  EXPECT_EQ(r.jobs[2].start_s, 100);
  EXPECT_EQ(r.jobs[3].start_s, 2);
  EXPECT_EQ(r.jobs[3].nodes, std::vector<std::string>{"n2"});
  EXPECT_EQ(r.jobs[4].start_s, 110);
}

// A policy window boundary. Mon 1970-01-05 07:00 UTC is second 0; training may hold 2 GPUs
// from 08:00 to 20:00 and the whole 4-GPU pool otherwise.
//   A 4 GPUs 07:00-07:30: outside the window, runs.
//   B 4 GPUs for 1 h at 07:30: would run into the window; it starts at 20:00 sharp.
//   C 2 GPUs for 10 min at 07:30: admitted and backfilled ahead of B.
//   D, E 2 GPUs for 10 min at 09:00: the cap takes one at a time: D at 09:00, E at 09:10.
TEST(SimulateHandComputed, PolicyWindowBoundary) {
  const int64_t epoch = 4 * 86400 + 7 * 3600;
  const Trace t =
      csv("0,1800,4,,,training,0,0,\n1800,3600,4,,,training,0,0,\n1800,600,2,,,training,0,0,\n"
          "7200,600,2,,,training,0,0,\n7200,600,2,,,training,0,0,\n",
          epoch);
  const policies::Policy p = policy(
      "Window=day Start=08:00 End=20:00\nClass=training\nDefaultClass=training\n"
      "Limit=training Window=day Gpus=2\n");
  const Outcome r = simulate(cluster("Fabric=sim\nNodeName=n1 Zones=z GpuSlots=4\n"
                                     "DeviceGroup=g Type=gpu Model=A100 Zone=z Count=4\n"),
                             t, &p);
  ASSERT_EQ(r.jobs.size(), 5u);
  EXPECT_EQ(r.jobs[0].start_s, epoch);
  EXPECT_EQ(r.jobs[1].start_s, epoch + 13 * 3600);
  EXPECT_EQ(r.jobs[2].start_s, epoch + 1800);
  EXPECT_EQ(r.jobs[3].start_s, epoch + 7200);
  EXPECT_EQ(r.jobs[4].start_s, epoch + 7800);
  EXPECT_EQ(r.result.makespan_s, 13 * 3600 + 3600);
  EXPECT_EQ(r.result.never_runnable, 0u);
  ASSERT_EQ(r.result.by_class.size(), 1u);
  EXPECT_EQ(r.result.by_class[0].name, "training");
  EXPECT_EQ(r.result.by_class[0].max_s, 13 * 3600 - 1800);

  // Without the policy B runs at 07:30.
  const Outcome free = simulate(cluster("Fabric=sim\nNodeName=n1 Zones=z GpuSlots=4\n"
                                        "DeviceGroup=g Type=gpu Model=A100 Zone=z Count=4\n"),
                                t);
  EXPECT_EQ(free.jobs[1].start_s, epoch + 1800);
}

// Jobs larger than a server span several; larger than the cluster, never run, with a
// A cap counts a running job only while the job overlaps the window (by its time limit), as
// Slurm's blocker reservations hold cap licenses only over their own time. Mon 07:00 UTC is
// second 0; training may hold 2 of the 4 GPUs from 08:00 to 20:00.
//   A 2 GPUs 07:00-07:50: ends before the window.
//   B 2 GPUs for 2 h at 07:10: 4 GPUs with A before 08:00 (no cap), 2 in the window: starts
//     at once. Counting A for the whole run would hold B until 07:50.
//   C 2 GPUs for 1 h at 07:20: B overlaps every window C's run does: C waits for B's end.
TEST(SimulatePolicy, CapsCountRunningJobsOnlyWhileTheyOverlap) {
  const int64_t epoch = 4 * 86400 + 7 * 3600;
  const Trace t = csv(
      "0,3000,2,,,training,0,0,\n600,7200,2,,,training,0,0,\n1200,3600,2,,,training,0,0,\n", epoch);
  const policies::Policy p = policy(
      "Window=day Start=08:00 End=20:00\nClass=training\nDefaultClass=training\n"
      "Limit=training Window=day Gpus=2\n");
  const Outcome r = simulate(cluster("Fabric=sim\nNodeName=n1 Zones=z GpuSlots=4\n"
                                     "DeviceGroup=g Type=gpu Model=A100 Zone=z Count=4\n"),
                             t, &p);
  ASSERT_EQ(r.jobs.size(), 3u);
  EXPECT_EQ(r.jobs[0].start_s, epoch);
  EXPECT_EQ(r.jobs[1].start_s, epoch + 600);
  EXPECT_EQ(r.jobs[2].start_s, epoch + 600 + 7200);
}

// sentence.
TEST(SimulateHandComputed, NodesAndNeverRunnable) {
  const Trace t = csv("0,10,16,,,,0,0,\n0,10,24,,,,0,0,\n0,10,40,,,,0,0,\n");
  const Outcome r = simulate(cluster("FixedNode=n[1-4] Gpus=8\n"), t);
  EXPECT_EQ(r.jobs[0].nodes.size(), 2u);
  EXPECT_EQ(r.jobs[0].start_s, 0);
  EXPECT_EQ(r.jobs[1].start_s, 10);
  EXPECT_EQ(r.result.never_runnable, 1u);
  ASSERT_EQ(r.result.never.size(), 1u);
  EXPECT_EQ(r.result.never[0].reason, "40 GPUs on 5 nodes: the cluster has only 32 GPUs");

  // A pool whose hosts cannot attach enough: the allocator's own sentence.
  const Outcome slots = simulate(cluster("Fabric=sim\nNodeName=n1 Zones=z GpuSlots=4\n"
                                         "DeviceGroup=g Type=gpu Model=A100 Zone=z Count=8\n"),
                                 csv("0,10,8,,,,0,0,\n"));
  ASSERT_EQ(slots.result.never.size(), 1u);
  EXPECT_EQ(slots.result.never[0].reason, "8 GPUs on 2 nodes: the cluster has only 1 node");
}

// Every job runs once for its duration or is counted never-runnable; device time integrated
// over the run equals the sum over jobs; no moment holds more than is installed.
TEST(SimulateConservation, RandomTraces) {
  const std::vector<std::string> clusters = {
      "FixedNode=a[1-6] Gpus=8 Memory=256G MemBlock=16G\nFixedNode=b[1-2] Gpus=4 Memory=1T "
      "MemBlock=64G\n",
      "Fabric=sim\nNodeName=h[1-4] Zones=z1,z2 GpuSlots=8 MemSlots=8\nNodeName=h[5-8] "
      "Zones=z2,z1 GpuSlots=16 MemSlots=4\nDeviceGroup=g1 Type=gpu Model=A Zone=z1 Count=24\n"
      "DeviceGroup=g2 Type=gpu Model=A Zone=z2 Count=32\nDeviceGroup=m1 Type=mem Model=C "
      "Zone=z1 Count=16 Size=64G\nDeviceGroup=m2 Type=mem Model=C Zone=z2 Count=8 Size=128G\n"};
  for (unsigned seed = 1; seed <= 6; ++seed) {
    std::mt19937 rng(seed);
    std::string rows;
    int64_t submit = 0;
    for (int i = 0; i < 400; ++i) {
      submit += static_cast<int64_t>(rng() % 300);
      const unsigned gpus = std::vector<unsigned>{0, 1, 2, 4, 8, 12, 16, 80}[rng() % 8];
      const unsigned mem = std::vector<unsigned>{0, 0, 8, 64, 200, 2000}[rng() % 6];
      rows += std::to_string(submit) + "," + std::to_string(60 + rng() % 5000) + "," +
              std::to_string(gpus) + "," + (mem ? std::to_string(mem) : "") + ",,,0,0,\n";
    }
    const Trace t = csv(rows);
    for (const std::string& text : clusters) {
      const Cluster c = cluster(text);
      const Outcome r = simulate(c, t);
      SCOPED_TRACE("seed " + std::to_string(seed) + " cluster " + text.substr(0, 20));
      EXPECT_EQ(r.result.started + r.result.never_runnable, t.jobs.size());
      EXPECT_EQ(r.result.gpu_s, r.result.job_gpu_s);
      EXPECT_EQ(r.result.mem_mib_s, r.result.job_mem_mib_s);
      EXPECT_LE(r.result.stranded_gpu_s, static_cast<int64_t>(c.gpus) * r.result.makespan_s);
      int64_t gpu_s = 0;
      uint64_t ran = 0;
      std::map<int64_t, int64_t> delta;
      for (size_t i = 0; i < r.jobs.size(); ++i) {
        const JobOutcome& o = r.jobs[i];
        if (o.start_s < 0) continue;
        ++ran;
        EXPECT_GE(o.start_s, t.jobs[i].submit_s);
        EXPECT_EQ(o.end_s - o.start_s, t.jobs[i].duration_s);
        EXPECT_EQ(o.gpus, t.jobs[i].gpus);
        EXPECT_GE(o.mem_bytes, t.jobs[i].mem_bytes);
        gpu_s += static_cast<int64_t>(o.gpus) * (o.end_s - o.start_s);
        delta[o.start_s] += o.gpus;
        delta[o.end_s] -= o.gpus;
      }
      EXPECT_EQ(ran, r.result.started);
      EXPECT_EQ(gpu_s, r.result.gpu_s);
      int64_t busy = 0;
      for (const auto& [when, d] : delta) {
        busy += d;
        EXPECT_LE(busy, static_cast<int64_t>(c.gpus)) << "at " << when;
      }
      EXPECT_LE(r.result.gpu_utilisation(), 1.0);
    }
  }
}

TEST(SimulateTrace, CsvRulesAreCounted) {
  const Trace t = csv("5,10,0.5,1.5,4,inference,0,1,x\n0,,2,,,,0,0,\n1,20,,,,,,,\n");
  EXPECT_EQ(t.counts.rows, 3u);
  EXPECT_EQ(t.counts.jobs, 2u);
  EXPECT_EQ(t.counts.no_duration, 1u);
  EXPECT_EQ(t.counts.fractional_gpus, 1u);
  EXPECT_EQ(t.counts.no_gpus, 1u);
  EXPECT_EQ(t.counts.no_memory, 1u);
  EXPECT_EQ(t.counts.censored, 1u);
  EXPECT_EQ(t.counts.no_time_limit, 2u);
  ASSERT_EQ(t.jobs.size(), 2u);
  EXPECT_EQ(t.jobs[0].submit_s, 1);  // in submit order
  EXPECT_EQ(t.jobs[1].gpus, 1u);
  EXPECT_EQ(t.jobs[1].mem_bytes, 1536 * kMiB);
  EXPECT_EQ(t.jobs[1].workload, "inference");
}

TEST(SimulateTrace, MalformedCsvRowsNameLineAndField) {
  auto bad = [](const std::string& rows) {
    auto t = parse_csv_trace(std::string(kHeader) + rows, "t.csv", 0);
    return t ? std::string("accepted") : t.error().message;
  };
  EXPECT_EQ(bad("0,10,4,,,,0,0,\nsoon,10,4,,,,0,0,\n"),
            "t.csv line 3: submit_time_s='soon': expected whole seconds from 0");
  EXPECT_EQ(bad("0,-1,4,,,,0,0,\n"),
            "t.csv line 2: duration_s='-1': expected whole seconds from 0");
  EXPECT_EQ(bad("0,10,four,,,,0,0,\n"),
            "t.csv line 2: gpus='four': expected a number of GPUs from 0");
  EXPECT_EQ(bad("0,10,4,lots,,,0,0,\n"),
            "t.csv line 2: mem_gb='lots': expected GiB from 0 to 1048576");
  EXPECT_EQ(bad("0,10,4,,,,0,2,\n"), "t.csv line 2: censored='2': expected 0 or 1");
  EXPECT_EQ(bad("0,10\n"),
            "t.csv line 2: expected 9 comma-separated fields (submit_time_s,duration_s,gpus,mem_gb,"
            "cpus,type,wait_s,censored,extra), found 2");
  // Eight fields are as wrong as two, and ten as eight.
  EXPECT_EQ(bad("0,10,4,,,,0,0\n"),
            "t.csv line 2: expected 9 comma-separated fields (submit_time_s,duration_s,gpus,mem_gb,"
            "cpus,type,wait_s,censored,extra), found 8");
  EXPECT_EQ(bad("0,10,4,,,,0,0,,\n"),
            "t.csv line 2: expected 9 comma-separated fields (submit_time_s,duration_s,gpus,mem_gb,"
            "cpus,type,wait_s,censored,extra), found 10");
  // Bytes that are not text are shown escaped, never raw.
  EXPECT_EQ(bad("0,1\x01\xff,4,,,,0,0,\n"),
            "t.csv line 2: duration_s='1\\x01\\xff': expected whole seconds from 0");
  auto header = parse_csv_trace("a,b\n", "t.csv", 0);
  ASSERT_FALSE(header);
  EXPECT_EQ(header.error().message,
            "t.csv line 1: expected the header line "
            "submit_time_s,duration_s,gpus,mem_gb,cpus,type,wait_s,censored,extra");
}

constexpr const char* kSacctHeader =
    "JobID|Submit|Start|End|Elapsed|Timelimit|ReqTRES|AllocTRES|Partition|Account|QOS|"
    "AdminComment|State\n";

TEST(SimulateTrace, SacctExport) {
  const std::string text =
      std::string(kSacctHeader) +
      "100|2024-03-04T10:00:00|2024-03-04T10:05:00|2024-03-04T11:05:00|01:00:00|02:00:00|"
      "cpu=8,mem=64G,node=1,gres/gpu=2|cpu=8,mem=64G,node=1,billing=8,gres/gpu=2|train|ml|normal|"
      "|COMPLETED\n"
      "100.batch|2024-03-04T10:05:00|2024-03-04T10:05:00|2024-03-04T11:05:00|01:00:00||||train|"
      "ml|||COMPLETED\n"
      "101|2024-03-04T10:01:00|Unknown|Unknown|00:00:00|1-00:00:00|cpu=1,node=1||serve|ml|"
      "normal||PENDING\n"
      "102|2024-03-04T10:02:00|2024-03-04T10:02:00|Unknown|00:30:00|UNLIMITED|"
      "cpu=4,node=2,license/fabric_gpu=4,license/fabric_mem=128|cpu=4,node=2,license/"
      "fabric_gpu=4,license/fabric_mem=128|serve|web|normal|composer: gpus=2 mem=64G "
      "workload=inference nodes=2|RUNNING\n";
  auto t = parse_sacct_trace(text, "sacct.txt");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->counts.rows, 4u);
  EXPECT_EQ(t->counts.steps, 1u);
  EXPECT_EQ(t->counts.no_duration, 1u);
  EXPECT_EQ(t->counts.censored, 1u);
  EXPECT_EQ(t->counts.no_time_limit, 1u);
  ASSERT_EQ(t->jobs.size(), 2u);
  const Job& a = t->jobs[0];
  EXPECT_EQ(a.id, "100");
  EXPECT_EQ(a.duration_s, 3600);
  EXPECT_EQ(a.limit_s, 7200);
  EXPECT_EQ(a.gpus, 2u);
  EXPECT_EQ(a.mem_bytes, 64 * kGiB);
  EXPECT_EQ(a.nodes, 1u);
  EXPECT_EQ(a.partition, "train");
  EXPECT_EQ(t->jobs[1].submit_s - a.submit_s, 120);
  const Job& b = t->jobs[1];
  EXPECT_EQ(b.duration_s, 1800);
  EXPECT_EQ(b.limit_s, 1800);
  EXPECT_TRUE(b.censored);
  EXPECT_EQ(b.gpus, 4u);
  EXPECT_EQ(b.mem_bytes, 128 * kGiB);
  EXPECT_EQ(b.nodes, 2u);
  EXPECT_EQ(b.workload, "inference");

  // Classified as job_submit would: --workload from the admin comment, else the partition.
  const policies::Policy p = policy(
      "Class=training Partitions=train\nClass=inference Partitions=serve\nDefaultClass=training\n");
  const Outcome r = simulate(cluster("FixedNode=n[1-2] Gpus=4 Memory=128G\n"), *t, &p);
  EXPECT_EQ(r.jobs[0].workload_class, "training");
  EXPECT_EQ(r.jobs[1].workload_class, "inference");
  EXPECT_EQ(r.jobs[1].nodes.size(), 2u);
}

TEST(SimulateTrace, SacctBadInput) {
  auto bad = [](const std::string& row) {
    auto t = parse_sacct_trace(std::string(kSacctHeader) + row, "s.txt");
    return t ? std::string("accepted") : t.error().message;
  };
  EXPECT_EQ(bad("1|2024-03-04T10:00:00|2024-03-04T10:00:00|2024-03-04T10:10:00|00:10:00|"
                "00:20:00|cpu=1,widgets=3|||p|a|q||COMPLETED\n"),
            "s.txt line 2: ReqTRES: unknown TRES 'widgets' (known: cpu, mem, node, billing, "
            "energy, vmem, pages, gres/..., license/..., fs/..., bb/..., ic/...)");
  EXPECT_EQ(bad("1|2024-03-04T10:00:00|2024-03-04T10:00:00|2024-03-04T10:10:00|00:10:00|"
                "soon|cpu=1|||p|a|q||COMPLETED\n"),
            "s.txt line 2: Timelimit='soon': not a duration; use minutes, MM:SS, HH:MM:SS, D-HH, "
            "D-HH:MM or D-HH:MM:SS (numbers of at most 6 digits), or UNLIMITED");
  EXPECT_EQ(bad("1|2024-13-04T10:00:00|2024-03-04T10:00:00|2024-03-04T10:10:00|00:10:00|"
                "00:20:00|cpu=1|||p|a|q||COMPLETED\n")
                .substr(0, 38),
            "s.txt line 2: Submit='2024-13-04T10:00");
  auto header = parse_sacct_trace("JobID|Submit\n", "s.txt");
  ASSERT_FALSE(header);
  EXPECT_EQ(header.error().message,
            "s.txt line 1: the header line lacks Start; export with sacct -a -P -o "
            "JobID,Submit,Start,End,Elapsed,Timelimit,ReqTRES,AllocTRES,Partition,Account,QOS,"
            "AdminComment,State");
}

TEST(SimulateCluster, FixedAndComposableLines) {
  const Cluster c = cluster(
      "FixedNode=f[1-2] Gpus=8 GpuModel=V100 Memory=64G MemBlock=16G\nFabric=sim\n"
      "NodeName=h1 Zones=z GpuSlots=4 MemSlots=2\n"
      "DeviceGroup=g Type=gpu Model=A100 Zone=z Count=6\n"
      "DeviceGroup=m Type=mem Model=CXL Zone=z Count=2 Size=256G\n");
  EXPECT_EQ(c.hosts.size(), 3u);
  EXPECT_EQ(c.fixed_servers, 2u);
  EXPECT_EQ(c.gpus, 22u);
  EXPECT_EQ(c.mem_bytes, 2 * 64 * kGiB + 512 * kGiB);
  EXPECT_EQ(c.hosts[0].gpu_slots, 8u);
  EXPECT_EQ(c.hosts[0].mem_slots, 4u);
}

TEST(SimulateCluster, BadLinesAreRefusedWithASentence) {
  auto bad = [](const std::string& text) {
    auto c = parse_cluster(text, "c.conf");
    return c ? std::string("accepted") : c.error().message;
  };
  EXPECT_EQ(bad("FixedNode=n1 Gpus=8 Disks=4\n"),
            "c.conf line 1: unknown FixedNode option 'Disks' (allowed: Gpus, GpuModel, Memory, "
            "MemBlock)");
  EXPECT_EQ(bad("FixedNode=n1 Gpus=8 Memory=100G MemBlock=16G\n"),
            "c.conf line 1: FixedNode=n1: Memory=100G is not a whole number of MemBlock=16G "
            "blocks");
  EXPECT_EQ(bad("FixedNode=n1\n"), "c.conf line 1: FixedNode=n1 needs Gpus= or Memory=");
  EXPECT_EQ(bad("FixedNode=n1 Gpus=4\nFixedNode=n1 Gpus=4\n"),
            "c.conf line 2: node 'n1' is declared twice");
  // composerd's own sentences for its own lines.
  EXPECT_EQ(bad("NodeName=h1 Zones=z Slots=3\nDeviceGroup=g Type=gpu Model=A Zone=z Count=1\n"),
            "c.conf line 1: unknown NodeName option 'Slots' (allowed: Fabric, FabricHost, Zones, "
            "GpuSlots, MemSlots, NvmeSlots, Domains)");
  EXPECT_EQ(bad("Fabric=redfish\nFabricUrl=https://fm:8443\nFabricCredentials=/etc/x\n"
                "NodeName=h1\n"),
            "c.conf: Fabric=redfish: a cluster file describes hardware to simulate; use "
            "Fabric=sim with DeviceGroup lines");
  EXPECT_EQ(bad("# nothing\n"), "c.conf: no FixedNode= or NodeName= line: the cluster has no node");
  EXPECT_EQ(bad("FixedNode=n1 Gpus=4\nNodeName=n1 Zones=z\n"
                "DeviceGroup=g Type=gpu Model=A Zone=z Count=1\n"),
            "c.conf: node 'n1' is both a FixedNode and a NodeName");
  // A key that describes no hardware is a mistake, not a default.
  EXPECT_EQ(bad("FixedNode=n1 Gpus=4\nFrobnicate=yes\n"),
            "c.conf line 2: unknown key 'Frobnicate' (allowed in a cluster file: FixedNode, "
            "NodeName, DeviceGroup, Fabric, FabricName)");
  EXPECT_EQ(bad("Fabric=sim\nNodeName=h1 Zones=z\nStateDir=/tmp\n"
                "DeviceGroup=g Type=gpu Model=A Zone=z Count=1\n"),
            "c.conf line 3: unknown key 'StateDir' (allowed in a cluster file: FixedNode, "
            "NodeName, DeviceGroup, Fabric, FabricName)");
  // A cluster no job could use: its only node reaches no zone with GPUs, or has no slots.
  const std::string no_job =
      "c.conf: no node can take a GPU or a memory block (no GPU or memory in the zones it "
      "reaches, or no GpuSlots=/MemSlots=): the cluster can serve no job";
  EXPECT_EQ(bad("Fabric=sim\nNodeName=h1 Zones=z2 GpuSlots=4\n"
                "DeviceGroup=g Type=gpu Model=A Zone=z1 Count=4\n"),
            no_job);
  EXPECT_EQ(bad("Fabric=sim\nNodeName=h1 Zones=z1\nDeviceGroup=g Type=gpu Model=A Zone=z1 "
                "Count=4\n"),
            no_job);
}

TEST(SimulateCluster, PolicyThatDoesNotFitThePoolIsRefused) {
  const policies::Policy p =
      policy("Class=training\nDefaultClass=training\nLimit=training Window=Default Gpus=64\n");
  auto r = run(cluster("FixedNode=n1 Gpus=8\n"), csv("0,10,1,,,,0,0,\n"), &p);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message.substr(0, 50), "the policy does not fit cluster test.conf: test.po");
}

TEST(SimulateChart, SvgCarriesTheSeries) {
  const Outcome r = simulate(cluster("FixedNode=n[1-2] Gpus=4\n"),
                             csv("0,3600,4,,,training,0,0,\n0,7200,2,,,inference,0,0,\n"));
  const std::string svg = result_svg(r.result);
  EXPECT_EQ(svg.rfind("<svg", 0) == 0 || svg.rfind("<?xml", 0) == 0, true);
  EXPECT_NE(svg.find("data-class=\"training\""), std::string::npos);
  EXPECT_NE(svg.find("data-class=\"inference\""), std::string::npos);
  EXPECT_NE(svg.find("class=\"cell\""), std::string::npos);
}

// A chart names its cluster and policy, its axes their units, and says when the trace carries
// no memory instead of drawing an empty memory panel.
TEST(SimulateChart, TitledWithClusterPolicyAndUnits) {
  Outcome r =
      simulate(cluster("FixedNode=n[1-2] Gpus=4 Memory=64G\n"), csv("0,3600,4,,,training,0,0,\n"));
  r.result.cluster = "fixed.conf";
  r.result.policy = "daynight.policy";
  std::string svg = result_svg(r.result);
  EXPECT_NE(svg.find(">Fixed servers fixed.conf, policy daynight.policy, "), std::string::npos)
      << svg.substr(0, 600);
  EXPECT_EQ(svg.find("Composable pool use"), std::string::npos);
  EXPECT_NE(svg.find(">GPUs attached (average per interval)<"), std::string::npos);
  EXPECT_EQ(svg.find("data-type=\"mem\""), std::string::npos);
  EXPECT_NE(svg.find("The trace asks for no memory: no memory chart (1 of 1 rows give none)."),
            std::string::npos);

  r = simulate(cluster("Fabric=sim\nNodeName=n1 Zones=z GpuSlots=4 MemSlots=4\n"
                       "DeviceGroup=g Type=gpu Model=A100 Zone=z Count=4\n"
                       "DeviceGroup=m Type=mem Model=CXL Zone=z Count=4 Size=16G\n"),
               csv("0,3600,4,20,,training,0,0,\n"));
  r.result.cluster = "pool.conf";
  svg = result_svg(r.result);
  EXPECT_NE(svg.find(">Cluster pool.conf, no policy, "), std::string::npos);
  EXPECT_NE(svg.find(">GiB attached (average per interval)<"), std::string::npos);
  EXPECT_EQ(svg.find("asks for no memory"), std::string::npos);
}

// Every kind of stranded capacity, by hand. One host reaches 4 GPUs and two 64G blocks.
//   A 0 GPUs and 128G, 0-100: both blocks.
//   B 2 GPUs and 64G at 0: waits for memory until 100 (4 GPUs idle while it waits, but it
//     does not fit the free memory, so nothing "fits nowhere"); 100-200.
//   C 0 GPUs and 2G at 0: waits too, then takes the other block beside B, 100-150: a whole
//     64G block for 2G, 62G lost to rounding for 50 s.
TEST(SimulateHandComputed, EveryKindOfStrandedCapacity) {
  const Trace t = csv("0,100,0,128,,,0,0,\n0,100,2,64,,,0,0,\n0,50,0,2,,,0,0,\n");
  const Outcome r = simulate(cluster("Fabric=sim\nNodeName=n1 Zones=z GpuSlots=4 MemSlots=4\n"
                                     "DeviceGroup=g Type=gpu Model=A100 Zone=z Count=4\n"
                                     "DeviceGroup=m Type=mem Model=CXL Zone=z Count=2 Size=64G\n"),
                             t);
  ASSERT_EQ(r.jobs.size(), 3u);
  EXPECT_EQ(r.jobs[1].start_s, 100);
  EXPECT_EQ(r.jobs[2].start_s, 100);
  EXPECT_EQ(r.jobs[2].mem_bytes, 64 * kGiB);
  EXPECT_EQ(r.result.stranded_gpu_s, 0);
  EXPECT_EQ(r.result.stranded_mem_mib_s, 0);
  EXPECT_EQ(r.result.idle_waiting_gpu_s, 4 * 100);
  EXPECT_EQ(r.result.idle_waiting_mem_mib_s, 0);  // nothing free while they waited
  EXPECT_EQ(r.result.rounding_mem_mib_s, 62 * 1024 * 50);
  EXPECT_EQ(r.result.asked_mem_mib_s, 128 * 1024 * 100 + 64 * 1024 * 100 + 2 * 1024 * 50);
  EXPECT_DOUBLE_EQ(r.result.rounding_mem_gib_hours(), 62.0 * 50 / 3600);
}

// The progress callback hears every `progress_every` submits and once at the end.
TEST(SimulateHandComputed, ProgressIsReported) {
  const Trace t =
      csv("0,10,1,,,,0,0,\n1,10,1,,,,0,0,\n2,10,1,,,,0,0,\n3,10,1,,,,0,0,\n"
          "4,10,1,,,,0,0,\n");
  std::vector<std::pair<uint64_t, uint64_t>> heard;
  Options o;
  o.progress_every = 2;
  o.progress = [&](uint64_t done, uint64_t total) { heard.emplace_back(done, total); };
  auto r = run(cluster("FixedNode=n1 Gpus=4\n"), t, nullptr, o);
  ASSERT_TRUE(r);
  const std::vector<std::pair<uint64_t, uint64_t>> want = {{2, 5}, {4, 5}, {5, 5}};
  EXPECT_EQ(heard, want);
}

// Waits by job size and weighted by GPUs, on the EASY backfill trace: waits 0 (2 GPUs),
// 99 (4 GPUs), 0 (2 GPUs), 50 (2 GPUs).
TEST(SimulateHandComputed, WaitsBySizeAndGpuWeighted) {
  const Trace t =
      csv("0,100,2,,,,0,0,\n1,10,4,,,,0,0,\n2,50,2,,,,0,0,\n60,200,2,,,,0,0,\n"
          "70,10,1,,,,0,0,\n");
  const Outcome r = simulate(cluster("FixedNode=n1 Gpus=4\n"), t);
  ASSERT_EQ(r.jobs.size(), 5u);
  const int64_t w4 = r.jobs[4].start_s - 70;
  EXPECT_DOUBLE_EQ(r.result.wait_gpu_weighted_s, (99.0 * 4 + 50 * 2 + w4 * 1) / 11);
  ASSERT_EQ(r.result.by_size.size(), 2u);
  EXPECT_EQ(r.result.by_size[0].name, "1 GPU");
  EXPECT_EQ(r.result.by_size[0].jobs, 1u);
  EXPECT_EQ(r.result.by_size[1].name, "2-4 GPUs");
  EXPECT_EQ(r.result.by_size[1].jobs, 4u);
  EXPECT_DOUBLE_EQ(r.result.by_size[1].mean_s, (0 + 99 + 0 + 50) / 4.0);
}

}  // namespace
}  // namespace composer::simulate

namespace composer::simulate {
namespace {

// The example files of contrib/simulate/ (docs/CAPACITY.md's comparison) stay valid: the same
// hardware in both clusters, and the day/night policy fits the composable pool.
TEST(SimulateExamples, ContribClustersAndPolicy) {
  const std::string dir = COMPOSER_SOURCE_DIR "/contrib/simulate/";
  auto fixed = load_cluster(dir + "fixed.conf");
  ASSERT_TRUE(fixed) << fixed.error().message;
  auto composable = load_cluster(dir + "composable.conf");
  ASSERT_TRUE(composable) << composable.error().message;
  EXPECT_EQ(fixed->gpus, 512u);
  EXPECT_EQ(composable->gpus, fixed->gpus);
  EXPECT_EQ(composable->mem_bytes, fixed->mem_bytes);
  EXPECT_EQ(fixed->fixed_servers, 64u);
  std::ifstream in(dir + "daynight.policy");
  std::stringstream text;
  text << in.rdbuf();
  const policies::Policy p = policy(text.str());
  const Trace t = csv("0,3600,64,,,training,0,0,\n0,3600,8,,,inference,0,0,\n");
  const Outcome r = simulate(*composable, t, &p);
  EXPECT_EQ(r.result.started, 2u);
}

}  // namespace
}  // namespace composer::simulate
