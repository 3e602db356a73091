// The policy file parser. Pure: time zones come from a resolver (zoneinfo.h's
// load_time_zone in daemons, fixed bytes in tests).
#pragma once

#include <functional>
#include <string_view>

#include "composer/common/error.h"
#include "composer/policies/policy.h"

namespace composer::policies {

using ZoneResolver = std::function<Expected<TimeZone>(std::string_view name)>;

// Parses a whole policy file. On failure the error (kInvalidArgument) lists every problem,
// one per line, as "FILE line N: <sentence naming the key, the value and the rule>".
// The parser also checks references (a Limit naming an unknown class or window, duplicate
// names); checks that need the pool are in validate.h.
Expected<Policy> parse_policy(std::string_view text, std::string_view file_name,
                              const ZoneResolver& zones);

}  // namespace composer::policies
