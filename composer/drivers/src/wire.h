// What both fabric drivers need on the wire: JSON in and out, and basic authentication.
#pragma once

#include <json/value.h>

#include <optional>
#include <string>
#include <string_view>

namespace composer::drivers {

// Request bodies are written with api::to_text (composer/api/codec.h).
// Lenient on purpose (comments, duplicate keys): fabric managers are not always strict, and
// what they answer is checked field by field afterwards. False with the reason in `why`.
bool parse_json(const std::string& text, Json::Value* out, std::string* why);
// Trims trailing '/' from a fabric manager's base URL and says what is wrong with it, if
// anything: it must be http(s)://HOST[:PORT], without credentials (they belong in the
// credentials file) and without a path (the driver adds `api_root` itself).
std::optional<std::string> base_url_problem(std::string& url, std::string_view api_root);

// RFC 4648 base64 with padding.
std::string base64(std::string_view in);

}  // namespace composer::drivers
