#include "composer/policies/parser.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "composer/common/strings.h"
#include "composer/common/units.h"

namespace composer::policies {

namespace {

struct Pair {
  std::string key;  // as written
  std::string value;
};

// Collects the problems of one file; each one becomes "FILE line N: sentence".
class Problems {
 public:
  explicit Problems(std::string_view file) : file_(file) {}
  void add(int line, const std::string& sentence) {
    list_.push_back(file_ + " line " + std::to_string(line) + ": " + sentence);
  }
  bool empty() const { return list_.empty(); }
  std::string joined() const {
    std::string out;
    for (const auto& p : list_) out += (out.empty() ? "" : "\n") + p;
    return out;
  }

 private:
  std::string file_;
  std::vector<std::string> list_;
};

constexpr const char* kNameRule =
    "a name starts with a letter and has at most 32 letters, digits or '_'";

bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > 32 || !std::isalpha(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

bool valid_slurm_word(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

std::optional<int> parse_day(std::string_view s) {
  static constexpr std::string_view kNames[] = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};
  const std::string l = lower(s);
  for (int i = 0; i < 7; ++i)
    if (l == kNames[i]) return i;
  return {};
}

std::optional<DaySet> parse_days(std::string_view s) {
  if (iequals(s, "all")) return kAllDays;
  DaySet set = 0;
  for (const auto& item : split(s, ',')) {
    auto dash = item.find('-');
    if (dash == std::string_view::npos) {
      auto d = parse_day(item);
      if (!d) return {};
      set |= static_cast<DaySet>(1u << *d);
      continue;
    }
    auto a = parse_day(item.substr(0, dash));
    auto b = parse_day(item.substr(dash + 1));
    if (!a || !b) return {};
    for (int d = *a;; d = (d + 1) % 7) {  // a range may wrap past Sunday: Fri-Mon
      set |= static_cast<DaySet>(1u << d);
      if (d == *b) break;
    }
  }
  return set;
}

// "HH:MM" -> minutes; 24:00 only where allowed.
std::optional<int> parse_clock(std::string_view s, bool allow_24) {
  if (s.size() != 5 || s[2] != ':') return {};
  for (size_t i : {0, 1, 3, 4})
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return {};
  const int h = (s[0] - '0') * 10 + (s[1] - '0');
  const int m = (s[3] - '0') * 10 + (s[4] - '0');
  if (m > 59) return {};
  if (h == 24 && m == 0 && allow_24) return 1440;
  if (h > 23) return {};
  return h * 60 + m;
}

// "75%", "12.5%", "0.25%" -> basis points.
std::optional<uint64_t> parse_share(std::string_view s) {
  if (s.size() < 2 || s.back() != '%') return {};
  s.remove_suffix(1);
  auto dot = s.find('.');
  std::string_view whole = s.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view{} : s.substr(dot + 1);
  if (whole.empty() || whole.size() > 3 || frac.size() > 2) return {};
  if (dot != std::string_view::npos && frac.empty()) return {};
  uint64_t v = 0;
  for (char c : whole) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return {};
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  uint64_t f = 0;
  for (size_t i = 0; i < 2; ++i) {
    char c = i < frac.size() ? frac[i] : '0';
    if (!std::isdigit(static_cast<unsigned char>(c))) return {};
    f = f * 10 + static_cast<uint64_t>(c - '0');
  }
  const uint64_t bp = v * 100 + f;
  if (bp > 10000) return {};
  return bp;
}

Expected<CapSpec> parse_cap(std::string_view key, std::string_view value, DeviceType type) {
  if (value.find('%') != std::string_view::npos) {
    auto bp = parse_share(value);
    if (!bp) {
      return Error{ErrorCode::kInvalidArgument,
                   std::string(key) + "=" + std::string(value) +
                       " is not a share of the pool: write a percentage from 0% to 100% with at "
                       "most two decimals, such as 25% or 12.5%"};
    }
    return CapSpec{CapSpec::Kind::kShare, *bp};
  }
  if (type == DeviceType::kMem) {
    if (value == "0") return CapSpec{CapSpec::Kind::kCount, 0};
    auto bytes = parse_size(value);
    if (!bytes) {
      return Error{ErrorCode::kInvalidArgument,
                   std::string(key) + "=" + std::string(value) + " is not a memory size: " +
                       bytes.error().message + ", or a share such as 50%"};
    }
    if (*bytes % kGiB != 0) {
      return Error{ErrorCode::kInvalidArgument,
                   std::string(key) + "=" + std::string(value) +
                       " is not a whole number of GiB: memory caps are counted in GiB, like the "
                       "fabric_mem license"};
    }
    return CapSpec{CapSpec::Kind::kCount, *bytes / kGiB};
  }
  auto n = parse_count(value, 1000000);
  if (!n) {
    return Error{ErrorCode::kInvalidArgument,
                 std::string(key) + "=" + std::string(value) +
                     " is not a count: write a whole number from 0 to 1000000, or a share such "
                     "as 25%"};
  }
  return CapSpec{CapSpec::Kind::kCount, *n};
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

class Parser {
 public:
  Parser(std::string_view file, const ZoneResolver& zones) : problems_(file), zones_(zones) {
    policy_.file = std::string(file);
  }

  Expected<Policy> run(std::string_view text) {
    int line_no = 0;
    for (const std::string& text_line : split(text, '\n')) {
      ++line_no;
      const std::string_view raw = text_line;
      auto hash = raw.find('#');
      std::string_view line = trim(hash == std::string_view::npos ? raw : raw.substr(0, hash));
      if (line.empty()) continue;
      parse_line(line_no, line);
    }
    check_references();
    if (!problems_.empty()) return Error{ErrorCode::kInvalidArgument, problems_.joined()};
    return std::move(policy_);
  }

 private:
  void parse_line(int n, std::string_view line) {
    std::vector<Pair> pairs;
    std::string_view rest = line;
    while (!rest.empty()) {
      size_t end = 0;
      while (end < rest.size() && !std::isspace(static_cast<unsigned char>(rest[end]))) ++end;
      std::string_view token = rest.substr(0, end);
      rest = trim(rest.substr(end));
      auto eq = token.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        problems_.add(n, "'" + std::string(token) +
                             "' is not Key=Value: every word on a line is Key=Value, with no "
                             "spaces around '='");
        return;
      }
      Pair p{std::string(token.substr(0, eq)), std::string(token.substr(eq + 1))};
      if (p.value.empty()) {
        problems_.add(n, "key " + p.key + " has no value: write " + p.key + "=<value>");
        return;
      }
      for (const auto& seen : pairs) {
        if (iequals(seen.key, p.key)) {
          problems_.add(n, "key " + p.key + " appears twice on one line: give it once");
          return;
        }
      }
      pairs.push_back(std::move(p));
    }
    const std::string kind = lower(pairs.front().key);
    if (kind == "timezone") {
      time_zone(n, pairs);
    } else if (kind == "window") {
      window(n, pairs);
    } else if (kind == "class") {
      workload_class(n, pairs);
    } else if (kind == "defaultclass") {
      default_class(n, pairs);
    } else if (kind == "limit") {
      limit(n, pairs);
    } else if (kind == "placement") {
      placement(n, pairs);
    } else if (kind == "onfailure") {
      on_failure(n, pairs);
    } else if (kind == "mempolicy") {
      mem_policy(n, pairs);
    } else {
      problems_.add(n, "unknown key " + pairs.front().key +
                           " at the start of a line: a line starts with TimeZone=, Window=, "
                           "Class=, DefaultClass=, Limit=, Placement=, OnFailure= or MemPolicy=");
    }
  }

  // Refuses keys other than `allowed` (lower case) after the first one.
  bool only_keys(int n, const std::vector<Pair>& pairs,
                 std::initializer_list<std::string_view> allowed) {
    for (size_t i = 1; i < pairs.size(); ++i) {
      const std::string k = lower(pairs[i].key);
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
        std::string names;
        for (auto a : allowed) names += (names.empty() ? "" : ", ") + std::string(a);
        problems_.add(n, "unknown key " + pairs[i].key + " on a " + pairs[0].key +
                             " line: allowed keys are " + (names.empty() ? "none" : names));
        return false;
      }
    }
    return true;
  }

  static const Pair* find(const std::vector<Pair>& pairs, std::string_view key) {
    for (size_t i = 1; i < pairs.size(); ++i)
      if (iequals(pairs[i].key, key)) return &pairs[i];
    return nullptr;
  }

  void time_zone(int n, const std::vector<Pair>& pairs) {
    if (!only_keys(n, pairs, {})) return;
    if (policy_.time_zone_line != 0) {
      problems_.add(n, "TimeZone is given twice (first on line " +
                           std::to_string(policy_.time_zone_line) +
                           "): a policy has one time zone");
      return;
    }
    auto zone = zones_(pairs[0].value);
    if (!zone) {
      problems_.add(n, "TimeZone=" + pairs[0].value + " cannot be used: " + zone.error().message);
      return;
    }
    policy_.time_zone = std::move(*zone);
    policy_.time_zone_line = n;
  }

  bool check_new_name(int n, const std::string& key, const std::string& name) {
    if (!valid_name(name)) {
      problems_.add(n, key + "=" + name + " is not a valid name: " + kNameRule);
      return false;
    }
    return true;
  }

  void window(int n, const std::vector<Pair>& pairs) {
    if (!only_keys(n, pairs, {"days", "start", "end"})) return;
    Window w;
    w.name = pairs[0].value;
    w.line = n;
    if (!check_new_name(n, pairs[0].key, w.name)) return;
    if (iequals(w.name, kDefaultWindow)) {
      problems_.add(n, "Window=" + w.name +
                           " is reserved for the times no window covers: give the window "
                           "another name and use Window=Default only on Limit lines");
      return;
    }
    for (const auto& other : policy_.windows) {
      if (iequals(other.name, w.name)) {
        problems_.add(n, "Window=" + w.name + " is defined twice (first on line " +
                             std::to_string(other.line) + "): window names must be unique");
        return;
      }
    }
    if (const Pair* d = find(pairs, "days")) {
      auto days = parse_days(d->value);
      if (!days) {
        problems_.add(n, d->key + "=" + d->value +
                             " is not a list of days: use Mon, Tue, Wed, Thu, Fri, Sat, Sun, "
                             "ranges such as Mon-Fri, commas between them, or All");
        return;
      }
      w.days = *days;
    }
    const Pair* start = find(pairs, "start");
    const Pair* end = find(pairs, "end");
    if (!start || !end) {
      problems_.add(n, "Window=" + w.name + " needs both Start=HH:MM and End=HH:MM");
      return;
    }
    auto s = parse_clock(start->value, false);
    if (!s) {
      problems_.add(n, start->key + "=" + start->value +
                           " is not a time of day: write HH:MM from 00:00 to 23:59");
      return;
    }
    auto e = parse_clock(end->value, true);
    if (!e) {
      problems_.add(n, end->key + "=" + end->value +
                           " is not a time of day: write HH:MM from 00:00 to 24:00");
      return;
    }
    if (*s == *e) {
      problems_.add(n, "Window=" + w.name + " has Start=" + start->value +
                           " and End=" + end->value +
                           ": start and end must differ (for whole days write Start=00:00 "
                           "End=24:00)");
      return;
    }
    w.start_min = *s;
    w.end_min = *e == 0 ? 1440 : *e;
    policy_.windows.push_back(std::move(w));
  }

  void workload_class(int n, const std::vector<Pair>& pairs) {
    if (!only_keys(n, pairs, {"partitions", "qos", "accounts"})) return;
    WorkloadClass c;
    c.name = pairs[0].value;
    c.line = n;
    if (!check_new_name(n, pairs[0].key, c.name)) return;
    for (const auto& other : policy_.classes) {
      if (iequals(other.name, c.name)) {
        problems_.add(n, "Class=" + c.name + " is defined twice (first on line " +
                             std::to_string(other.line) + "): class names must be unique");
        return;
      }
    }
    const std::pair<const char*, std::vector<std::string>*> lists[] = {
        {"partitions", &c.partitions}, {"qos", &c.qos}, {"accounts", &c.accounts}};
    for (const auto& [key, out] : lists) {
      const Pair* p = find(pairs, key);
      if (!p) continue;
      for (const auto& item : split(p->value, ',')) {
        if (!valid_slurm_word(item)) {
          problems_.add(n, p->key + "=" + p->value +
                               " is not a comma-separated list of Slurm names (letters, digits, "
                               "'_', '-', '.')");
          return;
        }
        out->emplace_back(item);
      }
    }
    policy_.classes.push_back(std::move(c));
  }

  void default_class(int n, const std::vector<Pair>& pairs) {
    if (!only_keys(n, pairs, {})) return;
    if (policy_.default_class_line != 0) {
      problems_.add(n, "DefaultClass is given twice (first on line " +
                           std::to_string(policy_.default_class_line) + ")");
      return;
    }
    policy_.default_class = pairs[0].value;
    policy_.default_class_line = n;
  }

  void limit(int n, const std::vector<Pair>& pairs) {
    if (!only_keys(n, pairs, {"window", "gpus", "mem", "nvme"})) return;
    Limit l;
    l.class_name = pairs[0].value;
    l.line = n;
    const Pair* w = find(pairs, "window");
    if (!w) {
      problems_.add(n, "Limit=" + l.class_name +
                           " needs Window=<name> (or Window=Default for the times no window "
                           "covers)");
      return;
    }
    l.window = iequals(w->value, kDefaultWindow) ? std::string(kDefaultWindow) : w->value;
    const std::pair<const char*, DeviceType> keys[] = {
        {"gpus", DeviceType::kGpu}, {"mem", DeviceType::kMem}, {"nvme", DeviceType::kNvme}};
    bool any = false;
    for (const auto& [key, type] : keys) {
      const Pair* p = find(pairs, key);
      if (!p) continue;
      auto cap = parse_cap(p->key, p->value, type);
      if (!cap) {
        problems_.add(n, cap.error().message);
        return;
      }
      l.caps[type_index(type)] = *cap;
      any = true;
    }
    if (!any) {
      problems_.add(n, "Limit=" + l.class_name + " Window=" + w->value +
                           " caps nothing: give at least one of Gpus=, Mem=, Nvme=");
      return;
    }
    policy_.limits.push_back(std::move(l));
  }

  // Placement=CLASS Rule=pack|spread|avoid-shared [Level=LEVEL] [Count=N] [Type=TYPE]
  void placement(int n, const std::vector<Pair>& pairs) {
    using Kind = PlacementRule::Kind;
    if (!only_keys(n, pairs, {"rule", "level", "count", "type"})) return;
    Placement p;
    p.class_name = pairs[0].value;
    p.line = n;
    const std::string head = "Placement=" + p.class_name;
    const Pair* rule = find(pairs, "rule");
    const Pair* level = find(pairs, "level");
    const Pair* count = find(pairs, "count");
    const Pair* type = find(pairs, "type");
    if (!rule) {
      problems_.add(n, head + " needs Rule=pack, Rule=spread or Rule=avoid-shared");
      return;
    }
    const std::optional<Kind> kind = parse_placement_kind(rule->value);
    if (!kind) {
      problems_.add(n, rule->key + "=" + rule->value +
                           " is not a placement rule: use pack, spread or avoid-shared");
      return;
    }
    p.rule.kind = *kind;
    if (p.rule.kind == Kind::kPack && (level || count || type)) {
      problems_.add(n, head +
                           " Rule=pack takes no Level=, Count= or Type=: pack places a job "
                           "in as few domains as its zones allow");
      return;
    }
    if (p.rule.kind != Kind::kPack) {
      if (!level) {
        problems_.add(n, head + " Rule=" + std::string(to_string(p.rule.kind)) +
                             " needs Level=<a level of composer.conf's "
                             "DomainLevels=>");
        return;
      }
      if (!valid_slurm_word(level->value)) {
        problems_.add(n, level->key + "=" + level->value +
                             " is not a level name (letters, digits, '_', '-', '.')");
        return;
      }
      p.rule.level = level->value;
    }
    if (p.rule.kind == Kind::kAvoidShared && (count || type)) {
      problems_.add(n, head +
                           " Rule=avoid-shared takes no Count= or Type=: it keeps the class "
                           "apart from the others in every domain of its level");
      return;
    }
    if (p.rule.kind == Kind::kSpread) {
      std::optional<uint32_t> c;
      if (count) {
        if (auto v = parse_count(count->value, 64)) c = *v;
      }
      if (!count || !c || *c < 2) {
        problems_.add(n, head +
                             " Rule=spread needs Count=N, the domains a job's devices spread "
                             "over: a whole number from 2 to 64" +
                             (count ? " (got " + count->value + ")" : ""));
        return;
      }
      p.rule.count = *c;
      if (type) {
        auto t = parse_device_type(lower(type->value));
        if (!t) {
          problems_.add(n, type->key + "=" + type->value +
                               " is not a device type: use gpu, mem "
                               "or nvme");
          return;
        }
        p.rule.type = *t;
      }
    }
    policy_.placements.push_back(std::move(p));
  }

  // OnFailure=CLASS Action=notify|requeue|none [MaxRequeues=N]
  void on_failure(int n, const std::vector<Pair>& pairs) {
    using Action = FailureReaction::Action;
    if (!only_keys(n, pairs, {"action", "maxrequeues"})) return;
    FailureReaction r;
    r.class_name = pairs[0].value;
    r.line = n;
    const std::string head = "OnFailure=" + r.class_name;
    const Pair* action = find(pairs, "action");
    const Pair* most = find(pairs, "maxrequeues");
    if (!action) {
      problems_.add(n, head + " needs Action=notify, Action=requeue or Action=none");
      return;
    }
    const std::optional<Action> a = parse_failure_action(action->value);
    if (!a) {
      problems_.add(n, action->key + "=" + action->value +
                           " is not a reaction to a failed device: use notify, requeue or none");
      return;
    }
    r.action = *a;
    if (most) {
      if (r.action != Action::kRequeue) {
        problems_.add(n, head + " Action=" + std::string(to_string(r.action)) +
                             " takes no MaxRequeues=: only Action=requeue requeues a job");
        return;
      }
      auto v = parse_count(most->value, FailureReaction::kMostMaxRequeues);
      if (!v || *v == 0) {
        problems_.add(n, most->key + "=" + most->value +
                             " is not a number of requeues: a whole number from 1 to " +
                             std::to_string(FailureReaction::kMostMaxRequeues) +
                             " (a job that must never be requeued: Action=notify)");
        return;
      }
      r.max_requeues = static_cast<uint32_t>(*v);
    }
    policy_.reactions.push_back(std::move(r));
  }

  // MemPolicy=CLASS [Default=POLICY] [Allow=KIND,...]
  void mem_policy(int n, const std::vector<Pair>& pairs) {
    if (!only_keys(n, pairs, {"default", "allow"})) return;
    ClassMemPolicy m;
    m.class_name = pairs[0].value;
    m.line = n;
    const std::string head = "MemPolicy=" + m.class_name;
    const Pair* def = find(pairs, "default");
    const Pair* allow = find(pairs, "allow");
    if (!def && !allow) {
      problems_.add(n, head +
                           " needs Default=POLICY, Allow=LIST or both (e.g. Default=interleave "
                           "Allow=preferred,interleave)");
      return;
    }
    if (allow) {
      for (const std::string& word : split(allow->value, ',')) {
        const std::optional<MemPolicy::Kind> k = parse_mem_policy_kind(word);
        if (!k) {
          problems_.add(n, allow->key + "=" + allow->value + ": " + word +
                               " is no memory policy: list preferred, bind, interleave or "
                               "weighted, separated by commas");
          return;
        }
        if (std::find(m.allowed.begin(), m.allowed.end(), *k) != m.allowed.end()) {
          problems_.add(n, allow->key + "=" + allow->value + " names " + word + " twice");
          return;
        }
        m.allowed.push_back(*k);
      }
    }
    if (def) {
      const std::optional<MemPolicy> p = parse_mem_policy_text(def->value);
      if (!p) {
        problems_.add(n, def->key + "=" + def->value + " is no memory policy: expected " +
                             std::string(kMemPolicyForms));
        return;
      }
      if (!m.allows(p->kind)) {
        problems_.add(n, head + " " + def->key + "=" + def->value + " is not among " + allow->key +
                             "=" + allow->value + ": a class's default must be a policy it allows");
        return;
      }
      m.default_policy = *p;
    } else if (!m.allows(MemPolicy::Kind::kPreferred)) {
      problems_.add(n, head + " " + allow->key + "=" + allow->value +
                           " leaves out preferred, the default of a job that asks for none: "
                           "give Default= one of the allowed policies");
      return;
    }
    policy_.mem_policies.push_back(std::move(m));
  }

  void check_references() {
    std::vector<std::string> class_names, window_names;
    for (const auto& c : policy_.classes) class_names.push_back(c.name);
    for (const auto& w : policy_.windows) window_names.push_back(w.name);
    // A Limit or Placement line names a class of the file.
    auto check_class = [&](int line, const std::string& key, const std::string& name) {
      if (policy_.find_class(name)) return;
      problems_.add(line, key + "=" + name + " names no class: define it with Class=" + name +
                              " (classes defined: " + join_names(class_names) + ")");
    };
    for (size_t i = 0; i < policy_.limits.size(); ++i) {
      const Limit& l = policy_.limits[i];
      check_class(l.line, "Limit", l.class_name);
      if (l.window != kDefaultWindow && !policy_.find_window(l.window)) {
        problems_.add(l.line, "Window=" + l.window +
                                  " on this Limit line names no window: define "
                                  "it with Window=" +
                                  l.window +
                                  " Days=... Start=... End=..., or use "
                                  "Window=Default (windows defined: " +
                                  join_names(window_names) + ")");
      }
      for (size_t j = 0; j < i; ++j) {
        const Limit& o = policy_.limits[j];
        if (o.class_name == l.class_name && o.window == l.window) {
          problems_.add(l.line, "Limit=" + l.class_name + " Window=" + l.window +
                                    " is given twice (first on line " + std::to_string(o.line) +
                                    "): one Limit line per class and window");
          break;
        }
      }
    }
    for (size_t i = 0; i < policy_.placements.size(); ++i) {
      const Placement& p = policy_.placements[i];
      check_class(p.line, "Placement", p.class_name);
      for (size_t j = 0; j < i; ++j) {
        if (policy_.placements[j].class_name == p.class_name) {
          problems_.add(p.line, "Placement=" + p.class_name + " is given twice (first on line " +
                                    std::to_string(policy_.placements[j].line) +
                                    "): one placement rule per class");
          break;
        }
      }
    }
    for (size_t i = 0; i < policy_.reactions.size(); ++i) {
      const FailureReaction& r = policy_.reactions[i];
      check_class(r.line, "OnFailure", r.class_name);
      for (size_t j = 0; j < i; ++j) {
        if (policy_.reactions[j].class_name == r.class_name) {
          problems_.add(r.line, "OnFailure=" + r.class_name + " is given twice (first on line " +
                                    std::to_string(policy_.reactions[j].line) +
                                    "): one reaction per class");
          break;
        }
      }
    }
    for (size_t i = 0; i < policy_.mem_policies.size(); ++i) {
      const ClassMemPolicy& m = policy_.mem_policies[i];
      check_class(m.line, "MemPolicy", m.class_name);
      for (size_t j = 0; j < i; ++j) {
        if (policy_.mem_policies[j].class_name == m.class_name) {
          problems_.add(m.line, "MemPolicy=" + m.class_name + " is given twice (first on line " +
                                    std::to_string(policy_.mem_policies[j].line) +
                                    "): one MemPolicy line per class");
          break;
        }
      }
    }
    if (policy_.default_class_line != 0 && !policy_.find_class(policy_.default_class)) {
      problems_.add(policy_.default_class_line,
                    "DefaultClass=" + policy_.default_class +
                        " names no class (classes defined: " + join_names(class_names) + ")");
    }
    // Classification must not depend on the order of lines.
    const std::pair<const char*, std::vector<std::string> WorkloadClass::*> kinds[] = {
        {"partition", &WorkloadClass::partitions},
        {"QOS", &WorkloadClass::qos},
        {"account", &WorkloadClass::accounts}};
    for (const auto& [what, member] : kinds) {
      std::map<std::string, const WorkloadClass*> owner;
      for (const auto& c : policy_.classes) {
        for (const auto& v : c.*member) {
          auto [it, inserted] = owner.emplace(v, &c);
          if (!inserted && it->second != &c) {
            problems_.add(c.line, std::string(what) + " " + v + " is claimed by class " +
                                      it->second->name + " (line " +
                                      std::to_string(it->second->line) + ") and by class " +
                                      c.name + ": each " + what + " may lead to one class only");
          }
        }
      }
    }
  }

  Problems problems_;
  const ZoneResolver& zones_;
  Policy policy_;
};

}  // namespace

Expected<Policy> parse_policy(std::string_view text, std::string_view file_name,
                              const ZoneResolver& zones) {
  return Parser(file_name, zones).run(text);
}

}  // namespace composer::policies
