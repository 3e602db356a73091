#include "composer/api/codec.h"

#include <json/reader.h>
#include <json/writer.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <utility>

#include "composer/common/units.h"

namespace composer::api {
namespace {

// Decoding throws this inside the file only; every public function turns it into an Error.
struct DecodeFailure {
  std::string message;
};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw DecodeFailure{(path.empty() ? std::string("body") : path) + ": " + what};
}

std::string join_path(std::string_view path, std::string_view field) {
  if (path.empty()) return std::string(field);
  return std::string(path) + "." + std::string(field);
}

std::string index_path(std::string_view path, size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}

// The offending value as it appeared, shortened so a huge value cannot flood a log line.
std::string shown(const Json::Value& v) {
  std::string text = to_text(v);
  constexpr size_t kMax = 48;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

std::string kind_of(const Json::Value& v) {
  switch (v.type()) {
    case Json::nullValue:
      return "null";
    case Json::intValue:
    case Json::uintValue:
    case Json::realValue:
      return "the number " + shown(v);
    case Json::stringValue:
      return "the string " + shown(v);
    case Json::booleanValue:
      return v.asBool() ? "true" : "false";
    case Json::arrayValue:
      return "an array";
    case Json::objectValue:
      return "an object";
  }
  return "a value";
}

std::string list(std::initializer_list<std::string_view> names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

// Checks that `v` is an object holding only `allowed` fields, and hands out its fields.
class ObjectReader {
 public:
  ObjectReader(const Json::Value& v, std::string_view path, std::string_view what,
               std::initializer_list<std::string_view> allowed)
      : v_(v), path_(path) {
    if (!v.isObject())
      fail(path_, "expected " + std::string(what) + " (an object), got " + kind_of(v));
    for (const std::string& name : v.getMemberNames()) {
      bool known = false;
      for (std::string_view a : allowed) known = known || a == name;
      if (!known) {
        fail(join_path(path_, name),
             "unknown field; " + std::string(what) + " has only these fields: " + list(allowed));
      }
    }
  }

  const Json::Value& required(std::string_view name) const {
    const Json::Value* f = v_.find(name.data(), name.data() + name.size());
    if (f == nullptr) fail(join_path(path_, name), "required field is missing");
    return *f;
  }
  const Json::Value* optional(std::string_view name) const {
    return v_.find(name.data(), name.data() + name.size());
  }
  std::string path(std::string_view name) const { return join_path(path_, name); }

 private:
  const Json::Value& v_;
  std::string path_;
};

std::string as_string(const Json::Value& v, const std::string& path) {
  if (!v.isString()) fail(path, "expected a string, got " + kind_of(v));
  return v.asString();
}

bool as_bool(const Json::Value& v, const std::string& path) {
  if (!v.isBool()) fail(path, "expected true or false, got " + kind_of(v));
  return v.asBool();
}

// Only JSON integers count: 2.0, "2", -1 and anything above `max` are refused alike.
uint64_t as_uint(const Json::Value& v, const std::string& path, uint64_t max) {
  const bool integer = v.type() == Json::intValue || v.type() == Json::uintValue;
  if (!integer || !v.isUInt64() || v.asUInt64() > max) {
    fail(path, shown(v) + " is not a whole number from 0 to " + std::to_string(max));
  }
  return v.asUInt64();
}

uint32_t as_u32(const Json::Value& v, const std::string& path,
                uint32_t max = std::numeric_limits<uint32_t>::max()) {
  return static_cast<uint32_t>(as_uint(v, path, max));
}

int64_t as_i64(const Json::Value& v, const std::string& path) {
  return static_cast<int64_t>(
      as_uint(v, path, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
}

std::optional<int64_t> as_nullable_i64(const Json::Value& v, const std::string& path) {
  if (v.isNull()) return std::nullopt;
  return as_i64(v, path);
}

template <typename E>
E as_enum(const Json::Value& v, const std::string& path,
          std::optional<E> (*parse)(std::string_view), std::string_view what,
          std::initializer_list<std::string_view> names) {
  const std::string s = as_string(v, path);
  std::optional<E> e = parse(s);
  if (!e) {
    fail(path, "'" + s + "' is not " + std::string(what) + "; expected one of " + list(names));
  }
  return *e;
}

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

Device decode_device(const Json::Value& v, const std::string& path) {
  ObjectReader r(v, path, "a device",
                 {"id", "type", "model", "capacity_bytes", "zone", "address", "health", "state",
                  "drained", "drain_reason", "composition_id", "node"});
  Device d;
  d.id = as_string(r.required("id"), r.path("id"));
  d.type = as_enum(r.required("type"), r.path("type"), parse_device_type, "a device type",
                   {"gpu", "mem", "nvme"});
  d.model = as_string(r.required("model"), r.path("model"));
  d.capacity_bytes = as_uint(r.required("capacity_bytes"), r.path("capacity_bytes"),
                             std::numeric_limits<uint64_t>::max());
  d.zone = as_string(r.required("zone"), r.path("zone"));
  d.address = as_string(r.required("address"), r.path("address"));
  d.health = as_enum(r.required("health"), r.path("health"), parse_health, "a health state",
                     {"ok", "warning", "critical"});
  const DeviceState state = as_enum(r.required("state"), r.path("state"), parse_device_state,
                                    "a device state", {"free", "attached", "drained", "failed"});
  d.drained = as_bool(r.required("drained"), r.path("drained"));
  d.drain_reason = as_string(r.required("drain_reason"), r.path("drain_reason"));
  d.composition_id = as_nullable_i64(r.required("composition_id"), r.path("composition_id"));
  const Json::Value& node = r.required("node");
  if (!node.isNull()) d.node = as_string(node, r.path("node"));
  if (d.state() != state) {
    fail(r.path("state"), "'" + std::string(to_string(state)) +
                              "' contradicts health, drained and composition_id, which make it '" +
                              std::string(to_string(d.state())) + "'");
  }
  return d;
}

Request decode_request(const Json::Value& v, const std::string& path) {
  ObjectReader r(v, path, "a request", {"gpus", "gpu_model", "mem_bytes", "nvme"});
  Request q;
  if (const Json::Value* f = r.optional("gpus"))
    q.gpus = as_u32(*f, r.path("gpus"), kMaxDevicesPerNode);
  if (const Json::Value* f = r.optional("gpu_model"))
    q.gpu_model = as_string(*f, r.path("gpu_model"));
  if (const Json::Value* f = r.optional("mem_bytes"))
    q.mem_bytes = as_uint(*f, r.path("mem_bytes"), kMaxMemBytes);
  if (const Json::Value* f = r.optional("nvme"))
    q.nvme = as_u32(*f, r.path("nvme"), kMaxDevicesPerNode);
  return q;
}

template <typename T, typename F>
std::vector<T> decode_array(const Json::Value& v, const std::string& path, F decode_one) {
  if (!v.isArray()) fail(path, "expected an array, got " + kind_of(v));
  std::vector<T> out;
  out.reserve(v.size());
  for (Json::ArrayIndex i = 0; i < v.size(); ++i)
    out.push_back(decode_one(v[i], index_path(path, i)));
  return out;
}

Composition decode_composition(const Json::Value& v, const std::string& path) {
  ObjectReader r(v, path, "a composition",
                 {"id", "job_id", "node", "uid", "user", "account", "workload", "request", "state",
                  "created_ms", "updated_ms", "attempts", "last_error", "devices", "window"});
  Composition c;
  c.id = as_i64(r.required("id"), r.path("id"));
  c.job_id = as_u32(r.required("job_id"), r.path("job_id"));
  c.node = as_string(r.required("node"), r.path("node"));
  c.uid = as_u32(r.required("uid"), r.path("uid"));
  c.user = as_string(r.required("user"), r.path("user"));
  c.account = as_string(r.required("account"), r.path("account"));
  c.workload = as_string(r.required("workload"), r.path("workload"));
  c.request = decode_request(r.required("request"), r.path("request"));
  c.state =
      as_enum(r.required("state"), r.path("state"), parse_composition_state, "a composition state",
              {"requested", "composing", "ready", "releasing", "released", "failed"});
  c.created_ms = as_i64(r.required("created_ms"), r.path("created_ms"));
  c.updated_ms = as_i64(r.required("updated_ms"), r.path("updated_ms"));
  c.attempts = as_u32(r.required("attempts"), r.path("attempts"));
  c.last_error = as_string(r.required("last_error"), r.path("last_error"));
  c.devices = decode_array<Device>(r.required("devices"), r.path("devices"), decode_device);
  // Optional: answers of a composerd without policy windows leave it out.
  if (const Json::Value* w = r.optional("window")) c.window = as_string(*w, r.path("window"));
  return c;
}

PoolRow decode_pool_row(const Json::Value& v, const std::string& path) {
  ObjectReader r(v, path, "a pool row",
                 {"type", "model", "zone", "total", "free", "attached", "drained", "failed",
                  "total_bytes", "free_bytes"});
  PoolRow p;
  p.type = as_enum(r.required("type"), r.path("type"), parse_device_type, "a device type",
                   {"gpu", "mem", "nvme"});
  p.model = as_string(r.required("model"), r.path("model"));
  p.zone = as_string(r.required("zone"), r.path("zone"));
  p.total = as_u32(r.required("total"), r.path("total"));
  p.free = as_u32(r.required("free"), r.path("free"));
  p.attached = as_u32(r.required("attached"), r.path("attached"));
  p.drained = as_u32(r.required("drained"), r.path("drained"));
  p.failed = as_u32(r.required("failed"), r.path("failed"));
  constexpr uint64_t kAny = std::numeric_limits<uint64_t>::max();
  p.total_bytes = as_uint(r.required("total_bytes"), r.path("total_bytes"), kAny);
  p.free_bytes = as_uint(r.required("free_bytes"), r.path("free_bytes"), kAny);
  return p;
}

Host decode_host(const Json::Value& v, const std::string& path) {
  ObjectReader r(v, path, "a host",
                 {"node", "fabric_id", "zones", "gpu_slots", "mem_slots", "nvme_slots"});
  Host h;
  h.node = as_string(r.required("node"), r.path("node"));
  h.fabric_id = as_string(r.required("fabric_id"), r.path("fabric_id"));
  h.zones = decode_array<std::string>(r.required("zones"), r.path("zones"), as_string);
  h.gpu_slots = as_u32(r.required("gpu_slots"), r.path("gpu_slots"));
  h.mem_slots = as_u32(r.required("mem_slots"), r.path("mem_slots"));
  h.nvme_slots = as_u32(r.required("nvme_slots"), r.path("nvme_slots"));
  return h;
}

Event decode_event(const Json::Value& v, const std::string& path) {
  ObjectReader r(v, path, "an event",
                 {"id", "ts_ms", "kind", "composition_id", "job_id", "node", "uid", "user",
                  "account", "workload", "from_state", "to_state", "devices", "detail", "window"});
  Event e;
  e.id = as_i64(r.required("id"), r.path("id"));
  e.ts_ms = as_i64(r.required("ts_ms"), r.path("ts_ms"));
  e.kind = as_string(r.required("kind"), r.path("kind"));
  e.composition_id = as_nullable_i64(r.required("composition_id"), r.path("composition_id"));
  e.job_id = as_u32(r.required("job_id"), r.path("job_id"));
  e.node = as_string(r.required("node"), r.path("node"));
  e.uid = as_u32(r.required("uid"), r.path("uid"));
  e.user = as_string(r.required("user"), r.path("user"));
  e.account = as_string(r.required("account"), r.path("account"));
  e.workload = as_string(r.required("workload"), r.path("workload"));
  e.from_state = as_string(r.required("from_state"), r.path("from_state"));
  e.to_state = as_string(r.required("to_state"), r.path("to_state"));
  e.devices = decode_array<std::string>(r.required("devices"), r.path("devices"), as_string);
  e.detail = as_string(r.required("detail"), r.path("detail"));
  if (const Json::Value* w = r.optional("window")) e.window = as_string(*w, r.path("window"));
  return e;
}

ComposeBody decode_compose_body(const Json::Value& v, const std::string& path) {
  ObjectReader r(v, path, "a compose body", {"uid", "user", "account", "workload", "request"});
  ComposeBody b;
  b.uid = as_u32(r.required("uid"), r.path("uid"));
  b.user = as_string(r.required("user"), r.path("user"));
  if (b.user.empty()) fail(r.path("user"), "must name the job's user, not be empty");
  if (const Json::Value* f = r.optional("account")) b.account = as_string(*f, r.path("account"));
  if (const Json::Value* f = r.optional("workload")) b.workload = as_string(*f, r.path("workload"));
  b.request = decode_request(r.required("request"), r.path("request"));
  return b;
}

HealthInfo decode_health(const Json::Value& v, const std::string& path) {
  ObjectReader r(v, path, "a health answer", {"status", "fabric", "version", "uptime_s"});
  HealthInfo h;
  h.status = as_string(r.required("status"), r.path("status"));
  h.fabric = as_string(r.required("fabric"), r.path("fabric"));
  h.version = as_string(r.required("version"), r.path("version"));
  h.uptime_s = as_i64(r.required("uptime_s"), r.path("uptime_s"));
  return h;
}

DrainBody decode_drain_body(const Json::Value& v, const std::string& path) {
  ObjectReader r(v, path, "a drain body", {"reason"});
  DrainBody b;
  b.reason = as_string(r.required("reason"), r.path("reason"));
  if (b.reason.empty()) fail(r.path("reason"), "must say why the device is drained, not be empty");
  return b;
}

ErrorBody decode_error(const Json::Value& v, const std::string& path) {
  ObjectReader outer(v, path, "an error answer", {"error"});
  ObjectReader r(outer.required("error"), outer.path("error"), "an error", {"code", "message"});
  Error e;
  e.code =
      as_enum(r.required("code"), r.path("code"), parse_error_code, "an error code",
              {"invalid_argument", "unauthenticated", "permission_denied", "not_found", "conflict",
               "insufficient_resources", "timeout", "fabric_error", "unavailable", "internal"});
  e.message = as_string(r.required("message"), r.path("message"));
  return ErrorBody{std::move(e)};
}

// Runs a decoder and turns a DecodeFailure into the public Error.
template <typename F>
auto decode(F f) -> Expected<decltype(f())> {
  try {
    return f();
  } catch (const DecodeFailure& failure) {
    return Error{ErrorCode::kInvalidArgument, failure.message};
  }
}

template <typename T, typename F>
Expected<std::vector<T>> decode_list(const Json::Value& v, const char* key, const char* what,
                                     F decode_one) {
  return decode([&] {
    ObjectReader r(v, "", what, {key});
    return decode_array<T>(r.required(key), key, decode_one);
  });
}

template <typename T, typename F>
Json::Value encode_list(const std::vector<T>& items, const char* key, F encode_one) {
  Json::Value array(Json::arrayValue);
  for (const T& item : items) array.append(encode_one(item));
  Json::Value out(Json::objectValue);
  out[key] = std::move(array);
  return out;
}

}  // namespace

Expected<Json::Value> parse_json(std::string_view text) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return Error{ErrorCode::kInvalidArgument, "empty body: expected a JSON object"};
  }
  Json::CharReaderBuilder builder;
  Json::CharReaderBuilder::strictMode(&builder.settings_);
  builder["rejectDupKeys"] = true;
  std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
  Json::Value value;
  std::string errors;
  if (reader->parse(text.data(), text.data() + text.size(), &value, &errors)) return value;
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
  Json::StreamWriterBuilder builder;
  builder["indentation"] = "";
  builder["emitUTF8"] = true;
  return Json::writeString(builder, value);
}

Json::Value to_json(const Device& d) {
  Json::Value v(Json::objectValue);
  v["id"] = d.id;
  v["type"] = std::string(to_string(d.type));
  v["model"] = d.model;
  v["capacity_bytes"] = u64(d.capacity_bytes);
  v["zone"] = d.zone;
  v["address"] = d.address;
  v["health"] = std::string(to_string(d.health));
  v["state"] = std::string(to_string(d.state()));
  v["drained"] = d.drained;
  v["drain_reason"] = d.drain_reason;
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
  v["job_id"] = c.job_id;
  v["node"] = c.node;
  v["uid"] = c.uid;
  v["user"] = c.user;
  v["account"] = c.account;
  v["workload"] = c.workload;
  v["window"] = c.window;
  v["request"] = to_json(c.request);
  v["state"] = std::string(to_string(c.state));
  v["created_ms"] = i64(c.created_ms);
  v["updated_ms"] = i64(c.updated_ms);
  v["attempts"] = c.attempts;
  v["last_error"] = c.last_error;
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
  v["total_bytes"] = u64(p.total_bytes);
  v["free_bytes"] = u64(p.free_bytes);
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
  return v;
}

Json::Value to_json(const Event& e) {
  Json::Value v(Json::objectValue);
  v["id"] = i64(e.id);
  v["ts_ms"] = i64(e.ts_ms);
  v["kind"] = e.kind;
  v["composition_id"] = nullable(e.composition_id);
  v["job_id"] = e.job_id;
  v["node"] = e.node;
  v["uid"] = e.uid;
  v["user"] = e.user;
  v["account"] = e.account;
  v["workload"] = e.workload;
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
  v["uid"] = b.uid;
  v["user"] = b.user;
  v["account"] = b.account;
  v["workload"] = b.workload;
  v["request"] = to_json(b.request);
  return v;
}

Json::Value to_json(const HealthInfo& h) {
  Json::Value v(Json::objectValue);
  v["status"] = h.status;
  v["fabric"] = h.fabric;
  v["version"] = h.version;
  v["uptime_s"] = i64(h.uptime_s);
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

template <>
Expected<Device> from_json<Device>(const Json::Value& v, std::string_view path) {
  return decode([&] { return decode_device(v, std::string(path)); });
}
template <>
Expected<Request> from_json<Request>(const Json::Value& v, std::string_view path) {
  return decode([&] { return decode_request(v, std::string(path)); });
}
template <>
Expected<Composition> from_json<Composition>(const Json::Value& v, std::string_view path) {
  return decode([&] { return decode_composition(v, std::string(path)); });
}
template <>
Expected<PoolRow> from_json<PoolRow>(const Json::Value& v, std::string_view path) {
  return decode([&] { return decode_pool_row(v, std::string(path)); });
}
template <>
Expected<Event> from_json<Event>(const Json::Value& v, std::string_view path) {
  return decode([&] { return decode_event(v, std::string(path)); });
}
template <>
Expected<ComposeBody> from_json<ComposeBody>(const Json::Value& v, std::string_view path) {
  return decode([&] { return decode_compose_body(v, std::string(path)); });
}
template <>
Expected<HealthInfo> from_json<HealthInfo>(const Json::Value& v, std::string_view path) {
  return decode([&] { return decode_health(v, std::string(path)); });
}
template <>
Expected<DrainBody> from_json<DrainBody>(const Json::Value& v, std::string_view path) {
  return decode([&] { return decode_drain_body(v, std::string(path)); });
}
template <>
Expected<ErrorBody> from_json<ErrorBody>(const Json::Value& v, std::string_view path) {
  return decode([&] { return decode_error(v, std::string(path)); });
}

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
  return decode_list<Device>(v, "devices", "a device list", decode_device);
}
Expected<std::vector<Composition>> compositions_from_json(const Json::Value& v) {
  return decode_list<Composition>(v, "compositions", "a composition list", decode_composition);
}
Expected<std::vector<PoolRow>> pool_from_json(const Json::Value& v) {
  return decode_list<PoolRow>(v, "pool", "a pool summary", decode_pool_row);
}
Expected<std::vector<Host>> hosts_from_json(const Json::Value& v) {
  return decode_list<Host>(v, "hosts", "a host list", decode_host);
}
Expected<std::vector<Event>> events_from_json(const Json::Value& v) {
  return decode_list<Event>(v, "events", "an event list", decode_event);
}

Json::Value release_to_json(const std::optional<Composition>& released) {
  if (released) return to_json(*released);
  Json::Value v(Json::objectValue);
  v["released"] = false;
  return v;
}

Expected<std::optional<Composition>> release_from_json(const Json::Value& v) {
  return decode([&]() -> std::optional<Composition> {
    if (v.isObject() && v.isMember("released")) {
      ObjectReader r(v, "", "a release answer without a composition", {"released"});
      if (as_bool(r.required("released"), "released")) {
        fail("released", "true comes with the released composition, not alone");
      }
      return std::nullopt;
    }
    return decode_composition(v, "");
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
