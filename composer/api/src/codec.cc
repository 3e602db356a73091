#include "composer/api/codec.h"

#include <json/reader.h>
#include <json/writer.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>

#include "composer/api/json_reader.h"
#include "composer/common/strings.h"
#include "composer/common/units.h"

namespace composer::api {
namespace {

std::optional<ErrorCode> parse_error_code(std::string_view s) {
  ErrorCode c = error_code_from_string(s);
  if (c == ErrorCode::kInternal && s != "internal") return std::nullopt;
  return c;
}

Json::Value nullable(const std::optional<int64_t>& v) {
  return v ? Json::Value(static_cast<Json::Int64>(*v)) : Json::Value(Json::nullValue);
}

Json::Value u64(uint64_t v) { return Json::Value(static_cast<Json::UInt64>(v)); }
Json::Value i64(int64_t v) { return Json::Value(static_cast<Json::Int64>(v)); }

std::optional<int64_t> nullable_id(const Json::Value& v, const std::string& path) {
  return as_nullable(v, path, as_id);
}

DeviceType device_type(const Json::Value& v, const std::string& path) {
  return as_enum(v, path, parse_device_type, "a device type", {"gpu", "mem", "nvme"});
}

// One decoder per type of the API, each reading a JsonObject (json_reader.h).
template <typename T>
T decode(const Json::Value& v, const std::string& path);

std::string pci_id(const Json::Value& v, const std::string& path) {
  std::string s = as_string(v, path);
  if (s.empty()) return s;
  std::optional<std::string> id = normal_pci_id(s);
  if (!id) {
    refuse(path, "'" + printable(s) + "' is not a PCI id; expected 1 to 4 hex digits, e.g. 0x10de");
  }
  return *id;
}

// A device's or a host's failure domains, {"LEVEL": "NAME", ...}; none when the key is absent.
std::vector<FailureDomain> decode_domains(JsonObject& r) {
  std::vector<FailureDomain> out;
  const Json::Value* domains = r.optional("domains");
  if (domains == nullptr) return out;
  const std::string at = r.path("domains");
  if (!domains->isObject()) refuse(at, "expected an object of level: domain name");
  for (const std::string& level : domains->getMemberNames()) {
    const std::string name = as_string((*domains)[level], at + "." + level);
    if (level.empty() || name.empty() || level.find(':') != std::string::npos) {
      refuse(at + "." + level, "expected a level without ':' and a non-empty domain name");
    }
    out.push_back(FailureDomain{level, name});
  }
  return out;
}

Json::Value domains_to_json(const std::vector<FailureDomain>& domains) {
  Json::Value v(Json::objectValue);
  for (const FailureDomain& dom : domains) v[dom.level] = dom.name;
  return v;
}

DeviceIdentity as_identity(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a device identity", {"pci_vendor", "pci_device", "serial", "uuid"});
  DeviceIdentity id;
  r.get_if("pci_vendor", &id.pci_vendor, pci_id);
  r.get_if("pci_device", &id.pci_device, pci_id);
  r.get_if("serial", &id.serial, as_string);
  r.get_if("uuid", &id.uuid, as_string);
  return id;
}

template <>
Device decode<Device>(const Json::Value& v, const std::string& path) {
  JsonObject r(
      v, path, "a device",
      {"id", "type", "model", "capacity_bytes", "zone", "address", "health", "state", "drained",
       "drain_reason", "composition_id", "node", "holder", "identity", "domains"});
  Device d;
  d.id = r.string("id");
  d.type = r.get("type", device_type);
  d.model = r.string("model");
  d.capacity_bytes = r.uint("capacity_bytes");
  d.zone = r.string("zone");
  d.address = r.string("address");
  // Optional: answers of older composerd versions and the plugin's older job state files.
  r.get_if("identity", &d.identity, as_identity);
  d.health = as_enum(r.required("health"), r.path("health"), parse_health, "a health state",
                     {"ok", "warning", "critical"});
  const DeviceState state =
      as_enum(r.required("state"), r.path("state"), parse_device_state, "a device state",
              {"free", "attached", "drained", "failed", "foreign"});
  d.drained = r.boolean("drained");
  d.drain_reason = r.string("drain_reason");
  // Optional: devices recorded before foreign holders existed (the plugin's job state files).
  r.get_if("holder", &d.holder, as_string);
  // Optional too: {"LEVEL": "NAME", ...}, none when absent.
  d.domains = decode_domains(r);
  d.composition_id = r.get("composition_id", nullable_id);
  if (const Json::Value& node = r.required("node"); !node.isNull()) {
    d.node = as_string(node, r.path("node"));
  }
  if (d.state() != state) {
    refuse(r.path("state"),
           "'" + std::string(to_string(state)) +
               "' contradicts health, drained, composition_id and holder, which make it '" +
               std::string(to_string(d.state())) + "'");
  }
  return d;
}

template <>
Request decode<Request>(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a request", {"gpus", "gpu_model", "mem_bytes", "nvme"});
  const auto per_node = [](const Json::Value& f, const std::string& p) {
    return static_cast<uint32_t>(as_uint(f, p, kMaxDevicesPerNode));
  };
  Request q;
  r.get_if("gpus", &q.gpus, per_node);
  r.get_if("gpu_model", &q.gpu_model, as_text);
  r.get_if("mem_bytes", &q.mem_bytes,
           [](const Json::Value& f, const std::string& p) { return as_uint(f, p, kMaxMemBytes); });
  r.get_if("nvme", &q.nvme, per_node);
  return q;
}

namespace {
// A memory policy as to_string(MemPolicy) writes it ("" for none), kept in that form.
std::string as_mem_policy(const Json::Value& value, const std::string& path) {
  std::string text = as_string(value, path);
  if (text.empty()) return text;
  std::optional<MemPolicy> p = parse_mem_policy_text(text);
  if (!p) refuse(path, "expected " + std::string(kMemPolicyForms) + ", got \"" + text + "\"");
  return to_string(*p);
}
}  // namespace

template <>
Composition decode<Composition>(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a composition",
               {"id", "job_id", "node", "uid", "user", "account", "workload", "request", "state",
                "created_ms", "updated_ms", "attempts", "last_error", "devices", "window", "hold",
                "mem_policy"});
  Composition c;
  c.id = r.id("id");
  c.owner.job_id = r.u32("job_id");
  c.node = r.string("node");
  c.owner.uid = r.u32("uid");
  c.owner.user = r.string("user");
  c.owner.account = r.string("account");
  c.owner.workload = r.string("workload");
  c.request = r.get("request", decode<Request>);
  c.state =
      as_enum(r.required("state"), r.path("state"), parse_composition_state, "a composition state",
              {"requested", "composing", "ready", "releasing", "released", "failed"});
  c.created_ms = r.id("created_ms");
  c.updated_ms = r.id("updated_ms");
  c.attempts = r.u32("attempts");
  c.last_error = r.string("last_error");
  c.devices = r.array("devices", decode<Device>);
  // Optional: answers of a composerd without policy windows leave it out.
  r.get_if("window", &c.window, as_string);
  // Optional: answers of a composerd without host holds leave it out.
  r.get_if("hold", &c.hold, as_string);
  // Optional: answers of a composerd without memory policies leave it out.
  r.get_if("mem_policy", &c.mem_policy, as_mem_policy);
  return c;
}

template <>
PoolRow decode<PoolRow>(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a pool row",
               {"type", "model", "zone", "total", "free", "attached", "drained", "failed",
                "foreign", "total_bytes", "free_bytes", "schedulable", "schedulable_bytes"});
  PoolRow p;
  p.type = r.get("type", device_type);
  p.model = r.string("model");
  p.zone = r.string("zone");
  p.total = r.u32("total");
  p.free = r.u32("free");
  p.attached = r.u32("attached");
  p.drained = r.u32("drained");
  p.failed = r.u32("failed");
  p.foreign = r.u32("foreign");
  p.total_bytes = r.uint("total_bytes");
  p.free_bytes = r.uint("free_bytes");
  p.schedulable_bytes = r.uint("schedulable_bytes");
  if (const uint32_t stated = r.u32("schedulable"); stated != schedulable(p)) {
    refuse(r.path("schedulable"), std::to_string(stated) +
                                      " contradicts free and attached, which make it " +
                                      std::to_string(schedulable(p)));
  }
  return p;
}

template <>
Host decode<Host>(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a host",
               {"node", "fabric_id", "zones", "gpu_slots", "mem_slots", "nvme_slots", "domains"});
  Host h;
  h.node = r.string("node");
  h.fabric_id = r.string("fabric_id");
  h.zones = r.strings("zones");
  h.gpu_slots = r.u32("gpu_slots");
  h.mem_slots = r.u32("mem_slots");
  h.nvme_slots = r.u32("nvme_slots");
  h.domains = decode_domains(r);  // optional: hosts in no domain
  return h;
}

template <>
Event decode<Event>(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "an event",
               {"id", "ts_ms", "kind", "composition_id", "job_id", "node", "uid", "user", "account",
                "workload", "from_state", "to_state", "devices", "detail", "window"});
  Event e;
  e.id = r.id("id");
  e.ts_ms = r.id("ts_ms");
  e.kind = r.string("kind");
  e.composition_id = r.get("composition_id", nullable_id);
  e.owner.job_id = r.u32("job_id");
  e.node = r.string("node");
  e.owner.uid = r.u32("uid");
  e.owner.user = r.string("user");
  e.owner.account = r.string("account");
  e.owner.workload = r.string("workload");
  e.from_state = r.string("from_state");
  e.to_state = r.string("to_state");
  e.devices = r.strings("devices");
  e.detail = r.string("detail");
  r.get_if("window", &e.window, as_string);
  return e;
}

template <>
ComposeBody decode<ComposeBody>(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a compose body",
               {"uid", "user", "account", "workload", "request", "nodes", "mem_policy"});
  ComposeBody b;
  b.owner.uid = r.u32("uid");
  b.owner.user = r.get("user", as_text);
  if (b.owner.user.empty()) refuse(r.path("user"), "must name the job's user, not be empty");
  r.get_if("account", &b.owner.account, as_text);
  r.get_if("workload", &b.owner.workload, as_text);
  b.request = r.get("request", decode<Request>);
  r.get_if("nodes", &b.nodes, as_strings);
  r.get_if("mem_policy", &b.mem_policy, as_mem_policy);
  return b;
}

template <>
HealthInfo decode<HealthInfo>(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a health answer",
               {"status", "fabric", "version", "uptime_s", "warnings", "slurm_licenses",
                "license_server", "role", "epoch", "active", "active_since_ms"});
  HealthInfo h;
  h.status = r.string("status");
  h.fabric = r.string("fabric");
  h.version = r.string("version");
  h.uptime_s = r.id("uptime_s");
  r.get_if("warnings", &h.warnings, as_strings);
  r.get_if("slurm_licenses", &h.slurm_licenses, as_string);
  if (h.slurm_licenses != "local" && h.slurm_licenses != "remote") {
    refuse(r.path("slurm_licenses"), "expected local or remote");
  }
  r.get_if("license_server", &h.license_server, as_string);
  r.get_if("role", &h.role, as_string);
  if (!h.role.empty() && h.role != "active" && h.role != "standby") {
    refuse(r.path("role"), "expected active or standby");
  }
  if (v.isMember("epoch")) h.epoch = r.id("epoch");
  r.get_if("active", &h.active, as_string);
  if (v.isMember("active_since_ms")) h.active_since_ms = r.id("active_since_ms");
  return h;
}

template <>
DrainBody decode<DrainBody>(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a drain body", {"reason"});
  DrainBody b;
  b.reason = r.get("reason", as_text);
  if (b.reason.empty()) {
    refuse(r.path("reason"), "must say why, not be empty");
  }
  return b;
}

template <>
ErrorBody decode<ErrorBody>(const Json::Value& v, const std::string& path) {
  JsonObject outer(v, path, "an error answer", {"error"});
  JsonObject r(outer.required("error"), outer.path("error"), "an error", {"code", "message"});
  Error e;
  e.code =
      as_enum(r.required("code"), r.path("code"), parse_error_code, "an error code",
              {"invalid_argument", "unauthenticated", "permission_denied", "not_found", "conflict",
               "insufficient_resources", "timeout", "fabric_error", "unavailable", "internal"});
  e.message = r.string("message");
  return ErrorBody{std::move(e)};
}

// {"<key>": [T, ...]}
template <typename T>
Expected<std::vector<T>> decode_list(const Json::Value& v, const char* key, const char* what) {
  return read_json([&] { return JsonObject(v, "", what, {key}).array(key, decode<T>); });
}

template <typename T, typename F>
Json::Value encode_list(const std::vector<T>& items, const char* key, F encode_one) {
  Json::Value array(Json::arrayValue);
  for (const T& item : items) array.append(encode_one(item));
  Json::Value out(Json::objectValue);
  out[key] = std::move(array);
  return out;
}

// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?: a JSON number, as RFC 8259 writes it.
bool json_number(std::string_view n) {
  size_t i = 0;
  const auto digits = [&] {
    const size_t from = i;
    while (i < n.size() && n[i] >= '0' && n[i] <= '9') ++i;
    return i - from;
  };
  if (i < n.size() && n[i] == '-') ++i;
  if (i < n.size() && n[i] == '0') {
    ++i;
  } else if (digits() == 0) {
    return false;
  }
  if (i < n.size() && n[i] == '.') {
    ++i;
    if (digits() == 0) return false;
  }
  if (i < n.size() && (n[i] == 'e' || n[i] == 'E')) {
    ++i;
    if (i < n.size() && (n[i] == '+' || n[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == n.size();
}

// What jsoncpp's strict mode lets through and JSON does not, or what no document of the API
// needs: a number that is not a plain JSON number ("01", "-00", "1.", "+1"), a raw control
// character in a string or outside one (jsoncpp ends the text at a NUL), a byte order mark
// (jsoncpp skips it), nesting deeper than kMaxJsonDepth.
std::optional<std::string> beyond_json(std::string_view t) {
  if (t.starts_with("\xEF\xBB\xBF")) {
    return std::string(
        "malformed JSON at line 1, column 1: a byte order mark (send UTF-8 "
        "without one)");
  }
  int line = 1;
  size_t line_start = 0;
  int depth = 0;
  const auto at = [&](size_t i) {
    return "malformed JSON at line " + std::to_string(line) + ", column " +
           std::to_string(i - line_start + 1) + ": ";
  };
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '\n') {
      ++line;
      line_start = i + 1;
    } else if (c == '"') {
      for (++i; i < t.size() && t[i] != '"'; ++i) {
        if (t[i] == '\\') {
          ++i;
        } else if (static_cast<unsigned char>(t[i]) < 0x20) {
          return at(i) + "a raw control character in a string (JSON writes it \\u00XX)";
        }
      }
    } else if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\r') {
      return at(i) + "a raw control character outside a string";
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        return at(i) + "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
      }
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9')) {
      size_t j = i;
      while (j < t.size() && ((t[j] >= '0' && t[j] <= '9') || t[j] == '-' || t[j] == '+' ||
                              t[j] == '.' || t[j] == 'e' || t[j] == 'E')) {
        ++j;
      }
      const std::string_view number = t.substr(i, j - i);
      if (!json_number(number)) {
        return at(i) + "'" + printable(number.substr(0, 40)) +
               "' is not a JSON number (digits without leading zeros, an optional fraction and "
               "exponent)";
      }
      i = j - 1;
    }
  }
  return std::nullopt;
}

}  // namespace

Expected<Json::Value> parse_json(std::string_view text) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return Error{ErrorCode::kInvalidArgument, "empty body: expected a JSON object"};
  }
  if (!valid_utf8(text)) {
    return Error{ErrorCode::kInvalidArgument, "malformed JSON: the text is not valid UTF-8"};
  }
  if (auto why = beyond_json(text)) return Error{ErrorCode::kInvalidArgument, *why};
  // One reader per thread, built once: building one costs about as much as parsing a request
  // body. A reader starts afresh with each parse.
  thread_local const std::unique_ptr<Json::CharReader> reader = [] {
    Json::CharReaderBuilder builder;
    Json::CharReaderBuilder::strictMode(&builder.settings_);
    builder["rejectDupKeys"] = true;
    builder["stackLimit"] = kMaxJsonDepth + 1;
    return std::unique_ptr<Json::CharReader>(builder.newCharReader());
  }();
  Json::Value value;
  std::string errors;
  try {
    if (reader->parse(text.data(), text.data() + text.size(), &value, &errors)) return value;
  } catch (const Json::Exception& e) {  // its stack limit, which beyond_json() keeps it from
    return Error{ErrorCode::kInvalidArgument, std::string("malformed JSON: ") + e.what()};
  }
  // jsoncpp writes "* Line 1, Column 8\n  Missing '}' ...\n" per problem; the first is the cause.
  std::string where, what;
  const size_t nl = errors.find('\n');
  if (errors.rfind("* ", 0) == 0 && nl != std::string::npos) {
    where = errors.substr(2, nl - 2);
    const size_t end = errors.find('\n', nl + 1);
    what = errors.substr(nl + 1, end == std::string::npos ? std::string::npos : end - nl - 1);
    what.erase(0, what.find_first_not_of(' '));
    while (!what.empty() && what.back() == '.') what.pop_back();
  } else {
    what = errors;
  }
  for (char& c : where) c = static_cast<char>(c == 'L' || c == 'C' ? c + ('a' - 'A') : c);
  return Error{ErrorCode::kInvalidArgument,
               "malformed JSON" + (where.empty() ? std::string() : " at " + where) + ": " + what};
}

std::string to_text(const Json::Value& value) {
  // One writer and one stream per thread, built once (as for parse_json's reader).
  thread_local const std::unique_ptr<Json::StreamWriter> writer = [] {
    Json::StreamWriterBuilder builder;
    builder["indentation"] = "";
    builder["emitUTF8"] = true;
    return std::unique_ptr<Json::StreamWriter>(builder.newStreamWriter());
  }();
  thread_local std::ostringstream out;
  out.str("");
  out.clear();
  writer->write(value, &out);
  return std::move(out).str();
}

Json::Value to_json(const Device& d) {
  Json::Value v(Json::objectValue);
  v["id"] = d.id;
  v["type"] = std::string(to_string(d.type));
  v["model"] = d.model;
  v["capacity_bytes"] = u64(d.capacity_bytes);
  v["zone"] = d.zone;
  v["address"] = d.address;
  Json::Value identity(Json::objectValue);
  identity["pci_vendor"] = d.identity.pci_vendor;
  identity["pci_device"] = d.identity.pci_device;
  identity["serial"] = d.identity.serial;
  identity["uuid"] = d.identity.uuid;
  v["identity"] = std::move(identity);
  v["health"] = std::string(to_string(d.health));
  v["state"] = std::string(to_string(d.state()));
  v["drained"] = d.drained;
  v["drain_reason"] = d.drain_reason;
  v["holder"] = d.holder;
  v["domains"] = domains_to_json(d.domains);
  v["composition_id"] = nullable(d.composition_id);
  v["node"] = d.composition_id ? Json::Value(d.node) : Json::Value(Json::nullValue);
  return v;
}

Json::Value to_json(const Request& q) {
  Json::Value v(Json::objectValue);
  v["gpus"] = q.gpus;
  v["gpu_model"] = q.gpu_model;
  v["mem_bytes"] = u64(q.mem_bytes);
  v["nvme"] = q.nvme;
  return v;
}

Json::Value to_json(const Composition& c) {
  Json::Value v(Json::objectValue);
  v["id"] = i64(c.id);
  v["job_id"] = c.owner.job_id;
  v["node"] = c.node;
  v["uid"] = c.owner.uid;
  v["user"] = c.owner.user;
  v["account"] = c.owner.account;
  v["workload"] = c.owner.workload;
  v["window"] = c.window;
  v["request"] = to_json(c.request);
  v["state"] = std::string(to_string(c.state));
  v["created_ms"] = i64(c.created_ms);
  v["updated_ms"] = i64(c.updated_ms);
  v["attempts"] = c.attempts;
  v["last_error"] = c.last_error;
  v["hold"] = c.hold;
  v["mem_policy"] = c.mem_policy;
  Json::Value devices(Json::arrayValue);
  for (const Device& d : c.devices) devices.append(to_json(d));
  v["devices"] = std::move(devices);
  return v;
}

Json::Value to_json(const PoolRow& p) {
  Json::Value v(Json::objectValue);
  v["type"] = std::string(to_string(p.type));
  v["model"] = p.model;
  v["zone"] = p.zone;
  v["total"] = p.total;
  v["free"] = p.free;
  v["attached"] = p.attached;
  v["drained"] = p.drained;
  v["failed"] = p.failed;
  v["foreign"] = p.foreign;
  v["schedulable"] = schedulable(p);
  v["total_bytes"] = u64(p.total_bytes);
  v["free_bytes"] = u64(p.free_bytes);
  v["schedulable_bytes"] = u64(p.schedulable_bytes);
  return v;
}

Json::Value to_json(const Host& h) {
  Json::Value v(Json::objectValue);
  v["node"] = h.node;
  v["fabric_id"] = h.fabric_id;
  Json::Value zones(Json::arrayValue);
  for (const auto& z : h.zones) zones.append(z);
  v["zones"] = std::move(zones);
  v["gpu_slots"] = h.gpu_slots;
  v["mem_slots"] = h.mem_slots;
  v["nvme_slots"] = h.nvme_slots;
  v["domains"] = domains_to_json(h.domains);
  return v;
}

Json::Value to_json(const Event& e) {
  Json::Value v(Json::objectValue);
  v["id"] = i64(e.id);
  v["ts_ms"] = i64(e.ts_ms);
  v["kind"] = e.kind;
  v["composition_id"] = nullable(e.composition_id);
  v["job_id"] = e.owner.job_id;
  v["node"] = e.node;
  v["uid"] = e.owner.uid;
  v["user"] = e.owner.user;
  v["account"] = e.owner.account;
  v["workload"] = e.owner.workload;
  v["window"] = e.window;
  v["from_state"] = e.from_state;
  v["to_state"] = e.to_state;
  Json::Value devices(Json::arrayValue);
  for (const std::string& d : e.devices) devices.append(d);
  v["devices"] = std::move(devices);
  v["detail"] = e.detail;
  return v;
}

Json::Value to_json(const ComposeBody& b) {
  Json::Value v(Json::objectValue);
  v["uid"] = b.owner.uid;
  v["user"] = b.owner.user;
  v["account"] = b.owner.account;
  v["workload"] = b.owner.workload;
  v["request"] = to_json(b.request);
  // Only when the job gave one: a composerd without memory policies refuses the field.
  if (!b.mem_policy.empty()) v["mem_policy"] = b.mem_policy;
  if (!b.nodes.empty()) {
    Json::Value nodes(Json::arrayValue);
    for (const std::string& n : b.nodes) nodes.append(n);
    v["nodes"] = std::move(nodes);
  }
  return v;
}

Json::Value to_json(const HealthInfo& h) {
  Json::Value v(Json::objectValue);
  v["status"] = h.status;
  v["fabric"] = h.fabric;
  v["version"] = h.version;
  v["uptime_s"] = i64(h.uptime_s);
  Json::Value warnings(Json::arrayValue);
  for (const auto& w : h.warnings) warnings.append(w);
  v["warnings"] = std::move(warnings);
  v["slurm_licenses"] = h.slurm_licenses;
  if (!h.license_server.empty()) v["license_server"] = h.license_server;
  if (!h.role.empty()) {
    v["role"] = h.role;
    v["epoch"] = i64(h.epoch);
    v["active"] = h.active;
    v["active_since_ms"] = i64(h.active_since_ms);
  }
  return v;
}

Json::Value to_json(const DrainBody& b) {
  Json::Value v(Json::objectValue);
  v["reason"] = b.reason;
  return v;
}

Json::Value to_json(const ErrorBody& body) { return to_json(body.error); }

Json::Value to_json(const Error& e) {
  Json::Value inner(Json::objectValue);
  inner["code"] = std::string(to_string(e.code));
  inner["message"] = e.message;
  Json::Value v(Json::objectValue);
  v["error"] = std::move(inner);
  return v;
}

template <typename T>
Expected<T> from_json(const Json::Value& v, std::string_view path) {
  return read_json([&] { return decode<T>(v, std::string(path)); });
}
template Expected<Device> from_json(const Json::Value&, std::string_view);
template Expected<Request> from_json(const Json::Value&, std::string_view);
template Expected<Composition> from_json(const Json::Value&, std::string_view);
template Expected<PoolRow> from_json(const Json::Value&, std::string_view);
template Expected<Event> from_json(const Json::Value&, std::string_view);
template Expected<ComposeBody> from_json(const Json::Value&, std::string_view);
template Expected<HealthInfo> from_json(const Json::Value&, std::string_view);
template Expected<DrainBody> from_json(const Json::Value&, std::string_view);
template Expected<ErrorBody> from_json(const Json::Value&, std::string_view);

Device as_device(const Json::Value& v, const std::string& path) { return decode<Device>(v, path); }

Json::Value devices_to_json(const std::vector<Device>& devices) {
  return encode_list(devices, "devices", [](const Device& d) { return to_json(d); });
}
Json::Value compositions_to_json(const std::vector<Composition>& compositions) {
  return encode_list(compositions, "compositions", [](const Composition& c) { return to_json(c); });
}
Json::Value pool_to_json(const std::vector<PoolRow>& rows) {
  return encode_list(rows, "pool", [](const PoolRow& p) { return to_json(p); });
}
Json::Value hosts_to_json(const std::vector<Host>& hosts) {
  return encode_list(hosts, "hosts", [](const Host& h) { return to_json(h); });
}
Json::Value events_to_json(const std::vector<Event>& events) {
  return encode_list(events, "events", [](const Event& e) { return to_json(e); });
}

Expected<std::vector<Device>> devices_from_json(const Json::Value& v) {
  return decode_list<Device>(v, "devices", "a device list");
}
namespace {

// A page is its list's object with the cursor of the next page beside the list.
template <typename T>
Json::Value page_to_json(Json::Value list, const Page<T>& page) {
  if (!page.next_cursor.empty()) list["next_cursor"] = page.next_cursor;
  return list;
}

template <typename T>
Expected<Page<T>> page_from_json(const Json::Value& v, const char* key, const char* what) {
  return read_json([&] {
    JsonObject r(v, "", what, {key, "next_cursor"});
    Page<T> p;
    p.items = r.array(key, decode<T>);
    r.get_if("next_cursor", &p.next_cursor, as_text);
    return p;
  });
}

}  // namespace

Json::Value to_json(const DevicePage& page) {
  return page_to_json(devices_to_json(page.items), page);
}
Json::Value to_json(const CompositionPage& page) {
  return page_to_json(compositions_to_json(page.items), page);
}
Json::Value to_json(const EventPage& page) {
  return page_to_json(events_to_json(page.items), page);
}
Expected<DevicePage> device_page_from_json(const Json::Value& v) {
  return page_from_json<Device>(v, "devices", "a page of devices");
}
Expected<CompositionPage> composition_page_from_json(const Json::Value& v) {
  return page_from_json<Composition>(v, "compositions", "a page of compositions");
}
Expected<EventPage> event_page_from_json(const Json::Value& v) {
  return page_from_json<Event>(v, "events", "a page of events");
}
Expected<std::vector<Composition>> compositions_from_json(const Json::Value& v) {
  return decode_list<Composition>(v, "compositions", "a composition list");
}
Expected<std::vector<PoolRow>> pool_from_json(const Json::Value& v) {
  return decode_list<PoolRow>(v, "pool", "a pool summary");
}
Expected<std::vector<Host>> hosts_from_json(const Json::Value& v) {
  return decode_list<Host>(v, "hosts", "a host list");
}
Expected<std::vector<Event>> events_from_json(const Json::Value& v) {
  return decode_list<Event>(v, "events", "an event list");
}

Json::Value release_to_json(const std::optional<Composition>& released) {
  if (released) return to_json(*released);
  Json::Value v(Json::objectValue);
  v["released"] = false;
  return v;
}

Expected<std::optional<Composition>> release_from_json(const Json::Value& v) {
  return read_json([&]() -> std::optional<Composition> {
    if (v.isObject() && v.isMember("released")) {
      JsonObject r(v, "", "a release answer without a composition", {"released"});
      if (r.boolean("released")) {
        refuse("released", "true comes with the released composition, not alone");
      }
      return std::nullopt;
    }
    return decode<Composition>(v, "");
  });
}

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return 400;
    case ErrorCode::kUnauthenticated:
      return 401;
    case ErrorCode::kPermissionDenied:
      return 403;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kConflict:
    case ErrorCode::kInsufficient:
      return 409;
    case ErrorCode::kFabric:
      return 502;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kTimeout:
      return 504;
    case ErrorCode::kInternal:
      return 500;
  }
  return 500;
}

ErrorCode error_code_for_status(long status) {
  switch (status) {
    case 400:
      return ErrorCode::kInvalidArgument;
    case 401:
      return ErrorCode::kUnauthenticated;
    case 403:
      return ErrorCode::kPermissionDenied;
    case 404:
      return ErrorCode::kNotFound;
    case 409:
    case 412:  // a precondition (If-Match) that failed: someone changed the resource
      return ErrorCode::kConflict;
    case 502:
      return ErrorCode::kFabric;
    case 503:
      return ErrorCode::kUnavailable;
    case 504:
      return ErrorCode::kTimeout;
    default:
      return status >= 400 && status < 500 ? ErrorCode::kInvalidArgument : ErrorCode::kInternal;
  }
}

}  // namespace composer::api
