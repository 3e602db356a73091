// How the store's code below its edge reports a failure, whatever the database: it throws a
// Failure carrying a composer::Error whose message says what was being done ("store:
// inserting composition: ..."). The Store turns it back into Expected/Status at its edge, so
// exceptions never leave the component.
#pragma once

#include <exception>
#include <string_view>
#include <utility>

#include "composer/common/error.h"

namespace composer::db {

class Failure : public std::exception {
 public:
  explicit Failure(Error error) : error_(std::move(error)) {}
  const Error& error() const { return error_; }
  const char* what() const noexcept override { return error_.message.c_str(); }

 private:
  Error error_;
};

// Throws Failure(code, "store: " + message).
[[noreturn]] void fail(ErrorCode code, std::string_view message);

}  // namespace composer::db
