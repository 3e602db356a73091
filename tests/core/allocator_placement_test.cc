// The placement rules of workload classes over failure domains (pack, spread, avoid-shared):
// each rule with exhaustion and ties, and a property test over random pools and requests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "composer/common/units.h"
#include "composer/core/allocator.h"

namespace composer {
namespace {

using policies::PlacementRule;
using Kind = PlacementRule::Kind;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Host host(std::string node, std::vector<std::string> zones, uint32_t slots = 8) {
  Host h;
  h.node = std::move(node);
  h.fabric_id = h.node;
  h.zones = std::move(zones);
  h.gpu_slots = h.mem_slots = h.nvme_slots = slots;
  return h;
}

Device device(std::string id, DeviceType t, std::string zone, std::vector<FailureDomain> domains,
              uint64_t bytes = 0) {
  Device d;
  d.id = std::move(id);
  d.type = t;
  d.model = t == DeviceType::kGpu ? "A100" : t == DeviceType::kMem ? "CXL" : "P5620";
  d.zone = std::move(zone);
  d.capacity_bytes = bytes;
  d.domains = std::move(domains);
  return d;
}

PlacementRule spread(std::string level, uint32_t n, std::optional<DeviceType> t = {}) {
  return PlacementRule{Kind::kSpread, std::move(level), n, t};
}
PlacementRule avoid(std::string level) { return PlacementRule{Kind::kAvoidShared, level, 0, {}}; }

Request gpus(uint32_t n) { return Request{.gpus = n}; }

// Two appliances of memory, two enclosures of GPUs, all in one zone.
class Placement : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<Device> devices;
    for (int i = 0; i < 4; ++i) {
      devices.push_back(
          device("g-a" + std::to_string(i), DeviceType::kGpu, "z1", {{"enclosure", "enc-a"}}));
      devices.push_back(
          device("g-b" + std::to_string(i), DeviceType::kGpu, "z1", {{"enclosure", "enc-b"}}));
    }
    for (int i = 0; i < 2; ++i) {
      devices.push_back(device("m-a" + std::to_string(i), DeviceType::kMem, "z1",
                               {{"appliance", "app-a"}}, 64 * kGiB));
      devices.push_back(device("m-b" + std::to_string(i), DeviceType::kMem, "z1",
                               {{"appliance", "app-b"}}, 64 * kGiB));
    }
    devices.push_back(device("g-none", DeviceType::kGpu, "z1", {}));
    alloc.load({host("n1", {"z1"}), host("n2", {"z1"})}, devices);
  }
  Allocator alloc;
};

TEST_F(Placement, PackIsTheDefaultAndKeepsAJobInTheNearestDomainOrder) {
  auto picked = alloc.allocate("n1", gpus(2), "training");
  ASSERT_TRUE(picked.ok()) << picked.error();
  // Today's order: (model, id) within the zone.
  EXPECT_THAT(*picked, ElementsAre("g-a0", "g-a1"));
  EXPECT_EQ(alloc.placement("training").to_string(), "pack");
}

TEST_F(Placement, PackTakesAJobsGpusFromOneDomainWhenOneCanServeThemAll) {
  // enc-a keeps one GPU free; a job for 2 takes enc-b's first two rather than straddle both.
  auto first = alloc.allocate("n1", gpus(3), "training");
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_THAT(*first, ElementsAre("g-a0", "g-a1", "g-a2"));
  alloc.take("n1", *first, 1, "training");
  auto second = alloc.allocate("n1", gpus(2), "training");
  ASSERT_TRUE(second.ok()) << second.error();
  EXPECT_THAT(*second, ElementsAre("g-b0", "g-b1"));
  alloc.take("n1", *second, 2, "training");
  // No domain holds 3 free now (enc-a 1, enc-b 2, no domain 1): the fullest groups first.
  auto third = alloc.allocate("n1", gpus(3), "training");
  ASSERT_TRUE(third.ok()) << third.error();
  EXPECT_THAT(*third, ElementsAre("g-b2", "g-b3", "g-a3"));
}

TEST_F(Placement, SpreadTakesOneDeviceFromEachDomainFirstAndBreaksTiesByName) {
  alloc.set_placement({{"training", spread("enclosure", 2)}});
  auto picked = alloc.allocate("n1", gpus(3), "training");
  ASSERT_TRUE(picked.ok()) << picked.error();
  // enc-a before enc-b (a tie broken by name), then the rest in pack order.
  EXPECT_THAT(*picked, ElementsAre("g-a0", "g-b0", "g-a1"));
  // Another class still packs.
  auto other = alloc.allocate("n1", gpus(2), "inference");
  ASSERT_TRUE(other.ok());
  EXPECT_THAT(*other, ElementsAre("g-a0", "g-a1"));
}

TEST_F(Placement, SpreadOfMemoryTakesTheLargestBlockOfEachAppliance) {
  alloc.set_placement({{"training", spread("appliance", 2, DeviceType::kMem)}});
  Request r{.gpus = 1, .mem_bytes = 64 * kGiB};
  auto picked = alloc.allocate("n1", r, "training");
  ASSERT_TRUE(picked.ok()) << picked.error();
  // GPUs are not under the rule (Type mem): packed. Memory: two appliances even though one
  // block would cover 64G.
  EXPECT_THAT(*picked, ElementsAre("g-a0", "m-a0", "m-b0"));
}

TEST_F(Placement, SpreadWaitsWhenADomainIsExhaustedAndNamesTheRule) {
  alloc.set_placement({{"training", spread("enclosure", 2)}});
  // Drain enclosure b: only one enclosure has free GPUs left.
  for (int i = 0; i < 4; ++i) alloc.set_drained("g-b" + std::to_string(i), true, "maintenance");
  auto picked = alloc.allocate("n1", gpus(2), "training");
  ASSERT_FALSE(picked.ok());
  EXPECT_EQ(picked.error().code, ErrorCode::kInsufficient);
  EXPECT_THAT(picked.error().message,
              HasSubstr("placement rule 'spread enclosure 2' of class training needs free GPU "
                        "in 2 enclosure domains and only 1 reachable from the node has any"));
  // Never placed against the rule, although pack would have found 2 free GPUs.
  EXPECT_TRUE(alloc.allocate("n1", gpus(2), "inference").ok());
  // It can still be met some day: not impossible.
  EXPECT_TRUE(alloc.check_possible("n1", gpus(2), "training").ok());
}

TEST_F(Placement, SpreadThatCanNeverBeMetIsImpossible) {
  alloc.set_placement({{"training", spread("enclosure", 3)}, {"small", spread("enclosure", 2)}});
  Status s = alloc.check_possible("n1", gpus(4), "training");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.error().message,
              HasSubstr("node n1 reaches GPU in only 2 enclosure domains, fewer than the 3 that "
                        "placement rule 'spread enclosure 3' of class training needs"));
  s = alloc.check_possible("n1", gpus(1), "small");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("so a job asking for 1 GPU can never be placed"));
  EXPECT_FALSE(alloc.allocate("n1", gpus(1), "small").ok());
}

TEST_F(Placement, DevicesInNoDomainOfTheLevelAreNotUsedBySpread) {
  alloc.set_placement({{"training", spread("enclosure", 2)}});
  auto picked = alloc.allocate("n1", gpus(9), "training");
  ASSERT_FALSE(picked.ok());
  // 9 GPUs exist (g-none included), but only 8 sit in an enclosure; and the slots are 8.
  EXPECT_EQ(picked.error().code, ErrorCode::kInsufficient);
  picked = alloc.allocate("n1", gpus(8), "training");
  ASSERT_TRUE(picked.ok()) << picked.error();
  EXPECT_EQ(std::count(picked->begin(), picked->end(), "g-none"), 0);
}

TEST_F(Placement, AvoidSharedKeepsTheClassAndTheOthersApartBothWays) {
  alloc.set_placement({{"critical", avoid("enclosure")}});
  // A training job in enclosure a.
  auto t = alloc.allocate("n1", gpus(1), "training");
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(*t, ElementsAre("g-a0"));
  alloc.take("n1", *t, 1, "training");
  // The critical job stays out of enclosure a.
  auto c = alloc.allocate("n2", gpus(2), "critical");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_THAT(*c, ElementsAre("g-b0", "g-b1"));
  alloc.take("n2", *c, 2, "critical");
  // Another class now stays out of enclosure b, and out of g-none's nothing: it packs the rest.
  auto i = alloc.allocate("n1", gpus(4), "inference");
  ASSERT_TRUE(i.ok()) << i.error();
  for (const std::string& id : *i) EXPECT_FALSE(id.starts_with("g-b")) << id;
  // Exhaustion: a second critical job asking for more than enclosure b has left waits.
  auto more = alloc.allocate("n2", gpus(3), "critical");
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.error().code, ErrorCode::kInsufficient);
  EXPECT_THAT(more.error().message,
              HasSubstr("under placement rule 'avoid-shared enclosure' of class critical"));
  // When the training job is gone, enclosure a is the critical class's to take.
  alloc.give_back(*t);
  more = alloc.allocate("n2", gpus(3), "critical");
  ASSERT_TRUE(more.ok()) << more.error();
  // And the other classes hear why they are short.
  auto big = alloc.allocate("n1", gpus(8), "inference");
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.error().message,
              HasSubstr("domains that avoid-shared classes hold are left out"));
}

TEST_F(Placement, AvoidSharedNeedsDevicesInADomainOfTheLevel) {
  alloc.set_placement({{"critical", avoid("rack")}});
  Status s = alloc.check_possible("n1", gpus(1), "critical");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message,
              HasSubstr("node n1 reaches no GPU in any rack domain, which placement rule "
                        "'avoid-shared rack' of class critical needs"));
}

// Random pools, rules and requests: whatever is placed never breaks a rule.
TEST(PlacementProperty, RandomPoolsAndRequestsNeverViolateARule) {
  std::mt19937 rng(20261201);
  auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::vector<std::string> classes = {"a", "b", "c"};
  for (int round = 0; round < 200; ++round) {
    std::vector<Device> devices;
    const int domains = pick(1, 4);
    const int count = pick(1, 24);
    for (int i = 0; i < count; ++i) {
      const DeviceType t = pick(0, 1) == 0 ? DeviceType::kGpu : DeviceType::kMem;
      std::vector<FailureDomain> doms;
      if (pick(0, 5) > 0) doms.push_back({"enc", "e" + std::to_string(pick(0, domains - 1))});
      devices.push_back(device("d" + std::to_string(i), t, pick(0, 1) ? "z1" : "z2", doms,
                               t == DeviceType::kMem ? uint64_t(pick(1, 4)) * 16 * kGiB : 0));
    }
    Allocator alloc;
    alloc.load({host("n1", {"z1", "z2"}, 6), host("n2", {"z2"}, 6)}, devices);
    std::map<std::string, PlacementRule, std::less<>> rules;
    rules["a"] = spread("enc", static_cast<uint32_t>(pick(1, 3)));
    rules["b"] = avoid("enc");
    alloc.set_placement(rules);
    std::map<std::string, std::string> owner;  // device -> class
    for (int job = 0; job < 8; ++job) {
      const std::string cls = classes[pick(0, 2)];
      const std::string node = pick(0, 1) ? "n1" : "n2";
      Request r;
      r.gpus = static_cast<uint32_t>(pick(0, 4));
      r.mem_bytes = uint64_t(pick(0, 3)) * 16 * kGiB;
      if (r.empty()) r.gpus = 1;
      auto picked = alloc.allocate(node, r, cls);
      if (!picked) continue;
      std::map<DeviceType, std::set<std::string>> spread_over;
      for (const std::string& id : *picked) {
        const Device* d = alloc.device(id);
        ASSERT_NE(d, nullptr);
        ASSERT_TRUE(d->allocatable()) << id;
        const FailureDomain* dom = d->domain("enc");
        if (cls == "a") {
          ASSERT_NE(dom, nullptr) << "spread used a device in no domain: " << id;
          spread_over[d->type].insert(dom->name);
        }
        if (cls == "b") {
          ASSERT_NE(dom, nullptr) << "avoid-shared used a device in no domain";
        }
        if (dom == nullptr) continue;
        // avoid-shared: no device of this domain belongs to a class on the other side.
        for (const auto& [other_id, other_cls] : owner) {
          const FailureDomain* od = alloc.device(other_id)->domain("enc");
          if (od == nullptr || od->name != dom->name || other_cls == cls) continue;
          ASSERT_FALSE(cls == "b" || other_cls == "b")
              << "class " << cls << " shares domain " << dom->name << " with class " << other_cls;
        }
      }
      if (cls == "a") {
        for (const auto& [t, names] : spread_over) {
          ASSERT_GE(names.size(), rules["a"].count) << "spread over too few domains";
        }
      }
      alloc.take(node, *picked, job + 1, cls);
      for (const std::string& id : *picked) owner[id] = cls;
      // Now and then a job ends.
      if (pick(0, 3) == 0 && !owner.empty()) {
        auto it = owner.begin();
        std::advance(it, pick(0, static_cast<int>(owner.size()) - 1));
        alloc.give_back({it->first});
        owner.erase(it);
      }
    }
  }
}

}  // namespace
}  // namespace composer
