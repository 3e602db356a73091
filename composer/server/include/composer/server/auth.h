// Who is calling: a munge credential in "Authorization: Munge <cred>", decoded by munged.
#pragma once

#include <cstdint>
#include <semaphore>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "composer/common/error.h"

namespace composer::server {

struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
  bool admin = false;
  bool composer = false;  // may compose and release jobs: admins and ComposeUsers
};

class Authenticator {
 public:
  Authenticator(std::string munge_socket, std::set<uint32_t> admin_uids,
                std::set<uint32_t> compose_uids = {});

  // The credential must decode, must not be a replay, and its payload must be
  // "METHOD PATH" of this very request. kUnauthenticated with the reason otherwise.
  // A caller on the Unix socket, whose uid and gid the kernel gave: no credential to check.
  Caller local(uint32_t uid, uint32_t gid) const;
  Expected<Caller> authenticate(std::string_view authorization, std::string_view method,
                                std::string_view path) const;

 private:
  std::string socket_;
  std::set<uint32_t> admins_;
  std::set<uint32_t> composers_;
  mutable std::counting_semaphore<> decode_slots_{16};  // munge_decode calls in flight
};

// AdminUsers (or ComposeUsers, `key`) names or numeric uids to uids; root is always among them.
Expected<std::set<uint32_t>> resolve_users(const std::vector<std::string>& names,
                                           std::string_view key = "AdminUsers");

}  // namespace composer::server
