// What every driver that talks to a fabric manager over the network (redfish, liqid) is given
// to reach it, and the one set of checks of those settings. composerd fills them from
// composer.conf's Fabric* keys (composer/setup/src/fabric_setup.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "composer/common/error.h"

namespace composer::drivers {

struct FabricManagerOptions {
  // http(s)://HOST[:PORT] of the fabric manager, without credentials or path (the driver adds
  // its API root).
  std::string base_url;
  // Credentials: either here, or in credentials_file ("username=" and "password=" lines,
  // owned by root or the daemon's user, mode 600; see credentials.h). They never appear in
  // logs or errors.
  std::string username;
  std::string password;
  std::string credentials_file;
  // TLS: a CA bundle to trust instead of the system's (empty: the system's), and whether the
  // manager's certificate and host name are checked at all.
  std::string ca_file;
  bool verify_tls = true;
  long connect_timeout_ms = 2000;
  long request_timeout_ms = 10000;
  int get_retries = 2;  // only reads (GET) are retried; nothing that changes the fabric is
  // The manager's host name -> Slurm node. When not empty, hosts not in it are ignored.
  std::map<std::string, std::string> host_map;
  // Attach slots per type where the manager publishes no limit.
  uint32_t default_slots = 8;
  // Above 0: the leadership epoch of the composerd that runs the driver (several composerd on
  // one PostgreSQL store), sent as "X-Composer-Epoch: N" with every request that changes the
  // fabric, so a fabric manager (or a test's) can tell which epoch asked.
  int64_t epoch = 0;
  // When set, asked as each request that changes the fabric is sent (after the reads that
  // prepare it); false: the request is refused (kUnavailable) before it leaves. composerd's
  // leadership: a composerd stopped after FencedFabric's check, in the middle of a change,
  // finds its lease ran out the moment it runs again and sends nothing
  // (RedfishFabric.SendsNoChangeOnceItMayNoLonger; tests/ha, composerd-freeze).
  std::function<bool()> may_change;
};

// Checks the settings and completes them: trims trailing '/' from base_url and reads the
// credentials file into username and password. `driver` ("redfish") starts every error
// ("redfish options: ..."), `api_root` ("/redfish/v1") is what the driver adds to base_url,
// `host_name` ("system id") is what the driver's host_map is keyed by. Errors name the
// setting that is wrong and never quote the credentials.
Status check_fabric_manager_options(FabricManagerOptions* options, std::string_view driver,
                                    std::string_view api_root, std::string_view host_name);

}  // namespace composer::drivers
