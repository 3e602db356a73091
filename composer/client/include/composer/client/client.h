// Typed calls to composerd's HTTP API (docs/API.md), for the SPANK plugin and composerctl.
//
// Every call except health() carries a fresh munge credential whose payload is
// "METHOD PATH", except on composerd's Unix socket (url unix:/PATH), where the kernel names
// the caller. Error answers become an Error with the server's code and message; transport
// failures come from HttpClient (kUnavailable, kTimeout). A Client may be shared by threads.
//
// Several servers (an active composerd and its standbys, like Slurm's SlurmctldHost lines) are
// followed: each call tries them in order, starting with the one that last answered as
// active. A connection that fails, or an HTTP 503 whose body carries "active" (a standby,
// naming the active composerd's URL, tried next when it is in the list), moves on to the next
// server; any other answer is the call's answer. Idempotent calls go round the list up to
// `retries` more times with HttpClient's backoff between rounds. The whole call stays within
// what one server could take: (retries + 1) x (connect_timeout_ms + timeout_ms) plus the
// backoffs. When no server answers as active the error (kUnavailable) names every URL tried and
// what each said (client_test, "Servers" tests). A server that has not answered an idempotent
// call within 3 s may be a frozen composerd whose leadership another took over: from then on
// the other servers' health is asked once a second, and one that says it is active gets the
// call (ServersLeaveAFrozenServerOnceAnotherTookOver); the frozen one cannot act on the
// request once it resumes, its epoch being old.
#pragma once

#include <json/value.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/api/policy_codec.h"
#include "composer/api/server_list.h"
#include "composer/api/types.h"
#include "composer/common/error.h"
#include "composer/http/http.h"
#include "composer/model/model.h"

namespace composer::client {

using api::kDefaultServerUrl;
// "unix:/run/composer/composerd.sock": composerd's ListenSocket on this host; calls carry no
// munge credential there (composerd reads the caller's uid from the kernel).
inline constexpr std::string_view kUnixScheme = "unix:";
// The server lists every client takes (api/server_list.h).
using api::parse_server_list;
using api::supported_server_url;

struct ClientOptions {
  // A server list (parse_server_list); calls fail with its sentence when it is not one.
  std::string servers = kDefaultServerUrl;
  long connect_timeout_ms = 2000;
  long timeout_ms = 60000;
  int retries = 3;
  long backoff_ms = 100;
  std::string munge_socket;  // empty: munge's default
};

// GET /v1/compositions filters; unset fields are not sent.
struct CompositionQuery {
  std::optional<uint32_t> job;
  std::optional<std::string> user;
  std::optional<CompositionState> state;
  std::optional<std::string> node;
  bool live = false;  // live compositions only
  size_t limit = 0;   // at most this many, newest first; 0: all (every page is read)
  size_t page = 0;    // compositions per request (the server's default when 0)
};

// GET /v1/devices filters.
struct DeviceQuery {
  std::optional<DeviceType> type;
  std::optional<DeviceState> state;
  std::optional<std::string> zone;
  std::optional<std::string> node;
  size_t page = 0;  // devices per request (the server's default when 0); all pages are read
};

// GET /v1/events filters.
struct EventQuery {
  std::optional<uint32_t> job;
  std::optional<int64_t> since_ms;  // inclusive
  std::optional<int64_t> until_ms;  // exclusive
  size_t limit = 0;                 // at most this many, oldest first; 0: all (every page)
  size_t page = 0;                  // events per request (the server's default when 0)
};

// GET /v1/policy/explain: a hypothetical job, totals over all its nodes. The class comes from
// `workload`, else from partition, QOS or account as the policy classifies them.
struct PolicyQuery {
  std::string workload, partition, qos, account;
  uint64_t gpus = 0;
  uint64_t mem_bytes = 0;
  uint64_t nvme = 0;
  int64_t time_limit_s = 0;
  std::optional<int64_t> start_ms;  // unset: now
};

class Client {
 public:
  explicit Client(ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // PUT /v1/compositions/{job}/{node}.
  Expected<Composition> compose(uint32_t job_id, std::string_view node,
                                const api::ComposeBody& body) const;
  // DELETE /v1/compositions/{job}/{node}; nullopt when there was nothing to release.
  Expected<std::optional<Composition>> release(uint32_t job_id, std::string_view node) const;
  // PUT /v1/compositions/{job}: the job on every node of `body.nodes` at once, all or nothing.
  Expected<std::vector<Composition>> compose_job(uint32_t job_id,
                                                 const api::ComposeBody& body) const;
  // DELETE /v1/compositions/{job}: every live composition of the job; those released.
  Expected<std::vector<Composition>> release_job(uint32_t job_id) const;
  // POST /v1/compositions/{job}/{node}/hold with the reason, or DELETE it (reason ""): the
  // node's hold on the composition (Composition::hold).
  Expected<Composition> hold(uint32_t job_id, std::string_view node, std::string_view reason) const;
  // POST /v1/compositions/{job}/{node}/devices/{id}/drain: the node's host never showed device
  // `id` of the job's composition there; composerd drains it with `reason`.
  Expected<Device> drain_unseen(uint32_t job_id, std::string_view node, std::string_view id,
                                std::string_view reason) const;
  // POST /v1/compositions/{job}/{node}/devices/{id}/fail: the node's host found device `id`
  // of the job's composition there bad; composerd marks it failed with `reason`.
  Expected<Device> fail_reported(uint32_t job_id, std::string_view node, std::string_view id,
                                 std::string_view reason) const;
  // GET /v1/compositions/{job}/{node}.
  Expected<Composition> show(uint32_t job_id, std::string_view node) const;
  Expected<std::vector<Composition>> compositions(const CompositionQuery& query = {}) const;
  Expected<std::vector<PoolRow>> pool() const;
  Expected<std::vector<Device>> devices(const DeviceQuery& query = {}) const;
  // The hosts the fabric serves, with their zones and attach slots.
  Expected<std::vector<Host>> hosts() const;
  // POST /v1/devices/{id}/drain and /resume.
  Expected<Device> drain(std::string_view id, std::string_view reason) const;
  Expected<Device> resume(std::string_view id) const;
  // POST /v1/domains/{LEVEL:NAME}/drain and /resume (admins): every device of the failure
  // domain at once; the devices as they are now.
  Expected<std::vector<Device>> drain_domain(std::string_view domain,
                                             std::string_view reason) const;
  Expected<std::vector<Device>> resume_domain(std::string_view domain) const;
  // POST /v1/devices/{id}/adopt and /release-foreign (admins): docs/API.md.
  Expected<Device> adopt(std::string_view id) const;
  Expected<Device> release_foreign(std::string_view id) const;
  // GET /v1/health, without a credential.
  Expected<api::HealthInfo> health() const;
  Expected<std::vector<Event>> events(const EventQuery& query = {}) const;
  // PUT /v1/policy (admins), GET /v1/policy (kNotFound before the first one),
  // GET /v1/policy/history (newest first; limit 0: all), GET /v1/policy/explain.
  Expected<api::PolicyApplied> put_policy(const api::PolicyBody& body) const;
  Expected<PolicyVersion> policy() const;
  Expected<std::vector<PolicyVersion>> policy_history(size_t limit = 0) const;
  Expected<api::PolicyExplanation> explain_policy(const PolicyQuery& query) const;

  // GET /v1/<segments...>?params with a credential, for answers decoded outside this library
  // (accounting reports): the JSON as composerd sent it, or the error.
  Expected<Json::Value> get_json(
      const std::vector<std::string>& segments,
      const std::vector<std::pair<std::string, std::string>>& params = {}) const;

  const ClientOptions& options() const { return options_; }
  // The URL of the server tried first by the next call (the one last answered as active).
  std::string active_server() const;

 private:
  struct Path;
  // POST /v1/devices/{id}/{action} with an empty body.
  Expected<Device> device_action(std::string_view id, std::string_view action) const;
  Expected<std::vector<Device>> domain_action(std::string_view domain, std::string_view action,
                                              const std::string& body) const;
  Expected<Json::Value> call(const std::string& method, const Path& path, const std::string& body,
                             bool authenticate) const;
  // When a call of `rounds` rounds over the server list gives up.
  std::chrono::steady_clock::time_point call_deadline(int rounds) const;
  // The answer of the first server that answers as the active one, going round the list
  // (client.h's header comment); the sentence naming what each said when none does.
  Expected<http::HttpResponse> send_to_active(const std::string& method, const Path& path,
                                              const std::string& body, bool authenticate,
                                              const std::string& what) const;

  // The index of a server other than `waiting_on` whose health says it is the active
  // composerd, asking each for at most `within`.
  std::optional<size_t> other_active(size_t waiting_on, std::chrono::milliseconds within) const;

  struct Server;
  ClientOptions options_;
  Status usable_;  // the server list's sentence when it is not one
  std::vector<Server> servers_;
  // The index in servers_ of the server that last answered as active: tried first.
  mutable std::atomic<size_t> active_{0};
};

}  // namespace composer::client
