// The name a thread shows in top -H, ps -L, /proc/PID/task/TID/comm, gdb and perf: which part
// of composerd it is (its writer, its API workers, its fabric waiter), not the process name for
// all of them.
#pragma once

#include <string_view>

namespace composer {

// Names the calling thread; the kernel keeps the first 15 characters. Nothing happens where
// it cannot be named.
void name_this_thread(std::string_view name);

}  // namespace composer
