// The Store's behaviour on a real SQLite file: inventory, the composition lifecycle and its
// ledger, the invariants the schema enforces, and the filters.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "pg_statements.h"
#include "store_fixture.h"

namespace composer::db::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using S = CompositionState;

std::vector<std::string> ids_of(const std::vector<Device>& devices) {
  std::vector<std::string> ids;
  for (const auto& d : devices) ids.push_back(d.id);
  return ids;
}

std::vector<std::string> kinds_of(const std::vector<Event>& events) {
  std::vector<std::string> kinds;
  for (const auto& e : events) kinds.push_back(e.kind);
  return kinds;
}

// --- Inventory ------------------------------------------------------------------------------

TEST_P(BackendTest, UpsertAddsThenUpdatesHostsAndDevices) {
  add_inventory();
  auto hosts = store().hosts();
  ASSERT_TRUE(hosts.ok()) << hosts.error();
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[0].node, "node1");
  EXPECT_THAT((*hosts)[0].zones, ElementsAre("z1", "z2"));
  EXPECT_EQ((*hosts)[0].mem_slots, 4u);

  Host changed = make_host("node1");
  changed.zones = {"z2"};
  changed.gpu_slots = 2;
  ASSERT_TRUE(store().upsert_hosts({changed}).ok());
  hosts = store().hosts();
  ASSERT_TRUE(hosts.ok());
  EXPECT_EQ(hosts->size(), 3u);
  EXPECT_THAT((*hosts)[0].zones, ElementsAre("z2"));
  EXPECT_EQ((*hosts)[0].gpu_slots, 2u);

  auto mem = store().device("mem-0");
  ASSERT_TRUE(mem.ok()) << mem.error();
  EXPECT_EQ(mem->type, DeviceType::kMem);
  EXPECT_EQ(mem->capacity_bytes, uint64_t{64} << 30);
  EXPECT_EQ(mem->state(), DeviceState::kFree);
}

// Pages: ids after the cursor, at most `limit`, in id order, with the filters applied.
TEST_P(BackendTest, DevicesComeInPagesAfterACursor) {
  add_inventory();
  auto all = store().devices();
  ASSERT_TRUE(all.ok()) << all.error();
  ASSERT_GE(all->size(), 4u);
  std::vector<std::string> paged;
  std::optional<std::string> after;
  for (int i = 0; i < 100; ++i) {
    auto page = store().devices(db::DeviceFilter{.after = after, .limit = 3});
    ASSERT_TRUE(page.ok()) << page.error();
    EXPECT_LE(page->size(), 3u);
    for (const Device& d : *page) paged.push_back(d.id);
    if (page->size() < 3) break;
    after = page->back().id;
  }
  std::vector<std::string> ids;
  for (const Device& d : *all) ids.push_back(d.id);
  EXPECT_EQ(paged, ids);
  auto gpus_after = store().devices(
      db::DeviceFilter{.type = DeviceType::kGpu, .after = ids.front(), .limit = 100});
  ASSERT_TRUE(gpus_after.ok());
  for (const Device& d : *gpus_after) {
    EXPECT_EQ(d.type, DeviceType::kGpu);
    EXPECT_GT(d.id, ids.front());
  }
}

TEST_P(BackendTest, UpsertKeepsWhatTheFabricSaysTheDeviceIs) {
  add_inventory();
  Device gpu = make_device("gpu-0", DeviceType::kGpu, "z1");
  gpu.identity = {"0x10de", "0x20b5", "1652221000123", "GPU-5f2c1a0e-0000-4000-8000-000000000001"};
  ASSERT_TRUE(store().upsert_devices({gpu}, 1).ok());
  auto created = store().create_composition(make_composition(7, "node1"), {"gpu-0"}, 200);
  ASSERT_TRUE(created.ok()) << created.error();
  auto live = store().live_composition(7, "node1");
  ASSERT_TRUE(live.ok()) << live.error();
  ASSERT_TRUE(live->has_value());
  ASSERT_EQ((*live)->devices.size(), 1u);
  EXPECT_EQ((*live)->devices[0].identity, gpu.identity);
  // A later inventory that knows less says so.
  gpu.identity.uuid.clear();
  ASSERT_TRUE(store().upsert_devices({gpu}, 2).ok());
  auto back = store().device("gpu-0");
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->identity.uuid, "");
  EXPECT_EQ(back->identity.serial, "1652221000123");
}

TEST_P(BackendTest, UpsertKeepsTheTimeADeviceWasFirstKnown) {
  ASSERT_TRUE(
      store()
          .upsert_devices({make_device("gpu-0"), make_device("mem-0", DeviceType::kMem)}, 1000)
          .ok());
  // Reported again later, with a changed fact and a new device beside it.
  Device gpu0 = make_device("gpu-0");
  gpu0.model = "H100-80G";
  ASSERT_TRUE(store().upsert_devices({gpu0, make_device("gpu-1")}, 5000).ok());
  auto all = store().devices();
  ASSERT_TRUE(all.ok()) << all.error();
  std::map<std::string, std::optional<int64_t>> since;
  for (const Device& d : *all) since[d.id] = d.known_since_ms;
  EXPECT_EQ(since, (std::map<std::string, std::optional<int64_t>>{
                       {"gpu-0", 1000}, {"gpu-1", 5000}, {"mem-0", 1000}}));
  auto d0 = store().device("gpu-0");
  ASSERT_TRUE(d0.ok()) << d0.error();
  EXPECT_EQ(d0->model, "H100-80G");
  EXPECT_EQ(d0->known_since_ms, 1000);
  // A composition's devices carry it too.
  auto created = store().create_composition(make_composition(3, "node1"), {"gpu-1"}, 6000);
  ASSERT_TRUE(created.ok()) << created.error();
  auto listed = store().compositions({.job_id = 3});
  ASSERT_TRUE(listed.ok()) << listed.error();
  ASSERT_EQ(listed->size(), 1u);
  ASSERT_EQ((*listed)[0].devices.size(), 1u);
  EXPECT_EQ((*listed)[0].devices[0].known_since_ms, 5000);
  // Surviving a restart of composerd, which reads the inventory again at start.
  reopen();
  ASSERT_TRUE(store().upsert_devices({make_device("gpu-0"), make_device("gpu-1")}, 90000).ok());
  EXPECT_EQ(store().device("gpu-0")->known_since_ms, 1000);
  EXPECT_EQ(store().device("gpu-1")->known_since_ms, 5000);
}

TEST_P(BackendTest, UpsertKeepsDrainStateAndOwner) {
  add_inventory();
  ASSERT_TRUE(store().set_drained("gpu-1", true, "bad fan", "root", 10).ok());
  auto created = store().create_composition(make_composition(1, "node1"), {"gpu-0"}, 20);
  ASSERT_TRUE(created.ok()) << created.error();

  // The fabric reports both again with new static facts; drain and owner must survive.
  Device gpu0 = make_device("gpu-0");
  gpu0.model = "H100-80G";
  gpu0.address = "0000:81:00.0";
  Device gpu1 = make_device("gpu-1");
  gpu1.zone = "z2";
  ASSERT_TRUE(store().upsert_devices({gpu0, gpu1}, 30).ok());

  auto d0 = store().device("gpu-0");
  ASSERT_TRUE(d0.ok());
  EXPECT_EQ(d0->model, "H100-80G");
  EXPECT_EQ(d0->address, "0000:81:00.0");
  EXPECT_EQ(d0->composition_id, created->id);
  EXPECT_EQ(d0->node, "node1");
  EXPECT_EQ(d0->state(), DeviceState::kAttached);
  auto d1 = store().device("gpu-1");
  ASSERT_TRUE(d1.ok());
  EXPECT_EQ(d1->zone, "z2");
  EXPECT_TRUE(d1->drained);
  EXPECT_EQ(d1->drain_reason, "bad fan");
}

TEST_P(BackendTest, FailureDomainsAreStoredReadBackAndReplacedByTheInventory) {
  add_inventory();
  Device mem = make_device("mem-0", DeviceType::kMem);
  mem.domains = {{"appliance", "pod-a:mem-a"}, {"power", "pdu-1"}};
  ASSERT_TRUE(store().upsert_devices({mem}, 10).ok());
  auto created = store().create_composition(make_composition(3, "node1"), {"mem-0"}, 20);
  ASSERT_TRUE(created.ok()) << created.error();

  auto read = store().device("mem-0");
  ASSERT_TRUE(read.ok()) << read.error();
  EXPECT_THAT(read->domains, ElementsAre(FailureDomain{"appliance", "pod-a:mem-a"},
                                         FailureDomain{"power", "pdu-1"}));
  // A composition's devices carry them too.
  auto live = store().live_composition(3, "node1");
  ASSERT_TRUE(live.ok() && live->has_value());
  ASSERT_EQ((*live)->devices.size(), 1u);
  EXPECT_EQ((*live)->devices[0].domains, read->domains);
  // Devices without domains read back none.
  auto gpu = store().device("gpu-0");
  ASSERT_TRUE(gpu.ok());
  EXPECT_TRUE(gpu->domains.empty());

  // The inventory is the word: a later report replaces them.
  mem.domains = {{"power", "pdu-2"}};
  ASSERT_TRUE(store().upsert_devices({mem}, 30).ok());
  read = store().device("mem-0");
  ASSERT_TRUE(read.ok());
  EXPECT_THAT(read->domains, ElementsAre(FailureDomain{"power", "pdu-2"}));

  // A domain that cannot be stored in the list refuses the whole call.
  Device bad = make_device("gpu-1");
  bad.domains = {{"power", "pdu 3"}};
  auto s = store().upsert_devices({make_device("gpu-0"), bad}, 40);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.error().message, HasSubstr("'power:pdu 3'"));
}

TEST_P(BackendTest, InventoryHealthChangeIsRecorded) {
  add_inventory();
  Device bad = make_device("gpu-2");
  bad.health = Health::kCritical;
  ASSERT_TRUE(store().upsert_devices({bad}, 40).ok());
  auto events = store().events({});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].kind, "health");
  EXPECT_EQ((*events)[0].from_state, "ok");
  EXPECT_EQ((*events)[0].to_state, "critical");
  EXPECT_THAT((*events)[0].devices, ElementsAre("gpu-2"));
  EXPECT_EQ((*events)[0].ts_ms, 40);  // the caller's clock, not the wall clock
}

TEST_P(BackendTest, RefusesIdsThatCannotBeStoredInLists) {
  auto s = store().upsert_devices({make_device("gpu,7")}, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.error().message, HasSubstr("'gpu,7'"));
  EXPECT_THAT(s.error().message, HasSubstr("without commas or spaces"));

  Host h = make_host("node1");
  h.zones = {"z1", ""};
  s = store().upsert_hosts({h});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.error().message, HasSubstr("zone ''"));

  Device huge = make_device("mem-9", DeviceType::kMem);
  huge.capacity_bytes = ~uint64_t{0};
  s = store().upsert_devices({huge}, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.error().message, HasSubstr("mem-9"));
  auto all = store().devices();
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
}

// --- Lifecycle and ledger -------------------------------------------------------------------

TEST_P(BackendTest, FullLifecycleWritesOneEventPerStateWithWhoAndWhat) {
  add_inventory();
  auto created = store().create_composition(make_composition(4711, "node1", S::kRequested),
                                            {"gpu-0", "gpu-1", "mem-0"}, 1000);
  ASSERT_TRUE(created.ok()) << created.error();
  EXPECT_GT(created->id, 0);
  EXPECT_EQ(created->state, S::kRequested);
  EXPECT_EQ(created->created_ms, 1000);
  EXPECT_EQ(created->attempts, 0u);
  EXPECT_THAT(ids_of(created->devices), ElementsAre("gpu-0", "gpu-1", "mem-0"));
  EXPECT_EQ(created->devices[0].composition_id, created->id);

  const int64_t id = created->id;
  ASSERT_TRUE(store().transition(id, S::kRequested, S::kComposing, "", 1100).ok());
  auto ready = store().transition(id, S::kComposing, S::kReady, "attached", 1200, true);
  ASSERT_TRUE(ready.ok()) << ready.error();
  EXPECT_EQ(ready->attempts, 1u);
  EXPECT_EQ(ready->updated_ms, 1200);
  ASSERT_TRUE(store().transition(id, S::kReady, S::kReleasing, "", 1300).ok());
  auto released = store().transition(id, S::kReleasing, S::kReleased, "detached", 1400);
  ASSERT_TRUE(released.ok()) << released.error();
  EXPECT_EQ(released->state, S::kReleased);
  EXPECT_FALSE(released->devices[0].composition_id);

  auto stored = store().composition(id);
  ASSERT_TRUE(stored.ok()) << stored.error();
  EXPECT_EQ(stored->state, S::kReleased);
  EXPECT_EQ(stored->request, make_composition(0, "x").request);
  EXPECT_EQ(stored->attempts, 1u);
  EXPECT_THAT(ids_of(stored->devices), ElementsAre("gpu-0", "gpu-1", "mem-0"));

  auto events = store().events({});
  ASSERT_TRUE(events.ok()) << events.error();
  EXPECT_THAT(kinds_of(*events),
              ElementsAre("requested", "composing", "ready", "releasing", "released"));
  const Event& ready_event = (*events)[2];
  EXPECT_EQ(ready_event.ts_ms, 1200);
  EXPECT_EQ(ready_event.composition_id, id);
  EXPECT_EQ(ready_event.owner.job_id, 4711u);
  EXPECT_EQ(ready_event.node, "node1");
  EXPECT_EQ(ready_event.owner.uid, 1000u);
  EXPECT_EQ(ready_event.owner.user, "alice");
  EXPECT_EQ(ready_event.owner.account, "physics");
  EXPECT_EQ(ready_event.owner.workload, "training");
  EXPECT_EQ(ready_event.from_state, "composing");
  EXPECT_EQ(ready_event.to_state, "ready");
  EXPECT_EQ(ready_event.detail, "attached");
  EXPECT_THAT(ready_event.devices, ElementsAre("gpu-0", "gpu-1", "mem-0"));
  EXPECT_EQ((*events)[0].from_state, "");
  EXPECT_THAT((*events)[4].devices, ElementsAre("gpu-0", "gpu-1", "mem-0"));
}

TEST_P(BackendTest, CreatingInComposingRecordsBothStatesItPassed) {
  add_inventory();
  auto created = store().create_composition(make_composition(5, "node2"), {"gpu-3"}, 50);
  ASSERT_TRUE(created.ok()) << created.error();
  EXPECT_EQ(created->state, S::kComposing);
  auto events = store().events({});
  ASSERT_TRUE(events.ok());
  EXPECT_THAT(kinds_of(*events), ElementsAre("requested", "composing"));
  EXPECT_EQ((*events)[1].from_state, "requested");

  auto bad = store().create_composition(make_composition(6, "node2", S::kReady), {"gpu-4"}, 60);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(bad.error().message, HasSubstr("requested or composing, not ready"));
}

// The memory policy a composition's tasks run under is kept with it, and its first event
// records it in the ledger.
TEST_P(BackendTest, ACompositionKeepsItsMemoryPolicyAndItsFirstEventRecordsIt) {
  add_inventory();
  Composition c = make_composition(5, "node2");
  c.request.mem_bytes = 8ULL << 30;
  c.mem_policy = "weighted:3:1";
  auto created = store().create_composition(c, {"mem-0"}, 50);
  ASSERT_TRUE(created.ok()) << created.error();
  EXPECT_EQ(created->mem_policy, "weighted:3:1");
  auto live = store().live_composition(5, "node2");
  ASSERT_TRUE(live.ok() && live->has_value());
  EXPECT_EQ((*live)->mem_policy, "weighted:3:1");
  ASSERT_EQ((*live)->devices.size(), 1u);  // the device columns come after it
  EXPECT_EQ((*live)->devices[0].id, "mem-0");
  auto again = store().composition(created->id);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->mem_policy, "weighted:3:1");
  auto events = store().events({});
  ASSERT_TRUE(events.ok());
  ASSERT_THAT(kinds_of(*events), ElementsAre("requested", "composing"));
  EXPECT_EQ((*events)[0].detail, "mem_policy=weighted:3:1");
  EXPECT_EQ((*events)[1].detail, "");
  // A composition without memory has none.
  auto gpus = store().create_composition(make_composition(6, "node2"), {"gpu-3"}, 60);
  ASSERT_TRUE(gpus.ok()) << gpus.error();
  EXPECT_EQ(gpus->mem_policy, "");
}

TEST_P(BackendTest, IllegalTransitionIsAConflictAndChangesNothing) {
  add_inventory();
  auto created = store().create_composition(make_composition(1, "node1"), {"gpu-0"}, 10);
  ASSERT_TRUE(created.ok());
  const int64_t before = event_count();

  // Not a legal edge of the state machine at all.
  auto skip = store().transition(created->id, S::kComposing, S::kReleased, "", 20);
  ASSERT_FALSE(skip.ok());
  EXPECT_EQ(skip.error().code, ErrorCode::kConflict);
  EXPECT_THAT(skip.error().message, HasSubstr("cannot go from composing to released"));
  // A legal edge, but the composition is not in `from`.
  auto stale = store().transition(created->id, S::kReady, S::kReleasing, "", 20);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, ErrorCode::kConflict);
  EXPECT_THAT(stale.error().message, HasSubstr("is composing, not ready"));

  auto after = store().composition(created->id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, S::kComposing);
  EXPECT_EQ(after->updated_ms, 10);
  EXPECT_EQ(event_count(), before);

  auto missing = store().transition(999, S::kComposing, S::kReady, "", 20);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

TEST_P(BackendTest, SecondLiveCompositionForTheSameJobAndNodeIsRefused) {
  add_inventory();
  auto first = store().create_composition(make_composition(9, "node1"), {"gpu-0"}, 10);
  ASSERT_TRUE(first.ok());
  const int64_t before = event_count();
  auto second = store().create_composition(make_composition(9, "node1"), {"gpu-1"}, 20);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, ErrorCode::kConflict);
  EXPECT_THAT(second.error().message, HasSubstr("job 9 on node1 already has a live composition"));
  EXPECT_THAT(second.error().message,
              HasSubstr(unique_refusal("compositions", {"job_id", "node"})));
  EXPECT_EQ(event_count(), before);
  auto gpu1 = store().device("gpu-1");
  ASSERT_TRUE(gpu1.ok());
  EXPECT_FALSE(gpu1->composition_id);  // the refused call left nothing behind

  // Same job on another node is fine; after release the same (job, node) is fine again.
  EXPECT_TRUE(store().create_composition(make_composition(9, "node2"), {"gpu-1"}, 30).ok());
  ASSERT_TRUE(store().transition(first->id, S::kComposing, S::kFailed, "fabric said no", 40).ok());
  auto again = store().create_composition(make_composition(9, "node1"), {"gpu-0"}, 50);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_NE(again->id, first->id);
}

TEST_P(BackendTest, DeviceInTwoLiveCompositionsIsRefused) {
  add_inventory();
  auto first = store().create_composition(make_composition(1, "node1"), {"gpu-0", "gpu-1"}, 10);
  ASSERT_TRUE(first.ok());
  auto second = store().create_composition(make_composition(2, "node2"), {"gpu-2", "gpu-1"}, 20);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, ErrorCode::kConflict);
  EXPECT_THAT(second.error().message, HasSubstr("device gpu-1 already belongs"));
  // All or nothing: gpu-2 was not taken and job 2 has no composition.
  auto gpu2 = store().device("gpu-2");
  ASSERT_TRUE(gpu2.ok());
  EXPECT_FALSE(gpu2->composition_id);
  auto live2 = store().live_composition(2, "node2");
  ASSERT_TRUE(live2.ok());
  EXPECT_FALSE(live2->has_value());
}

TEST_P(BackendTest, TheSchemaItselfRefusesADeviceInTwoLiveCompositions) {
  add_inventory();
  auto first = store().create_composition(make_composition(1, "node1"), {"gpu-0"}, 10);
  ASSERT_TRUE(first.ok());

  // Bypass the Store entirely: a second connection writes raw SQL.
  auto raw = raw_database();
  ASSERT_TRUE(raw->exec("INSERT INTO compositions (job_id, node, uid, \"user\", account, workload, "
                        "gpus, gpu_model, mem_bytes, nvme, state, created_ms, updated_ms) VALUES "
                        "(2, 'node2', 0, '', '', '', 1, '', 0, 0, 'composing', 1, 1)")
                  .ok());
  const int64_t other = raw->query_int("SELECT max(id) FROM compositions");
  auto refused = raw->exec(
      "INSERT INTO composition_devices (composition_id, device_id) "
      "VALUES (" +
      std::to_string(other) + ", 'gpu-0')");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  EXPECT_THAT(refused.error().message,
              HasSubstr(unique_refusal("composition_devices", {"device_id"})));

  // Nor can a second live composition for the same (job, node) be inserted.
  refused = raw->exec(
      "INSERT INTO compositions (job_id, node, uid, \"user\", account, workload, "
      "gpus, gpu_model, mem_bytes, nvme, state, created_ms, updated_ms) VALUES "
      "(1, 'node1', 0, '', '', '', 1, '', 0, 0, 'requested', 1, 1)");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message,
              HasSubstr(unique_refusal("compositions", {"job_id", "node"})));

  // Nor can a released link be revived, a device handed to a finished composition, or a
  // composition jump across the state machine.
  ASSERT_TRUE(store().transition(first->id, S::kComposing, S::kFailed, "gone", 20).ok());
  refused = raw->exec("UPDATE composition_devices SET live = 1");
  EXPECT_THAT(refused.error().message, HasSubstr("cannot become live again"));
  refused = raw->exec("INSERT INTO composition_devices (composition_id, device_id) VALUES (" +
                      std::to_string(first->id) + ", 'gpu-3')");
  EXPECT_THAT(refused.error().message, HasSubstr("only be given to a live composition"));
  refused =
      raw->exec("UPDATE compositions SET state = 'ready' WHERE id = " + std::to_string(first->id));
  EXPECT_THAT(refused.error().message, HasSubstr("illegal composition state transition"));
  // The device freed by the failure can now go to the raw composition.
  EXPECT_TRUE(raw->exec("INSERT INTO composition_devices (composition_id, device_id) "
                        "VALUES (" +
                        std::to_string(other) + ", 'gpu-0')")
                  .ok());
}

TEST_P(BackendTest, ReleasedOrFailedCompositionsFreeTheirDevicesForReuse) {
  add_inventory();
  auto a = store().create_composition(make_composition(1, "node1"), {"gpu-0", "mem-0"}, 10);
  auto b = store().create_composition(make_composition(2, "node2"), {"gpu-1"}, 10);
  ASSERT_TRUE(a.ok() && b.ok());
  for (auto [from, to] : {std::pair{S::kComposing, S::kReady},
                          {S::kReady, S::kReleasing},
                          {S::kReleasing, S::kReleased}}) {
    ASSERT_TRUE(store().transition(a->id, from, to, "", 20).ok());
  }
  auto failed = store().transition(b->id, S::kComposing, S::kFailed, "attach timed out", 30);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->last_error, "attach timed out");

  for (const char* id : {"gpu-0", "mem-0", "gpu-1"}) {
    auto d = store().device(id);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->state(), DeviceState::kFree) << id;
  }
  auto reuse =
      store().create_composition(make_composition(3, "node3"), {"gpu-0", "gpu-1", "mem-0"}, 40);
  ASSERT_TRUE(reuse.ok()) << reuse.error();
  // The old compositions still list what they held, the devices now show the new owner.
  auto old = store().composition(a->id);
  ASSERT_TRUE(old.ok());
  EXPECT_THAT(ids_of(old->devices), ElementsAre("gpu-0", "mem-0"));
  EXPECT_EQ(old->devices[0].composition_id, reuse->id);
  EXPECT_EQ(old->devices[0].node, "node3");
}

TEST_P(BackendTest, EventsCannotBeUpdatedOrDeleted) {
  add_inventory();
  ASSERT_TRUE(store().create_composition(make_composition(1, "node1"), {"gpu-0"}, 10).ok());
  auto raw = raw_database();
  auto update = raw->exec("UPDATE events SET detail = 'forged'");
  ASSERT_FALSE(update.ok());
  EXPECT_EQ(update.error().code, ErrorCode::kConflict);
  EXPECT_THAT(update.error().message, HasSubstr("append-only"));
  auto remove = raw->exec("DELETE FROM events");
  ASSERT_FALSE(remove.ok());
  EXPECT_THAT(remove.error().message, HasSubstr("append-only"));
  EXPECT_EQ(raw->query_int("SELECT count(*) FROM events WHERE detail = 'forged'"), 0);
  EXPECT_EQ(event_count(), 2);
}

TEST_P(BackendTest, DrainResumeAndHealthAreRecorded) {
  add_inventory();
  auto c = store().create_composition(make_composition(77, "node2"), {"gpu-5"}, 5);
  ASSERT_TRUE(c.ok());
  const int64_t first = event_count();

  ASSERT_TRUE(store().set_drained("gpu-4", true, "replace fan", "admin1", 10).ok());
  ASSERT_TRUE(store().set_drained("gpu-4", true, "replace fan", "admin1", 11).ok());  // no-op
  ASSERT_TRUE(store().set_drained("gpu-4", false, "fixed", "admin2", 20).ok());
  ASSERT_TRUE(store().set_health("gpu-5", Health::kCritical, "xid 79", 30).ok());
  ASSERT_TRUE(store().set_health("gpu-5", Health::kCritical, "xid 79", 31).ok());  // no-op

  auto events = store().events({.since_ms = 10});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(static_cast<int64_t>(events->size()), 3) << "after " << first;
  const Event& drain = (*events)[0];
  EXPECT_EQ(drain.kind, "drain");
  EXPECT_EQ(drain.owner.user, "admin1");
  EXPECT_EQ(drain.detail, "replace fan");
  EXPECT_EQ(drain.from_state, "free");
  EXPECT_EQ(drain.to_state, "drained");
  EXPECT_THAT(drain.devices, ElementsAre("gpu-4"));
  const Event& resume = (*events)[1];
  EXPECT_EQ(resume.kind, "resume");
  EXPECT_EQ(resume.owner.user, "admin2");
  EXPECT_EQ(resume.to_state, "free");
  const Event& health = (*events)[2];
  EXPECT_EQ(health.kind, "health");
  EXPECT_EQ(health.from_state, "ok");
  EXPECT_EQ(health.to_state, "critical");
  EXPECT_EQ(health.detail, "xid 79");
  // The device was attached: the event says whose job lost it.
  EXPECT_EQ(health.composition_id, c->id);
  EXPECT_EQ(health.owner.job_id, 77u);
  EXPECT_EQ(health.owner.user, "alice");

  auto gpu4 = store().device("gpu-4");
  ASSERT_TRUE(gpu4.ok());
  EXPECT_FALSE(gpu4->drained);
  EXPECT_EQ(gpu4->drain_reason, "");
  auto gpu5 = store().device("gpu-5");
  ASSERT_TRUE(gpu5.ok());
  EXPECT_EQ(gpu5->state(), DeviceState::kFailed);

  auto unknown = store().set_drained("gpu-99", true, "x", "root", 40);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(unknown.error().message, HasSubstr("'gpu-99'"));
  // Several at once are all or none: an unknown one among them changes nothing.
  const int64_t events_before = event_count();
  auto some_unknown = store().set_drained(std::vector<std::string>{"gpu-1", "gpu-99", "gpu-2"},
                                          true, "domain", "root", 41);
  ASSERT_FALSE(some_unknown.ok());
  EXPECT_THAT(some_unknown.error().message, HasSubstr("'gpu-99'"));
  EXPECT_FALSE(store().device("gpu-1")->drained);
  EXPECT_EQ(event_count(), events_before);
  ASSERT_TRUE(
      store()
          .set_drained(std::vector<std::string>{"gpu-1", "gpu-2"}, true, "domain", "root", 42)
          .ok());
  EXPECT_EQ(store().device("gpu-1")->drain_reason, "domain");
  EXPECT_EQ(store().device("gpu-2")->drain_reason, "domain");
  EXPECT_EQ(event_count(), events_before + 2);
  EXPECT_EQ(store().set_health("gpu-99", Health::kOk, "", 40).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store().device("gpu-99").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store().composition(12345).error().code, ErrorCode::kNotFound);
}

TEST_P(BackendTest, UnknownDeviceInACompositionIsNotFoundAndDuplicatesAreRefused) {
  add_inventory();
  auto missing = store().create_composition(make_composition(1, "node1"), {"gpu-0", "gpu-x"}, 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(missing.error().message, HasSubstr("no device 'gpu-x'"));
  auto twice = store().create_composition(make_composition(1, "node1"), {"gpu-0", "gpu-0"}, 1);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(event_count(), 0);
}

// --- Filters --------------------------------------------------------------------------------

class FilterTest : public BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    add_inventory();
    // job 1 on node1: gpu-0, mem-0 (ready); job 2 on node2: gpu-4 (released);
    // job 3 on node2: gpu-1 (composing, user bob); gpu-2 drained; gpu-3 critical.
    auto c1 = store().create_composition(make_composition(1, "node1"), {"gpu-0", "mem-0"}, 100);
    ASSERT_TRUE(c1.ok());
    ASSERT_TRUE(store().transition(c1->id, S::kComposing, S::kReady, "", 110).ok());
    auto c2 = store().create_composition(make_composition(2, "node2"), {"gpu-4"}, 200);
    ASSERT_TRUE(c2.ok());
    ASSERT_TRUE(store().transition(c2->id, S::kComposing, S::kReady, "", 210).ok());
    ASSERT_TRUE(store().transition(c2->id, S::kReady, S::kReleasing, "", 220).ok());
    ASSERT_TRUE(store().transition(c2->id, S::kReleasing, S::kReleased, "", 230).ok());
    Composition bob = make_composition(3, "node2");
    bob.owner.user = "bob";
    bob.owner.uid = 1001;
    auto c3 = store().create_composition(bob, {"gpu-1"}, 300);
    ASSERT_TRUE(c3.ok());
    ASSERT_TRUE(store().set_drained("gpu-2", true, "maintenance", "root", 400).ok());
    ASSERT_TRUE(store().set_health("gpu-3", Health::kCritical, "dead", 500).ok());
    ids_ = {c1->id, c2->id, c3->id};
  }
  std::vector<int64_t> ids_;
};

TEST_P(FilterTest, DevicesByTypeStateZoneAndNode) {
  auto all = store().devices();
  ASSERT_TRUE(all.ok()) << all.error();
  EXPECT_EQ(all->size(), 9u);

  auto mem = store().devices({.type = DeviceType::kMem});
  ASSERT_TRUE(mem.ok());
  EXPECT_THAT(ids_of(*mem), ElementsAre("mem-0", "mem-1"));

  auto attached = store().devices({.state = DeviceState::kAttached});
  ASSERT_TRUE(attached.ok());
  EXPECT_THAT(ids_of(*attached), ElementsAre("gpu-0", "gpu-1", "mem-0"));
  EXPECT_EQ((*attached)[0].composition_id, ids_[0]);
  EXPECT_EQ((*attached)[0].node, "node1");

  auto free_gpus = store().devices({.type = DeviceType::kGpu, .state = DeviceState::kFree});
  ASSERT_TRUE(free_gpus.ok());
  EXPECT_THAT(ids_of(*free_gpus), ElementsAre("gpu-4", "gpu-5"));

  auto drained = store().devices({.state = DeviceState::kDrained});
  ASSERT_TRUE(drained.ok());
  EXPECT_THAT(ids_of(*drained), ElementsAre("gpu-2"));
  auto failed = store().devices({.state = DeviceState::kFailed});
  ASSERT_TRUE(failed.ok());
  EXPECT_THAT(ids_of(*failed), ElementsAre("gpu-3"));

  auto z2 = store().devices({.zone = "z2"});
  ASSERT_TRUE(z2.ok());
  EXPECT_THAT(ids_of(*z2), ElementsAre("gpu-4", "gpu-5", "mem-1"));

  auto node2 = store().devices({.node = "node2"});
  ASSERT_TRUE(node2.ok());
  EXPECT_THAT(ids_of(*node2), ElementsAre("gpu-1"));  // gpu-4's composition was released
  auto node1_mem = store().devices({.type = DeviceType::kMem, .node = "node1"});
  ASSERT_TRUE(node1_mem.ok());
  EXPECT_THAT(ids_of(*node1_mem), ElementsAre("mem-0"));
}

TEST_P(FilterTest, CompositionsByJobUserUidNodeStateLiveAndLimit) {
  auto ids = [](const Expected<std::vector<Composition>>& cs) {
    std::vector<int64_t> out;
    if (cs.ok()) {
      for (const auto& c : *cs) out.push_back(c.id);
    }
    return out;
  };
  auto all = store().compositions({});
  ASSERT_TRUE(all.ok()) << all.error();
  EXPECT_THAT(ids(all), ElementsAre(ids_[2], ids_[1], ids_[0]));  // newest first
  EXPECT_THAT(ids_of((*all)[2].devices), ElementsAre("gpu-0", "mem-0"));

  EXPECT_THAT(ids(store().compositions({.job_id = 2})), ElementsAre(ids_[1]));
  EXPECT_THAT(ids(store().compositions({.uid = 1001})), ElementsAre(ids_[2]));
  EXPECT_THAT(ids(store().compositions({.user = "alice"})), ElementsAre(ids_[1], ids_[0]));
  EXPECT_THAT(ids(store().compositions({.node = "node2"})), ElementsAre(ids_[2], ids_[1]));
  EXPECT_THAT(ids(store().compositions({.node = "node2", .live_only = true})),
              ElementsAre(ids_[2]));
  EXPECT_THAT(ids(store().compositions({.state = S::kReleased})), ElementsAre(ids_[1]));
  EXPECT_THAT(ids(store().compositions({.live_only = true})), ElementsAre(ids_[2], ids_[0]));
  EXPECT_THAT(ids(store().compositions({.live_only = true, .limit = 1})), ElementsAre(ids_[2]));
  EXPECT_THAT(ids(store().compositions({.limit = 2})), ElementsAre(ids_[2], ids_[1]));
  EXPECT_THAT(ids(store().compositions({.job_id = 2, .live_only = true})), ElementsAre());
  EXPECT_THAT(ids(store().compositions({.job_id = 3, .user = "alice"})), ElementsAre());
  // A page's cursor: ids below it, with every filter and each indexed variant.
  EXPECT_THAT(ids(store().compositions({.before_id = ids_[2], .limit = 1})), ElementsAre(ids_[1]));
  EXPECT_THAT(ids(store().compositions({.before_id = ids_[1]})), ElementsAre(ids_[0]));
  EXPECT_THAT(ids(store().compositions({.before_id = ids_[0]})), ElementsAre());
  EXPECT_THAT(ids(store().compositions({.node = "node2", .before_id = ids_[2]})),
              ElementsAre(ids_[1]));
  EXPECT_THAT(ids(store().compositions({.job_id = 1, .before_id = ids_[0]})), ElementsAre());
  EXPECT_THAT(ids(store().compositions({.live_only = true, .before_id = ids_[2]})),
              ElementsAre(ids_[0]));
  EXPECT_THAT(ids(store().compositions({.user = "alice", .before_id = ids_[1]})),
              ElementsAre(ids_[0]));

  auto live = store().live_composition(1, "node1");
  ASSERT_TRUE(live.ok());
  ASSERT_TRUE(live->has_value());
  EXPECT_EQ((*live)->state, S::kReady);
  auto none = store().live_composition(2, "node2");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_P(FilterTest, EventsByTimeJobCompositionAndLimit) {
  auto all = store().events({});
  ASSERT_TRUE(all.ok());
  // 1: requested, composing, ready; 2: requested, composing, ready, releasing, released;
  // 3: requested, composing; drain; health.
  EXPECT_EQ(all->size(), 12u);

  auto window = store().events({.since_ms = 200, .until_ms = 230});
  ASSERT_TRUE(window.ok());
  EXPECT_THAT(kinds_of(*window), ElementsAre("requested", "composing", "ready", "releasing"));

  auto job2 = store().events({.job_id = 2});
  ASSERT_TRUE(job2.ok());
  EXPECT_EQ(job2->size(), 5u);
  auto job2_late = store().events({.since_ms = 220, .job_id = 2});
  ASSERT_TRUE(job2_late.ok());
  EXPECT_THAT(kinds_of(*job2_late), ElementsAre("releasing", "released"));

  auto of_c1 = store().events({.composition_id = ids_[0], .limit = 2});
  ASSERT_TRUE(of_c1.ok());
  EXPECT_THAT(kinds_of(*of_c1), ElementsAre("requested", "composing"));

  auto first_two = store().events({.limit = 2});
  ASSERT_TRUE(first_two.ok());
  EXPECT_EQ(first_two->size(), 2u);
  EXPECT_EQ((*first_two)[0].ts_ms, 100);

  // Pages of two walk the ledger in (ts_ms, id) order, each event once, also where several
  // events share a time.
  std::vector<int64_t> walked;
  std::optional<db::EventCursor> after;
  for (int pages = 0; pages < 20; ++pages) {
    auto page = store().events({.after = after, .limit = 2});
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    for (const Event& e : *page) walked.push_back(e.id);
    after = db::EventCursor{page->back().ts_ms, page->back().id};
  }
  std::vector<int64_t> whole;
  for (const Event& e : *all) whole.push_back(e.id);
  EXPECT_EQ(walked, whole);
  auto job2_after =
      store().events({.job_id = 2, .after = db::EventCursor{(*job2)[2].ts_ms, (*job2)[2].id}});
  ASSERT_TRUE(job2_after.ok());
  EXPECT_THAT(kinds_of(*job2_after), ElementsAre("releasing", "released"));

  auto backwards = store().events({.since_ms = 300, .until_ms = 200});
  ASSERT_FALSE(backwards.ok());
  EXPECT_EQ(backwards.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(backwards.error().message, HasSubstr("since_ms 300 is after until_ms 200"));
}

// --- Readers and the writer -----------------------------------------------------------------

TEST_F(StoreTest, ReadsDoNotWaitForAWriterHoldingTheLock) {
  add_inventory();
  auto raw = raw_connection(db_path());
  ASSERT_TRUE(exec_raw(*raw, "BEGIN IMMEDIATE").ok());
  ASSERT_TRUE(exec_raw(*raw, "UPDATE devices SET model = 'uncommitted'").ok());

  const auto start = std::chrono::steady_clock::now();
  auto devices = store().devices();
  auto events = store().events({});
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(devices.ok()) << devices.error();
  ASSERT_TRUE(events.ok()) << events.error();
  EXPECT_EQ(devices->size(), 9u);
  EXPECT_EQ((*devices)[0].model, "A100-80G");  // the snapshot before the open transaction
  // The busy timeout is 5 s; a read that waited for the lock would take that long.
  EXPECT_LT(elapsed, std::chrono::milliseconds(1000));
  ASSERT_TRUE(exec_raw(*raw, "ROLLBACK").ok());
}

TEST_P(BackendTest, FailingCallDoesNotRollBackTheOthersInItsBatch) {
  add_inventory();
  auto taken = store().create_composition(make_composition(1, "node1"), {"gpu-0"}, 10);
  ASSERT_TRUE(taken.ok());
  const WriteStats before = store().write_stats();

  // Hold the write lock from outside so the calls below pile up and share one batch.
  auto raw = raw_database();
  // SQLite: the database's one write lock; PostgreSQL: a lock on every composition row.
  ASSERT_TRUE(raw->exec(backend() == Backend::kSqlite
                            ? "BEGIN IMMEDIATE"
                            : "BEGIN; LOCK TABLE compositions IN EXCLUSIVE MODE")
                  .ok());
  std::vector<Expected<Composition>> results(5, Error());
  std::vector<std::thread> threads;
  // Call 2 wants gpu-0, which composition 1 holds: it must fail alone.
  const std::vector<std::vector<std::string>> wants = {
      {"gpu-1"}, {"gpu-2"}, {"gpu-0"}, {"gpu-3"}, {"mem-0"}};
  for (size_t i = 0; i < wants.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = store().create_composition(
          make_composition(static_cast<uint32_t>(100 + i), "node2"), wants[i], 20);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(raw->exec("COMMIT").ok());
  for (auto& t : threads) t.join();

  for (size_t i = 0; i < results.size(); ++i) {
    if (i == 2) {
      ASSERT_FALSE(results[i].ok());
      EXPECT_EQ(results[i].error().code, ErrorCode::kConflict);
    } else {
      ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].error();
      auto live = store().live_composition(static_cast<uint32_t>(100 + i), "node2");
      ASSERT_TRUE(live.ok() && live->has_value()) << i;
    }
  }
  const WriteStats after = store().write_stats();
  EXPECT_EQ(after.calls - before.calls, 5u);
  EXPECT_EQ(after.failed_calls - before.failed_calls, 1u);
  // Five calls in at most two transactions: the failing one shared a batch with good ones.
  EXPECT_LE(after.transactions - before.transactions, 2u);
  EXPECT_GE(after.largest_batch, 3u);
  EXPECT_EQ(event_count(), 2 + 4 * 2);
}

// On PostgreSQL a batch's compositions and state changes go to the server in one flight: a
// batch costs two round trips (the flight, then COMMIT), however many calls it holds. Run one
// after another they would cost several each.
TEST_P(BackendTest, ABatchOfCompositionsAndStateChangesCostsTwoRoundTrips) {
  if (backend() != Backend::kPostgresql) GTEST_SKIP() << "SQLite answers in this process";
  add_inventory();
  auto taken = store().create_composition(make_composition(1, "node1"), {"gpu-0"}, 10);
  ASSERT_TRUE(taken.ok()) << taken.error();
  const WriteStats before = store().write_stats();
  EXPECT_GT(before.round_trips, 0u);

  auto raw = raw_database();
  ASSERT_TRUE(raw->exec("BEGIN; LOCK TABLE compositions IN EXCLUSIVE MODE").ok());
  std::vector<Status> results(6, Status::Ok());
  std::vector<std::thread> threads;
  // Five new compositions (the third wants gpu-0, which composition 1 holds: refused in the
  // middle of its flight) and composition 1 made ready.
  const std::vector<std::string> wants = {"gpu-1", "gpu-2", "gpu-0", "gpu-3", "mem-0"};
  for (size_t i = 0; i < wants.size(); ++i) {
    threads.emplace_back([&, i] {
      auto r = store().create_composition(make_composition(static_cast<uint32_t>(100 + i), "node2"),
                                          {wants[i]}, 20);
      results[i] = r.ok() ? Status::Ok() : Status(r.error());
    });
  }
  threads.emplace_back([&] {
    auto r = store().transition(taken->id, CompositionState::kComposing, CompositionState::kReady,
                                "", 30, true);
    results[5] = r.ok() ? Status::Ok() : Status(r.error());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(raw->exec("COMMIT").ok());
  for (auto& t : threads) t.join();

  for (size_t i = 0; i < results.size(); ++i) {
    if (i == 2) {
      ASSERT_FALSE(results[i].ok());
      EXPECT_EQ(results[i].error().code, ErrorCode::kConflict);
      EXPECT_THAT(results[i].error().message, HasSubstr("gpu-0"));
    } else {
      EXPECT_TRUE(results[i].ok()) << i << ": " << results[i].error();
    }
  }
  const WriteStats after = store().write_stats();
  const uint64_t transactions = after.transactions - before.transactions;
  ASSERT_GE(transactions, 1u);
  ASSERT_LE(transactions, 6u);
  // Two a batch; the refused call runs again on its own (a savepoint, its statements, the
  // rollback to the savepoint, the rest of the flight): a dozen more at most.
  EXPECT_LE(after.round_trips - before.round_trips, 2 * transactions + 16)
      << transactions << " transactions";
  auto ready = store().composition(taken->id);
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->state, CompositionState::kReady);
  EXPECT_EQ(ready->attempts, 1u);
  EXPECT_EQ(event_count(), 2 + 4 * 2 + 1);
}

// Runs `calls` at once while `raw` holds a lock on every composition row: the writes pile up
// behind it and share a batch (but for the first, which may take one of its own).
std::vector<Status> behind_a_lock(RawDatabase& raw,
                                  const std::vector<std::function<Status()>>& calls) {
  std::vector<Status> results(calls.size(), Status::Ok());
  EXPECT_TRUE(raw.exec("BEGIN; LOCK TABLE compositions IN EXCLUSIVE MODE").ok());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < calls.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = calls[i](); });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(raw.exec("COMMIT").ok());
  for (auto& t : threads) t.join();
  return results;
}

// On PostgreSQL the calls of a flight take no savepoint each (pg_pool.h): a batch's rows are
// written by its one transaction, with no subtransaction of their own. A call the server
// refuses undoes the whole transaction; the batch then runs again without it (each call in a
// savepoint, the refused one on its own to say why), and the others commit, once.
TEST_P(BackendTest, ABatchWithARefusedWriteIsRunAgainWithoutItAndTheOthersCommit) {
  if (backend() != Backend::kPostgresql) GTEST_SKIP() << "SQLite has no flights";
  add_inventory();
  auto taken = store().create_composition(make_composition(1, "node1"), {"gpu-0"}, 10);
  ASSERT_TRUE(taken.ok()) << taken.error();
  auto raw = raw_database();
  const auto in_one_batch = [&](const std::vector<std::function<Status()>>& calls) {
    return behind_a_lock(*raw, calls);
  };
  const auto create = [&](uint32_t job, const std::string& device) {
    return [&, job, device] {
      auto r = store().create_composition(make_composition(job, "node2"), {device}, 20);
      return r.ok() ? Status::Ok() : Status(r.error());
    };
  };

  // No refusal: one transaction's rows, no subtransaction's (a savepoint each gave each
  // write's rows their own xmin).
  WriteStats before = store().write_stats();
  for (const Status& s : in_one_batch({create(100, "gpu-1"), create(101, "gpu-2"),
                                       create(102, "gpu-3"), create(103, "mem-0")})) {
    EXPECT_TRUE(s.ok()) << s;
  }
  const auto batches =
      static_cast<int64_t>(store().write_stats().transactions - before.transactions);
  EXPECT_EQ(
      raw->query_int("SELECT COUNT(DISTINCT xmin::text) FROM compositions WHERE job_id >= 100"),
      batches);
  EXPECT_EQ(raw->query_int("SELECT COUNT(DISTINCT xmin::text) FROM events WHERE job_id >= 100"),
            batches);

  // The second call wants gpu-0, which composition 1 holds; the others go on their way.
  before = store().write_stats();
  std::vector<std::function<Status()>> calls = {create(200, "gpu-4"), create(201, "gpu-0"),
                                                create(202, "mem-1")};
  for (uint32_t job = 100; job <= 103; ++job) {
    auto live = store().live_composition(job, "node2");
    ASSERT_TRUE(live.ok() && live->has_value()) << job;
    calls.emplace_back([&, id = (*live)->id] {
      auto r = store().transition(id, CompositionState::kComposing, CompositionState::kReady, "",
                                  30, true);
      return r.ok() ? Status::Ok() : Status(r.error());
    });
  }
  const std::vector<Status> results = in_one_batch(calls);
  for (size_t i = 0; i < results.size(); ++i) {
    if (i == 1) {
      ASSERT_FALSE(results[i].ok());
      EXPECT_EQ(results[i].error().code, ErrorCode::kConflict);
      EXPECT_THAT(results[i].error().message, HasSubstr("gpu-0"));
    } else {
      EXPECT_TRUE(results[i].ok()) << i << ": " << results[i];
    }
  }
  const WriteStats after = store().write_stats();
  EXPECT_EQ(after.calls - before.calls, calls.size());
  EXPECT_EQ(after.failed_calls - before.failed_calls, 1u);
  // Each write once: composition 1's two events, four compositions of two, two more of two,
  // four changes to ready of one.
  EXPECT_EQ(event_count(), 2 + 4 * 2 + 2 * 2 + 4);
  EXPECT_EQ(raw->query_int("SELECT COUNT(*) FROM compositions WHERE job_id = 201"), 0);
  EXPECT_EQ(raw->query_int("SELECT COUNT(*) FROM compositions WHERE job_id >= 100 AND job_id <= "
                           "103 AND state = 'ready' AND attempts = 1"),
            4);
  auto gpu0 = store().device("gpu-0");
  ASSERT_TRUE(gpu0.ok());
  EXPECT_EQ(gpu0->composition_id, taken->id);
}

// On PostgreSQL the new compositions next to each other in a flight are one statement, and so
// are the state changes (pg_pool.h, Flight::together): the rows one statement writes share
// its command id (cmin), so a batch's rows carry one each. Each call still gets its own
// composition back, devices and all, also where it has none or several.
TEST_P(BackendTest, ABurstOfCompositionsAndStateChangesIsOneStatementOfEach) {
  if (backend() != Backend::kPostgresql) GTEST_SKIP() << "SQLite has no flights";
  add_inventory();
  auto raw = raw_database();
  // Statements that wrote the rows of `table` for jobs 100 to 103, and what the rows came
  // from (a transaction and a command of it).
  const auto statements = [&](const std::string& table) {
    return raw->query_int("SELECT COUNT(DISTINCT (xmin::text, cmin::text)) FROM " + table +
                          " WHERE job_id BETWEEN 100 AND 103");
  };
  const std::map<uint32_t, std::vector<std::string>> wants = {
      {100, {}}, {101, {"gpu-1", "gpu-2"}}, {102, {"gpu-3"}}, {103, {"mem-0", "nvme-0"}}};
  std::map<uint32_t, Composition> made;
  std::vector<std::function<Status()>> calls;
  for (const auto& [job, ids] : wants) {
    calls.emplace_back([&, job = job, ids = ids]() -> Status {
      Composition c = make_composition(job, "node2", job == 100 ? S::kRequested : S::kComposing);
      c.mem_policy = job == 103 ? "interleave" : "";
      auto r = store().create_composition(c, ids, 20);
      if (!r.ok()) return r.error();
      made[job] = *r;
      return Status::Ok();
    });
  }
  WriteStats before = store().write_stats();
  for (const Status& s : behind_a_lock(*raw, calls)) ASSERT_TRUE(s.ok()) << s;
  auto batches = static_cast<int64_t>(store().write_stats().transactions - before.transactions);
  ASSERT_LT(batches, 4);
  EXPECT_EQ(statements("compositions"), batches);
  EXPECT_EQ(statements("events"), batches);
  for (const auto& [job, ids] : wants) {
    const Composition& c = made.at(job);
    EXPECT_EQ(c.owner.job_id, job);
    EXPECT_EQ(ids_of(c.devices), ids) << job;
    for (const Device& d : c.devices) {
      EXPECT_EQ(d.composition_id, c.id) << d.id;
      EXPECT_EQ(d.node, "node2") << d.id;
    }
    auto stored = store().composition(c.id);
    ASSERT_TRUE(stored.ok()) << stored.error();
    EXPECT_EQ(stored->owner.job_id, job);
    EXPECT_EQ(ids_of(stored->devices), ids) << job;
    EXPECT_EQ(stored->state, job == 100 ? S::kRequested : S::kComposing);
    EXPECT_EQ(stored->mem_policy, c.mem_policy);
    auto events = store().events({.composition_id = c.id});
    ASSERT_TRUE(events.ok()) << events.error();
    const std::vector<std::string> kinds = job == 100
                                               ? std::vector<std::string>{"requested"}
                                               : std::vector<std::string>{"requested", "composing"};
    EXPECT_EQ(kinds_of(*events), kinds);
    EXPECT_EQ(events->front().detail, job == 103 ? "mem_policy=interleave" : "") << job;
    EXPECT_EQ(events->front().devices, ids) << job;
  }

  // Each one's next state, in one batch; then two changes of one composition in one batch:
  // the statement for both is refused, and they run again one after the other.
  calls.clear();
  std::map<uint32_t, Composition> changed;
  for (const auto& [job, ids] : wants) {
    calls.emplace_back([&, job = job]() -> Status {
      const S from = job == 100 ? S::kRequested : S::kComposing;
      const S to = job == 100 ? S::kComposing : S::kReady;
      auto r = store().transition(made.at(job).id, from, to, "", 30, true);
      if (!r.ok()) return r.error();
      changed[job] = *r;
      return Status::Ok();
    });
  }
  before = store().write_stats();
  for (const Status& s : behind_a_lock(*raw, calls)) ASSERT_TRUE(s.ok()) << s;
  batches = static_cast<int64_t>(store().write_stats().transactions - before.transactions);
  ASSERT_LT(batches, 4);
  // The rows the changes left: one statement's a batch.
  EXPECT_EQ(statements("compositions"), batches);
  EXPECT_EQ(raw->query_int("SELECT COUNT(DISTINCT (xmin::text, cmin::text)) FROM events"
                           " WHERE job_id BETWEEN 100 AND 103 AND ts_ms = 30"),
            batches);
  for (const auto& [job, ids] : wants) {
    const Composition& c = changed.at(job);
    EXPECT_EQ(c.id, made.at(job).id);
    EXPECT_EQ(c.state, job == 100 ? S::kComposing : S::kReady);
    EXPECT_EQ(c.attempts, 1u);
    EXPECT_EQ(ids_of(c.devices), ids) << job;
    for (const Device& d : c.devices) EXPECT_EQ(d.composition_id, c.id) << d.id;
    auto events = store().events({.composition_id = c.id});
    ASSERT_TRUE(events.ok()) << events.error();
    EXPECT_EQ(events->back().kind, job == 100 ? "composing" : "ready");
    EXPECT_EQ(events->back().devices, ids) << job;
  }

  const auto release = [&](uint32_t job) {
    return [&, job]() -> Status {
      auto r = store().transition(made.at(job).id, S::kReady, S::kReleasing, "", 40);
      return r.ok() ? Status::Ok() : Status(r.error());
    };
  };
  const std::vector<Status> twice =
      behind_a_lock(*raw, {release(102), release(101), release(101), release(103)});
  EXPECT_TRUE(twice[0].ok()) << twice[0];
  EXPECT_TRUE(twice[3].ok()) << twice[3];
  EXPECT_NE(twice[1].ok(), twice[2].ok()) << twice[1] << "; " << twice[2];
  EXPECT_EQ(raw->query_int("SELECT COUNT(*) FROM events WHERE kind = 'releasing'"), 3);
}

// On PostgreSQL the schema checks and claims new device links once a statement, and the end
// of a composition's trigger starts only where one ends (pg_schema.cc, migration 6), and the
// events other than ends mark the rollup once a statement (migration 7): a write of many
// compositions at once starts each trigger once, not once a row.
TEST_P(BackendTest, ASetWriteStartsEachOfTheSchemasTriggersOnce) {
  if (backend() != Backend::kPostgresql) GTEST_SKIP() << "SQLite's triggers are in-process";
  add_inventory();
  auto taken = store().create_composition(make_composition(1, "node1"), {"gpu-0"}, 10);
  ASSERT_TRUE(taken.ok()) << taken.error();
  auto raw = raw_database();
  // How many times `statement` started the schema's own triggers whose names begin with
  // `prefix` (the foreign keys' checks are named otherwise), by its EXPLAIN ANALYZE; the
  // statement is run.
  ASSERT_TRUE(raw->exec("CREATE FUNCTION trigger_calls(statement text, prefix text)"
                        " RETURNS bigint LANGUAGE plpgsql AS $$"
                        " DECLARE n bigint := 0; line text; BEGIN"
                        " FOR line IN EXECUTE 'EXPLAIN ANALYZE ' || statement LOOP"
                        "  IF starts_with(line, 'Trigger ' || prefix) THEN"
                        "   n := n + substring(line FROM 'calls=([0-9]+)')::bigint;"
                        "  END IF;"
                        " END LOOP; RETURN n; END $$")
                  .ok());
  const std::string id = std::to_string(taken->id);
  EXPECT_EQ(raw->query_int("SELECT trigger_calls('INSERT INTO composition_devices"
                           " (composition_id, device_id) VALUES (" +
                           id + ", ''gpu-1''), (" + id + ", ''gpu-2''), (" + id +
                           ", ''gpu-3'')', 'composition_devices_')"),
            1);
  // Each new live link is claimed for the composition's host, as one by one.
  const std::string host = store().hosts()->front().fabric_id;
  auto claims = store().claims();
  ASSERT_TRUE(claims.ok()) << claims.error();
  EXPECT_EQ(*claims, (std::map<std::string, std::string>{
                         {"gpu-0", host}, {"gpu-1", host}, {"gpu-2", host}, {"gpu-3", host}}));
  // A change that does not end the composition starts none of its triggers.
  EXPECT_EQ(raw->query_int("SELECT trigger_calls('UPDATE compositions SET state = ''ready''"
                           " WHERE id = " +
                           id + "', 'compositions_')"),
            0);
  // Events: the other events of a composition than its end mark its rollup row once a
  // statement (migration 7).
  EXPECT_EQ(raw->query_int("SELECT trigger_calls('INSERT INTO events (ts_ms, kind,"
                           " composition_id) VALUES (15, ''hold'', " +
                           id + "), (16, ''unhold'', " + id + "), (17, ''hold'', " + id +
                           ")', 'events_')"),
            1);
  // Its end frees all four devices and drops their claims.
  ASSERT_TRUE(store().transition(taken->id, S::kReady, S::kReleasing, "", 20).ok());
  ASSERT_TRUE(store().transition(taken->id, S::kReleasing, S::kReleased, "", 30).ok());
  EXPECT_TRUE(store().claims()->empty());
  EXPECT_EQ(raw->query_int("SELECT COUNT(*) FROM composition_devices WHERE live = 1"), 0);
}

// The rollup row of an end is whole or not as the events before and after it say, also where
// they come in one statement with it: an event before the end leaves it whole, one after it
// does not (on PostgreSQL the other events mark the rows once a statement, migration 7).
TEST_P(BackendTest, AnEventAndAnEndInOneStatementLeaveTheRollupAsOneAfterTheOther) {
  add_inventory();
  std::vector<int64_t> ids;
  for (uint32_t job = 1; job <= 2; ++job) {
    auto c = store().create_composition(make_composition(job, "node1"),
                                        {"gpu-" + std::to_string(job)}, 10);
    ASSERT_TRUE(c.ok()) << c.error();
    ASSERT_TRUE(store().transition(c->id, S::kComposing, S::kReady, "", 20).ok());
    ASSERT_TRUE(store().transition(c->id, S::kReady, S::kReleasing, "", 30).ok());
    ids.push_back(c->id);
  }
  auto raw = raw_database();
  // Each composition's end, then in one statement a hold and the end's event, in either order.
  const auto end_with_a_hold = [&](int64_t id, bool hold_first) {
    const std::string c = std::to_string(id);
    const std::string who = "(SELECT uid FROM compositions WHERE id = " + c + ")";
    const std::string hold = "(45, 'hold', " + c + ", " + who + ")";
    const std::string end = "(50, 'released', " + c + ", " + who + ")";
    ASSERT_TRUE(raw->exec("UPDATE compositions SET state = 'released', updated_ms = 50"
                          " WHERE id = " +
                          c)
                    .ok());
    const Status s = raw->exec("INSERT INTO events (ts_ms, kind, composition_id, uid) VALUES " +
                               (hold_first ? hold + ", " + end : end + ", " + hold));
    ASSERT_TRUE(s.ok()) << s;
  };
  end_with_a_hold(ids[0], true);
  end_with_a_hold(ids[1], false);
  const auto whole = [&](int64_t id) {
    return raw->query_int("SELECT whole FROM composition_rollup WHERE composition_id = " +
                          std::to_string(id));
  };
  EXPECT_EQ(whole(ids[0]), 1);
  EXPECT_EQ(whole(ids[1]), 0);
  // An event of an ended composition in a statement of its own: its row is not whole.
  ASSERT_TRUE(raw->exec("INSERT INTO events (ts_ms, kind, composition_id) VALUES (60, 'hold', " +
                        std::to_string(ids[0]) + ")")
                  .ok());
  EXPECT_EQ(whole(ids[0]), 0);
}

// On PostgreSQL the rollup row of a composition's end is made by lookups by key, also by a
// plan made on the statistics of an empty ledger (pg_schema.cc, migration 7): such a plan,
// kept by composerd's writer (plan_cache_mode = force_generic_plan), scanned every event at
// every end.
TEST_P(BackendTest, TheRollupOfAnEndLooksUpItsEventsByKeyAlsoAfterAnAnalyzeOfNone) {
  if (backend() != Backend::kPostgresql) GTEST_SKIP() << "SQLite plans each statement itself";
  auto raw = raw_database();
  // Statistics of an empty database, as an early ANALYZE leaves them.
  ASSERT_TRUE(raw->exec("SET plan_cache_mode = force_generic_plan; ANALYZE").ok());
  add_inventory();
  std::vector<int64_t> ids;
  for (uint32_t job = 1; job <= 3; ++job) {
    auto c = store().create_composition(make_composition(job, "node1"),
                                        {"gpu-" + std::to_string(job)}, 10);
    ASSERT_TRUE(c.ok()) << c.error();
    ASSERT_TRUE(store().transition(c->id, S::kComposing, S::kReady, "", 20).ok());
    ASSERT_TRUE(store().transition(c->id, S::kReady, S::kReleasing, "", 30).ok());
    ASSERT_TRUE(store().transition(c->id, S::kReleasing, S::kReleased, "", 40).ok());
    ids.push_back(c->id);
  }
  // A second end of an ended composition: the trigger's statement is planned and runs on this
  // connection, and the composition's row is then not whole. The scans of events this
  // transaction made.
  ASSERT_TRUE(raw->exec("BEGIN").ok());
  ASSERT_TRUE(raw->exec("INSERT INTO events (ts_ms, kind, composition_id) VALUES (50,"
                        " 'failed', " +
                        std::to_string(ids[1]) + ")")
                  .ok());
  EXPECT_EQ(
      raw->query_int("SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'events'"), 0);
  EXPECT_EQ(raw->query_int("SELECT whole FROM composition_rollup WHERE composition_id = " +
                           std::to_string(ids[1])),
            0);
  EXPECT_EQ(raw->query_int("SELECT SUM(whole) FROM composition_rollup"), 2);
  // Another event of an ended composition: its row is not whole either, found by its index
  // (the reads above scanned the rollup).
  const auto rollup_scans = [&] {
    return raw->query_int(
        "SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'composition_rollup'");
  };
  const int64_t scanned = rollup_scans();
  ASSERT_TRUE(raw->exec("INSERT INTO events (ts_ms, kind, composition_id) VALUES (60,"
                        " 'hold', " +
                        std::to_string(ids[2]) + ")")
                  .ok());
  EXPECT_EQ(rollup_scans(), scanned);
  EXPECT_EQ(raw->query_int("SELECT SUM(whole) FROM composition_rollup"), 1);
  EXPECT_EQ(raw->query_int("SELECT whole FROM composition_rollup WHERE composition_id = " +
                           std::to_string(ids[0])),
            1);
  ASSERT_TRUE(raw->exec("ROLLBACK").ok());
}

// A write is a prepared statement whose plan PostgreSQL may make once and keep (a generic
// plan), however the tables grow after. Its few devices and their owners are looked up by key
// in that plan: a join there became a scan of every device and every composition, run again
// by each write (docs/BENCHMARKS.md, "High availability").
TEST_P(BackendTest, AWritesKeptPlanLooksUpItsDevicesAndTheirOwnersByKey) {
  if (backend() != Backend::kPostgresql) GTEST_SKIP() << "SQLite plans each statement itself";
  add_inventory();
  auto taken = store().create_composition(make_composition(1, "node1"), {"gpu-0"}, 10);
  ASSERT_TRUE(taken.ok()) << taken.error();
  auto raw = raw_database();
  ASSERT_TRUE(raw->exec("SET plan_cache_mode = force_generic_plan").ok());
  ASSERT_TRUE(raw->exec("PREPARE create_one AS " + std::string(pg::kCreateComposition.text)).ok());
  ASSERT_TRUE(
      raw->exec("PREPARE transition AS " + std::string(pg::kTransitionComposition.text)).ok());
  ASSERT_TRUE(
      raw->exec("PREPARE create_many AS " + std::string(pg::kCreateCompositions.text)).ok());
  ASSERT_TRUE(
      raw->exec("PREPARE transition_many AS " + std::string(pg::kTransitionCompositions.text))
          .ok());
  // How many lines of a statement's plan name a sequential scan of devices or compositions.
  ASSERT_TRUE(raw->exec("CREATE FUNCTION scans_in_plan(statement text) RETURNS bigint"
                        " LANGUAGE plpgsql AS $$ DECLARE n bigint := 0; line text; BEGIN"
                        " FOR line IN EXECUTE 'EXPLAIN ' || statement LOOP"
                        "  IF line ~ 'Seq Scan on (devices|compositions)\\M' THEN n := n + 1;"
                        "  END IF;"
                        " END LOOP; RETURN n; END $$")
                  .ok());
  EXPECT_EQ(raw->query_int("SELECT scans_in_plan('EXECUTE create_one(7, ''node2'', 1000,"
                           " ''alice'', ''physics'', ''training'', 1, ''A100-80G'', 0, 0,"
                           " ''composing'', 20, '''', '''', ''{gpu-1}'', ''gpu-1'')')"),
            0);
  EXPECT_EQ(raw->query_int("SELECT scans_in_plan('EXECUTE transition(" + std::to_string(taken->id) +
                           ", ''ready'', 30, 1, ''composing'', '''')')"),
            0);
  // The same for several calls at once (Flight::together): each parameter an array.
  EXPECT_EQ(raw->query_int("SELECT scans_in_plan('EXECUTE create_many(''{7,8}'',"
                           " ''{node2,node2}'', ''{1000,1000}'', ''{alice,alice}'',"
                           " ''{physics,physics}'', ''{training,training}'', ''{1,1}'',"
                           " ''{A100-80G,A100-80G}'', ''{0,0}'', ''{0,0}'',"
                           " ''{composing,composing}'', ''{20,20}'', ''{\"\",\"\"}'',"
                           " ''{\"\",\"\"}'', ''{\"{gpu-1}\",\"{gpu-2}\"}'',"
                           " ''{gpu-1,gpu-2}'')')"),
            0);
  EXPECT_EQ(raw->query_int("SELECT scans_in_plan('EXECUTE transition_many(''{" +
                           std::to_string(taken->id) +
                           "}'', ''{ready}'', ''{30}'', ''{1}'', ''{composing}'', ''{\"\"}'')')"),
            0);
  // The lookups find what the joins found.
  auto ready = store().transition(taken->id, CompositionState::kComposing, CompositionState::kReady,
                                  "", 30, true);
  ASSERT_TRUE(ready.ok()) << ready.error();
  ASSERT_EQ(ready->devices.size(), 1u);
  EXPECT_EQ(ready->devices[0].id, "gpu-0");
  EXPECT_EQ(ready->devices[0].composition_id, taken->id);
  EXPECT_EQ(ready->devices[0].node, "node1");
}

}  // namespace
}  // namespace composer::db::testing

namespace composer::db::testing {
namespace {

TEST_P(BackendTest, ClaimsFollowTheLinksAndEndWithARelease) {
  add_inventory();
  auto released = store().create_composition(make_composition(1, "node1"), {"gpu-0"}, 10);
  auto failed = store().create_composition(make_composition(2, "node1"), {"gpu-1"}, 10);
  ASSERT_TRUE(released.ok() && failed.ok());
  auto claims = store().claims();
  ASSERT_TRUE(claims.ok()) << claims.error();
  const std::string host = store().hosts()->front().fabric_id;
  EXPECT_EQ(*claims, (std::map<std::string, std::string>{{"gpu-0", host}, {"gpu-1", host}}));
  using St = CompositionState;
  ASSERT_TRUE(store().transition(released->id, St::kComposing, St::kReady, "", 20).ok());
  ASSERT_TRUE(store().transition(released->id, St::kReady, St::kReleasing, "", 30).ok());
  ASSERT_TRUE(store().transition(released->id, St::kReleasing, St::kReleased, "", 40).ok());
  // A failed composition may have left its device on the fabric: the claim stays.
  ASSERT_TRUE(store().transition(failed->id, St::kComposing, St::kFailed, "x", 40).ok());
  EXPECT_EQ(*store().claims(), (std::map<std::string, std::string>{{"gpu-1", host}}));
  // Only the claim on the named host is dropped.
  ASSERT_TRUE(store().drop_claims({"gpu-1"}, "elsewhere").ok());
  EXPECT_EQ(store().claims()->size(), 1u);
  ASSERT_TRUE(store().drop_claims({"gpu-1"}, host).ok());
  EXPECT_TRUE(store().claims()->empty());
}

TEST_P(BackendTest, HoldersMakeDevicesForeignWithOneEventEach) {
  add_inventory();
  const int64_t before = event_count();
  ASSERT_TRUE(store()
                  .set_holders({{"gpu-2", "host h9"}, {"gpu-3", "shared by systems a, b"}},
                               "foreign", "composerd", "", 50)
                  .ok());
  auto foreign = store().devices({.state = DeviceState::kForeign});
  ASSERT_TRUE(foreign.ok());
  ASSERT_EQ(foreign->size(), 2u);
  EXPECT_EQ((*foreign)[0].holder, "host h9");
  EXPECT_EQ(event_count(), before + 2);
  // Unchanged holders write nothing; an unknown device refuses the whole call.
  ASSERT_TRUE(store().set_holders({{"gpu-2", "host h9"}}, "foreign", "composerd", "", 60).ok());
  EXPECT_EQ(event_count(), before + 2);
  auto unknown =
      store().set_holders({{"gpu-2", ""}, {"nope", "x"}}, "foreign", "composerd", "", 70);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store().device("gpu-2")->holder, "host h9");
  ASSERT_TRUE(store().set_holders({{"gpu-2", ""}}, "adopt", "uid 0", "adopted", 80).ok());
  auto events = store().events({.since_ms = 80});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].kind, "adopt");
  EXPECT_EQ((*events)[0].from_state, "foreign");
  EXPECT_EQ((*events)[0].to_state, "free");
  EXPECT_EQ((*events)[0].owner.user, "uid 0");
}

INSTANTIATE_TEST_SUITE_P(Each, BackendTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgresql), backend_name);
INSTANTIATE_TEST_SUITE_P(Each, FilterTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgresql), backend_name);

}  // namespace
}  // namespace composer::db::testing
