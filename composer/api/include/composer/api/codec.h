// The one JSON codec of the HTTP API (docs/API.md), used by composerd and by the client.
//
// Encoding never fails. Decoding is strict and says what was wrong: a body with an unknown
// field, a value of the wrong JSON type, a negative or out-of-range number or an unknown enum
// name is refused with kInvalidArgument and a sentence that starts with the field's path, for
// example "request.gpus: -1 is not a whole number from 0 to 1024" (the wording of
// json_reader.h, which every decoder of the project's JSON reads with).
#pragma once

#include <json/value.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "composer/api/types.h"
#include "composer/common/error.h"
#include "composer/model/model.h"

namespace composer::api {

// How deep a document may nest its arrays and objects; none of the project's needs ten.
inline constexpr int kMaxJsonDepth = 64;

// Parses one JSON document (an object or an array). Malformed text, trailing garbage,
// duplicate keys, comments, text that is not UTF-8, a raw control character in a string, a
// number JSON does not write ("01", "-00", "1.", "+1") and nesting deeper than kMaxJsonDepth
// are refused (kInvalidArgument) with a sentence naming line and column.
Expected<Json::Value> parse_json(std::string_view text);
// Compact single-line text, UTF-8 kept as is.
std::string to_text(const Json::Value& value);

Json::Value to_json(const Device& device);
Json::Value to_json(const Request& request);
Json::Value to_json(const Composition& composition);
Json::Value to_json(const PoolRow& row);
Json::Value to_json(const Event& event);
Json::Value to_json(const Host& host);
Json::Value to_json(const ComposeBody& body);
Json::Value to_json(const HealthInfo& health);
Json::Value to_json(const DrainBody& body);
Json::Value to_json(const ErrorBody& body);
Json::Value to_json(const Error& error);  // the same as to_json(ErrorBody{error})

// `path` names the value in error messages ("request", "devices[3]"); empty for a whole body.
// Required fields: all of them, except in Request (every field defaults to zero/empty) and in
// ComposeBody (account and workload default to empty). Defined (codec.cc) for Device, Request,
// Composition, PoolRow, Event, ComposeBody, HealthInfo, DrainBody and ErrorBody.
template <typename T>
Expected<T> from_json(const Json::Value& value, std::string_view path = {});

// from_json<Device> as a reader (json_reader.h) for documents that hold devices, such as the
// Slurm plugin's job state file: it refuses by throwing, so it runs inside read_json.
Device as_device(const Json::Value& value, const std::string& path);

// parse_json + from_json for a whole body.
template <typename T>
Expected<T> from_text(std::string_view text) {
  auto json = parse_json(text);
  if (!json) return json.error();
  return from_json<T>(*json);
}

// List answers: {"devices": [...]}, {"compositions": [...]}, {"pool": [...]}, {"events": [...]},
// {"hosts": [...]}.
Json::Value devices_to_json(const std::vector<Device>& devices);
// {"devices": [...], "next_cursor": "..."} (and "compositions", "events"); next_cursor left
// out on the last page.
Json::Value to_json(const DevicePage& page);
Json::Value to_json(const CompositionPage& page);
Json::Value to_json(const EventPage& page);
Json::Value compositions_to_json(const std::vector<Composition>& compositions);
Json::Value pool_to_json(const std::vector<PoolRow>& rows);
Json::Value events_to_json(const std::vector<Event>& events);
Json::Value hosts_to_json(const std::vector<Host>& hosts);
Expected<std::vector<Host>> hosts_from_json(const Json::Value& value);
Expected<std::vector<Device>> devices_from_json(const Json::Value& value);
Expected<DevicePage> device_page_from_json(const Json::Value& value);
Expected<CompositionPage> composition_page_from_json(const Json::Value& value);
Expected<EventPage> event_page_from_json(const Json::Value& value);
Expected<std::vector<Composition>> compositions_from_json(const Json::Value& value);
Expected<std::vector<PoolRow>> pool_from_json(const Json::Value& value);
Expected<std::vector<Event>> events_from_json(const Json::Value& value);

// DELETE /v1/compositions/{job}/{node}: the released composition, or {"released": false}
// when there was nothing to release (nullopt).
Json::Value release_to_json(const std::optional<Composition>& released);
Expected<std::optional<Composition>> release_from_json(const Json::Value& value);

// The HTTP status that carries an error code (docs/API.md, "Errors"), and the code a status
// stands for when an answer has no readable error body.
int http_status(ErrorCode code);
ErrorCode error_code_for_status(long status);

}  // namespace composer::api
