// Loopback ports for test servers.
#pragma once

namespace composer::test_support {

// A TCP port on 127.0.0.1 that nothing listened on a moment ago (the kernel picked it).
// Another process may take it before the caller binds it; servers that can bind port 0 and
// report the port (httplib's bind_to_any_port) should do that instead.
int free_port();

}  // namespace composer::test_support
