// Loopback ports for test servers.
#pragma once

namespace composer::test_support {

// A TCP port on 127.0.0.1 that nothing listened on a moment ago (the kernel picked it), and
// that free_port() gives no other test process while this one runs (a lock file under
// /tmp/composer-test-ports), so a server may stop and start again on it. A process that is
// not a test may still take it before the caller binds it; servers that can bind port 0 and
// report the port (httplib's bind_to_any_port) should do that instead.
int free_port();

}  // namespace composer::test_support
