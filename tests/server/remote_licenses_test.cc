// slurmdbd's resources read from sacctmgr and the sacctmgr commands that bring them to the
// pool (SlurmLicenses=remote).
#include "remote_licenses.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace composer::server {
namespace {

using policies::ActionKind;
using ::testing::HasSubstr;

// sacctmgr's resources as `-P -n show resource withclusters format=name,server,count,cluster,
// allowed` prints them (measured on 22.05.8).
TEST(RemoteLicenses, ReadsSacctmgrLines) {
  auto r = parse_remote_licenses(
      "fabric_gpu|composer|6|composer-e2e|100\n"
      "fabric_gpu_h100|composer|4||\n"
      "matlab|flexlm|20|other|50\n");
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0], (RemoteLicense{"fabric_gpu", "composer", 6, "composer-e2e", 100}));
  EXPECT_EQ((*r)[1], (RemoteLicense{"fabric_gpu_h100", "composer", 4, "", 0}));
  EXPECT_EQ(policies::remote_license_name("fabric_gpu", "composer"), "fabric_gpu@composer");
  for (const char* bad : {"fabric_gpu|composer|six|c|100", "fabric_gpu|composer|6|c", "|s|1|c|1",
                          "fabric_gpu|composer|6|c|101"}) {
    auto e = parse_remote_licenses(bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_THAT(e.error().message,
                HasSubstr("name|server|count|cluster|allowed: " + std::string(bad)));
  }
  EXPECT_TRUE(parse_remote_licenses("")->empty());
}

// The counts follow the pool; what is missing is added for the cluster, and nothing is ever
// deleted: a model the pool lost goes to 0.
TEST(RemoteLicenses, PlanAddsSetsCountsAndNeverDeletes) {
  const std::vector<RemoteLicense> have = {
      {"fabric_gpu", "composer", 8, "c1", 100},    {"fabric_mem", "composer", 512, "c1", 50},
      {"fabric_nvme", "composer", 4, "", 0},       {"fabric_gpu_a100", "composer", 4, "c1", 100},
      {"fabric_gpu", "other", 3, "c1", 100},       {"matlab", "composer", 9, "c1", 100},
      {"fabric_gpu_old", "composer", 0, "c1", 100}};
  const auto actions = remote_license_plan(
      {{"fabric_gpu", 6}, {"fabric_mem", 512}, {"fabric_nvme", 4}, {"fabric_gpu_h100", 2}}, have,
      "composer", "c1");
  std::vector<std::string> commands;
  for (const auto& a : actions) commands.push_back(a.action.command);
  EXPECT_THAT(
      commands,
      ::testing::ElementsAre(
          "sacctmgr -i modify resource name=fabric_mem server=composer cluster=c1 set "
          "percentallowed=100",
          "sacctmgr -i add resource name=fabric_nvme server=composer cluster=c1 percentallowed=100",
          "sacctmgr -i add resource name=fabric_gpu_h100 server=composer servertype=composer "
          "type=license count=2 cluster=c1 percentallowed=100",
          // Lowering counts tightens: after everything that loosens.
          "sacctmgr -i modify resource name=fabric_gpu server=composer set count=6",
          "sacctmgr -i modify resource name=fabric_gpu_a100 server=composer set count=0"));
  EXPECT_EQ(actions[3].undo,
            "sacctmgr -i modify resource name=fabric_gpu server=composer set count=8");
  EXPECT_TRUE(actions[3].tightens);
  EXPECT_EQ(actions[2].action.kind, ActionKind::kCreate);
  EXPECT_EQ(actions[2].action.object, "fabric_gpu_h100@composer");
  EXPECT_EQ(actions[2].undo,
            "sacctmgr -i modify resource name=fabric_gpu_h100 server=composer set count=0");
  for (const auto& a : actions) {
    EXPECT_EQ(a.action.command.find("delete"), std::string::npos) << a.action.command;
    EXPECT_EQ(a.action.command.find("matlab"), std::string::npos) << a.action.command;
    EXPECT_EQ(a.action.command.find("server=other"), std::string::npos) << a.action.command;
  }
  // In step: nothing to do.
  EXPECT_TRUE(remote_license_plan({{"fabric_gpu", 8}, {"fabric_gpu_a100", 4}},
                                  {{"fabric_gpu", "composer", 8, "c1", 100},
                                   {"fabric_gpu_a100", "composer", 4, "c1", 100}},
                                  "composer", "c1")
                  .empty());
}

}  // namespace
}  // namespace composer::server
