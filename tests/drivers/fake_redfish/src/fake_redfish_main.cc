// fake_redfish: the fake Redfish composition service as a process, for shell tests.
//   fake_redfish [--port N] [--port-file FILE] [--sloppy] [--patch-only] [--task-ms N]
//                [--gpus-per-zone N] [--hosts N] [--username U] [--password P]
//                [--cxl] [--cxl-chunks N] [--host-blocks] [--mockups DIR]
//                [--page-size N] [--root-redirect /|URL] [--broken-capabilities]
//                [--noop-actions] [--old-style-errors] [--login-status N] [--reserve BLOCK]...
//                [--drive-ids VENDOR:DEVICE] [--hot-plug COMMAND] [--memory-mib N]
// The mockups are served whole (pre-composed, shared, multi-zone and SAS blocks as they are);
// the other flags are the options of FakeRedfishOptions of the same names.
// Prints "listening on http://127.0.0.1:PORT" and serves until SIGTERM or SIGINT.
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "composer/testing/fake_redfish.h"

namespace {

bool number(const char* text, int* out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0 || v > 1000000) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  composer::testing::FakeRedfishOptions o;
  std::string port_file;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](int* out) {
      if (i + 1 >= argc || !number(argv[i + 1], out)) {
        std::cerr << "fake_redfish: " << a << " needs a whole number from 0 to 1000000\n";
        std::exit(2);
      }
      ++i;
    };
    int n = 0;
    if (a == "--port") {
      value(&o.port);
    } else if (a == "--task-ms") {
      value(&o.task_ms);
    } else if (a == "--gpus-per-zone") {
      value(&n);
      o.gpus_per_zone = static_cast<uint32_t>(n);
    } else if (a == "--hosts") {
      value(&n);
      o.hosts = static_cast<uint32_t>(n);
    } else if (a == "--memory-mib") {
      value(&n);
      if (n == 0) {
        std::cerr << "fake_redfish: --memory-mib needs a whole number from 1 to 1000000\n";
        return 2;
      }
      o.memory_mib = static_cast<uint32_t>(n);
    } else if (a == "--cxl-chunks") {
      value(&n);
      o.cxl_chunks = static_cast<uint32_t>(n);
    } else if (a == "--page-size") {
      value(&n);
      o.page_size = static_cast<uint32_t>(n);
    } else if (a == "--login-status") {
      value(&o.login_status);
    } else if (a == "--broken-capabilities") {
      o.broken_capabilities = true;
    } else if (a == "--noop-actions") {
      o.noop_actions = true;
    } else if (a == "--old-style-errors") {
      o.old_style_errors = true;
    } else if ((a == "--root-redirect" || a == "--reserve") && i + 1 < argc) {
      if (a == "--reserve") {
        o.reserved.push_back(argv[++i]);
      } else {
        o.root_redirect = argv[++i];
      }
    } else if (a == "--drive-ids" && i + 1 < argc) {
      const std::string ids = argv[++i];
      const size_t colon = ids.find(':');
      auto hex = [](const std::string& t) {
        return t.size() == 6 && t.starts_with("0x") &&
               t.find_first_not_of("0123456789abcdef", 2) == std::string::npos;
      };
      if (colon == std::string::npos || !hex(ids.substr(0, colon)) || !hex(ids.substr(colon + 1))) {
        std::cerr << "fake_redfish: --drive-ids " << ids
                  << ": expected VENDOR:DEVICE as 0x plus four lower-case hex digits each, "
                     "e.g. 0x1b36:0x0010\n";
        return 2;
      }
      o.drive_vendor_id = ids.substr(0, colon);
      o.drive_device_id = ids.substr(colon + 1);
    } else if (a == "--hot-plug" && i + 1 < argc) {
      o.hot_plug = argv[++i];
    } else if (a == "--cxl") {
      o.cxl = true;
    } else if (a == "--host-blocks") {
      o.host_blocks = true;
    } else if (a == "--sloppy") {
      o.sloppy = true;
    } else if (a == "--patch-only") {
      o.patch_only = true;
    } else if ((a == "--username" || a == "--password" || a == "--port-file" || a == "--mockups") &&
               i + 1 < argc) {
      std::string& target = a == "--username"   ? o.username
                            : a == "--password" ? o.password
                            : a == "--mockups"  ? o.mockups
                                                : port_file;
      target = argv[++i];
    } else {
      std::cerr << "fake_redfish: unknown or incomplete argument '" << a
                << "'; allowed: --port N, --port-file FILE, --sloppy, --patch-only, --task-ms N, "
                   "--gpus-per-zone N, --hosts N, --username U, --password P, --mockups DIR, "
                   "--cxl, --cxl-chunks N, --host-blocks, --page-size N, --root-redirect /|URL, "
                   "--broken-capabilities, --noop-actions, --old-style-errors, "
                   "--login-status N, --reserve BLOCK, --drive-ids VENDOR:DEVICE, "
                   "--hot-plug COMMAND, --memory-mib N\n";
      return 2;
    }
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // the server threads inherit the mask
  auto server = composer::testing::FakeRedfish::start(o);
  if (!server) {
    std::cerr << "fake_redfish: " << server.error().message << "\n";
    return 1;
  }
  if (!port_file.empty()) {
    std::ofstream(port_file) << (*server)->port() << "\n";
  }
  std::cout << "listening on " << (*server)->base_url() << std::endl;
  int sig = 0;
  sigwait(&set, &sig);
  return 0;
}
