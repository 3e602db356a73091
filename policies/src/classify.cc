#include "composer/policies/classify.h"

#include <algorithm>

namespace composer::policies {

namespace {

std::string known_classes(const Policy& p) {
  std::string out;
  for (const auto& c : p.classes) out += (out.empty() ? "" : ", ") + c.name;
  return out.empty() ? "no classes" : out;
}

const WorkloadClass* claimed_by(const Policy& p, std::vector<std::string> WorkloadClass::*list,
                                std::string_view value) {
  if (value.empty()) return nullptr;
  for (const auto& c : p.classes) {
    const auto& v = c.*list;
    if (std::find(v.begin(), v.end(), value) != v.end()) return &c;
  }
  return nullptr;
}

}  // namespace

Expected<Classification> classify(const Policy& policy, const JobAttributes& job) {
  if (!job.workload.empty()) {
    if (!policy.find_class(job.workload)) {
      return Error{ErrorCode::kInvalidArgument, "--workload=" + job.workload +
                                                    " names no workload class: the policy "
                                                    "defines " +
                                                    known_classes(policy)};
    }
    return Classification{job.workload, "--workload=" + job.workload};
  }
  std::string_view parts = job.partition;
  while (!parts.empty()) {
    auto comma = parts.find(',');
    std::string_view one = parts.substr(0, comma);
    if (const auto* c = claimed_by(policy, &WorkloadClass::partitions, one))
      return Classification{c->name, "partition " + std::string(one)};
    parts = comma == std::string_view::npos ? std::string_view{} : parts.substr(comma + 1);
  }
  if (const auto* c = claimed_by(policy, &WorkloadClass::qos, job.qos))
    return Classification{c->name, "QOS " + job.qos};
  if (const auto* c = claimed_by(policy, &WorkloadClass::accounts, job.account))
    return Classification{c->name, "account " + job.account};
  if (!policy.default_class.empty()) return Classification{policy.default_class, "DefaultClass"};
  return Error{ErrorCode::kInvalidArgument,
               "the job names no workload class (--workload) and its partition, QOS and account "
               "match none, and the policy has no DefaultClass: use --workload with one of " +
                   known_classes(policy)};
}

}  // namespace composer::policies
