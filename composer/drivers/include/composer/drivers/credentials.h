// Secrets composerd reads from files: fabric manager credentials (a root-only file of
// "username=" and "password=" lines, shared by every driver that talks to a fabric manager
// over the network) and the store's connection string (StateUrlFile=). Both follow one rule.
#pragma once

#include <string>

#include "composer/common/error.h"

namespace composer::drivers {

// Reads "username=" and "password=" lines. Refuses a file readable or writable by group or
// others, or owned by someone other than root or the current user, with a sentence naming
// the file and the fix (chmod 600). `driver` names the file in errors ("liqid credentials
// file ..."). The error never quotes the file's content.
Status load_fabric_credentials(const std::string& path, const std::string& driver,
                               std::string* username, std::string* password);

// The rule every secret file follows: a regular file, owned by root or the current user, that
// neither group nor others may read or write. The sentence names `what` and the file, and the
// fix (chmod 600).
Status check_secret_file(const std::string& path, const std::string& what);

// The one line of a secret file (StateUrlFile=: a libpq connection string), after
// check_secret_file: its first line that is neither empty nor a '#' comment. Refuses a file
// with none or with a second such line. The error never quotes the file's content.
Expected<std::string> read_secret_line(const std::string& path, const std::string& what);

}  // namespace composer::drivers
