// Fabric manager credentials: a root-only file of "username=" and "password=" lines, shared by
// every driver that talks to a fabric manager over the network. It follows the rule of every
// secret file (composer/common/secret_file.h).
#pragma once

#include <string>

#include "composer/common/error.h"
#include "composer/common/secret_file.h"

namespace composer::drivers {

// Reads "username=" and "password=" lines. Refuses a file readable or writable by group or
// others, or owned by someone other than root or the current user, with a sentence naming
// the file and the fix (chmod 600). `driver` names the file in errors ("liqid credentials
// file ..."). The error never quotes the file's content.
Status load_fabric_credentials(const std::string& path, const std::string& driver,
                               std::string* username, std::string* password);

}  // namespace composer::drivers
