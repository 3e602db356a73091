// composerd's addresses as every client takes them: composerctl --server and $COMPOSER_SERVER,
// the plugstack's server= and controller_server= (the plugins' core, which links no HTTP
// client, checks them at load time with the same sentences).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "composer/common/error.h"

namespace composer::api {

inline constexpr char kDefaultServerUrl[] = "http://127.0.0.1:6830";

// Whether `url` is one a client can use: http://, https:// or unix:/PATH.
bool supported_server_url(std::string_view url);

// A server list: URLs separated by commas, in the order they are tried, for example
// "http://ctl1:6830,http://ctl2:6830" (an active composerd and its standbys). The error says
// which entry is wrong and what is allowed: an empty list or entry, a URL that is not
// http://, https:// or unix:/PATH, or one given twice (api_test, ServerList tests).
Expected<std::vector<std::string>> parse_server_list(std::string_view list);

// Whether two URLs of lists name the same server: trailing slashes aside, case folded.
bool same_server(std::string_view a, std::string_view b);

}  // namespace composer::api
