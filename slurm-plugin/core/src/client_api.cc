#include "composer/slurm/client_api.h"

namespace composer::slurm {

client::ClientOptions client_options(const SpankConfig& config) {
  client::ClientOptions o;
  o.servers = config.server;
  o.connect_timeout_ms = long{config.connect_timeout_s} * 1000;
  o.timeout_ms = long{config.timeout_s} * 1000;
  o.retries = static_cast<int>(config.retries);
  o.backoff_ms = config.backoff_ms;
  o.munge_socket = config.munge_socket;
  return o;
}

namespace {

api::ComposeBody compose_body(const ComposeCall& call) {
  api::ComposeBody body;
  body.owner = call.owner;
  if (call.mem_policy) body.mem_policy = to_string(*call.mem_policy);
  body.request = call.request;
  return body;
}

}  // namespace

Expected<Composition> ClientComposerApi::compose(const ComposeCall& call) {
  return client_.compose(call.owner.job_id, call.node, compose_body(call));
}

Expected<std::vector<Composition>> ClientComposerApi::compose_job(
    const ComposeCall& call, const std::vector<std::string>& nodes) {
  api::ComposeBody body = compose_body(call);
  body.nodes = nodes;
  return client_.compose_job(call.owner.job_id, body);
}

Expected<size_t> ClientComposerApi::release_job(uint32_t job_id) {
  Expected<std::vector<Composition>> released = client_.release_job(job_id);
  if (!released) return released.error();
  return released->size();
}

Expected<std::optional<Composition>> ClientComposerApi::release(uint32_t job_id,
                                                                const std::string& node) {
  return client_.release(job_id, node);
}

Status ClientComposerApi::hold(uint32_t job_id, const std::string& node,
                               const std::string& reason) {
  Expected<Composition> held = client_.hold(job_id, node, reason);
  if (!held) return held.error();
  return Status::Ok();
}

Status ClientComposerApi::drain_unseen(uint32_t job_id, const std::string& node,
                                       const std::string& device_id, const std::string& reason) {
  Expected<Device> drained = client_.drain_unseen(job_id, node, device_id, reason);
  if (!drained) return drained.error();
  return Status::Ok();
}

Status ClientComposerApi::fail_reported(uint32_t job_id, const std::string& node,
                                        const std::string& device_id, const std::string& reason) {
  Expected<Device> failed = client_.fail_reported(job_id, node, device_id, reason);
  if (!failed) return failed.error();
  return Status::Ok();
}

Expected<Composition> ClientComposerApi::show(uint32_t job_id, const std::string& node) {
  return client_.show(job_id, node);
}

}  // namespace composer::slurm
