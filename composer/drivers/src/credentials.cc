// Credentials for the fabric drivers: a root-only file of "key=value" lines.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "composer/drivers/credentials.h"

namespace composer::drivers {

Status load_fabric_credentials(const std::string& path, const std::string& driver,
                               std::string* username, std::string* password) {
  const std::string file = driver + " credentials file ";
  if (Status s = check_secret_file(path, driver + " credentials file"); !s) return s;
  std::ifstream in(path);
  if (!in) {
    return Error{ErrorCode::kInvalidArgument, file + path + " cannot be opened"};
  }
  std::string line;
  int number = 0;
  username->clear();
  password->clear();
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    const size_t eq = line.find('=');
    // The sentence names the line, never its content: it may hold the password.
    if (eq == std::string::npos) {
      return Error{ErrorCode::kInvalidArgument,
                   file + path + " line " + std::to_string(number) +
                       " is not KEY=VALUE; allowed keys are username and password"};
    }
    std::string key = line.substr(start, eq - start);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    const std::string value = line.substr(eq + 1);
    if (key == "username") {
      *username = value;
    } else if (key == "password") {
      *password = value;
    } else {
      // Not even the key: a line written "<password>=" would show the password.
      return Error{ErrorCode::kInvalidArgument,
                   file + path + " line " + std::to_string(number) +
                       " has a key other than username and password; allowed keys are "
                       "username and password"};
    }
  }
  if (username->empty()) {
    return Error{ErrorCode::kInvalidArgument, file + path + " has no username= line"};
  }
  return Status::Ok();
}

}  // namespace composer::drivers
