#include "policy_routes.h"
#include "http_reply.h"

#include <httplib.h>
#include <pwd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <iterator>
#include <map>
#include <set>

#include "composer/api/codec.h"
#include "composer/common/log.h"
#include "composer/common/units.h"
#include "composer/policies/classify.h"
#include "composer/policies/evaluate.h"
#include "composer/policies/parser.h"
#include "composer/policies/schedule.h"
#include "composer/policies/slurm_plan.h"
#include "composer/policies/validate.h"
#include "composer/policies/zoneinfo.h"

namespace composer::server {

namespace pol = composer::policies;

struct PolicyKeeper::Active {
  Active(PolicyVersion v, pol::Policy p, pol::Pool pool, int64_t now_s)
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

// --- SHA-256 (FIPS 180-4, section 6.2) ----------------------------------------------------

constexpr std::array<uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void sha256_block(std::array<uint32_t, 8>& h, const unsigned char* block) {
  std::array<uint32_t, 64> w{};
  for (int t = 0; t < 16; ++t) {
    w[t] = uint32_t{block[4 * t]} << 24 | uint32_t{block[4 * t + 1]} << 16 |
           uint32_t{block[4 * t + 2]} << 8 | uint32_t{block[4 * t + 3]};
  }
  for (int t = 16; t < 64; ++t) {
    const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int t = 0; t < 64; ++t) {
    const uint32_t t1 =
        k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[t] + w[t];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
  h[5] += f;
  h[6] += g;
  h[7] += k;
}

// --- HTTP helpers -------------------------------------------------------------------------

// Refuses query parameters the endpoint does not know.
Status only_params(const httplib::Request& req, std::initializer_list<std::string_view> allowed) {
  const auto q = req.target.find('?');
  if (q == std::string::npos) return Status::Ok();
  httplib::Params query;
  httplib::detail::parse_query_text(req.target.substr(q + 1), query);
  std::string list;
  for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  for (const auto& [key, value] : query) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return bad(
          "unknown query parameter '" + key + "'" +
          (list.empty() ? std::string(" (this endpoint takes none)") : " (allowed: " + list + ")"));
    }
  }
  return Status::Ok();
}

Expected<uint64_t> number_param(const httplib::Request& req, const char* name, uint64_t max) {
  if (!req.has_param(name)) return uint64_t{0};
  const std::string v = req.get_param_value(name);
  if (v.empty() || v.size() > 19 ||
      !std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
    return bad(std::string(name) + ": '" + v + "' is not a whole number");
  }
  const uint64_t n = std::stoull(v);
  if (n > max) {
    return bad(std::string(name) + ": " + v + " is above the largest allowed, " +
               std::to_string(max));
  }
  return n;
}

}  // namespace

std::string sha256_hex(std::string_view data) {
  std::array<uint32_t, 8> h = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  size_t full = data.size() / 64;
  for (size_t i = 0; i < full; ++i) {
    sha256_block(h, reinterpret_cast<const unsigned char*>(data.data()) + 64 * i);
  }
  // The tail, a 1 bit, zeros, and the length in bits as a 64-bit big-endian number.
  std::array<unsigned char, 128> tail{};
  const size_t rest = data.size() - 64 * full;
  std::memcpy(tail.data(), data.data() + 64 * full, rest);
  tail[rest] = 0x80;
  const size_t tail_len = rest < 56 ? 64 : 128;
  const uint64_t bits = static_cast<uint64_t>(data.size()) * 8;
  for (int i = 0; i < 8; ++i) tail[tail_len - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  for (size_t off = 0; off < tail_len; off += 64) sha256_block(h, tail.data() + off);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint32_t word : h) {
    for (int shift = 28; shift >= 0; shift -= 4) out += kHex[(word >> shift) & 15];
  }
  return out;
}

PolicyKeeper::PolicyKeeper(db::Store& store, CompositionService& service, const Clock& clock,
                           std::vector<std::string> workloads)
    : store_(store), service_(service), clock_(clock), workloads_(std::move(workloads)) {}

PolicyKeeper::~PolicyKeeper() = default;

std::shared_ptr<const PolicyKeeper::Active> PolicyKeeper::active() const {
  std::lock_guard lock(mu_);
  return active_;
}

Expected<std::shared_ptr<const PolicyKeeper::Active>> PolicyKeeper::compile(
    const PolicyVersion& version) const {
  auto parsed = pol::parse_policy(version.text, version.file, zones());
  if (!parsed) return parsed.error();
  const pol::Pool pool = pol::Pool::from_rows(service_.pool_summary());
  const pol::Validation checked = pol::validate(*parsed, pool);
  if (!checked.ok()) return bad(checked.to_string());
  if (!workloads_.empty()) {
    for (const auto& c : parsed->classes) {
      if (std::find(workloads_.begin(), workloads_.end(), c.name) == workloads_.end()) {
        std::string list;
        for (const auto& w : workloads_) list += (list.empty() ? "" : ",") + w;
        return bad(version.file + " line " + std::to_string(c.line) + ": Class=" + c.name +
                   " is not one of composer.conf's Workloads=" + list +
                   "; add it there (and restart composerd) before applying this policy");
      }
    }
  }
  return std::shared_ptr<const Active>(
      std::make_shared<const Active>(version, std::move(*parsed), pool, clock_.now_ms() / 1000));
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
  std::lock_guard lock(mu_);
  active_ = std::move(*compiled);
  log::info("policy loaded",
            {{"version", std::to_string((*stored)->id)}, {"sha256", (*stored)->sha256}});
  return Status::Ok();
}

Expected<api::PolicyApplied> PolicyKeeper::apply(const api::PolicyBody& body,
                                                 const Caller& caller) {
  if (body.text.empty()) return bad("text: the policy file is empty");
  PolicyVersion version;
  version.uid = caller.uid;
  version.user = user_name(caller.uid);
  version.file = body.file.empty() ? "policy" : body.file;
  version.text = body.text;
  version.sha256 = sha256_hex(body.text);
  auto compiled = compile(version);
  if (!compiled) return compiled.error();
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
    if (!a) return Admission{.workload = in.workload, .window = ""};
    const pol::Evaluator& ev = a->evaluator;
    auto cls = pol::classify(ev.policy(), {in.workload, "", "", in.account});
    if (!cls) return Error{cls.error().code, "policy: " + cls.error().message};
    const int64_t now_s = clock_.now_ms() / 1000;
    auto caps = ev.caps_in_force(now_s, cls->class_name);
    if (!caps) return caps.error();
    std::array<uint64_t, 3> holds{};
    for (const Request& r : held(cls->class_name)) {
      holds[0] += r.gpus;
      holds[1] += gib_rounded_up(r.mem_bytes);
      holds[2] += r.nvme;
    }
    const std::array<uint64_t, 3> asks = {in.request.gpus, gib_rounded_up(in.request.mem_bytes),
                                          in.request.nvme};
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
    return Admission{.workload = cls->class_name, .window = caps->window};
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

bool PolicyKeeper::describe(api::PoolSnapshot& snapshot) const {
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

void install_policy_routes(httplib::Server& server, PolicyKeeper& keeper, const Authenticator& auth,
                           std::function<void()> changed) {
  // Authenticates, then runs `fn(caller)`.
  auto guarded = [&auth](const httplib::Request& req, httplib::Response& res, bool admin_only,
                         auto&& fn) {
    auto caller = auth.authenticate(req.get_header_value("Authorization"), req.method, req.path);
    if (!caller) {
      log::warning("request refused",
                   {{"method", req.method}, {"path", req.path}, {"cause", caller.error().message}});
      return send_error(res, caller.error());
    }
    if (admin_only && !caller->admin) {
      return send_error(res, Error{ErrorCode::kPermissionDenied,
                                   "uid " + std::to_string(caller->uid) +
                                       " may not do this: only root and AdminUsers may change "
                                       "the policy"});
    }
    fn(*caller);
  };

  server.Put("/v1/policy", [&keeper, guarded, changed](const auto& req, auto& res) {
    guarded(req, res, true, [&](const Caller& caller) {
      if (auto s = only_params(req, {}); !s) return send_error(res, s.error());
      auto json = api::parse_json(req.body);
      if (!json) return send_error(res, json.error());
      auto body = api::policy_body_from_json(*json);
      if (!body) return send_error(res, body.error());
      auto applied = keeper.apply(*body, caller);
      if (!applied) return send_error(res, applied.error());
      if (applied->changed && changed) changed();
      send_json(res, 200, api::to_json(*applied));
    });
  });
  server.Get("/v1/policy", [&keeper, guarded](const auto& req, auto& res) {
    guarded(req, res, false, [&](const Caller&) {
      if (auto s = only_params(req, {}); !s) return send_error(res, s.error());
      auto current = keeper.current();
      if (!current) return send_error(res, current.error());
      if (!*current) {
        return send_error(res, Error{ErrorCode::kNotFound,
                                     "no policy has been applied yet (composerctl policy apply)"});
      }
      send_json(res, 200, api::to_json(**current));
    });
  });
  server.Get("/v1/policy/history", [&keeper, guarded](const auto& req, auto& res) {
    guarded(req, res, false, [&](const Caller&) {
      if (auto s = only_params(req, {"limit"}); !s) return send_error(res, s.error());
      auto limit = number_param(req, "limit", 4294967295U);
      if (!limit) return send_error(res, limit.error());
      auto list = keeper.history(*limit);
      if (!list) return send_error(res, list.error());
      send_json(res, 200, api::policy_history_to_json(*list));
    });
  });
  server.Get("/v1/policy/explain", [&keeper, guarded](const auto& req, auto& res) {
    guarded(req, res, false, [&](const Caller&) {
      if (auto s = only_params(req, {"workload", "partition", "qos", "account", "gpus", "mem_bytes",
                                     "nvme", "time_limit_s", "start_ms"});
          !s) {
        return send_error(res, s.error());
      }
      PolicyKeeper::Query q;
      if (req.has_param("workload")) q.workload = req.get_param_value("workload");
      if (req.has_param("partition")) q.partition = req.get_param_value("partition");
      if (req.has_param("qos")) q.qos = req.get_param_value("qos");
      if (req.has_param("account")) q.account = req.get_param_value("account");
      constexpr uint64_t kMaxCount = 1u << 20;
      auto gpus = number_param(req, "gpus", kMaxCount);
      auto mem = number_param(req, "mem_bytes", kMaxMemBytes);
      auto nvme = number_param(req, "nvme", kMaxCount);
      auto limit = number_param(req, "time_limit_s", 366ULL * 86400);
      auto start = number_param(req, "start_ms", uint64_t{1} << 52);
      for (const auto* p : {&gpus, &mem, &nvme, &limit, &start}) {
        if (!*p) return send_error(res, p->error());
      }
      q.gpus = *gpus;
      q.mem_bytes = *mem;
      q.nvme = *nvme;
      q.time_limit_s = static_cast<int64_t>(*limit);
      q.start_s = req.has_param("start_ms") ? static_cast<int64_t>(*start / 1000)
                                            : SystemClock::instance().now_ms() / 1000;
      auto answer = keeper.explain(q);
      if (!answer) return send_error(res, answer.error());
      send_json(res, 200, api::to_json(*answer));
    });
  });
}

}  // namespace composer::server
