#include <json/value.h>

#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

#include "composer/api/policy.h"

namespace composer::api {
namespace {

// Thrown inside the decoders, turned into an Error at their edge.
struct Refusal {
  std::string message;
};

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw Refusal{path + ": " + why};
}

std::string join(std::string_view path, std::string_view name) {
  return path.empty() ? std::string(name) : std::string(path) + "." + std::string(name);
}

class Reader {
 public:
  Reader(const Json::Value& v, std::string path, std::string_view what,
         std::initializer_list<std::string_view> allowed)
      : v_(v), path_(std::move(path)) {
    if (!v.isObject()) refuse(path_.empty() ? "body" : path_, "expected " + std::string(what));
    for (const std::string& name : v.getMemberNames()) {
      bool known = false;
      std::string list;
      for (std::string_view a : allowed) {
        known = known || a == name;
        list += (list.empty() ? "" : ", ") + std::string(a);
      }
      if (!known) refuse(join(path_, name), "unknown field; allowed: " + list);
    }
  }
  const Json::Value* optional(std::string_view name) const {
    return v_.find(name.data(), name.data() + name.size());
  }
  const Json::Value& required(std::string_view name) const {
    const Json::Value* f = optional(name);
    if (f == nullptr) refuse(join(path_, name), "required field is missing");
    return *f;
  }
  std::string text(std::string_view name) const {
    const Json::Value& f = required(name);
    if (!f.isString()) refuse(join(path_, name), "expected a string");
    return f.asString();
  }
  bool flag(std::string_view name) const {
    const Json::Value& f = required(name);
    if (!f.isBool()) refuse(join(path_, name), "expected true or false");
    return f.asBool();
  }
  uint64_t number(std::string_view name, uint64_t max) const {
    const Json::Value& f = required(name);
    const bool integer = f.type() == Json::intValue || f.type() == Json::uintValue;
    if (!integer || !f.isUInt64() || f.asUInt64() > max) {
      refuse(join(path_, name), "expected a whole number from 0 to " + std::to_string(max));
    }
    return f.asUInt64();
  }
  int64_t time(std::string_view name) const {
    return static_cast<int64_t>(number(name, std::numeric_limits<int64_t>::max()));
  }
  std::vector<std::string> strings(std::string_view name) const {
    const Json::Value& f = required(name);
    if (!f.isArray()) refuse(join(path_, name), "expected an array of strings");
    std::vector<std::string> out;
    for (Json::ArrayIndex i = 0; i < f.size(); ++i) {
      if (!f[i].isString()) {
        refuse(join(path_, name) + "[" + std::to_string(i) + "]", "expected a string");
      }
      out.push_back(f[i].asString());
    }
    return out;
  }
  std::string path(std::string_view name) const { return join(path_, name); }

 private:
  const Json::Value& v_;
  std::string path_;
};

template <typename F>
auto guarded(F&& decode) -> Expected<decltype(decode())> {
  try {
    return decode();
  } catch (const Refusal& r) {
    return Error{ErrorCode::kInvalidArgument, r.message};
  }
}

PolicyVersion decode_version(const Json::Value& v, const std::string& path) {
  Reader r(v, path, "a policy version (an object)",
           {"id", "applied_ms", "uid", "user", "file", "sha256", "text"});
  PolicyVersion p;
  p.id = r.time("id");
  p.applied_ms = r.time("applied_ms");
  p.uid = static_cast<uint32_t>(r.number("uid", std::numeric_limits<uint32_t>::max()));
  p.user = r.text("user");
  p.file = r.text("file");
  p.sha256 = r.text("sha256");
  p.text = r.text("text");
  return p;
}

Json::Value i64(int64_t v) { return Json::Value(static_cast<Json::Int64>(v)); }

}  // namespace

Json::Value to_json(const PolicyVersion& p) {
  Json::Value v(Json::objectValue);
  v["id"] = i64(p.id);
  v["applied_ms"] = i64(p.applied_ms);
  v["uid"] = p.uid;
  v["user"] = p.user;
  v["file"] = p.file;
  v["sha256"] = p.sha256;
  v["text"] = p.text;
  return v;
}

Json::Value to_json(const PolicyBody& b) {
  Json::Value v(Json::objectValue);
  v["file"] = b.file;
  v["text"] = b.text;
  v["dry_run"] = b.dry_run;
  return v;
}

Json::Value to_json(const PolicyApplied& a) {
  Json::Value v(Json::objectValue);
  v["changed"] = a.changed;
  v["policy"] = to_json(a.policy);
  Json::Value w(Json::arrayValue);
  for (const auto& s : a.warnings) w.append(s);
  v["warnings"] = std::move(w);
  return v;
}

Json::Value to_json(const PolicyExplanation& e) {
  Json::Value v(Json::objectValue);
  v["workload"] = e.workload;
  v["classified_by"] = e.classified_by;
  v["admitted"] = e.admitted;
  v["earliest_ms"] = e.earliest_ms ? i64(*e.earliest_ms) : Json::Value(Json::nullValue);
  Json::Value w(Json::arrayValue);
  for (const auto& s : e.windows) w.append(s);
  v["windows"] = std::move(w);
  if (e.hold) {
    Json::Value h(Json::objectValue);
    h["window"] = e.hold->window;
    h["type"] = e.hold->type;
    h["cap"] = Json::Value(static_cast<Json::UInt64>(e.hold->cap));
    h["requested"] = Json::Value(static_cast<Json::UInt64>(e.hold->requested));
    h["from_ms"] = i64(e.hold->from_ms);
    h["until_ms"] = i64(e.hold->until_ms);
    v["hold"] = std::move(h);
  } else {
    v["hold"] = Json::Value(Json::nullValue);
  }
  v["explanation"] = e.explanation;
  return v;
}

Json::Value policy_history_to_json(const std::vector<PolicyVersion>& history) {
  Json::Value list(Json::arrayValue);
  for (const auto& p : history) list.append(to_json(p));
  Json::Value v(Json::objectValue);
  v["policies"] = std::move(list);
  return v;
}

Expected<PolicyVersion> policy_version_from_json(const Json::Value& v) {
  return guarded([&] { return decode_version(v, ""); });
}

Expected<PolicyBody> policy_body_from_json(const Json::Value& v) {
  return guarded([&] {
    Reader r(v, "", "a policy body (an object)", {"file", "text", "dry_run"});
    PolicyBody b;
    b.text = r.text("text");
    if (r.optional("file") != nullptr) b.file = r.text("file");
    if (r.optional("dry_run") != nullptr) b.dry_run = r.flag("dry_run");
    return b;
  });
}

Expected<PolicyApplied> policy_applied_from_json(const Json::Value& v) {
  return guarded([&] {
    Reader r(v, "", "a policy answer (an object)", {"changed", "policy", "warnings"});
    PolicyApplied a;
    a.changed = r.flag("changed");
    a.policy = decode_version(r.required("policy"), "policy");
    a.warnings = r.strings("warnings");
    return a;
  });
}

Expected<PolicyExplanation> policy_explanation_from_json(const Json::Value& v) {
  return guarded([&] {
    Reader r(
        v, "", "a policy explanation (an object)",
        {"workload", "classified_by", "admitted", "earliest_ms", "windows", "hold", "explanation"});
    PolicyExplanation e;
    e.workload = r.text("workload");
    e.classified_by = r.text("classified_by");
    e.admitted = r.flag("admitted");
    if (!r.required("earliest_ms").isNull()) e.earliest_ms = r.time("earliest_ms");
    e.windows = r.strings("windows");
    if (const Json::Value& h = r.required("hold"); !h.isNull()) {
      Reader hr(h, "hold", "a hold (an object or null)",
                {"window", "type", "cap", "requested", "from_ms", "until_ms"});
      PolicyHold hold;
      hold.window = hr.text("window");
      hold.type = hr.text("type");
      hold.cap = hr.number("cap", std::numeric_limits<uint64_t>::max());
      hold.requested = hr.number("requested", std::numeric_limits<uint64_t>::max());
      hold.from_ms = hr.time("from_ms");
      hold.until_ms = hr.time("until_ms");
      e.hold = hold;
    }
    e.explanation = r.text("explanation");
    return e;
  });
}

Expected<std::vector<PolicyVersion>> policy_history_from_json(const Json::Value& v) {
  return guarded([&] {
    Reader r(v, "", "a policy history (an object)", {"policies"});
    const Json::Value& list = r.required("policies");
    if (!list.isArray()) refuse("policies", "expected an array of policy versions");
    std::vector<PolicyVersion> out;
    for (Json::ArrayIndex i = 0; i < list.size(); ++i) {
      out.push_back(decode_version(list[i], "policies[" + std::to_string(i) + "]"));
    }
    return out;
  });
}

}  // namespace composer::api
