// The day/night policy compiled for Slurm, shared by the plan's tests (slurm_plan_test.cc) and
// those of composerd's run-time sync that plan against it (tests/server/slurm_holds_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "composer/common/slurm_text.h"
#include "composer/policies/compile_plan.h"
#include "policy_fixture.h"

namespace composer::policies::testing {

// What Slurm would report after the plan was applied.
inline SlurmState applied(const Plan& plan, std::vector<LicenseCount> other_licenses = {}) {
  SlurmState s;
  s.licenses = std::move(other_licenses);
  s.licenses.insert(s.licenses.end(), plan.licenses.begin(), plan.licenses.end());
  for (const auto& r : plan.reservations) {
    ExistingReservation e;
    e.name = r.name;
    e.start_local = r.start_local;
    e.duration_min = r.duration_min;
    std::stringstream flags(r.flags());
    for (std::string f; std::getline(flags, f, ',');) e.flags.push_back(f);
    e.licenses = r.licenses;
    e.users = r.users;
    s.reservations.push_back(e);
  }
  return s;
}

// kDayNight parsed, in its time zone (Europe/Berlin).
class PlanTest : public ::testing::Test {
 protected:
  PlanTest() : policy_(parse_ok(kDayNight)), tz_(policy_.time_zone) {}
  int64_t berlin(int y, int mo, int d, int h, int mi = 0) const {
    return local(tz_, y, mo, d, h, mi);
  }

  Policy policy_;
  const TimeZone& tz_;
};

}  // namespace composer::policies::testing
