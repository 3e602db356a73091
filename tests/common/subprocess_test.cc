#include "composer/common/subprocess.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace composer {
namespace {

TEST(Subprocess, CollectsStdoutAndTheExitStatus) {
  Expected<RunResult> r = run_program({.argv = {"sh", "-c", "echo out; echo err >&2; exit 3"}});
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->status, 3);
  EXPECT_EQ(r->output, "out\n");
  r = run_program({.argv = {"sh", "-c", "echo out; echo err >&2"}, .with_stderr = true});
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->status, 0);
  EXPECT_EQ(r->output, "out\nerr\n");
}

TEST(Subprocess, SetsAndRemovesEnvironmentEntries) {
  ::setenv("COMPOSER_SUBPROCESS_TEST", "inherited", 1);
  ::setenv("COMPOSER_SUBPROCESS_GONE", "inherited", 1);
  Expected<RunResult> r = run_program(
      {.argv = {"sh", "-c", "echo \"$COMPOSER_SUBPROCESS_TEST ${COMPOSER_SUBPROCESS_GONE-unset}\""},
       .env = {"COMPOSER_SUBPROCESS_TEST=set", "COMPOSER_SUBPROCESS_GONE"}});
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->output, "set unset\n");
  r = run_program({.argv = {"sh", "-c", "echo $COMPOSER_SUBPROCESS_TEST"}});
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->output, "inherited\n");
  ::unsetenv("COMPOSER_SUBPROCESS_TEST");
  ::unsetenv("COMPOSER_SUBPROCESS_GONE");
}

TEST(Subprocess, AProgramThatCannotStartIsUnavailable) {
  Expected<RunResult> r = run_program({.argv = {"/nonexistent/squeue"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(r.error().message, "cannot run /nonexistent/squeue: No such file or directory");
}

TEST(Subprocess, ASlowProgramIsKilledAtTheTimeout) {
  Expected<RunResult> r = run_program({.argv = {"sleep", "10"}, .timeout_ms = 100});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kTimeout);
  EXPECT_EQ(r.error().message, "sleep did not answer within 100 ms");
}

// A program that must succeed: its output, or one sentence with its name, arguments, status
// and what it said, on one line.
TEST(Subprocess, RunCheckedNamesTheFailedCommandAndWhatItSaid) {
  Expected<std::string> ok = run_checked({.argv = {"/bin/sh", "-c", "echo fine"}});
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(*ok, "fine\n");
  Expected<std::string> bad =
      run_checked({.argv = {"/bin/sh", "-c", "echo no such job >&2; echo try again >&2; exit 3"},
                   .with_stderr = true});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(bad.error().message,
            "'sh -c echo no such job >&2; echo try again >&2; exit 3' failed (exit 3): no such "
            "job try again");
  EXPECT_FALSE(run_checked({.argv = {"/nonexistent/scontrol"}}));
}

TEST(Subprocess, ASignalIsReportedAsShellsDo) {
  Expected<RunResult> r = run_program({.argv = {"sh", "-c", "kill -9 $$"}});
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->status, 128 + 9);
}

// An fd opened without close-on-exec (as the HTTP library opens its sockets) stays ours.
TEST(Subprocess, TheProgramGetsNoOtherDescriptorOfOurs) {
  const int fd = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC
  ASSERT_GE(fd, 3);
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  Expected<RunResult> r = run_program({.argv = {"sh", "-c", "test -e " + path + " && echo open"}});
  ::close(fd);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->output, "");
  EXPECT_NE(r->status, 0);
}

}  // namespace
}  // namespace composer
