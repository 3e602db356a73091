#include "composer/server/service_manager.h"

#include <systemd/sd-daemon.h>
#include <time.h>

#include <cstdint>

#include "composer/common/log.h"

namespace composer::server::service_manager {
namespace {

void notify(const std::string& state) {
  // < 0: the socket named by NOTIFY_SOCKET did not take the message; 0: none is set.
  if (int r = sd_notify(0, state.c_str()); r < 0) {
    log::warning("cannot notify the service manager",
                 {{"state", state}, {"errno", std::to_string(-r)}});
  }
}

}  // namespace

void ready(const std::string& status) { notify("READY=1\nSTATUS=" + status); }

void reloading() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const uint64_t usec =
      static_cast<uint64_t>(now.tv_sec) * 1000000 + static_cast<uint64_t>(now.tv_nsec) / 1000;
  notify("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec));
}

void stopping() { notify("STOPPING=1\nSTATUS=shutting down"); }

}  // namespace composer::server::service_manager
