// What the networked drivers (redfish, liqid) share on HTTP: the client settings from their
// options, basic authentication, the error code of a refusing status, and reading the JSON a
// fabric manager answers. Request bodies are written with api::to_text (composer/api/codec.h).
#pragma once

#include <json/value.h>

#include <string>
#include <string_view>

#include "composer/common/error.h"
#include "composer/drivers/fabric_manager.h"
#include "composer/http/http.h"

namespace composer::drivers {

// The HTTP client settings of a driver's options; `retries` 0 for a client whose requests
// must never be repeated.
http::HttpOptions http_options(const FabricManagerOptions& options, int retries);

// "Authorization: Basic ..." for the options' credentials.
std::string basic_auth_header(const FabricManagerOptions& options);

// A fabric manager's refusal as an error code: what the status says about the request (401,
// 403, 404, 409, 412), read as composerd's own statuses are (api::error_code_for_status);
// any other status is the fabric manager failing (kFabric), not the caller.
ErrorCode error_code_for_manager_status(long status);

// Lenient on purpose (comments, duplicate keys): fabric managers are not always strict, and
// what they answer is checked field by field afterwards. False with the reason in `why`.
bool parse_json(const std::string& text, Json::Value* out, std::string* why);

}  // namespace composer::drivers
