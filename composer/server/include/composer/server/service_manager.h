// What composerd tells the service manager that started it, by systemd's notification
// protocol (sd_notify(3), libsystemd): ready once it listens (composerd.service is
// Type=notify, so units ordered after it start only then), reloading while SIGHUP re-reads
// composer.conf, stopping once it shuts down. Where nothing listens (NOTIFY_SOCKET unset: run
// by hand, by a test, by another init) each call does nothing.
#pragma once

#include <string>

namespace composer::server::service_manager {

// READY=1 with a STATUS= line for `systemctl status`.
void ready(const std::string& status);
// RELOADING=1 (with the MONOTONIC_USEC= that Type=notify-reload asks for), then ready() again
// once the reload is done.
void reloading();
void stopping();

}  // namespace composer::server::service_manager
