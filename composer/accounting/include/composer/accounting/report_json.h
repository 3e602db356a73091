// The report's JSON form: the body of GET /v1/reports (docs/API.md), written by composerd and
// read back by composerctl. Device time travels as integer milliseconds, so a reader can check
// that the groupings add up exactly.
#pragma once

#include <json/value.h>

#include "composer/accounting/report.h"
#include "composer/common/error.h"

namespace composer::accounting {

Json::Value to_json(const Report& report);
// Strict, like the API's bodies (composer/api/json_reader.h): every field must be present with
// its JSON type and no other field may be; the message names the field's path
// ("top_jobs: required field is missing", "pools[2].colour: unknown field; ...").
Expected<Report> report_from_json(const Json::Value& value);

}  // namespace composer::accounting
