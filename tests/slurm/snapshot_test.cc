#include "composer/api/snapshot.h"

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <json/reader.h>

#include "composer/common/units.h"
#include "composer/slurm/snapshot_cache.h"
#include "composer/slurm/submit_config.h"
#include "temp_dir.h"

namespace composer::slurm {
namespace {

using testing::TempDir;

api::PoolSnapshot sample() {
  api::PoolSnapshot s;
  s.generated_ms = 1700000000000;
  s.gpu.total = 8;
  s.gpu.models = {{"A100-80G", 8}};
  s.gpu.max_node_slots = 4;
  s.mem.total = 2;
  s.mem.total_bytes = 256 * kGiB;
  s.mem.largest_bytes = 128 * kGiB;
  s.mem.max_node_slots = 2;
  s.nvme.total = 4;
  s.nvme.max_node_slots = 2;
  api::WorkloadClass c;
  c.name = "training";
  c.cap_licenses = {{"gpu", "training_gpu_cap"}};
  c.max = {{"gpu", 6}};
  s.workload_classes = {c};
  s.blocker_reservations = {"night_block_training"};
  s.model_licenses = {"fabric_gpu_a100-80g"};
  s.license_server = "composer";
  return s;
}

Json::Value parse(const std::string& text) {
  Json::Value v;
  std::string errs;
  std::istringstream in(text);
  EXPECT_TRUE(Json::parseFromStream(Json::CharReaderBuilder(), in, &v, &errs)) << errs;
  return v;
}

TEST(Snapshot, RoundTripsThroughAFile) {
  TempDir tmp;
  ASSERT_TRUE(api::write_snapshot(tmp / "snapshot.json", sample()));
  Expected<api::PoolSnapshot> back = api::read_snapshot(tmp / "snapshot.json");
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, sample());
  struct stat st {};
  ASSERT_EQ(::stat((tmp / "snapshot.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  // No temporary file is left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(tmp.path()), {}), 1);
}

TEST(Snapshot, MakeSnapshotSumsRowsAndTakesTheLargestSlots) {
  std::vector<PoolRow> rows(3);
  rows[0].type = DeviceType::kGpu;
  rows[0].model = "A100-80G";
  rows[0].total = 7;
  rows[0].failed = 1;   // repaired, it comes back: counted
  rows[0].foreign = 1;  // held outside composerd: not
  rows[1].type = DeviceType::kGpu;
  rows[1].model = "H100";
  rows[1].total = 2;
  rows[2].type = DeviceType::kMem;
  rows[2].model = "CXL-DDR5";
  rows[2].total = 4;
  rows[2].total_bytes = 512 * kGiB;
  std::vector<Host> hosts(2);
  hosts[0].gpu_slots = 2;
  hosts[1].gpu_slots = 4;
  hosts[1].mem_slots = 2;
  api::PoolSnapshot s = api::make_snapshot(rows, hosts, 42);
  EXPECT_EQ(s.generated_ms, 42);
  EXPECT_EQ(s.gpu.total, 8u);
  EXPECT_EQ(s.gpu.models.at("A100-80G"), 6u);
  EXPECT_EQ(s.gpu.models.at("H100"), 2u);
  EXPECT_EQ(s.gpu.max_node_slots, 4u);
  EXPECT_EQ(s.mem.total_bytes, 512 * kGiB);
  EXPECT_EQ(s.mem.largest_bytes, 128 * kGiB);
  EXPECT_EQ(s.mem.max_node_slots, 2u);
  EXPECT_EQ(s.nvme.total, 0u);
}

// Rows of GPUs per zone: z1 has `z1_free` of 4 free, z2 `z2_free` of 4; cn1 reaches z1, cn2
// reaches z2, cn3 both.
std::vector<PoolRow> zone_rows(uint32_t z1_free, uint32_t z2_free) {
  std::vector<PoolRow> rows(2);
  for (int i = 0; i < 2; ++i) {
    rows[i].type = DeviceType::kGpu;
    rows[i].model = "A100-80G";
    rows[i].zone = i == 0 ? "z1" : "z2";
    rows[i].total = 4;
    rows[i].free = i == 0 ? z1_free : z2_free;
    rows[i].attached = 4 - rows[i].free;
  }
  return rows;
}
std::vector<Host> zone_hosts() {
  std::vector<Host> hosts(3);
  hosts[0].node = "cn1";
  hosts[0].zones = {"z1"};
  hosts[1].node = "cn2";
  hosts[1].zones = {"z2"};
  hosts[2].node = "cn3";
  hosts[2].zones = {"z1", "z2"};
  for (Host& h : hosts) h.gpu_slots = 8;
  return hosts;
}

TEST(Snapshot, ZonesArePublishedOnlyWhereNodesReachDifferentOnes) {
  api::PoolSnapshot s = api::make_snapshot(zone_rows(0, 3), zone_hosts(), 1);
  EXPECT_EQ(s.zones.at("z1").gpus, 0u);
  EXPECT_EQ(s.zones.at("z2").gpus, 3u);
  EXPECT_EQ(s.zones.at("z2").gpu_models.at("A100-80G"), 3u);
  EXPECT_EQ(s.node_zones.at("cn3"), (std::vector<std::string>{"z1", "z2"}));
  Expected<api::PoolSnapshot> back = api::snapshot_from_json(api::to_json(s));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, s);
  // Every node reaching the same zones: any node is as good as another.
  std::vector<Host> same = zone_hosts();
  for (Host& h : same) h.zones = {"z1", "z2"};
  api::PoolSnapshot one = api::make_snapshot(zone_rows(0, 3), same, 1);
  EXPECT_TRUE(one.zones.empty());
  EXPECT_TRUE(one.node_zones.empty());
  EXPECT_FALSE(api::to_json(one).isMember("zones"));
}

TEST(Snapshot, NodesOutOfReachAreThoseWhoseZonesCannotServe) {
  api::PoolSnapshot s = api::make_snapshot(zone_rows(0, 3), zone_hosts(), 1);
  Request one;
  one.gpus = 1;
  EXPECT_EQ(api::nodes_out_of_reach(s, one, 1), (std::vector<std::string>{"cn1"}));
  // cn3 reaches both zones: what they have free together counts.
  s = api::make_snapshot(zone_rows(2, 2), zone_hosts(), 1);
  Request three;
  three.gpus = 3;
  EXPECT_EQ(api::nodes_out_of_reach(s, three, 1), (std::vector<std::string>{"cn1", "cn2"}));
  // By model: no H100 anywhere is no advice (Slurm's licenses hold the job).
  Request h100 = one;
  h100.gpu_model = "H100";
  EXPECT_TRUE(api::nodes_out_of_reach(s, h100, 1).empty());
  Request a100 = three;
  a100.gpu_model = "A100-80G";
  EXPECT_EQ(api::nodes_out_of_reach(s, a100, 1), (std::vector<std::string>{"cn1", "cn2"}));
}

TEST(Snapshot, NodesOutOfReachGiveNoAdviceWhenTooFewNodesCouldServe) {
  api::PoolSnapshot s = api::make_snapshot(zone_rows(0, 3), zone_hosts(), 1);
  Request one;
  one.gpus = 1;
  // cn2 and cn3 can: a two-node job is kept off cn1, a three-node job is not kept off any.
  EXPECT_EQ(api::nodes_out_of_reach(s, one, 2), (std::vector<std::string>{"cn1"}));
  EXPECT_TRUE(api::nodes_out_of_reach(s, one, 3).empty());
  // Nothing free anywhere, nothing asked, or no zones published: no advice.
  s = api::make_snapshot(zone_rows(0, 0), zone_hosts(), 1);
  EXPECT_TRUE(api::nodes_out_of_reach(s, one, 1).empty());
  s = api::make_snapshot(zone_rows(0, 3), zone_hosts(), 1);
  EXPECT_TRUE(api::nodes_out_of_reach(s, Request{}, 1).empty());
  EXPECT_TRUE(api::nodes_out_of_reach(sample(), one, 1).empty());
}

TEST(Snapshot, ReaderIgnoresUnknownFieldsButNotWrongTypes) {
  Expected<api::PoolSnapshot> s = api::snapshot_from_json(
      parse(R"({"version":1,"future":true,"pools":{"gpu":{"total":3,"colour":"red"}}})"));
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->gpu.total, 3u);
  s = api::snapshot_from_json(parse(R"({"version":1,"pools":{"gpu":{"total":-3}}})"));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message,
            "snapshot: pools.gpu.total: -3 is not a whole number from 0 to 4294967295");
  s = api::snapshot_from_json(parse(R"({"version":2})"));
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("version: 2 is not supported"), std::string::npos);
  s = api::snapshot_from_json(
      parse(R"({"version":1,"workload_classes":[{"name":"t","cap_licenses":{"fpga":"x"}}]})"));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message,
            "snapshot: workload_classes[0].cap_licenses.fpga: unknown field; a map of pooled types "
            "has only these fields: gpu, mem, nvme");
}

TEST(Snapshot, CarriesClassificationRulesAndCapStretches) {
  api::PoolSnapshot s = sample();
  s.policy_id = 7;
  s.default_class = "training";
  api::WorkloadClass& c = s.workload_classes[0];
  c.partitions = {"train", "big"};
  c.qos = {"long"};
  c.accounts = {"ml"};
  c.min = {{"gpu", 2}};
  c.stretches = {{"gpu", {{4, 43200}, {6, 3600}}}};
  c.placement = "spread";
  c.placement_level = "appliance";
  c.placement_count = 2;
  c.placement_type = "mem";
  s.mem.domains = {{"appliance", 2}, {"power", 1}};
  TempDir tmp;
  ASSERT_TRUE(api::write_snapshot(tmp / "snapshot.json", s));
  Expected<api::PoolSnapshot> back = api::read_snapshot(tmp / "snapshot.json");
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, s);

  // A snapshot of an older composerd has none of these: no policy, no rules.
  Expected<api::PoolSnapshot> old = api::snapshot_from_json(
      parse(R"({"version":1,"workload_classes":[{"name":"t","max":{"gpu":4}}]})"));
  ASSERT_TRUE(old) << old.error();
  EXPECT_EQ(old->policy_id, 0);
  EXPECT_TRUE(old->default_class.empty());
  EXPECT_TRUE(old->workload_classes[0].partitions.empty());
  EXPECT_TRUE(old->workload_classes[0].stretches.empty());
  EXPECT_TRUE(old->workload_classes[0].placement.empty());
  EXPECT_TRUE(old->mem.domains.empty());
}

TEST(Snapshot, RefusesMalformedRulesAndStretches) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"version":1,"policy_id":-1})",
       "snapshot: policy_id: -1 is not a whole number from 0 to 9223372036854775807"},
      {R"({"version":1,"default_class":3})",
       "snapshot: default_class: expected a string, got the number 3"},
      {R"({"version":1,"workload_classes":[{"name":"t","partitions":"a"}]})",
       "snapshot: workload_classes[0].partitions: expected an array, got the string \"a\""},
      {R"({"version":1,"workload_classes":[{"name":"t","qos":[""]}]})",
       "snapshot: workload_classes[0].qos[0]: must not be empty"},
      {R"({"version":1,"workload_classes":[{"name":"t","min":{"fpga":1}}]})",
       "snapshot: workload_classes[0].min.fpga: unknown field; a map of pooled types has only "
       "these fields: gpu, mem, nvme"},
      {R"({"version":1,"workload_classes":[{"name":"t","stretches":{"gpu":[{"cap":2}]}}]})",
       "snapshot: workload_classes[0].stretches.gpu[0].seconds: required field is missing"},
      {R"({"version":1,"workload_classes":[{"name":"t","stretches":{"gpu":[{"cap":2,"seconds":-5}]}}]})",
       "snapshot: workload_classes[0].stretches.gpu[0].seconds: -5 is not a whole number from 0 "
       "to 9223372036854775807"},
      {R"({"version":1,"workload_classes":[{"name":"t","stretches":{"gpu":[{"cap":4,"seconds":5},{"cap":2,"seconds":9}]}}]})",
       "snapshot: workload_classes[0].stretches.gpu[1].cap: must be larger than the cap before "
       "it (ascending order)"},
      {R"({"version":1,"workload_classes":[{"name":"t","placement":{"rule":"scatter","level":"rack"}}]})",
       "snapshot: workload_classes[0].placement.rule: expected spread or avoid-shared"},
      {R"({"version":1,"workload_classes":[{"name":"t","placement":{"rule":"spread","level":"rack","type":"fpga"}}]})",
       "snapshot: workload_classes[0].placement.type: expected gpu, mem or nvme"},
      {R"({"version":1,"pools":{"gpu":{"domains":{"rack":-1}}}})",
       "snapshot: pools.gpu.domains.rack: -1 is not a whole number from 0 to 4294967295"},
  };
  for (const auto& [text, message] : cases) {
    Expected<api::PoolSnapshot> s = api::snapshot_from_json(parse(text));
    ASSERT_FALSE(s) << text;
    EXPECT_EQ(s.error().message, message) << text;
  }
}

TEST(Snapshot, MissingAndBrokenFilesSaySo) {
  TempDir tmp;
  Expected<api::PoolSnapshot> s = api::read_snapshot(tmp / "none.json");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kNotFound);
  tmp.write("bad.json", "{not json");
  s = api::read_snapshot(tmp / "bad.json");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(s.error().message.find("not valid JSON"), std::string::npos);
}

TEST(SnapshotCache, ReadsOnceAndAgainOnlyWhenTheFileChanges) {
  TempDir tmp;
  const std::string path = tmp / "snapshot.json";
  SnapshotCache cache(path, 0, [] { return int64_t{0}; });
  SnapshotCache::View v = cache.get();
  EXPECT_FALSE(v.snapshot);
  EXPECT_NE(v.problem.find("no pool snapshot at " + path), std::string::npos);

  api::PoolSnapshot s = sample();
  ASSERT_TRUE(api::write_snapshot(path, s));
  v = cache.get();
  ASSERT_TRUE(v.snapshot) << v.problem;
  EXPECT_EQ(v.snapshot->gpu.total, 8u);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(cache.get().snapshot);
  EXPECT_EQ(cache.reads(), 1u);

  s.gpu.total = 16;
  ASSERT_TRUE(api::write_snapshot(path, s));  // a new inode: changed even within one tick
  v = cache.get();
  ASSERT_TRUE(v.snapshot);
  EXPECT_EQ(v.snapshot->gpu.total, 16u);
  EXPECT_EQ(cache.reads(), 2u);

  tmp.write("snapshot.json", "garbage");
  v = cache.get();
  EXPECT_FALSE(v.snapshot);
  EXPECT_NE(v.problem.find("not valid JSON"), std::string::npos);
}

TEST(SnapshotCache, OldSnapshotsCountAsMissing) {
  TempDir tmp;
  const std::string path = tmp / "snapshot.json";
  int64_t now = sample().generated_ms + 30'000;
  SnapshotCache cache(path, 60, [&now] { return now; });
  ASSERT_TRUE(api::write_snapshot(path, sample()));
  EXPECT_TRUE(cache.get().snapshot);
  now += 60'000;
  SnapshotCache::View v = cache.get();
  EXPECT_FALSE(v.snapshot);
  EXPECT_NE(v.problem.find("is 90 s old (JobSubmitSnapshotMaxAge=60)"), std::string::npos)
      << v.problem;
}

TEST(SubmitConfig, DefaultsWithoutFile) {
  TempDir tmp;
  Expected<SubmitConfig> c = read_submit_config(tmp / "none.conf");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->snapshot_path, "/var/lib/slurm-composer/snapshot.json");
  EXPECT_FALSE(c->refuse_without_snapshot);
}

TEST(SubmitConfig, ReadsOurKeysAndIgnoresComposerdsOwn) {
  TempDir tmp;
  tmp.write("composer.conf",
            "# composerd\nListenPort=6830\nstatedir = /srv/composer  # comment\n"
            "JobSubmitSnapshotMissing=refuse\nJobSubmitSnapshotMaxAge=300\n");
  Expected<SubmitConfig> c = read_submit_config(tmp / "composer.conf");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->snapshot_path, "/srv/composer/snapshot.json");
  EXPECT_TRUE(c->refuse_without_snapshot);
  EXPECT_EQ(c->snapshot_max_age_s, 300u);
  tmp.write("composer.conf", "StateDir=/srv/composer\nSnapshotFile=/etc/snap.json\n");
  c = read_submit_config(tmp / "composer.conf");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->snapshot_path, "/etc/snap.json");
}

TEST(SubmitConfig, BadValuesNameFileLineAndKey) {
  TempDir tmp;
  tmp.write("composer.conf", "StateDir=/x\nJobSubmitSnapshotMissing=maybe\n");
  Expected<SubmitConfig> c = read_submit_config(tmp / "composer.conf");
  ASSERT_FALSE(c);
  // The sentences of composerd's reader: file, line, key and rule.
  EXPECT_EQ(
      c.error().message,
      tmp / "composer.conf" + " line 2: JobSubmitSnapshotMissing=maybe: expected accept or refuse");
  tmp.write("composer.conf", "SnapshotFile=relative.json\n");
  c = read_submit_config(tmp / "composer.conf");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("SnapshotFile=relative.json: expected an absolute path"),
            std::string::npos);
}

// Strict about its own keys: composerd leaves every JobSubmit* key to this reader, so a typo
// is refused here; and the keys both read are held to composerd's rules.
TEST(SubmitConfig, RefusesWhatComposerdWouldAndUnknownJobSubmitKeys) {
  for (const auto& [text, needle] : std::vector<std::pair<std::string, std::string>>{
           {"JobSubmitSnapshotMising=refuse\n",
            "line 1: unknown key 'JobSubmitSnapshotMising' (the job_submit plugin's keys: "
            "JobSubmitSnapshotMissing, JobSubmitSnapshotMaxAge)"},
           {"JobSubmitSnapshotMaxAge=60\nJobSubmitSnapshotMaxAge=70\n",
            "line 2: 'JobSubmitSnapshotMaxAge' is set twice"},
           {"StateDir=/a\nstatedir=/b\n", "line 2: 'statedir' is set twice"},
           {"StateDir=/a SnapshotFile=/b\n", "line 1: 'StateDir' takes one value"},
           {"StateDir=relative\n", "line 1: StateDir=relative: expected an absolute path"},
           {"JobSubmitSnapshotMaxAge=-1\n",
            "line 1: JobSubmitSnapshotMaxAge=-1: expected a whole number from 0 to 31536000 "
            "(seconds; 0 turns the age check off)"},
           {"just words\n", "line 1: 'just' is not of the form Key=Value"},
       }) {
    Expected<SubmitConfig> c = parse_submit_config(text, "/etc/slurm/composer.conf");
    ASSERT_FALSE(c) << text;
    EXPECT_NE(c.error().message.find("/etc/slurm/composer.conf " + needle), std::string::npos)
        << c.error().message;
  }
}

// Lax about composerd's own keys: its whole example file reads, with composerd's defaults.
TEST(SubmitConfig, ReadsComposerdsExampleFile) {
  Expected<SubmitConfig> c =
      read_submit_config(std::string(COMPOSER_SOURCE_DIR) + "/contrib/composer.conf.example");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->snapshot_path, "/var/lib/slurm-composer/snapshot.json");
  c = parse_submit_config("NodeName=n[1-2] Zones=z1 Colour=red\nListenPort=http\n", "x.conf");
  ASSERT_TRUE(c) << c.error();
  EXPECT_FALSE(c->refuse_without_snapshot);
}

}  // namespace
}  // namespace composer::slurm
