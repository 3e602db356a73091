// Fakes for the SPANK plugin's two seams.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "composer/slurm/job_context.h"
#include "composer/slurm/plugin_config.h"
#include "composer/test_support/fake_host.h"

namespace composer::slurm::testing {

// The plugin's settings for a prolog or epilog on `host`: its sysfs, /proc and /dev, the job
// state below `tmp`, and never the machine's own cgroups (a test that wants a hierarchy lays
// out a fake one). Devices are waited for 2 s; holders are not waited for.
inline SpankConfig fake_host_config(const std::string& tmp, const test_support::FakeHost& host) {
  SpankConfig config;
  config.state_dir = tmp + "/state";
  config.sysfs_root = host.sysfs_root();
  config.proc_root = host.proc_root();
  config.dev_root = host.dev_root();
  config.devices_cgroup = tmp + "/no-cgroup/devices";
  config.cpuset_cgroup = tmp + "/no-cgroup/cpuset";
  config.unified_cgroup = tmp + "/no-cgroup/unified";
  config.host_wait_s = 2;
  config.busy_wait_s = 0;
  return config;
}

class FakeJob : public JobContext {
 public:
  uint32_t id = 4711;
  uint32_t step = kBatchStep;
  uint32_t user_id = 1000;
  std::string node_name = "node1";
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> options;
  std::vector<std::string> infos;
  std::vector<std::string> errors;

  Expected<uint32_t> job_id() override { return id; }
  Expected<uint32_t> step_id() override { return step; }
  Expected<uint32_t> uid() override { return user_id; }
  std::string node() override { return node_name; }
  std::optional<std::string> getenv(const std::string& name) override {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  }
  Status setenv(const std::string& name, const std::string& value) override {
    env[name] = value;
    return Status::Ok();
  }
  std::optional<std::string> option(std::string_view name) override {
    auto it = options.find(std::string(name));
    if (it == options.end()) return std::nullopt;
    return it->second;
  }
  void info(const std::string& line) override { infos.push_back(line); }
  void error(const std::string& line) override { errors.push_back(line); }
};

class FakeComposer : public ComposerApi {
 public:
  std::optional<Error> compose_error;
  int compose_failures = -1;  // calls answered with compose_error before one succeeds; -1: all
  std::optional<Error> release_error;
  int release_failures = -1;  // release() calls answered with release_error first; -1: all
  std::vector<Device> devices;
  std::vector<ComposeCall> composed;
  std::vector<std::pair<uint32_t, std::string>> released;
  // The memory policy composerd settles for a call that names none (a workload class's
  // default, the policy's MemPolicy line); "" as a composerd without memory policies answers.
  std::string class_mem_policy;

  // Called by compose() before it answers: what happens on the fabric or host meanwhile.
  std::function<void()> on_compose;
  Expected<Composition> compose(const ComposeCall& call) override {
    composed.push_back(call);
    if (on_compose) on_compose();
    if (compose_error && compose_failures != 0) {
      if (compose_failures > 0) --compose_failures;
      return *compose_error;
    }
    Composition c = ready(call.owner.job_id, call.node);
    c.request = call.request;
    c.mem_policy = call.mem_policy ? to_string(*call.mem_policy) : class_mem_policy;
    return c;
  }
  // show(): the composition compose() would answer, unless show_error is set; in the state
  // show_states names for its job, or not found for a job in unknown_jobs.
  std::optional<Error> show_error;
  int show_failures = -1;  // calls answered with show_error before one succeeds; -1: all
  std::map<uint32_t, CompositionState> show_states;
  std::set<uint32_t> unknown_jobs;
  std::vector<std::pair<uint32_t, std::string>> shown;
  Expected<Composition> show(uint32_t job_id, const std::string& node) override {
    shown.emplace_back(job_id, node);
    if (show_error && show_failures != 0) {
      if (show_failures > 0) --show_failures;
      return *show_error;
    }
    if (unknown_jobs.contains(job_id)) {
      return Error{ErrorCode::kNotFound, "no composition for job " + std::to_string(job_id)};
    }
    Composition c = ready(job_id, node);
    c.mem_policy = class_mem_policy;
    if (auto it = show_states.find(job_id); it != show_states.end()) c.state = it->second;
    return c;
  }
  // Called by release() before it answers.
  std::function<void()> on_release;
  // release() answers the composition compose() would, released, with `devices` as they are
  // then (a test marks one failed meanwhile, as composerd's reconciler does a lost device).
  Expected<std::optional<Composition>> release(uint32_t job_id, const std::string& node) override {
    released.emplace_back(job_id, node);
    if (on_release) on_release();
    if (release_error && release_failures != 0) {
      if (release_failures > 0) --release_failures;
      return *release_error;
    }
    Composition c = ready(job_id, node);
    c.state = CompositionState::kReleased;
    return std::optional<Composition>(std::move(c));
  }
  // compose_job() answers like compose() for the whole job, one ready composition per node.
  std::vector<std::pair<ComposeCall, std::vector<std::string>>> composed_jobs;
  Expected<std::vector<Composition>> compose_job(const ComposeCall& call,
                                                 const std::vector<std::string>& nodes) override {
    composed_jobs.emplace_back(call, nodes);
    if (compose_error && compose_failures != 0) {
      if (compose_failures > 0) --compose_failures;
      return *compose_error;
    }
    std::vector<Composition> out;
    for (const std::string& node : nodes) {
      out.push_back(ready(call.owner.job_id, node));
      out.back().request = call.request;
    }
    return out;
  }
  std::vector<uint32_t> released_jobs;
  size_t release_job_count = 1;  // what release_job() answers
  Expected<size_t> release_job(uint32_t job_id) override {
    released_jobs.push_back(job_id);
    if (release_error) return *release_error;
    return release_job_count;
  }
  // drain_unseen(): recorded as (job, node, device, reason).
  std::vector<std::tuple<uint32_t, std::string, std::string, std::string>> unseen;
  Status drain_unseen(uint32_t job_id, const std::string& node, const std::string& device_id,
                      const std::string& reason) override {
    unseen.emplace_back(job_id, node, device_id, reason);
    return Status::Ok();
  }
  // fail_reported(): recorded as (job, node, device, reason), answered with fail_error when set.
  std::optional<Error> fail_error;
  std::vector<std::tuple<uint32_t, std::string, std::string, std::string>> failed;
  Status fail_reported(uint32_t job_id, const std::string& node, const std::string& device_id,
                       const std::string& reason) override {
    failed.emplace_back(job_id, node, device_id, reason);
    if (fail_error) return *fail_error;
    return Status::Ok();
  }
  // hold(): recorded (reason "" clears), answered with hold_error when set.
  std::optional<Error> hold_error;
  std::vector<std::tuple<uint32_t, std::string, std::string>> holds;
  Status hold(uint32_t job_id, const std::string& node, const std::string& reason) override {
    holds.emplace_back(job_id, node, reason);
    if (hold_error) return *hold_error;
    return Status::Ok();
  }

 private:
  // The composition both compose() and show() answer: ready, with `devices`.
  Composition ready(uint32_t job_id, const std::string& node) const {
    Composition c;
    c.id = 12;
    c.owner.job_id = job_id;
    c.node = node;
    c.state = CompositionState::kReady;
    c.devices = devices;
    return c;
  }
};

inline Device device(const std::string& id, DeviceType type, const std::string& address,
                     uint64_t capacity = 0) {
  Device d;
  d.id = id;
  d.type = type;
  d.address = address;
  d.capacity_bytes = capacity;
  return d;
}

}  // namespace composer::slurm::testing
