// Accounting reports computed from the event ledger alone (plus the device inventory, for the
// pool's size): utilisation of each pooled type and model, usage by workload class, account,
// user and job, and the fabric's latency and failures.
//
// Time is kept in integer milliseconds of device time ("device-ms") so that every grouping adds
// up exactly: the attached device-ms of all workload classes, of all accounts, of all users and
// of all jobs each equal the attached device-ms of the pool. Everything is clipped to the
// report's range [start, end): a composition that straddles an edge counts only its part inside.
//
// What the ledger says about a device, and how a report reads it:
//  - a device is attached from its composition's first event ("requested") until the event that
//    ends the composition ("released" or "failed"): the time the pool could not give it to
//    anyone else, which is what the pool summary shows as attached;
//  - "drain"/"resume" events set and clear the drain flag; "health" events to or from
//    "critical" set and clear failed;
//  - every moment of every device falls in exactly one category, the first that applies:
//    attached, failed, drained, idle. Attached wins, because a job used that time.
// The pool over time is today's inventory (devices are never deleted from the store), each
// device counted from when composerd first knew it (Device::known_since_ms): before that it
// is in no category, so it adds nothing to any total, slot, heat map cell or series point, and
// an hour in which composerd knew no device of a type shows nothing available.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "composer/model/model.h"

namespace composer::accounting {

inline constexpr int64_t kHourMs = int64_t{3600} * 1000;
// The longest range one report covers: a bit more than ten years of hourly buckets.
inline constexpr int64_t kMaxRangeMs = int64_t{3660} * 24 * kHourMs;
inline constexpr size_t kMaxTopJobs = 1000;

struct ReportOptions {
  int64_t start_ms = 0;  // inclusive
  int64_t end_ms = 0;    // exclusive; clamped to now_ms (a report does not cover the future)
  int64_t now_ms = 0;    // compositions still live are counted up to min(end_ms, now_ms)
  size_t top_jobs = 10;  // how many jobs the top-jobs list keeps
  // Set for a caller who may see only their own jobs: usage groupings, top jobs, latency and
  // failures then cover only that uid's compositions; pool utilisation stays pool-wide.
  std::optional<uint32_t> only_uid{};
};

// Refuses a range that is empty, backwards, in the future, negative or too long, with a
// sentence saying which and what is allowed.
Status validate(const ReportOptions& options);

// Device-ms of one pool slice in each category; total = attached + idle + drained + failed.
struct Usage {
  int64_t attached_ms = 0;
  int64_t idle_ms = 0;
  int64_t drained_ms = 0;
  int64_t failed_ms = 0;

  int64_t total_ms() const { return attached_ms + idle_ms + drained_ms + failed_ms; }
  int64_t available_ms() const { return attached_ms + idle_ms; }
  // attached / available; 0 when nothing was available.
  double share_attached() const;
  Usage& operator+=(const Usage& o);
  bool operator==(const Usage&) const = default;
};

// Utilisation of one pooled type and model over the whole range.
struct PoolUsage {
  std::string type;  // "gpu", "mem", "nvme"
  std::string model;
  uint32_t devices = 0;         // of today's inventory, those known before the range's end
  uint64_t capacity_bytes = 0;  // of those devices
  Usage usage;
};

// Utilisation of one pooled type in a slice of time: an hour of the day (0..23, summed over
// every day of the range) or one local calendar day ("YYYY-MM-DD").
struct SlotUsage {
  std::string type;
  std::string slot;
  Usage usage;
};

// Attached and available device-ms of one type, per weekday (0 = Monday) and hour of day.
struct HeatMap {
  std::string type;
  std::array<std::array<int64_t, 24>, 7> attached_ms{};
  std::array<std::array<int64_t, 24>, 7> available_ms{};
};

// One point of the usage-over-time series of one type: device-ms attached by each workload
// class and available, over [start_ms, start_ms + length_ms).
struct SeriesPoint {
  int64_t start_ms = 0;
  int64_t length_ms = 0;
  int64_t available_ms = 0;
  std::map<std::string, int64_t> attached_ms_by_class;
};
struct Series {
  std::string type;
  std::vector<SeriesPoint> points;
  std::string unit;  // what one unit of the y axis is ("GPUs", "GiB"); empty: devices
};

// Device-ms per pooled type, in kAllDeviceTypes order (gpu, mem, nvme).
using TypeMs = std::array<int64_t, 3>;

// Usage of one workload class, account or user.
struct GroupUsage {
  std::string name;  // "" when the jobs gave none
  TypeMs device_ms{};
  double mem_gib_hours = 0;  // capacity of the memory blocks held x time
  uint32_t jobs = 0;         // distinct Slurm jobs
  uint32_t compositions = 0;

  int64_t total_device_ms() const { return device_ms[0] + device_ms[1] + device_ms[2]; }
};

struct JobUsage {
  uint32_t job_id = 0;
  std::string user;
  std::string account;
  std::string workload;
  uint32_t compositions = 0;  // one per node
  TypeMs device_ms{};
  double mem_gib_hours = 0;

  int64_t total_device_ms() const { return device_ms[0] + device_ms[1] + device_ms[2]; }
};

// What one workload class held under one policy window: each composition counts under the
// window recorded when it was composed (the ledger's policy_window), for all of its time in the
// range. peak_devices is the most devices of each type the class held at once under that
// window, to set against the window's cap. Pool-wide, like the utilisation.
struct WindowUsage {
  std::string window;
  std::string workload;
  TypeMs device_ms{};
  std::array<uint32_t, 3> peak_devices{};
  uint32_t compositions = 0;
  // The class's cap in this window under the policy version Report::caps_policy_id (GPUs and
  // NVMe drives in devices, memory in GiB), nullopt where that version does not cap the type
  // or does not know the class or window. Filled by composerd, not by ReportBuilder.
  std::array<std::optional<uint64_t>, 3> cap{};
};

// Percentiles by nearest rank over the compositions whose phase ended inside the range:
// "compose" is request to ready, "release" is release to free (releasing to released).
struct Latency {
  std::string phase;
  uint64_t count = 0;
  int64_t p50_ms = 0;
  int64_t p90_ms = 0;
  int64_t p99_ms = 0;
  int64_t max_ms = 0;
  double mean_ms = 0;
};

// Compositions that failed inside the range, by the state they failed from and the cause (the
// event's detail with every run of digits shown as N, so job ids and timings do not split one
// cause into many).
struct Failure {
  std::string phase;
  std::string cause;
  uint32_t count = 0;
};

struct Report {
  int64_t start_ms = 0;
  int64_t end_ms = 0;     // after clamping to now
  std::string time_zone;  // of the hour-of-day, day and weekday slots
  // The charts' heading (empty: "Composable pool use") and sentences under it.
  std::string title;
  std::vector<std::string> notes;
  bool restricted = false;  // groupings cover only the caller's own jobs

  std::vector<PoolUsage> pools;    // by type, then model
  std::vector<SlotUsage> by_hour;  // by type, then hour 00..23
  std::vector<SlotUsage> by_day;   // by type, then day
  std::vector<HeatMap> heat_maps;  // one per type in the inventory
  std::vector<Series> series;      // one per type in the inventory

  std::vector<GroupUsage> by_workload;  // most device-ms first, then by name
  std::vector<GroupUsage> by_account;
  std::vector<GroupUsage> by_user;
  std::vector<JobUsage> top_jobs;  // most device-ms first, then by job id
  uint32_t jobs = 0;               // distinct jobs with compositions in the range
  uint32_t compositions = 0;

  // One row per window and class, by window then class. windows_recorded is false when no
  // composition in the range was made under a policy (the rows then show window "").
  bool windows_recorded = false;
  std::vector<WindowUsage> by_window;
  // The policy version the windows' caps come from: the one in force at the range's end (the
  // newest applied before it); 0 when none was, and then no row has a cap.
  int64_t caps_policy_id = 0;

  std::vector<Latency> latency;   // "compose", then "release"
  std::vector<Failure> failures;  // most first

  uint64_t events_read = 0;
  // Events about compositions whose start the ledger does not show, or about devices that
  // are not in the inventory: counted here and otherwise left out, never guessed.
  uint64_t events_ignored = 0;
};

// Feed events in ledger order (ts_ms, then id), then call finish() once. Events before the
// range only set the state in force at its start (which compositions hold which devices,
// which devices are drained or failed); events at or after the end are ignored. The store's
// scan_events() delivers exactly what is needed.
class ReportBuilder {
 public:
  ReportBuilder(const std::vector<Device>& inventory, const ReportOptions& options);
  ~ReportBuilder();
  ReportBuilder(const ReportBuilder&) = delete;
  ReportBuilder& operator=(const ReportBuilder&) = delete;

  void add(const Event& event);
  // The same report from the ledger's rollup (Store::walk_report, which calls these in ledger
  // order among the events it hands to add()): an ended composition in place of its events,
  // begun at its first event's place and ended at its end event's (end() is not called for a
  // composition whose first event is its end); and `n` events of the range that concern no
  // composition and no device, read and left out.
  void begin(const CompositionRollup& composition);
  void end(const CompositionRollup& composition);
  void add_unattached(uint64_t n);
  Report finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// validate() then build from a list of events already in ledger order.
Expected<Report> build_report(const std::vector<Device>& inventory,
                              const std::vector<Event>& events, const ReportOptions& options);

}  // namespace composer::accounting
