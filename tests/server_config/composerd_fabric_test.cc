// The real composerd with a real fabric driver: composerd --check on fabric settings, and
// compose/release through the client against the fake Redfish service and the fake Liqid
// Director, each a real HTTP server on loopback.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "composer/test_support/temp_dir.h"
#include "composer/testing/fake_liqid.h"
#include "composer/testing/fake_redfish.h"
#include "composerd_process.h"

namespace composer::testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

api::ComposeBody body(Request r) {
  return api::ComposeBody{
      .uid = 1000, .user = "alice", .account = "physics", .workload = "training", .request = r};
}

std::string write_credentials(const test_support::TempDir& dir, const std::string& user,
                              const std::string& password, mode_t mode = 0600) {
  const std::string path = dir.file("fabric.cred");
  {
    std::ofstream out(path);
    out << "# fabric manager account\nusername=" << user << "\npassword=" << password << "\n";
  }
  ::chmod(path.c_str(), mode);
  return path;
}

TEST(ComposerdCheck, ValidatesFabricSettingsAndTheCredentialsFile) {
  test_support::TempDir dir("composer-check");
  const std::string cred = write_credentials(dir, "admin", "Very-Secret-42", 0644);
  const std::string conf = dir.file("composer.conf");
  {
    std::ofstream out(conf);
    out << "Fabric=liqid\nFabricUrl=http://127.0.0.1:9\nFabricCredentials=" << cred
        << "\nNodeName=cn01 FabricHost=machine-1\n";
  }
  auto r = run_command(std::string(COMPOSERD_PATH) + " --check -f " + conf);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("liqid credentials file"));
  EXPECT_THAT(r.out, HasSubstr("chmod 600"));
  EXPECT_THAT(r.out, Not(HasSubstr("Very-Secret-42")));

  ::chmod(cred.c_str(), 0600);
  r = run_command(std::string(COMPOSERD_PATH) + " --check -f " + conf);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("is valid (Fabric=liqid at http://127.0.0.1:9, 1 nodes mapped"));
  EXPECT_THAT(r.out, Not(HasSubstr("Very-Secret-42")));

  {
    std::ofstream out(conf, std::ios::app);
    out << "FabricTimeout=forever\n";
  }
  r = run_command(std::string(COMPOSERD_PATH) + " --check -f " + conf);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr(conf + " line 5: FabricTimeout=forever: expected a duration"));
}

TEST(ComposerdOnRedfish, ComposesAndReleasesThroughTheFakeService) {
  FakeRedfishOptions o;
  o.gpus_per_zone = 2;
  o.memory_per_zone = 0;
  o.drives_per_zone = 0;
  o.hosts = 2;
  o.task_ms = 20;
  auto fake = FakeRedfish::start(o);
  ASSERT_TRUE(fake.ok()) << fake;
  test_support::TempDir dir("composer-redfish");
  const std::string cred = write_credentials(dir, o.username, o.password);
  ComposerdProcess composerd(
      "Fabric=redfish\nFabricName=fake-gigaio\nFabricUrl=" + (*fake)->base_url() +
          "\nFabricCredentials=" + cred + "\nFabricPollInterval=20ms\nFabricTimeout=5s\n",
      "");
  auto c = composerd.client();
  auto composed = c.compose(11, "node01", body(Request{.gpus = 2}));
  ASSERT_TRUE(composed.ok()) << composed.error() << composerd.log();
  EXPECT_EQ(composed->state, CompositionState::kReady);
  ASSERT_EQ(composed->devices.size(), 2u);
  auto blocks = (*fake)->system_blocks("node01");
  for (const Device& d : composed->devices) EXPECT_THAT(blocks, Contains(d.id));

  auto released = c.release(11, "node01");
  ASSERT_TRUE(released.ok()) << released.error();
  blocks = (*fake)->system_blocks("node01");
  for (const Device& d : composed->devices) EXPECT_THAT(blocks, Not(Contains(d.id)));
  EXPECT_THAT(composerd.log(), Not(HasSubstr(o.password)));
  EXPECT_EQ(composerd.stop(), 0);
  EXPECT_EQ((*fake)->open_sessions(), 0u) << "composerd logs out when it stops";
}

TEST(ComposerdOnLiqid, ComposesAndReleasesThroughTheFakeDirector) {
  FakeLiqidOptions o;
  o.machines_per_group = 2;
  o.gpus_per_group = 4;
  auto fake = FakeLiqid::start(o);
  ASSERT_TRUE(fake.ok()) << fake;
  test_support::TempDir dir("composer-liqid");
  const std::string cred = write_credentials(dir, o.username, o.password);
  // cn1 is the Slurm name of Liqid machine node02; node01 is not served.
  ComposerdProcess composerd("Fabric=liqid\nFabricUrl=" + (*fake)->base_url() +
                                 "\nFabricCredentials=" + cred + "\nFabricTimeout=5s\n",
                             "NodeName=cn1 FabricHost=node02\n");
  auto c = composerd.client();
  EXPECT_FALSE(c.compose(21, "node01", body(Request{.gpus = 1})).ok());
  auto composed = c.compose(22, "cn1", body(Request{.gpus = 2, .mem_bytes = 64ull << 30}));
  ASSERT_TRUE(composed.ok()) << composed.error() << composerd.log();
  EXPECT_EQ(composed->state, CompositionState::kReady);
  ASSERT_EQ(composed->devices.size(), 3u);
  auto related = (*fake)->machine_devices("node02");
  EXPECT_EQ(related.size(), 3u);
  for (const Device& d : composed->devices) EXPECT_THAT(related, Contains(d.id));

  ASSERT_TRUE(c.release(22, "cn1").ok());
  EXPECT_TRUE((*fake)->machine_devices("node02").empty());
  EXPECT_TRUE((*fake)->editing().empty());
  EXPECT_THAT(composerd.log(), Not(HasSubstr(o.password)));
  EXPECT_EQ(composerd.stop(), 0);
  EXPECT_EQ((*fake)->digests(), 0u) << "composerd deletes its API key when it stops";
}

}  // namespace
}  // namespace composer::testing
