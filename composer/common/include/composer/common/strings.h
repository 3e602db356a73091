// The string helpers every component uses: ASCII case folding, trimming, splitting and joining,
// and what of outside input is text and how it is shown.
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
// As a sentence lists them: "a", "a and b", "a, b and c".
std::string and_list(const std::vector<std::string>& items);

// Whether `s` is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF);
// with `controls` false, also without a control character (U+0000 to U+001F, U+007F to
// U+009F): what the API takes as a name or a reason.
bool valid_utf8(std::string_view s, bool controls = true);
// `s` as a message or a log line may show it: text as is, '\' as "\\", \n \r \t, and every
// other control character or byte that is not valid UTF-8 as \xNN; never a raw byte.
std::string printable(std::string_view s);

// A URL path segment or query value: every byte outside A-Z a-z 0-9 - . _ ~ as %XX.
std::string percent_encode(std::string_view s);
// The reverse: %XX read as the byte (a '%' not followed by two hex digits stays), and with
// `plus_is_space` '+' as a space, as a query string writes it.
std::string percent_decode(std::string_view text, bool plus_is_space);

}  // namespace composer
