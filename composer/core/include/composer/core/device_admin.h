// The device administration: what nodes and admins decide about devices and held compositions,
// beside the composition service (service.h) on the same live pool (live_pool.h).
//
// A node holds its job's composition while processes still use its devices, and drains or
// reports failed a device its host never showed or found bad; an admin drains and resumes
// devices and failure domains, and settles devices held outside composerd. Each decision is
// written to the store (with its actor, as a ledger event where the store keeps one) before
// the pool shows it.
#pragma once

#include <string>
#include <vector>

#include "composer/common/clock.h"
#include "composer/common/error.h"
#include "composer/core/live_pool.h"
#include "composer/core/service.h"
#include "composer/db/store.h"
#include "composer/model/model.h"

namespace composer {

class DeviceAdmin {
 public:
  // Fabric changes (adopt's detach) go through `service`, and waits are bounded by its
  // release timeout; `pool` is the one the service composes from.
  DeviceAdmin(CompositionService& service, LivePool& pool, const Clock& clock);
  DeviceAdmin(const DeviceAdmin&) = delete;
  DeviceAdmin& operator=(const DeviceAdmin&) = delete;

  // A node's hold on the job's ready composition there (Composition::hold): `cause` (the
  // processes that still hold its devices after the job) sets it, "" clears it. While it is
  // set, release() answers kConflict, release_job() and the reconciler leave it as it is:
  // nothing is detached under a live holder. kNotFound without a live composition; kConflict
  // when setting it on one that is not ready. `actor` is recorded with the event
  // (device_admin_test, AHeldCompositionIsReleasedByNoOneUntilTheHoldIsCleared).
  Expected<Composition> set_hold(uint32_t job_id, const std::string& node, const std::string& cause,
                                 const std::string& actor);
  // A node drains a device of the job's live composition there that its host never showed
  // after the attach, so that no later job gets it before an admin has looked. kNotFound
  // without a live composition; kInvalidArgument for a device the composition does not hold.
  Expected<Device> drain_unseen(uint32_t job_id, const std::string& node,
                                const std::string& device_id, const std::string& reason,
                                const std::string& actor);
  // A node's host found a GPU of the job's live composition there bad (NVML, a critical XID,
  // gone from the bus): the device is marked failed (health critical, so the failure reactor
  // gives the job holding it its class's reaction) and drained with LivePool::kHostFailed and
  // `reason` (so no later job gets it). The fabric's health does not clear it (the reconciler
  // leaves it), a restart does not either (the drain reason says where it came from): only
  // resume() does. The node is never drained for it. Repeated, it changes nothing. kNotFound
  // without a live composition; kInvalidArgument for a device the composition does not hold
  // (device_admin_test, AFailureAHostReportedStandsUntilResumed).
  Expected<Device> fail_reported(uint32_t job_id, const std::string& node,
                                 const std::string& device_id, const std::string& reason,
                                 const std::string& actor);
  Expected<Device> drain(const std::string& device_id, const std::string& reason,
                         const std::string& actor);
  // Lifts a drain; a failure a host reported (fail_reported) goes with it.
  Expected<Device> resume(const std::string& device_id, const std::string& actor);
  // Drains (or resumes) every device of a failure domain at once, all or none, for a planned
  // maintenance: live compositions keep their devices until they end; the log says when the
  // domain's last one has. kNotFound (naming the pool's domains) when no device is in it
  // (device_admin_test, AFailureDomainIsDrainedWholeAndResumedWhole).
  Expected<std::vector<Device>> set_domain_drained(const FailureDomain& domain, bool drained,
                                                   const std::string& reason,
                                                   const std::string& actor);
  // An admin's decisions about devices held outside composerd, each a ledger event with the
  // actor. adopt: a foreign device composed into one host is detached from it now (the admin
  // vouches that nothing there uses it) and joins the pool. release_foreign: composerd gives up
  // its claim on a device it attached that no live composition owns (the reconciler would
  // take it back); it stays where it is, foreign, until the fabric frees it.
  Expected<Device> adopt(const std::string& device_id, const std::string& actor);
  Expected<Device> release_foreign(const std::string& device_id, const std::string& actor);

 private:
  CompositionService& service_;
  db::Store& store_;
  Fabric& fabric_;
  LivePool& pool_;
  const Clock& clock_;
};

}  // namespace composer
