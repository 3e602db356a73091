// The charts of a simulation, drawn by composer/accounting's chart code from a Report built
// out of the result: one series point per step, stacked by workload class, and the weekday x
// hour heat map (UTC).

#include "composer/accounting/report.h"
#include "composer/accounting/report_chart.h"
#include "composer/common/units.h"
#include "composer/simulate/simulate.h"

namespace composer::simulate {

std::string result_svg(const Result& r) {
  accounting::Report report;
  report.start_ms = r.first_submit_s * 1000;
  report.end_ms = (r.first_submit_s + r.makespan_s) * 1000;
  report.time_zone = "UTC";
  // Every chart says which cluster and policy it shows: compare writes one per scenario.
  report.title = (r.fixed_servers == r.hosts ? "Fixed servers " : "Cluster ") + r.cluster +
                 (r.policy.empty() ? ", no policy" : ", policy " + r.policy);
  report.notes.push_back("GPUs in GPUs, memory in GiB; trace " + r.trace);
  const bool no_memory = r.job_mem_mib_s == 0;
  if (no_memory && r.mem_bytes > 0) {
    report.notes.push_back("The trace asks for no memory: no memory chart (" +
                           std::to_string(r.counts.no_memory) + " of " +
                           std::to_string(r.counts.rows) + " rows give none).");
  }
  const int64_t mem_mib = static_cast<int64_t>(r.mem_bytes / kMiB);
  // Memory is drawn in GiB: MiB-seconds / 1024 as GiB-seconds.
  const struct {
    const char* type;
    int64_t installed;
    bool gpu;
  } kinds[] = {{"gpu", static_cast<int64_t>(r.gpus), true}, {"mem", mem_mib / 1024, false}};
  for (const auto& k : kinds) {
    if (k.installed == 0 || (!k.gpu && no_memory)) continue;
    accounting::Series series;
    series.type = k.type;
    series.unit = k.gpu ? "GPUs" : "GiB";
    for (const SeriesPoint& p : r.series) {
      accounting::SeriesPoint q;
      q.start_ms = p.start_s * 1000;
      q.length_ms = p.length_s * 1000;
      q.available_ms = k.installed * q.length_ms;
      for (const auto& [cls, v] : k.gpu ? p.gpu_s_by_class : p.mem_mib_s_by_class) {
        q.attached_ms_by_class[cls.empty() ? "(none)" : cls] = k.gpu ? v * 1000 : v * 1000 / 1024;
      }
      series.points.push_back(std::move(q));
    }
    report.series.push_back(std::move(series));
    accounting::HeatMap heat;
    heat.type = k.type;
    for (size_t d = 0; d < 7; ++d) {
      for (size_t h = 0; h < 24; ++h) {
        heat.attached_ms[d][h] =
            k.gpu ? r.gpu_heat_s[d][h] * 1000 : r.mem_heat_mib_s[d][h] * 1000 / 1024;
        heat.available_ms[d][h] = k.installed * r.heat_s[d][h] * 1000;
      }
    }
    report.heat_maps.push_back(std::move(heat));
  }
  return accounting::report_svg(report);
}

}  // namespace composer::simulate
