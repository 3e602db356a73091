#include "policy_keeper.h"

#include <openssl/evp.h>
#include <pwd.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>

#include "composer/common/log.h"
#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/policies/classify.h"
#include "composer/policies/compile_plan.h"
#include "composer/policies/evaluate.h"
#include "composer/policies/parser.h"
#include "composer/policies/schedule.h"
#include "composer/policies/validate.h"
#include "composer/policies/zoneinfo.h"
#include "route.h"

namespace composer::server {

namespace pol = composer::policies;

struct PolicyKeeper::Active {
  Active(PolicyVersion v, pol::Policy p, pol::PoolSize pool, int64_t now_s)
      : version(std::move(v)),
        evaluator(std::move(p), pool),
        plan(pol::compile_plan(evaluator.policy(), pool, now_s)) {}
  PolicyVersion version;
  pol::Evaluator evaluator;
  pol::Plan plan;  // for the snapshot: cap licenses and blocker names
};

namespace {

std::string user_name(uint32_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::array<char, 4096> buf{};
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return "uid " + std::to_string(uid);
}

pol::ZoneResolver zones() {
  return [](std::string_view name) { return pol::load_time_zone(name); };
}

}  // namespace

std::string sha256_hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("libcrypto could not compute a SHA-256");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

namespace {
// The Placement lines of a policy, by class.
std::map<std::string, pol::PlacementRule, std::less<>> placement_rules(const pol::Policy& p) {
  std::map<std::string, pol::PlacementRule, std::less<>> out;
  for (const pol::Placement& line : p.placements) out.emplace(line.class_name, line.rule);
  return out;
}
}  // namespace

PolicyKeeper::PolicyKeeper(db::Store& store, LivePool& pool, const Clock& clock,
                           std::vector<std::string> workloads)
    : store_(store), pool_(pool), clock_(clock), workloads_(std::move(workloads)) {}

PolicyKeeper::~PolicyKeeper() = default;

std::shared_ptr<const PolicyKeeper::Active> PolicyKeeper::active() const {
  std::lock_guard lock(mu_);
  return active_;
}

Expected<std::shared_ptr<const PolicyKeeper::Active>> PolicyKeeper::compile(
    const PolicyVersion& version) const {
  auto parsed = pol::parse_policy(version.text, version.file, zones());
  if (!parsed) return parsed.error();
  const pol::PoolSize pool = pol::PoolSize::from_rows(pool_.pool_summary());
  const pol::Validation checked = pol::validate(*parsed, pool);
  if (!checked.ok()) return bad(checked.to_string());
  if (!parsed->placements.empty()) {
    auto devices = store_.devices();
    if (!devices) return devices.error();
    std::map<std::string, std::set<std::string>> domains;
    for (const Device& d : *devices) {
      for (const FailureDomain& dom : d.domains) domains[dom.level].insert(dom.name);
    }
    const pol::Validation placed = pol::validate_placement(*parsed, domain_levels_, domains);
    if (!placed.ok()) return bad(placed.to_string());
  }
  if (!workloads_.empty()) {
    for (const auto& c : parsed->classes) {
      if (std::find(workloads_.begin(), workloads_.end(), c.name) == workloads_.end()) {
        const std::string list = join(workloads_);
        return bad(version.file + " line " + std::to_string(c.line) + ": Class=" + c.name +
                   " is not one of composer.conf's Workloads=" + list +
                   "; add it there (and restart composerd) before applying this policy");
      }
    }
  }
  return std::shared_ptr<const Active>(
      std::make_shared<const Active>(version, std::move(*parsed), pool, clock_.now_ms() / 1000));
}

pol::FailureReaction PolicyKeeper::reaction(std::string_view workload) const {
  if (auto a = active()) return a->evaluator.policy().reaction(workload);
  pol::FailureReaction r;
  r.class_name = std::string(workload);
  return r;
}

Status PolicyKeeper::load() {
  auto stored = store_.current_policy();
  if (!stored) return stored.error();
  if (!*stored) return Status::Ok();
  auto compiled = compile(**stored);
  if (!compiled) {
    log::error("the stored policy cannot be enforced; apply a corrected one",
               {{"version", std::to_string((*stored)->id)},
                {"file", (*stored)->file},
                {"cause", compiled.error().message}});
    return Status::Ok();
  }
  pool_.set_placement(placement_rules((*compiled)->evaluator.policy()));
  std::lock_guard lock(mu_);
  active_ = std::move(*compiled);
  log::info("policy loaded",
            {{"version", std::to_string((*stored)->id)}, {"sha256", (*stored)->sha256}});
  return Status::Ok();
}

Expected<api::PolicyApplied> PolicyKeeper::apply(const api::PolicyBody& body, const Caller& caller,
                                                 std::optional<PlanInForce>* plan) {
  if (body.text.empty()) return bad("text: the policy file is empty");
  PolicyVersion version;
  version.uid = caller.uid;
  version.user = user_name(caller.uid);
  version.file = body.file.empty() ? "policy" : body.file;
  version.text = body.text;
  version.sha256 = sha256_hex(body.text);
  auto compiled = compile(version);
  if (!compiled) return compiled.error();
  if (plan != nullptr) {
    *plan = PlanInForce{(*compiled)->plan, (*compiled)->evaluator.policy().time_zone};
  }
  api::PolicyApplied answer;
  answer.warnings =
      pol::validate((*compiled)->evaluator.policy(), (*compiled)->evaluator.pool()).warnings;
  for (const auto& w : (*compiled)->plan.warnings) answer.warnings.push_back(w);

  std::lock_guard apply_lock(apply_mu_);
  auto current = store_.current_policy();
  if (!current) return current.error();
  if (*current && (*current)->sha256 == version.sha256) {
    answer.changed = false;
    answer.policy = **current;
    return answer;
  }
  if (body.dry_run) {
    answer.changed = false;
    answer.policy = version;
    return answer;
  }
  auto added = store_.add_policy(version, clock_.now_ms());
  if (!added) return added.error();
  auto active =
      std::make_shared<const Active>(*added, (*compiled)->evaluator.policy(),
                                     (*compiled)->evaluator.pool(), clock_.now_ms() / 1000);
  pool_.set_placement(placement_rules(active->evaluator.policy()));
  {
    std::lock_guard lock(mu_);
    active_ = std::move(active);
  }
  log::info("policy applied", {{"version", std::to_string(added->id)},
                               {"file", added->file},
                               {"user", added->user},
                               {"sha256", added->sha256}});
  answer.changed = true;
  answer.policy = std::move(*added);
  return answer;
}

Expected<std::optional<PolicyVersion>> PolicyKeeper::current() const {
  return store_.current_policy();
}

Expected<std::vector<PolicyVersion>> PolicyKeeper::history(size_t limit) const {
  return store_.policy_history(limit);
}

Expected<api::PolicyExplanation> PolicyKeeper::explain(const Query& q) const {
  auto a = active();
  if (!a) return Error{ErrorCode::kNotFound, "no policy is in force: apply one first"};
  const pol::Evaluator& ev = a->evaluator;
  auto cls = pol::classify(ev.policy(), {q.workload, q.partition, q.qos, q.account});
  if (!cls) return cls.error();
  if (q.time_limit_s <= 0) {
    return bad("time_limit_s: give the job's time limit in seconds (1 or more)");
  }
  pol::JobQuery job{.workload_class = cls->class_name,
                    .gpus = q.gpus,
                    .mem_bytes = q.mem_bytes,
                    .nvme = q.nvme,
                    .time_limit_s = q.time_limit_s,
                    .start_s = q.start_s};
  auto admitted = ev.admit(job);
  if (!admitted) return admitted.error();
  api::PolicyExplanation out;
  out.workload = cls->class_name;
  out.classified_by = cls->reason;
  out.admitted = admitted->admitted;
  if (admitted->earliest_s) out.earliest_ms = *admitted->earliest_s * 1000;
  out.windows = admitted->windows;
  if (admitted->hold) {
    const pol::Hold& h = *admitted->hold;
    out.hold = api::PolicyHold{.window = h.window,
                               .type = std::string(to_string(h.type)),
                               .cap = h.cap,
                               .requested = h.requested,
                               .from_ms = h.from_s * 1000,
                               .until_ms = h.until_s * 1000};
  }
  out.explanation = ev.explain(job, *admitted);
  return out;
}

AdmissionCheck PolicyKeeper::admission_check() {
  return [this](const ComposeInput& in,
                const std::function<std::vector<Request>(std::string_view)>& held)
             -> Expected<Admission> {
    auto a = active();
    const std::optional<MemPolicy> asked =
        in.mem_policy.empty() ? std::nullopt : parse_mem_policy_text(in.mem_policy);
    if (!a) {
      return Admission{.workload = in.owner.workload,
                       .window = "",
                       .mem_policy = to_string(asked.value_or(MemPolicy{}))};
    }
    const pol::Evaluator& ev = a->evaluator;
    auto cls = pol::classify(ev.policy(), {in.owner.workload, "", "", in.owner.account});
    if (!cls) return Error{cls.error().code, "policy: " + cls.error().message};
    const int64_t now_s = clock_.now_ms() / 1000;
    auto caps = ev.caps_in_force(now_s, cls->class_name);
    if (!caps) return caps.error();
    // Memory as Slurm's cap license counts it (job_submit): whole blocks per composition.
    const uint64_t block = ev.pool().mem_block_bytes;
    std::array<uint64_t, 3> holds{};
    for (const Request& r : held(cls->class_name)) {
      holds[0] += r.gpus;
      holds[1] += pol::mem_charge(r.mem_bytes, block).gib;
      holds[2] += r.nvme;
    }
    const std::array<uint64_t, 3> asks = {
        in.request.gpus, pol::mem_charge(in.request.mem_bytes, block).gib, in.request.nvme};
    for (DeviceType t : kAllDeviceTypes) {
      const size_t i = pol::type_index(t);
      if (!caps->caps.capped[i] || holds[i] + asks[i] <= caps->caps.value[i]) continue;
      std::string until;
      if (caps->until_s) until = " (until " + ev.format_time(*caps->until_s) + ")";
      return Error{ErrorCode::kInsufficient,
                   "workload class " + cls->class_name + " may hold at most " +
                       pol::format_amount(t, caps->caps.value[i]) + " in window " + caps->window +
                       until + "; it holds " + pol::format_amount(t, holds[i]) +
                       " and this composition asks for " + pol::format_amount(t, asks[i])};
    }
    // A request over the class's cap is refused, never changed; job_submit refuses it first
    // where it can (the snapshot's classes).
    Expected<MemPolicy> mem =
        pol::class_mem_policy(ev.policy().mem_policies, cls->class_name, asked);
    if (!mem) return Error{mem.error().code, "policy: " + mem.error().message};
    return Admission{
        .workload = cls->class_name, .window = caps->window, .mem_policy = to_string(*mem)};
  };
}

namespace {

// What job_submit needs to refuse a job that can never start (the plan's warning "jobs asking
// for more than ... can never start if their time limit is longer than ..."): the class's
// lowest cap of type `t` over the week and, for each higher cap, the longest stretch in which
// the cap is at least that, counted on the wall clock as the blocker reservations are.
void add_stretches(const pol::Evaluator& ev, const std::vector<int>& owners,
                   const std::string& class_name, DeviceType t, api::WorkloadClass& wc) {
  const pol::Policy& policy = ev.policy();
  const size_t i = pol::type_index(t);
  std::map<int, uint64_t> cap_of;  // owner (window index, -1 Default) -> cap
  for (int o : owners) {
    if (cap_of.count(o)) continue;
    const std::string window =
        o < 0 ? std::string(pol::kDefaultWindow) : policy.windows[static_cast<size_t>(o)].name;
    auto caps = ev.caps(class_name, window);
    if (!caps) return;
    cap_of[o] = caps->value[i];
  }
  std::set<uint64_t> levels;
  for (const auto& [o, cap] : cap_of) levels.insert(cap);
  if (levels.size() < 2) return;  // the cap never changes: nothing but `max` to check
  const std::string type(to_string(t));
  wc.min[type] = *levels.begin();
  for (auto level = std::next(levels.begin()); level != levels.end(); ++level) {
    int longest = 0, current = 0;
    // Twice round the week, so that a stretch across the week's end counts whole.
    for (int k = 0; k < 2 * pol::kWeekMinutes; ++k) {
      if (cap_of[owners[static_cast<size_t>(k % pol::kWeekMinutes)]] >= *level) {
        longest = std::max(longest, ++current);
      } else {
        current = 0;
      }
    }
    longest = std::min(longest, pol::kWeekMinutes);
    wc.stretches[type].push_back({*level, int64_t{longest} * 60});
  }
}

}  // namespace

std::optional<PolicyKeeper::PlanInForce> PolicyKeeper::plan_at(int64_t now_s) const {
  auto a = active();
  if (!a) return std::nullopt;
  return PlanInForce{pol::compile_plan(a->evaluator.policy(), a->evaluator.pool(), now_s),
                     a->evaluator.policy().time_zone};
}

std::vector<std::pair<std::string, std::string>> PolicyKeeper::windows_in_force() const {
  std::vector<std::pair<std::string, std::string>> out;
  auto a = active();
  if (!a) return out;
  const int64_t now_s = clock_.now_ms() / 1000;
  for (const auto& c : a->evaluator.policy().classes) {
    auto caps = a->evaluator.caps_in_force(now_s, c.name);
    if (!caps) continue;  // a class of the compiled policy always resolves; skip, never guess
    out.emplace_back(c.name, caps->window);
  }
  return out;
}

bool PolicyKeeper::fill_snapshot(api::PoolSnapshot& snapshot) const {
  auto a = active();
  if (!a) return false;
  snapshot.workload_classes.clear();
  snapshot.blocker_reservations.clear();
  const pol::Policy& policy = a->evaluator.policy();
  snapshot.policy_id = a->version.id;
  snapshot.default_class = policy.default_class;
  const std::vector<int> owners = pol::week_owners(policy);
  for (const auto& c : policy.classes) {
    api::WorkloadClass wc;
    wc.name = c.name;
    wc.partitions = c.partitions;
    wc.qos = c.qos;
    wc.accounts = c.accounts;
    for (DeviceType t : kAllDeviceTypes) {
      const std::string type(to_string(t));
      const std::string lic = pol::cap_license_name(c.name, t);
      for (const auto& l : a->plan.licenses) {
        if (l.name != lic) continue;
        wc.cap_licenses[type] = lic;
        wc.max[type] = l.count;
        add_stretches(a->evaluator, owners, c.name, t, wc);
      }
    }
    for (const pol::Placement& p : policy.placements) {
      if (p.class_name != c.name || p.rule.kind == pol::PlacementRule::Kind::kPack) continue;
      wc.placement = std::string(pol::to_string(p.rule.kind));
      wc.placement_level = p.rule.level;
      wc.placement_count = p.rule.count;
      if (p.rule.type) wc.placement_type = std::string(to_string(*p.rule.type));
    }
    for (const pol::ClassMemPolicy& m : policy.mem_policies) {
      if (m.class_name != c.name) continue;
      if (m.default_policy) wc.mem_policy_default = to_string(*m.default_policy);
      for (MemPolicy::Kind k : m.allowed) wc.mem_policy_allow.emplace_back(kind_name(k));
      wc.mem_policy_line = m.line;
    }
    snapshot.workload_classes.push_back(std::move(wc));
  }
  for (const auto& r : a->plan.reservations) {
    snapshot.blocker_reservations.push_back(r.name);
    // The one-off blocker of a later compilation may still exist in Slurm.
    if (r.recurrence != pol::Recurrence::kOnce) {
      snapshot.blocker_reservations.push_back(r.name + "_once");
    }
  }
  std::sort(snapshot.blocker_reservations.begin(), snapshot.blocker_reservations.end());
  snapshot.blocker_reservations.erase(
      std::unique(snapshot.blocker_reservations.begin(), snapshot.blocker_reservations.end()),
      snapshot.blocker_reservations.end());
  return true;
}

}  // namespace composer::server
