// Reports over hand-computed ledgers: every figure below was worked out on paper from the
// events, including compositions that straddle the range's start and end.
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <map>
#include <random>
#include <set>

#include "composer/accounting/report.h"
#include "composer/accounting/report_json.h"
#include "composer/common/units.h"
#include "ledger.h"

namespace composer::accounting {
namespace {

using testing::kH;
using testing::kT0;
using testing::Ledger;

// A copy of the row that matches; a missing one fails the test and reads as an empty row.
template <typename Row, typename Match>
Row find_row(const std::vector<Row>& rows, Match match, const std::string& what) {
  for (const Row& row : rows) {
    if (match(row)) return row;
  }
  ADD_FAILURE() << "no row for " << what;
  return Row{};
}

GroupUsage group(const std::vector<GroupUsage>& rows, const std::string& name) {
  return find_row(
      rows, [&](const GroupUsage& g) { return g.name == name; }, name);
}

PoolUsage pool(const Report& r, const std::string& type, const std::string& model) {
  return find_row(
      r.pools, [&](const PoolUsage& p) { return p.type == type && p.model == model; },
      type + " " + model);
}

SlotUsage slot(const std::vector<SlotUsage>& rows, const std::string& type,
               const std::string& name) {
  return find_row(
      rows, [&](const SlotUsage& u) { return u.type == type && u.slot == name; },
      type + " " + name);
}

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::use_utc(); }

  // The worked example (see ledger.h): range [T0+2h, T0+10h), now T0+24h.
  Report example(std::optional<uint32_t> only_uid = std::nullopt) {
    Ledger l = testing::worked_example();
    ReportOptions o{.start_ms = kT0 + 2 * kH,
                    .end_ms = kT0 + 10 * kH,
                    .now_ms = kT0 + 24 * kH,
                    .top_jobs = 10,
                    .only_uid = only_uid};
    auto r = build_report(l.inventory, l.events, o);
    EXPECT_TRUE(r.ok()) << r.error();
    return *r;
  }
};

TEST_F(ReportTest, PoolUtilisationMatchesTheHandComputedLedger) {
  const Report r = example();
  EXPECT_EQ(r.start_ms, kT0 + 2 * kH);
  EXPECT_EQ(r.end_ms, kT0 + 10 * kH);
  EXPECT_EQ(r.time_zone, "UTC");
  ASSERT_EQ(r.pools.size(), 4u);
  // Ordered by type (gpu, mem, nvme), then model.
  EXPECT_EQ(r.pools[0].model, "A100");
  EXPECT_EQ(r.pools[1].model, "H100");
  EXPECT_EQ(r.pools[2].type, "mem");
  EXPECT_EQ(r.pools[3].type, "nvme");

  const PoolUsage a100 = pool(r, "gpu", "A100");
  EXPECT_EQ(a100.devices, 2u);
  // g1: job 10 on n1 [2h, 4h+1s) + job 13's failed try 3 s; g2: job 10 on n2 [2h, 2.5h+2s)
  // and job 11 [3h, 10h); g2 was drained while attached, which stays attached.
  EXPECT_EQ(a100.usage,
            (Usage{.attached_ms = 9 * kH + kH / 2 + 6000, .idle_ms = 6 * kH + kH / 2 - 6000}));
  const PoolUsage h100 = pool(r, "gpu", "H100");
  EXPECT_EQ(h100.usage, (Usage{.attached_ms = 7 * kH, .idle_ms = kH}));
  const PoolUsage mem = pool(r, "mem", "CXL");
  EXPECT_EQ(mem.usage,
            (Usage{.attached_ms = 2 * kH + 1000, .idle_ms = 4 * kH - 1000, .drained_ms = 2 * kH}));
  EXPECT_EQ(mem.capacity_bytes, 64 * kGiB);
  const PoolUsage nvme = pool(r, "nvme", "P5620");
  // Failed from before the range until 3h: only [2h, 3h) counts.
  EXPECT_EQ(nvme.usage, (Usage{.attached_ms = kH, .idle_ms = 6 * kH, .failed_ms = kH}));
  for (const auto& p : r.pools) EXPECT_EQ(p.usage.total_ms(), p.devices * 8 * kH) << p.model;
  EXPECT_DOUBLE_EQ(h100.usage.share_attached(), 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(mem.usage.share_attached(), (2.0 * kH + 1000) / (6.0 * kH));
}

TEST_F(ReportTest, GroupingsMatchTheLedgerAndAddUp) {
  const Report r = example();
  const GroupUsage training = group(r.by_workload, "training");
  const GroupUsage inference = group(r.by_workload, "inference");
  EXPECT_EQ(training.device_ms, (TypeMs{2 * kH + kH / 2 + 6000, 2 * kH + 1000, 0}));
  EXPECT_EQ(training.jobs, 2u);  // 10 (two nodes) and 13
  EXPECT_EQ(training.compositions, 3u);
  EXPECT_NEAR(training.mem_gib_hours, 64.0 * (2.0 + 1.0 / 3600.0), 1e-9);
  EXPECT_EQ(inference.device_ms, (TypeMs{14 * kH, 0, kH}));
  EXPECT_EQ(inference.jobs, 2u);
  EXPECT_EQ(inference.compositions, 2u);
  // Most device time first.
  EXPECT_EQ(r.by_workload.front().name, "inference");
  EXPECT_EQ(r.jobs, 4u);
  EXPECT_EQ(r.compositions, 5u);

  // Accounts and users name the same jobs here, so they match the classes exactly.
  EXPECT_EQ(group(r.by_account, "physics").device_ms, training.device_ms);
  EXPECT_EQ(group(r.by_user, "bob").device_ms, inference.device_ms);

  // Every grouping adds up to the pool's attached time, per type.
  TypeMs pool_ms{};
  for (const auto& p : r.pools) {
    pool_ms[static_cast<size_t>(*parse_device_type(p.type))] += p.usage.attached_ms;
  }
  for (const auto* rows : {&r.by_workload, &r.by_account, &r.by_user}) {
    TypeMs sum{};
    for (const auto& g : *rows) {
      for (size_t t = 0; t < 3; ++t) sum[t] += g.device_ms[t];
    }
    EXPECT_EQ(sum, pool_ms);
  }
}

TEST_F(ReportTest, TopJobsByDeviceTime) {
  const Report r = example();
  ASSERT_EQ(r.top_jobs.size(), 4u);
  EXPECT_EQ(r.top_jobs[0].job_id, 11u);
  EXPECT_EQ(r.top_jobs[0].total_device_ms(), 14 * kH);
  EXPECT_EQ(r.top_jobs[1].job_id, 10u);
  EXPECT_EQ(r.top_jobs[1].compositions, 2u);
  EXPECT_EQ(r.top_jobs[1].total_device_ms(), 4 * kH + kH / 2 + 4000);
  EXPECT_EQ(r.top_jobs[1].user, "alice");
  EXPECT_EQ(r.top_jobs[2].job_id, 12u);
  EXPECT_EQ(r.top_jobs[3].job_id, 13u);
  EXPECT_EQ(r.top_jobs[3].total_device_ms(), 3000);

  Ledger l = testing::worked_example();
  auto two = build_report(
      l.inventory, l.events,
      {.start_ms = kT0 + 2 * kH, .end_ms = kT0 + 10 * kH, .now_ms = kT0 + 24 * kH, .top_jobs = 2});
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->top_jobs.size(), 2u);
  EXPECT_EQ(two->top_jobs[1].job_id, 10u);
}

TEST_F(ReportTest, LatencyAndFailuresCountOnlyWhatEndedInsideTheRange) {
  const Report r = example();
  ASSERT_EQ(r.latency.size(), 2u);
  // Compose: job 11 (4 s) and job 12 (1 s); job 10 became ready before the range.
  EXPECT_EQ(r.latency[0].phase, "compose");
  EXPECT_EQ(r.latency[0].count, 2u);
  EXPECT_EQ(r.latency[0].p50_ms, 1000);
  EXPECT_EQ(r.latency[0].p90_ms, 4000);
  EXPECT_EQ(r.latency[0].max_ms, 4000);
  EXPECT_DOUBLE_EQ(r.latency[0].mean_ms, 2500);
  // Release: job 10 on n1 (1 s) and on n2 (2 s); job 12 is released after the end.
  EXPECT_EQ(r.latency[1].phase, "release");
  EXPECT_EQ(r.latency[1].count, 2u);
  EXPECT_EQ(r.latency[1].p50_ms, 1000);
  EXPECT_EQ(r.latency[1].p99_ms, 2000);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.failures[0].phase, "composing");
  EXPECT_EQ(r.failures[0].cause, "fabric attach failed: timeout after N ms");
  EXPECT_EQ(r.failures[0].count, 1u);
  EXPECT_EQ(r.events_ignored, 0u);
}

TEST_F(ReportTest, HoursDaysAndHeatMapSplitThePoolExactly) {
  const Report r = example();
  // 02:00-03:00 on the GPUs: g1 all hour, g2 half an hour and 2 s, g3 idle.
  const SlotUsage two = slot(r.by_hour, "gpu", "02");
  EXPECT_EQ(two.usage, (Usage{.attached_ms = kH + kH / 2 + 2000, .idle_ms = kH + kH / 2 - 2000}));
  const SlotUsage five = slot(r.by_hour, "gpu", "05");
  EXPECT_EQ(five.usage, (Usage{.attached_ms = 2 * kH + 3000, .idle_ms = kH - 3000}));
  EXPECT_EQ(slot(r.by_hour, "nvme", "02").usage, (Usage{.failed_ms = kH}));
  EXPECT_EQ(slot(r.by_hour, "gpu", "12").usage, Usage{});

  // One day (2024-01-01, a Monday): per type it equals the pools of that type.
  for (const char* type : {"gpu", "mem", "nvme"}) {
    Usage day = slot(r.by_day, type, "2024-01-01").usage;
    Usage pools;
    Usage hours;
    for (const auto& p : r.pools) {
      if (p.type == type) pools += p.usage;
    }
    for (const auto& h : r.by_hour) {
      if (h.type == type) hours += h.usage;
    }
    EXPECT_EQ(day, pools) << type;
    EXPECT_EQ(hours, pools) << type;
  }
  ASSERT_EQ(r.heat_maps.size(), 3u);
  EXPECT_EQ(r.heat_maps[0].type, "gpu");
  EXPECT_EQ(r.heat_maps[0].attached_ms[0][2], kH + kH / 2 + 2000);
  EXPECT_EQ(r.heat_maps[0].available_ms[0][2], 3 * kH);
  EXPECT_EQ(r.heat_maps[0].available_ms[1][2], 0);  // Tuesday is outside the range
}

TEST_F(ReportTest, SeriesStacksClassesAndAddsUpToThePool) {
  const Report r = example();
  ASSERT_EQ(r.series.size(), 3u);
  const Series& gpu = r.series[0];
  ASSERT_EQ(gpu.points.size(), 8u);
  EXPECT_EQ(gpu.points[0].start_ms, kT0 + 2 * kH);
  EXPECT_EQ(gpu.points[0].length_ms, kH);
  EXPECT_EQ(gpu.points[0].attached_ms_by_class.at("training"), kH + kH / 2 + 2000);
  EXPECT_EQ(gpu.points[0].attached_ms_by_class.count("inference"), 0u);
  EXPECT_EQ(gpu.points[1].attached_ms_by_class.at("training"), kH);
  EXPECT_EQ(gpu.points[1].attached_ms_by_class.at("inference"), 2 * kH);
  EXPECT_EQ(gpu.points[0].available_ms, 3 * kH);
  int64_t sum = 0;
  for (const auto& p : gpu.points) {
    for (const auto& [cls, ms] : p.attached_ms_by_class) sum += ms;
  }
  EXPECT_EQ(sum,
            pool(r, "gpu", "A100").usage.attached_ms + pool(r, "gpu", "H100").usage.attached_ms);
}

TEST_F(ReportTest, WindowsComeFromTheLedgerWithPeaks) {
  const Report r = example();
  EXPECT_TRUE(r.windows_recorded);
  std::map<std::pair<std::string, std::string>, WindowUsage> rows;
  for (const auto& w : r.by_window) rows[{w.window, w.workload}] = w;
  ASSERT_EQ(rows.size(), 2u);
  const WindowUsage& day_training = rows.at({"day", "training"});
  EXPECT_EQ(day_training.device_ms, (TypeMs{2 * kH + kH / 2 + 6000, 2 * kH + 1000, 0}));
  // Job 10 held g1 on n1 and g2 on n2 at once when the range began.
  EXPECT_EQ(day_training.peak_devices[0], 2u);
  EXPECT_EQ(day_training.peak_devices[1], 1u);
  const WindowUsage& night_inference = rows.at({"night", "inference"});
  EXPECT_EQ(night_inference.peak_devices[0], 2u);
  EXPECT_EQ(night_inference.peak_devices[2], 1u);
}

TEST_F(ReportTest, RestrictedReportShowsOnlyTheCallersJobsButThePoolWhole) {
  const Report all = example();
  const Report bob = example(1001);
  EXPECT_TRUE(bob.restricted);
  EXPECT_EQ(bob.pools.size(), all.pools.size());
  for (size_t i = 0; i < all.pools.size(); ++i) EXPECT_EQ(bob.pools[i].usage, all.pools[i].usage);
  ASSERT_EQ(bob.by_user.size(), 1u);
  EXPECT_EQ(bob.by_user[0].name, "bob");
  ASSERT_EQ(bob.top_jobs.size(), 2u);
  EXPECT_EQ(bob.latency[0].count, 2u);  // both composes in range are bob's
  EXPECT_EQ(bob.latency[1].count, 0u);  // both releases are alice's
  EXPECT_TRUE(bob.failures.empty());    // the failure is alice's
}

TEST_F(ReportTest, RangeInsideOneCompositionCountsOnlyThatSlice) {
  Ledger l = testing::worked_example();
  // [T0+4h, T0+5h): job 11 holds g2 and g3 all hour; job 10 on n1 ends at 4h+1s.
  auto r =
      build_report(l.inventory, l.events,
                   {.start_ms = kT0 + 4 * kH, .end_ms = kT0 + 5 * kH, .now_ms = kT0 + 24 * kH});
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(group(r->by_workload, "training").device_ms, (TypeMs{1000, 1000, 0}));
  EXPECT_EQ(group(r->by_workload, "inference").device_ms, (TypeMs{2 * kH, 0, 0}));
  EXPECT_EQ(r->latency[0].count, 0u);
  EXPECT_EQ(r->latency[1].count, 1u);
  EXPECT_EQ(pool(*r, "gpu", "H100").usage, (Usage{.attached_ms = kH}));
}

TEST_F(ReportTest, LiveCompositionsCountUpToNowNotTheEnd) {
  Ledger l = testing::worked_example();
  auto r =
      build_report(l.inventory, l.events,
                   {.start_ms = kT0 + 2 * kH, .end_ms = kT0 + 100 * kH, .now_ms = kT0 + 6 * kH});
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->end_ms, kT0 + 6 * kH);
  EXPECT_EQ(pool(*r, "gpu", "H100").usage, (Usage{.attached_ms = 3 * kH, .idle_ms = kH}));
}

TEST_F(ReportTest, EventsWithoutAKnownStartAreCountedAsIgnored) {
  Ledger l;
  l.inventory = {testing::gpu("g1", "A100")};
  l.add(kT0 + kH, "released", 7, 70, "n1", {"g1"}, "releasing");  // its start was never seen
  l.add(kT0 + kH, "drain", std::nullopt, 0, "", {"nope"}, "free");
  auto r = build_report(l.inventory, l.events,
                        {.start_ms = kT0, .end_ms = kT0 + 2 * kH, .now_ms = kT0 + 3 * kH});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->events_ignored, 2u);
  EXPECT_EQ(r->pools[0].usage, (Usage{.idle_ms = 2 * kH}));
  EXPECT_FALSE(r->windows_recorded);
}

TEST_F(ReportTest, BadRangesAreRefusedWithAReason) {
  const auto refuse = [](ReportOptions o, const std::string& words) {
    auto r = build_report({}, {}, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
  };
  refuse({.start_ms = kT0, .end_ms = kT0, .now_ms = kT0 + kH}, "must be after its start");
  refuse({.start_ms = kT0 + kH, .end_ms = kT0, .now_ms = kT0 + kH}, "must be after its start");
  refuse({.start_ms = kT0 + 2 * kH, .end_ms = kT0 + 3 * kH, .now_ms = kT0}, "not in the past");
  refuse({.start_ms = -5, .end_ms = kT0, .now_ms = kT0}, "before 1970");
  refuse({.start_ms = 0, .end_ms = kT0, .now_ms = kT0}, "longer than 3660 days");
  refuse({.start_ms = kT0, .end_ms = kT0 + kH, .now_ms = kT0 + kH, .top_jobs = 5000}, "top jobs");
}

// Random ledgers that follow the store's rules (one live owner per device): every grouping,
// every time slice and the series must add up to the pool, whatever the range.
TEST_F(ReportTest, RandomLedgersAlwaysAddUp) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 20; ++round) {
    Ledger l = testing::random_ledger(rng, 300);
    const int64_t start = kT0 + static_cast<int64_t>(rng() % (30 * kH));
    const int64_t end = start + 1 + static_cast<int64_t>(rng() % (60 * kH));
    auto r = build_report(
        l.inventory, l.events,
        {.start_ms = start, .end_ms = end, .now_ms = kT0 + 200 * kH, .top_jobs = kMaxTopJobs});
    ASSERT_TRUE(r.ok()) << r.error();
    TypeMs pool_ms{};
    std::map<std::string, Usage> by_type;
    for (const auto& p : r->pools) {
      EXPECT_EQ(p.usage.total_ms(), p.devices * (end - start));
      pool_ms[static_cast<size_t>(*parse_device_type(p.type))] += p.usage.attached_ms;
      by_type[p.type] += p.usage;
    }
    for (const auto* rows : {&r->by_workload, &r->by_account, &r->by_user}) {
      TypeMs sum{};
      uint32_t jobs = 0;
      for (const auto& g : *rows) {
        for (size_t t = 0; t < 3; ++t) sum[t] += g.device_ms[t];
        jobs += g.jobs;
      }
      EXPECT_EQ(sum, pool_ms) << "round " << round;
      EXPECT_EQ(jobs, r->jobs);
    }
    TypeMs jobs_ms{}, windows_ms{};
    for (const auto& j : r->top_jobs) {
      for (size_t t = 0; t < 3; ++t) jobs_ms[t] += j.device_ms[t];
    }
    for (const auto& w : r->by_window) {
      for (size_t t = 0; t < 3; ++t) windows_ms[t] += w.device_ms[t];
    }
    EXPECT_EQ(jobs_ms, pool_ms);
    EXPECT_EQ(windows_ms, pool_ms);
    for (const auto& [type, usage] : by_type) {
      Usage hours, days;
      for (const auto& h : r->by_hour) {
        if (h.type == type) hours += h.usage;
      }
      for (const auto& d : r->by_day) {
        if (d.type == type) days += d.usage;
      }
      EXPECT_EQ(hours, usage);
      EXPECT_EQ(days, usage);
      int64_t heat_attached = 0, series_attached = 0, series_available = 0;
      for (const auto& h : r->heat_maps) {
        if (h.type != type) continue;
        for (const auto& row : h.attached_ms) {
          for (int64_t v : row) heat_attached += v;
        }
      }
      for (const auto& s : r->series) {
        if (s.type != type) continue;
        for (const auto& p : s.points) {
          series_available += p.available_ms;
          for (const auto& [cls, ms] : p.attached_ms_by_class) series_attached += ms;
        }
      }
      EXPECT_EQ(heat_attached, usage.attached_ms);
      EXPECT_EQ(series_attached, usage.attached_ms);
      EXPECT_EQ(series_available, usage.available_ms());
    }
  }
}

// Capacity counts from when composerd first knew each device, never before.
TEST_F(ReportTest, ADeviceCountsOnlyFromWhenItWasFirstKnown) {
  using testing::gpu;
  Ledger l;
  l.inventory = {gpu("g1", "A100"), gpu("g2", "A100"),
                 testing::device("n1", DeviceType::kNvme, "P5620", 3 * kTiB)};
  l.inventory[0].known_since_ms = kT0 - 24 * kH;          // before the range
  l.inventory[1].known_since_ms = kT0 + 3 * kH + kH / 2;  // in the middle of it
  l.inventory[2].known_since_ms = kT0 + 2 * kH;           // the only NVMe drive
  // g2 is used as soon as it is known, for an hour.
  const testing::Who who{20, "n1", 1000, "alice", "physics", "training", "", {"g2"}};
  l.composition(1, who, kT0 + 4 * kH, 1000, kT0 + 5 * kH, 0);
  l.finish();
  auto r = build_report(l.inventory, l.events,
                        {.start_ms = kT0, .end_ms = kT0 + 6 * kH, .now_ms = kT0 + 24 * kH});
  ASSERT_TRUE(r.ok()) << r.error();

  const PoolUsage a100 = pool(*r, "gpu", "A100");
  EXPECT_EQ(a100.devices, 2u);
  // g1: 6 h idle; g2: 2.5 h known, of which 1 h attached.
  EXPECT_EQ(a100.usage, (Usage{.attached_ms = kH, .idle_ms = 6 * kH + kH + kH / 2}));
  EXPECT_EQ(pool(*r, "nvme", "P5620").usage, (Usage{.idle_ms = 4 * kH}));

  // Before g2 was known only g1 was available; the hour it came, half of it.
  EXPECT_EQ(slot(r->by_hour, "gpu", "02").usage, (Usage{.idle_ms = kH}));
  EXPECT_EQ(slot(r->by_hour, "gpu", "03").usage, (Usage{.idle_ms = kH + kH / 2}));
  EXPECT_EQ(slot(r->by_hour, "gpu", "04").usage, (Usage{.attached_ms = kH, .idle_ms = kH}));
  // No NVMe drive was known before 02:00: nothing was available then.
  EXPECT_EQ(slot(r->by_hour, "nvme", "00").usage, Usage{});
  EXPECT_EQ(slot(r->by_hour, "nvme", "01").usage, Usage{});
  EXPECT_EQ(slot(r->by_hour, "nvme", "02").usage, (Usage{.idle_ms = kH}));

  const auto heat = [&](const std::string& type) {
    return find_row(
        r->heat_maps, [&](const HeatMap& h) { return h.type == type; }, type);
  };
  const HeatMap gpus = heat("gpu"), drives = heat("nvme");
  // Monday, the range's day.
  EXPECT_EQ(gpus.available_ms[0][2], kH);
  EXPECT_EQ(gpus.available_ms[0][3], kH + kH / 2);
  EXPECT_EQ(gpus.available_ms[0][5], 2 * kH);
  EXPECT_EQ(drives.available_ms[0][0], 0);
  EXPECT_EQ(drives.available_ms[0][1], 0);
  EXPECT_EQ(drives.attached_ms[0][1], 0);
  EXPECT_EQ(drives.available_ms[0][2], kH);

  const auto series = [&](const std::string& type) {
    return find_row(
        r->series, [&](const Series& x) { return x.type == type; }, type);
  };
  const Series gpu_series = series("gpu"), nvme_series = series("nvme");
  ASSERT_EQ(gpu_series.points.size(), 6u);
  EXPECT_EQ(gpu_series.points[0].available_ms, kH);
  EXPECT_EQ(gpu_series.points[3].available_ms, kH + kH / 2);
  EXPECT_EQ(gpu_series.points[4].available_ms, 2 * kH);
  ASSERT_EQ(nvme_series.points.size(), 6u);
  EXPECT_EQ(nvme_series.points[0].available_ms, 0);
  EXPECT_EQ(nvme_series.points[1].available_ms, 0);
  EXPECT_EQ(nvme_series.points[2].available_ms, kH);
}

TEST_F(ReportTest, ADeviceFirstKnownAfterTheRangeIsNotInItsPool) {
  Ledger l;
  l.inventory = {testing::gpu("g1", "A100"), testing::gpu("g2", "A100")};
  l.inventory[1].known_since_ms = kT0 + 8 * kH;
  auto r = build_report(l.inventory, l.events,
                        {.start_ms = kT0, .end_ms = kT0 + 6 * kH, .now_ms = kT0 + 24 * kH});
  ASSERT_TRUE(r.ok()) << r.error();
  const PoolUsage a100 = pool(*r, "gpu", "A100");
  EXPECT_EQ(a100.devices, 1u);
  EXPECT_EQ(a100.usage, (Usage{.idle_ms = 6 * kH}));
}

// Devices known before the range give the report they always gave.
TEST_F(ReportTest, DevicesKnownBeforeTheRangeCountForAllOfIt) {
  Ledger l = testing::worked_example();
  const ReportOptions o{.start_ms = kT0 + 2 * kH, .end_ms = kT0 + 10 * kH, .now_ms = kT0 + 24 * kH};
  auto unknown = build_report(l.inventory, l.events, o);
  ASSERT_TRUE(unknown.ok()) << unknown.error();
  // Known before the ledger's first event, and one known exactly at the range's start.
  for (Device& d : l.inventory) d.known_since_ms = kT0 - kH;
  l.inventory[0].known_since_ms = kT0 + 2 * kH;
  auto known = build_report(l.inventory, l.events, o);
  ASSERT_TRUE(known.ok()) << known.error();
  EXPECT_EQ(to_json(*known), to_json(*unknown));
}

TEST_F(ReportTest, JsonRoundTripKeepsEveryFigure) {
  Report r = example();
  ASSERT_FALSE(r.by_window.empty());
  // Caps come from composerd, not the builder: one capped type, two not.
  r.caps_policy_id = 3;
  r.by_window[0].cap = {std::optional<uint64_t>(6), std::nullopt, std::optional<uint64_t>(0)};
  auto back = report_from_json(to_json(r));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(to_json(*back), to_json(r));
  EXPECT_EQ(back->pools[0].usage, r.pools[0].usage);
  EXPECT_EQ(back->by_window.size(), r.by_window.size());
  EXPECT_EQ(back->caps_policy_id, 3);
  EXPECT_EQ(back->by_window[0].cap, r.by_window[0].cap);

  Json::Value broken = to_json(r);
  broken["pools"][1]["usage"]["idle_ms"] = "lots";
  auto refused = report_from_json(broken);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message,
            "pools[1].usage.idle_ms: \"lots\" is not a whole number from -9223372036854775808 to "
            "9223372036854775807");
  broken = to_json(r);
  broken.removeMember("top_jobs");
  EXPECT_EQ(report_from_json(broken).error().message, "top_jobs: required field is missing");
  // Unknown fields are refused like in the API's bodies, at any depth.
  broken = to_json(r);
  broken["colour"] = "red";
  EXPECT_EQ(
      report_from_json(broken).error().message.rfind("colour: unknown field; a report has only "
                                                     "these fields: start_ms, end_ms, ",
                                                     0),
      0u)
      << report_from_json(broken).error();
  broken = to_json(r);
  broken["by_window"]["rows"][0]["cap"]["fpga"] = 1;
  EXPECT_EQ(report_from_json(broken).error().message,
            "by_window.rows[0].cap.fpga: unknown field; caps by type has only these fields: gpu, "
            "mem, nvme");
  EXPECT_EQ(report_from_json(Json::Value(Json::arrayValue)).error().message,
            "body: expected a report (an object), got an array");
}

}  // namespace
}  // namespace composer::accounting
