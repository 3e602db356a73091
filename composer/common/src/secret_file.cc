#include "composer/common/secret_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace composer {

Status check_secret_file(const std::string& path, const std::string& what) {
  const std::string file = what + " ";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Error{ErrorCode::kInvalidArgument,
                 file + path + " cannot be read: it does not exist or " + "is not accessible"};
  }
  if (!S_ISREG(st.st_mode)) {
    return Error{ErrorCode::kInvalidArgument, file + path + " is not a regular file"};
  }
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return Error{ErrorCode::kPermissionDenied,
                 file + path + " is owned by uid " + std::to_string(st.st_uid) +
                     "; it must be owned by root or uid " + std::to_string(::geteuid())};
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    return Error{ErrorCode::kPermissionDenied,
                 file + path + " has mode " + mode +
                     ", so group or others may read it; run chmod 600 " + path};
  }
  return Status::Ok();
}

Expected<std::string> read_secret_line(const std::string& path, const std::string& what) {
  if (Status s = check_secret_file(path, what); !s) return s.error();
  std::ifstream in(path);
  if (!in) return Error{ErrorCode::kInvalidArgument, what + " " + path + " cannot be opened"};
  std::string line;
  std::string found;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    if (!found.empty()) {
      return Error{ErrorCode::kInvalidArgument,
                   what + " " + path + " line " + std::to_string(number) +
                       " is a second setting; the file holds one line"};
    }
    found = line.substr(start);
  }
  if (found.empty()) {
    return Error{ErrorCode::kInvalidArgument, what + " " + path + " holds no setting"};
  }
  return found;
}

}  // namespace composer
