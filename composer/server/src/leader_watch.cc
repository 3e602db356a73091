#include "leader_watch.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>

#include "composer/api/codec.h"
#include "composer/api/server_list.h"
#include "composer/api/snapshot.h"
#include "composer/client/client.h"
#include "composer/common/clock.h"
#include "composer/common/log.h"
#include "composer/common/secret_file.h"
#include "composer/common/thread_name.h"
#include "composer/config/conf_file.h"
#include "composer/server/service_manager.h"
#include "metrics.h"
#include "route.h"

#ifndef COMPOSER_VERSION
#define COMPOSER_VERSION "0.0.0"
#endif

namespace composer::server {

Expected<std::string> state_url(const setup::Config& c) {
  if (c.state_url_file.empty()) return c.state_url;
  auto url = read_secret_line(c.state_url_file, "StateUrlFile");
  if (!url) return config::at(c.path, c.line_of("stateurlfile"), url.error().message);
  return url;
}

namespace {

std::string holder_name() {
  char host[256] = {0};
  const std::string name =
      ::gethostname(host, sizeof host - 1) == 0 && host[0] != '\0' ? host : "unknown";
  return name + ":" + std::to_string(::getpid());
}

}  // namespace

Expected<std::unique_ptr<LeaderWatch>> LeaderWatch::open(const setup::Config& config) {
  auto url = state_url(config);
  if (!url) return url.error();
  auto lock = db::Leadership::open({.conninfo = *url,
                                    .holder = holder_name(),
                                    .url = config.advertised_url(),
                                    .lease_ms = config.leader_lease_ms});
  if (!lock) {
    return Error{lock.error().code,
                 "the leadership lock (StateBackend=postgresql): " + lock.error().message};
  }
  return std::unique_ptr<LeaderWatch>(new LeaderWatch(config, std::move(lock).value()));
}

LeaderWatch::LeaderWatch(setup::Config config, std::unique_ptr<db::Leadership> lock)
    : config_(std::move(config)), lock_(std::move(lock)) {
  thread_ = std::thread([this] { loop(); });
}

LeaderWatch::~LeaderWatch() {
  stop();
  thread_.join();
}

void LeaderWatch::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
}

void LeaderWatch::loop() {
  name_this_thread("leadership");
  // A standby tries once a second; the active one renews five times a lease.
  const auto pause = std::chrono::milliseconds(std::min<int64_t>(1000, lock_->lease_ms() / 5));
  bool warned = false;
  for (;;) {
    bool active = false;
    {
      std::lock_guard lock(mu_);
      if (stopping_ && !won_) return;
      active = won_.has_value();
    }
    if (active) {
      renew();
    } else {
      auto taken = lock_->try_take(now_ms());
      if (taken && *taken) {
        log::warning("this composerd takes over as the active one",
                     {{"epoch", std::to_string((*taken)->now.epoch)},
                      {"previous_epoch", std::to_string((*taken)->old_epoch)},
                      {"previous_holder", (*taken)->old_holder}});
        std::lock_guard lock(mu_);
        won_ = **taken;
        seen_ = (*taken)->now;
        changed_.notify_all();
        continue;
      }
      auto row = taken ? lock_->current() : Expected<db::Leader>(taken.error());
      if (row) {
        std::lock_guard lock(mu_);
        seen_ = *row;
        warned = false;
      } else if (!warned) {
        log::warning("standby: cannot read the leadership", {{"cause", row.error().message}});
        warned = true;
      }
      {
        std::lock_guard lock(mu_);
        looked_ = true;
      }
      changed_.notify_all();
    }
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, pause, [this] { return stopping_; });
    if (stopping_) return;
  }
}

void LeaderWatch::renew() {
  Status s = lock_->renew();
  if (s) return;
  if (lock_->regainable() != 0) {
    // Only the lock's connection broke (the primary died, say): nobody can take over without
    // the database either, and no fabric change starts meanwhile (held() is false). Take the
    // lock again under the same epoch once the database answers, or learn that another did.
    log::warning("leadership: the lock's connection is lost; taking it again under the same epoch",
                 {{"cause", s.error().message}});
    // Ten times a second, where a standby tries once: once a new primary answers, the lock is
    // free on it for whoever asks first, and a standby that wins it costs a takeover (the
    // composes under way here refused, the new one's start). tests/ha's primary fault: with
    // the same pause as a standby, the standby took over in 3 of 6 primary switches.
    const auto pause = std::chrono::milliseconds(100);
    for (;;) {
      {
        std::unique_lock lock(mu_);
        changed_.wait_for(lock, pause, [this] { return stopping_; });
        if (stopping_) return;
      }
      auto again = lock_->regain();
      if (!again) continue;
      if (*again) {
        log::warning("leadership kept: the lock is held again under the same epoch",
                     {{"epoch", std::to_string(lock_->epoch())}});
        return;
      }
      s = Error(ErrorCode::kUnavailable, "another composerd took over while the database was away");
      break;
    }
  }
  // Nothing more may reach the fabric or the store from here (see the header).
  log::error("leadership lost: composerd exits so that it can start again as a standby",
             {{"cause", s.error().message}});
  std::_Exit(kLeadershipLostExit);
}

Expected<std::optional<db::Takeover>> LeaderWatch::wait_until_active() {
  Router router;
  const auto started = now_ms();
  router.add("GET", "/v1/health", [this, started](const HttpRequest&, const HttpReply& reply) {
    api::HealthInfo h{.status = "ok",
                      .fabric = config_.fabric,
                      .version = COMPOSER_VERSION,
                      .uptime_s = (now_ms() - started) / 1000};
    describe(h);
    reply(HttpResponse{.status = 200, .body = api::to_text(api::to_json(h))});
  });
  router.add("GET", "/metrics", [this](const HttpRequest&, const HttpReply& reply) {
    reply(HttpResponse{.status = 200,
                       .body = metrics(),
                       .content_type = "text/plain; version=0.0.4; charset=utf-8"});
  });
  for (const char* method : {"GET", "PUT", "POST", "DELETE"}) {
    router.add(method, ".*",
               [this](const HttpRequest&, const HttpReply& reply) { reply(refusal()); });
  }
  FrontDoor door(
      FrontDoorLimits{
          .request_timeout_ms = config_.api_request_timeout_ms,
          .idle_timeout_ms = config_.api_idle_timeout_ms,
          .max_connections = static_cast<size_t>(config_.api_max_connections),
          .max_connections_per_peer = static_cast<size_t>(config_.api_max_connections_per_peer),
          .workers = 4},
      [&router](HttpRequest& req, const HttpReply& reply) { router.answer(req, reply); },
      &Router::refusal, [](const HttpRequest&, const HttpResponse&) {});
  if (auto s = door.bind(config_.listen_address, config_.listen_port); !s) return s.error();
  if (!config_.listen_socket.empty()) {
    if (auto s = door.bind_local(config_.listen_socket); !s) return s.error();
  }
  // job_submit on this host (a backup slurmctld's) reads the snapshot here too: the standby
  // keeps a copy of the active one's.
  // Health answers only once the lock was read: a standby that said "no composerd is active"
  // for its first instant misled whoever asked then (ComposerdLeadership.
  // StandbyNamesTheActiveOneAndTakesOverWhenItIsKilled failed so in CI). One database call
  // bounds the wait: a failed read counts as a look.
  {
    std::unique_lock lock(mu_);
    changed_.wait(lock, [this] { return stopping_ || looked_ || won_.has_value(); });
  }
  std::thread copying([this] {
    name_this_thread("snapshot");
    copy_snapshots();
  });
  log::info("composerd is a standby", {{"advertises", config_.advertised_url()}});
  service_manager::ready("a standby: serving health and metrics, naming the active composerd");
  std::thread serving([&door] {
    name_this_thread("standby");
    door.run();
  });
  std::optional<db::Takeover> won;
  {
    std::unique_lock lock(mu_);
    changed_.wait(lock, [this] { return stopping_ || won_.has_value(); });
    won = won_;
  }
  door.stop();
  serving.join();
  copying.join();
  return won;
}

void LeaderWatch::describe(api::HealthInfo& health) const {
  std::lock_guard lock(mu_);
  health.role = won_ ? "active" : "standby";
  health.epoch = seen_.epoch;
  health.active = seen_.url;
  health.active_since_ms = seen_.since_ms;
}

HttpResponse LeaderWatch::refusal() const {
  db::Leader seen;
  {
    std::lock_guard lock(mu_);
    seen = seen_;
  }
  const std::string who = seen.url.empty() || seen.epoch == 0 ? "no composerd is active yet"
                                                              : "the active one is " + seen.url;
  Json::Value body = api::to_json(
      Error{ErrorCode::kUnavailable,
            "this composerd is a standby (" + config_.advertised_url() + "); " + who + ": ask it"});
  body["active"] = seen.epoch == 0 ? std::string() : seen.url;
  return HttpResponse{.status = 503, .body = api::to_text(body)};
}

std::string LeaderWatch::metrics() const {
  std::lock_guard lock(mu_);
  return leadership_metrics(won_.has_value(), seen_.epoch, seen_.since_ms);
}

void LeaderWatch::copy_snapshots() {
  std::string last_error;
  for (;;) {
    std::string active;
    {
      std::unique_lock lock(mu_);
      changed_.wait_for(lock, std::chrono::milliseconds(config_.reconcile_interval_ms),
                        [this] { return stopping_ || won_.has_value(); });
      if (stopping_ || won_) return;
      active = seen_.url;
    }
    if (active.empty() || api::same_server(active, config_.advertised_url())) continue;
    Status s = copy_snapshot(active);
    if (!s && s.error().message != last_error) {
      log::warning("standby: cannot copy the active composerd's pool snapshot",
                   {{"active", active}, {"cause", s.error().message}});
    } else if (s && !last_error.empty()) {
      log::info("standby: copies the active composerd's pool snapshot again", {{"active", active}});
    }
    last_error = s ? "" : s.error().message;
  }
}

Status LeaderWatch::copy_snapshot(const std::string& active) const {
  const client::Client c({.servers = active,
                          .connect_timeout_ms = 1000,
                          .timeout_ms = 5000,
                          .retries = 0,
                          .munge_socket = config_.munge_socket});
  Expected<Json::Value> json = c.get_json({"snapshot"});
  if (!json) return json.error();
  Expected<api::PoolSnapshot> snapshot = api::snapshot_from_json(*json);
  if (!snapshot) return snapshot.error();
  return api::write_snapshot(config_.snapshot, *snapshot);
}

}  // namespace composer::server
