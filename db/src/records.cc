#include "records.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include "composer/common/strings.h"

namespace composer::db {
namespace {

// A size the schema's signed 64-bit integers hold.
bool storable_size(uint64_t bytes) {
  return bytes <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

// A domain the domains column can hold: kInvalidArgument naming `what` otherwise.
Status storable_domains(const std::vector<FailureDomain>& domains, const std::string& what) {
  for (const FailureDomain& domain : domains) {
    if (!valid_list_item(to_string(domain)) || !parse_failure_domain(to_string(domain))) {
      return Error(ErrorCode::kInvalidArgument,
                   "store: " + what + ": failure domain " + db::quoted(to_string(domain)) +
                       " is not valid: level and name must be non-empty, without commas or "
                       "spaces, and the level without ':'");
    }
  }
  return Status::Ok();
}

}  // namespace

void split_into(std::string_view text, std::vector<std::string>& out) {
  size_t n = 0;
  while (!text.empty()) {
    const size_t at = text.find(kListSeparator);
    if (n == out.size()) out.emplace_back();
    out[n++].assign(text.substr(0, at));
    if (at == std::string_view::npos) break;
    text.remove_prefix(at + kListSeparator.size());
  }
  out.resize(n);
}

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> out;
  split_into(text, out);
  return out;
}

std::string domain_list(const std::vector<FailureDomain>& domains) {
  std::vector<std::string> items;
  for (const FailureDomain& d : domains) items.push_back(to_string(d));
  return join(items, kListSeparator);
}

std::vector<FailureDomain> read_domains(std::string_view column, const std::string& what) {
  std::vector<FailureDomain> out;
  for (const std::string& item : split(column)) {
    auto domain = parse_failure_domain(item);
    if (!domain) {
      fail(ErrorCode::kInternal,
           what + ": malformed failure domain " + db::quoted(item) + " in the database");
    }
    out.push_back(std::move(*domain));
  }
  return out;
}

bool valid_list_item(std::string_view s) {
  if (s.empty()) return false;
  return std::none_of(s.begin(), s.end(), [](char ch) {
    return ch == ',' || static_cast<unsigned char>(ch) <= ' ' || ch == 0x7f;
  });
}

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

void refuse(ErrorCode code, std::string message) { throw Failure(Error(code, std::move(message))); }

std::string failure_reason(const Failure& f) {
  std::string_view message = f.error().message;
  constexpr std::string_view kPrefix = "store: ";
  if (message.substr(0, kPrefix.size()) == kPrefix) message.remove_prefix(kPrefix.size());
  return std::string(message);
}

Status storable(const std::vector<Host>& hosts) {
  for (const Host& h : hosts) {
    if (!valid_list_item(h.node)) {
      return Error(ErrorCode::kInvalidArgument,
                   "store: host node name " + db::quoted(h.node) +
                       " is not valid: it must be non-empty, without commas or spaces");
    }
    for (const auto& zone : h.zones) {
      if (!valid_list_item(zone)) {
        return Error(ErrorCode::kInvalidArgument,
                     "store: host " + h.node + ": zone " + db::quoted(zone) +
                         " is not valid: it must be non-empty, without commas or spaces");
      }
    }
    if (Status s = storable_domains(h.domains, "host " + h.node); !s) return s;
  }
  return Status::Ok();
}

Status storable(const std::vector<Device>& devices) {
  for (const Device& d : devices) {
    if (!valid_list_item(d.id)) {
      return Error(ErrorCode::kInvalidArgument,
                   "store: device id " + db::quoted(d.id) +
                       " is not valid: it must be non-empty, without commas or spaces");
    }
    if (Status s = storable_domains(d.domains, "device " + d.id); !s) return s;
    if (!storable_size(d.capacity_bytes)) {
      return Error(ErrorCode::kInvalidArgument,
                   "store: device " + d.id + ": capacity " + std::to_string(d.capacity_bytes) +
                       " bytes is larger than the largest storable size (2^63-1)");
    }
  }
  return Status::Ok();
}

Status storable(const PolicyVersion& version) {
  if (version.sha256.size() != 64) {
    return Error(ErrorCode::kInvalidArgument, "store: policy sha256 " + db::quoted(version.sha256) +
                                                  " is not a SHA-256 in hex (64 characters)");
  }
  return Status::Ok();
}

Status creatable(const Composition& c, const std::vector<std::string>& ids) {
  if (c.state != CompositionState::kRequested && c.state != CompositionState::kComposing) {
    return Error(ErrorCode::kInvalidArgument,
                 "store: a new composition starts in state requested or composing, not " +
                     std::string(to_string(c.state)));
  }
  if (!valid_list_item(c.node)) {
    return Error(ErrorCode::kInvalidArgument,
                 "store: composition node name " + db::quoted(c.node) +
                     " is not valid: it must be non-empty, without commas or spaces");
  }
  if (!storable_size(c.request.mem_bytes)) {
    return Error(ErrorCode::kInvalidArgument,
                 "store: mem_bytes " + std::to_string(c.request.mem_bytes) +
                     " is larger than the largest storable size (2^63-1)");
  }
  std::set<std::string_view> seen;
  for (const auto& id : ids) {
    if (!seen.insert(id).second) {
      return Error(ErrorCode::kInvalidArgument,
                   "store: device " + db::quoted(id) + " is listed twice for one composition");
    }
  }
  return Status::Ok();
}

Status transitionable(int64_t id, CompositionState from, CompositionState to) {
  if (can_transition(from, to)) return Status::Ok();
  return Error(ErrorCode::kConflict, "composition " + std::to_string(id) +
                                         ": a composition cannot go from " +
                                         std::string(to_string(from)) + " to " +
                                         std::string(to_string(to)) + "; nothing changed");
}

Status check_range(int64_t since_ms, int64_t until_ms) {
  if (since_ms > until_ms) {
    return Error(ErrorCode::kInvalidArgument, "since_ms " + std::to_string(since_ms) +
                                                  " is after until_ms " + std::to_string(until_ms) +
                                                  "; the range must start before it ends");
  }
  return Status::Ok();
}

std::vector<std::string> device_ids(const Composition& c) {
  std::vector<std::string> ids;
  ids.reserve(c.devices.size());
  for (const auto& d : c.devices) ids.push_back(d.id);
  return ids;
}

std::string requested_detail(const Composition& c) {
  return c.mem_policy.empty() ? std::string() : "mem_policy=" + c.mem_policy;
}

Event composition_event(const Composition& c, std::string_view kind, std::string_view from,
                        std::string_view to, std::string_view detail, int64_t now_ms) {
  Event e;
  e.ts_ms = now_ms;
  e.kind = kind;
  e.composition_id = c.id;
  e.owner = c.owner;
  e.node = c.node;
  e.window = c.window;
  e.from_state = from;
  e.to_state = to;
  e.devices = device_ids(c);
  e.detail = detail;
  return e;
}

Event device_event(const std::optional<Composition>& owner, const Device& d, std::string_view kind,
                   std::string_view from, std::string_view to, std::string_view user,
                   std::string_view detail, int64_t now_ms) {
  Event e;
  if (owner) e = composition_event(*owner, kind, from, to, detail, now_ms);
  e.ts_ms = now_ms;
  e.kind = kind;
  e.from_state = from;
  e.to_state = to;
  e.devices = {d.id};
  e.detail = detail;
  if (!user.empty()) e.owner.user = user;
  return e;
}

std::string holder_detail(std::string_view detail, std::string_view holder) {
  std::string why(detail);
  if (why.empty()) why = holder.empty() ? "the fabric freed it" : "held by " + std::string(holder);
  return why;
}

std::string live_job_conflict(const Composition& c, const std::optional<Composition>& live) {
  std::string why =
      "job " + std::to_string(c.owner.job_id) + " on " + c.node + " already has a live composition";
  if (live) {
    why += " (" + std::to_string(live->id) + ", " + std::string(to_string(live->state)) + ")";
  }
  return why;
}

std::string live_device_conflict(const Device& d) {
  std::string why = "device " + d.id + " already belongs to a live composition";
  if (d.composition_id) why += " (" + std::to_string(*d.composition_id) + " on " + d.node + ")";
  return why;
}

void apply_transition(Composition& c, CompositionState to, std::string_view detail, int64_t now_ms,
                      bool attempt) {
  c.state = to;
  c.updated_ms = now_ms;
  if (attempt) ++c.attempts;
  if (to == CompositionState::kFailed) c.last_error = std::string(detail);
  if (!is_live(to)) {
    for (auto& d : c.devices) {
      d.composition_id.reset();
      d.node.clear();
    }
  }
}

void check_state(const Composition& c, CompositionState from) {
  if (c.state != from) {
    refuse(ErrorCode::kConflict, "composition " + std::to_string(c.id) + " is " +
                                     std::string(to_string(c.state)) + ", not " +
                                     std::string(to_string(from)) + "; nothing changed");
  }
}

void check_holdable(const Composition& c) {
  if (!is_live(c.state)) {
    refuse(ErrorCode::kConflict, "composition " + std::to_string(c.id) + " is " +
                                     std::string(to_string(c.state)) +
                                     ": only a live composition can be held; nothing changed");
  }
}

}  // namespace composer::db
