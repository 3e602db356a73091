// Secrets read from files: the store's connection string (StateUrlFile=, composerctl's
// --url-file) and the fabric managers' credentials (composer/drivers/credentials.h) follow one
// rule, checked here.
#pragma once

#include <string>

#include "composer/common/error.h"

namespace composer {

// The rule every secret file follows: a regular file, owned by root or the current user, that
// neither group nor others may read or write. The sentence names `what` and the file, and the
// fix (chmod 600).
Status check_secret_file(const std::string& path, const std::string& what);

// The one line of a secret file (StateUrlFile=: a libpq connection string), after
// check_secret_file: its first line that is neither empty nor a '#' comment. Refuses a file
// with none or with a second such line. The error never quotes the file's content.
Expected<std::string> read_secret_line(const std::string& path, const std::string& what);

}  // namespace composer
