// Error and Expected<T>: the one error type every component returns at its edge.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace composer {

// Stable codes: they appear in the HTTP API and in composerctl's output, so never rename one.
enum class ErrorCode {
  kInvalidArgument,   // the caller's input is wrong; nothing changed
  kNotFound,          // no such job, node, device
  kConflict,          // the request contradicts current state
  kInsufficient,      // the pool cannot serve the request now
  kUnauthenticated,   // no or bad credential
  kPermissionDenied,  // authenticated, but not allowed
  kFabric,            // the fabric manager failed or refused
  kTimeout,           // a bounded wait ran out
  kUnavailable,       // a dependency (daemon, database) cannot be reached
  kInternal,          // a bug or an unexpected system error
};

std::string_view to_string(ErrorCode code);
// Parses the stable name back (used by the client); unknown names map to kInternal.
ErrorCode error_code_from_string(std::string_view name);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;

  Error() = default;
  Error(ErrorCode c, std::string m) : code(c), message(std::move(m)) {}
};

std::ostream& operator<<(std::ostream& os, const Error& e);

// A value or an Error. Deliberately small: C++20 has no std::expected.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Expected(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Expected<void>.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error)
      : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  static Status Ok() { return {}; }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

template <typename T>
std::ostream& operator<<(std::ostream& os, const Expected<T>& e) {
  if (e.ok()) return os << "ok";
  return os << e.error();
}
std::ostream& operator<<(std::ostream& os, const Status& s);

}  // namespace composer
