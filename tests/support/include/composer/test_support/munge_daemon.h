// A private munged for one test: its own key, socket, seed and log in a temporary directory,
// so tests neither need nor disturb the machine's munge. Credentials it issues decode only
// through the same socket.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "composer/common/error.h"
#include "composer/test_support/temp_dir.h"

namespace composer::test_support {

class MungeDaemon {
 public:
  // Starts munged in the foreground as a child process and waits (up to 10 s) until its socket
  // issues a credential. The binary is $COMPOSER_MUNGED, else munged on $PATH, /usr/sbin or
  // /sbin. Errors name what failed and quote munged's log.
  static Expected<std::unique_ptr<MungeDaemon>> start();

  // Stops the daemon by its pid (SIGTERM, then SIGKILL after 5 s) and removes its directory.
  ~MungeDaemon();
  MungeDaemon(const MungeDaemon&) = delete;
  MungeDaemon& operator=(const MungeDaemon&) = delete;

  const std::string& socket_path() const { return socket_; }
  pid_t pid() const { return pid_; }
  // What munged wrote so far (its stderr and stdout).
  std::string log() const;

 private:
  MungeDaemon();

  TempDir dir_;
  std::string socket_;
  std::string log_file_;
  pid_t pid_ = -1;
};

}  // namespace composer::test_support
