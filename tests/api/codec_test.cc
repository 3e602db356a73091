#include "composer/api/codec.h"

#include <gtest/gtest.h>

#include <string>

#include "composer/common/strings.h"
#include "composer/common/units.h"

namespace composer::api {
namespace {

Device attached_gpu() {
  Device d;
  d.id = "gpu-a-00";
  d.type = DeviceType::kGpu;
  d.model = "A100-80G";
  d.zone = "z1";
  d.address = "0000:41:00.0";
  d.identity = {"0x10de", "0x20b5", "1652221000123", "GPU-5f2c1a0e-0000-4000-8000-000000000001"};
  d.composition_id = 12;
  d.node = "node1";
  return d;
}

Device drained_memory() {
  Device d;
  d.id = "mem-b-03";
  d.type = DeviceType::kMem;
  d.model = "CXL-DDR5";
  d.capacity_bytes = 256 * kGiB;
  d.zone = "z2";
  d.address = "numa2";
  d.health = Health::kWarning;
  d.drained = true;
  d.drain_reason = "ECC errors \"high\" | check";
  return d;
}

Composition sample_composition() {
  Composition c;
  c.id = 12;
  c.owner.job_id = 4294967295u;
  c.node = "node1";
  c.owner.uid = 1000;
  c.owner.user = "alice";
  c.owner.account = "physics";
  c.owner.workload = "training";
  c.request = Request{2, "A100-80G", 64 * kGiB, 1};
  c.state = CompositionState::kReady;
  c.created_ms = 1714550400000;
  c.updated_ms = 1714550401234;
  c.attempts = 1;
  c.last_error = "";
  c.mem_policy = "weighted:3:1";
  c.devices = {attached_gpu()};
  return c;
}

void expect_same(const Device& a, const Device& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.capacity_bytes, b.capacity_bytes);
  EXPECT_EQ(a.zone, b.zone);
  EXPECT_EQ(a.address, b.address);
  EXPECT_EQ(a.identity, b.identity);
  EXPECT_EQ(a.health, b.health);
  EXPECT_EQ(a.drained, b.drained);
  EXPECT_EQ(a.drain_reason, b.drain_reason);
  EXPECT_EQ(a.composition_id, b.composition_id);
  EXPECT_EQ(a.node, b.node);
  EXPECT_EQ(a.domains, b.domains);
}

// Decodes `text` as T and returns the refusal's message, failing the test if it was accepted.
template <typename T>
std::string refusal(const std::string& text) {
  auto json = parse_json(text);
  if (!json) return json.error().message;
  auto value = from_json<T>(*json);
  EXPECT_FALSE(value.ok()) << "accepted: " << text;
  if (value.ok()) return "";
  EXPECT_EQ(value.error().code, ErrorCode::kInvalidArgument);
  return value.error().message;
}

const char* kBody = R"({"uid":1000,"user":"alice","account":"physics","workload":"training",)"
                    R"("request":{"gpus":2,"gpu_model":"","mem_bytes":68719476736,"nvme":0}})";

std::string body_with_request(const std::string& request) {
  return R"({"uid":1000,"user":"alice","request":)" + request + "}";
}

TEST(Codec, DeviceRoundTripsAttachedAndFree) {
  for (const Device& d : {attached_gpu(), drained_memory()}) {
    auto back = from_json<Device>(to_json(d));
    ASSERT_TRUE(back.ok()) << back.error();
    expect_same(d, *back);
  }
}

TEST(Codec, DeviceEncodingFollowsTheApiDocument) {
  Json::Value attached = to_json(attached_gpu());
  EXPECT_EQ(attached["state"].asString(), "attached");
  EXPECT_EQ(attached["composition_id"].asInt64(), 12);
  EXPECT_EQ(attached["node"].asString(), "node1");
  Json::Value free = to_json(drained_memory());
  EXPECT_EQ(free["state"].asString(), "drained");
  EXPECT_TRUE(free["composition_id"].isNull());
  EXPECT_TRUE(free["node"].isNull());
  EXPECT_EQ(free["capacity_bytes"].asUInt64(), 256 * kGiB);
  EXPECT_EQ(attached["identity"]["pci_vendor"].asString(), "0x10de");
  EXPECT_EQ(attached["identity"]["uuid"].asString(), "GPU-5f2c1a0e-0000-4000-8000-000000000001");
  EXPECT_EQ(free["identity"]["serial"].asString(), "");
}

TEST(Codec, DeviceIdentityIsOptionalAndItsPciIdsAreChecked) {
  // Devices of older answers and job state files have none.
  Json::Value d = to_json(attached_gpu());
  d.removeMember("identity");
  auto old = from_json<Device>(d);
  ASSERT_TRUE(old.ok()) << old.error();
  EXPECT_TRUE(old->identity.empty());
  // Ids are kept in one form, whatever case or padding the writer used.
  d["identity"]["pci_vendor"] = "0x10DE";
  d["identity"]["pci_device"] = "20b5";
  auto padded = from_json<Device>(d);
  ASSERT_TRUE(padded.ok()) << padded.error();
  EXPECT_EQ(padded->identity.pci_vendor, "0x10de");
  EXPECT_EQ(padded->identity.pci_device, "0x20b5");
  EXPECT_EQ(padded->identity.serial, "");
  d["identity"]["pci_device"] = "0x20b5f";
  auto bad = from_json<Device>(d, "devices[0]");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "devices[0].identity.pci_device: '0x20b5f' is not a PCI id; expected 1 to 4 hex "
            "digits, e.g. 0x10de");
  d["identity"] = Json::Value(Json::objectValue);
  d["identity"]["mac"] = "x";
  bad = from_json<Device>(d);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "identity.mac: unknown field; a device identity has only these fields: pci_vendor, "
            "pci_device, serial, uuid");
}

TEST(Codec, DeviceDomainsAreAnObjectOfLevelToNameAndOptional) {
  Device d = attached_gpu();
  d.domains = {{"enclosure", "enc1"}, {"power", "pod-a:pdu-1"}};
  Json::Value v = to_json(d);
  EXPECT_EQ(v["domains"]["enclosure"].asString(), "enc1");
  EXPECT_EQ(v["domains"]["power"].asString(), "pod-a:pdu-1");
  auto back = from_json<Device>(v);
  ASSERT_TRUE(back.ok()) << back.error();
  expect_same(d, *back);
  EXPECT_TRUE(to_json(drained_memory())["domains"].isObject());
  EXPECT_EQ(to_json(drained_memory())["domains"].size(), 0u);

  // A device written before domains existed is in none.
  v.removeMember("domains");
  back = from_json<Device>(v);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_TRUE(back->domains.empty());

  v["domains"] = Json::Value(Json::arrayValue);
  auto refused = from_json<Device>(v);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("domains: expected an object of level: domain name"),
            std::string::npos)
      << refused.error().message;
  v["domains"] = Json::Value(Json::objectValue);
  v["domains"]["power"] = "";
  refused = from_json<Device>(v);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("domains.power"), std::string::npos)
      << refused.error().message;
}

TEST(Codec, CompositionRoundTrips) {
  const Composition c = sample_composition();
  auto back = from_text<Composition>(to_text(to_json(c)));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->id, c.id);
  EXPECT_EQ(back->owner.job_id, c.owner.job_id);
  EXPECT_EQ(back->node, c.node);
  EXPECT_EQ(back->owner.uid, c.owner.uid);
  EXPECT_EQ(back->owner.user, c.owner.user);
  EXPECT_EQ(back->owner.account, c.owner.account);
  EXPECT_EQ(back->owner.workload, c.owner.workload);
  EXPECT_EQ(back->request, c.request);
  EXPECT_EQ(back->state, c.state);
  EXPECT_EQ(back->created_ms, c.created_ms);
  EXPECT_EQ(back->updated_ms, c.updated_ms);
  EXPECT_EQ(back->attempts, c.attempts);
  EXPECT_EQ(back->mem_policy, "weighted:3:1");
  ASSERT_EQ(back->devices.size(), 1u);
  expect_same(back->devices[0], c.devices[0]);
}

TEST(Codec, PoolRowEventHealthAndBodiesRoundTrip) {
  PoolRow row{.type = DeviceType::kNvme,
              .model = "P5620",
              .zone = "z3",
              .total = 9,
              .free = 5,
              .attached = 2,
              .drained = 1,
              .failed = 0,
              .foreign = 1,
              .total_bytes = 9 * kTiB,
              .free_bytes = 5 * kTiB,
              .schedulable_bytes = 7 * kTiB};
  auto row_back = from_json<PoolRow>(to_json(row));
  ASSERT_TRUE(row_back.ok()) << row_back.error();
  EXPECT_EQ(row_back->type, row.type);
  EXPECT_EQ(row_back->total, 9u);
  EXPECT_EQ(row_back->foreign, 1u);
  EXPECT_EQ(row_back->free_bytes, 5 * kTiB);
  EXPECT_EQ(row_back->schedulable_bytes, 7 * kTiB);
  EXPECT_EQ(to_json(row)["schedulable"].asUInt(), 7u);
  // A schedulable count that contradicts free and attached is refused.
  Json::Value wrong = to_json(row);
  wrong["schedulable"] = 9;
  auto refused = from_json<PoolRow>(wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("schedulable"), std::string::npos) << refused.error();

  Event e;
  e.id = 7;
  e.ts_ms = 1714550400000;
  e.kind = "ready";
  e.composition_id = 12;
  e.owner.job_id = 4711;
  e.node = "node1";
  e.owner.uid = 1000;
  e.owner.user = "alice";
  e.from_state = "composing";
  e.to_state = "ready";
  e.devices = {"gpu-a-00", "gpu-a-01"};
  auto e_back = from_json<Event>(to_json(e));
  ASSERT_TRUE(e_back.ok()) << e_back.error();
  EXPECT_EQ(e_back->devices, e.devices);
  EXPECT_EQ(e_back->composition_id, 12);
  e.composition_id.reset();
  e_back = from_json<Event>(to_json(e));
  ASSERT_TRUE(e_back.ok()) << e_back.error();
  EXPECT_FALSE(e_back->composition_id.has_value());

  HealthInfo h{"ok", "sim", "0.1.0", 12};
  auto h_back = from_json<HealthInfo>(to_json(h));
  ASSERT_TRUE(h_back.ok()) << h_back.error();
  EXPECT_EQ(*h_back, h);
  h.slurm_licenses = "remote";
  h.license_server = "composer";
  h_back = from_json<HealthInfo>(to_json(h));
  ASSERT_TRUE(h_back.ok()) << h_back.error();
  EXPECT_EQ(*h_back, h);
  // An older composerd says nothing of it: local.
  h_back =
      from_text<HealthInfo>(R"({"status":"ok","fabric":"sim","version":"0.1.0","uptime_s":1})");
  ASSERT_TRUE(h_back.ok()) << h_back.error();
  EXPECT_EQ(h_back->slurm_licenses, "local");
  EXPECT_EQ(h_back->role, "");
  // Several composerd on one store: who is active, the epoch and since when.
  h.role = "standby";
  h.epoch = 4;
  h.active = "http://ctl1:6830";
  h.active_since_ms = 1700000000000;
  h_back = from_json<HealthInfo>(to_json(h));
  ASSERT_TRUE(h_back.ok()) << h_back.error();
  EXPECT_EQ(*h_back, h);
  EXPECT_FALSE(from_text<HealthInfo>(R"({"status":"ok","fabric":"sim","version":"0.1.0",)"
                                     R"("uptime_s":1,"role":"leader"})")
                   .ok());

  auto body = from_text<ComposeBody>(kBody);
  ASSERT_TRUE(body.ok()) << body.error();
  EXPECT_EQ(body->owner.uid, 1000u);
  EXPECT_EQ(body->request.mem_bytes, 64 * kGiB);
  auto body_back = from_json<ComposeBody>(to_json(*body));
  ASSERT_TRUE(body_back.ok());
  EXPECT_EQ(*body_back, *body);

  auto drain = from_json<DrainBody>(to_json(DrainBody{"fan failure"}));
  ASSERT_TRUE(drain.ok());
  EXPECT_EQ(drain->reason, "fan failure");
}

TEST(Codec, ErrorBodyCarriesEveryStableCode) {
  for (ErrorCode code :
       {ErrorCode::kInvalidArgument, ErrorCode::kNotFound, ErrorCode::kConflict,
        ErrorCode::kInsufficient, ErrorCode::kUnauthenticated, ErrorCode::kPermissionDenied,
        ErrorCode::kFabric, ErrorCode::kTimeout, ErrorCode::kUnavailable, ErrorCode::kInternal}) {
    Json::Value v = to_json(Error{code, "why"});
    EXPECT_EQ(v["error"]["code"].asString(), to_string(code));
    auto back = from_json<ErrorBody>(v);
    ASSERT_TRUE(back.ok()) << back.error();
    EXPECT_EQ(back->error.code, code);
    EXPECT_EQ(back->error.message, "why");
  }
  EXPECT_EQ(refusal<ErrorBody>(R"({"error":{"code":"oops","message":"m"}})"),
            "error.code: 'oops' is not an error code; expected one of invalid_argument, "
            "unauthenticated, permission_denied, not_found, conflict, insufficient_resources, "
            "timeout, fabric_error, unavailable, internal");
}

TEST(Codec, HttpStatusesMatchTheApiDocument) {
  EXPECT_EQ(http_status(ErrorCode::kInvalidArgument), 400);
  EXPECT_EQ(http_status(ErrorCode::kUnauthenticated), 401);
  EXPECT_EQ(http_status(ErrorCode::kPermissionDenied), 403);
  EXPECT_EQ(http_status(ErrorCode::kNotFound), 404);
  EXPECT_EQ(http_status(ErrorCode::kConflict), 409);
  EXPECT_EQ(http_status(ErrorCode::kInsufficient), 409);
  EXPECT_EQ(http_status(ErrorCode::kTimeout), 504);
  EXPECT_EQ(http_status(ErrorCode::kFabric), 502);
  EXPECT_EQ(http_status(ErrorCode::kUnavailable), 503);
  EXPECT_EQ(http_status(ErrorCode::kInternal), 500);
  EXPECT_EQ(error_code_for_status(503), ErrorCode::kUnavailable);
  EXPECT_EQ(error_code_for_status(404), ErrorCode::kNotFound);
  EXPECT_EQ(error_code_for_status(418), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_code_for_status(500), ErrorCode::kInternal);
}

TEST(Codec, ADevicePageCarriesItsCursorOnlyWhenThereIsMore) {
  DevicePage page{{attached_gpu()}, "gpu-a-00"};
  auto back = device_page_from_json(to_json(page));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->items.size(), 1u);
  EXPECT_EQ(back->next_cursor, "gpu-a-00");
  const Json::Value last = to_json(DevicePage{{attached_gpu()}, ""});
  EXPECT_FALSE(last.isMember("next_cursor"));
  auto read = device_page_from_json(last);
  ASSERT_TRUE(read.ok());
  EXPECT_TRUE(read->next_cursor.empty());
  Json::Value bad = to_json(page);
  bad["next_cursor"] = 7;
  EXPECT_FALSE(device_page_from_json(bad).ok());
}

TEST(Codec, CompositionAndEventPagesCarryTheirListAndCursor) {
  Composition c;
  c.id = 812;
  c.owner.job_id = 7;
  c.node = "n1";
  const Json::Value comps = to_json(CompositionPage{{c}, "812"});
  EXPECT_TRUE(comps.isMember("compositions"));
  auto back = composition_page_from_json(comps);
  ASSERT_TRUE(back.ok()) << back.error();
  ASSERT_EQ(back->items.size(), 1u);
  EXPECT_EQ(back->items[0].id, 812);
  EXPECT_EQ(back->next_cursor, "812");
  EXPECT_FALSE(composition_page_from_json(to_json(DevicePage{{}, ""})).ok());

  Event e;
  e.id = 5;
  e.ts_ms = 1000;
  e.kind = "drain";
  const Json::Value events = to_json(EventPage{{e}, ""});
  EXPECT_FALSE(events.isMember("next_cursor"));
  auto read = event_page_from_json(events);
  ASSERT_TRUE(read.ok()) << read.error();
  ASSERT_EQ(read->items.size(), 1u);
  EXPECT_EQ(read->items[0].kind, "drain");
  EXPECT_TRUE(read->next_cursor.empty());
}

TEST(Codec, ListsAndReleaseAnswersRoundTrip) {
  auto devices = devices_from_json(devices_to_json({attached_gpu(), drained_memory()}));
  ASSERT_TRUE(devices.ok()) << devices.error();
  EXPECT_EQ(devices->size(), 2u);
  auto comps = compositions_from_json(compositions_to_json({sample_composition()}));
  ASSERT_TRUE(comps.ok()) << comps.error();
  EXPECT_EQ(comps->at(0).owner.job_id, 4294967295u);
  auto pool = pool_from_json(pool_to_json({PoolRow{}, PoolRow{}}));
  ASSERT_TRUE(pool.ok()) << pool.error();
  EXPECT_EQ(pool->size(), 2u);
  auto events = events_from_json(events_to_json({}));
  ASSERT_TRUE(events.ok()) << events.error();
  EXPECT_TRUE(events->empty());

  auto none = release_from_json(release_to_json(std::nullopt));
  ASSERT_TRUE(none.ok()) << none.error();
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(to_text(release_to_json(std::nullopt)), R"({"released":false})");
  auto released = release_from_json(release_to_json(sample_composition()));
  ASSERT_TRUE(released.ok()) << released.error();
  ASSERT_TRUE(released->has_value());
  EXPECT_EQ((*released)->id, 12);
  auto wrong = release_from_json(*parse_json(R"({"released":true})"));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().message, "released: true comes with the released composition, not alone");
}

TEST(Codec, RequestFieldsDefaultToNothing) {
  auto q = from_text<Request>(R"({"gpus":1})");
  ASSERT_TRUE(q.ok()) << q.error();
  EXPECT_EQ(*q, (Request{1, "", 0, 0}));
  auto empty = from_text<Request>("{}");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(Codec, AComposeBodyCarriesTheJobsMemoryPolicyOnlyWhenGiven) {
  ComposeBody b;
  b.owner.user = "alice";
  EXPECT_FALSE(to_json(b).isMember("mem_policy"));  // a composerd without policies refuses it
  b.mem_policy = "interleave";
  auto back = from_json<ComposeBody>(to_json(b));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->mem_policy, "interleave");
  auto reduced = from_text<ComposeBody>(R"({"uid":1000,"user":"alice","request":{},)"
                                        R"("mem_policy":"weighted:6:2"})");
  ASSERT_TRUE(reduced.ok()) << reduced.error();
  EXPECT_EQ(reduced->mem_policy, "weighted:3:1");
  EXPECT_EQ(refusal<ComposeBody>(R"({"uid":1000,"user":"alice","request":{},)"
                                 R"("mem_policy":"local"})"),
            "mem_policy: expected bind, preferred, interleave or weighted:D:C with D and C "
            "whole numbers from 1 to 255 (pages on DRAM to pages on CXL), e.g. weighted:3:1, "
            "got \"local\"");
}

TEST(Codec, RequestLimitsAreInclusive) {
  auto q = from_text<Request>(R"({"gpus":1024,"nvme":1024,"mem_bytes":1125899906842624})");
  ASSERT_TRUE(q.ok()) << q.error();
  EXPECT_EQ(q->gpus, kMaxDevicesPerNode);
  EXPECT_EQ(q->mem_bytes, kMaxMemBytes);
}

TEST(Codec, RefusesNumbersOutsideTheirFieldsRange) {
  EXPECT_EQ(refusal<ComposeBody>(body_with_request(R"({"gpus":-1})")),
            "request.gpus: -1 is not a whole number from 0 to 1024");
  EXPECT_EQ(refusal<ComposeBody>(body_with_request(R"({"gpus":1025})")),
            "request.gpus: 1025 is not a whole number from 0 to 1024");
  EXPECT_EQ(refusal<ComposeBody>(body_with_request(R"({"nvme":99999999999})")),
            "request.nvme: 99999999999 is not a whole number from 0 to 1024");
  EXPECT_EQ(refusal<ComposeBody>(body_with_request(R"({"mem_bytes":1125899906842625})")),
            "request.mem_bytes: 1125899906842625 is not a whole number from 0 to "
            "1125899906842624");
  EXPECT_EQ(refusal<ComposeBody>(body_with_request(R"({"mem_bytes":18446744073709551616})")),
            "request.mem_bytes: 1.8446744073709552e+19 is not a whole number from 0 to "
            "1125899906842624");
  EXPECT_EQ(refusal<ComposeBody>(R"({"uid":4294967296,"user":"a","request":{}})"),
            "uid: 4294967296 is not a whole number from 0 to 4294967295");
  EXPECT_EQ(refusal<ComposeBody>(R"({"uid":-5,"user":"a","request":{}})"),
            "uid: -5 is not a whole number from 0 to 4294967295");
}

TEST(Codec, RefusesFractionsAndNumbersWrittenAsText) {
  EXPECT_EQ(refusal<Request>(R"({"gpus":2.5})"), "gpus: 2.5 is not a whole number from 0 to 1024");
  EXPECT_EQ(refusal<Request>(R"({"gpus":2.0})"), "gpus: 2.0 is not a whole number from 0 to 1024");
  EXPECT_EQ(refusal<Request>(R"({"gpus":"2"})"),
            "gpus: \"2\" is not a whole number from 0 to 1024");
  EXPECT_EQ(refusal<Request>(R"({"gpus":true})"),
            "gpus: true is not a whole number from 0 to 1024");
  EXPECT_EQ(refusal<Request>(R"({"gpus":null})"),
            "gpus: null is not a whole number from 0 to 1024");
}

TEST(Codec, RefusesWrongJsonTypes) {
  EXPECT_EQ(refusal<Request>(R"({"gpu_model":7})"),
            "gpu_model: expected a string, got the number 7");
  EXPECT_EQ(refusal<ComposeBody>(R"({"uid":1,"user":"a","request":[]})"),
            "request: expected a request (an object), got an array");
  EXPECT_EQ(refusal<ComposeBody>("[1]"), "body: expected a compose body (an object), got an array");
  Json::Value d = to_json(attached_gpu());
  d["drained"] = "no";
  auto device = from_json<Device>(d);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.error().message, "drained: expected true or false, got the string \"no\"");
  Json::Value c = to_json(sample_composition());
  c["devices"] = Json::Value(Json::objectValue);
  auto composition = from_json<Composition>(c);
  ASSERT_FALSE(composition.ok());
  EXPECT_EQ(composition.error().message, "devices: expected an array, got an object");
}

TEST(Codec, RefusesUnknownFieldsNamingTheAllowedOnes) {
  EXPECT_EQ(refusal<ComposeBody>(body_with_request(R"({"gpus":1,"cpus":4})")),
            "request.cpus: unknown field; a request has only these fields: gpus, gpu_model, "
            "mem_bytes, nvme");
  EXPECT_EQ(refusal<DrainBody>(R"({"reason":"x","force":true})"),
            "force: unknown field; a drain body has only these fields: reason");
  Json::Value list = compositions_to_json({sample_composition()});
  list["compositions"][0]["devices"][0]["extra"] = 1;
  auto decoded = compositions_from_json(list);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.error().message.substr(0, 50),
            "compositions[0].devices[0].extra: unknown field; a");
}

TEST(Codec, RefusesUnknownEnumNames) {
  Json::Value d = to_json(attached_gpu());
  d["type"] = "fpga";
  auto device = from_json<Device>(d, "devices[4]");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.error().message,
            "devices[4].type: 'fpga' is not a device type; expected one of gpu, mem, nvme");
  Json::Value c = to_json(sample_composition());
  c["state"] = "READY";
  auto composition = from_json<Composition>(c);
  ASSERT_FALSE(composition.ok());
  EXPECT_EQ(composition.error().message,
            "state: 'READY' is not a composition state; expected one of requested, composing, "
            "ready, releasing, released, failed");
  d = to_json(attached_gpu());
  d["health"] = "fine";
  device = from_json<Device>(d);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.error().message,
            "health: 'fine' is not a health state; expected one of ok, warning, critical");
}

TEST(Codec, RefusesMissingRequiredFields) {
  EXPECT_EQ(refusal<ComposeBody>(R"({"user":"alice","request":{}})"),
            "uid: required field is missing");
  EXPECT_EQ(refusal<ComposeBody>(R"({"uid":0,"user":"alice"})"),
            "request: required field is missing");
  EXPECT_EQ(refusal<ComposeBody>(R"({"uid":0,"user":"","request":{}})"),
            "user: must name the job's user, not be empty");
  EXPECT_EQ(refusal<DrainBody>(R"({"reason":""})"), "reason: must say why, not be empty");
  Json::Value d = to_json(attached_gpu());
  d.removeMember("zone");
  auto device = from_json<Device>(d);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.error().message, "zone: required field is missing");
  EXPECT_EQ(refusal<HealthInfo>(R"({"status":"ok","fabric":"sim","version":"0.1.0"})"),
            "uptime_s: required field is missing");
  EXPECT_EQ(
      refusal<HealthInfo>(
          R"({"status":"ok","fabric":"sim","version":"0.1.0","uptime_s":1,"slurm_licenses":"dbd"})"),
      "slurm_licenses: expected local or remote");
}

TEST(Codec, RefusesADeviceStateThatContradictsItsRecord) {
  Json::Value d = to_json(attached_gpu());
  d["state"] = "free";
  auto device = from_json<Device>(d);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.error().message,
            "state: 'free' contradicts health, drained, composition_id and holder, which make it "
            "'attached'");
}

TEST(Codec, RefusesNegativeIdsAndTimes) {
  Json::Value c = to_json(sample_composition());
  c["created_ms"] = -1;
  auto composition = from_json<Composition>(c);
  ASSERT_FALSE(composition.ok());
  EXPECT_EQ(composition.error().message,
            "created_ms: -1 is not a whole number from 0 to 9223372036854775807");
}

TEST(Codec, LongOffendingValuesAreShortenedInMessages) {
  const std::string message = refusal<Request>(R"({"gpus":")" + std::string(500, 'x') + R"("})");
  EXPECT_LT(message.size(), 120u);
  EXPECT_NE(message.find("xxx... is not a whole number"), std::string::npos) << message;
}

TEST(ParseJson, RefusesMalformedTextWithLineAndColumn) {
  auto r = parse_json(R"({"gpus":1,})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message,
            "malformed JSON at line 1, column 11: Missing '}' or object member name");
  r = parse_json(R"({"gpus":1} trailing)");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "malformed JSON at line 1, column 12: Extra non-whitespace after JSON value");
  r = parse_json(R"({"gpus":1,"gpus":2})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "malformed JSON at line 1, column 11: Duplicate key: 'gpus'");
  r = parse_json("  \n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "empty body: expected a JSON object");
  r = parse_json("{\"a\": 1} // comment");
  EXPECT_FALSE(r.ok());
  r = parse_json("7");
  EXPECT_FALSE(r.ok());
}

TEST(ParseJson, RefusesNumbersJsonDoesNotWrite) {
  for (const std::string n :
       {"01", "00", "-01", "-00", "1.", ".5", "+1", "1e", "1.e5", "1e+", "1-2", "--1"}) {
    auto r = parse_json(R"({"gpus":)" + n + "}");
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.error().message, "malformed JSON at line 1, column 9: '" + n +
                                     "' is not a JSON number (digits without leading zeros, an "
                                     "optional fraction and exponent)");
  }
  EXPECT_EQ(refusal<ComposeBody>(R"({"uid":00,"user":"a","request":{}})"),
            "malformed JSON at line 1, column 8: '00' is not a JSON number (digits without "
            "leading zeros, an optional fraction and exponent)");
  for (const std::string n : {"0", "-0", "10", "1.5", "0.25", "1e5", "1E+5", "2.5e-3", "-7"}) {
    EXPECT_TRUE(parse_json("[" + n + "]").ok()) << n;
  }
  // Digits inside strings are not numbers.
  EXPECT_TRUE(parse_json(R"({"user":"007","x":["+1", ".5"]})").ok());
}

TEST(ParseJson, RefusesNestingBeyondTheLimit) {
  std::string deep = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json(deep).ok());
  for (size_t depth : {size_t{kMaxJsonDepth + 1}, size_t{5000}, size_t{100000}}) {
    auto r = parse_json(std::string(depth, '[') + std::string(depth, ']'));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(r.error().message, "malformed JSON at line 1, column " +
                                     std::to_string(kMaxJsonDepth + 1) + ": nested deeper than " +
                                     std::to_string(kMaxJsonDepth) + " levels");
  }
  auto objects = parse_json(R"({"a":)" + std::string(100, '{') + std::string(101, '}'));
  ASSERT_FALSE(objects.ok());
  EXPECT_NE(objects.error().message.find("nested deeper than"), std::string::npos);
}

TEST(ParseJson, RefusesTextThatIsNotUtf8AndRawControlCharacters) {
  auto r = parse_json("{\"user\":\"al\xffice\"}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "malformed JSON: the text is not valid UTF-8");
  r = parse_json("{\"user\":\"al\rice\"}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "malformed JSON at line 1, column 12: a raw control character in a string (JSON "
            "writes it \\u00XX)");
  EXPECT_TRUE(parse_json("{\"user\":\"jürgen\",\n\t\"a\":1}\r\n").ok());
}

// Names and reasons end up in answers, logs and reports: text only, and the refusal shows
// what it refuses escaped.
TEST(Codec, RefusesControlCharactersInNamesAndReasons) {
  EXPECT_EQ(refusal<ComposeBody>(R"({"uid":1,"user":"al\u0000ice","request":{}})"),
            "user: expected text (UTF-8 without control characters), got \"al\\x00ice\"");
  EXPECT_EQ(refusal<ComposeBody>(R"({"uid":1,"user":"a","account":"x\ry","request":{}})"),
            "account: expected text (UTF-8 without control characters), got \"x\\ry\"");
  EXPECT_EQ(refusal<ComposeBody>(R"({"uid":1,"user":"a","workload":"\u001b[2J","request":{}})"),
            "workload: expected text (UTF-8 without control characters), got \"\\x1b[2J\"");
  EXPECT_EQ(refusal<DrainBody>(R"({"reason":"fan\nfailed"})"),
            "reason: expected text (UTF-8 without control characters), got \"fan\\nfailed\"");
  // \udc80 is a lone surrogate: jsoncpp makes it bytes that are not UTF-8.
  const std::string lone = refusal<ComposeBody>(R"({"uid":1,"user":"a\udc80","request":{}})");
  EXPECT_TRUE(valid_utf8(lone)) << lone;
  const std::string field =
      refusal<ComposeBody>(R"({"uid":1,"user":"a","\u0007x":1,"request":{}})");
  EXPECT_EQ(field.rfind("\\x07x: unknown field", 0), 0u) << field;
  auto good = from_text<ComposeBody>(R"({"uid":1,"user":"Zoë","account":"é-1","request":{}})");
  ASSERT_TRUE(good.ok()) << good.error();
  EXPECT_EQ(good->owner.user, "Zoë");
}

TEST(ParseJson, CompactWriterKeepsUtf8AndOneLine) {
  Json::Value v(Json::objectValue);
  v["user"] = "jürgen";
  v["list"] = Json::Value(Json::arrayValue);
  EXPECT_EQ(to_text(v), R"({"list":[],"user":"jürgen"})");
}

}  // namespace
}  // namespace composer::api
