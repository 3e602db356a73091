// The stand-in scontrol of the integration tests (fake_scontrol/scontrol, a script with state
// in a directory): what a composerd with SlurmSync=yes talks to where no Slurm runs.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "composer/test_support/temp_dir.h"

namespace composer::testing {

// A directory of state for the stand-in scontrol (fake_scontrol/scontrol: licenses, the
// reservations it holds, the calls it got), named in FAKE_SLURM in the environment composerd
// inherits; a composerd started after this runs SlurmSync=yes against it with
// fake_slurm_conf().
inline std::string fake_slurm_dir(const test_support::TempDir& dir) {
  const std::string slurm = dir.file("slurm");
  std::filesystem::create_directories(slurm);
  std::ofstream(slurm + "/licenses")
      << "LicenseName=fabric_gpu Total=16 Used=0 Free=16 Reserved=0 Remote=no\n"
         "LicenseName=fabric_mem Total=1024 Used=0 Free=1024 Reserved=0 Remote=no\n"
         "LicenseName=fabric_nvme Total=4 Used=0 Free=4 Reserved=0 Remote=no\n"
         "LicenseName=matlab Total=5 Used=0 Free=5 Reserved=0 Remote=no\n";
  setenv("FAKE_SLURM", slurm.c_str(), 1);
  return slurm;
}
inline std::string fake_slurm_conf() {
  return "SlurmSync=yes\nSlurmScontrol=" + std::string(FAKE_SCONTROL_DIR) +
         "/scontrol\nReconcileInterval=1\n";
}

}  // namespace composer::testing
