#include "composer/db/failure.h"

#include <string>

namespace composer::db {

void fail(ErrorCode code, std::string_view message) {
  std::string text = "store: ";
  text += message;
  throw Failure(Error(code, std::move(text)));
}

}  // namespace composer::db
