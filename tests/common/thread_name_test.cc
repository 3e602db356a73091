#include "composer/common/thread_name.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <thread>

namespace composer {
namespace {

// What the kernel shows for the calling thread (top -H, ps -L read the same file).
std::string shown_name() {
  std::ifstream in("/proc/self/task/" + std::to_string(::syscall(SYS_gettid)) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

TEST(ThreadName, TheKernelShowsTheNameAndKeepsItsFirstFifteenCharacters) {
  std::string named, long_named;
  std::thread([&] {
    name_this_thread("store-writer");
    named = shown_name();
    name_this_thread("a-name-longer-than-fifteen");
    long_named = shown_name();
  }).join();
  EXPECT_EQ(named, "store-writer");
  EXPECT_EQ(long_named, "a-name-longer-t");
}

}  // namespace
}  // namespace composer
