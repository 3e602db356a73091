// Checks of a parsed policy against the pool it will govern.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "composer/policies/policy.h"

namespace composer::policies {

struct Validation {
  // "FILE line N: sentence". Errors make the policy unusable; warnings point at something
  // that is probably not what the admin meant.
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
  bool ok() const { return errors.empty(); }
  // Errors, then warnings prefixed "warning: ", one per line.
  std::string to_string() const;
};

// Errors: a count cap above the pool; two windows that both cover some time and give a class
// different caps there; a class whose caps are 0 for every pooled type at all times (it can
// never run). Warnings: a type a class can never get, a window no Limit line uses, a Default
// limit that never applies, no DefaultClass.
Validation validate(const Policy& policy, const PoolSize& pool);

// The Placement lines against the failure domains: `levels` are composer.conf's
// DomainLevels=, `domains` the domain names of each level the pool's devices sit in.
// Errors, each with the file, line and rule: a level composer.conf does not declare; a spread
// over more domains than its level has (it can never be met); a spread of GPUs or NVMe drives
// whose Limit caps the class below Count in some window (a job there can never spread).
Validation validate_placement(const Policy& policy, const std::vector<std::string>& levels,
                              const std::map<std::string, std::set<std::string>>& domains);

}  // namespace composer::policies
