// Benchmark (not a test): the utilisation report over a ledger of N events (default 1,000,000).
//
// Starts the real composerd once so it creates the database and its inventory (64 GPUs, 32 CXL
// blocks, 16 NVMe drives on 16 nodes), stops it, appends N events to that database as a year of
// compositions (requested, composing, ready, releasing, released; one in twenty fails while
// composing) plus drains and health changes (the ledger's trigger fills the rollup of ended
// compositions as they are appended), starts composerd again on it and times GET /v1/reports
// over the whole year and over its last week, then reads composerd's peak resident memory
// (VmHWM) from /proc. In its own process it also times the whole year read event by event
// (scan_events, the reference) and walked through the rollup (walk_report, what composerd
// does), and says whether the two reports are the same.
//
//   report_bench [--events N] [--runs R]
// Results and the command that produced them: docs/BENCHMARKS.md, "Reports".
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "../integration/composerd_process.h"
#include "composer/accounting/report.h"
#include "composer/accounting/report_json.h"
#include "composer/api/codec.h"
#include "composer/db/store.h"

namespace {

using Steady = std::chrono::steady_clock;
constexpr int64_t kHour = 3600 * 1000;

void check(int rc, sqlite3* db, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    std::fprintf(stderr, "report_bench: %s: %s\n", what, sqlite3_errmsg(db));
    std::exit(1);
  }
}

std::string peak_memory(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return line.substr(6);
  }
  return "unknown";
}

struct Pool {
  std::vector<std::string> gpus, mems, nvmes;
};

std::string ids(const std::vector<std::string>& all, size_t first, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += (i ? "," : "") + all[(first + i) % all.size()];
  return out;
}

// Appends `events` events spread over the year before `end_ms`; returns how many it wrote.
int64_t fill(const std::string& path, int64_t events, int64_t end_ms, const Pool& pool) {
  sqlite3* db = nullptr;
  check(sqlite3_open(path.c_str(), &db), db, "opening the database");
  check(sqlite3_exec(db, "PRAGMA synchronous = OFF; BEGIN", nullptr, nullptr, nullptr), db,
        "starting the fill");
  sqlite3_stmt* comp = nullptr;
  sqlite3_stmt* ev = nullptr;
  check(sqlite3_prepare_v2(db,
                           "INSERT INTO compositions (job_id, node, uid, user, account, workload, "
                           "gpus, gpu_model, mem_bytes, nvme, state, created_ms, updated_ms, "
                           "attempts, last_error, policy_window) VALUES "
                           "(?1, ?2, ?3, ?4, ?5, ?6, ?7, '', ?8, ?9, ?10, ?11, ?12, 1, ?13, ?14)",
                           -1, &comp, nullptr),
        db, "preparing the composition insert");
  check(sqlite3_prepare_v2(db,
                           "INSERT INTO events (ts_ms, kind, composition_id, job_id, node, uid, "
                           "user, account, workload, from_state, to_state, devices, detail, "
                           "policy_window) VALUES "
                           "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                           -1, &ev, nullptr),
        db, "preparing the event insert");
  const auto text = [](sqlite3_stmt* s, int i, const std::string& v) {
    sqlite3_bind_text(s, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  };
  int64_t written = 0;
  const auto event = [&](int64_t ts, const char* kind, sqlite3_int64 id, int job,
                         const std::string& node, int user, const std::string& workload,
                         const char* from, const std::string& devs, const std::string& detail,
                         const std::string& window) {
    sqlite3_reset(ev);
    sqlite3_bind_int64(ev, 1, ts);
    sqlite3_bind_text(ev, 2, kind, -1, SQLITE_STATIC);
    if (id > 0) {
      sqlite3_bind_int64(ev, 3, id);
    } else {
      sqlite3_bind_null(ev, 3);
    }
    sqlite3_bind_int(ev, 4, job);
    text(ev, 5, node);
    sqlite3_bind_int(ev, 6, 2000 + user);
    text(ev, 7, "user" + std::to_string(user));
    text(ev, 8, "acct" + std::to_string(user % 7));
    text(ev, 9, workload);
    sqlite3_bind_text(ev, 10, from, -1, SQLITE_STATIC);
    sqlite3_bind_text(ev, 11, kind, -1, SQLITE_STATIC);
    text(ev, 12, devs);
    text(ev, 13, detail);
    text(ev, 14, window);
    check(sqlite3_step(ev), db, "inserting an event");
    ++written;
  };

  std::mt19937_64 rng(7);
  const int64_t start_ms = end_ms - 365 * 24 * kHour;
  // Compositions of about five events each, evenly over the year, on 16 nodes; each node uses
  // its own slice of the pool, so no device is ever held twice at once.
  // About 4.9 events per composition (one in twenty fails after three).
  const int64_t compositions = events * 10 / 49 + 16;
  const int64_t step = (end_ms - start_ms - 2 * kHour) / std::max<int64_t>(1, compositions / 16);
  const char* classes[] = {"training", "inference", "interactive"};
  int64_t job = 1;
  for (int64_t c = 0; written < events; ++c) {
    const int node = static_cast<int>(c % 16);
    const int64_t t = start_ms + (c / 16) * step + static_cast<int64_t>(rng() % 1000);
    const int64_t held = step / 2 + static_cast<int64_t>(rng() % static_cast<uint64_t>(step / 3));
    const int user = static_cast<int>(rng() % 40);
    const std::string workload = classes[user % 3];
    const std::string window = (t / kHour) % 24 < 12 ? "day" : "night";
    const std::string node_name = "b" + std::to_string(node);
    const size_t n_gpu = 1 + rng() % 4;
    std::string devs = ids(pool.gpus, static_cast<size_t>(node) * 4, n_gpu);
    if (rng() % 2 == 0) devs += "," + ids(pool.mems, static_cast<size_t>(node) * 2, 1);
    const bool fails = rng() % 20 == 0;
    const int64_t end = fails ? t + 30000 : t + held;

    sqlite3_reset(comp);
    sqlite3_bind_int64(comp, 1, job);
    text(comp, 2, node_name);
    sqlite3_bind_int(comp, 3, 2000 + user);
    text(comp, 4, "user" + std::to_string(user));
    text(comp, 5, "acct" + std::to_string(user % 7));
    text(comp, 6, workload);
    sqlite3_bind_int64(comp, 7, static_cast<int64_t>(n_gpu));
    sqlite3_bind_int64(comp, 8, 0);
    sqlite3_bind_int64(comp, 9, 0);
    sqlite3_bind_text(comp, 10, fails ? "failed" : "released", -1, SQLITE_STATIC);
    sqlite3_bind_int64(comp, 11, t);
    sqlite3_bind_int64(comp, 12, end);
    text(comp, 13, fails ? "fabric attach failed: timeout after 30000 ms" : "");
    text(comp, 14, window);
    check(sqlite3_step(comp), db, "inserting a composition");
    const sqlite3_int64 id = sqlite3_last_insert_rowid(db);
    const int j = static_cast<int>(job++);
    event(t, "requested", id, j, node_name, user, workload, "", devs, "", window);
    event(t, "composing", id, j, node_name, user, workload, "requested", devs, "", window);
    if (fails) {
      event(end, "failed", id, j, node_name, user, workload, "composing", devs,
            "fabric attach failed: timeout after 30000 ms", window);
      continue;
    }
    event(t + 800 + static_cast<int64_t>(rng() % 4000), "ready", id, j, node_name, user, workload,
          "composing", devs, "", window);
    event(end - 1500, "releasing", id, j, node_name, user, workload, "ready", devs, "", window);
    event(end, "released", id, j, node_name, user, workload, "releasing", devs, "", window);
    if (c % 500 == 0) {
      const std::string dev = pool.nvmes[static_cast<size_t>(c / 500) % pool.nvmes.size()];
      event(t + kHour, "drain", 0, 0, "", 0, "", "free", dev, "bench maintenance", "");
      event(t + 3 * kHour, "resume", 0, 0, "", 0, "", "drained", dev, "", "");
    }
  }
  sqlite3_finalize(comp);
  sqlite3_finalize(ev);
  check(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), db, "committing");
  sqlite3_close(db);
  return written;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t events = 1000000;
  int runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--events") {
      events = std::stoll(argv[i + 1]);
    } else if (a == "--runs") {
      runs = std::stoi(argv[i + 1]);
    }
  }
  std::string pool_lines;
  for (int n = 0; n < 16; ++n) {
    pool_lines +=
        "NodeName=b" + std::to_string(n) + " Zones=z1 GpuSlots=8 MemSlots=8 NvmeSlots=4\n";
  }
  pool_lines +=
      "DeviceGroup=gpu Type=gpu Model=H100 Zone=z1 Count=64\n"
      "DeviceGroup=cxl Type=mem Model=CXL-DDR5 Zone=z1 Count=32 Size=64G\n"
      "DeviceGroup=nvme Type=nvme Model=P5620 Zone=z1 Count=16 Size=3T\n";
  composer::testing::ComposerdProcess daemon("LogLevel=info\n", pool_lines);
  Pool pool;
  for (int i = 0; i < 64; ++i)
    pool.gpus.push_back("gpu-" + std::string(i < 10 ? "0" : "") + std::to_string(i));
  for (int i = 0; i < 32; ++i)
    pool.mems.push_back("cxl-" + std::string(i < 10 ? "0" : "") + std::to_string(i));
  for (int i = 0; i < 16; ++i)
    pool.nvmes.push_back("nvme-" + std::string(i < 10 ? "0" : "") + std::to_string(i));
  daemon.stop();

  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const auto fill_began = Steady::now();
  const int64_t written = fill(daemon.state_dir() + "/composer.db", events, now - kHour, pool);
  if (getenv("KEEP_DB"))
    std::filesystem::copy_file(daemon.state_dir() + "/composer.db", getenv("KEEP_DB"),
                               std::filesystem::copy_options::overwrite_existing);
  std::printf("ledger: %lld events written in %.1f s\n", static_cast<long long>(written),
              std::chrono::duration<double>(Steady::now() - fill_began).count());

  {
    // The same work in this process, split: reading the ledger alone, then with the report.
    auto store = composer::db::Store::open(daemon.state_dir() + "/composer.db", {.durable = false});
    if (!store) {
      std::fprintf(stderr, "report_bench: %s\n", store.error().message.c_str());
      return 1;
    }
    const int64_t from = now - 366 * 24 * kHour;
    auto began = Steady::now();
    uint64_t seen = 0;
    (void)(*store)->scan_events(from, now, [&seen](const composer::Event&) { return ++seen > 0; });
    const double scan_ms = std::chrono::duration<double, std::milli>(Steady::now() - began).count();
    auto inventory = (*store)->devices();
    began = Steady::now();
    composer::accounting::ReportBuilder builder(*inventory,
                                                {.start_ms = from, .end_ms = now, .now_ms = now});
    (void)(*store)->scan_events(from, now, [&builder](const composer::Event& e) {
      builder.add(e);
      return true;
    });
    const auto report = builder.finish();
    const double all_ms = std::chrono::duration<double, std::milli>(Steady::now() - began).count();
    began = Steady::now();
    const std::string text = composer::api::to_text(composer::accounting::to_json(report));
    const double json_ms = std::chrono::duration<double, std::milli>(Steady::now() - began).count();
    std::printf(
        "in process, whole year: scan only %.0f ms, scan and report %.0f ms, JSON %.0f ms "
        "(%zu bytes)\n",
        scan_ms, all_ms, json_ms, text.size());

    // What composerd does: the rollup of ended compositions walked instead of every event.
    began = Steady::now();
    uint64_t steps = 0;
    (void)(*store)->walk_report(from, now,
                                {.event = [&steps](const composer::Event&) { ++steps; },
                                 .began = [&steps](const composer::CompositionRollup&) { ++steps; },
                                 .ended = [&steps](const composer::CompositionRollup&) { ++steps; },
                                 .unattached = [](uint64_t) {}});
    const double walk_ms = std::chrono::duration<double, std::milli>(Steady::now() - began).count();
    began = Steady::now();
    composer::accounting::ReportBuilder walker(*inventory,
                                               {.start_ms = from, .end_ms = now, .now_ms = now});
    (void)(*store)->walk_report(
        from, now,
        {.event = [&walker](const composer::Event& e) { walker.add(e); },
         .began = [&walker](const composer::CompositionRollup& c) { walker.begin(c); },
         .ended = [&walker](const composer::CompositionRollup& c) { walker.end(c); },
         .unattached = [&walker](uint64_t n) { walker.add_unattached(n); }});
    const auto walked = walker.finish();
    const double walked_ms =
        std::chrono::duration<double, std::milli>(Steady::now() - began).count();
    const bool same = composer::api::to_text(composer::accounting::to_json(walked)) == text;
    std::printf(
        "in process, whole year, rollup: walk only %.0f ms (%llu steps), walk and report %.0f ms, "
        "same report as the scan: %s\n",
        walk_ms, static_cast<unsigned long long>(steps), walked_ms, same ? "yes" : "NO");
  }

  daemon.start();
  auto client = daemon.client(120000);
  const auto time_report = [&](const char* what, int64_t start_ms, int64_t end_ms) {
    std::vector<double> ms;
    uint64_t read = 0;
    for (int r = 0; r < runs; ++r) {
      const auto began = Steady::now();
      auto json = client.get_json({"reports"}, {{"start_ms", std::to_string(start_ms)},
                                                {"end_ms", std::to_string(end_ms)}});
      ms.push_back(std::chrono::duration<double, std::milli>(Steady::now() - began).count());
      if (!json) {
        std::fprintf(stderr, "report_bench: %s\n", json.error().message.c_str());
        std::exit(1);
      }
      auto report = composer::accounting::report_from_json(*json);
      if (!report) {
        std::fprintf(stderr, "report_bench: %s\n", report.error().message.c_str());
        std::exit(1);
      }
      read = report->events_read;
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%-34s events read=%llu runs=%d best=%.0f ms median=%.0f ms worst=%.0f ms\n", what,
                static_cast<unsigned long long>(read), runs, ms.front(), ms[ms.size() / 2],
                ms.back());
  };
  time_report("report over the whole year", now - 366 * 24 * kHour, now);
  time_report("report over the last week", now - 8 * 24 * kHour, now - kHour);
  std::printf("composerd peak memory (VmHWM):%s\n", peak_memory(daemon.pid()).c_str());
  return 0;
}
