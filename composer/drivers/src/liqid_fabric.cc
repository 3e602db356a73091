#include "composer/drivers/liqid_fabric.h"

#include <json/json.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "composer/api/codec.h"
#include "composer/common/log.h"
#include "composer/common/strings.h"
#include "composer/drivers/credentials.h"
#include "composer/http/http.h"
#include "fabric_manager_http.h"

namespace composer::drivers {
namespace {

constexpr std::string_view kApiRoot = "/liqid/api/v2/";
constexpr size_t kKeptOperations = 1024;

Error bad_option(std::string message) {
  return Error{ErrorCode::kInvalidArgument, "liqid options: " + std::move(message)};
}

// A Liqid id may come as a number or as a string ("3"); both compare as text.
std::string id_text(const Json::Value& v) {
  if (v.isString()) return v.asString();
  if (v.isIntegral()) return std::to_string(v.asInt64());
  return "";
}

// The public API documents device_state as a string without listing its values. These are
// the states taken as healthy or degraded; any other state (failed, offline, ...) is critical.
Health health_of(const std::string& device_state) {
  const std::string s = lower(device_state);
  if (s.empty() || s == "active" || s == "ok" || s == "available" || s == "online" || s == "idle" ||
      s == "attached" || s == "connected") {
    return Health::kOk;
  }
  if (s == "degraded" || s == "warning" || s == "busy") return Health::kWarning;
  return Health::kCritical;
}

// "[code] message; [code] message" from an envelope's errors, or "".
std::string envelope_errors(const Json::Value& response) {
  std::string out;
  const Json::Value& errors = response["errors"];
  if (!errors.isArray()) return out;
  for (const Json::Value& e : errors) {
    std::string m = e.isObject() ? e["message"].asString() : e.isString() ? e.asString() : "";
    if (m.empty()) m = "(no message)";
    if (!out.empty()) out += "; ";
    if (e.isObject() && e["code"].isIntegral()) m += " (code " + id_text(e["code"]) + ")";
    out += m;
  }
  return out;
}

struct Kind {
  DeviceType type;
  const char* status_path;
  const char* info_path;
  const char* relate_path;
};
constexpr Kind kKinds[] = {
    {DeviceType::kGpu, "status/gpu", "device/info/gpu", "relate/gpu"},
    {DeviceType::kMem, "status/mem", "device/info/mem", "relate/memory"},
    {DeviceType::kNvme, "status/storage", "device/info/ssd", "relate/storage"},
};

const Kind& kind_of(DeviceType t) {
  for (const Kind& k : kKinds) {
    if (k.type == t) return k;
  }
  return kKinds[0];
}

struct LiqidDevice {
  DeviceType type = DeviceType::kGpu;
  Json::Value status;  // as the Director answered it; relate requests carry it back
  std::string group_id;
  std::string machine_id;
};

// What the host can recognise a device by: the PCI vendor and device ids of its status record
// ("vid", "did"), else of its device info ("pci_vendor", "pci_device"), and the info's
// "serial_num". The Director does not know the host's PCI address of a device.
DeviceIdentity identity_of(const Json::Value& status, const Json::Value& info) {
  DeviceIdentity id;
  auto pci = [](std::string* out, const Json::Value& first, const Json::Value& second) {
    for (const Json::Value* v : {&first, &second}) {
      if (!out->empty() || !v->isString()) continue;
      if (std::optional<std::string> n = normal_pci_id(v->asString())) *out = *n;
    }
  };
  pci(&id.pci_vendor, status["vid"], info["pci_vendor"]);
  pci(&id.pci_device, status["did"], info["pci_device"]);
  if (info["serial_num"].isString()) id.serial = info["serial_num"].asString();
  return id;
}

// What the Director shows at one moment.
struct Snapshot {
  std::map<std::string, Json::Value> machines;  // mach_id -> Machine
  std::map<std::string, Json::Value> groups;    // grp_id -> Group
  std::map<std::string, LiqidDevice> devices;   // name -> device
  std::map<std::string, std::string> models;    // name -> model, when infos were read
  std::map<std::string, Json::Value> infos;     // name -> device info, when infos were read

  const Json::Value* machine_named(const std::string& name) const {
    for (const auto& [id, m] : machines) {
      if (m["mach_name"].asString() == name) return &m;
    }
    return nullptr;
  }
};

}  // namespace

struct LiqidFabric::Impl {
  explicit Impl(LiqidOptions opts)
      : o(std::move(opts)), reads(http_options(o, o.get_retries)), writes(http_options(o, 0)) {}

  LiqidOptions o;
  http::HttpClient reads;   // GETs, retried when the connection fails or 502/503/504
  http::HttpClient writes;  // everything that changes the fabric: never repeated blindly

  std::mutex key_mu;
  std::string api_key;
  bool releasing = false;  // set once the driver is going away: no new key then

  // One fabric edit at a time: the Director keeps edit mode per machine, and composerd may
  // attach to several nodes at once.
  std::mutex edit_mu;

  std::mutex ops_mu;
  uint64_t next_op = 1;
  std::map<std::string, Operation> ops;
  std::deque<std::string> op_order;

  std::string url(std::string_view path) const {
    return o.base_url + std::string(kApiRoot) + std::string(path);
  }

  Expected<std::vector<std::string>> auth_headers(bool basic) {
    if (basic || o.auth == LiqidOptions::Auth::kBasic) {
      return std::vector<std::string>{basic_auth_header(o)};
    }
    std::lock_guard<std::mutex> lock(key_mu);
    if (api_key.empty()) return std::vector<std::string>{};
    return std::vector<std::string>{"X-API-Key: " + api_key};
  }

  // One call: the HTTP status and the envelope checked, the envelope's data answered.
  // `basic` forces basic authentication (the digest calls).
  Expected<Json::Value> call(const std::string& method, const std::string& path,
                             const Json::Value* body = nullptr, bool basic = false) {
    for (int attempt = 0;; ++attempt) {
      http::HttpRequest req;
      req.method = method;
      req.url = url(path);
      if (body != nullptr) req.body = api::to_text(*body);
      req.headers = [this, basic, changes = method != "GET"]() {
        auto h = auth_headers(basic);
        if (h && changes && o.epoch > 0)
          h->push_back("X-Composer-Epoch: " + std::to_string(o.epoch));
        return h;
      };
      const std::string what = "liqid: " + method + " " + path;
      auto r = (method == "GET" ? reads : writes).send(req);
      if (!r) return Error{r.error().code, what + ": " + r.error().message};
      if (r->status == 401 && !basic && o.auth == LiqidOptions::Auth::kApiKey && attempt == 0 &&
          !releasing) {
        log::info("liqid: API key refused, obtaining a new one", {{"url", o.base_url}});
        if (Status s = obtain_key(); !s) return s.error();
        continue;
      }
      Json::Value v;
      std::string why;
      const bool parsed = !r->body.empty() && parse_json(r->body, &v, &why) && v.isObject();
      const Json::Value& response = parsed ? v["response"] : Json::Value::nullSingleton();
      if (r->status < 200 || r->status > 299) {
        const std::string m = response.isObject() ? envelope_errors(response) : "";
        return Error{
            error_code_for_manager_status(r->status),
            what + " answered HTTP " + std::to_string(r->status) + (m.empty() ? "" : ": " + m)};
      }
      if (!parsed || !response.isObject()) {
        return Error{ErrorCode::kFabric,
                     what +
                         " answered no response envelope ({\"response\": {\"code\", "
                         "\"errors\", \"data\"}})" +
                         (why.empty() ? "" : ": " + why)};
      }
      const std::string errors = envelope_errors(response);
      const Json::Value& code = response["code"];
      if (!code.isIntegral() || code.asInt64() != 0 || !errors.empty()) {
        return Error{ErrorCode::kFabric,
                     what + " failed: the Director answered code " +
                         (code.isIntegral() ? id_text(code) : std::string("(none)")) +
                         (errors.empty() ? "" : ": " + errors)};
      }
      if (!response["data"].isArray()) {
        return Error{ErrorCode::kFabric, what + " answered an envelope without a data array"};
      }
      return response["data"];
    }
  }

  Status obtain_key() {
    Json::Value data;
    {
      // A digest left by an earlier run under the same label would refuse a new one.
      auto gone = call("DELETE", "digest/" + o.api_key_label, nullptr, true);
      (void)gone;
      auto d = call("POST", "digest/" + o.api_key_label, nullptr, true);
      if (!d) return Error{d.error().code, "obtaining an API key: " + d.error().message};
      data = std::move(d).value();
    }
    if (data.empty() || !data[0]["digest_key"].isString() ||
        data[0]["digest_key"].asString().empty()) {
      return Error{ErrorCode::kFabric, "liqid: POST digest/" + o.api_key_label +
                                           " answered no digest_key; use basic authentication"};
    }
    std::lock_guard<std::mutex> lock(key_mu);
    api_key = data[0]["digest_key"].asString();
    log::info("liqid: API key obtained", {{"url", o.base_url}, {"label", o.api_key_label}});
    return Status::Ok();
  }

  void release_key() {
    {
      std::lock_guard<std::mutex> lock(key_mu);
      if (api_key.empty()) return;
    }
    releasing = true;
    auto r = call("DELETE", "digest/" + o.api_key_label);
    if (!r) {
      log::warning("liqid: deleting the API key's digest failed",
                   {{"url", o.base_url}, {"error", r.error().message}});
    }
    std::lock_guard<std::mutex> lock(key_mu);
    api_key.clear();
  }

  // Machines are served only when the host map names them (or the map is empty).
  bool served(const Json::Value& machine) const {
    return o.host_map.empty() || o.host_map.contains(machine["mach_name"].asString());
  }
  std::string node_of(const std::string& machine_name) const {
    auto it = o.host_map.find(machine_name);
    return it == o.host_map.end() ? machine_name : it->second;
  }

  Expected<Snapshot> read(bool with_infos) {
    Snapshot s;
    auto machines = call("GET", "machine");
    if (!machines) return machines.error();
    for (const Json::Value& m : *machines) {
      if (m.isObject() && !id_text(m["mach_id"]).empty()) s.machines[id_text(m["mach_id"])] = m;
    }
    auto groups = call("GET", "group");
    if (!groups) return groups.error();
    for (const Json::Value& g : *groups) {
      if (g.isObject() && !id_text(g["grp_id"]).empty()) s.groups[id_text(g["grp_id"])] = g;
    }
    for (const Kind& k : kKinds) {
      auto statuses = call("GET", k.status_path);
      if (!statuses) return statuses.error();
      for (const Json::Value& d : *statuses) {
        const std::string name = d["name"].asString();
        if (name.empty()) continue;
        LiqidDevice dev;
        dev.type = k.type;
        dev.status = d;
        s.devices[name] = std::move(dev);
      }
      if (!with_infos) continue;
      auto infos = call("GET", k.info_path);
      if (!infos) return infos.error();
      for (const Json::Value& i : *infos) {
        std::string model = i["model"].asString();
        if (model.empty()) model = i["vendor"].asString();
        if (!i["name"].asString().empty() && !model.empty()) s.models[i["name"].asString()] = model;
        if (!i["name"].asString().empty()) s.infos[i["name"].asString()] = i;
      }
    }
    // Where each device sits. The machine and group ids are matched against the machines and
    // groups read above: a device in no group or in no machine names none of them.
    auto placed = call("GET", "predevice");
    if (!placed) return placed.error();
    for (const Json::Value& p : *placed) {
      auto it = s.devices.find(p["name"].asString());
      if (it == s.devices.end()) continue;
      const std::string g = id_text(p["grp_id"]);
      const std::string m = id_text(p["mach_id"]);
      if (s.groups.contains(g)) it->second.group_id = g;
      if (s.machines.contains(m)) it->second.machine_id = m;
    }
    return s;
  }

  Expected<FabricInventory> inventory() {
    auto snap = read(true);
    if (!snap) return snap.error();
    FabricInventory inv;
    std::set<std::string> served_ids;
    for (const auto& [id, m] : snap->machines) {
      if (!served(m)) continue;
      const std::string name = m["mach_name"].asString();
      Host h;
      h.fabric_id = name;
      h.node = node_of(name);
      auto g = snap->groups.find(id_text(m["grp_id"]));
      if (g != snap->groups.end()) h.zones = {g->second["group_name"].asString()};
      h.gpu_slots = h.mem_slots = h.nvme_slots = o.default_slots;
      inv.hosts.push_back(std::move(h));
      served_ids.insert(id);
    }
    size_t unpooled = 0;
    for (const auto& [name, d] : snap->devices) {
      if (d.group_id.empty()) {
        ++unpooled;
        inv.skipped.push_back("device " + name +
                              ": in the system free pool, in no group; put it in a group to "
                              "pool it");
        continue;
      }
      Device dev;
      dev.id = name;
      dev.type = d.type;
      auto model = snap->models.find(name);
      dev.model = model != snap->models.end() ? model->second : "unknown";
      const Json::Value& mb = d.status["capacity(MB)"];
      if (d.type != DeviceType::kGpu && mb.isIntegral() && mb.asInt64() > 0) {
        dev.capacity_bytes = static_cast<uint64_t>(mb.asInt64()) << 20;
      }
      dev.zone = snap->groups.at(d.group_id)["group_name"].asString();
      dev.health = health_of(d.status["device_state"].asString());
      dev.identity = identity_of(d.status, snap->infos[name]);
      // Assigned to a machine, whoever assigned it: attached to that host when it is served
      // here, otherwise held by the machine.
      if (!d.machine_id.empty() && served_ids.contains(d.machine_id)) {
        inv.attached[name] = snap->machines.at(d.machine_id)["mach_name"].asString();
      } else if (!d.machine_id.empty()) {
        inv.held[name] = "assigned to machine '" +
                         snap->machines.at(d.machine_id)["mach_name"].asString() +
                         "', which is no host served here";
      }
      inv.devices.push_back(std::move(dev));
    }
    if (unpooled > 0) {
      log::debug("liqid: devices in the system free pool are not offered; put them in a group",
                 {{"count", std::to_string(unpooled)}});
    }
    return inv;
  }

  Operation remember(Operation op) {
    std::lock_guard<std::mutex> lock(ops_mu);
    op.id = "liqid-" + std::to_string(next_op++);
    ops[op.id] = op;
    op_order.push_back(op.id);
    while (op_order.size() > kKeptOperations) {
      ops.erase(op_order.front());
      op_order.pop_front();
    }
    return op;
  }

  // The edit transaction of one machine: edit, relate or unrelate each device (true: relate),
  // reprogram; cancel on error.
  Operation edit(const Json::Value& machine, const Snapshot& snap,
                 const std::vector<std::pair<std::string, bool>>& relations) {
    const bool attaches =
        std::any_of(relations.begin(), relations.end(), [](const auto& r) { return r.second; });
    const bool detaches =
        std::any_of(relations.begin(), relations.end(), [](const auto& r) { return !r.second; });
    const std::string verb = attaches && detaches ? "change" : attaches ? "attach" : "detach";
    auto fail = [&](const Error& e, bool began) {
      Operation op;
      op.state = OperationState::kFailed;
      op.error = e.message;
      if (began) {
        auto cancelled = call("POST", "fabric/edit/cancel", &machine);
        if (cancelled) {
          op.error += "; the fabric edit was cancelled, nothing changed";
        } else {
          op.error += "; cancelling the fabric edit failed too (" + cancelled.error().message +
                      "): check the machine in the Liqid Director";
        }
      }
      log::warning("liqid: " + verb + " failed",
                   {{"machine", machine["mach_name"].asString()}, {"error", op.error}});
      return remember(op);
    };
    if (auto e = call("POST", "fabric/edit", &machine); !e) {
      // A refusal means no edit began (and another one may be under way: leave it alone); a
      // lost answer may hide an edit that did begin.
      const bool maybe =
          e.error().code == ErrorCode::kUnavailable || e.error().code == ErrorCode::kTimeout;
      return fail(e.error(), maybe);
    }
    for (const auto& [name, attach] : relations) {
      const LiqidDevice& d = snap.devices.at(name);
      Json::Value body;
      body["groupDeviceRelator"]["deviceStatus"] = d.status;
      body["groupDeviceRelator"]["group"] = snap.groups.at(id_text(machine["grp_id"]));
      body["machine"] = machine;
      auto r = call(attach ? "POST" : "DELETE", kind_of(d.type).relate_path, &body);
      if (!r) return fail(r.error(), true);
    }
    if (auto r = call("POST", "fabric/reprogram", &machine); !r) return fail(r.error(), true);
    log::info("liqid: " + verb + " done", {{"machine", machine["mach_name"].asString()},
                                           {"devices", std::to_string(relations.size())}});
    Operation op;
    op.state = OperationState::kDone;
    return remember(op);
  }

  // What one change needs of a machine: the machine, and the devices to relate or unrelate
  // (those already where the change wants them left out). `claimed`: devices other changes of
  // the same batch take, by machine id.
  struct Plan {
    const Json::Value* machine = nullptr;
    std::vector<std::string> todo;
  };
  Expected<Plan> plan(const Snapshot& snap, const std::string& host,
                      const std::vector<std::string>& ids, bool attach,
                      std::map<std::string, std::string>* claimed) {
    const Json::Value* machine = snap.machine_named(host);
    if (machine == nullptr || !served(*machine)) {
      return Error{ErrorCode::kNotFound, "liqid: no machine named '" + host + "'"};
    }
    const std::string mach_id = id_text((*machine)["mach_id"]);
    const std::string grp_id = id_text((*machine)["grp_id"]);
    if (!snap.groups.contains(grp_id)) {
      return Error{ErrorCode::kFabric,
                   "liqid: machine '" + host + "' belongs to no group the Director lists"};
    }
    Plan out{machine, {}};
    std::set<std::string> seen;
    for (const std::string& id : ids) {
      auto it = snap.devices.find(id);
      if (it == snap.devices.end()) {
        return Error{ErrorCode::kNotFound, "liqid: no device named '" + id + "'"};
      }
      if (!seen.insert(id).second) continue;
      const LiqidDevice& d = it->second;
      if (auto c = claimed->find(id); c != claimed->end() && c->second != mach_id) {
        return Error{ErrorCode::kConflict,
                     "liqid: device " + id + " is changed for another machine in the same edit"};
      }
      // Detaching a device from a machine it is not on is done already: it stays where it is.
      if (!attach && d.machine_id != mach_id) continue;
      if (!d.machine_id.empty() && d.machine_id != mach_id) {
        return Error{ErrorCode::kConflict,
                     "liqid: device " + id + " is attached to machine '" +
                         snap.machines.at(d.machine_id)["mach_name"].asString() + "', not '" +
                         host + "'"};
      }
      if (attach && d.machine_id.empty() && d.group_id != grp_id) {
        const std::string where =
            d.group_id.empty()
                ? std::string("the system free pool")
                : "group '" + snap.groups.at(d.group_id)["group_name"].asString() + "'";
        return Error{ErrorCode::kConflict, "liqid: device " + id + " is in " + where +
                                               "; machine '" + host + "' draws only from group '" +
                                               snap.groups.at(grp_id)["group_name"].asString() +
                                               "'"};
      }
      if (attach == d.machine_id.empty()) out.todo.push_back(id);
    }
    for (const std::string& id : out.todo) (*claimed)[id] = mach_id;
    return out;
  }

  Expected<Operation> change(const std::string& host, const std::vector<std::string>& ids,
                             bool attach) {
    std::lock_guard<std::mutex> lock(edit_mu);
    auto snap = read(false);
    if (!snap) return snap.error();
    std::map<std::string, std::string> claimed;
    auto p = plan(*snap, host, ids, attach, &claimed);
    if (!p) return p.error();
    if (p->todo.empty()) {
      Operation op;
      op.state = OperationState::kDone;
      return remember(op);
    }
    std::vector<std::pair<std::string, bool>> relations;
    for (const std::string& id : p->todo) relations.emplace_back(id, attach);
    return edit(*p->machine, *snap, relations);
  }

  // Every change of the batch planned against one read of the Director, then one edit per
  // machine (an edit transaction covers one machine) carrying all of that machine's changes,
  // the machines one after another so that the Director is never idle while changes wait. A
  // change that cannot be planned, or whose machine's edit fails, is refused alone.
  Expected<BatchStarted> batch(const std::vector<FabricChange>& changes) {
    std::lock_guard<std::mutex> lock(edit_mu);
    auto snap = read(false);
    if (!snap) return snap.error();
    BatchStarted out;
    std::map<std::string, std::string> claimed;
    struct MachineEdit {
      const Json::Value* machine = nullptr;
      std::vector<std::pair<std::string, bool>> relations;
      std::vector<size_t> changes;  // indices in the batch
    };
    std::map<std::string, MachineEdit> edits;  // by machine id
    std::vector<std::string> order;
    for (size_t i = 0; i < changes.size(); ++i) {
      const FabricChange& c = changes[i];
      auto p = plan(*snap, c.fabric_host, c.device_ids, c.attach, &claimed);
      if (!p) {
        out.refused.emplace(i, p.error());
        continue;
      }
      if (p->todo.empty()) continue;  // done already
      const std::string mach_id = id_text((*p->machine)["mach_id"]);
      auto [it, added] = edits.try_emplace(mach_id);
      if (added) order.push_back(mach_id);
      it->second.machine = p->machine;
      for (const std::string& id : p->todo) it->second.relations.emplace_back(id, c.attach);
      it->second.changes.push_back(i);
    }
    for (const std::string& mach_id : order) {
      const MachineEdit& e = edits.at(mach_id);
      const Operation op = edit(*e.machine, *snap, e.relations);
      if (op.state == OperationState::kFailed) {
        for (size_t i : e.changes) out.refused.emplace(i, Error{ErrorCode::kFabric, op.error});
      }
    }
    Operation done;
    done.state = OperationState::kDone;
    out.operation = remember(done);
    return out;
  }

  Expected<Operation> status(const std::string& id) {
    std::lock_guard<std::mutex> lock(ops_mu);
    auto it = ops.find(id);
    if (it == ops.end()) {
      return Error{ErrorCode::kNotFound, "liqid: no operation '" + id + "'"};
    }
    return it->second;
  }

  Expected<std::vector<std::pair<std::string, Health>>> health() {
    std::vector<std::pair<std::string, Health>> out;
    for (const Kind& k : kKinds) {
      auto statuses = call("GET", k.status_path);
      if (!statuses) return statuses.error();
      for (const Json::Value& d : *statuses) {
        if (d["name"].asString().empty()) continue;
        out.emplace_back(d["name"].asString(), health_of(d["device_state"].asString()));
      }
    }
    return out;
  }
};

LiqidFabric::LiqidFabric(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

LiqidFabric::~LiqidFabric() {
  if (impl_) impl_->release_key();
}

Expected<std::unique_ptr<LiqidFabric>> LiqidFabric::create(LiqidOptions o) {
  if (Status s = check_fabric_manager_options(&o, "liqid", "/liqid/api/v2", "machine name"); !s) {
    return s.error();
  }
  if (o.api_key_label.empty() || o.api_key_label.find_first_of("/?#& ") != std::string::npos) {
    return bad_option("the API key label must be a non-empty word without '/', '?', '#', '&'");
  }
  auto impl = std::make_unique<Impl>(std::move(o));
  if (impl->o.auth == LiqidOptions::Auth::kApiKey) {
    if (Status s = impl->obtain_key(); !s) return s.error();
  }
  auto machines = impl->call("GET", "machine");
  if (!machines) {
    impl->release_key();
    return Error{machines.error().code, "reading the machines: " + machines.error().message};
  }
  log::info("liqid: connected",
            {{"url", impl->o.base_url}, {"machines", std::to_string(machines->size())}});
  return std::unique_ptr<LiqidFabric>(new LiqidFabric(std::move(impl)));
}

Expected<FabricInventory> LiqidFabric::inventory() { return impl_->inventory(); }

Expected<Operation> LiqidFabric::attach(const std::string& fabric_host,
                                        const std::vector<std::string>& device_ids) {
  return impl_->change(fabric_host, device_ids, true);
}

Expected<Operation> LiqidFabric::detach(const std::string& fabric_host,
                                        const std::vector<std::string>& device_ids) {
  return impl_->change(fabric_host, device_ids, false);
}

bool LiqidFabric::serialises_changes(const std::string& /*lane*/) const { return true; }

Expected<BatchStarted> LiqidFabric::apply_batch(const std::vector<FabricChange>& changes) {
  return impl_->batch(changes);
}

Expected<Operation> LiqidFabric::operation_status(const std::string& operation_id) {
  return impl_->status(operation_id);
}

Expected<std::vector<std::pair<std::string, Health>>> LiqidFabric::health() {
  return impl_->health();
}

}  // namespace composer::drivers
