// Offline capacity planning: a job trace replayed through the allocator composerd runs
// (composer::core's Allocator) and the policy evaluation it enforces (composer::policies), on
// a cluster described in composer.conf's syntax, by a discrete-event model of Slurm's
// scheduler (priority FCFS with EASY backfill on time limits). docs/CAPACITY.md describes the
// model, the trace rules and the figures; every rule below is stated there too.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "composer/model/model.h"
#include "composer/policies/policy.h"
#include "composer/policies/time_zone.h"

namespace composer::simulate {

// ---- Clusters -------------------------------------------------------------------------------

// A cluster file: composer.conf's NodeName and DeviceGroup lines (a simulated fabric, read by
// composerd's own parser and built by its own fabric set-up) and FixedNode lines for servers
// with their own GPUs and memory:
//   FixedNode=gpu[01-64] Gpus=8 [GpuModel=V100] [Memory=1T] [MemBlock=4G]
// A fixed server is a host whose private zone holds its GPUs and its memory cut into MemBlock
// blocks (default 4G), with as many attach slots as it has devices: the allocator then serves
// it exactly as a server with its own devices.
struct Cluster {
  std::string name;  // the file as given
  std::vector<Host> hosts;
  std::vector<Device> devices;
  uint32_t fixed_servers = 0;
  uint64_t gpus = 0;
  uint64_t mem_bytes = 0;
};

inline constexpr uint64_t kDefaultFixedMemBlock = uint64_t{4} << 30;

// Refusals name the file, the line and the rule (composer.conf's sentences for its own lines).
Expected<Cluster> parse_cluster(std::string_view text, const std::string& path);
Expected<Cluster> load_cluster(const std::string& path);

// ---- Traces ---------------------------------------------------------------------------------

struct Job {
  int line = 0;          // in the trace file
  std::string id;        // JobID (sacct) or the line number (CSV)
  int64_t submit_s = 0;  // seconds since the epoch
  int64_t duration_s = 0;
  int64_t limit_s = 0;     // time limit; the duration when the trace gives none
  uint32_t gpus = 0;       // whole GPUs over all nodes
  uint64_t mem_bytes = 0;  // over all nodes
  uint32_t nodes = 0;      // 0: as few as the cluster allows (see docs/CAPACITY.md)
  std::string workload;    // --workload (CSV type, AdminComment workload=)
  std::string partition;
  std::string qos;
  std::string account;
  bool censored = false;
};

// What the trace rules did, counted (none of these rows is dropped without a count).
struct TraceCounts {
  uint64_t rows = 0;             // data rows read
  uint64_t jobs = 0;             // replayed
  uint64_t fractional_gpus = 0;  // rounded up to whole GPUs
  uint64_t no_gpus = 0;          // no GPU count given: 0 GPUs
  uint64_t no_memory = 0;        // no memory given: 0 bytes
  uint64_t no_time_limit = 0;    // no (or an unlimited) time limit: the duration
  uint64_t censored = 0;         // still running at the export: replayed for what it ran
  uint64_t no_duration = 0;      // never started or no duration: not replayed, counted
  uint64_t steps = 0;            // sacct job steps (123.batch): not jobs, counted
  bool operator==(const TraceCounts&) const = default;
};

struct Trace {
  std::string name;
  std::vector<Job> jobs;  // in submit order (stable)
  TraceCounts counts;
};

// The normalised CSV (contrib/simulate/traces/README.md): a header line
// submit_time_s,duration_s,gpus,mem_gb,cpus,type,wait_s,censored,extra. submit_time_s counts
// from `epoch_s`. A malformed row refuses the file: "FILE line N: FIELD='VALUE': rule".
Expected<Trace> parse_csv_trace(std::string_view text, const std::string& path, int64_t epoch_s);
// A trace's wall clock: YYYY-MM-DD[THH:MM[:SS]] (a space may stand for the T), in `zone`
// unless the text ends in Z or an offset (+02:00, -0500). Seconds since the epoch. Never the
// machine's local time: the same trace gives the same result under every TZ
// (SimulateTime.SameResultUnderEveryTz).
Expected<int64_t> parse_trace_time(std::string_view text, const policies::TimeZone& zone);

// sacct -a -P -o JobID,Submit,Start,End,Elapsed,Timelimit,ReqTRES,AllocTRES,Partition,Account,
// QOS,AdminComment,State (the header line names the columns; their order may differ). Times
// are read by parse_trace_time in `zone` (export with TZ=UTC, or name sacct's zone).
Expected<Trace> parse_sacct_trace(std::string_view text, const std::string& path,
                                  const policies::TimeZone& zone = policies::TimeZone::utc());
// Either form, by the header line. `epoch` (parse_trace_time's form, for the CSV's second 0)
// may be empty: then the first row's extra submitted= (minus its submit_time_s), else
// 1970-01-01 00:00 UTC. Times without an offset are in `zone`.
Expected<Trace> load_trace(const std::string& path, const std::string& epoch,
                           const policies::TimeZone& zone = policies::TimeZone::utc());

// ---- The simulation -------------------------------------------------------------------------

struct Options {
  // Jobs the scheduler examines per pass, like Slurm's bf_max_job_test.
  size_t max_job_test = 1000;
  // Length of one point of the use-over-time series (the charts); 0: a day, or an hour for
  // traces shorter than a week.
  int64_t series_step_s = 0;
  // Told how many jobs of how many have been submitted, every `progress_every` submits and
  // once at the end (composerctl's progress line).
  std::function<void(uint64_t submitted, uint64_t total)> progress;
  uint64_t progress_every = 16384;
};

struct WaitStats {
  std::string name;  // the class, or "all"
  uint64_t jobs = 0;
  double mean_s = 0;
  int64_t p50_s = 0;
  int64_t p95_s = 0;
  int64_t max_s = 0;
};

// Jobs that could never run on this cluster (with this policy), by reason.
struct NeverRunnable {
  std::string reason;  // a sentence for the first such job
  uint64_t jobs = 0;
  int first_line = 0;    // the first such job's line in the trace
  std::string first_id;  // and its id
};

// Busy devices over one series point, by class (device-seconds; memory in MiB-seconds).
struct SeriesPoint {
  int64_t start_s = 0;
  int64_t length_s = 0;
  std::map<std::string, int64_t> gpu_s_by_class;
  std::map<std::string, int64_t> mem_mib_s_by_class;
};

struct Result {
  std::string cluster;
  std::string policy;  // the policy file, empty: none
  std::string trace;
  uint64_t gpus = 0;  // installed
  uint64_t mem_bytes = 0;
  uint32_t hosts = 0;
  uint32_t fixed_servers = 0;
  TraceCounts counts;
  uint64_t jobs = 0;  // replayed
  uint64_t started = 0;
  uint64_t never_runnable = 0;
  std::vector<NeverRunnable> never;
  uint64_t backfilled = 0;  // started past a waiting job of higher priority
  int64_t first_submit_s = 0;
  int64_t last_end_s = 0;
  int64_t makespan_s = 0;  // last end - first submit
  // Device time from the busy devices integrated over time, and the same summed over jobs
  // (they are equal; the tests check it).
  int64_t gpu_s = 0;
  int64_t mem_mib_s = 0;
  int64_t job_gpu_s = 0;
  int64_t job_mem_mib_s = 0;
  // Stranded capacity, every kind side by side (docs/CAPACITY.md, "Definitions"):
  // fits nowhere now: free while a waiting job fits the free totals but finds no place;
  int64_t stranded_gpu_s = 0;
  int64_t stranded_mem_mib_s = 0;
  // idle while jobs wait: free while any job that asks for the type waits, for any reason
  // (no place, memory, a policy cap, the backfill reservation);
  int64_t idle_waiting_gpu_s = 0;
  int64_t idle_waiting_mem_mib_s = 0;
  // lost to block rounding: the blocks' capacity over what the jobs asked for, x duration.
  int64_t rounding_mem_mib_s = 0;
  int64_t asked_mem_mib_s = 0;      // what the jobs that ran asked for, x duration
  WaitStats wait;                   // over the jobs that ran
  double wait_gpu_weighted_s = 0;   // sum of GPUs x wait over the sum of GPUs
  std::vector<WaitStats> by_class;  // by name
  std::vector<WaitStats> by_size;   // by GPUs asked: 0, 1, 2-4, 5-8, 9-16, 17-64, 65+
  std::vector<SeriesPoint> series;
  // Busy device time and elapsed time per UTC weekday (0 = Monday) and hour, for the heat map.
  std::array<std::array<int64_t, 24>, 7> gpu_heat_s{};
  std::array<std::array<int64_t, 24>, 7> mem_heat_mib_s{};
  std::array<std::array<int64_t, 24>, 7> heat_s{};

  double gpu_utilisation() const;  // gpu_s / (gpus x makespan)
  double mem_utilisation() const;
  double gpu_hours() const { return static_cast<double>(gpu_s) / 3600.0; }
  double stranded_gpu_hours() const { return static_cast<double>(stranded_gpu_s) / 3600.0; }
  double stranded_mem_gib_hours() const {
    return static_cast<double>(stranded_mem_mib_s) / 1024.0 / 3600.0;
  }
  double idle_waiting_gpu_hours() const { return static_cast<double>(idle_waiting_gpu_s) / 3600.0; }
  double idle_waiting_mem_gib_hours() const {
    return static_cast<double>(idle_waiting_mem_mib_s) / 1024.0 / 3600.0;
  }
  double rounding_mem_gib_hours() const {
    return static_cast<double>(rounding_mem_mib_s) / 1024.0 / 3600.0;
  }
  // The blocks' capacity over what the jobs asked, minus 1 (0.52: 52% more); 0 without memory.
  double rounding_share() const {
    return asked_mem_mib_s == 0
               ? 0
               : static_cast<double>(rounding_mem_mib_s) / static_cast<double>(asked_mem_mib_s);
  }
};

// One job as the scheduler saw it (for tests and --jobs output).
struct JobOutcome {
  std::string id;
  std::string workload_class;
  int64_t start_s = -1;  // -1: never ran
  int64_t end_s = -1;
  uint32_t gpus = 0;       // allocated
  uint64_t mem_bytes = 0;  // allocated (whole blocks)
  std::vector<std::string> nodes;
};

// Replays `trace` on `cluster`, under `policy` when given (its time zone, windows, classes and
// caps; job classes derived as job_submit derives them). kInvalidArgument for a policy that
// does not validate against the cluster's pool.
Expected<Result> run(const Cluster& cluster, const Trace& trace,
                     const policies::Policy* policy = nullptr, const Options& options = {},
                     std::vector<JobOutcome>* outcomes = nullptr);

// The SVG charts of a result, drawn by composer/accounting's report_chart.h (use over time by
// class, weekday x hour heat map), in the trace's time.
std::string result_svg(const Result& result);

}  // namespace composer::simulate
