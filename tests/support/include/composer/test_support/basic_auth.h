// What the fake fabric services check of HTTP basic authentication: whether an Authorization
// header carries exactly this user and password. It decodes on its own rather than encoding
// with the drivers' code, so that a driver bug cannot agree with itself. Header-only.
#pragma once

#include <cstring>
#include <string>
#include <string_view>

namespace composer::test_support {

inline bool is_basic_auth(std::string_view header, std::string_view user,
                          std::string_view password) {
  constexpr std::string_view kScheme = "Basic ";
  if (!header.starts_with(kScheme)) return false;
  static constexpr char kTable[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string decoded;
  int value = 0;
  int bits = -8;
  for (char c : header.substr(kScheme.size())) {
    const char* p = c == '\0' ? nullptr : std::strchr(kTable, c);
    if (p == nullptr) break;  // '=' padding or the end
    value = (value << 6) + static_cast<int>(p - kTable);
    bits += 6;
    if (bits >= 0) {
      decoded.push_back(static_cast<char>((value >> bits) & 0xff));
      bits -= 8;
    }
  }
  return decoded.size() == user.size() + 1 + password.size() && decoded.starts_with(user) &&
         decoded[user.size()] == ':' && decoded.ends_with(password);
}

}  // namespace composer::test_support
