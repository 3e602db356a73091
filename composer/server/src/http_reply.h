// The answers every composerd route sends: JSON bodies and the API's error body.
#pragma once

#include <httplib.h>
#include <json/value.h>

#include <string>
#include <utility>

#include "composer/api/codec.h"
#include "composer/common/error.h"

namespace composer::server {

inline void send_json(httplib::Response& res, int status, const Json::Value& body) {
  res.status = status;
  res.set_content(api::to_text(body), "application/json");
}

inline void send_error(httplib::Response& res, const Error& e) {
  send_json(res, api::http_status(e.code), api::to_json(e));
}

// The caller's input is wrong: 400 with this sentence.
inline Error bad(std::string message) {
  return Error{ErrorCode::kInvalidArgument, std::move(message)};
}

}  // namespace composer::server
