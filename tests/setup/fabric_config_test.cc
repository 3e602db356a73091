// composer.conf's fabric settings: good files for each driver, and every bad one refused with
// the file, the line and the rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "composer/setup/composer_conf.h"
#include "composer/setup/fabric_setup.h"

namespace composer::setup {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kSimPool =
    "NodeName=n[1-2] Zones=z1 GpuSlots=8\n"
    "DeviceGroup=gpu-a Type=gpu Model=A100 Zone=z1 Count=4\n";
constexpr const char* kRedfish =
    "Fabric=redfish\n"
    "FabricUrl=https://fm.example.org:8443\n"
    "FabricCredentials=/etc/slurm/composer-fabric.cred\n";

Expected<Config> parse(const std::string& text) { return parse_config(text, "/etc/composer.conf"); }

// The refusal names the file and the line, and says `rule`.
void expect_refused(const std::string& text, int line, const std::string& rule) {
  auto c = parse(text);
  ASSERT_FALSE(c.ok()) << text;
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
  const std::string where =
      "/etc/composer.conf" + (line > 0 ? " line " + std::to_string(line) : std::string()) + ": ";
  EXPECT_THAT(c.error().message, HasSubstr(where)) << text;
  EXPECT_THAT(c.error().message, HasSubstr(rule)) << text;
}

TEST(FabricConfig, SimIsTheDefaultAndKeepsNodeLines) {
  auto c = parse(kSimPool);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->fabric, "sim");
  EXPECT_EQ(c->sim.hosts.size(), 2u);
  EXPECT_TRUE(c->fabric_config.host_map.empty());
}

TEST(FabricConfig, RedfishWithEveryKey) {
  auto c = parse(std::string(kRedfish) +
                 "FabricName=gigaio-a\n"
                 "FabricAuth=basic\n"
                 "FabricCaFile=/etc/ssl/fm-ca.pem\n"
                 "FabricVerifyTls=no\n"
                 "FabricConnectTimeout=500ms\n"
                 "FabricTimeout=20\n"
                 "FabricPollInterval=50ms\n"
                 "FabricTaskWait=2m\n"
                 "FabricSlots=4\n"
                 "NodeName=cn01 FabricHost=System-7\n"
                 "NodeName=cn[02-03]\n");
  ASSERT_TRUE(c.ok()) << c.error();
  const FabricConfig& f = c->fabric_config;
  EXPECT_EQ(c->fabric, "redfish");
  EXPECT_EQ(f.name, "gigaio-a");
  EXPECT_EQ(f.url, "https://fm.example.org:8443");
  EXPECT_EQ(f.credentials_file, "/etc/slurm/composer-fabric.cred");
  EXPECT_EQ(f.auth, "basic");
  EXPECT_EQ(f.ca_file, "/etc/ssl/fm-ca.pem");
  EXPECT_FALSE(f.verify_tls);
  EXPECT_EQ(f.connect_timeout_ms, 500);
  EXPECT_EQ(f.request_timeout_ms, 20000);
  EXPECT_EQ(f.poll_interval_ms, 50);
  EXPECT_EQ(f.task_wait_ms, 120000);
  EXPECT_EQ(f.slots, 4u);
  ASSERT_EQ(f.host_map.size(), 3u);
  EXPECT_EQ(f.host_map.at("System-7"), "cn01");
  EXPECT_EQ(f.host_map.at("cn02"), "cn02");
}

TEST(FabricConfig, RealDriversNeedNoNodeLines) {
  auto c = parse(std::string(kRedfish) + "FabricNodeNames=hostname\n");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_TRUE(c->fabric_config.use_host_name);
  EXPECT_TRUE(c->fabric_config.host_map.empty());
  c = parse(
      "fabric=LIQID\nfabricurl=http://10.0.0.5:8080\nfabriccredentials=/root/liqid\n"
      "FabricAuth=apikey\n");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->fabric, "liqid");
  EXPECT_EQ(c->fabric_config.auth, "apikey");
}

TEST(FabricConfig, UnknownDriversAndKeysAreRefused) {
  expect_refused("Fabric=gigaio\n", 1, "expected sim, redfish or liqid");
  expect_refused(std::string(kRedfish) + "FabricColour=blue\n", 4, "unknown key 'FabricColour'");
  expect_refused(std::string(kRedfish) + "FabricHost=x\n", 4, "unknown key 'FabricHost'");
  expect_refused(std::string(kRedfish) + "FabricUrl=https://other\n", 4, "is set twice");
}

TEST(FabricConfig, BadValuesNameTheRule) {
  const std::string base = "Fabric=redfish\nFabricCredentials=/c\n";
  expect_refused(base + "FabricUrl=fm.example.org\n", 3, "expected http(s)://HOST[:PORT]");
  expect_refused(base + "FabricUrl=https://fm/redfish/v1\n", 3, "the driver adds the API path");
  expect_refused(std::string(kRedfish) + "FabricTimeout=10h\n", 4, "expected a duration");
  expect_refused(std::string(kRedfish) + "FabricTimeout=50ms\n", 4, "from 100ms");
  expect_refused(std::string(kRedfish) + "FabricPollInterval=-1\n", 4, "expected a duration");
  expect_refused(std::string(kRedfish) + "FabricVerifyTls=maybe\n", 4, "expected yes or no");
  expect_refused(std::string(kRedfish) + "FabricAuth=token\n", 4, "expected session or basic");
  expect_refused(std::string(kRedfish) + "FabricNodeNames=fqdn\n", 4, "expected id or hostname");
  expect_refused(std::string(kRedfish) + "FabricSlots=0\n", 4, "whole number from 1");
  expect_refused("Fabric=redfish\nFabricUrl=https://fm\nFabricCredentials=creds.txt\n", 3,
                 "expected an absolute path");
  expect_refused(std::string(kRedfish) + "FabricCaFile=ca.pem\n", 4, "expected an absolute path");
}

TEST(FabricConfig, AUrlWithAQueryStringIsRefusedWithoutIt) {
  const std::string base = "Fabric=redfish\nFabricCredentials=/c\n";
  // ('#' starts a comment: a fragment never reaches the value.)
  for (const std::string url :
       {"https://fm:8443?token=s3cret", "https://fm:8443/redfish?token=s3cret", "https://fm?"}) {
    expect_refused(base + "FabricUrl=" + url + "\n", 3, "?<redacted>: a URL with a query string");
    auto c = parse(base + "FabricUrl=" + url + "\n");
    ASSERT_FALSE(c.ok());
    EXPECT_THAT(c.error().message, Not(HasSubstr("s3cret")));
  }
  auto line = parse("FabricName=pod-a Driver=redfish Url=https://fm?token=s3cret Credentials=/c\n");
  ASSERT_FALSE(line.ok());
  EXPECT_THAT(line.error().message, HasSubstr("Url=https://fm?<redacted>"));
  EXPECT_THAT(line.error().message, Not(HasSubstr("s3cret")));
}

TEST(FabricConfig, AUrlWithAPathIsRefusedWithoutIt) {
  const std::string base = "Fabric=redfish\nFabricCredentials=/c\n";
  for (const std::string url : {"https://fm:8443/api/s3cret", "https://fm/s3cret/"}) {
    auto c = parse(base + "FabricUrl=" + url + "\n");
    ASSERT_FALSE(c.ok());
    EXPECT_THAT(c.error().message, HasSubstr("line 3"));
    EXPECT_THAT(c.error().message, HasSubstr("/<redacted>: expected http(s)://HOST[:PORT] only"));
    EXPECT_THAT(c.error().message, Not(HasSubstr("s3cret")));
  }
  auto line = parse("FabricName=pod-a Driver=redfish Url=https://fm/x/s3cret Credentials=/c\n");
  ASSERT_FALSE(line.ok());
  EXPECT_THAT(line.error().message, HasSubstr("Url=https://fm/<redacted>"));
  EXPECT_THAT(line.error().message, Not(HasSubstr("s3cret")));
}

TEST(FabricConfig, CredentialsInTheUrlAreRefusedWithoutRepeatingThem) {
  auto c = parse("Fabric=liqid\nFabricUrl=https://admin:Hunter2@fm\n");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.error().message, HasSubstr("line 2"));
  EXPECT_THAT(c.error().message, HasSubstr("must not carry credentials"));
  EXPECT_THAT(c.error().message, Not(HasSubstr("Hunter2")));
}

TEST(FabricConfig, RealDriversNeedUrlAndCredentials) {
  expect_refused("Fabric=redfish\nFabricCredentials=/c\n", 0, "needs FabricUrl=");
  expect_refused("Fabric=liqid\nFabricUrl=http://fm\n", 0, "needs FabricCredentials=");
}

TEST(FabricConfig, SimAndRealSettingsDoNotMix) {
  expect_refused(std::string(kSimPool) + "FabricUrl=https://fm\n", 3,
                 "FabricUrl applies to Fabric=redfish or Fabric=liqid, not Fabric=sim");
  expect_refused(std::string(kRedfish) + "DeviceGroup=g Type=gpu Model=A Zone=z Count=1\n", 4,
                 "the devices come from the fabric manager");
  expect_refused(std::string(kRedfish) + "NodeName=cn01 Zones=z1\n", 4,
                 "zones and slots come from the fabric manager");
  expect_refused(std::string(kRedfish) + "NodeName=cn01 GpuSlots=2\n", 4,
                 "keep only NodeName=, FabricHost= and Domains=");
  expect_refused(std::string(kRedfish) + "SimLatency=10\n", 4, "applies to Fabric=sim only");
  expect_refused("NodeName=n1\nDeviceGroup=g Type=gpu Model=A Zone=z Count=1\n", 1,
                 "needs Zones= with Fabric=sim");
  expect_refused("NodeName=n1 Zones=z\n", 0, "needs at least one DeviceGroup= line");
}

TEST(FabricConfig, DriverSpecificChoicesAreChecked) {
  expect_refused(std::string(kRedfish) + "FabricAuth=apikey\n", 0, "applies to Fabric=liqid");
  expect_refused("Fabric=liqid\nFabricUrl=http://fm\nFabricCredentials=/c\nFabricAuth=session\n", 0,
                 "applies to Fabric=redfish");
  expect_refused(
      "Fabric=liqid\nFabricUrl=http://fm\nFabricCredentials=/c\n"
      "FabricNodeNames=hostname\n",
      0, "Liqid machines go by their machine name");
  expect_refused(std::string(kRedfish) + "FabricNodeNames=hostname\nNodeName=cn1\n", 5,
                 "map nodes explicitly");
  expect_refused(std::string(kRedfish) + "NodeName=cn1 FabricHost=S1\nNodeName=cn2 FabricHost=S1\n",
                 0, "fabric host 'S1' is mapped to both cn1 and cn2");
}

TEST(FabricConfig, FabricKeysMayComeBeforeFabric) {
  auto c = parse(
      "FabricUrl=http://fm:8080\nNodeName=cn1 FabricHost=m1\nFabricCredentials=/c\n"
      "Fabric=liqid\n");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->fabric_config.host_map.at("m1"), "cn1");
}

// Several fabrics: one FabricName line each.
constexpr const char* kTwoFabrics =
    "FabricName=pod-a Driver=redfish Url=https://fm-a.example.org:8443 "
    "Credentials=/etc/slurm/pod-a.cred Auth=basic Timeout=5s\n"
    "FabricName=lab Driver=sim\n"
    "NodeName=cn[1-2] Fabric=pod-a\n"
    "NodeName=cn3 Fabric=pod-a FabricHost=blade-3\n"
    "NodeName=dev[1-2] Fabric=lab Zones=z1 GpuSlots=4\n"
    "DeviceGroup=lab-gpu Fabric=lab Type=gpu Model=A100 Zone=z1 Count=2\n";

TEST(SeveralFabrics, EachLineIsOneFabricWithItsNodesAndGroups) {
  auto c = parse(std::string(kTwoFabrics) + "SimLatency=20\n");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->fabric, "pod-a=redfish,lab=sim");
  ASSERT_EQ(c->fabrics.size(), 2u);
  const FabricSpec& a = c->fabrics[0];
  EXPECT_EQ(a.line, 1);
  EXPECT_EQ(a.name, "pod-a");
  EXPECT_EQ(a.driver, "redfish");
  EXPECT_EQ(a.config.name, "pod-a");
  EXPECT_EQ(a.config.url, "https://fm-a.example.org:8443");
  EXPECT_EQ(a.config.credentials_file, "/etc/slurm/pod-a.cred");
  EXPECT_EQ(a.config.auth, "basic");
  EXPECT_EQ(a.config.request_timeout_ms, 5000);
  EXPECT_EQ(a.config.host_map, (std::map<std::string, std::string>{
                                   {"cn1", "cn1"}, {"cn2", "cn2"}, {"blade-3", "cn3"}}));
  EXPECT_TRUE(a.sim.hosts.empty());
  const FabricSpec& lab = c->fabrics[1];
  EXPECT_EQ(lab.driver, "sim");
  ASSERT_EQ(lab.sim.hosts.size(), 2u);
  EXPECT_EQ(lab.sim.hosts[1].node, "dev2");
  EXPECT_EQ(lab.sim.hosts[1].gpu_slots, 4u);
  ASSERT_EQ(lab.sim.groups.size(), 1u);
  EXPECT_EQ(lab.sim.groups[0].name, "lab-gpu");
  EXPECT_EQ(lab.sim.latency_ms, 20);
  EXPECT_TRUE(lab.config.host_map.empty());
}

TEST(SeveralFabrics, OneLineNeedsNoFabricOnItsNodesAndARealOneNeedsNoNodes) {
  auto one = parse(
      "FabricName=only Driver=sim\n"
      "NodeName=n1 Zones=z1\n"
      "DeviceGroup=g Type=gpu Model=A100 Zone=z1 Count=1\n");
  ASSERT_TRUE(one.ok()) << one.error();
  ASSERT_EQ(one->fabrics.size(), 1u);
  EXPECT_EQ(one->fabrics[0].sim.hosts.size(), 1u);
  EXPECT_EQ(one->fabrics[0].sim.groups.size(), 1u);

  auto open = parse(
      "FabricName=a Driver=redfish Url=http://fm-a Credentials=/a NodeNames=hostname\n"
      "FabricName=b Driver=liqid Url=http://fm-b Credentials=/b Auth=apikey Slots=4\n");
  ASSERT_TRUE(open.ok()) << open.error();
  EXPECT_TRUE(open->fabrics[0].config.use_host_name);
  EXPECT_TRUE(open->fabrics[1].config.host_map.empty());
  EXPECT_EQ(open->fabrics[1].config.slots, 4u);
}

TEST(SeveralFabrics, LinesAreCheckedOptionByOption) {
  expect_refused("FabricName=a Url=http://fm Credentials=/c\n", 1,
                 "FabricName=a needs Driver=sim, Driver=redfish or Driver=liqid");
  expect_refused("FabricName=a Driver=ethernet\n", 1,
                 "Driver=ethernet: expected sim, redfish or liqid");
  expect_refused("FabricName=a Driver=redfish Colour=blue\n", 1,
                 "unknown FabricName option 'Colour' (allowed: Driver, Url, Credentials,");
  expect_refused("FabricName=a Driver=redfish FabricUrl=http://fm\n", 1,
                 "unknown FabricName option 'FabricUrl'");
  expect_refused("FabricName=a Driver=redfish Url=http://fm Url=http://fm2\n", 1,
                 "'Url' is given twice for this fabric");
  expect_refused("FabricName=a Driver=redfish Url=ftp://fm\n", 1,
                 "Url: expected http(s)://HOST[:PORT]");
  expect_refused("FabricName=a Driver=redfish Url=http://u:secret@fm\n", 1,
                 "Url must not carry credentials");
  expect_refused("FabricName=a Driver=sim Url=http://fm\n", 1,
                 "Url applies to Driver=redfish or Driver=liqid, not Driver=sim");
  expect_refused("FabricName=a/b Driver=sim\n", 1, "names may hold only letters");
  expect_refused("FabricName=a Driver=sim\nFabricName=a Driver=sim\n", 2,
                 "FabricName=a is declared twice");
  expect_refused("FabricName=a Driver=redfish Credentials=/c\n", 1,
                 "FabricName=a (Driver=redfish) needs Url=http(s)://HOST[:PORT]");
  expect_refused("FabricName=a Driver=liqid Url=http://fm\n", 1,
                 "FabricName=a (Driver=liqid) needs Credentials=");
  expect_refused("FabricName=a Driver=liqid Url=http://fm Credentials=/c Auth=session\n", 1,
                 "Auth=session applies to Driver=redfish");
}

TEST(SeveralFabrics, NodesAndGroupsMustNameADeclaredFabricOfTheRightKind) {
  const std::string two =
      "FabricName=a Driver=redfish Url=http://fm-a Credentials=/a\n"
      "FabricName=b Driver=sim\n";
  expect_refused(two + "NodeName=n1\n", 3,
                 "NodeName=n1 needs Fabric= naming one of the FabricName lines (a, b)");
  expect_refused(two + "NodeName=n1 Fabric=c\n", 3,
                 "Fabric=c names no FabricName line (declared: a, b)");
  expect_refused(two + "NodeName=n1 Fabric=b Zones=z1\n" +
                     "DeviceGroup=g Fabric=a Type=gpu Model=A100 Zone=z1 Count=1\n",
                 4, "the devices of a (Driver=redfish) come from its fabric manager");
  expect_refused(two + "NodeName=n1 Fabric=b\nDeviceGroup=g Type=gpu Model=A100 Zone=z1 Count=1\n",
                 3, "NodeName=n1 needs Zones= with FabricName=b (Driver=sim)");
  expect_refused(two + "NodeName=n1 Fabric=a Zones=z1\n", 3,
                 "with FabricName=a (Driver=redfish) zones and slots come from the fabric manager");
  expect_refused(two + "NodeName=n1 Fabric=b Zones=z1\n", 2,
                 "FabricName=b (Driver=sim) needs at least one DeviceGroup= line");
  expect_refused(
      "FabricName=a Driver=redfish Url=http://fm-a Credentials=/a\n"
      "DeviceGroup=g Type=gpu Model=A100 Zone=z1 Count=1\n",
      2, "no FabricName line has Driver=sim");
  // Two fabric hosts of one fabric may not share a node; one node may not sit in two fabrics.
  expect_refused(
      "FabricName=a Driver=redfish Url=http://fm-a Credentials=/a\n"
      "NodeName=n1 FabricHost=h1\nNodeName=n2 FabricHost=h1\n",
      1, "fabric host 'h1' is mapped to both n1 and n2");
  expect_refused(two + "NodeName=n1 Fabric=a\nNodeName=n1 Fabric=b Zones=z1\n", 4,
                 "node 'n1' is declared twice");
}

TEST(SeveralFabrics, TheOneFabricKeysDoNotMixWithFabricNameLines) {
  const std::string line = "FabricName=a Driver=redfish Url=http://fm-a Credentials=/a\n";
  expect_refused(line + "Fabric=redfish\n", 2, "with FabricName lines give each its Driver=");
  expect_refused(line + "FabricTimeout=5s\n", 2,
                 "FabricTimeout applies to a file with one fabric; with FabricName lines put "
                 "Timeout= on the fabric's line");
  expect_refused(line + "FabricName=label\n", 2, "every FabricName line needs Driver=");
  expect_refused(line + "SimLatency=5\n", 2, "SimLatency applies to Driver=sim only");
  // And Fabric= on NodeName or DeviceGroup lines means nothing without FabricName lines.
  expect_refused("NodeName=n1 Zones=z1 Fabric=a\nDeviceGroup=g Type=gpu Model=A Zone=z1 Count=1\n",
                 1, "Fabric=a on a NodeName line names one of several fabrics");
  expect_refused("NodeName=n1 Zones=z1\nDeviceGroup=g Fabric=a Type=gpu Model=A Zone=z1 Count=1\n",
                 2, "Fabric=a on a DeviceGroup line names one of several fabrics");
}

// make_fabric hands every driver to the caller's wrap once, in file order, with its FabricName
// ("" without one) before it is used: composerd meters each fabric there.
TEST(MakeFabric, HandsEachDriverToTheWrapInFileOrder) {
  std::vector<std::pair<std::string, std::string>> seen;  // (name, driver)
  const WrapDriver wrap = [&seen](std::unique_ptr<Fabric> driver, const std::string& name,
                                  const FabricConfig&) {
    seen.emplace_back(name, std::string(driver->driver()));
    return driver;
  };
  auto one = parse(kSimPool);
  ASSERT_TRUE(one.ok()) << one.error();
  one->sim.state_file.clear();  // nothing attached outlives the test
  auto fabric = make_fabric(*one, wrap);
  ASSERT_TRUE(fabric.ok()) << fabric.error();
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, std::string>>{{"", "sim"}}));
  EXPECT_TRUE(make_fabric(*one).ok());  // no wrap: the driver as built
  EXPECT_EQ(seen.size(), 1u);

  seen.clear();
  auto two = parse(
      "FabricName=pod-a Driver=sim\n"
      "FabricName=pod-b Driver=sim\n"
      "NodeName=a1 Fabric=pod-a Zones=z1 GpuSlots=1\n"
      "DeviceGroup=ga Fabric=pod-a Type=gpu Model=A100 Zone=z1 Count=1\n"
      "NodeName=b1 Fabric=pod-b Zones=z1 GpuSlots=1\n"
      "DeviceGroup=gb Fabric=pod-b Type=gpu Model=A100 Zone=z1 Count=2\n");
  ASSERT_TRUE(two.ok()) << two.error();
  for (FabricSpec& spec : two->fabrics) spec.sim.state_file.clear();
  auto multi = make_fabric(*two, wrap);
  ASSERT_TRUE(multi.ok()) << multi.error();
  EXPECT_EQ(seen,
            (std::vector<std::pair<std::string, std::string>>{{"pod-a", "sim"}, {"pod-b", "sim"}}));
  auto inventory = (*multi)->inventory();
  ASSERT_TRUE(inventory.ok()) << inventory.error();
  EXPECT_EQ(inventory->devices.size(), 3u);
}

}  // namespace
}  // namespace composer::setup

namespace composer::setup {
namespace {

TEST(DescribeInventory, ListsHostsDevicesHoldersAndSkippedResources) {
  FabricInventory inv;
  inv.hosts.push_back(Host{.node = "n1",
                           .fabric_id = "sys-1",
                           .zones = {"z1", "z2"},
                           .gpu_slots = 4,
                           .mem_slots = 2,
                           .nvme_slots = 1});
  inv.devices.push_back(
      Device{.id = "g0", .type = DeviceType::kGpu, .model = "A100", .zone = "z1"});
  inv.devices.push_back(
      Device{.id = "g1", .type = DeviceType::kGpu, .model = "A100", .zone = "z1"});
  inv.devices.push_back(Device{.id = "m0",
                               .type = DeviceType::kMem,
                               .model = "CXL",
                               .capacity_bytes = 64ull << 30,
                               .zone = "z2"});
  inv.attached["g1"] = "sys-9";
  inv.held["m0"] = "shared by systems sys-1, sys-2";
  inv.skipped.push_back("Block7: a SAS drive; only NVMe drives are pooled");
  const std::string text = describe_inventory(inv);
  EXPECT_NE(text.find("  n1  fabric host sys-1  zones z1,z2  slots gpu 4 mem 2 nvme 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  gpu  A100  zone z1  2, attached 1, held 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  mem  CXL  zone z2  1 (64G), attached 0, held 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("  g1  attached to sys-9\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  m0  shared by systems sys-1, sys-2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("skipped (1):\n  Block7: a SAS drive"), std::string::npos) << text;
  EXPECT_EQ(text.find("warning"), std::string::npos) << text;
  EXPECT_NE(describe_inventory(FabricInventory{}).find("warning: the fabric shows no device"),
            std::string::npos);
}

}  // namespace
}  // namespace composer::setup
