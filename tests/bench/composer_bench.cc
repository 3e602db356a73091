// Benchmark (not a test): compose+release cycles per second and compose latency percentiles
// against a real composerd (zero-latency sim fabric, durable writes: synchronous=FULL), with
// N concurrent clients, then a burst of B composes sent at once (a job array's prologs).
//
//   composer_bench [--clients N] [--seconds S] [--burst B] [--not-durable]
// Results and the command that produced them: docs/BENCHMARKS.md.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../integration/composerd_process.h"

namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i =
      std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size())));
  return v[i];
}

void print_latency(const char* what, const std::vector<double>& ms) {
  std::printf("%-28s n=%zu p50=%.2f ms p95=%.2f ms p99=%.2f ms max=%.2f ms\n", what, ms.size(),
              percentile(ms, 50), percentile(ms, 95), percentile(ms, 99), percentile(ms, 100));
}

composer::api::ComposeBody one_gpu() {
  return composer::api::ComposeBody{.uid = 1000,
                                    .user = "bench",
                                    .account = "bench",
                                    .workload = "training",
                                    .request = composer::Request{.gpus = 1}};
}

}  // namespace

int main(int argc, char** argv) {
  int clients = 32;
  int seconds = 10;
  int burst = 1000;
  bool durable = true;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--not-durable") durable = false;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--not-durable") {
      --i;
      continue;
    }
    const int v = std::stoi(argv[i + 1]);
    if (a == "--clients")
      clients = v;
    else if (a == "--seconds")
      seconds = v;
    else if (a == "--burst")
      burst = v;
  }
  const int nodes = std::max(clients, (burst + 7) / 8);
  const std::string pool = "NodeName=b[0001-" + std::to_string(nodes) +
                           "] Zones=z1 GpuSlots=8 MemSlots=0 NvmeSlots=0\n"
                           "DeviceGroup=gpu Type=gpu Model=A100-80G Zone=z1 Count=" +
                           std::to_string(nodes * 8) + "\n";
  const std::string extra =
      std::string(durable ? "Durable=yes" : "Durable=no") +
      "\nLogLevel=warning\nApiThreads=" + std::to_string(std::max(clients, burst) + 16) + "\n";
  composer::testing::ComposerdProcess daemon(extra, pool);

  std::printf("composerd bench: %d nodes, %d GPUs, sim fabric latency 0, synchronous=%s\n", nodes,
              nodes * 8, durable ? "FULL" : "NORMAL");

  // Phase 1: steady cycles.
  std::atomic<bool> stop{false};
  std::atomic<long> cycles{0};
  std::atomic<long> errors{0};
  std::vector<std::vector<double>> compose_ms(clients);
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto cli = daemon.client();
      char node[16];
      std::snprintf(node, sizeof node, "b%04d", c + 1);
      uint32_t job = 1'000'000u * static_cast<uint32_t>(c + 1);
      while (!stop.load(std::memory_order_relaxed)) {
        ++job;
        const auto s = Clock::now();
        auto r = cli.compose(job, node, one_gpu());
        compose_ms[c].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - s).count());
        if (!r.ok() || !cli.release(job, node).ok()) {
          ++errors;
          continue;
        }
        ++cycles;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> all;
  for (const auto& v : compose_ms) all.insert(all.end(), v.begin(), v.end());
  std::printf("steady: %d clients, %.1f s: %ld compose+release cycles, %.0f cycles/s, %ld errors\n",
              clients, elapsed, cycles.load(), static_cast<double>(cycles.load()) / elapsed,
              errors.load());
  print_latency("steady compose latency", all);

  // Phase 2: a burst of composes released at the same instant.
  threads.clear();
  std::vector<double> burst_ms(static_cast<size_t>(burst));
  std::atomic<long> burst_errors{0};
  std::barrier gate(burst);
  for (int i = 0; i < burst; ++i) {
    threads.emplace_back([&, i] {
      auto cli = daemon.client();
      char node[16];
      std::snprintf(node, sizeof node, "b%04d", i / 8 + 1);
      gate.arrive_and_wait();
      const auto s = Clock::now();
      auto r = cli.compose(static_cast<uint32_t>(5'000'000 + i), node, one_gpu());
      burst_ms[static_cast<size_t>(i)] =
          std::chrono::duration<double, std::milli>(Clock::now() - s).count();
      if (!r.ok() && burst_errors++ == 0) {
        std::fprintf(stderr, "first burst error: %s\n", r.error().message.c_str());
      }
    });
  }
  for (auto& t : threads) t.join();
  std::printf("burst: %d concurrent composes, %ld errors\n", burst, burst_errors.load());
  print_latency("burst compose latency", burst_ms);
  return errors.load() == 0 && burst_errors.load() == 0 ? 0 : 1;
}
