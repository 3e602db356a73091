// The exposition's numbers and buckets: bounds printed as Prometheus prints them (so a query
// for le="0.005" finds its bucket) and histograms that reach the configured timeouts.
#include "metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace composer::server {
namespace {

TEST(MetricsNumberTest, WritesTheShortestFormPrometheusWrites) {
  EXPECT_EQ(Metrics::number(0.005), "0.005");
  EXPECT_EQ(Metrics::number(0.025), "0.025");
  EXPECT_EQ(Metrics::number(2.5), "2.5");
  EXPECT_EQ(Metrics::number(30), "30");
  EXPECT_EQ(Metrics::number(3600), "3600");
  EXPECT_EQ(Metrics::number(123456), "123456");
  EXPECT_EQ(Metrics::number(1e6), "1e+06");
  EXPECT_EQ(Metrics::number(1099511627776.0), "1.099511627776e+12");
  EXPECT_EQ(Metrics::number(0.0001), "0.0001");
  EXPECT_EQ(Metrics::number(0.00001), "1e-05");
  EXPECT_EQ(Metrics::number(0), "0");
  EXPECT_EQ(Metrics::number(-1.5), "-1.5");
  EXPECT_EQ(Metrics::number(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(Metrics::number(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(Metrics::number(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(Metrics::number(std::nan("")), "NaN");
}

TEST(MetricsHistogramTest, BucketsEndAtTheTimeout) {
  EXPECT_EQ(Histogram::bounds_up_to(60),
            (std::vector<double>{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}));
  EXPECT_EQ(Histogram::bounds_up_to(45).back(), 45);
  EXPECT_EQ(Histogram::bounds_up_to(45)[11], 30);
  EXPECT_EQ(Histogram::bounds_up_to(0.5).back(), 0.5);
  EXPECT_EQ(Histogram::bounds_up_to(0.5).size(), 7u);
  EXPECT_EQ(Histogram::bounds_up_to(3600).back(), 3600);
}

TEST(MetricsHistogramTest, RendersCumulativeBucketsWithPrometheusBounds) {
  Histogram h(Histogram::bounds_up_to(60));
  h.observe(0.004);
  h.observe(0.3);
  h.observe(59);
  h.observe(75);  // past the timeout: only +Inf
  std::string out;
  h.render(out, "x_seconds", "op=\"a\"");
  EXPECT_NE(out.find("x_seconds_bucket{op=\"a\",le=\"0.005\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{op=\"a\",le=\"0.5\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{op=\"a\",le=\"60\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_bucket{op=\"a\",le=\"+Inf\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_count{op=\"a\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_seconds_sum{op=\"a\"} 134.304\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace composer::server
