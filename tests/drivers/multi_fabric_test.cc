#include "composer/drivers/multi_fabric.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "composer/common/clock.h"
#include "composer/common/units.h"
#include "composer/drivers/sim_fabric.h"

namespace composer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

Host host(std::string node, std::string zone) {
  Host h;
  h.node = std::move(node);
  h.zones = {std::move(zone)};
  h.gpu_slots = 4;
  h.mem_slots = 4;
  h.nvme_slots = 4;
  return h;
}

SimConfig::Group gpus(std::string name, std::string zone, uint32_t count) {
  SimConfig::Group g;
  g.name = std::move(name);
  g.type = DeviceType::kGpu;
  g.model = "A100-80G";
  g.zone = std::move(zone);
  g.count = count;
  return g;
}

// Both pods use the same zone and device names on purpose: qualification keeps them apart.
SimConfig pod(std::vector<std::string> nodes, int latency_ms = 0) {
  SimConfig c;
  for (auto& n : nodes) c.hosts.push_back(host(n, "z1"));
  c.groups = {gpus("gpu", "z1", 2)};
  c.latency_ms = latency_ms;
  return c;
}

struct Pods {
  SimFabric* a = nullptr;
  SimFabric* b = nullptr;
  std::unique_ptr<MultiFabric> multi;
};

Pods make(SimConfig a, SimConfig b, const Clock& clock = SystemClock::instance()) {
  Pods p;
  auto sa = SimFabric::create(std::move(a), clock);
  auto sb = SimFabric::create(std::move(b), clock);
  EXPECT_TRUE(sa.ok() && sb.ok());
  p.a = sa->get();
  p.b = sb->get();
  std::vector<MultiFabric::Member> members;
  members.push_back({"pod-a", std::move(sa).value()});
  members.push_back({"pod-b", std::move(sb).value()});
  auto m = MultiFabric::create(std::move(members));
  EXPECT_TRUE(m.ok()) << m;
  p.multi = std::move(m).value();
  return p;
}

std::map<std::string, std::string> attached(Fabric& f) {
  auto inv = f.inventory();
  EXPECT_TRUE(inv.ok()) << inv;
  return inv.ok() ? inv->attached : std::map<std::string, std::string>{};
}

TEST(MultiFabric, QualifiesEveryNameWithItsFabric) {
  Pods p = make(pod({"n1", "n2"}), pod({"n3"}));
  EXPECT_EQ(p.multi->driver(), "pod-a=sim,pod-b=sim");
  auto inv = p.multi->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  std::vector<std::string> hosts, zones, devices;
  for (const Host& h : inv->hosts) {
    hosts.push_back(h.node + "@" + h.fabric_id);
    zones.insert(zones.end(), h.zones.begin(), h.zones.end());
  }
  for (const Device& d : inv->devices) devices.push_back(d.id + "@" + d.zone);
  EXPECT_THAT(hosts, ElementsAre("n1@pod-a:n1", "n2@pod-a:n2", "n3@pod-b:n3"));
  EXPECT_THAT(zones, ElementsAre("pod-a:z1", "pod-a:z1", "pod-b:z1"));
  EXPECT_THAT(devices, ElementsAre("pod-a:gpu-0@pod-a:z1", "pod-a:gpu-1@pod-a:z1",
                                   "pod-b:gpu-0@pod-b:z1", "pod-b:gpu-1@pod-b:z1"));
  auto health = p.multi->health();
  ASSERT_TRUE(health.ok()) << health;
  ASSERT_EQ(health->size(), 4u);
  EXPECT_EQ((*health)[2].first, "pod-b:gpu-0");
}

TEST(MultiFabric, AttachAndDetachReachOnlyTheHostsFabric) {
  Pods p = make(pod({"n1"}), pod({"n3"}));
  auto op = p.multi->attach("pod-b:n3", {"pod-b:gpu-1"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone);
  EXPECT_TRUE(op->id.starts_with("pod-b:")) << op->id;
  // The member itself holds the attachment under its own names; the other pod is untouched.
  EXPECT_THAT(attached(*p.b),
              UnorderedElementsAre(std::pair<const std::string, std::string>("gpu-1", "n3")));
  EXPECT_TRUE(attached(*p.a).empty());
  EXPECT_THAT(attached(*p.multi), UnorderedElementsAre(std::pair<const std::string, std::string>(
                                      "pod-b:gpu-1", "pod-b:n3")));

  ASSERT_TRUE(p.multi->detach("pod-b:n3", {"pod-b:gpu-1"}).ok());
  EXPECT_TRUE(attached(*p.b).empty());
}

TEST(MultiFabric, RefusesADeviceOfAnotherFabricAndChangesNothing) {
  Pods p = make(pod({"n1"}), pod({"n3"}));
  auto op = p.multi->attach("pod-a:n1", {"pod-a:gpu-0", "pod-b:gpu-0"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kConflict);
  EXPECT_THAT(op.error().message, HasSubstr("device pod-b:gpu-0 is on fabric pod-b"));
  EXPECT_TRUE(attached(*p.a).empty());
  EXPECT_TRUE(attached(*p.b).empty());
}

TEST(MultiFabric, UnknownOrUnqualifiedNamesAreRefusedWithTheFabricsListed) {
  Pods p = make(pod({"n1"}), pod({"n3"}));
  for (const std::string host : {"n1", "pod-c:n1", ":n1"}) {
    auto op = p.multi->attach(host, {"pod-a:gpu-0"});
    ASSERT_FALSE(op.ok()) << host;
    EXPECT_EQ(op.error().code, ErrorCode::kNotFound);
    EXPECT_THAT(op.error().message, HasSubstr("fabrics: pod-a, pod-b")) << op.error().message;
  }
  auto st = p.multi->operation_status("nowhere");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(attached(*p.a).empty());
}

TEST(MultiFabric, AMembersErrorNamesTheMember) {
  Pods p = make(pod({"n1"}), pod({"n3"}));
  auto op = p.multi->attach("pod-b:n3", {"pod-b:gpu-9"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(op.error().message, HasSubstr("fabric pod-b: "));
  // An injected failure comes back through the operation, as from the member itself.
  p.b->fail_next_attaches(1, "reprogram failed");
  auto failed = p.multi->attach("pod-b:n3", {"pod-b:gpu-0"});
  ASSERT_TRUE(failed.ok()) << failed;
  EXPECT_EQ(failed->state, OperationState::kFailed);
  EXPECT_THAT(failed->error, HasSubstr("reprogram failed"));
}

TEST(MultiFabric, OperationsArePolledOnTheirOwnFabric) {
  ManualClock clock(1000);
  Pods p = make(pod({"n1"}, 50), pod({"n3"}, 50), clock);
  auto op = p.multi->attach("pod-a:n1", {"pod-a:gpu-0"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kRunning);
  ASSERT_TRUE(op->id.starts_with("pod-a:")) << op->id;
  auto running = p.multi->operation_status(op->id);
  ASSERT_TRUE(running.ok()) << running;
  EXPECT_EQ(running->state, OperationState::kRunning);
  EXPECT_EQ(running->id, op->id);
  clock.advance_ms(60);
  auto done = p.multi->operation_status(op->id);
  ASSERT_TRUE(done.ok()) << done;
  EXPECT_EQ(done->state, OperationState::kDone);
  // The same id without its qualifier, on the other pod, is not that operation.
  const std::string bare = op->id.substr(op->id.find(':') + 1);
  auto elsewhere = p.multi->operation_status("pod-b:" + bare);
  EXPECT_FALSE(elsewhere.ok() && elsewhere->state == OperationState::kDone);
}

TEST(MultiFabric, ANodeClaimedByTwoFabricsIsRefused) {
  Pods p = make(pod({"n1"}), pod({"n1"}));
  auto inv = p.multi->inventory();
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.error().code, ErrorCode::kConflict);
  EXPECT_THAT(inv.error().message,
              HasSubstr("node n1 is served by both fabric pod-a and fabric pod-b"));
}

TEST(MultiFabric, CreateRefusesBadMembers) {
  auto sim = [] { return std::move(SimFabric::create(pod({"n1"}))).value(); };
  EXPECT_FALSE(MultiFabric::create({}).ok());
  std::vector<MultiFabric::Member> bad_name;
  bad_name.push_back({"pod:a", sim()});
  auto r = MultiFabric::create(std::move(bad_name));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("fabric name 'pod:a'"));
  std::vector<MultiFabric::Member> twice;
  twice.push_back({"a", sim()});
  twice.push_back({"a", sim()});
  r = MultiFabric::create(std::move(twice));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("fabric a is declared twice"));
  std::vector<MultiFabric::Member> null_driver;
  null_driver.push_back({"a", nullptr});
  EXPECT_FALSE(MultiFabric::create(std::move(null_driver)).ok());
}

}  // namespace
}  // namespace composer
