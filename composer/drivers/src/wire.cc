#include "wire.h"

#include <json/reader.h>
#include <json/writer.h>

#include <cstdint>
#include <memory>

namespace composer::drivers {

std::string json_text(const Json::Value& v) {
  Json::StreamWriterBuilder w;
  w["indentation"] = "";
  return Json::writeString(w, v);
}

bool parse_json(const std::string& text, Json::Value* out, std::string* why) {
  Json::CharReaderBuilder b;
  b["collectComments"] = false;
  std::unique_ptr<Json::CharReader> reader(b.newCharReader());
  return reader->parse(text.data(), text.data() + text.size(), out, why);
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
