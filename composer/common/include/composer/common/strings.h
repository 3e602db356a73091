// The string helpers every component uses: ASCII case folding, trimming, splitting and joining.
// composer.conf keys, HTTP header names and policy words are ASCII; nothing here is
// locale-dependent.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace composer {

// "ListenPort" -> "listenport".
std::string lower(std::string_view s);
// Equal but for ASCII case.
bool iequals(std::string_view a, std::string_view b);
// Without leading and trailing whitespace.
std::string_view trim(std::string_view s);

struct SplitOptions {
  bool trim = false;        // trim each part
  bool skip_empty = false;  // drop empty parts (after trimming)
};
// "a,b,,c" -> a b "" c; an empty string is one empty part (none with skip_empty).
std::vector<std::string> split(std::string_view s, char sep, SplitOptions options = {});
// a b c -> "a,b,c" with sep ",".
std::string join(const std::vector<std::string>& items, std::string_view sep = ",");

}  // namespace composer
