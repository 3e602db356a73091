#include "composer/api/json_reader.h"

#include "composer/api/codec.h"
#include "composer/common/strings.h"

namespace composer::api {

std::string refusal_sentence(const JsonRefusal& refusal, std::string_view context) {
  if (context.empty()) {
    return (refusal.path.empty() ? std::string("body") : refusal.path) + ": " + refusal.why;
  }
  return std::string(context) + ": " + (refusal.path.empty() ? "" : refusal.path + ": ") +
         refusal.why;
}

void refuse(std::string_view path, std::string why) {
  throw JsonRefusal{std::string(path), std::move(why)};
}

std::string json_path(std::string_view path, std::string_view field) {
  if (path.empty()) return std::string(field);
  return std::string(path) + "." + std::string(field);
}

std::string json_index(std::string_view path, size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}

std::string json_list(std::initializer_list<std::string_view> names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

namespace {

// The offending value as it appeared, shortened so a huge value cannot flood a log line,
// never with a raw byte that is not UTF-8 (to_text escapes control characters).
std::string shown(const Json::Value& v) {
  std::string text = to_text(v);
  constexpr size_t kMax = 48;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return valid_utf8(text) ? text : printable(text);
}

bool is_integer(const Json::Value& v) {
  return v.type() == Json::intValue || v.type() == Json::uintValue;
}

}  // namespace

std::string json_kind(const Json::Value& v) {
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

std::string as_string(const Json::Value& v, const std::string& path) {
  if (!v.isString()) refuse(path, "expected a string, got " + json_kind(v));
  return v.asString();
}

std::string as_nonempty_string(const Json::Value& v, const std::string& path) {
  std::string s = as_string(v, path);
  if (s.empty()) refuse(path, "must not be empty");
  return s;
}

std::string as_text(const Json::Value& v, const std::string& path) {
  std::string s = as_string(v, path);
  if (!valid_utf8(s, false)) {
    refuse(path, "expected text (UTF-8 without control characters), got \"" +
                     printable(s.substr(0, 48)) + "\"");
  }
  return s;
}

bool as_bool(const Json::Value& v, const std::string& path) {
  if (!v.isBool()) refuse(path, "expected true or false, got " + json_kind(v));
  return v.asBool();
}

uint64_t as_uint(const Json::Value& v, const std::string& path, uint64_t max) {
  if (!is_integer(v) || !v.isUInt64() || v.asUInt64() > max) {
    refuse(path, shown(v) + " is not a whole number from 0 to " + std::to_string(max));
  }
  return v.asUInt64();
}

uint64_t as_u64(const Json::Value& v, const std::string& path) {
  return as_uint(v, path, std::numeric_limits<uint64_t>::max());
}

uint32_t as_u32(const Json::Value& v, const std::string& path) {
  return static_cast<uint32_t>(as_uint(v, path, std::numeric_limits<uint32_t>::max()));
}

int64_t as_id(const Json::Value& v, const std::string& path) {
  return static_cast<int64_t>(
      as_uint(v, path, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
}

int64_t as_int(const Json::Value& v, const std::string& path) {
  if (!is_integer(v) || !v.isInt64()) {
    refuse(path, shown(v) + " is not a whole number from " +
                     std::to_string(std::numeric_limits<int64_t>::min()) + " to " +
                     std::to_string(std::numeric_limits<int64_t>::max()));
  }
  return v.asInt64();
}

double as_number(const Json::Value& v, const std::string& path) {
  if (!v.isNumeric()) refuse(path, "expected a number, got " + json_kind(v));
  return v.asDouble();
}

std::vector<std::string> as_strings(const Json::Value& v, const std::string& path) {
  return as_array(v, path, as_string);
}

JsonObject::JsonObject(const Json::Value& value, std::string path, std::string_view what,
                       std::initializer_list<std::string_view> fields, OtherFields other)
    : value_(value), path_(std::move(path)) {
  if (!value.isObject()) {
    refuse(path_, "expected " + std::string(what) + " (an object), got " + json_kind(value));
  }
  if (other == OtherFields::kIgnore) return;
  for (const std::string& name : value.getMemberNames()) {
    bool known = false;
    for (std::string_view f : fields) known = known || f == name;
    if (!known) {
      refuse(json_path(path_, printable(name)), "unknown field; " + std::string(what) +
                                                    " has only these fields: " + json_list(fields));
    }
  }
}

JsonObject JsonObject::map(const Json::Value& value, std::string path, std::string_view what) {
  return JsonObject(value, std::move(path), what, {}, OtherFields::kIgnore);
}

const Json::Value* JsonObject::optional(std::string_view name) const {
  return value_.find(name.data(), name.data() + name.size());
}

const Json::Value& JsonObject::required(std::string_view name) const {
  const Json::Value* f = optional(name);
  if (f == nullptr) refuse(json_path(path_, name), "required field is missing");
  return *f;
}

}  // namespace composer::api
