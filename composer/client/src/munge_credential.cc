#include "munge_credential.h"

#include <munge.h>

#include <cstdlib>
#include <memory>

namespace composer::client {
namespace {
struct CtxDeleter {
  void operator()(munge_ctx_t ctx) const { munge_ctx_destroy(ctx); }
};
struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
}  // namespace

Expected<std::string> munge_credential(std::string_view payload, const std::string& socket) {
  const std::string where = socket.empty() ? "munged's default socket" : "munged at " + socket;
  std::unique_ptr<struct munge_ctx, CtxDeleter> ctx(munge_ctx_create());
  if (!ctx) return Error{ErrorCode::kInternal, "cannot create a munge context (out of memory?)"};
  if (!socket.empty()) {
    if (munge_err_t e = munge_ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket.c_str());
        e != EMUNGE_SUCCESS) {
      return Error{ErrorCode::kInternal,
                   "cannot use munge socket " + socket + ": " + munge_ctx_strerror(ctx.get())};
    }
  }
  char* raw = nullptr;
  const munge_err_t e =
      munge_encode(&raw, ctx.get(), payload.data(), static_cast<int>(payload.size()));
  std::unique_ptr<char, FreeDeleter> cred(raw);
  if (e != EMUNGE_SUCCESS) {
    const char* why = munge_ctx_strerror(ctx.get());
    const std::string reason = why != nullptr ? why : munge_strerror(e);
    return Error{e == EMUNGE_SOCKET ? ErrorCode::kUnavailable : ErrorCode::kInternal,
                 "cannot get a munge credential from " + where + ": " + reason};
  }
  return std::string(cred.get());
}

}  // namespace composer::client
