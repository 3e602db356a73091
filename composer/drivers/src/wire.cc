#include "wire.h"

#include <json/reader.h>

#include <cstdint>
#include <memory>

namespace composer::drivers {

bool parse_json(const std::string& text, Json::Value* out, std::string* why) {
  Json::CharReaderBuilder b;
  b["collectComments"] = false;
  std::unique_ptr<Json::CharReader> reader(b.newCharReader());
  return reader->parse(text.data(), text.data() + text.size(), out, why);
}

std::optional<std::string> base_url_problem(std::string& url, std::string_view api_root) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (!url.starts_with("http://") && !url.starts_with("https://")) {
    return "base URL '" + url + "' must start with http:// or https://";
  }
  const std::string authority = url.substr(url.find("//") + 2);
  if (authority.substr(0, authority.find('/')).find('@') != std::string::npos) {
    return "the base URL must not carry credentials; put them in the credentials file";
  }
  if (authority.empty() || authority.find('/') != std::string::npos) {
    return "base URL '" + url + "' must be http(s)://HOST[:PORT] only; the driver adds " +
           std::string(api_root);
  }
  return std::nullopt;
}

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

}  // namespace composer::drivers
