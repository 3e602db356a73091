// host_identity_check itself, so that the check a GPU machine runs is known to see what it
// should: on a fake host (test_support::FakeHost, laid out as the kernel and the NVIDIA driver
// lay theirs out) with two NVIDIA GPUs whose device nodes the test makes real character devices
// (root: mknod 195:N), every check holds; against an nvidia-smi list with another UUID, or
// without one of the GPUs, it fails; on a host without NVIDIA GPUs it says so and skips (77).
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <gtest/gtest.h>

#include "composer/common/subprocess.h"
#include "composer/test_support/fake_host.h"
#include "composer/test_support/temp_dir.h"

namespace composer {
namespace {

using test_support::FakeHost;
using test_support::FakePciFunction;
using test_support::nvidia_gpu;

RunResult probe(const std::string& root, const std::string& smi = "",
                const std::string& nvml_script = "") {
  RunOptions o;
  o.argv = {HOST_IDENTITY_CHECK, "--root", root};
  if (!nvml_script.empty()) {
    o.argv.push_back("--nvml");
    o.argv.push_back(FAKE_NVML_LIBRARY);
    o.env.push_back("FAKE_NVML_SCRIPT=" + nvml_script);
  }
  if (!smi.empty()) {
    o.argv.push_back("--nvidia-smi");
    o.argv.push_back(smi);
  }
  o.with_stderr = true;
  o.timeout_ms = 30000;
  Expected<RunResult> r = run_program(o);
  EXPECT_TRUE(r) << r.error();
  return r ? *r : RunResult{};
}

TEST(HostIdentityCheck, HoldsOnAHostLaidOutAsTheKernelAndTheDriverLayItOut) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make the GPUs' character devices";
  test_support::TempDir tmp("composer-identity");
  const std::string root = (tmp.path() / "host").string();
  FakeHost host(tmp.path() / "host");
  EXPECT_EQ(probe(root).status, 77) << "no NVIDIA GPU yet";

  host.add_present(nvidia_gpu("0000:41:00.0", "GPU-11111111-2222-3333-4444-555555555555", 0));
  host.add_present(nvidia_gpu("0000:c1:00.0", "GPU-66666666-7777-8888-9999-000000000000", 1));
  for (int minor : {0, 1}) {
    const std::string node = host.dev_root() + "/nvidia" + std::to_string(minor);
    std::filesystem::remove(node);
    ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0600, makedev(195, minor)), 0) << node;
  }
  const RunResult ok = probe(root);
  std::cout << ok.output;
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_NE(ok.output.find("0000:c1:00.0 0x10de:0x20b5 uuid GPU-66666666"), std::string::npos)
      << ok.output;
  EXPECT_NE(ok.output.find("/nvidia1 c 195:1 rwm"), std::string::npos) << ok.output;

  const std::string smi = (tmp.path() / "smi.csv").string();
  std::ofstream(smi) << "00000000:41:00.0, GPU-11111111-2222-3333-4444-555555555555\n"
                        "00000000:C1:00.0, GPU-66666666-7777-8888-9999-000000000000\n";
  const RunResult same = probe(root, smi);
  EXPECT_EQ(same.status, 0) << same.output;
  std::ofstream(smi) << "00000000:41:00.0, GPU-11111111-2222-3333-4444-555555555555\n"
                        "00000000:C1:00.0, GPU-00000000-0000-0000-0000-000000000000\n";
  const RunResult other = probe(root, smi);
  EXPECT_EQ(other.status, 1) << other.output;
  EXPECT_NE(other.output.find("0000:c1:00.0: nvidia-smi says GPU-00000000"), std::string::npos)
      << other.output;
  std::ofstream(smi) << "00000000:41:00.0, GPU-11111111-2222-3333-4444-555555555555\n"
                        "00000000:C1:00.0, GPU-66666666-7777-8888-9999-000000000000\n"
                        "00000000:E1:00.0, GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee\n";
  const RunResult missing = probe(root, smi);
  EXPECT_EQ(missing.status, 1) << missing.output;
  EXPECT_NE(missing.output.find("nvidia-smi lists 0000:e1:00.0"), std::string::npos)
      << missing.output;

  // NVML through the health check's dlopen path (the fake libnvidia-ml): each GPU's UUID there
  // must be the driver's, and its health is read and printed.
  const std::string script = (tmp.path() / "nvml").string();
  std::ofstream(script)
      << "0000:41:00.0 ok\n0000:41:00.0 uuid GPU-11111111-2222-3333-4444-555555555555\n"
         "0000:c1:00.0 xid 79\n0000:c1:00.0 uuid GPU-66666666-7777-8888-9999-000000000000\n";
  const RunResult nvml = probe(root, "", script);
  EXPECT_EQ(nvml.status, 0) << nvml.output;
  EXPECT_NE(nvml.output.find("health (NVML and the bus): ok"), std::string::npos) << nvml.output;
  EXPECT_NE(nvml.output.find("health (NVML and the bus): BAD: NVML reports critical XID 79"),
            std::string::npos)
      << nvml.output;
  std::ofstream(script) << "0000:41:00.0 ok\n0000:c1:00.0 ok\n";
  const RunResult wrong = probe(root, "", script);
  EXPECT_EQ(wrong.status, 1) << wrong.output;
  EXPECT_NE(wrong.output.find("0000:41:00.0: NVML gives UUID GPU-fake-0000:41:00.0 at its address"),
            std::string::npos)
      << wrong.output;
}

}  // namespace
}  // namespace composer
