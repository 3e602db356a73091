// The real composerd with a real fabric driver: composerd --check on fabric settings, and
// compose/release through the client against the fake Redfish service and the fake Liqid
// Director, each a real HTTP server on loopback.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

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
      .owner = {.uid = 1000, .user = "alice", .account = "physics", .workload = "training"},
      .request = r};
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

// The mockups served whole hold blocks composed into their own systems and shared ones:
// composerd shows them foreign with their holder, never hands them out, and --discover lists
// them, and what the driver skipped, without changing the fabric.
TEST(ComposerdOnRedfish, WhatTheMockupsHoldIsForeignAndDiscoverShowsIt) {
  FakeRedfishOptions o;
  o.hosts = 1;
  o.task_ms = 0;
  auto fake = FakeRedfish::start(o);
  ASSERT_TRUE(fake.ok()) << fake;
  test_support::TempDir dir("composer-redfish-foreign");
  const std::string cred = write_credentials(dir, o.username, o.password);
  ComposerdProcess composerd("Fabric=redfish\nFabricUrl=" + (*fake)->base_url() +
                                 "\nFabricCredentials=" + cred + "\nFabricTimeout=5s\n",
                             "");
  auto c = composerd.client();
  auto foreign = c.devices(client::DeviceQuery{.state = DeviceState::kForeign});
  ASSERT_TRUE(foreign.ok()) << foreign.error();
  ASSERT_FALSE(foreign->empty()) << "the mockups' composed blocks are foreign";
  for (const Device& d : *foreign) EXPECT_FALSE(d.holder.empty()) << d.id;

  const uint64_t writes = (*fake)->writes();
  auto r =
      run_command(std::string(COMPOSERD_PATH) + " --check --discover -f " + composerd.conf_path());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("hosts ("));
  EXPECT_THAT(r.out, HasSubstr("skipped ("));
  for (const Device& d : *foreign) EXPECT_THAT(r.out, HasSubstr(d.id)) << r.out;
  EXPECT_EQ((*fake)->writes(), writes) << "--discover changes nothing on the fabric";
  EXPECT_THAT(
      run_command(std::string(COMPOSERD_PATH) + " --discover -f " + composerd.conf_path()).out,
      HasSubstr("--check"));

  // Every free GPU can be composed; no foreign device is among them.
  auto pool = c.pool();
  ASSERT_TRUE(pool.ok()) << pool.error();
  uint32_t free_gpus = 0;
  for (const PoolRow& row : *pool) {
    if (row.type == DeviceType::kGpu) free_gpus += row.free;
  }
  ASSERT_GT(free_gpus, 0u);
  auto composed = c.compose(31, "node01", body(Request{.gpus = 1}));
  ASSERT_TRUE(composed.ok()) << composed.error() << composerd.log();
  for (const Device& d : composed->devices) {
    for (const Device& f : *foreign) EXPECT_NE(d.id, f.id);
  }
  ASSERT_TRUE(c.release(31, composed->node).ok());
  EXPECT_EQ(composerd.stop(), 0);
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

// One composerd, three fabrics: the fake Redfish service, the fake Liqid Director and a
// simulated pod. Both fakes call a host "node01"; qualified names keep them apart.
TEST(ComposerdOnSeveralFabrics, ComposesOnEachAndGoesOnWhenOneIsDown) {
  FakeRedfishOptions ro;
  ro.gpus_per_zone = 2;
  ro.memory_per_zone = 0;
  ro.drives_per_zone = 0;
  ro.hosts = 2;
  auto redfish = FakeRedfish::start(ro);
  ASSERT_TRUE(redfish.ok()) << redfish;
  FakeLiqidOptions lo;
  lo.machines_per_group = 2;
  lo.gpus_per_group = 4;
  auto liqid = FakeLiqid::start(lo);
  ASSERT_TRUE(liqid.ok()) << liqid;
  test_support::TempDir rdir("composer-multi-rf");
  test_support::TempDir ldir("composer-multi-lq");
  const std::string rcred = write_credentials(rdir, ro.username, ro.password);
  const std::string lcred = write_credentials(ldir, lo.username, lo.password);
  const std::string fabrics =
      "ReconcileInterval=1\n"
      "FabricName=pod-rf Driver=redfish Url=" +
      (*redfish)->base_url() + " Credentials=" + rcred +
      " Timeout=2s ConnectTimeout=500ms PollInterval=20ms\n"
      "FabricName=pod-lq Driver=liqid Url=" +
      (*liqid)->base_url() + " Credentials=" + lcred +
      " Timeout=2s\n"
      "FabricName=lab Driver=sim\n";
  ComposerdProcess composerd(
      fabrics,
      "NodeName=rf1 Fabric=pod-rf FabricHost=node01\n"
      "NodeName=lq1 Fabric=pod-lq FabricHost=node01\n"
      "NodeName=lab1 Fabric=lab Zones=z1 GpuSlots=4\n"
      "DeviceGroup=lab-gpu Fabric=lab Type=gpu Model=A100 Zone=z1 Count=2\n");
  auto c = composerd.client();
  auto hosts = c.hosts();
  ASSERT_TRUE(hosts.ok()) << hosts.error() << composerd.log();
  std::vector<std::string> ids;
  for (const Host& h : *hosts) ids.push_back(h.node + "=" + h.fabric_id);
  std::sort(ids.begin(), ids.end());
  EXPECT_THAT(ids,
              ::testing::ElementsAre("lab1=lab:lab1", "lq1=pod-lq:node01", "rf1=pod-rf:node01"));

  auto on_rf = c.compose(31, "rf1", body(Request{.gpus = 2}));
  ASSERT_TRUE(on_rf.ok()) << on_rf.error() << composerd.log();
  auto on_lq = c.compose(32, "lq1", body(Request{.gpus = 2}));
  ASSERT_TRUE(on_lq.ok()) << on_lq.error() << composerd.log();
  auto on_lab = c.compose(33, "lab1", body(Request{.gpus = 1}));
  ASSERT_TRUE(on_lab.ok()) << on_lab.error() << composerd.log();
  // Each fabric holds its own devices under its own names, on its own host.
  const auto rf_blocks = (*redfish)->system_blocks("node01");
  for (const Device& d : on_rf->devices) {
    ASSERT_TRUE(d.id.starts_with("pod-rf:")) << d.id;
    EXPECT_TRUE(d.zone.starts_with("pod-rf:")) << d.zone;
    EXPECT_THAT(rf_blocks, Contains(d.id.substr(7)));
  }
  const auto lq_devices = (*liqid)->machine_devices("node01");
  ASSERT_EQ(lq_devices.size(), 2u);
  for (const Device& d : on_lq->devices) {
    ASSERT_TRUE(d.id.starts_with("pod-lq:")) << d.id;
    EXPECT_THAT(lq_devices, Contains(d.id.substr(7)));
  }
  ASSERT_EQ(on_lab->devices.size(), 1u);
  EXPECT_EQ(on_lab->devices[0].id, "lab:lab-gpu-0");
  // Admins drain and resume a device by its qualified id.
  auto drained = c.drain("lab:lab-gpu-1", "fan noise");
  ASSERT_TRUE(drained.ok()) << drained.error();
  EXPECT_EQ(drained->state(), DeviceState::kDrained);
  EXPECT_FALSE(c.compose(36, "lab1", body(Request{.gpus = 1})).ok()) << "lab's only free GPU";
  auto resumed = c.resume("lab:lab-gpu-1");
  ASSERT_TRUE(resumed.ok()) << resumed.error();
  EXPECT_EQ(resumed->state(), DeviceState::kFree);
  // Three pools side by side: 2 zones x 2 GPUs (Redfish), 8 (Liqid), 2 (lab).
  auto pool = c.pool();
  ASSERT_TRUE(pool.ok()) << pool.error();
  uint32_t total = 0, attached = 0;
  for (const PoolRow& r : *pool) {
    total += r.total;
    attached += r.attached;
  }
  EXPECT_EQ(attached, 5u);
  EXPECT_GE(total, 2u + 8u + 4u);

  // The Redfish service goes away: the other fabrics keep composing and releasing, and the
  // reconciler's complaint names the fabric that did not answer.
  redfish->reset();
  auto again = c.compose(34, "lq1", body(Request{.gpus = 1}));
  ASSERT_TRUE(again.ok()) << again.error() << composerd.log();
  EXPECT_EQ((*liqid)->machine_devices("node01").size(), 3u);
  ASSERT_TRUE(c.release(32, "lq1").ok());
  ASSERT_TRUE(c.release(34, "lq1").ok());
  ASSERT_TRUE(c.release(33, "lab1").ok());
  EXPECT_TRUE((*liqid)->machine_devices("node01").empty());
  auto down = c.compose(35, "rf1", body(Request{.gpus = 1}));
  EXPECT_FALSE(down.ok() && down->state == CompositionState::kReady);
  bool named = false;
  for (int i = 0; i < 60 && !named; ++i) {
    named = composerd.log().find("fabric pod-rf: ") != std::string::npos;
    if (!named) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(named) << composerd.log();
  // The compositions on the lost fabric are still on record, not silently dropped.
  auto kept = c.show(31, "rf1");
  ASSERT_TRUE(kept.ok()) << kept.error();
  EXPECT_EQ(kept->devices.size(), 2u);
  EXPECT_THAT(composerd.log(), Not(HasSubstr(ro.password)));
  EXPECT_THAT(composerd.log(), Not(HasSubstr(lo.password)));
}

TEST(ComposerdCheck, DescribesEveryFabricOfAFileWithSeveral) {
  test_support::TempDir dir("composer-check-multi");
  const std::string cred = write_credentials(dir, "admin", "Very-Secret-42");
  const std::string conf = dir.file("composer.conf");
  {
    std::ofstream out(conf);
    out << "FabricName=pod-a Driver=redfish Url=http://127.0.0.1:9 Credentials=" << cred << "\n"
        << "FabricName=lab Driver=sim\n"
        << "NodeName=cn1 Fabric=pod-a FabricHost=blade-1\n"
        << "NodeName=dev1 Fabric=lab Zones=z1\n"
        << "DeviceGroup=g Fabric=lab Type=gpu Model=A100 Zone=z1 Count=2\n";
  }
  auto r = run_command(std::string(COMPOSERD_PATH) + " --check -f " + conf);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("is valid (2 fabrics: pod-a=redfish at http://127.0.0.1:9, 1 nodes "
                               "mapped; lab=sim, 1 nodes, 1 device groups;"));
  ::chmod(cred.c_str(), 0644);
  r = run_command(std::string(COMPOSERD_PATH) + " --check -f " + conf);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("FabricName=pod-a (Driver=redfish): "));
  EXPECT_THAT(r.out, Not(HasSubstr("Very-Secret-42")));
}

}  // namespace
}  // namespace composer::testing
