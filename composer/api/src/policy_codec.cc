#include <json/value.h>

#include <string>

#include "composer/api/json_reader.h"
#include "composer/api/policy_codec.h"

namespace composer::api {
namespace {

PolicyVersion decode_version(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a policy version",
               {"id", "applied_ms", "uid", "user", "file", "sha256", "text"});
  PolicyVersion p;
  p.id = r.id("id");
  p.applied_ms = r.id("applied_ms");
  p.uid = r.u32("uid");
  p.user = r.string("user");
  p.file = r.string("file");
  p.sha256 = r.string("sha256");
  p.text = r.string("text");
  return p;
}

PolicyHold decode_hold(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a hold", {"window", "type", "cap", "requested", "from_ms", "until_ms"});
  PolicyHold hold;
  hold.window = r.string("window");
  hold.type = r.string("type");
  hold.cap = r.uint("cap");
  hold.requested = r.uint("requested");
  hold.from_ms = r.id("from_ms");
  hold.until_ms = r.id("until_ms");
  return hold;
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
  Json::Value actions(Json::arrayValue);
  for (const auto& s : a.slurm_actions) actions.append(s);
  v["slurm_actions"] = std::move(actions);
  v["slurm"] = a.slurm;
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
  return read_json([&] { return decode_version(v, ""); });
}

Expected<PolicyBody> policy_body_from_json(const Json::Value& v) {
  return read_json([&] {
    JsonObject r(v, "", "a policy body", {"file", "text", "dry_run"});
    PolicyBody b;
    b.text = r.string("text");
    r.get_if("file", &b.file, as_text);
    r.get_if("dry_run", &b.dry_run, as_bool);
    return b;
  });
}

Expected<PolicyApplied> policy_applied_from_json(const Json::Value& v) {
  return read_json([&] {
    JsonObject r(v, "", "a policy answer",
                 {"changed", "policy", "warnings", "slurm_actions", "slurm"});
    PolicyApplied a;
    a.changed = r.boolean("changed");
    a.policy = r.get("policy", decode_version);
    a.warnings = r.strings("warnings");
    if (v.isMember("slurm_actions")) a.slurm_actions = r.strings("slurm_actions");
    r.get_if("slurm", &a.slurm, as_string);
    return a;
  });
}

Expected<PolicyExplanation> policy_explanation_from_json(const Json::Value& v) {
  return read_json([&] {
    JsonObject r(
        v, "", "a policy explanation",
        {"workload", "classified_by", "admitted", "earliest_ms", "windows", "hold", "explanation"});
    PolicyExplanation e;
    e.workload = r.string("workload");
    e.classified_by = r.string("classified_by");
    e.admitted = r.boolean("admitted");
    e.earliest_ms = as_nullable(r.required("earliest_ms"), r.path("earliest_ms"), as_id);
    e.windows = r.strings("windows");
    e.hold = as_nullable(r.required("hold"), r.path("hold"), decode_hold);
    e.explanation = r.string("explanation");
    return e;
  });
}

Expected<std::vector<PolicyVersion>> policy_history_from_json(const Json::Value& v) {
  return read_json([&] {
    return JsonObject(v, "", "a policy history", {"policies"}).array("policies", decode_version);
  });
}

}  // namespace composer::api
