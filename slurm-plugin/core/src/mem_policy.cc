#include "composer/slurm/mem_policy.h"

#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "composer/common/units.h"
#include "composer/slurm/device_fence.h"
#include "composer/slurm/host_devices.h"

namespace composer::slurm {
namespace {

int system_set_mempolicy(MempolicyMode mode, const std::set<int>& nodes) {
  constexpr size_t kBits = sizeof(unsigned long) * CHAR_BIT;
  const size_t highest = nodes.empty() ? 0 : static_cast<size_t>(*nodes.rbegin());
  std::vector<unsigned long> mask(highest / kBits + 1, 0);
  for (int n : nodes)
    mask[static_cast<size_t>(n) / kBits] |= 1UL << (static_cast<size_t>(n) % kBits);
  // The kernel reads maxnode - 1 bits (as libnuma passes it).
  const unsigned long maxnode = mask.size() * kBits + 1;
  if (::syscall(SYS_set_mempolicy, static_cast<int>(mode), mask.data(), maxnode) != 0) return errno;
  return 0;
}

MempolicyCall& mempolicy_call() {
  static MempolicyCall call = system_set_mempolicy;
  return call;
}

std::string mode_name(MempolicyMode mode) {
  switch (mode) {
    case MempolicyMode::kBind:
      return "MPOL_BIND";
    case MempolicyMode::kInterleave:
      return "MPOL_INTERLEAVE";
    case MempolicyMode::kPreferredMany:
      return "MPOL_PREFERRED_MANY";
    case MempolicyMode::kWeightedInterleave:
      return "MPOL_WEIGHTED_INTERLEAVE";
  }
  return "mode " + std::to_string(static_cast<int>(mode));
}

std::string kernel_release() {
  struct utsname u {};
  if (::uname(&u) != 0) return "unknown";
  return u.release;
}

std::set<int> joined(std::set<int> a, const std::set<int>& b) {
  a.insert(b.begin(), b.end());
  return a;
}

// The weights a job's weighted policy gives the node: D on each DRAM node, C on its CXL nodes.
std::map<int, uint32_t> weights_of(const MemPolicy& p, const std::set<int>& dram,
                                   const std::set<int>& cxl) {
  std::map<int, uint32_t> w;
  for (int n : dram) w[n] = p.dram_weight;
  for (int n : cxl) w[n] = p.cxl_weight;
  return w;
}

}  // namespace

MempolicyCall replace_mempolicy_call(MempolicyCall call) {
  MempolicyCall before = std::move(mempolicy_call());
  mempolicy_call() = std::move(call);
  return before;
}

std::string weighted_interleave_dir(const std::string& sysfs_root) {
  return sysfs_root + "/kernel/mm/mempolicy/weighted_interleave";
}

std::set<int> cxl_nodes(const std::vector<Device>& devices) {
  std::set<int> nodes;
  for (const Device& d : devices) {
    if (d.type != DeviceType::kMem) continue;
    if (std::optional<std::set<int>> n = parse_node_list(numa_node(d.address)); n) {
      nodes.insert(n->begin(), n->end());
    }
  }
  return nodes;
}

std::set<int> dram_nodes(const SpankConfig& config, const std::vector<Device>& own) {
  std::set<int> cxl = joined(cxl_nodes(own), cxl_nodes(devices_of_other_jobs(config.state_dir, 0)));
  std::set<int> out;
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator(config.sysfs_root + "/devices/system/node", ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("node") || name.size() == 4) continue;
    Expected<uint32_t> n = parse_count(name.substr(4), 1U << 20);
    if (n && !cxl.count(static_cast<int>(*n))) out.insert(static_cast<int>(*n));
  }
  return out;
}

Status check_kernel_for(const SpankConfig& config, const MemPolicy& policy) {
  if (policy.kind != MemPolicy::Kind::kWeighted) return Status::Ok();
  std::error_code ec;
  if (std::filesystem::is_directory(weighted_interleave_dir(config.sysfs_root), ec)) {
    return Status::Ok();
  }
  return Error{ErrorCode::kInvalidArgument,
               "--" + std::string(kOptMemPolicy) + "=" + to_string(policy) +
                   " needs Linux 6.9 or later (weighted interleave, " +
                   weighted_interleave_dir(config.sysfs_root) + "); this node runs Linux " +
                   kernel_release() + ": use interleave or preferred here"};
}

namespace {

// The other jobs on the node whose weighted policy is in force: a state file without an error
// (a refused job gave no weights) and not held (a held job has ended; its devices wait to go).
std::vector<std::pair<JobState, MemPolicy>> running_weighted(const SpankConfig& config,
                                                             uint32_t job_id) {
  std::vector<std::pair<JobState, MemPolicy>> out;
  for (uint32_t other : other_jobs(config.state_dir, job_id)) {
    Expected<std::optional<JobState>> file = read_job_state(config.state_dir, other);
    if (!file || !file->has_value() || !(*file)->error.empty() || !(*file)->held.empty()) continue;
    Expected<MemPolicy> theirs = parse_mem_policy((*file)->mem_policy);
    if (!theirs || theirs->kind != MemPolicy::Kind::kWeighted) continue;
    out.emplace_back(std::move(**file), *theirs);
  }
  return out;
}

std::string node_file(int node) { return "node" + std::to_string(node); }
constexpr std::string_view kAutoFile = "auto";

// What a file of the weighted_interleave folder holds, without its newline; nullopt where the
// kernel has no such file.
std::optional<std::string> read_weight_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string text;
  std::getline(in, text);
  return text;
}

Status write_weight_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text << "\n";
  out.flush();
  if (!out) {
    return Error{ErrorCode::kInternal,
                 "cannot write " + text + " to " + path + ": " + std::strerror(errno)};
  }
  return Status::Ok();
}

// A name restore_node_weights may write: node<N> or auto, nothing that leaves the folder.
bool is_weight_file(const std::string& name) {
  if (name == kAutoFile) return true;
  return name.starts_with("node") && name.size() > 4 &&
         name.find_first_not_of("0123456789", 4) == std::string::npos;
}

}  // namespace

Status give_node_weights(const SpankConfig& config, JobState& state, const MemPolicy& policy) {
  if (policy.kind != MemPolicy::Kind::kWeighted) return Status::Ok();
  const std::set<int> dram = dram_nodes(config, state.devices);
  const std::map<int, uint32_t> mine = weights_of(policy, dram, cxl_nodes(state.devices));
  const std::vector<std::pair<JobState, MemPolicy>> others = running_weighted(config, state.job_id);
  for (const auto& [file, theirs] : others) {
    for (const auto& [node, w] : weights_of(theirs, dram, cxl_nodes(file.devices))) {
      const auto at = mine.find(node);
      if (at == mine.end() || at->second == w) continue;
      return Error{ErrorCode::kConflict,
                   "--" + std::string(kOptMemPolicy) + "=" + to_string(policy) + ": job " +
                       std::to_string(file.job_id) + " on this node interleaves by " +
                       to_string(theirs) + ", and the kernel keeps one weight per NUMA node " +
                       "for the whole node (node " + std::to_string(node) + " would go from " +
                       std::to_string(w) + " to " + std::to_string(at->second) +
                       " under it); ask for " + to_string(theirs) +
                       ", interleave or preferred, or for another node"};
    }
  }
  // What each file held before the first running weighted job wrote it: a job already running
  // knows it for the nodes it wrote (the weights on them now are its own), the kernel for the
  // rest (RestoresTheWeightsOnlyWhenNoRunningJobInterleavesByThem).
  const std::string dir = weighted_interleave_dir(config.sysfs_root);
  auto remember = [&](const std::string& name) {
    for (const auto& [file, theirs] : others) {
      if (const auto at = file.weights_before.find(name); at != file.weights_before.end()) {
        state.weights_before[name] = at->second;
        return;
      }
    }
    if (std::optional<std::string> now = read_weight_file(dir + "/" + name)) {
      state.weights_before[name] = *now;
    }
  };
  // A kernel that computes the weights itself (auto, 6.16 and later) stops at the first write.
  remember(std::string(kAutoFile));
  for (const auto& [node, w] : mine) remember(node_file(node));
  for (const auto& [node, w] : mine) {
    if (Status s = write_weight_file(dir + "/" + node_file(node), std::to_string(w)); !s) return s;
  }
  return Status::Ok();
}

Status restore_node_weights(const SpankConfig& config, const JobState& state) {
  if (state.weights_before.empty()) return Status::Ok();
  const std::vector<std::pair<JobState, MemPolicy>> others = running_weighted(config, state.job_id);
  std::set<std::string> in_use;
  const std::set<int> dram = dram_nodes(config, state.devices);
  for (const auto& [file, theirs] : others) {
    for (const auto& [node, w] : weights_of(theirs, dram, cxl_nodes(file.devices))) {
      in_use.insert(node_file(node));
    }
  }
  const std::string dir = weighted_interleave_dir(config.sysfs_root);
  Status result = Status::Ok();
  auto put_back = [&](const std::string& name, const std::string& text) {
    if (!is_weight_file(name)) {
      if (result) {
        result = Error{ErrorCode::kInternal, "the state file names " + name +
                                                 " among the weights to restore, which is no "
                                                 "file of " +
                                                 dir + "; left alone"};
      }
      return;
    }
    if (Status s = write_weight_file(dir + "/" + name, text); !s && result) result = s;
  };
  for (const auto& [name, text] : state.weights_before) {
    if (name == kAutoFile || in_use.count(name)) continue;
    put_back(name, text);
  }
  // Last: auto mode computes every node's weight again, so it comes back only when no job
  // interleaves by weight any more.
  if (const auto at = state.weights_before.find(std::string(kAutoFile));
      at != state.weights_before.end() && others.empty() && at->second != "false") {
    put_back(at->first, at->second);
  }
  return result;
}

Status apply_mem_policy(const SpankConfig& config, const JobState& state) {
  const std::set<int> cxl = cxl_nodes(state.devices);
  bool memory = false;
  for (const Device& d : state.devices) memory = memory || d.type == DeviceType::kMem;
  if (!memory) return Status::Ok();
  Expected<MemPolicy> policy = state.mem_policy.empty() ? Expected<MemPolicy>(MemPolicy{})
                                                        : parse_mem_policy(state.mem_policy);
  if (!policy)
    return Error{ErrorCode::kInternal, "the state file's memory policy: " + policy.error().message};
  const std::string flag = "--" + std::string(kOptMemPolicy) + "=" + to_string(*policy);
  const std::set<int> dram = dram_nodes(config, state.devices);
  MempolicyMode mode = MempolicyMode::kPreferredMany;
  std::set<int> nodes;
  switch (policy->kind) {
    case MemPolicy::Kind::kPreferred:
      // Today's placement needs nothing where the kernel cannot say it.
      if (dram.empty()) return Status::Ok();
      (void)mempolicy_call()(MempolicyMode::kPreferredMany, dram);
      return Status::Ok();
    case MemPolicy::Kind::kBind:
      mode = MempolicyMode::kBind;
      nodes = cxl;
      break;
    case MemPolicy::Kind::kInterleave:
      mode = MempolicyMode::kInterleave;
      nodes = joined(dram, cxl);
      break;
    case MemPolicy::Kind::kWeighted:
      mode = MempolicyMode::kWeightedInterleave;
      nodes = joined(dram, cxl);
      break;
  }
  if (cxl.empty()) {
    return Error{ErrorCode::kInvalidArgument,
                 flag + ": the job's CXL memory is no NUMA node on this host, so there is no " +
                     "node to place its memory on"};
  }
  if (const int err = mempolicy_call()(mode, nodes); err != 0) {
    return Error{ErrorCode::kInternal, flag + ": set_mempolicy(" + mode_name(mode) + ", nodes " +
                                           node_list_text(nodes) +
                                           ") failed: " + std::strerror(err)};
  }
  return Status::Ok();
}

}  // namespace composer::slurm
