// The one place the policy library touches the file system: reading a TZif file of the
// tzdata package. Everything else takes the bytes (TimeZone::from_tzif) or a resolver.
#pragma once

#include <string>
#include <string_view>

#include "composer/common/error.h"
#include "composer/policies/time_zone.h"

namespace composer::policies {

inline constexpr std::string_view kZoneinfoDir = "/usr/share/zoneinfo";

// Loads an IANA zone such as "Europe/Berlin" from `<dir>/<name>`. The name must be made of
// letters, digits, '_', '-', '+' and '/' separated parts, none of them "." or "..".
Expected<TimeZone> load_time_zone(std::string_view name, std::string_view dir = kZoneinfoDir);

}  // namespace composer::policies
