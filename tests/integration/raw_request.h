// Raw HTTP requests to composerd with a valid munge credential, for the inputs the client
// library would never send (malformed JSON, unknown fields, negative sizes).
#pragma once

#include <httplib.h>

#include <string>
#include <utility>

#include "composer/client/munge_credential.h"
#include "composer/common/strings.h"

namespace composer::testing {

// The client's credential (composer/client), or "" when munged cannot make one.
inline std::string munge_credential(const std::string& socket, const std::string& payload) {
  auto cred = client::munge_credential(payload, socket);
  return cred ? *std::move(cred) : "";
}

struct RawAnswer {
  int status = 0;
  std::string body;
};

// With the Authorization header given (none when empty), e.g. a credential another user made.
inline RawAnswer raw_request_authorized(const std::string& host, int port,
                                        const std::string& method, const std::string& path,
                                        const std::string& body, const std::string& authorization) {
  httplib::Client cli(host, port);
  httplib::Headers headers;
  if (!authorization.empty()) headers.emplace("Authorization", authorization);
  auto answer = [](const httplib::Result& r) {
    return r ? RawAnswer{r->status, r->body} : RawAnswer{};
  };
  if (method == "PUT") return answer(cli.Put(path, headers, body, "application/json"));
  if (method == "POST") return answer(cli.Post(path, headers, body, "application/json"));
  if (method == "DELETE") return answer(cli.Delete(path, headers));
  return answer(cli.Get(path, headers));
}

inline RawAnswer raw_request(const std::string& host, int port, const std::string& socket,
                             const std::string& method, const std::string& path,
                             const std::string& body = "", bool with_credential = true) {
  // The credential names the path as the server routes it: percent-decoded (docs/API.md).
  const std::string bare = percent_decode(path.substr(0, path.find('?')), false);
  return raw_request_authorized(
      host, port, method, path, body,
      with_credential ? "Munge " + munge_credential(socket, method + " " + bare) : "");
}

}  // namespace composer::testing
