#include "composer/client/munge_credential.h"

#include <munge.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

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
  // munged's listen queue overflows when hundreds of callers (a job array's prologs on one
  // host, or a benchmark) ask at once: retry a refused connection with a growing pause.
  munge_err_t e = EMUNGE_SUCCESS;
  std::unique_ptr<char, FreeDeleter> cred;
  for (int attempt = 0;; ++attempt) {
    char* raw = nullptr;
    e = munge_encode(&raw, ctx.get(), payload.data(), static_cast<int>(payload.size()));
    cred.reset(raw);
    if (e != EMUNGE_SOCKET || attempt >= 6) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10L << attempt));
  }
  if (e != EMUNGE_SUCCESS) {
    const char* why = munge_ctx_strerror(ctx.get());
    const std::string reason = why != nullptr ? why : munge_strerror(e);
    return Error{e == EMUNGE_SOCKET ? ErrorCode::kUnavailable : ErrorCode::kInternal,
                 "cannot get a munge credential from " + where + ": " + reason};
  }
  return std::string(cred.get());
}

}  // namespace composer::client
