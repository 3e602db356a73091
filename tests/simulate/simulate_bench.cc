// simulate_bench: figures for docs/BENCHMARKS.md, never a test. Replays the Philly trace on the
// fixed and the composable cluster of contrib/simulate/, then a generated trace of --jobs jobs
// (default 1,000,000) on each and on the composable one under the day/night policy, and
// prints each run's wall and CPU time, the main figures and the peak resident memory of the
// process. --write-trace FILE writes the generated trace as the normalised CSV instead (the
// synthetic trace `composerctl simulate` can replay) and exits.
//
//   simulate_bench [--philly FILE] [--jobs N] [--fixed FILE] [--composable FILE]
//                  [--policy FILE] [--write-trace FILE]

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "composer/common/units.h"
#include "composer/config/conf_file.h"
#include "composer/policies/parser.h"
#include "composer/policies/zoneinfo.h"
#include "composer/simulate/simulate.h"

namespace sim = composer::simulate;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

long peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

// Poisson arrivals at about 85% of 512 GPUs; shapes 1, 2, 4, 8 and 16 GPUs with memory of
// 0 to 256 GiB; durations from 5 minutes to a day, most short.
sim::Trace generated(size_t jobs) {
  sim::Trace t;
  t.name = "generated";
  t.jobs.reserve(jobs);
  std::mt19937_64 rng(20261201);
  const unsigned shapes[] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 16};
  const unsigned mems[] = {0, 16, 32, 64, 128, 256};
  std::lognormal_distribution<double> dur(std::log(1800.0), 1.2);
  // Mean GPU-seconds per job: about 4.7 GPUs x mean duration (lognormal mean).
  const double mean_gpu_s = 4.7 * 1800.0 * std::exp(1.2 * 1.2 / 2);
  std::exponential_distribution<double> gap(0.85 * 512 / mean_gpu_s);
  double now = 0;
  for (size_t i = 0; i < jobs; ++i) {
    now += gap(rng);
    sim::Job j;
    j.line = static_cast<int>(i + 2);
    j.id = std::to_string(i + 1);
    j.submit_s = static_cast<int64_t>(now);
    j.duration_s = std::clamp<int64_t>(static_cast<int64_t>(dur(rng)), 300, 86400);
    j.limit_s = std::min<int64_t>(j.duration_s * 2, int64_t{2} * 86400);
    j.gpus = shapes[rng() % 10];
    j.mem_bytes = uint64_t{mems[rng() % 6]} * composer::kGiB;
    j.workload = rng() % 4 == 0 ? "inference" : "training";
    t.jobs.push_back(std::move(j));
  }
  t.counts.rows = t.counts.jobs = jobs;
  return t;
}

// The generated trace as the normalised CSV, second 0 at 2026-01-05 00:00 UTC (a Monday).
bool write_csv(const sim::Trace& t, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  std::fprintf(f, "submit_time_s,duration_s,gpus,mem_gb,cpus,type,wait_s,censored,extra\n");
  bool first = true;
  for (const sim::Job& j : t.jobs) {
    std::fprintf(f, "%lld,%lld,%u,%llu,,%s,,0,%s\n", static_cast<long long>(j.submit_s),
                 static_cast<long long>(j.duration_s), j.gpus,
                 static_cast<unsigned long long>(j.mem_bytes / composer::kGiB), j.workload.c_str(),
                 first ? "submitted=2026-01-05T00:00:00" : "");
    first = false;
  }
  return std::fclose(f) == 0;
}

void report(const char* what, const sim::Result& r, double wall, double cpu) {
  std::printf(
      "%-28s %-34s %7.2f s (CPU %7.2f s)  jobs %8llu  ran %8llu  never %4llu  GPU util %5.1f%%  "
      "mem util "
      "%5.1f%%  stranded %10.1f GPU-h %12.1f GiB-h  wait mean %9.0f s p95 %8lld s  makespan "
      "%lld s\n",
      what, r.cluster.c_str(), wall, cpu, static_cast<unsigned long long>(r.jobs),
      static_cast<unsigned long long>(r.started), static_cast<unsigned long long>(r.never_runnable),
      r.gpu_utilisation() * 100, r.mem_utilisation() * 100, r.stranded_gpu_hours(),
      r.stranded_mem_gib_hours(), r.wait.mean_s, static_cast<long long>(r.wait.p95_s),
      static_cast<long long>(r.makespan_s));
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each figure as it comes, also into a file
  std::string philly = COMPOSER_SOURCE_DIR "/contrib/simulate/traces/philly_subset_training.csv";
  std::string fixed = COMPOSER_SOURCE_DIR "/contrib/simulate/fixed.conf";
  std::string composable = COMPOSER_SOURCE_DIR "/contrib/simulate/composable.conf";
  std::string policy_path = COMPOSER_SOURCE_DIR "/contrib/simulate/daynight.policy";
  std::string write_trace;
  size_t jobs = 1000000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--philly")
      philly = argv[i + 1];
    else if (a == "--jobs")
      jobs = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--fixed")
      fixed = argv[i + 1];
    else if (a == "--composable")
      composable = argv[i + 1];
    else if (a == "--policy")
      policy_path = argv[i + 1];
    else if (a == "--write-trace")
      write_trace = argv[i + 1];
    else {
      std::fprintf(stderr, "simulate_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (!write_trace.empty()) {
    if (!write_csv(generated(jobs), write_trace)) {
      std::fprintf(stderr, "simulate_bench: cannot write %s\n", write_trace.c_str());
      return 1;
    }
    return 0;
  }
  auto policy_text = composer::config::read_file(policy_path);
  if (!policy_text) {
    std::fprintf(stderr, "simulate_bench: %s\n", policy_text.error().message.c_str());
    return 1;
  }
  auto policy = composer::policies::parse_policy(*policy_text, policy_path, [](std::string_view z) {
    return composer::policies::load_time_zone(z);
  });
  if (!policy) {
    std::fprintf(stderr, "simulate_bench: %s\n", policy.error().message.c_str());
    return 1;
  }
  std::vector<sim::Cluster> clusters;
  for (const std::string& path : {fixed, composable}) {
    auto c = sim::load_cluster(path);
    if (!c) {
      std::fprintf(stderr, "simulate_bench: %s\n", c.error().message.c_str());
      return 1;
    }
    clusters.push_back(std::move(*c));
  }
  auto t0 = std::chrono::steady_clock::now();
  auto trace = sim::load_trace(philly, "");
  if (!trace) {
    std::fprintf(stderr, "simulate_bench: %s\n", trace.error().message.c_str());
    return 1;
  }
  std::printf("Philly trace read in %.2f s (%zu jobs)\n", seconds_since(t0), trace->jobs.size());
  for (const sim::Cluster& c : clusters) {
    t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    auto r = sim::run(c, *trace);
    if (!r) return 1;
    report("philly", *r, seconds_since(t0), cpu_seconds() - c0);
  }
  t0 = std::chrono::steady_clock::now();
  const sim::Trace big = generated(jobs);
  std::printf("generated %zu jobs in %.2f s\n", jobs, seconds_since(t0));
  for (size_t k = 0; k < 3; ++k) {
    const sim::Cluster& c = clusters[k == 0 ? 0 : 1];
    t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    auto r = sim::run(c, big, k == 2 ? &*policy : nullptr);
    if (!r) {
      std::fprintf(stderr, "simulate_bench: %s\n", r.error().message.c_str());
      return 1;
    }
    report(k == 2 ? "generated, day/night policy" : "generated", *r, seconds_since(t0),
           cpu_seconds() - c0);
    std::printf("peak resident memory so far: %ld MiB\n", peak_rss_mib());
  }
  return 0;
}
