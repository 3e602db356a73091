#include "composer/setup/composer_conf.h"

#include "composer/core/service.h"

#include <gtest/gtest.h>

#include <fstream>

namespace composer::setup {
namespace {

constexpr const char* kPool =
    "NodeName=n[01-03] Zones=z1,z2 GpuSlots=8 MemSlots=4 NvmeSlots=2\n"
    "DeviceGroup=gpu-a Type=gpu Model=A100 Zone=z1 Count=8\n"
    "DeviceGroup=cxl Type=mem Model=CXL Zone=z2 Count=4 Size=64G\n";

Expected<Config> parse(const std::string& head) { return parse_config(head + kPool, "c.conf"); }

TEST(Config, DefaultsAndSettings) {
  auto c = parse("listenport=7000\nStateDir=/var/lib/x\nAdminUsers=root,slurm\nComposeTimeout=5\n");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->listen_port, 7000);
  EXPECT_EQ(c->database, "/var/lib/x/composer.db");
  EXPECT_EQ(c->snapshot, "/var/lib/x/snapshot.json");
  EXPECT_EQ(c->admin_users, (std::vector<std::string>{"root", "slurm"}));
  EXPECT_EQ(c->compose_timeout_ms, 5000);
  ASSERT_EQ(c->sim.hosts.size(), 3u);
  EXPECT_EQ(c->sim.hosts[1].node, "n02");
  EXPECT_EQ(c->sim.hosts[1].zones, (std::vector<std::string>{"z1", "z2"}));
  ASSERT_EQ(c->sim.groups.size(), 2u);
  EXPECT_EQ(c->sim.groups[1].size_bytes, 64ull << 30);
  EXPECT_FALSE(c->slurm_sync);
  EXPECT_EQ(c->slurm_scontrol, "scontrol");
  auto sync =
      parse("SlurmSync=yes\nSlurmScontrol=/opt/slurm/bin/scontrol\nSlurmConf=/etc/s.conf\n");
  ASSERT_TRUE(sync.ok()) << sync.error();
  EXPECT_TRUE(sync->slurm_sync);
  EXPECT_EQ(sync->slurm_scontrol, "/opt/slurm/bin/scontrol");
  EXPECT_EQ(sync->slurm_conf, "/etc/s.conf");
  // SQLite unless told otherwise; PostgreSQL through a file holding the connection string.
  EXPECT_EQ(c->state_backend, "sqlite");
  auto pg = parse("StateBackend=PostgreSQL\nStateUrlFile=/etc/slurm/composer-state.url\n");
  ASSERT_TRUE(pg.ok()) << pg.error();
  EXPECT_EQ(pg->state_backend, "postgresql");
  EXPECT_EQ(pg->state_url_file, "/etc/slurm/composer-state.url");
  // Several composerd on it: each advertises its URL, derived from where it listens unless
  // given; the lease is in seconds.
  EXPECT_EQ(pg->leader_lease_ms, 5000);
  EXPECT_EQ(pg->advertised_url(), "http://127.0.0.1:6830");
  auto ha = parse(
      "StateBackend=postgresql\nStateUrl=dbname=c\nAdvertiseUrl=http://ctl1:6830\n"
      "LeaderLease=9\n");
  ASSERT_TRUE(ha.ok()) << ha.error();
  EXPECT_EQ(ha->advertised_url(), "http://ctl1:6830");
  EXPECT_EQ(ha->leader_lease_ms, 9000);
  auto v6 = parse("StateBackend=postgresql\nStateUrl=dbname=c\nListenAddress=::1\nListenPort=7\n");
  ASSERT_TRUE(v6.ok()) << v6.error();
  EXPECT_EQ(v6->advertised_url(), "http://[::1]:7");
}

// A job array's prologs arrive from one peer (slurmctld's host, composer-slurmctld), at most
// ApiMaxConnectionsPerPeer at once: by default the fabric takes them all at once, so a burst
// costs about one operation, not one per wave of MaxFabricOperations (docs/ADMIN.md,
// "Capacity and sizing"; the burst of 500 at 2 s took 2.27x one operation at 256).
TEST(Config, TheDefaultFabricLimitTakesABurstFromOnePeerAtOnce) {
  auto c = parse("");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_GE(c->max_fabric_operations, c->api_max_connections_per_peer);
  EXPECT_EQ(ServiceOptions{}.max_fabric_operations, static_cast<size_t>(c->max_fabric_operations));
}

TEST(Config, RefusesWithFileLineAndRule) {
  struct Case {
    std::string text;
    std::string needle;
  };
  for (const auto& k : std::vector<Case>{
           {"Colour=blue\n", "c.conf line 1: unknown key 'Colour'"},
           {"ListenPort=0\n", "line 1: ListenPort=0: expected a whole number from 1 to 65535"},
           {"ListenPort=80\nListenPort=81\n", "line 2: 'ListenPort' is set twice"},
           {"ApiMaxHeaderBytes=1024\n",
            "line 1: ApiMaxHeaderBytes=1024: expected a whole number from 16384 to 1048576"},
           {"ApiMaxBodyBytes=1G\n", "line 1: ApiMaxBodyBytes=1G: expected a whole number"},
           {"ApiRequestTimeout=0\n",
            "line 1: ApiRequestTimeout=0: expected a whole number from 1 to 3600"},
           {"ApiMaxConnections=100\nApiMaxConnectionsPerPeer=101\n",
            "line 2: ApiMaxConnectionsPerPeer=101 is more than ApiMaxConnections=100: one peer "
            "cannot hold more connections than composerd keeps in all"},
           {"StateDir=relative\n", "expected an absolute path"},
           // slurmctld reads it too, from another working directory.
           {"SnapshotFile=snap.json\n",
            "line 1: SnapshotFile=snap.json: expected an absolute path"},
           {"StateDir=/a\nstatedir=/b\n", "line 2: 'statedir' is set twice"},
           {"Durable=maybe\n", "expected yes or no"},
           {"SlurmSync=maybe\n", "line 1: SlurmSync=maybe: expected yes or no"},
           {"SlurmScontrol=\n",
            "line 1: SlurmScontrol=: expected the path of Slurm's scontrol (or a name on PATH)"},
           {"LogLevel=loud\n", "expected debug, info, warning or error"},
           {"Fabric=magic\n", "Fabric=magic"},
           {"NodeName=x[3-1] Zones=z1\n", "node[01-04,07]"},
           {"NodeName=n9 Zones=z1 Colour=red\n", "unknown NodeName option 'Colour'"},
           {"DeviceGroup=m Type=mem Model=X Zone=z1 Count=2\n", "needs Size="},
           {"DeviceGroup=g Type=fpga Model=X Zone=z1 Count=2\n", "expected gpu, mem or nvme"},
           {"NodeName=n01 Zones=z1\n", "node 'n01' is declared twice"},
           // NodeName and DeviceGroup options are read through a table of their own, which
           // names what it allows; the checks across options come once the line is read.
           {"NodeName=n9 Zones=z1 GpuSlots=2000\n",
            "line 1: GpuSlots=2000: expected a whole number from 0 to 1024"},
           {"NodeName=m[1-2] Zones=z1 FabricHost=h1\n",
            "line 1: FabricHost= can only be given on a NodeName line naming one node"},
           {"DeviceGroup=g2 Type=gpu Model=X Zone=z1 Count=2 Shape=round\n",
            "line 1: unknown DeviceGroup option 'Shape' (allowed: Fabric, Type, Model, Zone, "
            "Count, Size, Domains)"},
           {"DeviceGroup=g2 Type=gpu Model=X Zone=z1 Count=0\n",
            "line 1: Count=0: expected a whole number from 1 to 100000"},
           {"DeviceGroup=g2 Type=mem Model=X Zone=z1 Count=1 Size=lots\n", "line 1: Size=lots: "},
           {"DeviceGroup=g2 Type=gpu Zone=z1 Count=1\n",
            "line 1: DeviceGroup=g2 needs Type=, Model=, Zone= and Count="},
           {"just words\n", "is not of the form Key=Value"},
           // What composerd would only find out when it starts, or never.
           {"ListenAddress=not-an-address!\n",
            "line 1: ListenAddress=not-an-address!: expected an IPv4 or IPv6 address"},
           {"MungeSocket=munge.socket\n", "line 1: MungeSocket=munge.socket: expected an absolute"},
           {"Database=sim\n", "line 1: Database=sim: expected an absolute path"},
           {"LogFile=composerd.log\n", "line 1: LogFile=composerd.log: expected an absolute"},
           {"StateDir=/\n", "line 1: StateDir=/: the root directory cannot be composerd's own"},
           {"ListenPort=7\nStateDir=//\n", "line 2: StateDir=//: the root directory"},
           {"NodeName=m1 FabricHost=h1 Zones=z1\nNodeName=m2 FabricHost=h1 Zones=z1\n",
            "line 2: NodeName=m2: fabric host 'h1' is already the fabric host of m1 (line 1)"},
           {"NodeName=m1 Zones=z1\nNodeName=m2 FabricHost=m1 Zones=z1\n",
            "line 2: NodeName=m2: fabric host 'm1' is already the fabric host of m1"},
           {"SimFailAttaches=-1\n", "line 1: SimFailAttaches=-1: expected a whole number"},
           {"StateGroup=a,b\n", "line 1: StateGroup=a,b: names may hold only"},
           {"StateBackend=mysql\n", "line 1: StateBackend=mysql: expected sqlite or postgresql"},
           {"StateBackend=postgresql\n",
            "line 1: StateBackend=postgresql needs its connection string in exactly one of "
            "StateUrlFile="},
           {"StateBackend=postgresql\nStateUrl=dbname=c\nStateUrlFile=/etc/c.url\n",
            "line 1: StateBackend=postgresql needs its connection string in exactly one"},
           {"StateUrl=dbname=c\n",
            "line 1: StateUrl= names a PostgreSQL database, which only "
            "StateBackend=postgresql uses"},
           {"StateBackend=postgresql\nStateUrlFile=c.url\n",
            "line 2: StateUrlFile=c.url: expected an absolute path"},
           {"AdvertiseUrl=http://ctl1:6830\n",
            "line 1: AdvertiseUrl= is for several composerd sharing one PostgreSQL store"},
           {"StateBackend=postgresql\nStateUrl=dbname=c\nLeaderLease=1\n",
            "line 3: LeaderLease=1: expected a whole number"},
           {"StateBackend=postgresql\nStateUrl=dbname=c\nAdvertiseUrl=ctl1:6830\n",
            "line 3: AdvertiseUrl=ctl1:6830: expected the URL clients reach this composerd at"},
       }) {
    auto c = parse(k.text);
    ASSERT_FALSE(c.ok()) << k.text;
    EXPECT_NE(c.error().message.find(k.needle), std::string::npos) << c.error().message;
  }
}

TEST(Config, FailureDomainsOfDeviceGroups) {
  auto c = parse_config(
      "DomainLevels=enclosure,power,appliance\n"
      "NodeName=n1 Zones=z1 GpuSlots=4 MemSlots=4\n"
      "DeviceGroup=g Type=gpu Model=A Zone=z1 Count=2 Domains=power:pdu-a,enclosure:enc1\n"
      "DeviceGroup=m Type=mem Model=M Zone=z1 Count=2 Size=64G domains=appliance:mem-a\n"
      "DeviceGroup=plain Type=gpu Model=A Zone=z1 Count=1\n",
      "c.conf");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->domain_levels, (std::vector<std::string>{"enclosure", "power", "appliance"}));
  ASSERT_EQ(c->sim.groups.size(), 3u);
  // Sorted by level name, whatever order the line gives.
  EXPECT_EQ(c->sim.groups[0].domains,
            (std::vector<FailureDomain>{{"enclosure", "enc1"}, {"power", "pdu-a"}}));
  EXPECT_EQ(c->sim.groups[1].domains, (std::vector<FailureDomain>{{"appliance", "mem-a"}}));
  EXPECT_TRUE(c->sim.groups[2].domains.empty());

  // DomainLevels= may come after the lines that use its levels.
  c = parse_config(
      "NodeName=n1 Zones=z1 GpuSlots=4\n"
      "DeviceGroup=g Type=gpu Model=A Zone=z1 Count=2 Domains=power:pdu-a\n"
      "DomainLevels=power\n",
      "c.conf");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->sim.groups[0].domains, (std::vector<FailureDomain>{{"power", "pdu-a"}}));

  // Hosts sit in domains too: every node of the line, sorted by level.
  c = parse_config(
      "DomainLevels=switch,power\n"
      "NodeName=n[1-2] Zones=z1 GpuSlots=4 Domains=switch:sw-1,power:pdu-b\n"
      "NodeName=n3 Zones=z1 GpuSlots=4\n"
      "DeviceGroup=g Type=gpu Model=A Zone=z1 Count=2\n",
      "c.conf");
  ASSERT_TRUE(c.ok()) << c.error();
  ASSERT_EQ(c->sim.hosts.size(), 3u);
  for (size_t i : {0u, 1u}) {
    EXPECT_EQ(c->sim.hosts[i].domains,
              (std::vector<FailureDomain>{{"power", "pdu-b"}, {"switch", "sw-1"}}));
  }
  EXPECT_TRUE(c->sim.hosts[2].domains.empty());
}

TEST(Config, RefusesFailureDomainsItCannotPlace) {
  struct Case {
    std::string text;
    std::string needle;
  };
  const std::string node = "NodeName=n1 Zones=z1 GpuSlots=4\n";
  for (const auto& k : std::vector<Case>{
           {node + "DeviceGroup=g Type=gpu Model=A Zone=z1 Count=1 Domains=rack:r1\n",
            "c.conf line 2: DeviceGroup=g: Domains= names level 'rack', but no DomainLevels= "
            "line declares any level; add e.g. DomainLevels=rack"},
           {"DomainLevels=enclosure,power\n" + node +
                "DeviceGroup=g Type=gpu Model=A Zone=z1 Count=1 Domains=rack:r1\n",
            "c.conf line 3: DeviceGroup=g: Domains= names level 'rack', which DomainLevels= does "
            "not declare (declared: enclosure, power)"},
           {"DomainLevels=power\n" + node +
                "DeviceGroup=g Type=gpu Model=A Zone=z1 Count=1 Domains=pdu-a\n",
            "line 3: Domains=pdu-a: 'pdu-a' is not LEVEL:NAME"},
           {"DomainLevels=power\n" + node +
                "DeviceGroup=g Type=gpu Model=A Zone=z1 Count=1 Domains=power:a,power:b\n",
            "line 3: Domains=power:a,power:b: level 'power' is given twice"},
           {"DomainLevels=power\n" + node +
                "DeviceGroup=g Type=gpu Model=A Zone=z1 Count=1 Domains=power:a/b\n",
            "line 3: Domains name=a/b: names may hold only"},
           {"DomainLevels=power,power\n",
            "line 1: DomainLevels=power,power: level 'power' is "
            "given twice"},
           {"DomainLevels=po/wer\n", "line 1: DomainLevels=po/wer: names may hold only"},
           {"DomainLevels=a\nDomainLevels=b\n", "line 2: 'DomainLevels' is set twice"},
           {"DomainLevels=enclosure\nNodeName=n[1-2] Zones=z1 GpuSlots=4 Domains=rack:r1\n"
            "DeviceGroup=g Type=gpu Model=A Zone=z1 Count=1\n",
            "c.conf line 2: NodeName=n[1-2]: Domains= names level 'rack', which DomainLevels= "
            "does not declare (declared: enclosure)"},
       }) {
    auto c = parse_config(k.text, "c.conf");
    ASSERT_FALSE(c.ok()) << k.text;
    EXPECT_NE(c.error().message.find(k.needle), std::string::npos) << c.error().message;
  }
}

TEST(Config, TakesListenAddressesAndHostNames) {
  for (const std::string a :
       {"127.0.0.1", "0.0.0.0", "::1", "::", "fe80::1", "localhost", "head-node.example.org"}) {
    auto c = parse("ListenAddress=" + a + "\n");
    ASSERT_TRUE(c.ok()) << a << ": " << c.error();
    EXPECT_EQ(c->listen_address, a);
  }
  for (const std::string a : {"-x", "a..b", "[::1]", "x_y", "host:80"}) {
    EXPECT_FALSE(parse("ListenAddress=" + a + "\n").ok()) << a;
  }
}

// The simulated fabric keeps its attachments beside the database; its faults come from here.
TEST(Config, TheSimFabricsStateFileAndFaults) {
  auto c = parse("Database=/srv/c.db\nSimLatency=400\nSimFailAttaches=2\nSimFailDetaches=1\n");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->sim.state_file, "/srv/c.db.sim");
  EXPECT_EQ(c->sim.latency_ms, 400);
  EXPECT_EQ(c->sim.fail_attaches, 2u);
  EXPECT_EQ(c->sim.fail_detaches, 1u);
  c = parse_config(
      "StateDir=/srv\nSimFailAttaches=3\nFabricName=pod Driver=sim\n"
      "NodeName=n1 Zones=z1\nDeviceGroup=g Type=gpu Model=A Zone=z1 Count=1\n",
      "c.conf");
  ASSERT_TRUE(c.ok()) << c.error();
  ASSERT_EQ(c->fabrics.size(), 1u);
  EXPECT_EQ(c->fabrics[0].sim.state_file, "/srv/composer.db.sim-pod");
  EXPECT_EQ(c->fabrics[0].sim.fail_attaches, 3u);
  // Remote licenses need the Slurm sync and a cluster; every refusal names the line.
  c = parse("SlurmSync=yes\nSlurmLicenses=Remote\nSlurmCluster=hpc1\nSlurmLicenseServer=fab\n");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_TRUE(c->slurm_remote_licenses);
  EXPECT_EQ(c->slurm_cluster, "hpc1");
  EXPECT_EQ(c->slurm_license_server, "fab");
  EXPECT_EQ(c->slurm_sacctmgr, "sacctmgr");
  for (const auto& [text, sentence] : std::vector<std::pair<std::string, std::string>>{
           {"SlurmLicenses=remote\nSlurmCluster=c\n",
            "line 1: SlurmLicenses=remote needs SlurmSync=yes"},
           {"SlurmSync=yes\nSlurmLicenses=remote\n",
            "line 2: SlurmLicenses=remote needs SlurmCluster="},
           {"SlurmLicenses=dbd\n", "line 1: SlurmLicenses=dbd: expected local"},
           {"SlurmCluster=a/b\n", "line 1: SlurmCluster=a/b: expected a name"},
           {"SlurmLicenseServer=x@y\n", "line 1: SlurmLicenseServer=x@y: expected a name"},
           {"SlurmSacctmgr=\n", "line 1: SlurmSacctmgr=: expected the path"}}) {
    c = parse(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.error().message.find(sentence), std::string::npos) << c.error().message;
  }
  c = parse("SimHealthFile=/run/sim-health\n");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->sim.health_file, "/run/sim-health");
  c = parse("SimHealthFile=health\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("line 1: SimHealthFile=health: expected an absolute path"),
            std::string::npos)
      << c.error().message;
  c = parse_config(
      "Fabric=redfish\nFabricUrl=https://fm\nFabricCredentials=/c\nSimFailDetaches=1\n", "c.conf");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("line 4: SimFailDetaches applies to Fabric=sim only"),
            std::string::npos)
      << c.error().message;
}

TEST(Config, LeavesTheJobSubmitPluginsKeysToIt) {
  auto c = parse("JobSubmitSnapshotMissing=refuse\nJobSubmitSnapshotMaxAge=120\n");
  EXPECT_TRUE(c.ok()) << c.error();
}

// As slurm.conf: whitespace may stand around the '='; a value is still one word.
TEST(Config, TakesSpacesAroundTheEqualsSign) {
  auto c = parse("StateDir = /srv/x  # comment\nListenPort= 7000\nApiThreads =8\n");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->state_dir, "/srv/x");
  EXPECT_EQ(c->listen_port, 7000);
  EXPECT_EQ(c->api_threads, 8);
  // The front door's limits: defaults, and a peer's share following ApiMaxConnections.
  c = parse("ApiMaxConnections=100\nApiIdleTimeout=5\n");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->api_max_connections, 100);
  EXPECT_EQ(c->api_max_connections_per_peer, 50);
  EXPECT_EQ(c->api_idle_timeout_ms, 5000);
  EXPECT_EQ(c->api_max_body_bytes, 1 << 20);
  EXPECT_EQ(c->api_max_header_bytes, 32768);
  c = parse("ListenAddress= ListenPort=7000\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("line 1: 'ListenAddress' takes one value"), std::string::npos)
      << c.error().message;
  c = parse("ListenPort = 7000 8000\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("line 1: '8000' is not of the form Key=Value"),
            std::string::npos)
      << c.error().message;
  c = parse("= 7000\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("line 1: '=' is not of the form Key=Value"), std::string::npos)
      << c.error().message;
}

TEST(Config, SnapshotFileDefaultsToTheStateDir) {
  auto c = parse("");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->state_dir, "/var/lib/slurm-composer");
  EXPECT_EQ(c->snapshot, "/var/lib/slurm-composer/snapshot.json");
  c = parse("SnapshotFile=/srv/snap.json\n");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->snapshot, "/srv/snap.json");
}

TEST(Config, NeedsNodesAndAPool) {
  auto c = parse_config("ListenPort=7000\n", "c.conf");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("no NodeName"), std::string::npos);
}

TEST(Hostlist, ExpandsRangesKeepingWidth) {
  auto h = config::expand_hostlist("gpu[08-10,12],login1");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, (std::vector<std::string>{"gpu08", "gpu09", "gpu10", "gpu12", "login1"}));
  EXPECT_FALSE(config::expand_hostlist("a[1-").ok());
  EXPECT_FALSE(config::expand_hostlist("a[x]").ok());
}

}  // namespace
}  // namespace composer::setup

namespace composer::setup {
namespace {

// Admins copy it: it must stay valid.
TEST(Config, TheShippedExampleIsValid) {
  auto c = load_config(std::string(COMPOSER_SOURCE_DIR) + "/contrib/composer.conf.example");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_TRUE(c->slurm_job_check);
  EXPECT_EQ(c->sim.hosts.size(), 4u);
}

// Its several-fabrics block, uncommented in place of the simulated pool, is valid too.
TEST(Config, TheShippedSeveralFabricsBlockIsValid) {
  std::ifstream in(std::string(COMPOSER_SOURCE_DIR) + "/contrib/composer.conf.example");
  ASSERT_TRUE(in.good());
  std::string line, text;
  bool block = false;
  int uncommented = 0;
  while (std::getline(in, line)) {
    if (line.find("Several fabrics in one composerd") != std::string::npos) block = true;
    const std::string key = line.substr(0, line.find('='));
    if (key == "Fabric" || key == "NodeName" || key == "DeviceGroup" || key == "SimLatency") {
      continue;  // the simulated pool's lines
    }
    if (block && (line.starts_with("#FabricName=") || line.starts_with("#NodeName="))) {
      line.erase(0, 1);
      ++uncommented;
    }
    text += line + "\n";
  }
  EXPECT_EQ(uncommented, 4);
  auto c = parse_config(text, "composer.conf.example");
  ASSERT_TRUE(c.ok()) << c.error();
  ASSERT_EQ(c->fabrics.size(), 2u);
  EXPECT_EQ(c->fabric, "pod-a=redfish,pod-b=liqid");
  EXPECT_EQ(c->fabrics[0].config.host_map.size(), 16u);
  EXPECT_EQ(c->fabrics[1].config.host_map.at("machine-17"), "node17");
}

}  // namespace
}  // namespace composer::setup
