#include "composer/model/model.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "composer/common/units.h"
#include "composer/model/tally.h"

namespace composer {

std::string to_string(const MemPolicy& policy) {
  if (policy.kind == MemPolicy::Kind::kWeighted) {
    return "weighted:" + std::to_string(policy.dram_weight) + ":" +
           std::to_string(policy.cxl_weight);
  }
  return std::string(kind_name(policy.kind));
}

std::string_view kind_name(MemPolicy::Kind kind) {
  switch (kind) {
    case MemPolicy::Kind::kPreferred:
      return "preferred";
    case MemPolicy::Kind::kBind:
      return "bind";
    case MemPolicy::Kind::kInterleave:
      return "interleave";
    case MemPolicy::Kind::kWeighted:
      return "weighted";
  }
  return "preferred";
}

std::optional<MemPolicy::Kind> parse_mem_policy_kind(std::string_view word) {
  for (MemPolicy::Kind k : {MemPolicy::Kind::kPreferred, MemPolicy::Kind::kBind,
                            MemPolicy::Kind::kInterleave, MemPolicy::Kind::kWeighted}) {
    if (word == kind_name(k)) return k;
  }
  return std::nullopt;
}

std::optional<MemPolicy> parse_mem_policy_text(std::string_view text) {
  MemPolicy p;
  if (text.starts_with("weighted:")) {
    // "3" of "weighted:3:1": a weight from 1 to kMaxMemWeight.
    auto weight = [](std::string_view w) -> std::optional<uint32_t> {
      Expected<uint32_t> n = parse_count(w, kMaxMemWeight);
      if (!n || *n == 0) return std::nullopt;
      return *n;
    };
    const std::string_view ratio = text.substr(9);
    const size_t colon = ratio.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    const std::optional<uint32_t> d = weight(ratio.substr(0, colon));
    const std::optional<uint32_t> c = weight(ratio.substr(colon + 1));
    if (!d || !c) return std::nullopt;
    // One ratio, one form: the weights the node is given are the smallest that make it.
    const uint32_t g = std::gcd(*d, *c);
    p.kind = MemPolicy::Kind::kWeighted;
    p.dram_weight = *d / g;
    p.cxl_weight = *c / g;
    return p;
  }
  std::optional<MemPolicy::Kind> kind = parse_mem_policy_kind(text);
  if (!kind || *kind == MemPolicy::Kind::kWeighted) return std::nullopt;
  p.kind = *kind;
  return p;
}
namespace {
template <typename E, size_t N>
std::string_view name_of(const std::pair<E, std::string_view> (&table)[N], E value) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return "?";
}
template <typename E, size_t N>
std::optional<E> value_of(const std::pair<E, std::string_view> (&table)[N], std::string_view s) {
  for (const auto& [v, name] : table) {
    if (name == s) return v;
  }
  return std::nullopt;
}

constexpr std::pair<DeviceType, std::string_view> kTypes[] = {
    {DeviceType::kGpu, "gpu"}, {DeviceType::kMem, "mem"}, {DeviceType::kNvme, "nvme"}};
constexpr std::pair<Health, std::string_view> kHealth[] = {
    {Health::kOk, "ok"}, {Health::kWarning, "warning"}, {Health::kCritical, "critical"}};
constexpr std::pair<DeviceState, std::string_view> kDeviceStates[] = {
    {DeviceState::kFree, "free"},
    {DeviceState::kAttached, "attached"},
    {DeviceState::kDrained, "drained"},
    {DeviceState::kFailed, "failed"},
    {DeviceState::kForeign, "foreign"}};
constexpr std::pair<CompositionState, std::string_view> kStates[] = {
    {CompositionState::kRequested, "requested"}, {CompositionState::kComposing, "composing"},
    {CompositionState::kReady, "ready"},         {CompositionState::kReleasing, "releasing"},
    {CompositionState::kReleased, "released"},   {CompositionState::kFailed, "failed"}};
}  // namespace

std::string_view to_string(DeviceType t) { return name_of(kTypes, t); }
std::optional<DeviceType> parse_device_type(std::string_view s) { return value_of(kTypes, s); }
std::string_view to_string(Health h) { return name_of(kHealth, h); }
std::optional<Health> parse_health(std::string_view s) { return value_of(kHealth, s); }
std::string_view to_string(DeviceState s) { return name_of(kDeviceStates, s); }
std::optional<DeviceState> parse_device_state(std::string_view s) {
  return value_of(kDeviceStates, s);
}
std::string_view to_string(CompositionState s) { return name_of(kStates, s); }
std::optional<CompositionState> parse_composition_state(std::string_view s) {
  return value_of(kStates, s);
}

std::optional<std::string> normal_pci_id(std::string_view s) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty() || s.size() > 4) return std::nullopt;
  std::string out = "0x";
  out.append(4 - s.size(), '0');
  for (char c : s) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
    out += c;
  }
  return out;
}

DeviceState Device::state() const {
  if (health == Health::kCritical) return DeviceState::kFailed;
  if (drained) return DeviceState::kDrained;
  if (composition_id) return DeviceState::kAttached;
  if (!holder.empty()) return DeviceState::kForeign;
  return DeviceState::kFree;
}

std::string to_string(const FailureDomain& d) { return d.level + ":" + d.name; }

std::optional<FailureDomain> parse_failure_domain(std::string_view s) {
  const size_t colon = s.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == s.size()) return std::nullopt;
  return FailureDomain{std::string(s.substr(0, colon)), std::string(s.substr(colon + 1))};
}

void bump(uint32_t& counter, bool add) {
  if (add) {
    ++counter;
  } else if (counter > 0) {
    --counter;
  }
}
void bump(uint64_t& counter, uint64_t amount, bool add) {
  if (add) {
    counter += amount;
  } else {
    counter -= std::min(counter, amount);
  }
}

void count_state(PoolRow& row, const Device& d, bool add) {
  const uint64_t cap = d.capacity_bytes;
  switch (d.state()) {
    case DeviceState::kFree:
      bump(row.free, add);
      bump(row.free_bytes, cap, add);
      bump(row.schedulable_bytes, cap, add);
      break;
    case DeviceState::kAttached:
      bump(row.attached, add);
      bump(row.schedulable_bytes, cap, add);
      break;
    case DeviceState::kForeign:
      bump(row.foreign, add);
      break;
    case DeviceState::kDrained:
      bump(row.drained, add);
      break;
    case DeviceState::kFailed:
      bump(row.failed, add);
      break;
  }
}

void count_device(PoolRow& row, const Device& d, bool add) {
  bump(row.total, add);
  bump(row.total_bytes, d.capacity_bytes, add);
  count_state(row, d, add);
}

const FailureDomain* find_domain(const std::vector<FailureDomain>& domains,
                                 std::string_view level) {
  for (const FailureDomain& d : domains) {
    if (d.level == level) return &d;
  }
  return nullptr;
}

const FailureDomain* Device::domain(std::string_view level) const {
  return find_domain(domains, level);
}

const FailureDomain* Host::domain(std::string_view level) const {
  return find_domain(domains, level);
}

uint32_t Host::slots(DeviceType t) const {
  switch (t) {
    case DeviceType::kGpu:
      return gpu_slots;
    case DeviceType::kMem:
      return mem_slots;
    case DeviceType::kNvme:
      return nvme_slots;
  }
  return 0;
}

std::optional<size_t> Host::zone_rank(std::string_view zone) const {
  auto it = std::find(zones.begin(), zones.end(), zone);
  if (it == zones.end()) return std::nullopt;
  return static_cast<size_t>(it - zones.begin());
}

std::string Request::to_string() const {
  std::string out;
  auto add = [&out](const std::string& part) {
    if (!out.empty()) out += ' ';
    out += part;
  };
  if (gpus > 0) add("gpus=" + (gpu_model.empty() ? "" : gpu_model + ":") + std::to_string(gpus));
  if (mem_bytes > 0) add("mem=" + format_size(mem_bytes));
  if (nvme > 0) add("nvme=" + std::to_string(nvme));
  return out.empty() ? "none" : out;
}

namespace {
constexpr std::string_view kCommentMark = "composer: ";
}  // namespace

std::string to_admin_comment(const ComposerComment& c) {
  std::string out = std::string(kCommentMark) + c.request.to_string();
  if (!c.workload.empty()) out += " workload=" + c.workload;
  out += " nodes=" + std::to_string(c.nodes);
  if (!c.avoid.empty()) out += " avoid=" + c.avoid;
  return out;
}

Expected<std::optional<ComposerComment>> parse_admin_comment(std::string_view comment) {
  // job_submit appends its part last, after "; " when the job had a comment of its own.
  const size_t at = comment.rfind(kCommentMark);
  if (at == std::string_view::npos || (at > 0 && comment[at - 1] != ' ')) {
    return std::optional<ComposerComment>();
  }
  ComposerComment c;
  const auto bad = [](std::string_view word, const std::string& why) {
    return Error{ErrorCode::kInvalidArgument,
                 "admin comment: '" + std::string(word) + "' " + why +
                     " (job_submit writes \"composer: gpus=[MODEL:]N mem=SIZE nvme=N "
                     "workload=CLASS nodes=N [avoid=NODES]\")"};
  };
  std::string_view rest = comment.substr(at + kCommentMark.size());
  while (!rest.empty()) {
    const size_t space = rest.find(' ');
    const std::string_view word = rest.substr(0, space);
    rest = space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1);
    if (word.empty() || word == "none") continue;
    const size_t eq = word.find('=');
    const std::string_view key = word.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : word.substr(eq + 1);
    if (key == "gpus") {
      const size_t colon = value.rfind(':');
      if (colon != std::string_view::npos)
        c.request.gpu_model = std::string(value.substr(0, colon));
      auto n =
          parse_count(colon == std::string_view::npos ? value : value.substr(colon + 1), 1u << 20);
      if (!n) return bad(word, "is not gpus=[MODEL:]N");
      c.request.gpus = *n;
    } else if (key == "mem") {
      auto m = parse_size(value);
      if (!m) return bad(word, "is not mem=SIZE: " + m.error().message);
      c.request.mem_bytes = *m;
    } else if (key == "nvme") {
      auto n = parse_count(value, 1u << 20);
      if (!n) return bad(word, "is not nvme=N");
      c.request.nvme = *n;
    } else if (key == "workload" && !value.empty()) {
      c.workload = std::string(value);
    } else if (key == "nodes") {
      auto n = parse_count(value, 1u << 20);
      if (!n || *n == 0) return bad(word, "is not nodes=N, N from 1");
      c.nodes = *n;
    } else if (key == "avoid" && !value.empty()) {
      c.avoid = std::string(value);
    } else {
      return bad(word, "is not one of gpus=, mem=, nvme=, workload=, nodes=, avoid=");
    }
  }
  return std::optional<ComposerComment>(std::move(c));
}

bool can_transition(CompositionState from, CompositionState to) {
  using S = CompositionState;
  switch (from) {
    case S::kRequested:
      return to == S::kComposing || to == S::kFailed;
    case S::kComposing:
      return to == S::kReady || to == S::kFailed;
    case S::kReady:
      return to == S::kReleasing || to == S::kFailed;
    case S::kReleasing:
      return to == S::kReleased || to == S::kFailed;
    case S::kReleased:
    case S::kFailed:
      return false;
  }
  return false;
}

bool is_live(CompositionState s) {
  return s != CompositionState::kReleased && s != CompositionState::kFailed;
}

}  // namespace composer
