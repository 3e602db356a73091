// Job traces: the normalised CSV and sacct's parsable export, read by the rules of
// docs/CAPACITY.md ("Trace rules"). A malformed row refuses the whole file with its line and
// field; everything a rule changes is counted.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/config/conf_file.h"
#include "composer/policies/time_zone.h"
#include "composer/simulate/simulate.h"

namespace composer::simulate {
namespace {

constexpr const char* kCsvHeader =
    "submit_time_s,duration_s,gpus,mem_gb,cpus,type,wait_s,censored,extra";
const std::vector<std::string> kSacctColumns = {
    "JobID",     "Submit",    "Start",   "End", "Elapsed",      "Timelimit", "ReqTRES",
    "AllocTRES", "Partition", "Account", "QOS", "AdminComment", "State"};

Error bad(const std::string& path, int line, const std::string& field, std::string_view value,
          const std::string& rule) {
  return config::at(path, line, field + "='" + printable(value) + "': " + rule);
}

std::optional<int64_t> whole(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// A non-negative decimal number ("4", "0.5", "12.25").
std::optional<double> decimal(std::string_view s) {
  if (s.empty() || s.front() == '+' || s.front() == '-') return std::nullopt;
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v) || v < 0) {
    return std::nullopt;
  }
  return v;
}

void sort_by_submit(Trace& t) {
  std::stable_sort(t.jobs.begin(), t.jobs.end(),
                   [](const Job& a, const Job& b) { return a.submit_s < b.submit_s; });
  t.counts.jobs = t.jobs.size();
}

// GPUs as a trace gives them: whole or fractional (rounded up, counted).
std::optional<uint32_t> gpu_count(std::string_view s, TraceCounts& counts) {
  auto v = decimal(s);
  if (!v || *v > 1e6) return std::nullopt;
  const double up = std::ceil(*v);
  if (up != *v) ++counts.fractional_gpus;
  return static_cast<uint32_t>(up);
}

// Two digits or more, as a number, from text[i]; advances i.
std::optional<int> digits(std::string_view text, size_t& i, size_t n) {
  if (i + n > text.size()) return std::nullopt;
  int v = 0;
  for (size_t k = 0; k < n; ++k) {
    const char c = text[i + k];
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  i += n;
  return v;
}

}  // namespace

Expected<int64_t> parse_trace_time(std::string_view text, const policies::TimeZone& zone) {
  const auto refuse = [&]() -> Error {
    return Error{ErrorCode::kInvalidArgument,
                 "'" + printable(text) +
                     "' is not a time; expected YYYY-MM-DD[THH:MM[:SS]] (a space may stand for "
                     "the T), optionally ending in Z or an offset such as +02:00"};
  };
  size_t i = 0;
  policies::CivilTime c;
  auto year = digits(text, i, 4);
  if (!year || i >= text.size() || text[i++] != '-') return refuse();
  auto month = digits(text, i, 2);
  if (!month || i >= text.size() || text[i++] != '-') return refuse();
  auto day = digits(text, i, 2);
  if (!day) return refuse();
  c.year = *year;
  c.month = *month;
  c.day = *day;
  if (i < text.size() && (text[i] == 'T' || text[i] == ' ')) {
    ++i;
    auto hour = digits(text, i, 2);
    if (!hour || i >= text.size() || text[i++] != ':') return refuse();
    auto minute = digits(text, i, 2);
    if (!minute) return refuse();
    c.hour = *hour;
    c.minute = *minute;
    if (i < text.size() && text[i] == ':') {
      ++i;
      auto second = digits(text, i, 2);
      if (!second) return refuse();
      c.second = *second;
    }
  }
  if (c.month < 1 || c.month > 12 || c.day < 1 || c.hour > 23 || c.minute > 59 || c.second > 59) {
    return refuse();
  }
  const int64_t days = policies::days_from_civil(c.year, c.month, c.day);
  if (policies::civil_from_days(days).day != c.day) return refuse();  // 2024-02-30
  const int64_t wall = days * 86400 + int64_t{c.hour} * 3600 + int64_t{c.minute} * 60 + c.second;
  if (i == text.size()) {
    return zone.to_utc(c);
  }
  if (text[i] == 'Z' && i + 1 == text.size()) return wall;
  if (text[i] != '+' && text[i] != '-') return refuse();
  const int sign = text[i++] == '+' ? 1 : -1;
  auto oh = digits(text, i, 2);
  if (!oh) return refuse();
  if (i < text.size() && text[i] == ':') ++i;
  auto om = digits(text, i, 2);
  if (!om || i != text.size() || *oh > 23 || *om > 59) return refuse();
  return wall - sign * (int64_t{*oh} * 3600 + int64_t{*om} * 60);
}

Expected<Trace> parse_csv_trace(std::string_view text, const std::string& path, int64_t epoch_s) {
  Trace t;
  t.name = path;
  const std::vector<std::string> lines = split(text, '\n');
  if (lines.empty() || trim(lines[0]) != kCsvHeader) {
    return config::at(path, 1, std::string("expected the header line ") + kCsvHeader);
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const int n = static_cast<int>(i + 1);
    const std::string_view row = trim(lines[i]);
    if (row.empty()) continue;
    std::vector<std::string> f = split(row, ',');
    if (f.size() != 9) {
      return config::at(path, n,
                        "expected 9 comma-separated fields (" + std::string(kCsvHeader) +
                            "), found " + std::to_string(f.size()));
    }
    ++t.counts.rows;
    Job j;
    j.line = n;
    j.id = "line" + std::to_string(n);
    auto submit = whole(f[0]);
    if (!submit || *submit < 0) {
      return bad(path, n, "submit_time_s", f[0], "expected whole seconds from 0");
    }
    j.submit_s = epoch_s + *submit;
    if (f[1].empty()) {
      ++t.counts.no_duration;
      continue;
    }
    auto duration = whole(f[1]);
    if (!duration || *duration < 0) {
      return bad(path, n, "duration_s", f[1], "expected whole seconds from 0");
    }
    j.duration_s = *duration;
    j.limit_s = *duration;
    ++t.counts.no_time_limit;
    if (f[2].empty()) {
      ++t.counts.no_gpus;
    } else {
      auto g = gpu_count(f[2], t.counts);
      if (!g) return bad(path, n, "gpus", f[2], "expected a number of GPUs from 0");
      j.gpus = *g;
    }
    if (f[3].empty()) {
      ++t.counts.no_memory;
    } else {
      auto gb = decimal(f[3]);
      if (!gb || *gb > 1024.0 * 1024) {
        return bad(path, n, "mem_gb", f[3], "expected GiB from 0 to 1048576");
      }
      j.mem_bytes = static_cast<uint64_t>(std::ceil(*gb * 1024)) * kMiB;
    }
    if (!f[4].empty() && !decimal(f[4])) {
      return bad(path, n, "cpus", f[4], "expected a number of CPUs from 0");
    }
    j.workload = f[5];
    if (!f[6].empty() && !decimal(f[6])) {
      return bad(path, n, "wait_s", f[6], "expected seconds from 0");
    }
    if (f[7] == "1") {
      j.censored = true;
      ++t.counts.censored;
    } else if (!f[7].empty() && f[7] != "0") {
      return bad(path, n, "censored", f[7], "expected 0 or 1");
    }
    t.jobs.push_back(std::move(j));
  }
  sort_by_submit(t);
  return t;
}

namespace {

struct Tres {
  uint32_t gpus = 0;
  bool gpus_given = false;
  bool fractional = false;
  uint64_t mem_bytes = 0;
  bool mem_given = false;
  uint32_t nodes = 0;
};

// "billing=8,cpu=8,gres/gpu=2,mem=64G,node=1,license/fabric_gpu=4": the TRES names Slurm
// writes. Typed GPU counts (gres/gpu:a100=2) are covered by the untyped one Slurm writes
// beside them.
Expected<Tres> parse_tres(std::string_view text) {
  Tres out;
  if (trim(text).empty()) return out;
  for (const std::string& item : split(text, ',', {.trim = true, .skip_empty = true})) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      return Error{ErrorCode::kInvalidArgument, "'" + item + "' is not NAME=VALUE"};
    }
    const std::string name = lower(item.substr(0, eq));
    const std::string value = item.substr(eq + 1);
    const auto count = [&]() -> Expected<uint32_t> {
      TraceCounts c;
      auto g = gpu_count(value, c);
      if (!g) {
        return Error{ErrorCode::kInvalidArgument, "'" + item + "': expected a count from 0"};
      }
      out.fractional |= c.fractional_gpus > 0;
      return *g;
    };
    if (name == "gres/gpu" || name == "gres/cgpu" || name == "license/fabric_gpu") {
      auto n = count();
      if (!n) return n.error();
      out.gpus += *n;
      out.gpus_given = true;
    } else if (name == "mem" || name == "license/fabric_mem") {
      auto size =
          name == "mem"
              ? parse_size(value, ZeroSize::kNone)
              : Expected<uint64_t>(whole(value) ? static_cast<uint64_t>(*whole(value)) * kGiB
                                                : uint64_t{0});
      if (!size || (name != "mem" && !whole(value))) {
        return Error{ErrorCode::kInvalidArgument,
                     "'" + item + "': expected a size such as 64G (license: whole GiB)"};
      }
      out.mem_bytes += *size;
      out.mem_given = true;
    } else if (name == "node") {
      auto n = whole(value);
      if (!n || *n < 1 || *n > 100000) {
        return Error{ErrorCode::kInvalidArgument,
                     "'" + item + "': expected a node count from 1 to 100000"};
      }
      out.nodes = static_cast<uint32_t>(*n);
    } else if (name == "cpu" || name == "billing" || name == "energy" || name == "vmem" ||
               name == "pages" || name.starts_with("gres/") || name.starts_with("license/") ||
               name.starts_with("fs/") || name.starts_with("bb/") || name.starts_with("ic/")) {
      // Not modelled: CPUs, billing, other GRES and licenses, file systems, burst buffers.
    } else {
      return Error{ErrorCode::kInvalidArgument,
                   "unknown TRES '" + item.substr(0, eq) +
                       "' (known: cpu, mem, node, billing, energy, vmem, pages, gres/..., "
                       "license/..., fs/..., bb/..., ic/...)"};
    }
  }
  return out;
}

// The words of job_submit's admin comment: "composer: gpus=2 mem=64G workload=training".
std::string comment_workload(std::string_view comment) {
  for (const std::string& word : split(comment, ' ', {.trim = true, .skip_empty = true})) {
    std::string w = word;
    while (!w.empty() && (w.back() == ';' || w.back() == ',')) w.pop_back();
    if (w.starts_with("workload=")) return w.substr(9);
  }
  return "";
}

}  // namespace

Expected<Trace> parse_sacct_trace(std::string_view text, const std::string& path,
                                  const policies::TimeZone& zone) {
  Trace t;
  t.name = path;
  const std::vector<std::string> lines = split(text, '\n');
  std::map<std::string, size_t> col;
  if (!lines.empty()) {
    const std::vector<std::string> header = split(trim(lines[0]), '|');
    for (size_t i = 0; i < header.size(); ++i) col[lower(header[i])] = i;
  }
  for (const std::string& c : kSacctColumns) {
    if (!col.contains(lower(c))) {
      return config::at(path, 1,
                        "the header line lacks " + c + "; export with sacct -a -P -o " +
                            join(kSacctColumns, ","));
    }
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const int n = static_cast<int>(i + 1);
    const std::string_view row = trim(lines[i]);
    if (row.empty()) continue;
    const std::vector<std::string> f = split(row, '|');
    if (f.size() < col.size()) {
      return config::at(path, n,
                        "expected " + std::to_string(col.size()) + " '|'-separated fields, found " +
                            std::to_string(f.size()));
    }
    auto get = [&](const char* name) -> const std::string& { return f[col.at(lower(name))]; };
    ++t.counts.rows;
    Job j;
    j.line = n;
    j.id = get("JobID");
    if (j.id.find('.') != std::string::npos) {
      ++t.counts.steps;
      continue;
    }
    auto time_of = [&](const char* field) -> Expected<std::optional<int64_t>> {
      const std::string& v = get(field);
      if (v.empty() || iequals(v, "Unknown") || iequals(v, "None")) {
        return std::optional<int64_t>{};
      }
      auto at = parse_trace_time(v, zone);
      if (!at) return bad(path, n, field, v, at.error().message);
      return std::optional<int64_t>{*at};
    };
    auto submit = time_of("Submit");
    if (!submit) return submit.error();
    if (!*submit) return bad(path, n, "Submit", get("Submit"), "every job has a submit time");
    auto start = time_of("Start");
    if (!start) return start.error();
    auto end = time_of("End");
    if (!end) return end.error();
    j.submit_s = **submit;
    auto elapsed = parse_slurm_duration(get("Elapsed"));
    if (!elapsed) return bad(path, n, "Elapsed", get("Elapsed"), elapsed.error().message);
    auto limit = parse_slurm_duration(get("Timelimit"));
    if (!limit) return bad(path, n, "Timelimit", get("Timelimit"), limit.error().message);
    const std::string state = lower(get("State"));
    if (!*start) {
      ++t.counts.no_duration;  // never started (pending, or cancelled while pending)
      continue;
    }
    if (*end) {
      j.duration_s = std::max<int64_t>(0, **end - **start);
    } else if (*elapsed) {
      j.duration_s = **elapsed;
    } else {
      ++t.counts.no_duration;
      continue;
    }
    if (!*end || state.starts_with("running") || state.starts_with("suspended")) {
      j.censored = true;
      ++t.counts.censored;
    }
    if (*limit) {
      j.limit_s = std::max(**limit, j.duration_s);
    } else {
      j.limit_s = j.duration_s;
      ++t.counts.no_time_limit;
    }
    // What the job got, else what it asked for.
    const bool alloc = !trim(get("AllocTRES")).empty();
    const char* field = alloc ? "AllocTRES" : "ReqTRES";
    auto tres = parse_tres(get(field));
    if (!tres) return config::at(path, n, std::string(field) + ": " + tres.error().message);
    if (tres->fractional) ++t.counts.fractional_gpus;
    if (!tres->gpus_given) ++t.counts.no_gpus;
    if (!tres->mem_given) ++t.counts.no_memory;
    j.gpus = tres->gpus;
    j.mem_bytes = tres->mem_bytes;
    j.nodes = tres->nodes;
    j.partition = get("Partition");
    j.account = get("Account");
    j.qos = get("QOS");
    j.workload = comment_workload(get("AdminComment"));
    t.jobs.push_back(std::move(j));
  }
  sort_by_submit(t);
  return t;
}

Expected<Trace> load_trace(const std::string& path, const std::string& epoch,
                           const policies::TimeZone& zone) {
  auto text = config::read_file(path);
  if (!text) return text.error();
  const std::string_view first = trim(std::string_view(*text).substr(0, text->find('\n')));
  if (first.find('|') != std::string_view::npos) return parse_sacct_trace(*text, path, zone);
  int64_t epoch_s = 0;
  if (!epoch.empty()) {
    auto at = parse_trace_time(epoch, zone);
    if (!at) return Error{ErrorCode::kInvalidArgument, "--start: " + at.error().message};
    epoch_s = *at;
  } else {
    // The first row's wall clock, when its extra field carries one (submitted=...).
    const std::vector<std::string> lines = split(*text, '\n', {.skip_empty = true});
    if (lines.size() > 1) {
      const std::vector<std::string> f = split(lines[1], ',');
      const auto at = f.size() > 8 ? f[8].find("submitted=") : std::string::npos;
      if (at != std::string::npos) {
        const std::string when = split(f[8].substr(at + 10), ';').front();
        auto wall = parse_trace_time(when, zone);
        if (!wall) return config::at(path, 2, "extra: submitted=" + wall.error().message);
        auto offset = whole(f[0]);
        if (offset) epoch_s = *wall - *offset;
      }
    }
  }
  return parse_csv_trace(*text, path, epoch_s);
}

}  // namespace composer::simulate
