// Fresh munge credentials for requests to composerd (docs/API.md, "Authentication"): what
// every Client call sends, and what a caller that speaks HTTP itself (composer_bench) uses.
#pragma once

#include <string>
#include <string_view>

#include "composer/common/error.h"

namespace composer::client {

// A new credential whose payload is `payload`, from munged at `socket` (empty: munge's
// default socket). kUnavailable when munged cannot be reached, kInternal otherwise; the
// sentence names the socket.
Expected<std::string> munge_credential(std::string_view payload, const std::string& socket);

}  // namespace composer::client
