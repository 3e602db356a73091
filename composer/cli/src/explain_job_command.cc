#include "composer/cli/explain_job_command.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <sstream>
#include <utility>

#include "composer/api/codec.h"
#include "composer/cli/composerctl.h"
#include "composer/common/slurm_text.h"
#include "composer/common/strings.h"
#include "composer/common/subprocess.h"
#include "composer/common/units.h"
#include "composer/policies/policy.h"

namespace composer::cli {

namespace pol = composer::policies;

namespace {

constexpr char kProgram[] = "composerctl";
// scontrol answers from slurmctld's memory; a minute means slurmctld is stuck, not busy.
constexpr int kScontrolTimeoutMs = 60000;

Error bad_job(const std::string& why) { return Error{ErrorCode::kInvalidArgument, why}; }

// A license's name without the server of a remote license: "fabric_gpu@composer" ->
// "fabric_gpu" (SlurmLicenses=remote).
std::string_view plain_license(std::string_view name) { return name.substr(0, name.find('@')); }

// The pool type whose license this is (fabric_gpu, ... or fabric_gpu@SERVER), if it is one.
std::optional<DeviceType> pool_license_type(std::string_view name) {
  name = plain_license(name);
  for (DeviceType t : kAllDeviceTypes)
    if (pol::pool_license_name(t) == name) return t;
  return std::nullopt;
}

// "2 GPUs", "1 memory device", "3 NVMe drives": what the pool counts (memory by device, not
// by GiB as its license does).
std::string devices(DeviceType t, uint64_t n) {
  if (t == DeviceType::kMem)
    return std::to_string(n) + (n == 1 ? " memory device" : " memory devices");
  return pol::format_amount(t, n);
}

// The GPU models whose license (policies::model_license_name) this is; empty for any other.
std::vector<std::string> license_models(std::string_view name, const std::vector<PoolRow>& pool) {
  std::vector<std::string> models;
  for (const PoolRow& r : pool) {
    if (r.type != DeviceType::kGpu || r.model.empty() || pol::model_license_name(r.model) != name)
      continue;
    if (std::find(models.begin(), models.end(), r.model) == models.end()) models.push_back(r.model);
  }
  return models;
}

// For a pool license (`models` empty) the pool's devices of type `t`; for a model license the
// GPUs of its models.
std::string pool_why(DeviceType t, const std::vector<std::string>& models, const LicenseVerdict& v,
                     const LicenseUse& use, const std::vector<PoolRow>& pool) {
  PoolRow sum;
  for (const PoolRow& r : pool) {
    if (r.type != t) continue;
    if (!models.empty() && std::find(models.begin(), models.end(), r.model) == models.end())
      continue;
    sum.total += r.total;
    sum.free += r.free;
    sum.attached += r.attached;
    sum.drained += r.drained;
    sum.failed += r.failed;
    sum.foreign += r.foreign;
    sum.total_bytes += r.total_bytes;
    sum.schedulable_bytes += r.schedulable_bytes;
  }
  std::string s;
  if (sum.total == 0) {
    const char* none[] = {"GPUs", "memory devices", "NVMe drives"};
    s = "composerd's pool has no " + std::string(none[static_cast<size_t>(t)]);
  } else {
    s = "the pool's " + devices(t, sum.total);
    if (!models.empty()) s += " of model " + and_list(models);
    if (t == DeviceType::kMem)
      s += " (" + std::to_string(gib_rounded_down(sum.total_bytes)) + " GiB)";
    std::vector<std::string> parts;
    for (auto [n, what] : {std::pair{sum.drained, "drained"}, std::pair{sum.failed, "failed"},
                           std::pair{sum.foreign, "foreign"}}) {
      if (n > 0) parts.push_back(std::to_string(n) + " " + what);
    }
    if (parts.empty()) parts.emplace_back("none drained, failed or foreign");
    parts.push_back(std::to_string(sum.attached) + " attached to other jobs");
    parts.push_back(std::to_string(sum.free) + " free");
    s += ": " + and_list(parts);
    if (t == DeviceType::kMem && sum.total_bytes > sum.schedulable_bytes) {
      s += " (" + std::to_string(gib_rounded_up(sum.total_bytes - sum.schedulable_bytes)) +
           " GiB out of service)";
    }
  }
  if (!v.holds) {
    return s + "; " + std::to_string(use.available()) + " free in Slurm covers the " +
           std::to_string(v.asked) + " asked";
  }
  s += ". Of Slurm's " + std::to_string(use.total) + ", ";
  if (use.reserved > 0) {
    s += std::to_string(use.reserved) + " are reserved (composerd's " + pol::hold_name(v.license) +
         " keeps back what the pool cannot serve) and ";
  }
  return s + std::to_string(use.used) + " are used by running jobs, which leaves " +
         std::to_string(use.available()) + " for the " + std::to_string(v.asked) + " asked";
}

std::string cap_why(const std::string& cls, DeviceType t, const LicenseVerdict& v,
                    const LicenseUse& use,
                    const std::optional<Expected<api::PolicyExplanation>>& policy) {
  const auto amount = [t](uint64_t n) { return pol::format_amount(t, n); };
  if (!v.holds) {
    return amount(use.available()) + " free under the " + cls + " cap covers the " +
           std::to_string(v.asked) + " asked";
  }
  std::string s = "the policy caps all " + cls + " jobs together through " + v.license +
                  ": of Slurm's " + std::to_string(use.total) + ", ";
  if (use.reserved > 0) {
    s += std::to_string(use.reserved) + " are reserved by composerd for the policy (" +
         pol::hold_name(v.license) +
         " above the class's highest cap, blocker reservations in windows with a lower cap) "
         "and ";
  }
  s += std::to_string(use.used) + " are used by running " + cls + " jobs, which leaves " +
       std::to_string(use.available()) + " for the " + std::to_string(v.asked) + " asked. ";
  if (!policy) {
    return s + "The job has no time limit, so composerd's policy cannot say when it could start";
  }
  if (!*policy) return s + "composerd's policy: " + policy->error().message;
  const api::PolicyExplanation& e = **policy;
  if (e.admitted) {
    return s + e.explanation + " It waits for running " + cls + " jobs to end";
  }
  std::string out = s + e.explanation;
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

std::string other_why(const LicenseVerdict& v, const LicenseUse& use) {
  if (!v.holds) return "not composerd's; enough free";
  return "not composerd's: of Slurm's " + std::to_string(use.total) + ", " +
         std::to_string(use.used) + " are used and " + std::to_string(use.reserved) +
         " reserved, which leaves " + std::to_string(use.available()) + " for the " +
         std::to_string(v.asked) + " asked";
}

std::string yes_no(bool b) { return b ? "yes" : "no"; }

Json::Value u64(uint64_t n) { return Json::Value(static_cast<Json::UInt64>(n)); }

Expected<std::string> scontrol(const std::vector<std::string>& args) {
  RunOptions o;
  o.argv = {"scontrol"};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.with_stderr = true;  // its error says why; the parsers skip lines that are not records
  o.timeout_ms = kScontrolTimeoutMs;
  return run_checked(o);
}

}  // namespace

Expected<SlurmJob> parse_scontrol_job(std::string_view text) {
  for (const auto& line : split(text, '\n', {.trim = true, .skip_empty = true})) {
    if (!line.starts_with("JobId=")) continue;
    const ScontrolFields f = parse_scontrol_line(line);
    const auto get = [&f](std::string_view key) { return scontrol_field(f, key); };
    SlurmJob job;
    auto id = parse_count(get("JobId"), std::numeric_limits<uint32_t>::max());
    if (!id || *id == 0)
      return bad_job("scontrol printed JobId=" + get("JobId") + ": not a job id");
    job.id = *id;
    job.state = get("JobState");
    job.reason = get("Reason");
    auto licenses = parse_licenses(get("Licenses"));
    if (!licenses)
      return bad_job("job " + std::to_string(job.id) + ": Licenses=" + get("Licenses") + ": " +
                     licenses.error().message);
    job.licenses = std::move(*licenses);
    // UNLIMITED and Partition_Limit are no time limit the policy can weigh.
    if (auto limit = parse_slurm_duration(get("TimeLimit")); limit && *limit) {
      job.time_limit_s = **limit;
    }
    job.partition = get("Partition");
    job.account = get("Account");
    job.qos = get("QOS");
    // A pending job may show a range ("2-4"); job_submit pins a composed job to one count.
    const std::string nodes = get("NumNodes");
    if (auto n = parse_count(nodes.substr(0, nodes.find('-')), 1u << 20); n && *n > 0) {
      job.nodes = *n;
    }
    auto composer = parse_admin_comment(get("AdminComment"));
    if (!composer) {
      return bad_job("job " + std::to_string(job.id) + ": " + composer.error().message);
    }
    job.composer = std::move(*composer);
    return job;
  }
  const std::string first = text.empty() ? "nothing" : "'" + split(text, '\n')[0] + "'";
  return bad_job("scontrol printed no job, only " + first);
}

bool pending_on_licenses(const SlurmJob& job) {
  std::string_view reason = job.reason;
  if (reason.starts_with('(') && reason.ends_with(')'))
    reason = reason.substr(1, reason.size() - 2);
  return job.state == "PENDING" && reason == "Licenses";
}

client::PolicyQuery policy_query(const SlurmJob& job) {
  client::PolicyQuery q;
  if (job.composer) q.workload = job.composer->workload;
  q.partition = job.partition;
  q.qos = job.qos;
  q.account = job.account;
  for (const auto& l : job.licenses) {
    const auto t = pool_license_type(l.name);
    if (t == DeviceType::kGpu) q.gpus = l.count;
    if (t == DeviceType::kMem) q.mem_bytes = l.count * kGiB;
    if (t == DeviceType::kNvme) q.nvme = l.count;
  }
  q.time_limit_s = job.time_limit_s.value_or(0);
  return q;
}

std::optional<Event> last_refusal(const std::vector<Event>& events) {
  std::optional<Event> refusal;
  for (const Event& e : events) {
    if (e.kind == "refused") refusal = e;
    if (e.kind == "ready") refusal.reset();
  }
  return refusal;
}

JobExplanation explain_job(const SlurmJob& job, const std::vector<LicenseUse>& licenses,
                           const ComposerdView& composerd) {
  JobExplanation e;
  e.job = job.id;
  e.state = job.state;
  e.reason = job.reason;
  e.composer = job.composer;
  const std::string name = "Job " + std::to_string(job.id);
  if (job.state != "PENDING") {
    e.summary = name + " is " + job.state + ", not pending: no license holds it.";
    return e;
  }
  if (composerd.refusal) {
    const Event& r = *composerd.refusal;
    e.refusal = "composerd refused to compose it on " + r.node + " at " + format_time(r.ts_ms) +
                ": " + r.detail;
    if (!e.refusal.empty() && e.refusal.back() != '.') e.refusal += '.';
    // Whatever Slurm's reason, this is why it did not run: Slurm requeued it.
    if (!pending_on_licenses(job)) {
      e.summary = name + " is pending for Reason=" + job.reason +
                  " after its devices could not be composed.";
      return e;
    }
  }
  if (!pending_on_licenses(job)) {
    e.summary = name + " is pending for Reason=" + job.reason +
                ", not for licenses: composerd's pool and policy do not hold it.";
    return e;
  }
  if (composerd.policy && *composerd.policy) e.policy = **composerd.policy;
  std::vector<std::string> holding;
  for (const auto& asked : job.licenses) {
    LicenseVerdict v{.license = asked.name, .asked = asked.count};
    for (const auto& l : licenses)
      if (l.name == asked.name) v.slurm = l;
    if (!v.slurm) {
      v.holds = true;
      v.why = "Slurm has no license " + asked.name + " (scontrol show licenses lists none)";
    } else {
      v.holds = asked.count > v.slurm->available();
      // Remote licenses (SlurmLicenses=remote) are NAME@SERVER in Slurm.
      if (auto t = pool_license_type(asked.name)) {
        v.why = pool_why(*t, {}, v, *v.slurm, composerd.pool);
      } else if (const auto models = license_models(plain_license(asked.name), composerd.pool);
                 !models.empty()) {
        v.why = pool_why(DeviceType::kGpu, models, v, *v.slurm, composerd.pool);
      } else if (auto cap = pol::parse_cap_license_name(asked.name)) {
        v.why = cap_why(cap->first, cap->second, v, *v.slurm, composerd.policy);
      } else {
        v.why = other_why(v, *v.slurm);
      }
    }
    if (v.holds) {
      holding.push_back(v.license + " (" + std::to_string(v.asked) + " asked, " +
                        std::to_string(v.slurm ? v.slurm->available() : 0) + " free)");
    }
    // Sentences of their own: the why starts with a capital.
    if (!v.why.empty())
      v.why[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(v.why[0])));
    e.licenses.push_back(std::move(v));
  }
  if (holding.empty()) {
    e.summary = name +
                " pends with Reason=Licenses, but every license it asks for has enough free "
                "now: Slurm starts it on a coming scheduling pass.";
  } else {
    e.summary = name + " is pending on licenses: " + and_list(holding) +
                (holding.size() == 1 ? " holds it." : " hold it.");
  }
  return e;
}

Table job_explain_table(const JobExplanation& e) {
  Table t({{"LICENSE"},
           {"ASKED", true},
           {"TOTAL", true},
           {"USED", true},
           {"RESERVED", true},
           {"FREE", true},
           {"HOLDS"},
           {"WHY"}});
  for (const auto& v : e.licenses) {
    const auto n = [&v](uint64_t LicenseUse::*field) {
      return v.slurm ? std::to_string((*v.slurm).*field) : "";
    };
    t.add_row({v.license, std::to_string(v.asked), n(&LicenseUse::total), n(&LicenseUse::used),
               n(&LicenseUse::reserved), v.slurm ? std::to_string(v.slurm->available()) : "",
               yes_no(v.holds), v.why});
  }
  return t;
}

std::string job_explain_text(const JobExplanation& e, bool header) {
  std::ostringstream out;
  out << e.summary << '\n';
  if (!e.refusal.empty()) {
    std::string refusal = e.refusal;
    refusal[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(refusal[0])));
    out << refusal << '\n';
  }
  if (e.licenses.empty()) return out.str();
  Table t = job_explain_table(e);
  (void)t.select("license,asked,total,used,reserved,free,holds");  // its own columns: cannot fail
  out << '\n';
  t.print(out, Format::kTable, header);
  out << '\n';
  for (const auto& v : e.licenses) out << v.license << ": " << v.why << ".\n";
  return out.str();
}

Json::Value job_explain_to_json(const JobExplanation& e) {
  Json::Value v(Json::objectValue);
  v["job"] = e.job;
  v["state"] = e.state;
  v["reason"] = e.reason;
  v["workload"] = e.composer ? e.composer->workload : "";
  v["request"] = e.composer ? e.composer->request.to_string() : "";
  v["nodes"] = e.composer ? e.composer->nodes : 0;
  v["summary"] = e.summary;
  v["refusal"] = e.refusal.empty() ? Json::Value(Json::nullValue) : Json::Value(e.refusal);
  Json::Value list(Json::arrayValue);
  for (const auto& l : e.licenses) {
    Json::Value j(Json::objectValue);
    j["license"] = l.license;
    j["asked"] = u64(l.asked);
    j["total"] = l.slurm ? u64(l.slurm->total) : Json::Value(Json::nullValue);
    j["used"] = l.slurm ? u64(l.slurm->used) : Json::Value(Json::nullValue);
    j["reserved"] = l.slurm ? u64(l.slurm->reserved) : Json::Value(Json::nullValue);
    j["free"] = l.slurm ? u64(l.slurm->available()) : Json::Value(Json::nullValue);
    j["holds"] = l.holds;
    j["why"] = l.why;
    list.append(std::move(j));
  }
  v["licenses"] = std::move(list);
  v["policy"] = e.policy ? api::to_json(*e.policy) : Json::Value(Json::nullValue);
  return v;
}

int run_explain_job(uint32_t job_id, const client::Client& client, const OutputOptions& output,
                    std::ostream& out, std::ostream& err) {
  const auto fail = [&err](const Error& e) {
    err << kProgram << ": error: " << e.message << '\n';
    return kExitFailed;
  };
  auto shown = scontrol({"-o", "show", "job", std::to_string(job_id)});
  if (!shown) {
    if (shown.error().message.find("Invalid job id") != std::string::npos) {
      return fail(
          {ErrorCode::kNotFound, "Slurm knows no job " + std::to_string(job_id) +
                                     " (it never existed, or it ended longer ago than slurm.conf's "
                                     "MinJobAge); " +
                                     shown.error().message});
    }
    return fail(shown.error());
  }
  auto job = parse_scontrol_job(*shown);
  if (!job) return fail(job.error());
  std::vector<LicenseUse> licenses;
  ComposerdView composerd;
  if (job->state == "PENDING" && job->composer) {
    // Why composerd did not compose it last time, if it refused.
    auto events = client.events({.job = job->id});
    if (events) {
      composerd.refusal = last_refusal(*events);
    } else {
      err << kProgram << ": warning: composerd's ledger of job " << job->id
          << " could not be read, so a refused compose cannot be shown: " << events.error().message
          << '\n';
    }
  }
  if (pending_on_licenses(*job)) {
    auto text = scontrol({"-o", "show", "licenses"});
    if (!text) return fail(text.error());
    auto use = parse_license_use(*text);
    if (!use) return fail(use.error());
    licenses = std::move(*use);
    bool pool = false, cap = false;
    for (const auto& l : job->licenses) {
      pool = pool || pol::is_pool_license(l.name);
      cap = cap || pol::parse_cap_license_name(l.name).has_value();
    }
    if (pool) {
      auto rows = client.pool();
      if (!rows) return fail(rows.error());
      composerd.pool = std::move(*rows);
    }
    // The same question `policy explain` asks with flags; it needs a time limit.
    if (cap && job->time_limit_s) composerd.policy = client.explain_policy(policy_query(*job));
    if (composerd.policy && !*composerd.policy &&
        composerd.policy->error().code != ErrorCode::kNotFound) {
      return fail(composerd.policy->error());
    }
  }
  const JobExplanation e = explain_job(*job, licenses, composerd);
  if (output.format == Format::kJson) {
    print_json(out, job_explain_to_json(e));
  } else if (!e.licenses.empty() &&
             (output.format == Format::kParsable || !output.fields.empty())) {
    if (Status s = print_table(out, job_explain_table(e), output); !s) return fail(s.error());
  } else {  // the sentences; without licenses holding it, no table to show
    out << job_explain_text(e, output.header);
  }
  return kExitOk;
}

}  // namespace composer::cli
