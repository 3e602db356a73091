// The one strict reader of the project's JSON objects: the HTTP API's codecs (codec.h,
// policy_codec.h), the report (composer/accounting/report_json.h), the pool snapshot (snapshot.h)
// and the Slurm plugin's job state file all read their fields through it, so a wrong value
// is refused with the same sentence wherever it comes from. Each sentence starts with the
// value's path and says what is allowed:
//   request.gpus: -1 is not a whole number from 0 to 1024
//   devices[0].zone: required field is missing
//   drained: expected true or false, got the string "no"
//   request.cpus: unknown field; a request has only these fields: gpus, gpu_model, ...
//
// A decoder runs inside read_json(). The reader refuses by throwing JsonRefusal, which
// read_json turns into kInvalidArgument; nothing else throws it and it never leaves read_json.
#pragma once

#include <json/value.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "composer/common/error.h"
#include "composer/common/strings.h"

namespace composer::api {

// What a reader throws: the path of the refused value ("" for the whole document) and why.
struct JsonRefusal {
  std::string path;
  std::string why;
};

// "path: why"; a refusal of the whole document reads "body: why", or "CONTEXT: why" when a
// context is given, and a context comes first in every sentence ("snapshot: version: ...").
std::string refusal_sentence(const JsonRefusal& refusal, std::string_view context = {});

[[noreturn]] void refuse(std::string_view path, std::string why);

// Runs `read` (a callable taking nothing) and answers its result, or kInvalidArgument with
// the sentence of the refusal that stopped it.
template <typename F>
auto read_json(F&& read, std::string_view context = {}) -> Expected<std::invoke_result_t<F&>> {
  try {
    return read();
  } catch (const JsonRefusal& refusal) {
    return Error{ErrorCode::kInvalidArgument, refusal_sentence(refusal, context)};
  }
}

// Paths for messages: json_path("request", "gpus") is "request.gpus" (plain "gpus" at the top),
// json_index("devices", 3) is "devices[3]".
std::string json_path(std::string_view path, std::string_view field);
std::string json_index(std::string_view path, size_t i);

// How a value reads in a message: "null", "the number 7", "the string \"no\"", "an array", ...
// Long values are cut short.
std::string json_kind(const Json::Value& value);

// Values. Numbers must be JSON integers: 2.0, "2" and values outside the range are refused
// alike ("2.5 is not a whole number from 0 to 1024").
std::string as_string(const Json::Value& value, const std::string& path);
std::string as_nonempty_string(const Json::Value& value, const std::string& path);
// A string that is text (valid_utf8 without control characters): a name, an account, a
// reason that ends up in answers, logs and reports.
std::string as_text(const Json::Value& value, const std::string& path);
bool as_bool(const Json::Value& value, const std::string& path);
uint64_t as_uint(const Json::Value& value, const std::string& path, uint64_t max);
uint64_t as_u64(const Json::Value& value, const std::string& path);  // 0 to 2^64-1
uint32_t as_u32(const Json::Value& value, const std::string& path);  // 0 to 2^32-1
// 0 to 2^63-1: ids, times and durations.
int64_t as_id(const Json::Value& value, const std::string& path);
// Any 64-bit integer, negative ones too.
int64_t as_int(const Json::Value& value, const std::string& path);
// Any JSON number, integer or not.
double as_number(const Json::Value& value, const std::string& path);
// null, or what `read` makes of the value.
template <typename F>
auto as_nullable(const Json::Value& value, const std::string& path, F&& read)
    -> std::optional<std::invoke_result_t<F&, const Json::Value&, const std::string&>> {
  if (value.isNull()) return std::nullopt;
  return read(value, path);
}
// One of `names`, turned into E by `parse` ("'x' is not a device type; expected one of ...").
template <typename E>
E as_enum(const Json::Value& value, const std::string& path,
          std::optional<E> (*parse)(std::string_view), std::string_view what,
          std::initializer_list<std::string_view> names);
// An array whose elements `read_one(element, "path[i]")` reads.
template <typename F>
auto as_array(const Json::Value& value, const std::string& path, F&& read_one)
    -> std::vector<std::invoke_result_t<F&, const Json::Value&, const std::string&>>;
std::vector<std::string> as_strings(const Json::Value& value, const std::string& path);

// What an object does with fields it does not list: refuse them (the API's bodies, the report,
// the job state), or let them be (the snapshot, which a newer composerd may extend).
enum class OtherFields { kRefuse, kIgnore };

// One JSON object. The constructor refuses a value that is not an object ("expected a device
// (an object), got an array") and, unless told to ignore them, fields not in `fields`.
// `what` names the object with its article ("a device").
class JsonObject {
 public:
  JsonObject(const Json::Value& value, std::string path, std::string_view what,
             std::initializer_list<std::string_view> fields,
             OtherFields other = OtherFields::kRefuse);
  // An object whose field names are data (model -> count): every name is allowed.
  static JsonObject map(const Json::Value& value, std::string path, std::string_view what);

  const std::string& path() const { return path_; }
  std::string path(std::string_view name) const { return json_path(path_, name); }
  bool has(std::string_view name) const { return optional(name) != nullptr; }
  std::vector<std::string> names() const { return value_.getMemberNames(); }
  const Json::Value* optional(std::string_view name) const;
  const Json::Value& required(std::string_view name) const;  // "x: required field is missing"

  // A required field read by `read(value, path)`: one of the as_* above or a decoder.
  template <typename F>
  auto get(std::string_view name, F&& read) const {
    return read(required(name), path(name));
  }
  // An optional field: *out keeps its value when the field is absent.
  template <typename T, typename F>
  void get_if(std::string_view name, T* out, F&& read) const {
    if (const Json::Value* v = optional(name)) *out = read(*v, path(name));
  }
  // Shorthands for required fields.
  std::string string(std::string_view name) const { return get(name, as_string); }
  bool boolean(std::string_view name) const { return get(name, as_bool); }
  uint64_t uint(std::string_view name, uint64_t max = std::numeric_limits<uint64_t>::max()) const {
    return as_uint(required(name), path(name), max);
  }
  uint32_t u32(std::string_view name, uint32_t max = std::numeric_limits<uint32_t>::max()) const {
    return static_cast<uint32_t>(as_uint(required(name), path(name), max));
  }
  int64_t id(std::string_view name) const { return get(name, as_id); }
  int64_t integer(std::string_view name) const { return get(name, as_int); }
  double number(std::string_view name) const { return get(name, as_number); }
  std::vector<std::string> strings(std::string_view name) const { return get(name, as_strings); }
  template <typename F>
  auto array(std::string_view name, F&& read_one) const {
    return as_array(required(name), path(name), read_one);
  }

 private:
  const Json::Value& value_;
  std::string path_;
};

// --- templates ---------------------------------------------------------------------------

std::string json_list(std::initializer_list<std::string_view> names);

template <typename E>
E as_enum(const Json::Value& value, const std::string& path,
          std::optional<E> (*parse)(std::string_view), std::string_view what,
          std::initializer_list<std::string_view> names) {
  const std::string s = as_string(value, path);
  std::optional<E> e = parse(s);
  if (!e)
    refuse(path, "'" + printable(s) + "' is not " + std::string(what) + "; expected one of " +
                     json_list(names));
  return *e;
}

template <typename F>
auto as_array(const Json::Value& value, const std::string& path, F&& read_one)
    -> std::vector<std::invoke_result_t<F&, const Json::Value&, const std::string&>> {
  if (!value.isArray()) refuse(path, "expected an array, got " + json_kind(value));
  std::vector<std::invoke_result_t<F&, const Json::Value&, const std::string&>> out;
  out.reserve(value.size());
  for (Json::ArrayIndex i = 0; i < value.size(); ++i) {
    out.push_back(read_one(value[i], json_index(path, i)));
  }
  return out;
}

}  // namespace composer::api
