// composer.conf: slurm.conf's Key=Value style, one setting or one object per line.
//
//   ListenAddress=127.0.0.1
//   ListenPort=6830
//   StateDir=/var/lib/slurm-composer
//   AdminUsers=root
//   ComposeUsers=slurm
//   Workloads=training,inference
//   Fabric=sim
//   NodeName=node[01-04] Zones=z1,z2 GpuSlots=8 MemSlots=16 NvmeSlots=4
//   DeviceGroup=gpu-a Type=gpu Model=A100-80G Zone=z1 Count=8
//   DeviceGroup=cxl-a Type=mem Model=CXL-DDR5 Zone=z1 Count=16 Size=64G
//
// A real fabric (Fabric=redfish or Fabric=liqid) takes its devices, zones and slots from the
// fabric manager instead: FabricUrl=, FabricCredentials= (a root-only file) and the other
// Fabric* keys below; NodeName lines then only map nodes to fabric hosts (FabricHost=).
//
// Several fabrics: one FabricName line each, carrying the same settings without the word
// Fabric (Driver= is what Fabric= was); NodeName and DeviceGroup lines name their fabric:
//
//   FabricName=pod-a Driver=redfish Url=https://fm-a:8443 Credentials=/etc/slurm/pod-a.cred
//   FabricName=pod-b Driver=liqid Url=https://liqid-b:8080 Credentials=/etc/slurm/pod-b.cred
//   NodeName=node[01-16] Fabric=pod-a
//   NodeName=node17 Fabric=pod-b FabricHost=machine-17
//
// Then every device, zone and fabric host id is qualified by its fabric ("pod-a:GPU-3"), so
// two fabrics may use the same names (see composer/drivers/multi_fabric.h).
//
// Keys are case-insensitive, as in slurm.conf; '#' starts a comment. An unknown key or a bad
// value refuses the whole file with a sentence naming the file, line, key and rule. The
// grammar, the typed values and the keys shared with the job_submit plugin (StateDir,
// SnapshotFile) are composer/config's, which the plugin reads the file with too.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "composer/common/log.h"
#include "composer/config/conf_file.h"
#include "composer/config/shared_keys.h"
#include "composer/drivers/sim_fabric.h"

namespace composer::setup {

inline constexpr const char* kDefaultConfigPath = config::kDefaultPath;
inline constexpr int kDefaultPort = config::kDefaultListenPort;

// The Fabric* keys: how composerd reaches a real fabric manager. Unused by Fabric=sim.
struct FabricConfig {
  std::string name;                    // FabricName: a label for logs and errors
  std::string url;                     // FabricUrl: http(s)://HOST[:PORT]
  std::string credentials_file;        // FabricCredentials: root-only username=/password= file
  std::string auth;                    // FabricAuth: session|basic (redfish), apikey|basic (liqid)
  std::string ca_file;                 // FabricCaFile
  bool verify_tls = true;              // FabricVerifyTls
  int64_t connect_timeout_ms = 2000;   // FabricConnectTimeout
  int64_t request_timeout_ms = 10000;  // FabricTimeout, per request
  int64_t poll_interval_ms = 200;      // FabricPollInterval: redfish task monitors
  // FabricTaskWait: redfish tasks waited for inside one call; 0: the call answers at once and
  // composerd's one poller follows the task (no thread waits for it).
  int64_t task_wait_ms = 0;
  bool use_host_name = false;  // FabricNodeNames=hostname (redfish HostName)
  uint32_t slots = 8;          // FabricSlots: attach slots when the fabric gives none
  // Fabric host id -> Slurm node, from NodeName lines; empty: every fabric host is served.
  std::map<std::string, std::string> host_map;
  // Not keys: the leadership epoch composerd runs the driver under, and whether it still may
  // change the fabric (FabricManagerOptions).
  int64_t epoch = 0;
  std::function<bool()> may_change;
};

// One FabricName line.
struct FabricSpec {
  int line = 0;
  std::string name;     // FabricName=
  std::string driver;   // Driver=sim|redfish|liqid
  FabricConfig config;  // Url=, Credentials=, ...; host_map from its NodeName lines
  SimConfig sim;        // Driver=sim: its NodeName and DeviceGroup lines, SimLatency
};

struct Config {
  // AdvertiseUrl=, or the URL derived from ListenAddress= and ListenPort=.
  std::string advertised_url() const;

  std::string path;  // where it was read from
  std::string listen_address = config::kDefaultListenAddress;
  int listen_port = kDefaultPort;
  std::string state_dir = config::kDefaultStateDir;
  // StateGroup=: a group that may read StateDir and the database (0750, 0640); empty: only
  // composerd's user (0700, 0600).
  std::string state_group;
  std::string database;  // default: <state_dir>/composer.db
  // StateBackend=: where the store lives. sqlite (the default) is `database`; postgresql is
  // a PostgreSQL database reached with a libpq connection string, given in StateUrlFile= (a
  // root/composer-only file, as FabricCredentials=) or, for a string without a password,
  // StateUrl=. composerd never logs nor prints the string.
  std::string state_backend = "sqlite";
  std::string state_url;
  std::string state_url_file;
  // With StateBackend=postgresql several composerd may share the store, one of them active
  // (db/leadership.h). AdvertiseUrl=: the URL the others name to clients while this one is
  // active; empty: http://<ListenAddress, or the host name for a wildcard>:<ListenPort>
  // (advertised_url()). LeaderLease=: seconds a stopped or cut-off active composerd keeps the
  // leadership before another may take it over.
  std::string advertise_url;
  int64_t leader_lease_ms = 5000;
  std::string snapshot;  // default: <state_dir>/snapshot.json
  std::string log_file;  // empty: stderr
  log::Level log_level = log::Level::kInfo;
  std::vector<std::string> admin_users{"root"};
  // ComposeUsers=: who may compose and release jobs (PUT and DELETE /v1/compositions) beside
  // root and AdminUsers: slurmd's prologs run as root, composer-slurmctld as SlurmUser.
  std::vector<std::string> compose_users{};
  // ListenSocket=: a Unix socket on this host beside the TCP port, for local callers
  // (composer-slurmctld, composerctl); the kernel tells who calls (SO_PEERCRED). Empty: none.
  std::string listen_socket;
  std::vector<std::string> workloads{"training", "inference"};
  // DomainLevels=: the failure-domain levels (enclosure, switch, appliance, power, ...) that
  // Domains= options and placement rules may name, in the order they are shown.
  std::vector<std::string> domain_levels;
  std::string munge_socket;  // empty: munge's default
  int api_threads = 64;
  // The front door's limits (front_door.h): one client cannot use them to starve the others.
  int api_max_connections = 2048;           // open connections in all
  int api_max_connections_per_peer = 1024;  // from one client address
  int api_max_header_bytes = 32768;         // request line and header fields
  int api_max_headers = 100;                // header fields
  int api_max_body_bytes = 1 << 20;         // a body, whatever its transfer encoding
  int64_t api_request_timeout_ms = 30000;   // reading one request, writing one answer
  int64_t api_idle_timeout_ms = 60000;      // a keep-alive connection between requests
  int64_t compose_timeout_ms = 60000;
  int64_t release_timeout_ms = 60000;
  // Attaches and detaches running at once on each fabric; more wait their turn in a queue. As
  // many as one peer may send requests at once (api_max_connections_per_peer): a job array's
  // prologs, all from slurmctld's host, reach the fabric in one wave (setup's composer_conf_test,
  // TheDefaultFabricLimitTakesABurstFromOnePeerAtOnce).
  int max_fabric_operations = 1024;
  int64_t reconcile_interval_ms = 10000;
  int64_t orphan_grace_ms = 60000;
  int64_t stuck_after_ms = 180000;
  bool durable = true;  // synchronous=FULL on the ledger
  // Release the devices of jobs squeue no longer lists (after OrphanGrace).
  bool slurm_job_check = true;
  std::string slurm_conf;  // SLURM_CONF for squeue and scontrol; empty: their default
  // SlurmSync=yes: composerd keeps Slurm's hold and blocker reservations in step with the
  // pool and the policy (slurm_sync.h), with this scontrol (SlurmScontrol=; PATH's without /).
  bool slurm_sync = false;
  std::string slurm_scontrol = "scontrol";
  // SlurmLicenses=remote: the pool's and the models' licenses are slurmdbd resources
  // (NAME@SlurmLicenseServer, for SlurmCluster) whose counts composerd sets with this sacctmgr
  // (SlurmSacctmgr=), instead of slurm.conf licenses held down by reservations (local).
  bool slurm_remote_licenses = false;
  std::string slurm_license_server = "composer";
  std::string slurm_cluster;
  std::string slurm_sacctmgr = "sacctmgr";
  // The driver: sim, redfish or liqid; with FabricName lines, "NAME=DRIVER,..." of them.
  std::string fabric = "sim";
  FabricConfig fabric_config;
  SimConfig sim;  // hosts (NodeName lines) and, for the sim fabric, DeviceGroup lines
  // FabricName lines, in file order; empty when the file uses Fabric= and the Fabric* keys.
  std::vector<FabricSpec> fabrics;
  // The line each setting was given on, by its lower-case key ("adminusers"); absent: the
  // default.
  std::map<std::string, int> lines;

  // The line `key` (lower-case) was set on, 0 when it was not given.
  int line_of(const std::string& key) const {
    auto it = lines.find(key);
    return it == lines.end() ? 0 : it->second;
  }
};

// Where a simulated fabric keeps its attachments: DATABASE.sim, or DATABASE.sim-NAME for the
// fabric of a FabricName line (SimConfig::state_file).
std::string sim_state_file(const std::string& database, const std::string& fabric_name);

Expected<Config> parse_config(std::string_view text, const std::string& path);
Expected<Config> load_config(const std::string& path);

}  // namespace composer::setup
