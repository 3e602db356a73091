// Benchmark (not a test): compose+release cycles per second and compose latency percentiles
// against a real composerd (zero-latency sim fabric, durable writes: synchronous=FULL), with
// N concurrent clients, then a burst of B composes sent at once (a job array's prologs).
// Side by side in the same run: the CPU each process spends per cycle (composerd, munged, the
// clients) and what munge alone can do on this machine (credentials encoded and decoded per
// second with the same munged), which bounds any design that sends a fresh munge credential
// with every request. The burst runs three times: through the client library (each client
// connects and encodes its credential after the instant), as a "ready burst" (1,000 client
// threads, connections open and credentials encoded before the instant), and with the
// clients' side on one epoll thread (as 1,000 prologs on other nodes would cost this machine
// nothing), with composerd's CPU per compose by thread name and the store's changes per
// transaction.
//
// Then the same burst against a slow fabric (the sim with --latency MS per attach, 2000 by
// default) behind a composerd with its default ApiThreads (64): the wall time of the whole
// burst beside the time of one operation, which is what a fabric that allows that many
// operations at once (MaxFabricOperations=--in-flight, 1000 by default) makes possible.
//
// Last, the same burst against a fabric that applies one change at a time like a Liqid
// Director (SimSerialize=yes, --latency per change): one after another the burst would take
// B latencies; composerd hands the fabric every change waiting as one batch, and the bench
// prints how many batches (fabric changes) it took, from composerd's /metrics.
//
//   composer_bench [--clients N] [--seconds S] [--burst B] [--latency MS] [--in-flight N]
//                  [--api-threads N] [--not-durable]
//
// With --scale, only this: the pool at 5,000 and at 100,000 devices on 10,000 hosts (sim, zero
// latency, durable), side by side: composerd's start-up until it answers, compose latency
// (8 clients composing and releasing on hosts of their own), one full listing of the devices
// page by page through the client, and composerd's peak resident memory (VmHWM).
//
//   composer_bench --scale
//
// With --postgresql CONNINFO (a role that may create databases), only this: the steady cycles
// on SQLite and on that PostgreSQL side by side, then the slow-fabric burst on PostgreSQL
// (tests/ha/bench.sh runs it against a primary with one synchronous standby).
// Results and the command that produced them: docs/BENCHMARKS.md.
#include <httplib.h>
#include <libpq-fe.h>
#include <munge.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../integration/composerd_process.h"
#include "../integration/metrics_text.h"
#include "composer/api/codec.h"
#include "composer/client/munge_credential.h"
#include "composer/test_support/raw_socket.h"
#include "composer/testing/fake_liqid.h"

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
  return composer::api::ComposeBody{
      .owner = {.uid = 1000, .user = "bench", .account = "bench", .workload = "training"},
      .request = composer::Request{.gpus = 1}};
}

// CPU seconds (user + system) a process has used, from /proc/PID/stat.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(in, text);
  const auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(f);  // utime, stime
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds of a process's threads, summed by thread name (composerd names its threads:
// store-writer, api-worker, ...; the io loop keeps the process's name), from each thread's
// schedstat (nanoseconds on a CPU, not clock ticks).
std::map<std::string, double> cpu_by_thread_name(pid_t pid) {
  std::map<std::string, double> out;
  std::error_code ec;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (auto it = std::filesystem::directory_iterator(tasks, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::ifstream comm(it->path() / "comm");
    std::ifstream sched(it->path() / "schedstat");
    std::string name;
    double ns = 0;
    if (std::getline(comm, name) && sched >> ns) out[name] += ns / 1e9;
  }
  return out;
}

// "store-writer 61 ms, api-worker 58 ms, ...": what each kind of thread spent between two
// cpu_by_thread_name readings, largest first, per `per` calls.
std::string thread_split(const std::map<std::string, double>& before,
                         const std::map<std::string, double>& after, int per) {
  std::vector<std::pair<double, std::string>> spent;
  for (const auto& [name, s] : after) {
    const auto b = before.find(name);
    const double d = s - (b == before.end() ? 0 : b->second);
    if (d > 0) spent.emplace_back(d, name);
  }
  std::sort(spent.rbegin(), spent.rend());
  std::string text;
  char figure[96];
  for (const auto& [s, name] : spent) {
    std::snprintf(figure, sizeof figure, "%s%s %.3f ms", text.empty() ? "" : ", ", name.c_str(),
                  s * 1000 / per);
    text += figure;
  }
  return text;
}

double self_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// One credential encoded and decoded through munged, as one request costs (the client
// encodes, composerd decodes). False on any munge error.
bool munge_pair(const std::string& socket) {
  munge_ctx_t enc = munge_ctx_create();
  munge_ctx_t dec = munge_ctx_create();
  munge_ctx_set(enc, MUNGE_OPT_SOCKET, socket.c_str());
  munge_ctx_set(dec, MUNGE_OPT_SOCKET, socket.c_str());
  const char payload[] = "POST /v1/compositions";
  char* cred = nullptr;
  bool ok = munge_encode(&cred, enc, payload, sizeof payload - 1) == EMUNGE_SUCCESS;
  if (ok) {
    void* buf = nullptr;
    int len = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    ok = munge_decode(cred, dec, &buf, &len, &uid, &gid) == EMUNGE_SUCCESS;
    std::free(buf);
  }
  std::free(cred);
  munge_ctx_destroy(enc);
  munge_ctx_destroy(dec);
  return ok;
}

// `threads` threads make credential pairs until `total` are done or `seconds` pass (0: no
// time limit). Returns {pairs done, seconds taken}.
std::pair<long, double> munge_run(const std::string& socket, int threads, long total,
                                  double seconds) {
  std::atomic<long> next{0};
  std::atomic<long> done{0};
  std::atomic<long> failed{0};
  const auto t0 = Clock::now();
  auto over = [&] {
    return seconds > 0 && std::chrono::duration<double>(Clock::now() - t0).count() >= seconds;
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      while (next++ < total && !over()) {
        if (munge_pair(socket))
          ++done;
        else
          ++failed;
      }
    });
  }
  for (auto& t : pool) t.join();
  if (failed.load() > 0) std::fprintf(stderr, "munge: %ld credentials failed\n", failed.load());
  return {done.load(), std::chrono::duration<double>(Clock::now() - t0).count()};
}

// B composes sent at once by B client threads; their latencies in ms and errors.
struct Burst {
  std::vector<double> ms;
  long errors = 0;
  double wall_s = 0;
  double client_cpu_s = 0;  // the clients' own CPU inside their timed calls, summed
  double daemon_cpu_s = 0;  // composerd's and munged's CPU from the instant on
  double munged_cpu_s = 0;
  std::string thread_split;  // composerd's CPU per compose by thread name (loop_burst)
};

// CPU seconds the calling thread has used.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

// The burst's i-th node: eight composes to a node, from b<first_node> on.
std::string burst_node(int i, int first_node = 1) {
  char node[16];
  std::snprintf(node, sizeof node, "b%04d", i / 8 + first_node);
  return node;
}

// One client's call in a burst: "" when it succeeded, else why not.
using Call = std::function<std::string()>;

// `burst` threads, each prepared by prepare(i) (its client, connection, credential: whatever
// a client has done before it sends), released at one instant; each call is timed, with the
// thread's own CPU, and composerd's and munged's CPU is read from the instant on.
Burst timed_burst(const composer::testing::ComposerdProcess& daemon, int burst, const char* what,
                  const std::function<Call(int)>& prepare) {
  Burst out;
  out.ms.resize(static_cast<size_t>(burst));
  std::vector<double> cpu(static_cast<size_t>(burst));
  std::atomic<long> errors{0};
  std::barrier gate(burst + 1);
  std::vector<std::thread> threads;
  for (int i = 0; i < burst; ++i) {
    threads.emplace_back([&, i] {
      const Call call = prepare(i);
      gate.arrive_and_wait();
      const auto s = Clock::now();
      const double c = thread_cpu_seconds();
      const std::string error = call();
      out.ms[static_cast<size_t>(i)] =
          std::chrono::duration<double, std::milli>(Clock::now() - s).count();
      cpu[static_cast<size_t>(i)] = thread_cpu_seconds() - c;
      if (!error.empty() && errors++ == 0) {
        std::fprintf(stderr, "first %s error: %s\n", what, error.c_str());
      }
    });
  }
  gate.arrive_and_wait();
  const auto began = Clock::now();
  const double daemon0 = cpu_seconds(daemon.pid());
  const double munged0 = cpu_seconds(daemon.munged_pid());
  for (auto& t : threads) t.join();
  out.wall_s = std::chrono::duration<double>(Clock::now() - began).count();
  out.daemon_cpu_s = cpu_seconds(daemon.pid()) - daemon0;
  out.munged_cpu_s = cpu_seconds(daemon.munged_pid()) - munged0;
  out.errors = errors.load();
  for (const double c : cpu) out.client_cpu_s += c;
  return out;
}

// B composes through the client library sent at once, the i-th on node_of(i), each client
// waiting up to timeout_ms.
Burst compose_burst(const composer::testing::ComposerdProcess& daemon, int burst,
                    uint32_t first_job, const std::function<std::string(int)>& node_of,
                    int timeout_ms = 120000) {
  return timed_burst(daemon, burst, "burst", [&](int i) -> Call {
    // The client is neither copied nor moved: made in place from the daemon's prvalue.
    return [cli = std::shared_ptr<composer::client::Client>(
                new composer::client::Client(daemon.client(timeout_ms))),
            node = node_of(i), job = first_job + static_cast<uint32_t>(i)] {
      auto r = cli->compose(job, node, one_gpu());
      return r.ok() ? std::string() : r.error().message;
    };
  });
}

// Eight composes go to each node, from node b<first_node> on.
Burst compose_burst(const composer::testing::ComposerdProcess& daemon, int burst,
                    uint32_t first_job, int first_node = 1) {
  return compose_burst(daemon, burst, first_job,
                       [first_node](int i) { return burst_node(i, first_node); });
}

// The same burst as compose_burst, with each client's own work done before the instant: its
// connection open (a GET /v1/health on it) and its credential encoded, as 1,000 prologs on
// 1,000 nodes do on their own CPUs. After the instant each only sends its PUT (the request
// the client library sends for a compose) and reads the answer, so what is timed is
// composerd, with munged's decode, taking 1,000 requests that arrive at once.
Burst ready_burst(const composer::testing::ComposerdProcess& daemon, int burst,
                  uint32_t first_job) {
  const std::string body = composer::api::to_text(composer::api::to_json(one_gpu()));
  return timed_burst(daemon, burst, "ready-burst", [&](int i) -> Call {
    auto http = std::make_shared<httplib::Client>("127.0.0.1", daemon.port());
    http->set_keep_alive(true);
    http->set_read_timeout(120, 0);
    const std::string path = "/v1/compositions/" +
                             std::to_string(first_job + static_cast<uint32_t>(i)) + "/" +
                             burst_node(i);
    const bool warm = static_cast<bool>(http->Get("/v1/health"));
    const auto cred = composer::client::munge_credential("PUT " + path, daemon.munge_socket());
    httplib::Headers auth{{"Authorization", "Munge " + (cred ? *cred : "")}};
    return [http, path, auth = std::move(auth), &body, warm]() -> std::string {
      if (!warm) return "no connection";
      const auto r = http->Put(path, auth, body, "application/json");
      if (!r) return httplib::to_string(r.error());
      return r->status / 100 == 2 ? std::string() : std::to_string(r->status) + " " + r->body;
    };
  });
}

// ready_burst with the clients' side in one thread: the same PUTs on connections opened (a GET
// /v1/health answered on each) and credentials encoded before the instant, written one after
// another at the instant and their answers read with epoll as they arrive. 1,000 prologs run
// on 1,000 nodes; here their side costs the machine composerd runs on one thread instead of
// 1,000 woken at once. Each latency runs from the instant (before the first write) to its
// whole answer.
Burst loop_burst(const composer::testing::ComposerdProcess& daemon, int burst, uint32_t first_job) {
  using composer::test_support::answers_in;
  using composer::test_support::connect_to;
  using composer::test_support::send_all;
  Burst out;
  out.ms.assign(static_cast<size_t>(burst), 0);
  const std::string body = composer::api::to_text(composer::api::to_json(one_gpu()));
  const std::string host = "127.0.0.1:" + std::to_string(daemon.port());
  struct Conn {
    int fd = -1;
    std::string request;
    std::string received;
    bool done = false;
  };
  std::vector<Conn> conns(static_cast<size_t>(burst));
  auto fail = [&](const std::string& why) {
    if (out.errors++ == 0) std::fprintf(stderr, "first loop-burst error: %s\n", why.c_str());
  };
  for (int i = 0; i < burst; ++i) {
    Conn& c = conns[static_cast<size_t>(i)];
    const std::string path = "/v1/compositions/" +
                             std::to_string(first_job + static_cast<uint32_t>(i)) + "/" +
                             burst_node(i);
    const auto cred = composer::client::munge_credential("PUT " + path, daemon.munge_socket());
    c.request = "PUT " + path + " HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Munge " +
                (cred ? *cred : "") + "\r\nContent-Type: application/json\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n" + body;
    c.fd = connect_to(daemon.port());
    std::string warm;
    if (c.fd >= 0 && send_all(c.fd, "GET /v1/health HTTP/1.1\r\nHost: " + host + "\r\n\r\n")) {
      char buf[4096];
      while (answers_in(warm).empty()) {
        const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        warm.append(buf, static_cast<size_t>(n));
      }
    }
    if (answers_in(warm).empty()) {
      fail("connection " + std::to_string(i) + " not open");
      if (c.fd >= 0) ::close(c.fd);
      c.fd = -1;
      c.done = true;
    }
  }
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) {
    fail("epoll_create1 failed");
    for (Conn& c : conns) {
      if (c.fd >= 0) ::close(c.fd);
    }
    return out;
  }
  for (size_t i = 0; i < conns.size(); ++i) {
    if (conns[i].fd < 0) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
  }

  const auto threads0 = cpu_by_thread_name(daemon.pid());
  const auto began = Clock::now();
  const double daemon0 = cpu_seconds(daemon.pid());
  const double munged0 = cpu_seconds(daemon.munged_pid());
  const double client0 = thread_cpu_seconds();
  size_t waiting = 0;
  for (size_t i = 0; i < conns.size(); ++i) {
    Conn& c = conns[i];
    if (c.done) continue;
    if (send_all(c.fd, c.request)) {
      ++waiting;
    } else {
      fail("request " + std::to_string(i) + " not sent");
      c.done = true;
    }
  }
  std::vector<epoll_event> events(256);
  char buf[65536];
  while (waiting > 0 && Clock::now() - began < std::chrono::seconds(120)) {
    const int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 1000);
    for (int k = 0; k < n; ++k) {
      Conn& c = conns[events[static_cast<size_t>(k)].data.u64];
      if (c.done) continue;
      const ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
      if (got > 0) c.received.append(buf, static_cast<size_t>(got));
      const auto answers = answers_in(c.received);
      if (answers.empty() && got > 0) continue;
      c.done = true;
      --waiting;
      const size_t i = static_cast<size_t>(&c - conns.data());
      out.ms[i] = std::chrono::duration<double, std::milli>(Clock::now() - began).count();
      epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
      if (answers.empty()) {
        fail("connection " + std::to_string(i) + " closed without an answer");
      } else if (answers.front().status / 100 != 2) {
        fail(std::to_string(answers.front().status) + " " + answers.front().body);
      }
    }
  }
  out.client_cpu_s = thread_cpu_seconds() - client0;
  out.wall_s = std::chrono::duration<double>(Clock::now() - began).count();
  out.daemon_cpu_s = cpu_seconds(daemon.pid()) - daemon0;
  out.munged_cpu_s = cpu_seconds(daemon.munged_pid()) - munged0;
  out.thread_split = thread_split(threads0, cpu_by_thread_name(daemon.pid()), burst);
  if (waiting > 0) fail(std::to_string(waiting) + " answers still missing after 120 s");
  ::close(ep);
  for (Conn& c : conns) {
    if (c.fd >= 0) ::close(c.fd);
  }
  return out;
}

// One line for a ready burst (ready_burst, loop_burst): its errors, those of the releases
// before it, its wall time and the CPU per compose from the instant.
void print_ready_burst(const char* what, const Burst& b, int burst, long released,
                       const char* released_what, const char* clients) {
  std::printf(
      "%s: %d composes, %ld errors (%ld releasing %s before it), %.2f s in all; CPU per compose "
      "from the instant: composerd %.3f ms, munged %.3f ms, %s %.3f ms\n",
      what, burst, b.errors, released, released_what, b.wall_s, b.daemon_cpu_s * 1000 / burst,
      b.munged_cpu_s * 1000 / burst, clients, b.client_cpu_s * 1000 / burst);
}

// Releases the jobs first_job .. first_job+n-1 that compose_burst or ready_burst composed.
long release_burst(const composer::testing::ComposerdProcess& daemon, int n, uint32_t first_job) {
  std::atomic<long> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      auto cli = daemon.client();
      for (int i = t; i < n; i += 16) {
        if (!cli.release(first_job + static_cast<uint32_t>(i), burst_node(i)).ok()) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors.load();
}

// composerd's /metrics as text ("" if it did not answer).
std::string scrape(const composer::testing::ComposerdProcess& daemon) {
  httplib::Client http("127.0.0.1", daemon.port());
  auto r = http.Get("/metrics");
  return r ? r->body : "";
}

// One sample of a scrape, by its name and labels as written there (0 if absent).
double metric(const std::string& scraped, const std::string& series) {
  return std::max(0.0, composer::testing::metric(scraped, series));
}
double metric(const composer::testing::ComposerdProcess& daemon, const std::string& series) {
  return metric(scrape(daemon), series);
}

// The count of one fabric driver call in composerd's /metrics (0 if absent).
double driver_calls(const composer::testing::ComposerdProcess& daemon, const std::string& call) {
  return metric(
      daemon,
      "composer_fabric_request_duration_seconds_count{fabric=\"sim\",operation=\"" + call + "\"}");
}

std::string pool_lines(int nodes) {
  return "NodeName=b[0001-" + std::to_string(nodes) +
         "] Zones=z1 GpuSlots=8 MemSlots=0 NvmeSlots=0\n"
         "DeviceGroup=gpu Type=gpu Model=A100-80G Zone=z1 Count=" +
         std::to_string(nodes * 8) + "\n";
}

}  // namespace

// Compose+release cycles by `clients` clients, each on a node of its own (b0001...), for
// `seconds`.
struct Steady {
  long cycles = 0;
  long errors = 0;
  double elapsed_s = 0;
  std::vector<double> compose_ms;
};

Steady steady_cycles(const composer::testing::ComposerdProcess& daemon, int clients, int seconds) {
  std::atomic<bool> stop{false};
  std::atomic<long> cycles{0};
  std::atomic<long> errors{0};
  std::vector<std::vector<double>> compose_ms(static_cast<size_t>(clients));
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
        compose_ms[static_cast<size_t>(c)].push_back(
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
  Steady out;
  out.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  out.cycles = cycles.load();
  out.errors = errors.load();
  for (const auto& v : compose_ms) out.compose_ms.insert(out.compose_ms.end(), v.begin(), v.end());
  return out;
}

// composerd's peak resident memory in MiB (VmHWM of /proc/PID/status).
double peak_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("VmHWM:")) return std::atof(line.c_str() + 6) / 1024.0;
  }
  return 0;
}

struct Scale {
  double start_s = 0;
  std::vector<double> compose_ms;
  double list_s = 0;
  size_t listed = 0;
  double peak_mib = 0;
  long errors = 0;
};

Scale scale_run(int devices) {
  Scale out;
  const std::string pool =
      "NodeName=h[00001-10000] Zones=z1 GpuSlots=8 MemSlots=0 NvmeSlots=0\n"
      "DeviceGroup=gpu Type=gpu Model=A100-80G Zone=z1 Count=" +
      std::to_string(devices) + "\n";
  const auto began = Clock::now();
  composer::testing::ComposerdProcess daemon("Durable=yes\nLogLevel=warning\n", pool);
  out.start_s = std::chrono::duration<double>(Clock::now() - began).count();
  std::vector<std::vector<double>> ms(8);
  std::atomic<long> errors{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < 8; ++c) {
    threads.emplace_back([&, c] {
      auto cli = daemon.client();
      char node[16];
      for (int i = 0; i < 150; ++i) {
        std::snprintf(node, sizeof node, "h%05d", 1 + c * 1000 + i);
        const uint32_t job = 7'000'000u + static_cast<uint32_t>(c * 1000 + i);
        const auto s = Clock::now();
        auto r = cli.compose(job, node, one_gpu());
        ms[static_cast<size_t>(c)].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - s).count());
        if (!r.ok() || !cli.release(job, node).ok()) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& v : ms) out.compose_ms.insert(out.compose_ms.end(), v.begin(), v.end());
  const auto list_began = Clock::now();
  auto all = daemon.client().devices();
  out.list_s = std::chrono::duration<double>(Clock::now() - list_began).count();
  out.listed = all.ok() ? all->size() : 0;
  if (!all.ok()) ++errors;
  out.peak_mib = peak_mib(daemon.pid());
  out.errors = errors.load();
  return out;
}

int scale_bench() {
  const Scale small = scale_run(5000);
  const Scale large = scale_run(100000);
  for (const auto& [n, r] : {std::pair<int, const Scale&>{5000, small}, {100000, large}}) {
    std::printf(
        "scale: %d devices on 10,000 hosts: start-up %.2f s, compose p50 %.2f ms p99 %.2f ms "
        "(n=%zu), full listing %zu devices in %.2f s, composerd peak %.0f MiB, %ld errors\n",
        n, r.start_s, percentile(r.compose_ms, 50), percentile(r.compose_ms, 99),
        r.compose_ms.size(), r.listed, r.list_s, r.peak_mib, r.errors);
  }
  std::printf("scale: compose p50 at 100,000 devices / at 5,000 devices = %.2f\n",
              percentile(large.compose_ms, 50) / std::max(0.001, percentile(small.compose_ms, 50)));
  return small.errors + large.errors == 0 ? 0 : 1;
}

// A burst against the fake Liqid Director (in this process, real HTTP) that edits one machine
// at a time and takes `latency_ms` to reprogram: `burst` single-GPU composes spread over
// `machines` machines, sent at once. One after another they would take `burst` reprograms;
// the driver batches what waits into one edit per machine.
int liqid_bench(int burst, int machines, int latency_ms) {
  composer::testing::FakeLiqidOptions o;
  o.machines_per_group = static_cast<uint32_t>(machines);
  o.gpus_per_group = static_cast<uint32_t>(burst);
  o.memory_per_group = 0;
  o.drives_per_group = 0;
  o.free_gpus = 0;
  o.reprogram_ms = latency_ms;
  o.one_edit_at_a_time = true;
  auto fake = composer::testing::FakeLiqid::start(o);
  if (!fake) {
    std::fprintf(stderr, "composer_bench: fake Liqid: %s\n", fake.error().message.c_str());
    return 1;
  }
  composer::test_support::TempDir dir("composer-bench-liqid");
  const std::string cred = composer::testing::write_credentials(dir, o.username, o.password);
  char last[16];
  std::snprintf(last, sizeof last, "%02d", machines);  // the fake's names: node01 .. node999
  composer::testing::ComposerdProcess daemon(
      "Durable=yes\nLogLevel=warning\nFabric=liqid\nFabricUrl=" + (*fake)->base_url() +
          "\nFabricCredentials=" + cred + "\nFabricTimeout=600s\nComposeTimeout=600\n",
      "NodeName=node[01-" + std::string(last) + "]\n");
  const uint64_t before = (*fake)->reprograms();
  const Burst b = compose_burst(
      daemon, burst, 9'800'000u,
      [machines](int i) {
        char node[16];
        std::snprintf(node, sizeof node, "node%02d", i % machines + 1);
        return std::string(node);
      },
      600000);
  std::printf(
      "fake Liqid Director, one edit at a time, %d ms per reprogram: a burst of %d composes on "
      "%d machines %.2f s in all (one after another: %.0f s), %llu reprograms (edits), most "
      "machines in edit at once %zu, %ld errors\n",
      latency_ms, burst, machines, b.wall_s, burst * latency_ms / 1000.0,
      static_cast<unsigned long long>((*fake)->reprograms() - before),
      (*fake)->most_edits_at_once(), b.errors);
  print_latency("liqid burst latency", b.ms);
  return b.errors == 0 ? 0 : 1;
}

// A fresh database on the server `conninfo` reaches (its role may create databases), for one
// composerd; returns the connection string for it.
std::string fresh_pg_database(const std::string& conninfo, const std::string& name) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  bool ok = PQstatus(c) == CONNECTION_OK;
  std::string why = PQerrorMessage(c);
  if (ok) {
    for (const std::string& sql : {"DROP DATABASE IF EXISTS " + name, "CREATE DATABASE " + name}) {
      PGresult* r = PQexec(c, sql.c_str());
      ok = ok && PQresultStatus(r) == PGRES_COMMAND_OK;
      if (!ok) why = PQerrorMessage(c);
      PQclear(r);
    }
  }
  PQfinish(c);
  if (!ok) throw std::runtime_error("making database " + name + ": " + why);
  return conninfo + " dbname=" + name;  // a later keyword wins in libpq
}

// The state URL file composerd reads (mode 0600, as it demands).
std::string state_url_file(const composer::test_support::TempDir& dir,
                           const std::string& conninfo) {
  std::string path = dir.file("state.url");
  std::ofstream(path) << conninfo << "\n";
  ::chmod(path.c_str(), 0600);
  return path;
}

// The PostgreSQL store's writes between two scrapes of /metrics: changes, the transactions
// that committed them, and the writer's round trips to the server.
void print_store_writes(const char* what, const std::string& before, const std::string& after) {
  const auto delta = [&](const char* name) { return metric(after, name) - metric(before, name); };
  const double changes = delta("composer_store_write_calls_total");
  const double transactions = delta("composer_store_transactions_total");
  const double trips = delta("composer_store_round_trips_total");
  std::printf(
      "PostgreSQL store, %s: %.0f changes in %.0f transactions (%.1f a transaction), %.0f round "
      "trips (%.2f a change, %.1f a transaction)\n",
      what, changes, transactions, changes / std::max(1.0, transactions), trips,
      trips / std::max(1.0, changes), trips / std::max(1.0, transactions));
}

// With --postgresql: the zero-latency steady cycles on SQLite (Durable=yes) and on the
// PostgreSQL `conninfo` reaches (tests/ha/bench.sh: a primary with one synchronous standby),
// one after the other in this run, then the slow-fabric burst on SQLite and on PostgreSQL: the
// machine is shared, so only figures of one run compare.
int postgresql_bench(const std::string& conninfo, int clients, int seconds, int burst,
                     int latency_ms, int in_flight) {
  composer::test_support::TempDir dir("composer-bench-pg");
  const std::string pool = pool_lines(clients);
  const int slow_nodes = (burst + 7) / 8 + 1;
  const std::string slow_conf = "\nLogLevel=warning\nSimLatency=" + std::to_string(latency_ms) +
                                "\nMaxFabricOperations=" + std::to_string(in_flight) + "\n";
  long errors = 0;
  double sqlite_rate = 0;
  double sqlite_burst_s = 0;
  {
    composer::testing::ComposerdProcess daemon("Durable=yes\nLogLevel=warning\n", pool);
    const Steady st = steady_cycles(daemon, clients, seconds);
    sqlite_rate = static_cast<double>(st.cycles) / st.elapsed_s;
    std::printf("steady on SQLite (Durable=yes): %d clients, %.1f s: %.0f cycles/s, %ld errors\n",
                clients, st.elapsed_s, sqlite_rate, st.errors);
    print_latency("SQLite steady compose", st.compose_ms);
    errors += st.errors;
  }
  {
    const std::string url = state_url_file(dir, fresh_pg_database(conninfo, "bench_steady"));
    composer::testing::ComposerdProcess daemon(
        "StateBackend=postgresql\nStateUrlFile=" + url + "\nLogLevel=warning\n", pool);
    const std::string m0 = scrape(daemon);
    const Steady st = steady_cycles(daemon, clients, seconds);
    const double rate = static_cast<double>(st.cycles) / st.elapsed_s;
    std::printf(
        "steady on PostgreSQL (synchronous standby): %d clients, %.1f s: %.0f cycles/s = %.2fx "
        "SQLite's, %ld errors\n",
        clients, st.elapsed_s, rate, rate / std::max(1.0, sqlite_rate), st.errors);
    print_latency("PostgreSQL steady compose", st.compose_ms);
    print_store_writes("steady", m0, scrape(daemon));
    errors += st.errors;
  }
  {
    composer::testing::ComposerdProcess daemon("Durable=yes" + slow_conf, pool_lines(slow_nodes));
    const Burst one = compose_burst(daemon, 1, 9'000'000, slow_nodes);
    const Burst slow = compose_burst(daemon, burst, 9'100'000);
    sqlite_burst_s = slow.wall_s;
    std::printf(
        "slow fabric on SQLite (Durable=yes): %d ms per attach, MaxFabricOperations=%d: one "
        "compose %.2f s; a burst of %d concurrent composes %.2f s in all = %.2fx one operation, "
        "%ld errors\n",
        latency_ms, in_flight, one.wall_s, burst, slow.wall_s, slow.wall_s * 1000.0 / latency_ms,
        slow.errors + one.errors);
    errors += slow.errors + one.errors;
  }
  {
    const std::string url = state_url_file(dir, fresh_pg_database(conninfo, "bench_burst"));
    composer::testing::ComposerdProcess daemon(
        "StateBackend=postgresql\nStateUrlFile=" + url + slow_conf, pool_lines(slow_nodes));
    const Burst one = compose_burst(daemon, 1, 9'000'000, slow_nodes);
    const std::string m0 = scrape(daemon);
    const Burst slow = compose_burst(daemon, burst, 9'100'000);
    print_store_writes("slow-fabric burst", m0, scrape(daemon));
    std::printf(
        "slow fabric on PostgreSQL (synchronous standby): %d ms per attach, "
        "MaxFabricOperations=%d: one compose %.2f s; a burst of %d concurrent composes %.2f s "
        "in all = %.2fx one operation (SQLite's in this run %.2fx), %ld errors\n",
        latency_ms, in_flight, one.wall_s, burst, slow.wall_s, slow.wall_s * 1000.0 / latency_ms,
        sqlite_burst_s * 1000.0 / latency_ms, slow.errors + one.errors);
    print_latency("slow-fabric burst latency", slow.ms);
    errors += slow.errors + one.errors;
  }
  return errors == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--scale") return scale_bench();
  if (argc >= 2 && std::string(argv[1]) == "--liqid") {
    // --liqid [BURST [MACHINES [LATENCY_MS]]]
    const int burst = argc > 2 ? std::atoi(argv[2]) : 1000;
    const int machines = argc > 3 ? std::atoi(argv[3]) : 50;
    const int latency = argc > 4 ? std::atoi(argv[4]) : 2000;
    if (burst < 1 || machines < 1 || machines > 999 || latency < 0) {
      std::fprintf(stderr,
                   "composer_bench --liqid [BURST [MACHINES [LATENCY_MS]]]: a burst of 1 or "
                   "more, 1 to 999 machines, a latency of 0 or more\n");
      return 2;
    }
    return liqid_bench(burst, machines, latency);
  }
  int clients = 32;
  int seconds = 10;
  int burst = 1000;
  int latency_ms = 2000;
  int in_flight = 1000;
  int api_threads = 0;  // 0: composerd's own default (ApiThreads=64)
  bool durable = true;
  std::string postgresql;  // --postgresql CONNINFO
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--postgresql" && i + 1 < argc && argv[i + 1][0] != '\0') {
      postgresql = argv[++i];
      continue;
    }
    int* value = a == "--clients"       ? &clients
                 : a == "--seconds"     ? &seconds
                 : a == "--burst"       ? &burst
                 : a == "--latency"     ? &latency_ms
                 : a == "--in-flight"   ? &in_flight
                 : a == "--api-threads" ? &api_threads
                                        : nullptr;
    if (a == "--not-durable") {
      durable = false;
    } else if (value != nullptr && i + 1 < argc && std::atoi(argv[i + 1]) > 0) {
      *value = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "composer_bench: bad argument '%s'; usage: composer_bench [--clients N] "
                   "[--seconds S] [--burst B] [--latency MS] [--in-flight N] [--api-threads N] "
                   "[--not-durable] [--postgresql CONNINFO], "
                   "every number above 0\n",
                   a.c_str());
      return 2;
    }
  }
  if (!postgresql.empty()) {
    return postgresql_bench(postgresql, clients, seconds, burst, latency_ms, in_flight);
  }
  const int nodes = std::max(clients, (burst + 7) / 8);
  const std::string pool = pool_lines(nodes);
  // composerd as a site runs it: its default ApiThreads unless --api-threads says otherwise (a
  // compose waits for the fabric without a worker, so the burst needs no worker each).
  const std::string extra =
      std::string(durable ? "Durable=yes" : "Durable=no") + "\nLogLevel=warning\n" +
      (api_threads > 0 ? "ApiThreads=" + std::to_string(api_threads) + "\n" : "");
  composer::testing::ComposerdProcess daemon(extra, pool);

  std::printf("composerd bench: %d nodes, %d GPUs, sim fabric latency 0, synchronous=%s, %s\n",
              nodes, nodes * 8, durable ? "FULL" : "NORMAL",
              api_threads > 0 ? ("ApiThreads=" + std::to_string(api_threads)).c_str()
                              : "ApiThreads default (64)");

  // Phase 0: munge alone, with the same munged and as many threads as clients.
  {
    const auto [pairs, took] = munge_run(daemon.munge_socket(), clients, 1L << 40, 3.0);
    const double rate = static_cast<double>(pairs) / took;
    std::printf(
        "munge alone: %d threads: %.0f credentials encoded+decoded/s; at two per cycle (compose, "
        "release) at most %.0f cycles/s with the whole machine and nothing else running\n",
        clients, rate, rate / 2);
    const auto [bpairs, btook] = munge_run(daemon.munge_socket(), std::min(burst, 64), burst, 0);
    std::printf("munge alone: %ld credentials encoded+decoded in %.1f ms (%d threads)\n", bpairs,
                btook * 1000, std::min(burst, 64));
  }

  // Phase 1: steady cycles.
  const double cpu0_daemon = cpu_seconds(daemon.pid());
  const double cpu0_munged = cpu_seconds(daemon.munged_pid());
  const double cpu0_self = self_cpu_seconds();
  const Steady steady = steady_cycles(daemon, clients, seconds);
  const std::vector<double>& all = steady.compose_ms;
  std::printf("steady: %d clients, %.1f s: %ld compose+release cycles, %.0f cycles/s, %ld errors\n",
              clients, steady.elapsed_s, steady.cycles,
              static_cast<double>(steady.cycles) / steady.elapsed_s, steady.errors);
  print_latency("steady compose latency", all);
  {
    const double n = static_cast<double>(std::max(1L, steady.cycles));
    const double d = (cpu_seconds(daemon.pid()) - cpu0_daemon) * 1000 / n;
    const double m = (cpu_seconds(daemon.munged_pid()) - cpu0_munged) * 1000 / n;
    const double c = (self_cpu_seconds() - cpu0_self) * 1000 / n;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    std::printf(
        "steady CPU per cycle: composerd %.3f ms, munged %.3f ms, clients %.3f ms, total %.3f ms; "
        "%ld cores allow at most %.0f cycles/s at that cost\n",
        d, m, c, d + m + c, cores, static_cast<double>(cores) * 1000 / (d + m + c));
  }

  // Phase 2: a burst of composes released at the same instant.
  const double clients0 = self_cpu_seconds();
  const Burst fast = compose_burst(daemon, burst, 5'000'000);
  const double clients_all = self_cpu_seconds() - clients0;
  std::printf("burst: %d concurrent composes, %ld errors, %.2f s in all\n", burst, fast.errors,
              fast.wall_s);
  // What the burst cost each process per compose: where the machine's cores went while it
  // waited. The clients' figure in all includes starting their threads and clients (before
  // the burst's instant); inside the compose calls is what a prolog spends once started.
  std::printf(
      "burst CPU per compose: composerd %.3f ms, munged %.3f ms, clients %.3f ms in all, %.3f ms "
      "inside the compose calls; %.2f s of CPU for %.2f s on %ld cores\n",
      fast.daemon_cpu_s * 1000 / burst, fast.munged_cpu_s * 1000 / burst,
      clients_all * 1000 / burst, fast.client_cpu_s * 1000 / burst,
      fast.daemon_cpu_s + fast.munged_cpu_s + clients_all, fast.wall_s,
      sysconf(_SC_NPROCESSORS_ONLN));
  print_latency("burst compose latency", fast.ms);

  // Phase 2b: the burst again, the clients' own work done before the instant (ready_burst).
  const long released = release_burst(daemon, burst, 5'000'000);
  const std::string before = scrape(daemon);
  const double writes_before = metric(before, "composer_store_write_calls_total");
  const double commits_before = metric(before, "composer_store_transactions_total");
  const Burst ready = ready_burst(daemon, burst, 5'100'000);
  const std::string after = scrape(daemon);
  const double writes = metric(after, "composer_store_write_calls_total") - writes_before;
  const double commits = metric(after, "composer_store_transactions_total") - commits_before;
  print_ready_burst("ready burst (connections open, credentials encoded before the instant)", ready,
                    burst, released, "the first burst", "clients inside their requests");
  std::printf("ready burst store writes: %.0f changes in %.0f transactions, %.1f per transaction\n",
              writes, commits, commits > 0 ? writes / commits : 0.0);
  print_latency("ready burst latency", ready.ms);
  const long released_ready = release_burst(daemon, burst, 5'100'000);
  const Burst loop = loop_burst(daemon, burst, 5'200'000);
  print_ready_burst("ready burst, the clients one epoll thread", loop, burst, released_ready,
                    "the ready burst", "the client thread");
  std::printf(
      "ready burst, the clients one epoll thread: composerd's CPU per compose by thread: %s\n",
      loop.thread_split.c_str());
  print_latency("ready burst, one client thread", loop.ms);

  // Phase 2d: munge alone and the one-thread burst back to back, five pairs: on a shared host
  // the machine's speed drifts between phases a minute apart (munge alone above was measured
  // first of all), and each pair's two figures are taken within a second of each other.
  long paired_errors = release_burst(daemon, burst, 5'200'000);
  {
    std::vector<double> ratios;
    for (int round = 1; round <= 5; ++round) {
      const uint32_t first = 5'200'000 + static_cast<uint32_t>(round) * 100'000;
      const auto [pairs, took] = munge_run(daemon.munge_socket(), std::min(burst, 64), burst, 0);
      const Burst b = loop_burst(daemon, burst, first);
      const double p99 = percentile(b.ms, 99);
      ratios.push_back(p99 / std::max(0.001, took * 1000));
      std::printf(
          "paired round %d: munge alone %ld credentials in %.1f ms, then the one-thread burst: "
          "p99 %.1f ms = %.2fx, composerd %.3f ms CPU per compose, %ld errors\n",
          round, pairs, took * 1000, p99, ratios.back(), b.daemon_cpu_s * 1000 / burst, b.errors);
      paired_errors += b.errors + release_burst(daemon, burst, first);
    }
    std::sort(ratios.begin(), ratios.end());
    std::printf(
        "paired rounds: one-thread burst p99 over munge alone %.2fx to %.2fx, median %.2fx\n",
        ratios.front(), ratios.back(), ratios[ratios.size() / 2]);
  }
  daemon.stop();

  // Phase 3: the same burst against a slow fabric, behind composerd's default ApiThreads.
  Burst slow;
  {
    const std::string slow_extra = std::string(durable ? "Durable=yes" : "Durable=no") +
                                   "\nLogLevel=warning\nSimLatency=" + std::to_string(latency_ms) +
                                   "\nMaxFabricOperations=" + std::to_string(in_flight) + "\n";
    // One node more than the burst needs, for the single compose before it.
    const int slow_nodes = (burst + 7) / 8 + 1;
    composer::testing::ComposerdProcess slow_daemon(slow_extra, pool_lines(slow_nodes));
    const auto one = compose_burst(slow_daemon, 1, 9'000'000, slow_nodes);
    slow = compose_burst(slow_daemon, burst, 9'100'000);
    std::printf(
        "slow fabric: %d ms per attach, MaxFabricOperations=%d, ApiThreads=64 (default): one "
        "compose %.2f s; a burst of %d concurrent composes %.2f s in all = %.2fx one operation, "
        "%ld errors\n",
        latency_ms, in_flight, one.wall_s, burst, slow.wall_s, slow.wall_s * 1000.0 / latency_ms,
        slow.errors + one.errors);
    print_latency("slow-fabric burst latency", slow.ms);
    slow.errors += one.errors;
  }
  // Phase 4: the same burst against a fabric that applies one change at a time.
  Burst serial;
  {
    const std::string serial_extra =
        std::string(durable ? "Durable=yes" : "Durable=no") +
        "\nLogLevel=warning\nSimLatency=" + std::to_string(latency_ms) + "\nSimSerialize=yes\n";
    composer::testing::ComposerdProcess serial_daemon(serial_extra, pool_lines((burst + 7) / 8));
    serial = compose_burst(serial_daemon, burst, 9'500'000);
    std::printf(
        "serialising fabric: %d ms per change, one change at a time: a burst of %d concurrent "
        "composes %.2f s in all (one after another: %.0f s), %.0f fabric changes (batches), "
        "%.0f single attaches, %ld errors\n",
        latency_ms, burst, serial.wall_s, burst * latency_ms / 1000.0,
        driver_calls(serial_daemon, "apply_batch"), driver_calls(serial_daemon, "attach"),
        serial.errors);
    print_latency("serialising-fabric burst", serial.ms);
  }
  const long burst_errors = fast.errors + ready.errors + released + loop.errors + released_ready +
                            paired_errors + slow.errors + serial.errors;
  return steady.errors == 0 && burst_errors == 0 ? 0 : 1;
}
