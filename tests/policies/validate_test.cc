#include "composer/policies/validate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "composer/common/units.h"
#include "policy_fixture.h"

namespace composer::policies {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::kDayNight;
using testing::kPool;
using testing::parse_ok;

// A cap license's name is read back as it is written; other names are not caps.
TEST(CapLicenseName, IsReadBackAsItIsWritten) {
  for (DeviceType t : kAllDeviceTypes) {
    auto back = parse_cap_license_name(cap_license_name("night_train", t));
    ASSERT_TRUE(back);
    EXPECT_EQ(back->first, "night_train");
    EXPECT_EQ(back->second, t);
  }
  for (const char* other : {"fabric_gpu", "_gpu_cap", "training_gpu", "matlab", "x_disk_cap"}) {
    EXPECT_FALSE(parse_cap_license_name(other)) << other;
  }
}

// A model's license: the pool license, '_' and the model in lower case.
TEST(ModelLicenseName, IsThePoolLicenseAndTheModelInLowerCase) {
  EXPECT_EQ(model_license_name("H200"), "fabric_gpu_h200");
  EXPECT_EQ(model_license_name("A100-80G"), "fabric_gpu_a100-80g");
  EXPECT_EQ(model_license_name("mi300x.v2"), "fabric_gpu_mi300x.v2");
  // Not a cap license, whatever the model is called.
  EXPECT_FALSE(parse_cap_license_name(model_license_name("x_gpu_cap_")));
  // Sized to the pool, plain or remote; caps and a site's own licenses are not.
  for (const char* ours : {"fabric_gpu", "fabric_mem", "fabric_nvme@composer", "fabric_gpu_h200",
                           "fabric_gpu_a100-80g@fab"}) {
    EXPECT_TRUE(is_pool_license(ours)) << ours;
  }
  for (const char* other : {"fabric_gpu_", "fabric_disk", "training_gpu_cap", "matlab@flexlm",
                            "fabric", "fabric_mem_x"}) {
    EXPECT_FALSE(is_pool_license(other)) << other;
  }
  EXPECT_EQ(remote_license_name(model_license_name("H200"), "composer"),
            "fabric_gpu_h200@composer");
}

// The one rule for what Slurm may hand out: free or attached by composerd; never failed,
// drained or foreign. Memory in whole GiB of its schedulable bytes, rounded down; per GPU
// model the same count, over the rows of every zone and fabric that hold the model.
TEST(PoolTotals, CountOnlyWhatThePoolCanServe) {
  const std::vector<PoolRow> rows = {
      {.type = DeviceType::kGpu,
       .model = "H200",
       .zone = "fabric-a/z1",
       .total = 8,
       .free = 3,
       .attached = 2,
       .drained = 1,
       .failed = 1,
       .foreign = 1},
      {.type = DeviceType::kGpu, .model = "H200", .zone = "fabric-b/z1", .total = 2, .free = 2},
      {.type = DeviceType::kGpu, .model = "A100", .zone = "fabric-b/z1", .total = 4, .failed = 4},
      {.type = DeviceType::kGpu,
       .model = "l40s",
       .zone = "fabric-b/z2",
       .total = 2,
       .free = 1,
       .drained = 1},
      {.type = DeviceType::kMem,
       .model = "CXL",
       .zone = "fabric-a/z1",
       .total = 3,
       .free = 2,
       .drained = 1,
       .total_bytes = 3 * 64 * kGiB,
       .free_bytes = 2 * 64 * kGiB,
       .schedulable_bytes = 2 * 64 * kGiB - 1},
      {.type = DeviceType::kNvme,
       .model = "P5620",
       .zone = "fabric-a/z1",
       .total = 2,
       .free = 1,
       .attached = 1,
       .foreign = 0},
      {.type = DeviceType::kNvme,
       .model = "P5620",
       .zone = "fabric-a/z2",
       .total = 1,
       .foreign = 1},
  };
  const PoolSize pool = PoolSize::from_rows(rows);
  EXPECT_EQ(pool.gpus, 5u + 2u + 0u + 1u);
  EXPECT_EQ(pool.mem_gib, 127u);  // 128 GiB less a byte: rounded down
  EXPECT_EQ(pool.nvme, 2u);
  EXPECT_EQ(pool.mem_block_bytes, 64 * kGiB);
  const std::map<std::string, uint64_t> models = model_license_sizes(rows);
  EXPECT_EQ(models, (std::map<std::string, uint64_t>{
                        {"fabric_gpu_a100", 0}, {"fabric_gpu_h200", 7}, {"fabric_gpu_l40s", 1}}));
  // Every model license adds up to the pool license.
  uint64_t sum = 0;
  for (const auto& [name, n] : models) sum += n;
  EXPECT_EQ(sum, pool.gpus);
  // Models that differ only in case share a license; rows without a model have none.
  EXPECT_EQ(model_license_sizes({{.type = DeviceType::kGpu, .model = "H200", .total = 1, .free = 1},
                                 {.type = DeviceType::kGpu, .model = "h200", .total = 1, .free = 1},
                                 {.type = DeviceType::kGpu, .total = 3, .free = 3}}),
            (std::map<std::string, uint64_t>{{"fabric_gpu_h200", 2}}));
}

TEST(Validation, TheDayNightPolicyIsClean) {
  const Validation v = validate(parse_ok(kDayNight), kPool);
  EXPECT_TRUE(v.ok()) << v.to_string();
  EXPECT_TRUE(v.warnings.empty()) << v.to_string();
}

TEST(Validation, CapAbovePool) {
  const Validation v = validate(
      parse_ok("Class=a\nDefaultClass=a\nLimit=a Window=Default Gpus=20 Mem=2T\n", "p.conf"),
      kPool);
  EXPECT_THAT(v.errors,
              ElementsAre("p.conf line 3: Limit=a Window=Default Gpus=20 is above the pool's 16 "
                          "GPUs: a cap may be at most the pool size (or write a share such as 50%)",
                          "p.conf line 3: Limit=a Window=Default Mem=2048G is above the pool's "
                          "1024 GiB of memory: a cap may be at most the pool size (or write a "
                          "share such as 50%)"));
}

TEST(Validation, OverlappingWindowsThatDisagreeAreRefused) {
  const Validation v = validate(parse_ok("TimeZone=Europe/Berlin\n"
                                         "Window=night Days=Mon-Fri Start=20:00 End=08:00\n"
                                         "Window=weekend Days=Sat,Sun Start=00:00 End=24:00\n"
                                         "Class=a\nDefaultClass=a\n"
                                         "Limit=a Window=night Gpus=4\n"
                                         "Limit=a Window=weekend Gpus=8\n",
                                         "p.conf"),
                                kPool);
  ASSERT_EQ(v.errors.size(), 1u) << v.to_string();
  EXPECT_EQ(v.errors[0],
            "p.conf line 3: Window=weekend overlaps Window=night (line 2) from Sat 00:00 local "
            "time, and the two give class a different caps (GPUs: 4 GPUs in 'night', 8 GPUs in "
            "'weekend'): give both windows the same Limit lines for every class, or make them "
            "not overlap");
}

TEST(Validation, OverlappingWindowsThatAgreeAreFine) {
  const Validation v = validate(parse_ok("Window=night Days=Mon-Fri Start=20:00 End=08:00\n"
                                         "Window=weekend Days=Sat,Sun Start=00:00 End=24:00\n"
                                         "Class=a\nDefaultClass=a\n"
                                         "Limit=a Window=night Gpus=25%\n"
                                         "Limit=a Window=weekend Gpus=4\n"),
                                kPool);
  EXPECT_TRUE(v.ok()) << v.to_string();
}

TEST(Validation, AClassThatCanNeverRun) {
  const Validation v = validate(parse_ok("Class=a\nClass=b\nDefaultClass=a\n"
                                         "Limit=b Window=Default Gpus=0 Mem=0 Nvme=0\n",
                                         "p.conf"),
                                kPool);
  ASSERT_EQ(v.errors.size(), 1u) << v.to_string();
  EXPECT_EQ(v.errors[0],
            "p.conf line 2: class b can never run: its caps are 0 for GPUs, memory and NVMe "
            "drives in every window; raise one of them somewhere or remove the class");
}

TEST(Validation, WarningsForLikelyMistakes) {
  const Validation v = validate(parse_ok("Window=all Start=00:00 End=24:00\n"
                                         "Window=unused Days=Sat Start=01:00 End=02:00\n"
                                         "Class=a\n"
                                         "Limit=a Window=all Nvme=0 Gpus=2\n"
                                         "Limit=a Window=unused Nvme=0 Gpus=2\n"
                                         "Limit=a Window=Default Gpus=1\n",
                                         "p.conf"),
                                kPool);
  EXPECT_TRUE(v.ok()) << v.to_string();
  EXPECT_THAT(v.warnings,
              ElementsAre("p.conf line 3: class a can never get NVMe drives: its cap on them is 0 "
                          "in every window",
                          "p.conf line 6: Limit=a Window=Default never applies: the windows "
                          "cover the whole week",
                          "p.conf: no DefaultClass: a job without --workload whose partition, "
                          "QOS and account match no class is refused"));
  const Validation unused = validate(
      parse_ok("Window=w Start=01:00 End=02:00\nClass=a\nDefaultClass=a\n", "p.conf"), kPool);
  EXPECT_THAT(unused.warnings,
              ElementsAre(HasSubstr("p.conf line 1: no Limit line names Window=w")));
}

TEST(Validation, PlacementRulesAgainstTheDomainsAndCaps) {
  const std::vector<std::string> levels = {"enclosure", "appliance"};
  const std::map<std::string, std::set<std::string>> domains = {
      {"enclosure", {"enc1", "enc2", "enc3"}}, {"appliance", {"app-a", "app-b"}}};
  Validation v =
      validate_placement(parse_ok("Class=a\nClass=b\nClass=c\n"
                                  "Placement=a Rule=spread Level=appliance Count=2 Type=mem\n"
                                  "Placement=b Rule=avoid-shared Level=enclosure\n"
                                  "Placement=c Rule=pack\n",
                                  "p.conf"),
                         levels, domains);
  EXPECT_TRUE(v.ok()) << v.to_string();

  v = validate_placement(parse_ok("Class=a\nClass=b\nClass=c\n"
                                  "Placement=a Rule=spread Level=appliance Count=3\n"
                                  "Placement=b Rule=avoid-shared Level=rack\n"
                                  "Placement=c Rule=spread Level=enclosure Count=3\n"
                                  "Limit=c Window=Default Gpus=2\n",
                                  "p.conf"),
                         levels, domains);
  EXPECT_THAT(
      v.errors,
      ElementsAre("p.conf line 4: Placement=a (spread appliance 3): the pool has 2 appliance "
                  "domains, so a spread over 3 can never be met",
                  "p.conf line 5: Placement=b (avoid-shared rack): level rack is not declared by "
                  "composer.conf's DomainLevels= (declared: enclosure, appliance)",
                  "p.conf line 6: Placement=c (spread enclosure 3): Limit=c Window=Default (line "
                  "7) caps the class at 2 GPUs, fewer than the 3 domains a job's GPUs must "
                  "spread over"));
}

// The pool hands memory out in whole blocks: a request holds ceil(size / block) attach slots
// and those blocks' GiB of the licenses, whatever it asked for.
TEST(MemCharge, WholeBlocksPerNode) {
  constexpr uint64_t kBlock = 64 * kGiB;
  EXPECT_EQ(mem_charge(0, kBlock), (MemCharge{0, 0}));
  EXPECT_EQ(mem_charge(1, kBlock), (MemCharge{1, 64}));
  EXPECT_EQ(mem_charge(kGiB, kBlock), (MemCharge{1, 64}));
  EXPECT_EQ(mem_charge(kBlock, kBlock), (MemCharge{1, 64}));
  EXPECT_EQ(mem_charge(kBlock + 1, kBlock), (MemCharge{2, 128}));
  EXPECT_EQ(mem_charge(200 * kGiB, kBlock), (MemCharge{4, 256}));
  EXPECT_EQ(mem_charge(kMaxMemBytes, kBlock), (MemCharge{16384, 1024 * 1024}));
  // A block that is not a whole number of GiB: the blocks' size, rounded up.
  EXPECT_EQ(mem_charge(kGiB, kGiB + kGiB / 2), (MemCharge{1, 2}));
  EXPECT_EQ(mem_charge(2 * kGiB, kGiB + kGiB / 2), (MemCharge{2, 3}));
  // A block larger than any request, even one near the top of the range.
  EXPECT_EQ(mem_charge(kGiB, UINT64_MAX), (MemCharge{1, UINT64_MAX / kGiB + 1}));
  // No block size known (no memory in the pool, an old snapshot): the request, in GiB.
  EXPECT_EQ(mem_charge(100 * kGiB + 1, 0), (MemCharge{1, 101}));
}

// The block size is the largest device among those composerd may hand out; a row wholly held
// outside composerd does not count.
TEST(MemCharge, BlockSizeOfThePool) {
  const std::vector<PoolRow> rows = {
      {.type = DeviceType::kMem, .model = "A", .total = 4, .free = 4, .total_bytes = 4 * 64 * kGiB},
      {.type = DeviceType::kMem, .model = "B", .total = 1, .foreign = 1, .total_bytes = 512 * kGiB},
      {.type = DeviceType::kMem,
       .model = "C",
       .total = 2,
       .failed = 2,
       .total_bytes = 2 * 16 * kGiB},
      {.type = DeviceType::kNvme, .total = 1, .free = 1, .total_bytes = 4096 * kGiB}};
  EXPECT_EQ(PoolSize::from_rows(rows).mem_block_bytes, 64 * kGiB);
  EXPECT_EQ(largest_device_bytes(rows, DeviceType::kNvme), 4096 * kGiB);
  EXPECT_EQ(PoolSize::from_rows({}).mem_block_bytes, 0u);
}

}  // namespace
}  // namespace composer::policies
