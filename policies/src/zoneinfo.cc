#include "composer/policies/zoneinfo.h"

#include <cctype>
#include <fstream>
#include <iterator>
#include <sstream>

namespace composer::policies {

namespace {

bool valid_zone_name(std::string_view name) {
  if (name.empty() || name.size() > 255 || name.front() == '/' || name.back() == '/') return false;
  size_t part_start = 0;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '/') {
      std::string_view part = name.substr(part_start, i - part_start);
      if (part.empty() || part == "." || part == "..") return false;
      part_start = i + 1;
      continue;
    }
    const char c = name[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '+' ||
          c == '.')) {
      return false;
    }
  }
  return true;
}

}  // namespace

Expected<TimeZone> load_time_zone(std::string_view name, std::string_view dir) {
  if (!valid_zone_name(name)) {
    return Error{ErrorCode::kInvalidArgument,
                 "time zone '" + std::string(name) +
                     "' is not an IANA zone name: use Area/Location such as Europe/Berlin "
                     "(letters, digits, '_', '-', '+', parts separated by '/')"};
  }
  const std::string path = std::string(dir) + "/" + std::string(name);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Error{ErrorCode::kNotFound, "time zone '" + std::string(name) +
                                           "' is unknown: no file " + path +
                                           " (is the tzdata package installed?)"};
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) {
    return Error{ErrorCode::kUnavailable,
                 "time zone '" + std::string(name) + "': reading " + path + " failed"};
  }
  return TimeZone::from_tzif(std::string(name), bytes.str());
}

}  // namespace composer::policies
