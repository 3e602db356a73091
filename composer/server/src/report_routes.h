// GET /v1/reports (docs/API.md, "Reports"): accounting reports computed from the ledger.
#pragma once

#include "composer/common/clock.h"
#include "composer/db/store.h"

namespace composer::server {

class RoutePipeline;

// Admins get the whole report; any other user gets the pool's utilisation and only their own
// jobs in the groupings, top jobs, latency and failures. At most two reports are computed at
// once, so reports never take every API thread from the prologs.
void install_report_routes(RoutePipeline& routes, db::Store& store, const Clock& clock);

}  // namespace composer::server
