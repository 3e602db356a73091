// The allocator: the in-memory view of the device pool and the picking of devices from it.
//
// Every device lives in `devices`; everything allocate() reads comes from indexes that
// account() keeps in step, so a request costs a few ordered-set look-ups per reachable zone
// instead of a scan of the pool:
//   free_by_zone   (type, zone)        -> free devices ordered by (model, id)
//   free_mem       zone                -> free memory blocks ordered by size, then id
//   free_models    (type, zone, model) -> free count
//   free_bytes     (type, zone)        -> free capacity
//   zone_totals    (type, zone)        -> every device, whatever its state (check_possible)
//   mem_sizes      zone                -> size -> block count, every block (check_possible)
//   rows           (type, model, zone) -> the summary row
//   held           node                -> devices the node holds per type (attach slots)
// Every mutation removes the device from the indexes, changes it, and adds it back.

#include "composer/core/allocator.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <set>
#include <utility>

#include "composer/common/log.h"
#include "composer/common/units.h"
#include "composer/model/tally.h"

namespace composer {
namespace {

using TypeZone = std::pair<DeviceType, std::string>;
using ModelId = std::pair<std::string, std::string>;
using SizeId = std::pair<uint64_t, std::string>;

// Memory blocks by size ascending; among equal sizes the lowest id sorts last, so the end of
// the set is always "the largest block, lowest id first". Comparable with a bare size so
// lower_bound(size) finds the first block of at least that size.
struct BySizeLowestIdLast {
  using is_transparent = void;
  bool operator()(const SizeId& a, const SizeId& b) const {
    if (a.first != b.first) return a.first < b.first;
    return a.second > b.second;
  }
  bool operator()(const SizeId& a, uint64_t size) const { return a.first < size; }
  bool operator()(uint64_t size, const SizeId& a) const { return size < a.first; }
};
using MemSet = std::set<SizeId, BySizeLowestIdLast>;

struct Totals {
  uint32_t count = 0;
  uint64_t bytes = 0;
};

size_t type_index(DeviceType t) { return static_cast<size_t>(t); }

std::string plural(uint64_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

std::string type_label(DeviceType t) {
  switch (t) {
    case DeviceType::kGpu:
      return "GPU";
    case DeviceType::kMem:
      return "memory";
    case DeviceType::kNvme:
      return "NVMe";
  }
  return "?";
}

// "2 GPUs of model A100-80G", "1 NVMe drive".
std::string asked_units(DeviceType t, uint64_t n, std::string_view model) {
  switch (t) {
    case DeviceType::kGpu: {
      std::string s = plural(n, "GPU", "GPUs");
      if (!model.empty()) s += " of model " + std::string(model);
      return s;
    }
    case DeviceType::kMem:
      return plural(n, "memory block", "memory blocks");
    case DeviceType::kNvme:
      return plural(n, "NVMe drive", "NVMe drives");
  }
  return "?";
}

std::string zone_list(const std::vector<std::string>& zones) {
  if (zones.empty()) return "no zone";
  std::string out = zones.size() == 1 ? "zone " : "zones ";
  for (size_t i = 0; i < zones.size(); ++i) {
    if (i > 0) out += ", ";
    out += zones[i];
  }
  return out;
}

std::string holds(const std::vector<std::string>& zones) {
  return zones.size() == 1 ? " holds " : " hold ";
}

Error insufficient(std::string message) {
  return Error{ErrorCode::kInsufficient, std::move(message)};
}
Error impossible(std::string message) {
  return Error{ErrorCode::kInvalidArgument, std::move(message)};
}

// Position of `it` strictly before `end` in `set` (both iterators of `set`).
bool before(const MemSet& set, MemSet::const_iterator it, MemSet::const_iterator end) {
  if (it == set.end()) return false;
  if (end == set.end()) return true;
  return set.key_comp()(*it, *end);
}

}  // namespace

struct Allocator::Impl {
  std::map<std::string, Host, std::less<>> hosts;
  std::map<std::string, Device, std::less<>> devices;

  std::map<TypeZone, std::set<ModelId>> free_by_zone;
  std::map<std::string, MemSet, std::less<>> free_mem;
  std::map<std::tuple<DeviceType, std::string, std::string>, uint32_t> free_models;
  std::map<TypeZone, uint64_t> free_bytes;
  std::map<TypeZone, Totals> zone_totals;
  std::map<std::string, std::map<uint64_t, uint32_t>, std::less<>> mem_sizes;
  std::map<std::tuple<DeviceType, std::string, std::string>, PoolRow> rows;
  std::map<std::string, std::array<uint32_t, 3>, std::less<>> held;
  // Placement: the rule of each class, and the class of each owned device (take()).
  std::map<std::string, policies::PlacementRule, std::less<>> rules;
  std::map<std::string, std::string, std::less<>> owner_class;

  void clear() {
    owner_class.clear();
    hosts.clear();
    devices.clear();
    free_by_zone.clear();
    free_mem.clear();
    free_models.clear();
    free_bytes.clear();
    zone_totals.clear();
    mem_sizes.clear();
    rows.clear();
    held.clear();
  }

  // Adds (add=true) or removes the device's contribution to every index.
  void account(const Device& d, bool add) {
    const uint64_t cap = d.capacity_bytes;
    const TypeZone tz{d.type, d.zone};

    auto row_key = std::make_tuple(d.type, d.model, d.zone);
    PoolRow& row = rows[row_key];
    row.type = d.type;
    row.model = d.model;
    row.zone = d.zone;
    count_device(row, d, add);
    account_indexes(d, add);
    if (row.total == 0) rows.erase(row_key);

    Totals& totals = zone_totals[tz];
    bump(totals.count, add);
    bump(totals.bytes, cap, add);
    if (totals.count == 0) zone_totals.erase(tz);

    if (d.type == DeviceType::kMem) {
      auto& sizes = mem_sizes[d.zone];
      bump(sizes[cap], add);
      if (sizes[cap] == 0) sizes.erase(cap);
      if (sizes.empty()) mem_sizes.erase(d.zone);
    }
  }

  // The indexes that depend on the device's state (free, attached, drained, ..., who holds
  // it), not on what it is: the free indexes and `held`.
  void account_indexes(const Device& d, bool add) {
    const uint64_t cap = d.capacity_bytes;
    if (d.allocatable()) {
      const TypeZone tz{d.type, d.zone};
      auto& set = free_by_zone[tz];
      if (add) {
        set.emplace(d.model, d.id);
      } else {
        set.erase(ModelId{d.model, d.id});
        if (set.empty()) free_by_zone.erase(tz);
      }
      auto model_key = std::make_tuple(d.type, d.zone, d.model);
      uint32_t& models = free_models[model_key];
      bump(models, add);
      if (models == 0) free_models.erase(model_key);
      uint64_t& bytes = free_bytes[tz];
      bump(bytes, cap, add);
      if (!add && bytes == 0 && !free_by_zone.contains(tz)) free_bytes.erase(tz);
      if (d.type == DeviceType::kMem) {
        auto& mem = free_mem[d.zone];
        if (add) {
          mem.emplace(cap, d.id);
        } else {
          mem.erase(SizeId{cap, d.id});
          if (mem.empty()) free_mem.erase(d.zone);
        }
      }
    }

    if (d.composition_id) {
      auto& counts = held[d.node];
      bump(counts[type_index(d.type)], add);
      if (counts == std::array<uint32_t, 3>{}) held.erase(d.node);
    }
  }

  // Runs `change` on the device with the indexes kept in step.
  template <typename F>
  void mutate(Device& d, F&& change) {
    account(d, false);
    change(d);
    account(d, true);
  }

  // mutate() for a change of state only (`change` leaves type, model, zone and capacity as
  // they are): the totals stay as they are, and the row is found once. Taking and giving back
  // devices is the allocator's commonest change (docs/BENCHMARKS.md, "Capacity planning").
  template <typename F>
  void mutate_state(Device& d, F&& change) {
    auto row = rows.find(std::make_tuple(d.type, d.model, d.zone));
    if (row == rows.end()) {  // not accounted (cannot happen): take the long way
      mutate(d, std::forward<F>(change));
      return;
    }
    count_state(row->second, d, false);
    account_indexes(d, false);
    change(d);
    count_state(row->second, d, true);
    account_indexes(d, true);
  }

  uint32_t held_count(std::string_view node, DeviceType t) const {
    auto it = held.find(node);
    return it == held.end() ? 0 : it->second[type_index(t)];
  }

  uint32_t free_count(DeviceType t, const std::string& zone, const std::string& model) const {
    if (model.empty()) {
      auto it = free_by_zone.find(TypeZone{t, zone});
      return it == free_by_zone.end() ? 0 : static_cast<uint32_t>(it->second.size());
    }
    auto it = free_models.find(std::make_tuple(t, zone, model));
    return it == free_models.end() ? 0 : it->second;
  }

  uint64_t free_capacity(DeviceType t, const std::string& zone) const {
    auto it = free_bytes.find(TypeZone{t, zone});
    return it == free_bytes.end() ? 0 : it->second;
  }

  // Attach slots still open on the node for type t.
  uint32_t slots_left(const Host& h, DeviceType t) const {
    const uint32_t used = held_count(h.node, t);
    const uint32_t slots = h.slots(t);
    return used >= slots ? 0 : slots - used;
  }

  Status slot_error(const Host& h, DeviceType t, const std::string& asked) const {
    if (h.slots(t) == 0) {
      return insufficient("node " + h.node + " has no " + type_label(t) +
                          " attach slots, asked for " + asked);
    }
    return insufficient(
        "node " + h.node + ": " +
        plural(h.slots(t), type_label(t) + " attach slot", type_label(t) + " attach slots") + ", " +
        std::to_string(held_count(h.node, t)) + " in use, asked for " + asked);
  }

  // Takes up to n free devices of type t (and model, when set) from one zone, in (model, id)
  // order. With prefer_one_model and no model given, a single model that can serve all n is
  // taken first (the first such model by name), so a job does not mix GPU models needlessly.
  uint32_t take_from_zone(DeviceType t, const std::string& zone, const std::string& model,
                          uint32_t n, bool prefer_one_model, std::vector<std::string>& out) const {
    auto set_it = free_by_zone.find(TypeZone{t, zone});
    if (set_it == free_by_zone.end() || n == 0) return 0;
    const auto& set = set_it->second;
    std::string only = model;
    if (only.empty() && prefer_one_model) {
      for (auto it = free_models.lower_bound(std::make_tuple(t, zone, std::string()));
           it != free_models.end() && std::get<0>(it->first) == t && std::get<1>(it->first) == zone;
           ++it) {
        if (it->second >= n) {
          only = std::get<2>(it->first);
          break;
        }
      }
    }
    // The candidates in (model, id) order, grouped by the failure domains they sit in (all
    // levels alike; a pool without domains is one group): pack takes its devices from as few
    // groups as it can, so one job's GPUs do not straddle two enclosures needlessly. The first
    // group (in that order) to reach n serves alone, found without reading further; when none
    // can, the largest groups first.
    struct ByContent {
      bool operator()(const std::vector<FailureDomain>* a,
                      const std::vector<FailureDomain>* b) const {
        return *a < *b;
      }
    };
    static const std::vector<FailureDomain> kNone;
    std::map<const std::vector<FailureDomain>*, size_t, ByContent> index;
    std::vector<std::vector<std::string>> groups;
    auto it = only.empty() ? set.begin() : set.lower_bound(ModelId{only, std::string()});
    for (; it != set.end(); ++it) {
      if (!only.empty() && it->first != only) break;
      const auto dev = devices.find(it->second);
      const auto* domains = dev == devices.end() ? &kNone : &dev->second.domains;
      const auto [at, added] = index.emplace(domains, groups.size());
      if (added) groups.emplace_back();
      std::vector<std::string>& group = groups[at->second];
      group.push_back(it->second);
      if (group.size() == n) {
        out.insert(out.end(), group.begin(), group.end());
        return n;
      }
    }
    std::stable_sort(groups.begin(), groups.end(),
                     [](const auto& a, const auto& b) { return a.size() > b.size(); });
    uint32_t taken = 0;
    for (const auto& group : groups) {
      for (const std::string& id : group) {
        if (taken == n) return taken;
        out.push_back(id);
        ++taken;
      }
    }
    return taken;
  }

  // GPUs: all in the nearest zone that can serve them all; otherwise nearest zones first.
  Status pick_gpus(const Host& h, const Request& r, std::vector<std::string>& out) const {
    const uint32_t n = r.gpus;
    if (n > slots_left(h, DeviceType::kGpu)) {
      return slot_error(h, DeviceType::kGpu, std::to_string(n));
    }
    uint64_t free_total = 0;
    for (const auto& zone : h.zones) free_total += free_count(DeviceType::kGpu, zone, r.gpu_model);
    if (free_total < n) return shortage(h, DeviceType::kGpu, n, r.gpu_model, free_total);
    for (const auto& zone : h.zones) {
      if (free_count(DeviceType::kGpu, zone, r.gpu_model) >= n) {
        take_from_zone(DeviceType::kGpu, zone, r.gpu_model, n, true, out);
        return Status::Ok();
      }
    }
    uint32_t remaining = n;
    for (const auto& zone : h.zones) {
      remaining -= take_from_zone(DeviceType::kGpu, zone, r.gpu_model, remaining, false, out);
    }
    return Status::Ok();
  }

  // NVMe drives: nearest zone first, then the next, by (model, id).
  Status pick_nvme(const Host& h, const Request& r, std::vector<std::string>& out) const {
    const uint32_t n = r.nvme;
    if (n > slots_left(h, DeviceType::kNvme)) {
      return slot_error(h, DeviceType::kNvme, std::to_string(n));
    }
    uint64_t free_total = 0;
    for (const auto& zone : h.zones) free_total += free_count(DeviceType::kNvme, zone, "");
    if (free_total < n) return shortage(h, DeviceType::kNvme, n, "", free_total);
    uint32_t remaining = n;
    for (const auto& zone : h.zones) {
      remaining -= take_from_zone(DeviceType::kNvme, zone, "", remaining, false, out);
    }
    return Status::Ok();
  }

  Status shortage(const Host& h, DeviceType t, uint64_t n, const std::string& model,
                  uint64_t free_total) const {
    if (h.zones.empty()) {
      return insufficient("node " + h.node + ": asked for " + asked_units(t, n, model) +
                          ", but the node reaches no fabric zone");
    }
    std::string have =
        free_total == 0 ? "none are"
                        : "only " + std::to_string(free_total) + (free_total == 1 ? " is" : " are");
    return insufficient("node " + h.node + ": asked for " + asked_units(t, n, model) + ", " + have +
                        " free in " + zone_list(h.zones));
  }

  // The memory rule. Greedy over the free blocks of a set of zones: while no single block
  // covers what is still missing, take the largest block (nearer zone, then lower id, on a
  // tie); then finish with the smallest block that covers the rest. This uses the fewest
  // blocks possible for those zones (the k largest blocks are the first to cover the request,
  // and the greedy takes exactly k), and the last block keeps the waste small.
  // Returns nullopt when more than `limit` blocks would be needed or the zones run out.
  std::optional<std::vector<std::string>> greedy_blocks(const std::vector<std::string>& zones,
                                                        uint64_t need, uint64_t limit) const {
    struct Range {
      const MemSet* set;
      MemSet::const_iterator end;  // blocks in [begin, end) are still untaken
    };
    std::vector<Range> ranges;
    for (const auto& zone : zones) {
      auto it = free_mem.find(zone);
      if (it != free_mem.end()) ranges.push_back(Range{&it->second, it->second.end()});
    }
    std::vector<std::string> picks;
    uint64_t remaining = need;
    while (remaining > 0) {
      if (picks.size() >= limit) return std::nullopt;
      // The smallest untaken block that covers the rest, nearer zone on a tie.
      const Range* fit_range = nullptr;
      MemSet::const_iterator fit;
      for (const Range& range : ranges) {
        auto it = range.set->lower_bound(remaining);
        if (!before(*range.set, it, range.end)) continue;
        if (fit_range == nullptr || it->first < fit->first) {
          fit_range = &range;
          fit = it;
        }
      }
      if (fit_range != nullptr) {
        // Lowest id among untaken blocks of that size: the last one of its size group.
        auto group_end = fit_range->set->upper_bound(fit->first);
        if (before(*fit_range->set, fit_range->end, group_end)) group_end = fit_range->end;
        picks.push_back(std::prev(group_end)->second);
        return picks;
      }
      // No block covers the rest: take the largest one.
      Range* top = nullptr;
      for (Range& range : ranges) {
        if (range.end == range.set->begin()) continue;
        if (top == nullptr || std::prev(range.end)->first > std::prev(top->end)->first) {
          top = &range;
        }
      }
      if (top == nullptr || std::prev(top->end)->first == 0) return std::nullopt;
      --top->end;
      picks.push_back(top->end->second);
      remaining -= top->end->first;
    }
    return picks;
  }

  // Memory: one zone when any can serve the request within the slots, nearest first;
  // otherwise the nearest zones whose free memory covers it, widened one zone at a time
  // while the blocks they offer need more attach slots than the node has left.
  Status pick_mem(const Host& h, const Request& r, std::vector<std::string>& out) const {
    const uint64_t need = r.mem_bytes;
    const uint32_t left = slots_left(h, DeviceType::kMem);
    const std::string asked = format_size(need) + " of memory";
    if (left == 0) return slot_error(h, DeviceType::kMem, asked);
    uint64_t free_total = 0;
    for (const auto& zone : h.zones) free_total += free_capacity(DeviceType::kMem, zone);
    if (free_total < need) {
      if (h.zones.empty()) {
        return insufficient("node " + h.node + ": asked for " + asked +
                            ", but the node reaches no fabric zone");
      }
      const std::string have =
          free_total == 0 ? "none is free" : "only " + format_size(free_total) + " free";
      return insufficient("node " + h.node + ": asked for " + asked + ", " + have + " in " +
                          zone_list(h.zones));
    }
    for (const auto& zone : h.zones) {
      if (free_capacity(DeviceType::kMem, zone) < need) continue;
      if (auto picks = greedy_blocks({zone}, need, left)) {
        out.insert(out.end(), picks->begin(), picks->end());
        return Status::Ok();
      }
    }
    std::vector<std::string> zones;
    uint64_t covered = 0;
    for (const auto& zone : h.zones) {
      zones.push_back(zone);
      covered += free_capacity(DeviceType::kMem, zone);
      if (covered < need) continue;
      if (auto picks = greedy_blocks(zones, need, left)) {
        out.insert(out.end(), picks->begin(), picks->end());
        return Status::Ok();
      }
    }
    auto fewest = greedy_blocks(h.zones, need, std::numeric_limits<uint64_t>::max());
    const size_t blocks = fewest ? fewest->size() : 0;
    return slot_error(h, DeviceType::kMem,
                      asked + ", which takes " + plural(blocks, "block", "blocks") +
                          " of the free ones in " + zone_list(h.zones));
  }

  // Every device of type t reachable from h, whatever its state.
  uint64_t reachable_total(const Host& h, DeviceType t, const std::string& model) const {
    uint64_t total = 0;
    for (const auto& zone : h.zones) {
      if (model.empty()) {
        auto it = zone_totals.find(TypeZone{t, zone});
        if (it != zone_totals.end()) total += it->second.count;
      } else {
        auto it = rows.find(std::make_tuple(t, model, zone));
        if (it != rows.end()) total += it->second.total;
      }
    }
    return total;
  }

  std::vector<std::string> reachable_models(const Host& h, DeviceType t) const {
    std::set<std::string> models;
    for (const auto& [key, row] : rows) {
      if (std::get<0>(key) == t && h.zone_rank(std::get<2>(key))) models.insert(row.model);
    }
    return {models.begin(), models.end()};
  }

  Status check_count(const Host& h, DeviceType t, uint32_t n, const std::string& model) const {
    if (n == 0) return Status::Ok();
    if (h.slots(t) == 0) {
      return impossible("node " + h.node + " has no " + type_label(t) +
                        " attach slots, so it can never take " + asked_units(t, n, model));
    }
    if (n > h.slots(t)) {
      return impossible(
          "node " + h.node + " has " +
          plural(h.slots(t), type_label(t) + " attach slot", type_label(t) + " attach slots") +
          ", so it can never take " + asked_units(t, n, model));
    }
    if (h.zones.empty()) {
      return impossible("node " + h.node + " reaches no fabric zone, so it can never take " +
                        asked_units(t, n, model));
    }
    if (!model.empty() && reachable_total(h, t, model) == 0) {
      std::vector<std::string> models = reachable_models(h, t);
      std::string known = "there are none";
      if (!models.empty()) {
        known = "known models there: ";
        for (size_t i = 0; i < models.size(); ++i) known += (i ? ", " : "") + models[i];
      }
      return impossible("unknown GPU model '" + model + "': no such GPU in " + zone_list(h.zones) +
                        " reached by node " + h.node + " (" + known + ")");
    }
    const uint64_t total = reachable_total(h, t, model);
    if (total < n) {
      return impossible("node " + h.node + ": asked for " + asked_units(t, n, model) + ", but " +
                        zone_list(h.zones) + holds(h.zones) + "only " + std::to_string(total));
    }
    return Status::Ok();
  }

  // One free device that may serve a spread: its zone rank and its domain at the level.
  struct Candidate {
    size_t rank = 0;
    std::string model;
    std::string id;
    uint64_t size = 0;
    std::string domain;
  };

  // The spread rule over the free devices of this (filtered) pool: the first device of each
  // of the first N domains (nearest zone, then domain name; for memory the largest block
  // first), then the rest in the order pack would take them.
  Status pick_spread(const Host& h, DeviceType t, uint64_t amount, const std::string& model,
                     const policies::PlacementRule& r, const std::string& rule_text,
                     std::vector<std::string>& out) const {
    const bool mem = t == DeviceType::kMem;
    const std::string asked =
        mem ? format_size(amount) + " of memory" : asked_units(t, amount, model);
    const uint32_t left = slots_left(h, t);
    if (!mem && amount > left) return slot_error(h, t, std::to_string(amount));
    if (mem && left < r.count) {
      return insufficient("node " + h.node + ": " + rule_text + " needs " +
                          plural(r.count, "memory attach slot", "memory attach slots") + " for " +
                          asked + ", " + std::to_string(left) + " left");
    }
    if (!mem && amount < r.count) {
      return insufficient("node " + h.node + ": " + rule_text + " spreads over " +
                          std::to_string(r.count) + " " + r.level +
                          " domains, but the job asks for " + asked);
    }
    std::vector<Candidate> all;
    for (size_t rank = 0; rank < h.zones.size(); ++rank) {
      auto it = free_by_zone.find(TypeZone{t, h.zones[rank]});
      if (it == free_by_zone.end()) continue;
      for (const auto& [m, id] : it->second) {
        if (!model.empty() && m != model) continue;
        const Device& d = devices.find(id)->second;
        const FailureDomain* dom = d.domain(r.level);
        if (dom == nullptr) continue;
        all.push_back(Candidate{rank, m, id, d.capacity_bytes, dom->name});
      }
    }
    auto order = [mem](const Candidate& a, const Candidate& b) {
      if (mem && a.size != b.size) return a.size > b.size;
      return std::tie(a.rank, a.model, a.id) < std::tie(b.rank, b.model, b.id);
    };
    std::stable_sort(all.begin(), all.end(), order);
    // The best candidate of each domain, the domains in the order of their best.
    std::vector<const Candidate*> firsts;
    std::set<std::string> seen;
    for (const Candidate& c : all) {
      if (seen.insert(c.domain).second) firsts.push_back(&c);
    }
    std::stable_sort(firsts.begin(), firsts.end(),
                     [&order](const Candidate* a, const Candidate* b) {
                       if (order(*a, *b) != order(*b, *a)) return order(*a, *b);
                       return a->domain < b->domain;
                     });
    if (firsts.size() < r.count) {
      return insufficient("node " + h.node + ": asked for " + asked + ", but " + rule_text +
                          " needs free " + type_label(t) + " in " + std::to_string(r.count) + " " +
                          r.level + " domains and only " + std::to_string(firsts.size()) +
                          " reachable from the node " + (firsts.size() == 1 ? "has" : "have") +
                          " any");
    }
    std::vector<std::string> picks;
    std::set<std::string> taken;
    uint64_t covered = 0;
    for (size_t i = 0; i < r.count; ++i) {
      picks.push_back(firsts[i]->id);
      taken.insert(firsts[i]->id);
      covered += mem ? firsts[i]->size : 1;
    }
    for (const Candidate& c : all) {
      if (covered >= amount) break;
      if (taken.contains(c.id)) continue;
      picks.push_back(c.id);
      covered += mem ? c.size : 1;
    }
    if (covered < amount) {
      return insufficient("node " + h.node + ": asked for " + asked + ", but under " + rule_text +
                          " only " + (mem ? format_size(covered) : std::to_string(covered)) +
                          (mem            ? ""
                           : covered == 1 ? " is"
                                          : " are") +
                          " free in " + r.level + " domains reachable from the node");
    }
    if (mem && picks.size() > left) {
      return insufficient("node " + h.node + ": " + rule_text + " takes " +
                          plural(picks.size(), "block", "blocks") + " for " + asked + ", " +
                          std::to_string(left) + " memory attach slots left");
    }
    out.insert(out.end(), picks.begin(), picks.end());
    return Status::Ok();
  }

  Status check_mem(const Host& h, uint64_t need) const {
    if (need == 0) return Status::Ok();
    const std::string asked = format_size(need) + " of memory";
    if (h.mem_slots == 0) {
      return impossible("node " + h.node + " has no memory attach slots, so it can never take " +
                        asked);
    }
    if (h.zones.empty()) {
      return impossible("node " + h.node + " reaches no fabric zone, so it can never take " +
                        asked);
    }
    std::map<uint64_t, uint64_t, std::greater<>> sizes;
    uint64_t total = 0;
    for (const auto& zone : h.zones) {
      auto it = mem_sizes.find(zone);
      if (it == mem_sizes.end()) continue;
      for (const auto& [size, count] : it->second) {
        sizes[size] += count;
        total += size * count;
      }
    }
    if (total < need) {
      return impossible("node " + h.node + ": asked for " + asked + ", but " + zone_list(h.zones) +
                        holds(h.zones) + "only " + format_size(total));
    }
    // The fewest blocks that could ever cover the request: the largest ones.
    uint64_t blocks = 0;
    uint64_t covered = 0;
    for (const auto& [size, count] : sizes) {
      if (size == 0) break;
      const uint64_t missing = need - covered;
      const uint64_t use = std::min<uint64_t>(count, (missing + size - 1) / size);
      blocks += use;
      covered += use * size;
      if (covered >= need) break;
    }
    if (blocks > h.mem_slots) {
      return impossible("node " + h.node + " has " +
                        plural(h.mem_slots, "memory attach slot", "memory attach slots") +
                        ", but " + asked + " takes at least " + plural(blocks, "block", "blocks") +
                        " from " + zone_list(h.zones));
    }
    return Status::Ok();
  }
};

Allocator::Allocator() : impl_(std::make_unique<Impl>()) {}
Allocator::~Allocator() = default;

void Allocator::load(const std::vector<Host>& hosts, std::vector<Device> devices) {
  impl_->clear();
  for (const Host& h : hosts) impl_->hosts[h.node] = h;
  for (Device& d : devices) {
    // The key is copied from d.id before d is moved into the value.
    auto [it, inserted] = impl_->devices.try_emplace(d.id, std::move(d));
    if (!inserted) {
      log::warning("allocator: device listed twice, keeping the last", {{"device", d.id}});
      impl_->mutate(it->second, [&d](Device& dev) { dev = std::move(d); });
      continue;
    }
    impl_->account(it->second, true);
  }
}

void Allocator::upsert_host(const Host& host) { impl_->hosts[host.node] = host; }

void Allocator::upsert_device(const Device& device) {
  auto it = impl_->devices.find(device.id);
  if (it == impl_->devices.end()) {
    auto [added, inserted] = impl_->devices.emplace(device.id, device);
    (void)inserted;
    impl_->account(added->second, true);
    return;
  }
  impl_->mutate(it->second, [&device](Device& d) {
    d.type = device.type;
    d.model = device.model;
    d.capacity_bytes = device.capacity_bytes;
    d.zone = device.zone;
    d.address = device.address;
    d.identity = device.identity;
    d.health = device.health;
    d.domains = device.domains;
  });
}

const Host* Allocator::host(std::string_view node) const {
  auto it = impl_->hosts.find(node);
  return it == impl_->hosts.end() ? nullptr : &it->second;
}

const Device* Allocator::device(std::string_view id) const {
  auto it = impl_->devices.find(id);
  return it == impl_->devices.end() ? nullptr : &it->second;
}

std::vector<std::string> Allocator::in_domain(const FailureDomain& domain) const {
  std::vector<std::string> out;
  for (const auto& [id, d] : impl_->devices) {
    if (d.in(domain)) out.push_back(id);
  }
  return out;
}

std::map<DeviceType, std::set<FailureDomain>> Allocator::domains() const {
  std::map<DeviceType, std::set<FailureDomain>> out;
  for (const auto& [id, d] : impl_->devices) out[d.type].insert(d.domains.begin(), d.domains.end());
  return out;
}

std::map<FailureDomain, uint32_t> Allocator::failed_by_domain() const {
  std::map<FailureDomain, uint32_t> out;
  for (const auto& [id, d] : impl_->devices) {
    for (const FailureDomain& dom : d.domains) out[dom] += d.health == Health::kCritical ? 1 : 0;
  }
  return out;
}

std::vector<Host> Allocator::hosts() const {
  std::vector<Host> out;
  out.reserve(impl_->hosts.size());
  for (const auto& [node, h] : impl_->hosts) out.push_back(h);
  return out;
}

const policies::PlacementRule& Allocator::placement(std::string_view workload) const {
  static const policies::PlacementRule kPack;
  auto it = impl_->rules.find(workload);
  return it == impl_->rules.end() ? kPack : it->second;
}

void Allocator::set_placement(std::map<std::string, policies::PlacementRule, std::less<>> rules) {
  impl_->rules = std::move(rules);
}

Expected<std::vector<std::string>> Allocator::allocate(std::string_view node,
                                                       const Request& request,
                                                       std::string_view workload) const {
  using Kind = policies::PlacementRule::Kind;
  const Host* h = host(node);
  if (h == nullptr) return Error{ErrorCode::kNotFound, "unknown node '" + std::string(node) + "'"};
  const policies::PlacementRule& rule = placement(workload);
  // The avoid-shared rules of the other classes: their domains are theirs while they hold them.
  std::vector<std::pair<std::string, std::string>> guarded;  // (level, class)
  for (const auto& [cls, r] : impl_->rules) {
    if (r.kind == Kind::kAvoidShared && cls != workload) guarded.emplace_back(r.level, cls);
  }
  const Impl* pool = impl_.get();
  Impl filtered;
  std::string guard_note;
  if (rule.kind != Kind::kPack || !guarded.empty()) {
    // Which classes hold devices in each domain now.
    std::map<FailureDomain, std::set<std::string>> used;
    for (const auto& [id, d] : impl_->devices) {
      if (!d.composition_id) continue;
      auto owner = impl_->owner_class.find(id);
      const std::string cls = owner == impl_->owner_class.end() ? "" : owner->second;
      for (const FailureDomain& dom : d.domains) used[dom].insert(cls);
    }
    auto holds = [&used](const FailureDomain& dom, auto&& pred) {
      auto it = used.find(dom);
      if (it == used.end()) return false;
      return std::any_of(it->second.begin(), it->second.end(), pred);
    };
    filtered.hosts.emplace(h->node, *h);
    if (auto it = impl_->held.find(h->node); it != impl_->held.end()) {
      filtered.held.emplace(it->first, it->second);
    }
    bool left_out = false;
    // The free devices of the node's zones, from the index (not a scan of the whole pool).
    std::vector<const Device*> reachable;
    for (const std::string& zone : h->zones) {
      for (DeviceType t : kAllDeviceTypes) {
        auto free = impl_->free_by_zone.find(TypeZone{t, zone});
        if (free == impl_->free_by_zone.end()) continue;
        for (const auto& model_id : free->second) {
          reachable.push_back(&impl_->devices.find(model_id.second)->second);
        }
      }
    }
    for (const Device* device : reachable) {
      const Device& d = *device;
      bool ok = true;
      for (const auto& guard : guarded) {
        const std::string& cls = guard.second;
        const FailureDomain* dom = d.domain(guard.first);
        if (dom != nullptr &&
            holds(*dom, [&cls](const std::string& holder) { return holder == cls; })) {
          ok = false;
          left_out = true;
        }
      }
      if (rule.kind == Kind::kAvoidShared) {
        const FailureDomain* dom = d.domain(rule.level);
        ok = ok && dom != nullptr &&
             !holds(*dom, [workload](const std::string& holder) { return holder != workload; });
      }
      if (!ok) continue;
      auto [copy, inserted] = filtered.devices.emplace(d.id, d);
      if (inserted) filtered.account(copy->second, true);
    }
    pool = &filtered;
    if (left_out) guard_note = " (domains that avoid-shared classes hold are left out)";
  }
  const std::string rule_text = policies::rule_sentence(rule, workload);
  auto wrap = [&](const Status& s) -> Error {
    std::string message = s.error().message;
    if (rule.kind != Kind::kPack) message += ", under " + rule_text;
    return Error{s.error().code, message + guard_note};
  };
  auto spread = [&rule](DeviceType t) {
    return rule.kind == Kind::kSpread && (!rule.type || *rule.type == t);
  };
  std::vector<std::string> out;
  if (request.gpus > 0) {
    Status s = spread(DeviceType::kGpu) ? pool->pick_spread(*h, DeviceType::kGpu, request.gpus,
                                                            request.gpu_model, rule, rule_text, out)
                                        : pool->pick_gpus(*h, request, out);
    if (!s) return wrap(s);
  }
  if (request.mem_bytes > 0) {
    Status s = spread(DeviceType::kMem) ? pool->pick_spread(*h, DeviceType::kMem, request.mem_bytes,
                                                            "", rule, rule_text, out)
                                        : pool->pick_mem(*h, request, out);
    if (!s) return wrap(s);
  }
  if (request.nvme > 0) {
    Status s = spread(DeviceType::kNvme) ? pool->pick_spread(*h, DeviceType::kNvme, request.nvme,
                                                             "", rule, rule_text, out)
                                         : pool->pick_nvme(*h, request, out);
    if (!s) return wrap(s);
  }
  return out;
}

void Allocator::take(std::string_view node, const std::vector<std::string>& ids,
                     int64_t composition_id, std::string_view workload) {
  for (const std::string& id : ids) {
    auto it = impl_->devices.find(id);
    if (it == impl_->devices.end()) {
      log::warning("allocator: take of an unknown device ignored", {{"device", id}});
      continue;
    }
    impl_->mutate_state(it->second, [&](Device& d) {
      d.composition_id = composition_id;
      d.node = std::string(node);
    });
    impl_->owner_class.insert_or_assign(id, std::string(workload));
  }
}

void Allocator::give_back(const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    auto it = impl_->devices.find(id);
    if (it == impl_->devices.end()) {
      log::warning("allocator: give_back of an unknown device ignored", {{"device", id}});
      continue;
    }
    impl_->mutate_state(it->second, [](Device& d) {
      d.composition_id.reset();
      d.node.clear();
    });
    impl_->owner_class.erase(id);
  }
}

void Allocator::set_drained(std::string_view id, bool drained, std::string_view reason) {
  auto it = impl_->devices.find(id);
  if (it == impl_->devices.end()) {
    log::warning("allocator: drain of an unknown device ignored", {{"device", std::string(id)}});
    return;
  }
  impl_->mutate_state(it->second, [&](Device& d) {
    d.drained = drained;
    d.drain_reason = drained ? std::string(reason) : std::string();
  });
}

void Allocator::set_health(std::string_view id, Health health) {
  auto it = impl_->devices.find(id);
  if (it == impl_->devices.end()) {
    log::warning("allocator: health of an unknown device ignored", {{"device", std::string(id)}});
    return;
  }
  impl_->mutate_state(it->second, [health](Device& d) { d.health = health; });
}

void Allocator::set_holder(std::string_view id, std::string_view holder) {
  auto it = impl_->devices.find(id);
  if (it == impl_->devices.end() || it->second.holder == holder) return;
  impl_->mutate_state(it->second, [holder](Device& d) { d.holder = std::string(holder); });
}

// Counts every device the node reaches, drained and failed ones included: a drain is lifted
// and a failed device replaced, so only missing hardware or too few slots make a request
// impossible.
Status Allocator::check_possible(std::string_view node, const Request& request,
                                 std::string_view workload) const {
  using Kind = policies::PlacementRule::Kind;
  const Host* h = host(node);
  if (h == nullptr) return Error{ErrorCode::kNotFound, "unknown node '" + std::string(node) + "'"};
  const policies::PlacementRule& rule = placement(workload);
  if (rule.kind != Kind::kPack) {
    for (DeviceType t : kAllDeviceTypes) {
      const uint64_t n = t == DeviceType::kGpu    ? request.gpus
                         : t == DeviceType::kNvme ? request.nvme
                                                  : (request.mem_bytes > 0 ? 1 : 0);
      if (n == 0) continue;
      // Every device of the type the node reaches in a domain of the level, whatever its state.
      std::set<std::string> domains;
      for (const auto& [id, d] : impl_->devices) {
        if (d.type != t || !h->zone_rank(d.zone)) continue;
        if (t == DeviceType::kGpu && !request.gpu_model.empty() && d.model != request.gpu_model) {
          continue;
        }
        const FailureDomain* dom = d.domain(rule.level);
        if (dom == nullptr) continue;
        domains.insert(dom->name);
      }
      const std::string never =
          policies::placement_never(rule, workload, t, n, domains.size(), h->mem_slots,
                                    {"node " + h->node + " reaches", "node " + h->node + " has"});
      if (!never.empty()) return impossible(never);
    }
  }
  if (Status s = impl_->check_count(*h, DeviceType::kGpu, request.gpus, request.gpu_model); !s) {
    return s;
  }
  if (Status s = impl_->check_mem(*h, request.mem_bytes); !s) return s;
  return impl_->check_count(*h, DeviceType::kNvme, request.nvme, "");
}

std::vector<PoolRow> Allocator::summary() const {
  std::vector<PoolRow> out;
  out.reserve(impl_->rows.size());
  for (const auto& [key, row] : impl_->rows) out.push_back(row);
  return out;
}

}  // namespace composer
