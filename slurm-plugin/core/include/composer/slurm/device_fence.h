// Fencing: a job may open its own composed GPUs and drives, and no other job's, on a node
// where several jobs hold composed devices at once. The plugin writes deny rules into the
// devices cgroups (cgroup v1) that Slurm's task/cgroup plugin makes for each job when
// cgroup.conf has ConstrainDevices=yes: <devices_cgroup>/slurm[_<node>]/uid_<uid>/job_<id>.
// Slurm's own rules there (its GRES) are left as they are; a deny rule written to a job's
// cgroup reaches each of its steps (the kernel passes it down).
//   - the prolog of a job, once its state file names its devices, denies them in the cgroup of
//     every other job on the node;
//   - each task of a job, before it runs the user's program (root), denies in its job's cgroup
//     the devices the state files of the other jobs on the node name.
// Whichever of two jobs starts second, one of the two sees the other: a prolog walks the
// cgroups after its state file is written, and a task reads the state files after its job's
// cgroup exists. See slurm-plugin/README.md ("Fencing") for the settings it needs.
// On cgroup v2 (UnifiedFence) a device rule is an eBPF program: one program of the plugin's,
// attached beside Slurm's own to the cgroup that holds the node's job_<id> cgroups
// (slurmstepd.scope), says for each composed device node which job's cgroup may open it. It is
// rebuilt from the state files by each task, and by each prolog and epilog once a task has
// said where that cgroup is.
// The same task hook widens the job's cpuset to the NUMA nodes its CXL memory became
// (widen_mems, widen_unified_mems): Slurm made the cpuset before that memory existed; and it
// takes the other jobs' CXL nodes out of it (narrow_mems): Slurm gives a job every memory node
// online when it starts. As with the device rules, the prolog does its half once its state
// file names its memory: its CXL node out of every other job's cpuset, for a task that ran
// between the node's coming online and that file.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "composer/common/error.h"

namespace composer::slurm {

// One device node of a composed device: a character ('c') or block ('b') device number.
struct DeviceNode {
  char type = 'c';
  uint32_t major = 0;
  uint32_t minor = 0;
  std::string name;  // "nvidia3", "nvme2n1": for the log

  // The devices cgroup rule that names it with every access: "c 195:3 rwm".
  std::string rule() const;
  bool operator==(const DeviceNode&) const = default;
  bool operator<(const DeviceNode& o) const {
    return std::tie(type, major, minor, name) < std::tie(o.type, o.major, o.minor, o.name);
  }
};

// "MAJOR:MINOR" as sysfs `dev` files give it. Empty on anything else.
std::vector<uint32_t> parse_dev_number(const std::string& text);

// The cgroups of Slurm jobs in a cgroup v1 hierarchy (devices, cpuset), by job id: folders
// named job_<id>, looked for down to four levels (slurm[_<node>]/uid_<uid>/job_<id>), not
// inside a job's own.
std::map<uint32_t, std::vector<std::string>> slurm_job_cgroups(const std::string& hierarchy);

// "0-2,5" (cpuset.mems) as {0,1,2,5}; nullopt on anything else. And back.
std::optional<std::set<int>> parse_node_list(const std::string& text);
std::string node_list_text(const std::set<int>& nodes);

// The NUMA nodes `nodes` added to cpuset.mems of `job_cgroup` (a job's cgroup in the cpuset
// hierarchy at `hierarchy`), of each folder between the hierarchy's root and it (the kernel
// widens the root itself when memory comes online), and of each of its steps, top down, as
// cgroup v1 wants a child's mems within its parent's. kInternal names the file and the value
// the kernel refused.
Status widen_mems(const std::string& hierarchy, const std::string& job_cgroup,
                  const std::set<int>& nodes);

// cgroup v2: the NUMA nodes `nodes` added to cpuset.mems of `job_cgroup` and of every cgroup
// below it that has mems of its own (Slurm wrote them), top down. An empty cpuset.mems means
// the parent's and stays so, and nothing above the job is touched (v2 takes a child's mems
// beyond its parent's, and gives it their intersection until the parent has them too).
Status widen_unified_mems(const std::string& job_cgroup, const std::set<int>& nodes);

// The NUMA nodes `nodes` (other jobs' CXL memory) taken out of cpuset.mems of `job_cgroup` and
// of every cgroup below it that has mems of its own, children first, as cgroup v1 wants a
// child's mems within its parent's (v2 takes either order). Slurm gives a job's cpuset every
// memory node online when the job starts, another job's composed CXL memory included
// (kvm_slurm_cxl showed it). A cgroup that would be left with no node is not written: kInternal
// names its file.
Status narrow_mems(const std::string& job_cgroup, const std::set<int>& nodes);

// cgroup v2. The program a process's open of a device node runs through: a process in a job's
// cgroup (a child job_<id> of `scope`, at depth `job_level` of the hierarchy) may open a listed
// device node only when the node's owner is its job; everything else (devices no rule names,
// processes in `scope`'s other children such as slurmstepd's own, or outside it) is let
// through. An owner of 0 (its job has no cgroup yet) lets no job open it.
struct FenceRule {
  DeviceNode node;
  uint64_t owner = 0;  // the cgroup id (inode) of the owning job's cgroup
};
// Raw eBPF instructions, 8 bytes each (struct bpf_insn).
std::vector<uint64_t> fence_program(int job_level, const std::vector<uint64_t>& not_jobs,
                                    const std::vector<FenceRule>& rules);

// The mount point of the cgroup v2 hierarchy: `configured` when set, else /sys/fs/cgroup when
// it is one, else /sys/fs/cgroup/unified (hybrid hosts); empty when there is none.
std::string unified_mount(const std::string& configured);

class UnifiedFence {
 public:
  // `scope`: the cgroup (an absolute path below `mount`) whose children are the job cgroups.
  UnifiedFence(std::string mount, std::string scope)
      : mount_(std::move(mount)), scope_(std::move(scope)) {}
  // The fence of a task of `job_id` whose /proc/self/cgroup reads `self_cgroup`: nullopt when
  // its cgroup v2 path has no job_<job_id> (the task is not in a job cgroup of Slurm's).
  static std::optional<UnifiedFence> of_task(const std::string& mount,
                                             const std::string& self_cgroup, uint32_t job_id);
  const std::string& mount() const { return mount_; }
  const std::string& scope() const { return scope_; }

  // Replaces the plugin's program on scope with one built from the device nodes each job
  // holds (no program when none holds any). kInternal says what the kernel refused.
  Status apply(const std::map<uint32_t, std::vector<DeviceNode>>& held) const;
  // How many programs of the plugin's are attached to scope now (one while any job holds a
  // device, else none).
  Expected<size_t> programs() const;

 private:
  std::string mount_;
  std::string scope_;
};

class DeviceFence {
 public:
  // The cgroup v1 devices hierarchy (/sys/fs/cgroup/devices).
  explicit DeviceFence(std::string devices_cgroup) : root_(std::move(devices_cgroup)) {}

  // Whether `devices_cgroup` is a devices hierarchy (it has devices.deny).
  bool available() const;
  // The cgroups of Slurm jobs below it (slurm_job_cgroups).
  std::map<uint32_t, std::vector<std::string>> job_cgroups() const {
    return slurm_job_cgroups(root_);
  }
  // Writes each node's rule to <cgroup>/devices.deny. A cgroup that has gone meanwhile (its job
  // ended) is no error; kInternal names the cgroup and the rule that could not be written.
  Status deny(const std::string& cgroup, const std::vector<DeviceNode>& nodes) const;

 private:
  std::string root_;
};

}  // namespace composer::slurm
