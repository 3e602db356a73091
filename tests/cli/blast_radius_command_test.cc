// blast_radius(): which devices a target names, which jobs it hits, and what share of each
// class's running capacity those jobs hold.
#include "composer/cli/blast_radius_command.h"

#include <gtest/gtest.h>

namespace composer::cli {
namespace {

Device gpu(std::string id, std::vector<FailureDomain> domains) {
  Device d;
  d.id = std::move(id);
  d.domains = std::move(domains);
  return d;
}

Composition comp(int64_t id, uint32_t job, std::string node, std::string workload,
                 std::vector<Device> devices) {
  Composition c;
  c.id = id;
  c.owner.job_id = job;
  c.node = std::move(node);
  c.owner.user = "u" + std::to_string(job);
  c.owner.workload = std::move(workload);
  c.state = CompositionState::kReady;
  c.devices = std::move(devices);
  return c;
}

class BlastRadiusTest : public ::testing::Test {
 protected:
  // enc-a holds a0, a1; enc-b holds b0, b1, b2; "pdu-a" is both a power feed and, by a
  // site's choice of names, a rack.
  BlastRadiusTest() {
    const FailureDomain pdu{"power", "pdu-a"}, rack{"rack", "pdu-a"};
    for (const char* id : {"a0", "a1"}) pool.push_back(gpu(id, {{"enclosure", "enc-a"}, pdu}));
    for (const char* id : {"b0", "b1", "b2"}) {
      pool.push_back(gpu(id, {{"enclosure", "enc-b"}, rack}));
    }
    // Job 7 (training) spans two nodes: one of them uses enc-a. Job 8 (training) and job 9
    // (inference) use enc-b only.
    live.push_back(comp(1, 7, "n1", "training", {pool[0], pool[1]}));
    live.push_back(comp(2, 7, "n2", "training", {pool[2]}));
    live.push_back(comp(3, 8, "n3", "training", {pool[3]}));
    live.push_back(comp(4, 9, "n4", "inference", {pool[4]}));
    pool[0].composition_id = 1;
    pool[1].composition_id = 1;
    pool[2].composition_id = 2;
    pool[3].composition_id = 3;
    pool[4].composition_id = 4;
  }
  std::vector<Device> pool;
  std::vector<Composition> live;
};

TEST_F(BlastRadiusTest, AHitJobLosesWhatItHoldsOnEveryNode) {
  auto r = blast_radius("enclosure:enc-a", pool, live);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r->domain);
  EXPECT_EQ(r->counts.total, 2u);
  EXPECT_EQ(r->counts.attached, 2u);
  ASSERT_EQ(r->hits.size(), 1u);  // only the composition on n1 uses enc-a
  EXPECT_EQ(r->hits[0].devices_hit, (std::vector<std::string>{"a0", "a1"}));
  ASSERT_EQ(r->classes.size(), 2u);
  EXPECT_EQ(r->classes[0].workload, "inference");
  EXPECT_EQ(r->classes[0].jobs_hit, 0u);
  EXPECT_EQ(r->classes[1].workload, "training");
  EXPECT_EQ(r->classes[1].jobs_hit, 1u);
  EXPECT_EQ(r->classes[1].jobs, 2u);
  // Job 7's three devices (n1 and n2) of training's four.
  EXPECT_EQ(r->classes[1].devices_hit, 3u);
  EXPECT_EQ(r->classes[1].devices, 4u);
  EXPECT_EQ(r->users, std::vector<std::string>{"u7"});
  EXPECT_EQ(r->nodes, std::vector<std::string>{"n1"});
  EXPECT_FALSE(r->drained_and_empty());
  const std::string text = blast_text(*r, {});
  EXPECT_NE(text.find("training          1     2            3        4    75%"), std::string::npos)
      << text;
}

TEST_F(BlastRadiusTest, ADeviceIdNamesThatDeviceAlone) {
  auto r = blast_radius("b1", pool, live);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_FALSE(r->domain);
  EXPECT_EQ(r->counts.total, 1u);
  ASSERT_EQ(r->hits.size(), 1u);
  EXPECT_EQ(r->hits[0].job_id, 8u);
  EXPECT_EQ(blast_to_json(*r)["kind"].asString(), "device");
}

TEST_F(BlastRadiusTest, ABareNameIsADomainOnlyWhenOneLevelHasIt) {
  auto both = blast_radius("pdu-a", pool, live);
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(both.error().message,
            "'pdu-a' names a domain at several levels (power:pdu-a, rack:pdu-a); say which, as "
            "LEVEL:NAME");
  auto one = blast_radius("enc-b", pool, live);
  ASSERT_TRUE(one.ok()) << one.error();
  EXPECT_EQ(one->target, "enclosure:enc-b");
  EXPECT_EQ(one->hits.size(), 3u);
  auto none = blast_radius("enclosure:enc-c", pool, live);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(none.error().message,
            "'enclosure:enc-c' is neither a device nor a failure domain; the pool's domains: "
            "enclosure:enc-a, enclosure:enc-b, power:pdu-a, rack:pdu-a");
}

TEST_F(BlastRadiusTest, ADrainedDomainWithoutCompositionsIsReadyForMaintenance) {
  for (Device& d : pool) {
    d.drained = d.in({"enclosure", "enc-a"});
    if (d.drained) d.composition_id.reset();
  }
  live.erase(live.begin());
  auto r = blast_radius("enclosure:enc-a", pool, live);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r->drained_and_empty());
  EXPECT_TRUE(blast_to_json(*r)["drained_and_empty"].asBool());
  EXPECT_EQ(blast_text(*r, {}),
            "enclosure:enc-a: failure domain of 2 devices (0 attached, 0 free, 2 drained, 0 "
            "failed, 0 foreign)\nno live composition uses it; drained and empty: ready for "
            "maintenance\n");
}

}  // namespace
}  // namespace composer::cli
