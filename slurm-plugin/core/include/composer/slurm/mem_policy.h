// The job's memory placement across the node's local DRAM and its composed CXL NUMA nodes
// (--compose-mem-policy): the weights the prolog gives the node for weighted interleave, and
// the policy the task hook sets in each task before it runs, which what the task executes
// inherits (set_mempolicy(2)).
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>

#include "composer/common/error.h"
#include "composer/slurm/job_state.h"
#include "composer/slurm/options.h"
#include "composer/slurm/plugin_config.h"

namespace composer::slurm {

// The modes of set_mempolicy(2), as the kernel's uapi numbers them (named here: older headers
// lack the newer ones).
enum class MempolicyMode : int {
  kBind = 2,
  kInterleave = 3,
  kPreferredMany = 5,       // Linux 5.15
  kWeightedInterleave = 6,  // Linux 6.9
};

// The one call the task hook makes: set_mempolicy(2) through syscall() by default. Answers 0
// or the errno. Tests replace it to see what a task asked for.
using MempolicyCall = std::function<int(MempolicyMode mode, const std::set<int>& nodes)>;
// Sets the call the task hook makes and answers the one it made before.
MempolicyCall replace_mempolicy_call(MempolicyCall call);

// <sysfs_root>/kernel/mm/mempolicy/weighted_interleave: where a kernel with weighted
// interleave (6.9 and later) keeps one weight per NUMA node (node<N>).
std::string weighted_interleave_dir(const std::string& sysfs_root);

// The NUMA nodes the CXL memory of `devices` became on this host.
std::set<int> cxl_nodes(const std::vector<Device>& devices);

// The node's local DRAM: the NUMA nodes under <sysfs_root>/devices/system/node that no job on
// the node (a state file in state_dir, and `own`) has as CXL memory.
std::set<int> dram_nodes(const SpankConfig& config, const std::vector<Device>& own);

// The prolog's check before anything is composed: a weighted policy on a kernel without
// weighted interleave is refused, with the sentence naming the kernel it needs.
Status check_kernel_for(const SpankConfig& config, const MemPolicy& policy);

// The prolog, for a weighted policy, once its CXL nodes are known: the node's weights are
// node-wide, one per NUMA node, and every task on the node that interleaves by weight uses
// them. The job's ratio D:C is applied as weight D on each DRAM node and C on each of its CXL
// nodes. Another job on the node whose weighted policy gives one of those nodes another weight
// would have its ratio changed under it: this job is refused instead (kConflict, naming it).
// What the files it writes held before is kept in state.weights_before, for the epilog.
// Call with the node's mempolicy lock held (MempolicyLock) until the state file is written.
Status give_node_weights(const SpankConfig& config, JobState& state, const MemPolicy& policy);

// The epilog, for a job that gave the node weights (state.weights_before): writes back what
// each file held before, except the nodes another running weighted job interleaves over (their
// weights are that job's now; it restores them when it ends), and the kernel's auto mode only
// when no such job is left. In the epilog rather than at the last task's exit: the epilog runs
// also after a task that crashed or was killed. Call with the mempolicy lock held until the
// state file is removed.
Status restore_node_weights(const SpankConfig& config, const JobState& state);
inline constexpr std::string_view kMempolicyLock = "mempolicy.lock";

// The task hook: sets the job's policy (state.mem_policy) on the calling task.
//   bind        MPOL_BIND over the job's CXL nodes
//   preferred   MPOL_PREFERRED_MANY over the DRAM nodes; where the kernel lacks it (before
//               5.15) or the call fails, nothing is set: the kernel's default, local DRAM
//               first, is what jobs had before the option
//   interleave  MPOL_INTERLEAVE over DRAM and CXL nodes
//   weighted    MPOL_WEIGHTED_INTERLEAVE over DRAM and CXL nodes (the weights the prolog gave)
// Nothing for a job without CXL memory. A policy other than preferred that cannot be set fails
// the step with a sentence: the job asked for a placement, not for a guess.
Status apply_mem_policy(const SpankConfig& config, const JobState& state);

}  // namespace composer::slurm
