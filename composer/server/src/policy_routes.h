// The /v1/policy routes (docs/API.md, "Policies") over the PolicyKeeper.
#pragma once

#include <functional>

#include "policy_keeper.h"

namespace composer::server {

class RoutePipeline;

// PUT /v1/policy (admins), GET /v1/policy, GET /v1/policy/history, GET /v1/policy/explain
// (anyone authenticated; `start_ms` defaults to the keeper's clock). `changed` runs after a
// new version is stored. With `slurm` (SlurmSync=yes) PUT also shows the changes to Slurm: a
// dry run the diff against what scontrol shows (nothing changes), a real apply the round it
// ran at once.
class SlurmSync;
void install_policy_routes(RoutePipeline& routes, PolicyKeeper& keeper,
                           std::function<void()> changed, SlurmSync* slurm = nullptr);

}  // namespace composer::server
