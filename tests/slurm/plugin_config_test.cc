#include "composer/slurm/plugin_config.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace composer::slurm {
namespace {

TEST(PlugstackArgs, DefaultsWithoutArguments) {
  Expected<SpankConfig> c = parse_plugstack_args({});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->sysfs_root, "/sys");
  EXPECT_EQ(c->proc_root, "/proc");
  EXPECT_EQ(c->host_check, HostCheck::kWait);
  EXPECT_EQ(c->on_unavailable, OnUnavailable::kDrain);
  EXPECT_EQ(c->compose_on, ComposeOn::kController);
  EXPECT_EQ(c->fence, Fence::kAuto);
  EXPECT_EQ(c->devices_cgroup, "/sys/fs/cgroup/devices");
  EXPECT_EQ(c->unified_cgroup, "") << "found where it is mounted";
  Expected<SpankConfig> node = parse_plugstack_args({"compose=node"});
  ASSERT_TRUE(node) << node.error();
  EXPECT_EQ(node->compose_on, ComposeOn::kNode);
}

TEST(PlugstackArgs, ParsesEveryArgument) {
  Expected<SpankConfig> c = parse_plugstack_args(
      {"server=http://10.0.0.1:6830", "timeout=30", "connect_timeout=2", "retries=5",
       "backoff_ms=250", "state_dir=/var/run/composer/", "munge_socket=/run/m/munge.socket",
       "sysfs_root=/tmp/fake/sys", "proc_root=/tmp/fake/proc", "host_check=rescan", "host_wait=5",
       "busy_wait=0", "on_unavailable=fail_job", "fence=required", "devices_cgroup=/cg/devices/",
       "cpuset_cgroup=/cg/cpuset", "unified_cgroup=/cg/v2"});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->server, "http://10.0.0.1:6830");
  EXPECT_EQ(c->timeout_s, 30u);
  EXPECT_EQ(c->connect_timeout_s, 2u);
  EXPECT_EQ(c->retries, 5u);
  EXPECT_EQ(c->backoff_ms, 250u);
  EXPECT_EQ(c->state_dir, "/var/run/composer");
  EXPECT_EQ(c->munge_socket, "/run/m/munge.socket");
  EXPECT_EQ(c->sysfs_root, "/tmp/fake/sys");
  EXPECT_EQ(c->proc_root, "/tmp/fake/proc");
  EXPECT_EQ(c->host_check, HostCheck::kRescan);
  EXPECT_EQ(c->host_wait_s, 5u);
  EXPECT_EQ(c->busy_wait_s, 0u);
  EXPECT_EQ(c->on_unavailable, OnUnavailable::kFailJob);
  EXPECT_EQ(c->fence, Fence::kRequired);
  EXPECT_EQ(c->devices_cgroup, "/cg/devices");
  EXPECT_EQ(c->cpuset_cgroup, "/cg/cpuset");
  EXPECT_EQ(c->unified_cgroup, "/cg/v2");
}

TEST(PlugstackArgs, GpuHealthAndGpuStackArguments) {
  Expected<SpankConfig> d = parse_plugstack_args({});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->gpu_health, GpuHealth::kNvml);
  EXPECT_EQ(d->nvml_library, "libnvidia-ml.so.1");
  EXPECT_EQ(d->dcgm_job_dir, "");
  EXPECT_EQ(d->gpu_hook, "");
  Expected<SpankConfig> c =
      parse_plugstack_args({"gpu_health=bus", "nvml_library=/opt/nvidia/lib/libnvidia-ml.so.1",
                            "dcgm_job_dir=/run/dcgm-job-map/", "gpu_hook=/etc/slurm/gpu-hook"});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->gpu_health, GpuHealth::kBus);
  EXPECT_EQ(c->nvml_library, "/opt/nvidia/lib/libnvidia-ml.so.1");
  EXPECT_EQ(c->dcgm_job_dir, "/run/dcgm-job-map");
  EXPECT_EQ(c->gpu_hook, "/etc/slurm/gpu-hook");
  for (const auto& [arg, why] : std::vector<std::pair<std::string, std::string>>{
           {"gpu_health=dcgm", "expected nvml (the bus and NVML), bus (the bus only) or off"},
           {"nvml_library=lib/libnvidia-ml.so.1", "expected a library file name"},
           {"nvml_library=", "expected a library file name"},
           {"dcgm_job_dir=run/map", "dcgm_job_dir"},
           {"gpu_hook=hook.sh", "gpu_hook"}}) {
    Expected<SpankConfig> bad = parse_plugstack_args({arg});
    ASSERT_FALSE(bad) << arg;
    EXPECT_NE(bad.error().message.find("plugstack argument '" + arg + "'"), std::string::npos)
        << bad.error();
    EXPECT_NE(bad.error().message.find(why), std::string::npos) << bad.error();
  }
}

TEST(PlugstackArgs, ServerListsForActiveAndStandbyComposerd) {
  Expected<SpankConfig> c = parse_plugstack_args(
      {"server=http://ctl1:6830,http://ctl2:6830",
       "controller_server=unix:/run/composer/composerd.sock,http://ctl2:6830"});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->server, "http://ctl1:6830,http://ctl2:6830");
  EXPECT_EQ(c->controller_server, "unix:/run/composer/composerd.sock,http://ctl2:6830");
  for (const char* arg : {"server=http://ctl1:6830,", "server=http://ctl1:6830,ctl2:6830",
                          "controller_server=http://a:1,http://A:1/"}) {
    Expected<SpankConfig> bad = parse_plugstack_args({arg});
    ASSERT_FALSE(bad) << arg;
    EXPECT_EQ(
        bad.error().message.rfind(std::string("plugstack argument '") + arg + "': server list", 0),
        0u)
        << bad.error();
  }
}

TEST(PlugstackArgs, UnknownArgumentIsNamed) {
  Expected<SpankConfig> c = parse_plugstack_args({"server=http://h:1", "colour=blue"});
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("'colour=blue'"), std::string::npos) << c.error();
  EXPECT_NE(c.error().message.find("unknown argument 'colour'"), std::string::npos);
  EXPECT_NE(c.error().message.find("sysfs_root"), std::string::npos) << "lists the known keys";
}

TEST(PlugstackArgs, BadValuesAreNamed) {
  struct Case {
    const char* arg;
    const char* rule;
  };
  for (const Case& k :
       {Case{"timeout=0", "from 1 to 3600"}, Case{"timeout=abc", "from 1 to"},
        Case{"retries=100", "from 0 to 20"}, Case{"state_dir=relative/dir", "absolute path"},
        Case{"sysfs_root=", "absolute path"}, Case{"host_check=maybe", "wait, rescan or off"},
        Case{"on_unavailable=ignore", "drain or fail_job"}, Case{"server=ftp://x", "http://"},
        Case{"fence=yes", "auto (fence where Slurm made the job a cgroup), required"},
        Case{"devices_cgroup=cgroup", "absolute path"}, Case{"noequals", "key=value"}}) {
    Expected<SpankConfig> c = parse_plugstack_args({k.arg});
    ASSERT_FALSE(c) << k.arg;
    EXPECT_NE(c.error().message.find(std::string("'") + k.arg + "'"), std::string::npos)
        << c.error();
    EXPECT_NE(c.error().message.find(k.rule), std::string::npos) << c.error();
  }
}

}  // namespace
}  // namespace composer::slurm
