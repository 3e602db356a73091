#include "composer/cli/slurm_config_command.h"

#include <gtest/gtest.h>

#include <sstream>

#include "composer/common/units.h"

namespace composer::cli {
namespace {

TEST(SlurmConfig, LicensesCountSchedulableDevicesAndGresFollowSlots) {
  std::vector<PoolRow> pool = {
      {.type = DeviceType::kGpu,
       .model = "A100",
       .zone = "z1",
       .total = 8,
       .free = 6,
       .attached = 1,
       .drained = 0,
       .failed = 1},
      {.type = DeviceType::kGpu,
       .model = "H100",
       .zone = "z2",
       .total = 4,
       .free = 3,
       .attached = 0,
       .drained = 1,
       .failed = 0},
      {.type = DeviceType::kMem,
       .model = "CXL",
       .zone = "z1",
       .total = 4,
       .free = 4,
       .total_bytes = 4 * 64 * kGiB,
       .free_bytes = 4 * 64 * kGiB,
       .schedulable_bytes = 4 * 64 * kGiB},
      {.type = DeviceType::kNvme,
       .model = "P5620",
       .zone = "z2",
       .total = 2,
       .free = 2,
       .total_bytes = 2 * kTiB},
  };
  std::vector<Host> hosts = {
      {.node = "n1",
       .fabric_id = "h1",
       .zones = {"z1"},
       .gpu_slots = 8,
       .mem_slots = 4,
       .nvme_slots = 2},
      {.node = "n2",
       .fabric_id = "h2",
       .zones = {"z1"},
       .gpu_slots = 8,
       .mem_slots = 4,
       .nvme_slots = 2},
      {.node = "big",
       .fabric_id = "h3",
       .zones = {"z2"},
       .gpu_slots = 16,
       .mem_slots = 8,
       .nvme_slots = 4},
  };
  const std::string text = slurm_config_text(slurm_config(pool, hosts));
  // 10 schedulable GPUs (the failed and the drained one are left out), 256 GiB, 2 drives;
  // per model the same rule: 7 A100 and 3 H100.
  EXPECT_NE(text.find("Licenses=fabric_gpu:10,fabric_mem:256,fabric_nvme:2,fabric_gpu_a100:7,"
                      "fabric_gpu_h100:3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("#AccountingStorageTRES=license/fabric_gpu,license/fabric_mem,"
                      "license/fabric_nvme,license/fabric_gpu_a100,license/fabric_gpu_h100,"
                      "gres/cgpu,gres/cmem,gres/cnvme\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("hold_fabric_nvme, hold_fabric_gpu_a100, hold_fabric_gpu_h100 (what"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("GresTypes=cgpu,cmem,cnvme\n"), std::string::npos);
  EXPECT_NE(text.find("NodeName=n1,n2 Name=cgpu Count=8\n"), std::string::npos) << text;
  // The memory attach slots too: Slurm puts no more blocks on a node than it can attach.
  EXPECT_NE(text.find("NodeName=n1,n2 Name=cmem Count=4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("NodeName=big Name=cnvme Count=4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Gres=cgpu:16,cmem:8,cnvme:4"), std::string::npos) << text;
}

TEST(SlurmConfig, ParsableRowsAndJsonCarryTheSameSettings) {
  std::vector<PoolRow> pool = {
      {.type = DeviceType::kGpu, .model = "A100", .zone = "z1", .total = 4, .free = 4},
      {.type = DeviceType::kMem,
       .model = "CXL",
       .zone = "z1",
       .total = 2,
       .free = 2,
       .total_bytes = 2 * 64 * kGiB,
       .schedulable_bytes = 2 * 64 * kGiB}};
  std::vector<Host> hosts = {{.node = "n1",
                              .fabric_id = "h1",
                              .zones = {"z1"},
                              .gpu_slots = 4,
                              .mem_slots = 2,
                              .nvme_slots = 0}};
  const SlurmConfig config = slurm_config(pool, hosts);
  std::ostringstream out;
  slurm_config_table(config).print(out, Format::kParsable, true);
  EXPECT_EQ(out.str(),
            "FILE|NODES|SETTING\n"
            "slurm.conf||Licenses=fabric_gpu:4,fabric_mem:128,fabric_nvme:0,fabric_gpu_a100:4\n"
            "slurm.conf||GresTypes=cgpu,cmem,cnvme\n"
            "slurm.conf||JobSubmitPlugins=composer\n"
            "slurm.conf|n1|Gres=cgpu:4,cmem:2,cnvme:0\n"
            "gres.conf|n1|Name=cgpu Count=4\n"
            "gres.conf|n1|Name=cmem Count=2\n"
            "gres.conf|n1|Name=cnvme Count=0\n"
            "slurm.conf||PrologFlags=Alloc\n"
            "slurm.conf||SchedulerParameters=bf_licenses\n"
            "slurm.conf||AccountingStorageTRES=license/fabric_gpu,license/fabric_mem,"
            "license/fabric_nvme,license/fabric_gpu_a100,gres/cgpu,gres/cmem,gres/cnvme\n"
            "composerd||reservations hold_fabric_gpu, hold_fabric_mem, hold_fabric_nvme, "
            "hold_fabric_gpu_a100 (what the pool cannot serve) and the policy's blocker and cap "
            "holds (composerctl policy apply)\n");
  const Json::Value json = slurm_config_to_json(config);
  EXPECT_EQ(json["licenses"]["fabric_mem"].asUInt64(), 128u);
  EXPECT_EQ(json["licenses"]["fabric_gpu_a100"].asUInt64(), 4u);
  EXPECT_EQ(json["gres_types"][1].asString(), "cmem");
  EXPECT_EQ(json["gres_types"][2].asString(), "cnvme");
  EXPECT_EQ(json["job_submit_plugins"][0].asString(), "composer");
  EXPECT_EQ(json["nodes"][0]["cgpu"].asUInt(), 4u);
  EXPECT_EQ(json["nodes"][0]["cmem"].asUInt(), 2u);
  EXPECT_EQ(json["nodes"][0]["cnvme"].asUInt(), 0u);
  EXPECT_EQ(json["scheduler_parameters"].asString(), "bf_licenses");
  EXPECT_EQ(json["prolog_flags"].asString(), "Alloc");
  EXPECT_NE(json["managed_by_composerd"].asString().find("hold_fabric_gpu"), std::string::npos);
  // The text is built from the same settings.
  EXPECT_NE(slurm_config_text(config).find("NodeName=n1 Name=cgpu Count=4\n"), std::string::npos);
  EXPECT_NE(slurm_config_text(config).find("\nPrologSlurmctld=/usr/sbin/composer-slurmctld\n"
                                           "EpilogSlurmctld=/usr/sbin/composer-slurmctld\n"),
            std::string::npos);
  EXPECT_NE(slurm_config_text(config).find("\nSchedulerParameters=bf_licenses\n"),
            std::string::npos);
  EXPECT_NE(slurm_config_text(config).find("composerd manages at run time (SlurmSync=yes)"),
            std::string::npos);
}

}  // namespace
}  // namespace composer::cli
