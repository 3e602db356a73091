// Which workload class a job belongs to.
//
// Precedence: the job's --workload flag; else the class whose Partitions= lists the job's
// partition (for a job submitted to several partitions, the first one any class lists);
// else the class whose QOS= lists its QOS; else the class whose Accounts= lists its account;
// else DefaultClass. Partition comes first because it names the hardware and purpose the
// admin set aside; QOS before account because a QOS is chosen per job, an account per user.
#pragma once

#include <string>

#include "composer/common/error.h"
#include "composer/policies/policy.h"

namespace composer::policies {

struct JobAttributes {
  std::string workload;   // --workload; empty if not given
  std::string partition;  // may be a comma-separated list
  std::string qos;
  std::string account;
};

struct Classification {
  std::string class_name;
  std::string reason;  // "--workload=training", "partition train", "DefaultClass"
};

// kInvalidArgument when --workload names no class, or nothing matches and there is no
// DefaultClass; the message names the known classes.
Expected<Classification> classify(const Policy& policy, const JobAttributes& job);

}  // namespace composer::policies
