// What both fabric drivers need on the wire: JSON in and out, and basic authentication.
#pragma once

#include <json/value.h>

#include <string>
#include <string_view>

namespace composer::drivers {

// Compact JSON for request bodies.
std::string json_text(const Json::Value& v);
// Lenient on purpose (comments, duplicate keys): fabric managers are not always strict, and
// what they answer is checked field by field afterwards. False with the reason in `why`.
bool parse_json(const std::string& text, Json::Value* out, std::string* why);
// RFC 4648 base64 with padding.
std::string base64(std::string_view in);

}  // namespace composer::drivers
