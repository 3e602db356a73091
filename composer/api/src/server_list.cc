#include "composer/api/server_list.h"

#include "composer/common/strings.h"

namespace composer::api {
namespace {

std::string comparable(std::string_view url) {
  while (url.ends_with('/')) url.remove_suffix(1);
  return lower(url);
}

}  // namespace

bool supported_server_url(std::string_view url) {
  return url.starts_with("http://") || url.starts_with("https://") ||
         (url.starts_with("unix:") && url.substr(5).starts_with('/'));
}

bool same_server(std::string_view a, std::string_view b) { return comparable(a) == comparable(b); }

Expected<std::vector<std::string>> parse_server_list(std::string_view list) {
  const std::string rule = std::string("expected composerd URLs separated by commas, each ") +
                           "http://HOST:PORT, https://HOST:PORT or unix:/PATH, for example " +
                           kDefaultServerUrl + ",http://ctl2:6830";
  if (trim(list).empty()) {
    return Error{ErrorCode::kInvalidArgument, "the server list is empty: " + rule};
  }
  const std::string at = "server list '" + std::string(list) + "': ";
  std::vector<std::string> out;
  for (const std::string& entry : split(list, ',', {.trim = true})) {
    if (entry.empty()) return Error{ErrorCode::kInvalidArgument, at + "an empty entry; " + rule};
    if (!supported_server_url(entry)) {
      return Error{ErrorCode::kInvalidArgument, at + "'" + entry + "' is not a URL; " + rule};
    }
    for (const std::string& seen : out) {
      if (same_server(seen, entry)) {
        return Error{ErrorCode::kInvalidArgument, at + "'" + entry + "' is given twice"};
      }
    }
    out.push_back(entry);
  }
  return out;
}

}  // namespace composer::api
