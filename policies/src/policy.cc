#include "composer/policies/policy.h"

#include <algorithm>
#include <cctype>

#include "composer/common/strings.h"
#include "composer/common/units.h"

namespace composer::policies {

bool ClassMemPolicy::allows(MemPolicy::Kind kind) const {
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), kind) != allowed.end();
}

std::string ClassMemPolicy::allowed_text() const {
  std::string out;
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (i > 0) out += i + 1 == allowed.size() ? " or " : ", ";
    out += kind_name(allowed[i]);
  }
  return out;
}

Expected<MemPolicy> class_mem_policy(const std::vector<ClassMemPolicy>& lines,
                                     std::string_view class_name,
                                     const std::optional<MemPolicy>& asked) {
  const ClassMemPolicy* line = nullptr;
  for (const ClassMemPolicy& l : lines) {
    if (l.class_name == class_name) line = &l;
  }
  if (line == nullptr) return asked.value_or(MemPolicy{});
  if (!asked) return line->default_policy.value_or(MemPolicy{});
  if (line->allows(asked->kind)) return *asked;
  return Error{ErrorCode::kInvalidArgument,
               "--compose-mem-policy=" + to_string(*asked) + ": workload class " +
                   line->class_name + " allows only " + line->allowed_text() + " (MemPolicy line " +
                   std::to_string(line->line) +
                   " of the policy); ask for one of those, or leave the option out for the "
                   "class's default (" +
                   to_string(line->default_policy.value_or(MemPolicy{})) + ")"};
}

namespace {
constexpr std::string_view kDayNames[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
}

std::string_view day_name(int weekday) { return kDayNames[((weekday % 7) + 7) % 7]; }

std::string format_days(DaySet days) {
  if ((days & kAllDays) == kAllDays) return "every day";
  std::string out;
  int d = 0;
  while (d < 7) {
    if (!(days & (1u << d))) {
      ++d;
      continue;
    }
    int e = d;
    while (e + 1 < 7 && (days & (1u << (e + 1)))) ++e;
    if (!out.empty()) out += ",";
    out += day_name(d);
    if (e == d + 1) {
      out += "," + std::string(day_name(e));
    } else if (e > d) {
      out += "-" + std::string(day_name(e));
    }
    d = e + 1;
  }
  return out;
}

std::string CapSpec::to_string(DeviceType type) const {
  if (kind == Kind::kShare) {
    std::string s = std::to_string(value / 100);
    if (value % 100 != 0) {
      s += "." + std::to_string(value % 100 / 10);
      if (value % 10 != 0) s += std::to_string(value % 10);
    }
    return s + "%";
  }
  if (type == DeviceType::kMem) return std::to_string(value) + "G";
  return std::to_string(value);
}

uint64_t PoolSize::size(DeviceType t) const {
  switch (t) {
    case DeviceType::kGpu:
      return gpus;
    case DeviceType::kMem:
      return mem_gib;
    case DeviceType::kNvme:
      return nvme;
  }
  return 0;
}

uint64_t largest_device_bytes(const std::vector<PoolRow>& rows, DeviceType t) {
  uint64_t largest = 0;
  for (const PoolRow& r : rows) {
    if (r.type != t || r.total == 0 || r.foreign >= r.total) continue;
    largest = std::max(largest, r.total_bytes / r.total);
  }
  return largest;
}

PoolSize PoolSize::from_rows(const std::vector<PoolRow>& rows) {
  PoolSize p;
  uint64_t mem_bytes = 0;
  for (const auto& r : rows) {
    switch (r.type) {
      case DeviceType::kGpu:
        p.gpus += schedulable(r);
        break;
      case DeviceType::kMem:
        mem_bytes += r.schedulable_bytes;
        break;
      case DeviceType::kNvme:
        p.nvme += schedulable(r);
        break;
    }
  }
  p.mem_gib = gib_rounded_down(mem_bytes);
  p.mem_block_bytes = largest_device_bytes(rows, DeviceType::kMem);
  return p;
}

MemCharge mem_charge(uint64_t mem_bytes, uint64_t block_bytes) {
  if (mem_bytes == 0) return {};
  if (block_bytes == 0) return {1, gib_rounded_up(mem_bytes)};
  if (block_bytes >= mem_bytes) return {1, gib_rounded_up(block_bytes)};
  // Here blocks x block_bytes < 2 x mem_bytes: no overflow.
  const uint64_t blocks = mem_bytes / block_bytes + (mem_bytes % block_bytes != 0 ? 1 : 0);
  return {blocks, gib_rounded_up(blocks * block_bytes)};
}

const Window* Policy::find_window(std::string_view name) const {
  for (const auto& w : windows)
    if (w.name == name) return &w;
  return nullptr;
}

const WorkloadClass* Policy::find_class(std::string_view name) const {
  for (const auto& c : classes)
    if (c.name == name) return &c;
  return nullptr;
}

const Limit* Policy::find_limit(std::string_view class_name, std::string_view window) const {
  for (const auto& l : limits)
    if (l.class_name == class_name && l.window == window) return &l;
  return nullptr;
}

FailureReaction Policy::reaction(std::string_view class_name) const {
  for (const auto& r : reactions)
    if (r.class_name == class_name) return r;
  FailureReaction r;
  r.class_name = std::string(class_name);
  return r;
}

std::string_view to_string(FailureReaction::Action action) {
  switch (action) {
    case FailureReaction::Action::kNotify:
      return "notify";
    case FailureReaction::Action::kRequeue:
      return "requeue";
    case FailureReaction::Action::kNone:
      return "none";
  }
  return "?";
}

std::optional<FailureReaction::Action> parse_failure_action(std::string_view s) {
  for (auto a : {FailureReaction::Action::kNotify, FailureReaction::Action::kRequeue,
                 FailureReaction::Action::kNone}) {
    if (iequals(s, to_string(a))) return a;
  }
  return std::nullopt;
}

std::string format_duration(int64_t seconds) {
  if (seconds < 60) return std::to_string(seconds) + "s";
  const int64_t minutes = (seconds + 59) / 60;
  const int64_t d = minutes / 1440, h = minutes % 1440 / 60, m = minutes % 60;
  std::string out;
  if (d) out += std::to_string(d) + "d";
  if (h) out += (out.empty() ? "" : " ") + std::to_string(h) + "h";
  if (m) out += (out.empty() ? "" : " ") + std::to_string(m) + "m";
  return out;
}

std::string format_amount(DeviceType t, uint64_t amount) {
  switch (t) {
    case DeviceType::kGpu:
      return std::to_string(amount) + (amount == 1 ? " GPU" : " GPUs");
    case DeviceType::kMem:
      return std::to_string(amount) + " GiB of memory";
    case DeviceType::kNvme:
      return std::to_string(amount) + (amount == 1 ? " NVMe drive" : " NVMe drives");
  }
  return std::to_string(amount);
}

std::string pool_license_name(DeviceType t) { return "fabric_" + std::string(to_string(t)); }

std::string model_license_name(std::string_view model) {
  std::string name = pool_license_name(DeviceType::kGpu) + "_";
  for (char c : model) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

std::map<std::string, uint64_t> model_license_sizes(const std::vector<PoolRow>& rows) {
  std::map<std::string, uint64_t> sizes;
  for (const PoolRow& r : rows) {
    if (r.type != DeviceType::kGpu || r.model.empty() || r.total == 0) continue;
    sizes[model_license_name(r.model)] += schedulable(r);
  }
  return sizes;
}

std::string remote_license_name(std::string_view name, std::string_view server) {
  return std::string(name) + "@" + std::string(server);
}

bool is_pool_license(std::string_view name) {
  name = name.substr(0, name.find('@'));
  for (DeviceType t : kAllDeviceTypes) {
    if (name == pool_license_name(t)) return true;
  }
  const std::string model_prefix = pool_license_name(DeviceType::kGpu) + "_";
  return name.size() > model_prefix.size() && name.starts_with(model_prefix);
}

std::string cap_license_name(std::string_view class_name, DeviceType t) {
  return std::string(class_name) + "_" + std::string(to_string(t)) + "_cap";
}

std::optional<std::pair<std::string, DeviceType>> parse_cap_license_name(std::string_view name) {
  for (DeviceType t : kAllDeviceTypes) {
    const std::string tail = cap_license_name("", t);
    if (name.size() > tail.size() && name.ends_with(tail)) {
      return std::pair{std::string(name.substr(0, name.size() - tail.size())), t};
    }
  }
  return std::nullopt;
}

uint64_t resolve_cap(const CapSpec& cap, uint64_t pool_size) {
  if (cap.kind == CapSpec::Kind::kCount) return cap.value;
  // Split so that pool_size x share cannot overflow: value <= 10000.
  uint64_t v = pool_size / 10000 * cap.value + pool_size % 10000 * cap.value / 10000;
  if (v == 0 && cap.value > 0 && pool_size > 0) v = 1;
  return v;
}

std::string_view to_string(PlacementRule::Kind kind) {
  switch (kind) {
    case PlacementRule::Kind::kPack:
      return "pack";
    case PlacementRule::Kind::kSpread:
      return "spread";
    case PlacementRule::Kind::kAvoidShared:
      return "avoid-shared";
  }
  return "?";
}

std::optional<PlacementRule::Kind> parse_placement_kind(std::string_view s) {
  for (auto kind : {PlacementRule::Kind::kPack, PlacementRule::Kind::kSpread,
                    PlacementRule::Kind::kAvoidShared}) {
    if (iequals(s, to_string(kind))) return kind;
  }
  return std::nullopt;
}

std::string PlacementRule::to_string() const {
  std::string name(policies::to_string(kind));
  switch (kind) {
    case Kind::kPack:
      return name;
    case Kind::kSpread:
      return name + " " + level + " " + std::to_string(count) +
             (type ? " " + std::string(composer::to_string(*type)) : "");
    case Kind::kAvoidShared:
      return name + " " + level;
  }
  return "?";
}

std::string rule_sentence(const PlacementRule& rule, std::string_view class_name) {
  return "placement rule '" + rule.to_string() + "' of class " + std::string(class_name);
}

std::string placement_never(const PlacementRule& rule, std::string_view class_name, DeviceType t,
                            uint64_t asked, size_t domains, uint32_t mem_slots,
                            const PlacementPlace& place) {
  using Kind = PlacementRule::Kind;
  if (rule.kind == Kind::kPack || asked == 0) return "";
  const std::string rule_text = rule_sentence(rule, class_name);
  const std::string what = t == DeviceType::kGpu   ? "GPU"
                           : t == DeviceType::kMem ? "memory"
                                                   : "NVMe";
  if (domains == 0) {
    return place.reaches + " no " + what + " in any " + rule.level + " domain, which " + rule_text +
           " needs";
  }
  const bool spread = rule.kind == Kind::kSpread && (!rule.type || *rule.type == t);
  if (!spread) return "";
  if (t != DeviceType::kMem && asked < rule.count) {
    return rule_text + " spreads a job's " + what + " over " + std::to_string(rule.count) + " " +
           rule.level + " domains, so a job asking for " + format_amount(t, asked) +
           " can never be placed";
  }
  if (t == DeviceType::kMem && mem_slots < rule.count) {
    return place.has + " " + std::to_string(mem_slots) +
           (mem_slots == 1 ? " memory attach slot" : " memory attach slots") + ", but " +
           rule_text + " takes a block from each of " + std::to_string(rule.count) + " " +
           rule.level + " domains";
  }
  if (domains < rule.count) {
    return place.reaches + " " + what + " in only " + std::to_string(domains) + " " + rule.level +
           (domains == 1 ? " domain" : " domains") + ", fewer than the " +
           std::to_string(rule.count) + " that " + rule_text + " needs";
  }
  return "";
}

bool is_managed_license(std::string_view name) {
  return name.starts_with("fabric_") || (name.size() > 4 && name.ends_with("_cap"));
}

std::string hold_name(std::string_view license) { return "hold_" + std::string(license); }

bool is_hold_name(std::string_view name) {
  constexpr std::string_view kHoldPrefix = "hold_";
  return name.size() > kHoldPrefix.size() && name.starts_with(kHoldPrefix) &&
         is_managed_license(name.substr(kHoldPrefix.size()));
}

}  // namespace composer::policies
