#include "fabric_manager_http.h"

#include <json/reader.h>

#include <cstdint>
#include <memory>

#include "composer/api/codec.h"

namespace composer::drivers {
namespace {

// RFC 4648 base64 with padding.
std::string base64(std::string_view in) {
  static constexpr char kTable[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kTable[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += kTable[(acc << (6 - bits)) & 63];
  while (out.size() % 4 != 0) out += '=';
  return out;
}

}  // namespace

http::HttpOptions http_options(const FabricManagerOptions& o, int retries) {
  return http::HttpOptions{.connect_timeout_ms = o.connect_timeout_ms,
                           .timeout_ms = o.request_timeout_ms,
                           .retries = retries,
                           .backoff_ms = 100,
                           .max_backoff_ms = 2000,
                           .ca_file = o.ca_file,
                           .verify_tls = o.verify_tls};
}

std::string basic_auth_header(const FabricManagerOptions& o) {
  return "Authorization: Basic " + base64(o.username + ":" + o.password);
}

ErrorCode error_code_for_manager_status(long status) {
  switch (const ErrorCode code = api::error_code_for_status(status)) {
    case ErrorCode::kUnauthenticated:
    case ErrorCode::kPermissionDenied:
    case ErrorCode::kNotFound:
    case ErrorCode::kConflict:
      return code;
    default:
      return ErrorCode::kFabric;
  }
}

bool parse_json(const std::string& text, Json::Value* out, std::string* why) {
  Json::CharReaderBuilder b;
  b["collectComments"] = false;
  std::unique_ptr<Json::CharReader> reader(b.newCharReader());
  return reader->parse(text.data(), text.data() + text.size(), out, why);
}

}  // namespace composer::drivers
