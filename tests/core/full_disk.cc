// The composition service when the disk under its database fills between two writes: memory
// and the store must keep saying the same thing. The database lives on a small tmpfs that this
// test mounts in a mount namespace of its own (root only: the tests skip otherwise), and the
// disk is filled by a real file at the moment the fabric is asked to attach or detach.
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "composer/common/units.h"
#include "composer/core/forwarding_fabric.h"
#include "composer/core/service.h"
#include "composer/db/store.h"
#include "composer/drivers/sim_fabric.h"
#include "composer/test_support/temp_dir.h"
#include "service_fixture.h"

namespace composer::testing {
namespace {

bool g_private_mounts = false;  // set by main() once this process has its own mount namespace

// The sim fabric, with a hook run just before each attach or detach is passed on.
class HookedFabric : public ForwardingFabric {
 public:
  using ForwardingFabric::ForwardingFabric;
  std::function<void()> before_attach;
  std::function<void()> before_detach;
  Expected<Operation> attach(const std::string& host,
                             const std::vector<std::string>& ids) override {
    if (before_attach) before_attach();
    return inner_.attach(host, ids);
  }
  Expected<Operation> detach(const std::string& host,
                             const std::vector<std::string>& ids) override {
    if (before_detach) before_detach();
    return inner_.detach(host, ids);
  }
};

class FullDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!g_private_mounts) GTEST_SKIP() << "needs root, to mount a small tmpfs of its own";
    disk_ = dir_.path() / "disk";
    std::filesystem::create_directory(disk_);
    ASSERT_EQ(::mount("composer-full-disk", disk_.c_str(), "tmpfs", 0, "size=8m,mode=0700"), 0)
        << std::strerror(errno);
    mounted_ = true;
    auto store =
        db::Store::open((disk_ / "composer.db").string(), db::StoreOptions{.durable = true});
    ASSERT_TRUE(store.ok()) << store.error();
    store_ = std::move(store).value();
    auto sim = SimFabric::create(small_fabric(), clock_);
    ASSERT_TRUE(sim.ok()) << sim.error();
    sim_ = std::move(sim).value();
    fabric_ = std::make_unique<HookedFabric>(*sim_);
    pool_ = std::make_unique<LivePool>(*store_, clock_);
    service_ = std::make_unique<CompositionService>(
        *store_, *fabric_, *pool_, clock_,
        ServiceOptions{
            .compose_timeout_ms = 2000, .release_timeout_ms = 2000, .poll_interval_ms = 1});
    auto started = service_->start();
    ASSERT_TRUE(started.ok()) << started.error();
  }

  void TearDown() override {
    service_.reset();
    pool_.reset();
    store_.reset();
    if (mounted_) ::umount2(disk_.c_str(), MNT_DETACH);
  }

  // Fills the file system with one file until nothing more fits.
  void fill_disk() {
    const int fd = ::open((disk_ / "filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    std::vector<char> block(64 * 1024, 'x');
    for (size_t size = block.size(); size > 0; size /= 2) {
      while (::write(fd, block.data(), size) == static_cast<ssize_t>(size)) {
      }
    }
    ::close(fd);
  }
  void free_disk() { std::filesystem::remove(disk_ / "filler"); }

  uint32_t free_gpus() {
    uint32_t n = 0;
    for (const auto& row : pool_->pool_summary()) {
      if (row.type == DeviceType::kGpu) n += row.free;
    }
    return n;
  }

  static ComposeInput job(uint32_t id, Request r) {
    return ComposeInput{.owner = {.job_id = id,
                                  .uid = 1000,
                                  .user = "alice",
                                  .account = "physics",
                                  .workload = "training"},
                        .node = "n1",
                        .request = r};
  }

  test_support::TempDir dir_{"full-disk-test"};
  std::filesystem::path disk_;
  bool mounted_ = false;
  ManualClock clock_{1'700'000'000'000};
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<SimFabric> sim_;
  std::unique_ptr<HookedFabric> fabric_;
  std::unique_ptr<LivePool> pool_;
  std::unique_ptr<CompositionService> service_;
};

TEST_F(FullDiskTest, AComposeCutOffByAFullDiskKeepsItsDevicesUntilTheStoreSettlesIt) {
  fabric_->before_attach = [this] { fill_disk(); };
  auto c = service_->compose(job(21, Request{.gpus = 2}));
  ASSERT_FALSE(c.ok()) << "the ready write cannot have succeeded on a full disk";
  fabric_->before_attach = nullptr;

  // The store still has the composition composing, with both devices linked ...
  auto live = store_->live_composition(21, "n1");
  ASSERT_TRUE(live.ok()) << live.error();
  ASSERT_TRUE(live->has_value());
  EXPECT_EQ((*live)->state, CompositionState::kComposing);
  ASSERT_EQ((*live)->devices.size(), 2u);
  // ... so memory does not hand them out: the pool shows them taken.
  EXPECT_EQ(free_gpus(), 6u);
  EXPECT_TRUE(sim_->inventory()->attached.empty()) << "the attach was undone on the fabric";

  // Another job gets other devices, never the linked ones (no "already belongs" refusal).
  free_disk();
  auto other = service_->compose(job(22, Request{.gpus = 6}));
  ASSERT_TRUE(other.ok()) << other.error();
  for (const auto& d : other->devices) {
    for (const auto& linked : (*live)->devices) EXPECT_NE(d.id, linked.id);
  }

  // Once the disk has room, a release settles it: failed in the store, devices free again.
  auto released = service_->release(21, "n1");
  ASSERT_TRUE(released.ok()) << released.error();
  ASSERT_TRUE(released->has_value());
  EXPECT_EQ((*released)->state, CompositionState::kFailed);
  EXPECT_EQ(free_gpus(), 2u);
  auto none = store_->live_composition(21, "n1");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(service_->release(22, "n1").ok());
  EXPECT_EQ(free_gpus(), 8u);
}

TEST_F(FullDiskTest, TheReconcilersRollBackWaitsForTheDiskAndThenFrees) {
  fabric_->before_attach = [this] { fill_disk(); };
  ASSERT_FALSE(service_->compose(job(23, Request{.gpus = 1})).ok());
  fabric_->before_attach = nullptr;
  auto live = store_->live_composition(23, "n1");
  ASSERT_TRUE(live.ok() && live->has_value());
  const int64_t id = (*live)->id;

  // Still full: the roll-back cannot be recorded, so nothing changes in memory either.
  EXPECT_FALSE(service_->resolve_unfinished(id, true, nullptr).ok());
  EXPECT_EQ(free_gpus(), 7u);
  auto still = store_->live_composition(23, "n1");
  ASSERT_TRUE(still.ok() && still->has_value());
  EXPECT_EQ((*still)->state, CompositionState::kComposing);

  free_disk();
  ASSERT_TRUE(service_->resolve_unfinished(id, true, nullptr).ok());
  EXPECT_EQ(free_gpus(), 8u);
  auto done = store_->composition(id);
  ASSERT_TRUE(done.ok()) << done.error();
  EXPECT_EQ(done->state, CompositionState::kFailed);
}

TEST_F(FullDiskTest, AReleaseThatGivesUpOnAFullDiskStaysReleasing) {
  ASSERT_TRUE(service_->compose(job(24, Request{.gpus = 1})).ok());
  sim_->fail_next_detaches(1, "switch busy");
  ASSERT_FALSE(service_->release(24, "n1").ok());  // releasing, to be retried
  auto live = store_->live_composition(24, "n1");
  ASSERT_TRUE(live.ok() && live->has_value());
  ASSERT_EQ((*live)->state, CompositionState::kReleasing);
  const int64_t id = (*live)->id;

  // The reconciler gives up while the disk is full: the failed state cannot be written.
  sim_->fail_next_detaches(1, "switch busy");
  fabric_->before_detach = [this] { fill_disk(); };
  EXPECT_FALSE(service_->resolve_unfinished(id, true, nullptr).ok());
  fabric_->before_detach = nullptr;
  auto still = store_->live_composition(24, "n1");
  ASSERT_TRUE(still.ok() && still->has_value());
  EXPECT_EQ((*still)->state, CompositionState::kReleasing);
  EXPECT_EQ(free_gpus(), 7u);

  // With room again, the next round settles it, the same way as without a full disk.
  free_disk();
  ASSERT_TRUE(service_->resolve_unfinished(id, false, nullptr).ok());
  auto done = store_->composition(id);
  ASSERT_TRUE(done.ok()) << done.error();
  EXPECT_EQ(done->state, CompositionState::kReleased);
  EXPECT_EQ(free_gpus(), 8u);
}

}  // namespace
}  // namespace composer::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // A mount namespace of its own, before any thread exists: the tmpfs is gone when it exits.
  if (::geteuid() == 0 && ::unshare(CLONE_NEWNS) == 0 &&
      ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0) {
    composer::testing::g_private_mounts = true;
  }
  return RUN_ALL_TESTS();
}
