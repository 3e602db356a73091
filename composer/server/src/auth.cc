#include "composer/server/auth.h"

#include <munge.h>
#include <pwd.h>

#include <cstdlib>
#include <memory>
#include <semaphore>

#include "composer/common/strings.h"
#include "composer/common/units.h"

namespace composer::server {
namespace {
struct CtxDeleter {
  void operator()(munge_ctx_t ctx) const { munge_ctx_destroy(ctx); }
};
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
constexpr std::string_view kScheme = "Munge ";
}  // namespace

Authenticator::Authenticator(std::string munge_socket, std::set<uint32_t> admin_uids,
                             std::set<uint32_t> compose_uids)
    : socket_(std::move(munge_socket)),
      admins_(std::move(admin_uids)),
      composers_(std::move(compose_uids)) {}

Expected<Caller> Authenticator::authenticate(std::string_view authorization,
                                             std::string_view method, std::string_view path) const {
  if (authorization.empty()) {
    return Error{ErrorCode::kUnauthenticated,
                 "no credential: send 'Authorization: Munge <credential>' (composerctl does)"};
  }
  if (authorization.substr(0, kScheme.size()) != kScheme) {
    return Error{ErrorCode::kUnauthenticated,
                 "unsupported authorization scheme: only 'Munge' is accepted"};
  }
  const std::string cred(authorization.substr(kScheme.size()));
  std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, CtxDeleter> ctx(munge_ctx_create());
  if (!ctx) return Error{ErrorCode::kInternal, "munge: cannot create a context"};
  if (!socket_.empty() &&
      munge_ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket_.c_str()) != EMUNGE_SUCCESS) {
    return Error{ErrorCode::kInternal, "munge: cannot use socket " + socket_};
  }
  void* payload = nullptr;
  int len = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  munge_err_t err = EMUNGE_SUCCESS;
  {
    // Queue here rather than overflow munged's listen queue when a burst arrives.
    decode_slots_.acquire();
    err = munge_decode(cred.c_str(), ctx.get(), &payload, &len, &uid, &gid);
    decode_slots_.release();
  }
  std::unique_ptr<void, FreeDeleter> owned(payload);
  if (err != EMUNGE_SUCCESS) {
    const ErrorCode code = (err == EMUNGE_SOCKET || err == EMUNGE_SNAFU)
                               ? ErrorCode::kUnavailable
                               : ErrorCode::kUnauthenticated;
    return Error{code, std::string("munge credential refused: ") + munge_strerror(err)};
  }
  std::string expected(method);
  expected += ' ';
  expected += path;
  const std::string_view got(static_cast<const char*>(payload),
                             payload ? static_cast<size_t>(len) : 0);
  if (got != expected) {
    return Error{ErrorCode::kUnauthenticated, "munge credential was made for '" + printable(got) +
                                                  "', not for '" + printable(expected) + "'"};
  }
  return local(uid, gid);
}

Caller Authenticator::local(uint32_t uid, uint32_t gid) const {
  const bool admin = uid == 0 || admins_.count(uid) > 0;
  return Caller{
      .uid = uid, .gid = gid, .admin = admin, .composer = admin || composers_.count(uid) > 0};
}

Expected<std::set<uint32_t>> resolve_users(const std::vector<std::string>& names,
                                           std::string_view key) {
  std::set<uint32_t> uids{0};
  for (const auto& name : names) {
    if (auto n = parse_count(name, UINT32_MAX - 1); n) {
      uids.insert(*n);
      continue;
    }
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::string buf(16384, '\0');
    if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
      return Error{ErrorCode::kInvalidArgument, std::string(key) + ": no such user '" + name + "'"};
    }
    uids.insert(found->pw_uid);
  }
  return uids;
}

}  // namespace composer::server
