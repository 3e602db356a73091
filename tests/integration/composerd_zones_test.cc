// Zones in the scheduler: the pool snapshot job_submit reads carries what each zone has free
// and which zones each node reaches, and follows a compose and a release within a second
// rather than at the end of the ReconcileInterval.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "composer/api/snapshot.h"
#include "composerd_process.h"

namespace composer::testing {
namespace {

// Whether the snapshot shows `gpus` GPUs free in `zone` within `seconds` (polled).
bool zone_free_becomes(const ComposerdProcess& daemon, const std::string& zone, uint32_t gpus,
                       int seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    auto snap = api::read_snapshot(daemon.state_dir() + "/snapshot.json");
    if (snap.ok() && snap->zones.count(zone) && snap->zones.at(zone).gpus == gpus) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(ComposerdZones, TheSnapshotFollowsComposesAndReleasesAtOnce) {
  // A reconcile interval far longer than the test: only a compose or release republishes.
  ComposerdProcess daemon("ReconcileInterval=3600\n");
  auto c = daemon.client();
  ASSERT_TRUE(zone_free_becomes(daemon, "z1", 8, 5));
  auto snap = api::read_snapshot(daemon.state_dir() + "/snapshot.json");
  ASSERT_TRUE(snap.ok()) << snap.error();
  EXPECT_EQ(snap->node_zones.at("n1"), (std::vector<std::string>{"z1", "z2"}));
  EXPECT_EQ(snap->node_zones.at("n2"), (std::vector<std::string>{"z2"}));
  EXPECT_EQ(snap->zones.at("z2").gpu_models.at("H100"), 8u);

  // n1 takes its nearest zone's eight GPUs: z1 is dry.
  auto composed = c.compose(
      41, "n1", api::ComposeBody{.owner = {.uid = 1000, .user = "alice"}, .request = {.gpus = 8}});
  ASSERT_TRUE(composed.ok()) << composed.error();
  EXPECT_TRUE(zone_free_becomes(daemon, "z1", 0, 2));
  ASSERT_TRUE(c.release(41, "n1").ok());
  EXPECT_TRUE(zone_free_becomes(daemon, "z1", 8, 2));
}

}  // namespace
}  // namespace composer::testing
