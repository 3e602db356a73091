#include "composer/server/daemon.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "composer/api/codec.h"
#include "composer/api/snapshot.h"
#include "composer/common/clock.h"
#include "composer/common/log.h"
#include "composer/common/strings.h"
#include "composer/common/thread_name.h"
#include "composer/config/conf_file.h"
#include "composer/core/device_admin.h"
#include "composer/core/fenced_fabric.h"
#include "composer/core/live_pool.h"
#include "composer/core/reconciler.h"
#include "composer/core/service.h"
#include "composer/db/store.h"
#include "composer/drivers/sim_fabric.h"
#include "composer/server/auth.h"
#include "composer/server/http_api.h"
#include "composer/server/service_manager.h"
#include "composer/server/slurm_jobs.h"
#include "composer/setup/fabric_setup.h"
#include "failure_reactor.h"
#include "front_door.h"
#include "leader_watch.h"
#include "metrics.h"
#include "policy_keeper.h"
#include "route.h"
#include "slurm_sync.h"

#ifndef COMPOSER_VERSION
#define COMPOSER_VERSION "0.0.0"
#endif

namespace composer::server {
namespace {

// How composerd creates what it owns: only its user may enter StateDir and read the database
// (0700, 0600), or its user and StateGroup= (0750, 0640).
struct StateOwner {
  mode_t dir_mode = 0700;
  mode_t file_mode = 0600;
  gid_t gid = static_cast<gid_t>(-1);  // -1: the process's group
};

Expected<StateOwner> state_owner(const setup::Config& c) {
  StateOwner o;
  if (c.state_group.empty()) return o;
  struct group gr {};
  struct group* found = nullptr;
  std::string buf(16384, '\0');
  if (getgrnam_r(c.state_group.c_str(), &gr, buf.data(), buf.size(), &found) != 0 ||
      found == nullptr) {
    return Error{ErrorCode::kInvalidArgument, "StateGroup=" + c.state_group + ": no such group"};
  }
  o.dir_mode = 0750;
  o.file_mode = 0640;
  o.gid = found->gr_gid;
  return o;
}

// A StateDir that others may write lets any local user replace the ledger: refused. One that
// exists keeps its owner and mode (composerd changes nothing it did not create); a missing one
// is created (with its missing parents) with the mode composerd chooses.
Status prepare_state_dir(const std::string& dir, const StateOwner& o) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return Error{ErrorCode::kInvalidArgument, "StateDir " + dir + " is not a directory"};
    }
    if ((st.st_mode & S_IWOTH) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return Error{ErrorCode::kInvalidArgument,
                   "StateDir " + dir + " may be written by every user (mode " + mode +
                       "): any of them could replace the ledger; give composerd a directory of "
                       "its own (composerd creates a missing one 0700)"};
    }
    return Status::Ok();
  }
  if (errno != ENOENT) {
    return Error{ErrorCode::kUnavailable,
                 "cannot use StateDir " + dir + ": " + std::strerror(errno)};
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(dir).parent_path(), ec);
  if (ec || ::mkdir(dir.c_str(), o.dir_mode) != 0) {
    return Error{ErrorCode::kUnavailable, "cannot create StateDir " + dir + ": " +
                                              (ec ? ec.message() : std::strerror(errno))};
  }
  // Ours: the mode is exactly the chosen one, whatever the umask.
  if (::chown(dir.c_str(), static_cast<uid_t>(-1), o.gid) != 0 ||
      ::chmod(dir.c_str(), o.dir_mode) != 0) {
    return Error{ErrorCode::kUnavailable,
                 "cannot set the mode of StateDir " + dir + ": " + std::strerror(errno)};
  }
  return Status::Ok();
}

// Creates `path` empty with the owner's file mode when it does not exist (SQLite gives its
// journal files the database's mode); an existing file is left as it is.
Status create_private_file(const std::string& path, const StateOwner& o) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, o.file_mode);
  if (fd < 0) {
    if (errno == EEXIST) return Status::Ok();
    return Error{ErrorCode::kUnavailable, "cannot create " + path + ": " + std::strerror(errno)};
  }
  const bool ok =
      ::fchown(fd, static_cast<uid_t>(-1), o.gid) == 0 && ::fchmod(fd, o.file_mode) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) {
    return Error{ErrorCode::kUnavailable,
                 "cannot set the mode of " + path + ": " + std::strerror(err)};
  }
  return Status::Ok();
}

// SQLite opens a file it may not write read-only without a word and fails at the first write
// ("attempt to write a readonly database"): refuse it first, naming the file. The directory
// must take the journal beside it too.
Status writable_database(const std::string& path) {
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (std::filesystem::exists(path, ec) && ::access(path.c_str(), W_OK) != 0) {
    return Error{ErrorCode::kUnavailable,
                 "the database " + path + " is read-only for composerd (" + std::strerror(errno) +
                     "); it writes every composition there: give it write access or point "
                     "Database= at a writable file"};
  }
  if (!dir.empty() && ::access(dir.c_str(), W_OK) != 0) {
    return Error{ErrorCode::kUnavailable, "the directory " + dir.string() + " of the database " +
                                              path + " is read-only for composerd (" +
                                              std::strerror(errno) +
                                              "); SQLite keeps its journal beside the database"};
  }
  return Status::Ok();
}

// The files composerd writes, each with the key that names it: no two may be the same file
// (a snapshot renamed over the database destroys the ledger).
std::vector<std::pair<std::string, std::string>> own_files(const setup::Config& c) {
  std::vector<std::pair<std::string, std::string>> files = {
      {"composer.conf", c.path},         {"StateDir", c.state_dir},
      {"Database", c.database},          {"Database", c.database + "-wal"},
      {"Database", c.database + "-shm"}, {"Database", c.database + "-journal"},
  };
  // The simulated fabrics' attachments, beside the database.
  if (!c.sim.state_file.empty()) files.emplace_back("Database", c.sim.state_file);
  for (const setup::FabricSpec& f : c.fabrics) {
    if (!f.sim.state_file.empty()) files.emplace_back("Database", f.sim.state_file);
  }
  files.emplace_back("SnapshotFile", c.snapshot);
  if (!c.log_file.empty()) files.emplace_back("LogFile", c.log_file);
  return files;
}

// The line a file's key was given on (0: its default).
int line_of_file(const setup::Config& c, const std::string& key) {
  return key == "composer.conf" ? 0 : c.line_of(lower(key));
}

Status distinct_files(const setup::Config& c) {
  const auto files = own_files(c);
  std::vector<std::string> resolved;
  for (const auto& [key, path] : files) {
    std::error_code ec;
    auto p = std::filesystem::weakly_canonical(path, ec);
    resolved.push_back(ec ? path : p.string());
  }
  for (size_t i = 0; i < files.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (resolved[i] != resolved[j] || files[i].first == files[j].first) continue;
      const auto& [key, path] = files[i];
      const auto& [other, other_path] = files[j];
      const int line = line_of_file(c, key) > 0 ? line_of_file(c, key) : line_of_file(c, other);
      return config::at(c.path, line,
                        key + " " + path + " is the same file as " + other + " " + other_path +
                            ": composerd writes each of them; give each a path of its own");
    }
  }
  return Status::Ok();
}

// The takeover as a ledger event, before recovery settles what the previous active composerd
// left half-way.
Status record_takeover(db::Store& store, const LeaderWatch& leader, const Clock& clock) {
  const auto t = leader.takeover();
  if (!t) return Status::Ok();
  Event e;
  e.ts_ms = clock.now_ms();
  e.kind = "takeover";
  e.owner.user = t->now.holder;
  e.detail = "epoch " + std::to_string(t->old_epoch) + " -> " + std::to_string(t->now.epoch) +
             "; " + t->now.holder + " at " + t->now.url + " is active" +
             (t->old_holder.empty() ? std::string() : ", after " + t->old_holder);
  log::warning("takeover recorded", {{"detail", e.detail}});
  return store.add_event(e);
}

}  // namespace

Status check_config(const setup::Config& c) {
  auto at = [&](const std::string& key, const std::string& why) {
    return config::at(c.path, c.line_of(key), why);
  };
  if (auto admins = resolve_users(c.admin_users); !admins) {
    return at("adminusers", admins.error().message);
  }
  if (auto composers = resolve_users(c.compose_users, "ComposeUsers"); !composers) {
    return at("composeusers", composers.error().message);
  }
  if (auto owner = state_owner(c); !owner) return at("stategroup", owner.error().message);
  if (auto s = distinct_files(c); !s) return s;
  if (c.state_backend == "postgresql") {
    if (auto url = state_url(c); !url) return url.error();
  }
  struct stat st {};
  if (::stat(c.state_dir.c_str(), &st) == 0) {
    if (auto s = prepare_state_dir(c.state_dir, StateOwner{}); !s) {
      return at("statedir", s.error().message);
    }
  }
  if (!c.munge_socket.empty()) {
    if (::stat(c.munge_socket.c_str(), &st) != 0) {
      return at("mungesocket", "MungeSocket=" + c.munge_socket + ": " + std::strerror(errno) +
                                   "; expected the socket munged listens on");
    }
    if (!S_ISSOCK(st.st_mode)) {
      return at("mungesocket", "MungeSocket=" + c.munge_socket +
                                   " is not a socket; expected the socket munged listens on");
    }
  }
  if (!c.log_file.empty()) {
    const auto dir = std::filesystem::path(c.log_file).parent_path();
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      return at("logfile", "LogFile=" + c.log_file + ": the directory " + dir.string() +
                               " does not exist; composerd creates the file, not its directory");
    }
  }
  unsigned char addr[sizeof(in6_addr)];
  if (::inet_pton(AF_INET, c.listen_address.c_str(), addr) != 1 &&
      ::inet_pton(AF_INET6, c.listen_address.c_str(), addr) != 1) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(c.listen_address.c_str(), nullptr, &hints, &found);
    if (found != nullptr) ::freeaddrinfo(found);
    if (rc != 0) {
      return at("listenaddress", "ListenAddress=" + c.listen_address + ": " + gai_strerror(rc));
    }
  }
  if (auto s = check_slurm_sync(c); !s) return s;
  return setup::check_fabric_files(c);
}

struct Daemon::Impl {
  explicit Impl(const Clock& c) : clock(c) {}
  setup::Config config;
  const Clock& clock;
  std::unique_ptr<db::Store> store;
  FabricMeters fabric_meters;  // outlives the fabric, whose calls it times
  std::unique_ptr<Fabric> fabric;
  std::unique_ptr<LivePool> pool;  // before what works on it, so that it goes after them
  std::unique_ptr<CompositionService> service;
  std::unique_ptr<DeviceAdmin> admin;
  std::unique_ptr<FailureReactor> reactor;
  std::unique_ptr<Reconciler> reconciler;
  std::unique_ptr<Authenticator> auth;
  std::unique_ptr<ApiContext> api;
  std::unique_ptr<PolicyKeeper> policy;
  std::unique_ptr<SlurmSync> slurm;  // SlurmSync=yes
  std::unique_ptr<Metrics> metrics;
  Router router;
  std::unique_ptr<FrontDoor> http;
  std::mutex snapshot_mu;
  std::string last_snapshot;  // content without the timestamp, to skip identical writes
  std::atomic<bool> stopping{false};
  // Zones in the scheduler: the last snapshot had zones (node_zones), and a compose or release
  // has changed what they have free since; the publisher then writes it again within 100 ms
  // rather than at the end of the interval, so that job_submit sees a zone run dry at once.
  std::atomic<bool> zones_published{false};
  std::atomic<bool> zones_changed{false};
};

Status prepare_state(const setup::Config& config) {
  auto owner = state_owner(config);
  if (!owner) return owner.error();
  return prepare_state_dir(config.state_dir, *owner);
}

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Daemon::~Daemon() {
  stop();
  if (impl_->reconciler) impl_->reconciler->stop();
}

Expected<std::unique_ptr<Daemon>> Daemon::create(const setup::Config& config, const Clock& clock,
                                                 LeaderWatch* leader) {
  if (auto s = check_config(config); !s) return s.error();
  auto impl = std::make_unique<Impl>(clock);
  impl->config = config;
  auto owner = state_owner(config);
  if (!owner) return owner.error();
  if (auto s = prepare_state(config); !s) return s.error();
  const bool on_sqlite = config.state_backend != "postgresql";
  if (on_sqlite) {
    if (auto s = create_private_file(config.database, *owner); !s) return s.error();
  }

  auto admins = resolve_users(config.admin_users);
  if (!admins) return admins.error();
  auto composers = resolve_users(config.compose_users, "ComposeUsers");
  if (!composers) return composers.error();
  impl->auth = std::make_unique<Authenticator>(config.munge_socket, *admins, *composers);

  if (on_sqlite) {
    if (auto s = writable_database(config.database); !s) return s.error();
    db::StoreOptions opts;
    opts.durable = config.durable;
    auto store = db::Store::open(config.database, opts);
    if (!store) {
      return Error{store.error().code,
                   "opening the database " + config.database + ": " + store.error().message};
    }
    impl->store = std::move(store).value();
  } else {
    auto url = state_url(config);
    if (!url) return url.error();
    // The connection string is never in a message: it may hold a password.
    auto store = db::Store::open_postgresql(*url);
    if (!store) {
      return Error{store.error().code, "opening the PostgreSQL store (StateBackend=postgresql): " +
                                           store.error().message};
    }
    impl->store = std::move(store).value();
  }

  // With a leadership, every write commits only under its epoch, and each driver tells the
  // fabric manager the epoch and changes nothing once the leadership is lost.
  setup::Config drivers = config;
  setup::WrapDriver wrap = metered_drivers(impl->fabric_meters);
  if (leader != nullptr) {
    impl->store->fence(leader->epoch(), leader->lease_ms());
    // The drivers ask again as each change leaves: a composerd stopped in the middle of a
    // change sends nothing once it runs again (tests/ha, composerd-freeze).
    auto may_change = [leader] { return leader->held(); };
    drivers.fabric_config.epoch = leader->epoch();
    drivers.fabric_config.may_change = may_change;
    for (setup::FabricSpec& f : drivers.fabrics) {
      f.config.epoch = leader->epoch();
      f.config.may_change = may_change;
    }
    wrap = [metered = std::move(wrap), leader](std::unique_ptr<Fabric> driver,
                                               const std::string& name,
                                               const setup::FabricConfig& f) {
      return std::unique_ptr<Fabric>(std::make_unique<FencedFabric>(
          metered(std::move(driver), name, f), [leader] { return leader->held(); }));
    };
  }
  auto fabric = setup::make_fabric(drivers, wrap);
  if (!fabric) return fabric.error();
  impl->fabric = std::move(fabric).value();

  ServiceOptions sopts;
  sopts.compose_timeout_ms = config.compose_timeout_ms;
  sopts.release_timeout_ms = config.release_timeout_ms;
  sopts.max_fabric_operations = static_cast<size_t>(config.max_fabric_operations);
  // The poller asks a fabric manager how its operations stand no more often than it allows
  // (FabricPollInterval); the sim answers in memory.
  std::vector<int64_t> intervals;
  if (config.fabrics.empty() && config.fabric != "sim") {
    intervals.push_back(config.fabric_config.poll_interval_ms);
  }
  for (const auto& f : config.fabrics) {
    if (f.driver != "sim") intervals.push_back(f.config.poll_interval_ms);
  }
  if (!intervals.empty()) {
    sopts.poll_interval_ms = *std::min_element(intervals.begin(), intervals.end());
  }
  impl->pool = std::make_unique<LivePool>(*impl->store, clock);
  impl->service =
      std::make_unique<CompositionService>(*impl->store, *impl->fabric, *impl->pool, clock, sopts);
  impl->admin = std::make_unique<DeviceAdmin>(*impl->service, *impl->pool, clock);
  if (auto s = impl->service->start(); !s) {
    const std::string where =
        on_sqlite ? "the database " + config.database : "the PostgreSQL store";
    return Error{s.error().code, where + ": " + s.error().message};
  }
  if (leader != nullptr) {
    if (auto s = record_takeover(*impl->store, *leader, clock); !s) return s.error();
  }
  auto recovered = impl->service->recover();
  if (!recovered) return recovered.error();
  if (*recovered > 0) {
    log::warning("settled compositions left unfinished by the previous run",
                 {{"count", std::to_string(*recovered)}});
  }

  impl->policy = std::make_unique<PolicyKeeper>(*impl->store, *impl->pool, clock, config.workloads);
  impl->policy->set_domain_levels(config.domain_levels);
  if (auto s = impl->policy->load(); !s) return s.error();
  impl->pool->set_admission_check(impl->policy->admission_check());
  if (config.slurm_sync) {
    impl->slurm = std::make_unique<SlurmSync>(
        *impl->pool, *impl->policy, clock,
        SlurmSyncOptions{.scontrol = config.slurm_scontrol,
                         .slurm_conf = config.slurm_conf,
                         .interval_ms = config.reconcile_interval_ms,
                         .remote_licenses = config.slurm_remote_licenses,
                         .license_server = config.slurm_license_server,
                         .cluster = config.slurm_cluster,
                         .sacctmgr = config.slurm_sacctmgr});
  }

  ReconcilerOptions ropts;
  ropts.interval_ms = config.reconcile_interval_ms;
  ropts.orphan_grace_ms = config.orphan_grace_ms;
  ropts.stuck_after_ms = config.stuck_after_ms;
  if (config.slurm_job_check) {
    ropts.active_jobs = [conf = config.slurm_conf] {
      return slurm_active_jobs("squeue", conf, 10000);
    };
    ropts.drained_nodes = [conf = config.slurm_conf] {
      return slurm_drained_nodes("sinfo", conf, 10000);
    };
  }
  impl->reactor = std::make_unique<FailureReactor>(
      *impl->pool, *impl->store,
      [keeper = impl->policy.get()](std::string_view workload) {
        return keeper->reaction(workload);
      },
      config.slurm_job_check || config.slurm_sync
          ? scontrol_job_actions(config.slurm_scontrol, config.slurm_conf, 10000)
          : no_slurm_job_actions(),
      clock);
  ropts.after_pass = [reactor = impl->reactor.get()] { (void)reactor->run_once(); };
  impl->reconciler = std::make_unique<Reconciler>(*impl->service, *impl->pool, clock, ropts);
  impl->metrics =
      std::make_unique<Metrics>(*impl->pool, *impl->service, impl->reconciler.get(),
                                MetricsOptions{.version = COMPOSER_VERSION,
                                               .fabric = config.fabric,
                                               .compose_timeout_ms = config.compose_timeout_ms,
                                               .release_timeout_ms = config.release_timeout_ms,
                                               .fabrics = &impl->fabric_meters},
                                clock);
  impl->metrics->set_policy_windows(
      [keeper = impl->policy.get()] { return keeper->windows_in_force(); });
  impl->metrics->set_store_writes([store = impl->store.get()] { return store->write_stats(); });
  impl->metrics->set_failure_reactions([reactor = impl->reactor.get()] {
    const FailureReactor::Report t = reactor->totals();
    return Metrics::ReactionFigures{.requeued = static_cast<uint64_t>(t.requeued),
                                    .degraded = static_cast<uint64_t>(t.notified),
                                    .ignored = static_cast<uint64_t>(t.ignored)};
  });
  if (leader != nullptr) {
    impl->metrics->set_leadership([leader] { return leader->metrics(); });
  }
  if (impl->slurm) {
    impl->metrics->set_slurm_sync([sync = impl->slurm.get()] {
      return Metrics::SlurmSyncFigures{.recreated = sync->drift_recreated(),
                                       .updated = sync->drift_updated(),
                                       .in_step = sync->in_step()};
    });
  }

  std::unique_ptr<Daemon> daemon(new Daemon(std::move(impl)));
  Daemon* self = daemon.get();
  auto& in = *daemon->impl_;
  in.api = std::make_unique<ApiContext>(ApiContext{
      .service = *in.service,
      .admin = *in.admin,
      .pool = *in.pool,
      .auth = *in.auth,
      .workloads = config.workloads,
      .fabric = config.fabric,
      .version = COMPOSER_VERSION,
      .slurm_licenses = config.slurm_remote_licenses ? "remote" : "local",
      .license_server = config.slurm_remote_licenses ? config.slurm_license_server : "",
      .started_ms = clock.now_ms(),
      .clock = clock,
      .pool_changed =
          [self] {
            self->publish_snapshot();
            if (self->impl_->slurm) self->impl_->slurm->poke();
          },
      .compositions_changed = [self] { self->impl_->zones_changed = true; },
      .snapshot =
          [self] {
            api::PoolSnapshot snap = self->build_snapshot();
            snap.generated_ms = self->impl_->clock.now_ms();
            return snap;
          },
      .metrics = in.metrics.get(),
      .policy = in.policy.get(),
      .slurm = in.slurm.get(),
      .leadership = leader == nullptr ? std::function<void(api::HealthInfo&)>()
                                      : [leader](api::HealthInfo& h) { leader->describe(h); },
  });
  install_routes(in.router, *in.api);
  const FrontDoorLimits limits{
      .header_bytes = static_cast<size_t>(config.api_max_header_bytes),
      .header_fields = static_cast<size_t>(config.api_max_headers),
      .body_bytes = static_cast<size_t>(config.api_max_body_bytes),
      .request_timeout_ms = config.api_request_timeout_ms,
      .idle_timeout_ms = config.api_idle_timeout_ms,
      .max_connections = static_cast<size_t>(config.api_max_connections),
      .max_connections_per_peer = static_cast<size_t>(config.api_max_connections_per_peer),
      .workers = static_cast<size_t>(config.api_threads),
  };
  // Counted just before the answer goes out, so that a client's next request sees it.
  auto answered = [&in](const HttpRequest& req, const HttpResponse& res) {
    if (!req.method.empty()) in.metrics->count_request(req.method, req.path, res.status);
    const auto level = res.status >= 500 ? log::Level::kError : log::Level::kDebug;
    if (log::level() <= level) {
      log::write(
          level, "api",
          {{"method", req.method}, {"path", req.path}, {"status", std::to_string(res.status)}});
    }
  };
  in.http = std::make_unique<FrontDoor>(
      limits, [&in](HttpRequest& req, const HttpReply& reply) { in.router.answer(req, reply); },
      &Router::refusal, std::move(answered));
  daemon->publish_snapshot();
  return daemon;
}

api::PoolSnapshot Daemon::build_snapshot() const {
  auto& in = *impl_;
  api::PoolSnapshot snap = api::make_snapshot(in.pool->pool_summary(), in.pool->hosts(), 0);
  // What job_submit needs to refuse a placement rule a job can never meet.
  for (const auto& [type, domains] : in.pool->failure_domains()) {
    for (const FailureDomain& d : domains) ++snap.pool(type).domains[d.level];
  }
  if (in.slurm) snap.model_licenses = in.slurm->model_licenses();
  if (in.config.slurm_remote_licenses) snap.license_server = in.config.slurm_license_server;
  if (!in.policy->fill_snapshot(snap)) {
    for (const auto& w : in.config.workloads) {
      api::WorkloadClass wc;
      wc.name = w;
      snap.workload_classes.push_back(wc);
    }
  }
  return snap;
}

void Daemon::publish_snapshot() {
  auto& in = *impl_;
  api::PoolSnapshot snap = build_snapshot();
  in.zones_published = !snap.node_zones.empty();
  std::lock_guard lock(in.snapshot_mu);
  const std::string content = api::to_text(api::to_json(snap));
  snap.generated_ms = in.clock.now_ms();
  if (auto s = api::write_snapshot(in.config.snapshot, snap); !s) {
    log::error("cannot publish the pool snapshot",
               {{"path", in.config.snapshot}, {"cause", s.error().message}});
    return;
  }
  if (content != in.last_snapshot) {
    log::info("pool snapshot published", {{"path", in.config.snapshot}});
    in.last_snapshot = content;
  }
}

Status Daemon::run() {
  auto& in = *impl_;
  if (in.stopping.load()) return Status::Ok();
  if (auto s = in.http->bind(in.config.listen_address, in.config.listen_port); !s) return s;
  if (!in.config.listen_socket.empty()) {
    if (auto s = in.http->bind_local(in.config.listen_socket); !s) return s;
  }
  in.reconciler->start();
  if (in.slurm) in.slurm->start();
  // Republish the snapshot with each reconciler pass's view, so its age shows liveness, and
  // soon after a compose or release where it carries zones (ComposerdZones.*).
  std::thread publisher([this] {
    name_this_thread("snapshot");
    auto& i = *impl_;
    while (!i.stopping.load()) {
      for (int64_t waited = 0; waited < i.config.reconcile_interval_ms && !i.stopping.load();
           waited += 100) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (i.zones_published.load() && i.zones_changed.exchange(false)) break;
      }
      if (!i.stopping.load()) publish_snapshot();
    }
  });
  log::info(
      "composerd listening",
      {{"address", in.config.listen_address},
       {"port", std::to_string(in.config.listen_port)},
       {"socket", in.config.listen_socket},
       {"fabric", in.config.fabric},
       {"database", in.config.state_backend == "postgresql" ? "postgresql" : in.config.database}});
  service_manager::ready("serving the API on " + in.config.listen_address + ":" +
                         std::to_string(in.config.listen_port));
  in.http->run();
  service_manager::stopping();
  in.stopping = true;
  publisher.join();
  if (in.slurm) in.slurm->stop();
  in.reconciler->stop();
  log::info("composerd stopped");
  return Status::Ok();
}

void Daemon::stop() {
  impl_->stopping = true;
  if (impl_->http) impl_->http->stop();
}

}  // namespace composer::server
