#include "composer/common/error.h"

#include <array>

namespace composer {
namespace {
constexpr std::array<std::pair<ErrorCode, std::string_view>, 10> kNames{{
    {ErrorCode::kInvalidArgument, "invalid_argument"},
    {ErrorCode::kNotFound, "not_found"},
    {ErrorCode::kConflict, "conflict"},
    {ErrorCode::kInsufficient, "insufficient_resources"},
    {ErrorCode::kUnauthenticated, "unauthenticated"},
    {ErrorCode::kPermissionDenied, "permission_denied"},
    {ErrorCode::kFabric, "fabric_error"},
    {ErrorCode::kTimeout, "timeout"},
    {ErrorCode::kUnavailable, "unavailable"},
    {ErrorCode::kInternal, "internal"},
}};
}  // namespace

std::string_view to_string(ErrorCode code) {
  for (const auto& [c, name] : kNames) {
    if (c == code) return name;
  }
  return "internal";
}

ErrorCode error_code_from_string(std::string_view name) {
  for (const auto& [c, n] : kNames) {
    if (n == name) return c;
  }
  return ErrorCode::kInternal;
}

std::ostream& operator<<(std::ostream& os, const Error& e) {
  return os << to_string(e.code) << ": " << e.message;
}

std::ostream& operator<<(std::ostream& os, const Status& s) {
  if (s.ok()) return os << "ok";
  return os << s.error();
}

}  // namespace composer
