// Bodies of the policy endpoints (docs/API.md, "Policies") and their JSON codecs, shared by
// composerd and composerctl. Decoding is strict like codec.h: an unknown field, a wrong type
// or a missing required field is refused with a sentence that starts with the field's name.
#pragma once

#include <json/value.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "composer/model/model.h"

namespace composer::api {

// PUT /v1/policy: the policy file's text and the name it is known by (for messages).
struct PolicyBody {
  std::string file;
  std::string text;
  bool dry_run = false;  // validate and answer, store nothing
  bool operator==(const PolicyBody&) const = default;
};

// The answer to PUT /v1/policy. `changed` is false when the text is the one in force (nothing
// was stored) or for a dry run; `policy` is then the version in force (or, for a dry run of a
// new text, the version that would be stored, with id 0).
struct PolicyApplied {
  bool changed = false;
  PolicyVersion policy;
  std::vector<std::string> warnings;
  // What composerd does (did) to Slurm for this policy, one line per change
  // ("create  day_block_inference  ...: scontrol create reservation ..."), and how it went:
  // "applied", "nothing to change", "not applied: ..." or, with SlurmSync=no, why not.
  std::vector<std::string> slurm_actions;
  std::string slurm;
};

// GET /v1/policy/explain: what holds a hypothetical job (policies/evaluate.h).
struct PolicyHold {
  std::string window;  // a window's name, "Default", or "pool"
  std::string type;    // gpu, mem, nvme
  uint64_t cap = 0;    // memory in GiB
  uint64_t requested = 0;
  int64_t from_ms = 0;
  int64_t until_ms = 0;
  bool operator==(const PolicyHold&) const = default;
};
struct PolicyExplanation {
  std::string workload;       // the class the job falls in
  std::string classified_by;  // "--workload=training", "partition gpu", "DefaultClass"
  bool admitted = false;
  std::optional<int64_t> earliest_ms;  // when not admitted: the earliest start within a week
  std::vector<std::string> windows;    // windows the run overlaps (when admitted)
  std::optional<PolicyHold> hold;
  std::string explanation;  // one sentence for a person
};

Json::Value to_json(const PolicyVersion& p);
Json::Value to_json(const PolicyBody& b);
Json::Value to_json(const PolicyApplied& a);
Json::Value to_json(const PolicyExplanation& e);
Json::Value policy_history_to_json(const std::vector<PolicyVersion>& history);

Expected<PolicyVersion> policy_version_from_json(const Json::Value& v);
Expected<PolicyBody> policy_body_from_json(const Json::Value& v);
Expected<PolicyApplied> policy_applied_from_json(const Json::Value& v);
Expected<PolicyExplanation> policy_explanation_from_json(const Json::Value& v);
Expected<std::vector<PolicyVersion>> policy_history_from_json(const Json::Value& v);

}  // namespace composer::api
