// Failure domains in a real composerd: composer.conf's Domains= reach the API's devices, and
// a policy's Placement lines are checked against the domains and steer where jobs land.
#include <gtest/gtest.h>

#include <set>

#include "composer/api/codec.h"
#include "composerd_process.h"

namespace composer::testing {
namespace {

// GPUs in two enclosures, all reachable from n1.
std::string pool() {
  return "DomainLevels=enclosure,power\n"
         "NodeName=n1 Zones=z1 GpuSlots=8 MemSlots=4\n"
         "DeviceGroup=ga Type=gpu Model=A100 Zone=z1 Count=2 Domains=enclosure:enc-a,power:pdu-1\n"
         "DeviceGroup=gb Type=gpu Model=A100 Zone=z1 Count=2 Domains=enclosure:enc-b,power:pdu-1\n";
}

constexpr char kSpread[] =
    "Class=training\nClass=inference\nDefaultClass=inference\n"
    "Placement=training Rule=spread Level=enclosure Count=2\n";

api::ComposeBody body(uint32_t gpus, std::string workload) {
  return api::ComposeBody{.uid = 1000,
                          .user = "alice",
                          .account = "physics",
                          .workload = std::move(workload),
                          .request = Request{.gpus = gpus}};
}

TEST(ComposerdDomains, DevicesCarryTheirDomainsAndSpreadPlacesOverBothEnclosures) {
  ComposerdProcess daemon("Workloads=training,inference\n", pool());
  auto c = daemon.client();
  auto devices = c.devices({});
  ASSERT_TRUE(devices.ok()) << devices.error();
  ASSERT_EQ(devices->size(), 4u);
  for (const Device& d : *devices) {
    ASSERT_NE(d.domain("enclosure"), nullptr) << d.id;
    EXPECT_EQ(d.domain("enclosure")->name, d.id.starts_with("ga") ? "enc-a" : "enc-b");
    EXPECT_EQ(d.domain("power")->name, "pdu-1");
  }

  // A rule that can never be met is refused with the file, line and rule.
  auto bad = c.put_policy(
      {.file = "site.policy",
       .text = std::string(kSpread) + "Placement=inference Rule=spread Level=power Count=2\n"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("site.policy line 5: Placement=inference (spread power 2): "
                                     "the pool has 1 power domain, so a spread over 2 can "
                                     "never be met"),
            std::string::npos)
      << bad.error().message;
  auto undeclared = c.put_policy({.file = "site.policy",
                                  .text = std::string(kSpread) + "Placement=inference "
                                                                 "Rule=avoid-shared Level=rack\n"});
  ASSERT_FALSE(undeclared.ok());
  EXPECT_NE(undeclared.error().message.find("level rack is not declared by composer.conf's "
                                            "DomainLevels= (declared: enclosure, power)"),
            std::string::npos)
      << undeclared.error().message;

  auto applied = c.put_policy({.file = "site.policy", .text = kSpread});
  ASSERT_TRUE(applied.ok()) << applied.error();
  auto composed = c.compose(21, "n1", body(2, "training"));
  ASSERT_TRUE(composed.ok()) << composed.error();
  std::set<std::string> enclosures;
  for (const Device& d : composed->devices) enclosures.insert(d.domain("enclosure")->name);
  EXPECT_EQ(enclosures, (std::set<std::string>{"enc-a", "enc-b"}));

  // One free GPU left in each enclosure would do; one enclosure only must wait.
  ASSERT_TRUE(c.compose(22, "n1", body(1, "inference")).ok());
  auto waits = c.compose(23, "n1", body(2, "training"));
  ASSERT_FALSE(waits.ok());
  EXPECT_EQ(waits.error().code, ErrorCode::kInsufficient);
  EXPECT_NE(waits.error().message.find("placement rule 'spread enclosure 2' of class training"),
            std::string::npos)
      << waits.error().message;
}

}  // namespace
}  // namespace composer::testing
