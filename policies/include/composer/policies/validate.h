// Checks of a parsed policy against the pool it will govern.
#pragma once

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

}  // namespace composer::policies
