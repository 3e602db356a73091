// The real composerd: /metrics scraped before and after a compose, GET /v1/reports checked
// against the ledger it was computed from, and composerctl report in every output format.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "composer/accounting/report.h"
#include "composer/accounting/report_json.h"
#include "composer/api/codec.h"
#include "composer/common/units.h"
#include "composerd_process.h"
#include "metrics_text.h"
#include "raw_request.h"

namespace composer::testing {
namespace {

api::ComposeBody body(Request r, std::string workload) {
  return api::ComposeBody{.owner = {.uid = 1000,
                                    .user = "alice",
                                    .account = "physics",
                                    .workload = std::move(workload)},
                          .request = std::move(r)};
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class ComposerdAccountingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new ComposerdProcess(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }

  static int port() {
    const auto url = daemon_->url();
    return std::stoi(url.substr(url.rfind(':') + 1));
  }

  static std::string scrape() {
    httplib::Client cli("127.0.0.1", port());
    auto r = cli.Get("/metrics");  // no credential: like /v1/health
    EXPECT_TRUE(r);
    if (!r) return "";
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    return r->body;
  }

  static ComposerdProcess* daemon_;
};
ComposerdProcess* ComposerdAccountingTest::daemon_ = nullptr;

TEST_F(ComposerdAccountingTest, MetricsChangeAfterAComposeAndRelease) {
  const std::string attached_a100 =
      R"(composer_devices{type="gpu",model="A100-80G",zone="z1",state="attached"})";
  const std::string free_a100 =
      R"(composer_devices{type="gpu",model="A100-80G",zone="z1",state="free"})";
  const std::string before = scrape();
  EXPECT_NE(before.find("# TYPE composer_compose_duration_seconds histogram"), std::string::npos);
  EXPECT_EQ(metric(before, attached_a100), 0);
  EXPECT_EQ(metric(before, free_a100), 8);
  EXPECT_EQ(metric(before, R"(composer_compositions{state="ready"})"), 0);
  const double composes = metric(before, "composer_compose_duration_seconds_count");
  const double writes = metric(before, "composer_store_write_calls_total");
  const double transactions = metric(before, "composer_store_transactions_total");
  ASSERT_GE(writes, 0) << "no composer_store_write_calls_total";
  ASSERT_GE(transactions, 0) << "no composer_store_transactions_total";
  EXPECT_GE(metric(before, "composer_store_write_failures_total"), 0);

  auto c = daemon_->client();
  auto composed = c.compose(501, "n1", body(Request{.gpus = 2}, "training"));
  ASSERT_TRUE(composed.ok()) << composed.error();
  const std::string during = scrape();
  EXPECT_EQ(metric(during, attached_a100), 2);
  EXPECT_EQ(metric(during, free_a100), 6);
  EXPECT_EQ(metric(during, R"(composer_compositions{state="ready"})"), 1);
  EXPECT_EQ(metric(during, "composer_compose_duration_seconds_count"), composes + 1);
  EXPECT_EQ(metric(during, R"(composer_compose_duration_seconds_bucket{le="+Inf"})"), composes + 1);
  EXPECT_GE(metric(during, R"(composer_operations_total{operation="compose",result="ok"})"), 1);
  EXPECT_GE(
      metric(
          during,
          R"(composer_api_requests_total{route="/v1/compositions/{job}/{node}",method="PUT",code="200"})"),
      1);
  EXPECT_EQ(metric(during, R"(composer_fabric_errors_total{operation="attach"})"), 0);
  // The compose wrote its intent and then its ready state: two changes, one transaction each
  // at least (nothing else was writing to share them).
  EXPECT_GE(metric(during, "composer_store_write_calls_total"), writes + 2);
  EXPECT_GE(metric(during, "composer_store_transactions_total"), transactions + 1);
  EXPECT_LE(metric(during, "composer_store_transactions_total") - transactions,
            metric(during, "composer_store_write_calls_total") - writes);

  ASSERT_TRUE(c.release(501, "n1").ok());
  const std::string after = scrape();
  EXPECT_EQ(metric(after, attached_a100), 0);
  EXPECT_EQ(metric(after, R"(composer_compositions{state="ready"})"), 0);
  EXPECT_GE(metric(after, "composer_release_duration_seconds_count"), 1);
  // The scrapes themselves are counted too.
  EXPECT_GE(
      metric(after, R"(composer_api_requests_total{route="/metrics",method="GET",code="200"})"), 2);
}

TEST_F(ComposerdAccountingTest, PolicyWindowInForceIsAMetric) {
  const std::string training = R"(composer_policy_window{class="training",window="always"})";
  const std::string inference = R"(composer_policy_window{class="inference",window="always"})";
  const std::string before = scrape();
  EXPECT_NE(before.find("# TYPE composer_policy_window gauge"), std::string::npos);
  auto c = daemon_->client();
  const bool had_policy = c.policy().ok();  // other tests in this process may have applied one
  if (!had_policy) {
    EXPECT_EQ(before.find("composer_policy_window{"), std::string::npos) << before;
  }
  // A window open all week, caps high enough that other tests in this process still compose.
  auto applied = c.put_policy({.file = "metrics.policy",
                               .text = "TimeZone=UTC\n"
                                       "Window=always Start=00:00 End=24:00\n"
                                       "Class=training\n"
                                       "Class=inference\n"
                                       "DefaultClass=inference\n"
                                       "Limit=training Window=always Gpus=6 Mem=128G\n"
                                       "Limit=inference Window=always Gpus=5\n"});
  ASSERT_TRUE(applied.ok()) << applied.error();
  const std::string after = scrape();
  EXPECT_EQ(metric(after, training), 1) << after;
  EXPECT_EQ(metric(after, inference), 1) << after;
  // One sample per class of the policy, no more.
  size_t samples = 0;
  for (size_t at = after.find("\ncomposer_policy_window{"); at != std::string::npos;
       at = after.find("\ncomposer_policy_window{", at + 1)) {
    ++samples;
  }
  EXPECT_EQ(samples, 2u) << after;

  // The windows report shows each class's cap in the window beside what it held.
  const int64_t start = now_ms();
  ASSERT_TRUE(c.compose(901, "n1", body(Request{.gpus = 2}, "training")).ok());
  ASSERT_TRUE(c.release(901, "n1").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto json = c.get_json(
      {"reports"}, {{"start_ms", std::to_string(start)}, {"end_ms", std::to_string(now_ms())}});
  ASSERT_TRUE(json.ok()) << json.error();
  auto report = accounting::report_from_json(*json);
  ASSERT_TRUE(report.ok()) << report.error();
  EXPECT_EQ(report->caps_policy_id, applied->policy.id);
  ASSERT_EQ(report->by_window.size(), 1u);
  const accounting::WindowUsage& row = report->by_window[0];
  EXPECT_EQ(row.window, "always");
  EXPECT_EQ(row.workload, "training");
  EXPECT_EQ(row.peak_devices[0], 2u);
  EXPECT_EQ(row.cap[0], std::optional<uint64_t>(6));
  EXPECT_EQ(row.cap[1], std::optional<uint64_t>(128));
  EXPECT_EQ(row.cap[2], std::nullopt);  // the policy does not cap NVMe for training
  auto table = ctl(*daemon_, "report windows -P --start now-1hour --end now");
  ASSERT_EQ(table.code, 0) << table.out;
  EXPECT_NE(table.out.find("CAP_GPUS|CAP_MEM_GIB|CAP_NVME"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("always|training|"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("|6|128|-|"), std::string::npos) << table.out;
}

TEST_F(ComposerdAccountingTest, ReportMatchesTheLedger) {
  // Starts after whatever the other tests left in the ledger.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int64_t start = now_ms();
  auto c = daemon_->client();
  ASSERT_TRUE(
      c.compose(601, "n1", body(Request{.gpus = 1, .mem_bytes = 64 * kGiB}, "training")).ok());
  ASSERT_TRUE(c.compose(602, "n2", body(Request{.gpus = 3}, "inference")).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(c.release(601, "n1").ok());
  ASSERT_TRUE(c.release(602, "n2").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int64_t end = now_ms();

  auto json = c.get_json({"reports"},
                         {{"start_ms", std::to_string(start)}, {"end_ms", std::to_string(end)}});
  ASSERT_TRUE(json.ok()) << json.error();
  auto report = accounting::report_from_json(*json);
  ASSERT_TRUE(report.ok()) << report.error();

  // Hand computation from the ledger: each composition holds its devices from requested to
  // released.
  auto events = c.events(client::EventQuery{.since_ms = start, .until_ms = end});
  ASSERT_TRUE(events.ok());
  std::map<int64_t, int64_t> requested;
  accounting::TypeMs expected{};
  int64_t mem_ms = 0;
  for (const auto& e : *events) {
    if (e.kind == "requested") requested[*e.composition_id] = e.ts_ms;
    if (e.kind == "released") {
      const int64_t held = e.ts_ms - requested.at(*e.composition_id);
      for (const auto& id : e.devices) {
        const bool gpu = id.rfind("gpu", 0) == 0;
        expected[gpu ? 0 : 1] += held;
        if (!gpu) mem_ms += held;
      }
    }
  }
  ASSERT_GT(expected[0], 0);
  accounting::TypeMs pools{};
  for (const auto& p : report->pools) {
    pools[static_cast<size_t>(*parse_device_type(p.type))] += p.usage.attached_ms;
    EXPECT_EQ(p.usage.total_ms(), p.devices * (end - start)) << p.model;
  }
  EXPECT_EQ(pools, expected);
  accounting::TypeMs classes{};
  for (const auto& g : report->by_workload) {
    for (size_t t = 0; t < 3; ++t) classes[t] += g.device_ms[t];
  }
  EXPECT_EQ(classes, expected);
  EXPECT_EQ(report->jobs, 2u);
  EXPECT_EQ(report->latency[0].count, 2u);
  EXPECT_EQ(report->latency[1].count, 2u);
  ASSERT_FALSE(report->top_jobs.empty());
  EXPECT_EQ(report->top_jobs[0].job_id, 602u);  // three GPUs beat one GPU and a memory block
  EXPECT_NEAR(report->by_workload.back().mem_gib_hours, 64.0 * mem_ms / 3600000.0, 1e-9);

  // composerctl shows the same figures.
  auto parsable = ctl(*daemon_, "report workload -P --start now-1hour --end now");
  ASSERT_EQ(parsable.code, 0) << parsable.out;
  EXPECT_NE(parsable.out.find("WORKLOAD|GPU_H|MEM_H|NVME_H|MEM_GIB_H|JOBS|COMPOSITIONS"),
            std::string::npos)
      << parsable.out;
  EXPECT_NE(parsable.out.find("training|"), std::string::npos);
  auto csv = ctl(*daemon_, "report utilisation --csv --start now-1hour --end now");
  ASSERT_EQ(csv.code, 0) << csv.out;
  EXPECT_NE(csv.out.find("gpu,A100-80G,8,"), std::string::npos) << csv.out;
  // -o picks the columns of any of them, --csv included; -n drops the header.
  auto picked =
      ctl(*daemon_, "report utilisation --csv -n -o model,Devices --start now-1hour --end now");
  ASSERT_EQ(picked.code, 0) << picked.out;
  EXPECT_NE(picked.out.find("A100-80G,8\n"), std::string::npos) << picked.out;
  EXPECT_EQ(picked.out.find("MODEL"), std::string::npos) << picked.out;
  auto as_json = ctl(*daemon_, "report top --json --start now-1hour --end now");
  ASSERT_EQ(as_json.code, 0) << as_json.out;
  auto top = api::parse_json(as_json.out);
  ASSERT_TRUE(top.ok()) << as_json.out;
  ASSERT_TRUE(top->isArray());
  EXPECT_GE(top->size(), 2u);
  auto table = ctl(*daemon_, "report latency --start now-1hour --end now");
  ASSERT_EQ(table.code, 0) << table.out;
  EXPECT_NE(table.out.find("compose"), std::string::npos);
}

TEST_F(ComposerdAccountingTest, SvgChartIsWrittenAndParses) {
  auto c = daemon_->client();
  ASSERT_TRUE(c.compose(701, "n1", body(Request{.gpus = 1}, "training")).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(c.release(701, "n1").ok());
  test_support::TempDir dir("composer-chart");
  const std::string svg = dir.file("use.svg");
  auto r = ctl(*daemon_, "report --start now-2hours --end now --svg " + svg);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream in(svg);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  auto lint = run_command("xmllint --noout " + svg);
  if (lint.code != 127) {
    EXPECT_EQ(lint.code, 0) << lint.out;
  }
  EXPECT_NE(text.str().find("data-class=\"training\""), std::string::npos);
}

TEST_F(ComposerdAccountingTest, UsersSeeOnlyTheirOwnJobs) {
  auto c = daemon_->client();
  ASSERT_TRUE(c.compose(801, "n1", body(Request{.gpus = 1}, "training")).ok());
  ASSERT_TRUE(c.release(801, "n1").ok());
  auto r = ctl(*daemon_, "report user -P --noheader --start now-1hour --end now", "nobody");
  if (r.code == 127 || r.out.find("runuser") != std::string::npos) {
    GTEST_SKIP() << "runuser is not available: " << r.out;
  }
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "");  // alice's jobs are not nobody's
  auto pools = ctl(*daemon_, "report -P --noheader --start now-1hour --end now", "nobody");
  ASSERT_EQ(pools.code, 0) << pools.out;
  EXPECT_NE(pools.out.find("gpu|A100-80G|8|"), std::string::npos) << pools.out;
}

TEST_F(ComposerdAccountingTest, BadReportRequestsAreRefused) {
  auto raw = raw_request("127.0.0.1", port(), daemon_->munge_socket(), "GET",
                         "/v1/reports?start_ms=1&end_ms=2&color=red");
  EXPECT_EQ(raw.status, 400);
  EXPECT_NE(raw.body.find("unknown query parameter 'color'"), std::string::npos) << raw.body;
  raw = raw_request("127.0.0.1", port(), daemon_->munge_socket(), "GET", "/v1/reports?end_ms=2");
  EXPECT_EQ(raw.status, 400);
  EXPECT_NE(raw.body.find("start_ms: missing"), std::string::npos) << raw.body;
  raw = raw_request("127.0.0.1", port(), daemon_->munge_socket(), "GET",
                    "/v1/reports?start_ms=5000&end_ms=10");
  EXPECT_EQ(raw.status, 400);
  EXPECT_NE(raw.body.find("must be after its start"), std::string::npos) << raw.body;
  raw = raw_request("127.0.0.1", port(), daemon_->munge_socket(), "GET",
                    "/v1/reports?start_ms=1&end_ms=2", "", false);
  EXPECT_EQ(raw.status, 401);

  auto r = ctl(*daemon_, "report --start yesterdayish");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--start: time 'yesterdayish' is not valid"), std::string::npos) << r.out;
  r = ctl(*daemon_, "report nonsense");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("'nonsense' is not a section"), std::string::npos) << r.out;
  r = ctl(*daemon_, "report --start now --end now-1hour");
  EXPECT_EQ(r.code, 2);
}

}  // namespace
}  // namespace composer::testing
