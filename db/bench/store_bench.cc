// store_bench: how many durable compose+release cycles per second the store sustains.
//
// Each of --threads threads owns one node and one device and repeats
// create_composition(composing) -> ready -> releasing -> released with synchronous=FULL,
// which is what composerd does per job prolog and epilog. Prints cycles/s, how many
// transactions (fsyncs) the group commit needed for them, and the page faults per cycle.
//
// --statements also prints, for the cycles, where the writer's time went statement by statement
// (its steps timed with the steady clock, triggers inside their statement; COMMIT includes the
// WAL write and its fsync).
//
// --compare-trim R runs R interleaved rounds of two child processes side by side: one with
// glibc's own trimming (an arena's free memory over 128 KiB goes back to the kernel), one with
// M_TRIM_THRESHOLD at 4 MiB, as composerd sets it.
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "composer/common/clock.h"
#include "composer/common/units.h"
#include "composer/db/store.h"

namespace {

struct Options {
  int threads = 8;
  int cycles = 500;  // per thread
  bool durable = true;
  std::string dir;
  int compare_rounds = 0;   // --compare-trim
  bool statements = false;  // --statements
  std::string label;        // printed first on each line
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "store_bench: %s\n"
               "usage: store_bench [--threads N (1..1024)] [--cycles N per thread (1..1000000)] "
               "[--not-durable] [--dir DIRECTORY (default: a new one under $TMPDIR or /tmp)] "
               "[--compare-trim ROUNDS (1..100)] [--statements]\n",
               why);
  std::exit(2);
}

int parse_int(const char* flag, const char* text, int low, int high) {
  auto v = composer::parse_whole_number(flag, text, static_cast<uint64_t>(low),
                                        static_cast<uint64_t>(high));
  if (!v) usage(v.error().message.c_str());
  return static_cast<int>(*v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage((flag + " needs a value").c_str());
      return argv[++i];
    };
    if (flag == "--threads") {
      o.threads = parse_int("--threads", value(), 1, 1024);
    } else if (flag == "--cycles") {
      o.cycles = parse_int("--cycles", value(), 1, 1000000);
    } else if (flag == "--not-durable") {
      o.durable = false;
    } else if (flag == "--dir") {
      o.dir = value();
    } else if (flag == "--statements") {
      o.statements = true;
    } else if (flag == "--compare-trim") {
      o.compare_rounds = parse_int("--compare-trim", value(), 1, 100);
    } else {
      usage(("unknown argument '" + flag + "'").c_str());
    }
  }
  return o;
}

// The writer's statements by what they do: total nanoseconds and steps.
struct StatementTally {
  std::mutex mu;
  std::map<std::string, std::pair<int64_t, int64_t>, std::less<>> by_what;

  void add(std::string_view what, int64_t ns) {
    std::lock_guard lock(mu);
    auto it = by_what.find(what);
    if (it == by_what.end()) it = by_what.emplace(std::string(what), std::pair{0, 0}).first;
    it->second.first += ns;
    ++it->second.second;
  }

  void print(const std::string& label, double cycles) {
    std::lock_guard lock(mu);
    std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> rows(by_what.begin(),
                                                                          by_what.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    int64_t total = 0;
    for (const auto& row : rows) total += row.second.first;
    std::printf("%swriter statements: %.1f us per cycle in all\n", label.c_str(),
                static_cast<double>(total) / 1000.0 / cycles);
    for (const auto& [what, figures] : rows) {
      std::printf(
          "%s  %5.1f %%  %7.1f us per cycle  %5.2f steps per cycle  %s\n", label.c_str(),
          total > 0 ? 100.0 * static_cast<double>(figures.first) / static_cast<double>(total) : 0.0,
          static_cast<double>(figures.first) / 1000.0 / cycles,
          static_cast<double>(figures.second) / cycles, what.c_str());
    }
  }
};

}  // namespace

int run(const Options& o) {
  using composer::CompositionState;

  std::string dir = o.dir;
  bool remove_dir = false;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr ? tmp : "/tmp") + "/store_bench.XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("store_bench: creating a temporary directory");
      return 1;
    }
    dir = pattern;
    remove_dir = true;
  }
  const std::string path = dir + "/bench.db";

  int rc = 0;
  {
    composer::db::StoreOptions options;
    options.durable = o.durable;
    StatementTally tally;
    std::atomic<bool> timing{false};
    if (o.statements) {
      options.writer_statement_timer = [&tally, &timing](std::string_view what, int64_t ns) {
        if (timing.load(std::memory_order_relaxed)) tally.add(what, ns);
      };
    }
    auto opened = composer::db::Store::open(path, options);
    if (!opened.ok()) {
      std::fprintf(stderr, "store_bench: %s\n", opened.error().message.c_str());
      return 1;
    }
    auto& store = **opened;

    std::vector<composer::Host> hosts;
    std::vector<composer::Device> devices;
    for (int t = 0; t < o.threads; ++t) {
      composer::Host h;
      h.node = "node" + std::to_string(t);
      h.fabric_id = "host-" + std::to_string(t);
      h.zones = {"z1"};
      h.gpu_slots = 8;
      hosts.push_back(h);
      composer::Device d;
      d.id = "gpu-" + std::to_string(t);
      d.model = "A100-80G";
      d.zone = "z1";
      d.address = "0000:41:00." + std::to_string(t);
      devices.push_back(d);
    }
    if (auto s = store.upsert_hosts(hosts); !s.ok()) {
      std::fprintf(stderr, "store_bench: %s\n", s.error().message.c_str());
      return 1;
    }
    if (auto s = store.upsert_devices(devices, composer::now_ms()); !s.ok()) {
      std::fprintf(stderr, "store_bench: %s\n", s.error().message.c_str());
      return 1;
    }

    const auto before = store.write_stats();
    timing = true;
    rusage usage_before{};
    getrusage(RUSAGE_SELF, &usage_before);
    std::atomic<int> failures{0};
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < o.threads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < o.cycles; ++i) {
          composer::Composition c;
          c.owner.job_id = static_cast<uint32_t>(t * 1000000 + i + 1);
          c.node = "node" + std::to_string(t);
          c.owner.uid = 1000;
          c.owner.user = "bench";
          c.owner.account = "bench";
          c.owner.workload = "training";
          c.request.gpus = 1;
          c.state = CompositionState::kComposing;
          auto created =
              store.create_composition(c, {"gpu-" + std::to_string(t)}, composer::now_ms());
          if (!created.ok()) {
            std::fprintf(stderr, "store_bench: %s\n", created.error().message.c_str());
            ++failures;
            return;
          }
          const int64_t id = created->id;
          const CompositionState path_states[] = {
              CompositionState::kComposing, CompositionState::kReady, CompositionState::kReleasing,
              CompositionState::kReleased};
          for (size_t k = 0; k + 1 < std::size(path_states); ++k) {
            auto moved =
                store.transition(id, path_states[k], path_states[k + 1], "", composer::now_ms());
            if (!moved.ok()) {
              std::fprintf(stderr, "store_bench: %s\n", moved.error().message.c_str());
              ++failures;
              return;
            }
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    timing = false;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto after = store.write_stats();
    rusage usage_after{};
    getrusage(RUSAGE_SELF, &usage_after);

    const double cycles = static_cast<double>(o.threads) * o.cycles;
    const uint64_t calls = after.calls - before.calls;
    const uint64_t transactions = after.transactions - before.transactions;
    std::printf(
        "%sthreads=%d cycles=%.0f durable=%s seconds=%.3f cycles_per_s=%.0f "
        "page_faults_per_cycle=%.1f\n",
        o.label.c_str(), o.threads, cycles, o.durable ? "true" : "false", seconds, cycles / seconds,
        static_cast<double>(usage_after.ru_minflt - usage_before.ru_minflt) / cycles);
    std::printf(
        "%swrite_calls=%llu transactions=%llu calls_per_transaction=%.1f "
        "largest_batch=%llu transactions_per_s=%.0f failures=%d\n",
        o.label.c_str(), static_cast<unsigned long long>(calls),
        static_cast<unsigned long long>(transactions),
        transactions > 0 ? static_cast<double>(calls) / static_cast<double>(transactions) : 0.0,
        static_cast<unsigned long long>(after.largest_batch),
        static_cast<double>(transactions) / seconds, failures.load());
    if (o.statements) tally.print(o.label, cycles);
    rc = failures.load() == 0 ? 0 : 1;
  }
  if (remove_dir) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return rc;
}

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.compare_rounds == 0) return run(o);
  int rc = 0;
  for (int r = 0; r < o.compare_rounds; ++r) {
    for (const bool tuned : {false, true}) {
      std::fflush(stdout);
      const pid_t child = fork();
      if (child < 0) {
        std::perror("store_bench: fork");
        return 1;
      }
      if (child == 0) {
        Options mine = o;
        mine.label = tuned ? "trim=4MiB " : "trim=glibc ";
        if (tuned) mallopt(M_TRIM_THRESHOLD, 4 << 20);
        const int code = run(mine);
        std::fflush(stdout);
        _exit(code);
      }
      int status = 0;
      if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        rc = 1;
      }
    }
  }
  return rc;
}
