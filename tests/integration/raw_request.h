// Raw HTTP requests to composerd with a valid munge credential, for the inputs the client
// library would never send (malformed JSON, unknown fields, negative sizes).
#pragma once

#include <httplib.h>
#include <munge.h>

#include <cstdlib>
#include <string>

namespace composer::testing {

inline std::string munge_credential(const std::string& socket, const std::string& payload) {
  munge_ctx_t ctx = munge_ctx_create();
  munge_ctx_set(ctx, MUNGE_OPT_SOCKET, socket.c_str());
  char* cred = nullptr;
  munge_encode(&cred, ctx, payload.data(), static_cast<int>(payload.size()));
  std::string out = cred != nullptr ? cred : "";
  std::free(cred);
  munge_ctx_destroy(ctx);
  return out;
}

struct RawAnswer {
  int status = 0;
  std::string body;
};

inline RawAnswer raw_request(const std::string& host, int port, const std::string& socket,
                             const std::string& method, const std::string& path,
                             const std::string& body = "", bool with_credential = true) {
  httplib::Client cli(host, port);
  httplib::Headers headers;
  const std::string bare = path.substr(0, path.find('?'));
  if (with_credential) {
    headers.emplace("Authorization", "Munge " + munge_credential(socket, method + " " + bare));
  }
  auto answer = [](const httplib::Result& r) {
    return r ? RawAnswer{r->status, r->body} : RawAnswer{};
  };
  if (method == "PUT") return answer(cli.Put(path, headers, body, "application/json"));
  if (method == "POST") return answer(cli.Post(path, headers, body, "application/json"));
  if (method == "DELETE") return answer(cli.Delete(path, headers));
  return answer(cli.Get(path, headers));
}

}  // namespace composer::testing
