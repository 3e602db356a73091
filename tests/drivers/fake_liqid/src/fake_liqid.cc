#include "composer/testing/fake_liqid.h"

#include <httplib.h>
#include <json/json.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "composer/test_support/basic_auth.h"

namespace composer::testing {
namespace {

constexpr std::string_view kApi = "/liqid/api/v2/";

std::string json_text(const Json::Value& v) {
  Json::StreamWriterBuilder w;
  w["indentation"] = "";
  return Json::writeString(w, v);
}

std::string two_digits(uint32_t n) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%02u", n);
  return buf;
}

struct Group {
  int id = 0;
  std::string name;
};
struct Machine {
  int id = 0;
  std::string name;
  int group = 0;
};
struct Dev {
  std::string name;
  std::string type;  // Liqid's device_type: gpu, mem, ssd
  std::string model;
  int64_t capacity_mb = 0;
  std::string state = "ACTIVE";
  int group = 0;    // 0: the system free pool
  int machine = 0;  // 0: related to no machine
  int index = 0;
};
struct Pending {
  std::string device;
  bool relate = true;
};

}  // namespace

struct FakeLiqid::Impl {
  FakeLiqidOptions o;
  httplib::Server server;
  std::thread thread;
  int port = 0;

  mutable std::mutex mu;
  std::condition_variable stopping_cv;
  bool stopping = false;
  std::map<int, Group> groups;
  std::map<int, Machine> machines;
  std::map<std::string, Dev> devices;
  std::map<int, std::vector<Pending>> edits;   // machine id -> pending changes
  std::map<std::string, std::string> digests;  // label -> key
  int next_digest = 1;
  std::deque<FakeLiqidFault> faults;
  std::map<std::string, uint64_t> counts;
  uint64_t writes = 0;                // requests but GETs and the digest calls
  std::vector<int64_t> write_epochs;  // X-Composer-Epoch of each of those
  uint64_t reprograms = 0;
  size_t most_edits = 0;
  std::mt19937_64 rng{std::random_device{}()};

  void build() {
    int machine_no = 1;
    int gpu_no = 0, mem_no = 0, nvme_no = 0, index = 0;
    for (uint32_t g = 1; g <= o.groups; ++g) {
      const int gid = static_cast<int>(g);
      groups[gid] = Group{gid, "group" + std::to_string(g)};
      for (uint32_t m = 0; m < o.machines_per_group; ++m, ++machine_no) {
        machines[machine_no] = Machine{machine_no, "node" + two_digits(machine_no), gid};
      }
      auto add = [&](const std::string& name, std::string type, std::string model, int64_t mb) {
        Dev d;
        d.name = name;
        d.type = std::move(type);
        d.model = std::move(model);
        d.capacity_mb = mb;
        d.group = gid;
        d.index = index++;
        devices[name] = std::move(d);
      };
      for (uint32_t i = 0; i < o.gpus_per_group; ++i) {
        add("gpu" + std::to_string(gpu_no++), "gpu", "A100-80G", 0);
      }
      for (uint32_t i = 0; i < o.memory_per_group; ++i) {
        add("mem" + std::to_string(mem_no++), "mem", "CXL-DDR5", 65536);
      }
      for (uint32_t i = 0; i < o.drives_per_group; ++i) {
        add("nvme" + std::to_string(nvme_no++), "ssd", "P5620", 3840000);
      }
    }
    for (uint32_t i = 0; i < o.free_gpus; ++i) {
      Dev d;
      d.name = "freegpu" + std::to_string(i);
      d.type = "gpu";
      d.model = "A100-80G";
      d.index = index++;
      devices[d.name] = d;
    }
  }

  // ---- JSON forms ----

  Json::Value group_json(const Group& g) const {
    Json::Value v;
    v["fabr_id"] = 0;
    v["grp_id"] = g.id;
    v["group_name"] = g.name;
    v["pod_id"] = -1;
    return v;
  }
  Json::Value machine_json(const Machine& m) const {
    Json::Value v;
    v["index"] = m.id - 1;
    v["mach_id"] = m.id;
    v["grp_id"] = m.group;
    v["fabr_id"] = 0;
    v["fabr_gid"] = "0x" + std::to_string(1000 + m.id);
    v["mach_name"] = m.name;
    v["comp_name"] = "pcpu" + std::to_string(m.id - 1);
    v["p2p"] = "off";
    v["mtime"] = static_cast<Json::Int64>(1700000000000);
    v["connection_history"] = Json::Value(Json::arrayValue);
    return v;
  }
  Json::Value status_json(const Dev& d) const {
    Json::Value v;
    v["name"] = d.name;
    v["dev_id"] = "0x" + std::to_string(0xb00 + d.index);
    v["device_state"] = d.state;
    v["device_type"] = d.type;
    v["fabr_gid"] = "0x" + std::to_string(2000 + d.index);
    v["fabr_id"] = 0;
    v["index"] = d.index;
    v["type"] = d.type;
    v["vid"] = d.type == "gpu" ? "0x10de" : "0x144d";
    if (d.type != "mem") v["did"] = d.type == "gpu" ? "0x20b5" : "0xa824";
    if (d.type != "gpu") v["capacity(MB)"] = static_cast<Json::Int64>(d.capacity_mb);
    return v;
  }
  Json::Value info_json(const Dev& d) const {
    Json::Value v;
    v["name"] = d.name;
    v["model"] = d.model;
    v["vendor"] = d.type == "gpu" ? "NVIDIA" : "Samsung";
    char serial[24];
    std::snprintf(serial, sizeof serial, "LQD%07d", d.index);
    v["serial_num"] = serial;
    v["device_type"] = d.type;
    v["device_state"] = d.state;
    v["index"] = d.index;
    return v;
  }
  Json::Value predevice_json(const Dev& d) const {
    Json::Value v;
    v["name"] = d.name;
    v["dev_type"] = d.type;
    v["grp_id"] = d.group;
    v["gname"] = d.group != 0 ? groups.at(d.group).name : "";
    v["mach_id"] = d.machine != 0 ? std::to_string(d.machine) : "n/a";
    v["mname"] = d.machine != 0 ? machines.at(d.machine).name : "";
    return v;
  }

  // ---- answers ----

  static void envelope(httplib::Response& r, int status, Json::Value data) {
    Json::Value v;
    v["response"]["code"] = 0;
    v["response"]["errors"] = Json::Value(Json::arrayValue);
    v["response"]["data"] = std::move(data);
    r.status = status;
    r.set_content(json_text(v), "application/json;charset=UTF-8");
  }
  static void ok(httplib::Response& r, Json::Value item) {
    Json::Value data(Json::arrayValue);
    data.append(std::move(item));
    envelope(r, 200, std::move(data));
  }
  static void fail(httplib::Response& r, int status, int code, const std::string& message) {
    Json::Value v;
    v["response"]["code"] = code;
    Json::Value e;
    e["code"] = code;
    e["message"] = message;
    e["type"] = "error";
    v["response"]["errors"].append(e);
    v["response"]["data"] = Json::Value(Json::arrayValue);
    r.status = status;
    r.set_content(json_text(v), "application/json;charset=UTF-8");
  }

  std::optional<FakeLiqidFault> take_fault(const std::string& method, const std::string& path) {
    for (auto it = faults.begin(); it != faults.end(); ++it) {
      if (!it->method.empty() && it->method != method) continue;
      if (!it->path.empty() && path.find(it->path) == std::string::npos) continue;
      if (it->skip > 0) {
        --it->skip;
        return std::nullopt;
      }
      FakeLiqidFault f = *it;
      if (--it->count == 0) faults.erase(it);
      return f;
    }
    return std::nullopt;
  }

  bool basic_ok(const httplib::Request& req) const {
    return test_support::is_basic_auth(req.get_header_value("Authorization"), o.username,
                                       o.password);
  }
  bool authenticated(const httplib::Request& req) const {
    if (basic_ok(req)) return true;
    const std::string key = req.get_header_value("X-API-Key");
    if (key.empty()) return false;
    return std::any_of(digests.begin(), digests.end(),
                       [&](const auto& d) { return d.second == key; });
  }

  void handle(const httplib::Request& req, httplib::Response& r) {
    std::string path = req.path.substr(kApi.size());
    std::optional<FakeLiqidFault> fault;
    {
      std::lock_guard<std::mutex> lock(mu);
      ++counts[req.method];
      if (req.method != "GET" && !path.starts_with("digest")) {
        ++writes;
        const std::string epoch = req.get_header_value("X-Composer-Epoch");
        write_epochs.push_back(epoch.empty() ? 0 : std::stoll(epoch));
      }
      if (!path.starts_with("digest")) fault = take_fault(req.method, path);
    }
    if (fault) {
      switch (fault->kind) {
        case FakeLiqidFault::Kind::kDelay: {
          std::unique_lock<std::mutex> lock(mu);
          stopping_cv.wait_for(lock, std::chrono::milliseconds(fault->delay_ms),
                               [this] { return stopping; });
          break;
        }
        case FakeLiqidFault::Kind::kStatus:
          return fail(r, fault->status, fault->status, fault->message);
        case FakeLiqidFault::Kind::kEnvelope:
          return fail(r, 200, 1, fault->message);
        case FakeLiqidFault::Kind::kReset:
          r.status = 200;
          r.set_content_provider(
              1000, "application/json",
              [](size_t, size_t, httplib::DataSink& sink) {
                sink.write("{\"response\":", 12);
                return false;  // breaks the connection part way through the answer
              },
              nullptr);
          return;
      }
    }
    if (path == "fabric/reprogram" && o.reprogram_ms > 0) {
      // The switches take their time; the edit stays open, other requests go on.
      std::unique_lock<std::mutex> lock(mu);
      stopping_cv.wait_for(lock, std::chrono::milliseconds(o.reprogram_ms),
                           [this] { return stopping; });
    }
    std::lock_guard<std::mutex> lock(mu);
    if (path.starts_with("digest/")) return digest(req, r, path.substr(7));
    if (!authenticated(req)) return fail(r, 401, 401, "authentication required");
    Json::Value body;
    if (!req.body.empty()) {
      Json::CharReaderBuilder b;
      std::string why;
      std::unique_ptr<Json::CharReader> reader(b.newCharReader());
      if (!reader->parse(req.body.data(), req.body.data() + req.body.size(), &body, &why)) {
        return fail(r, 400, 400, "malformed JSON body: " + why);
      }
    }
    if (req.method == "GET") return get(req, r, path);
    if (req.method == "POST" && path.starts_with("fabric/")) return fabric(r, path, body);
    if (path.starts_with("relate/")) return relate(req, r, path.substr(7), body);
    return fail(r, 404, 404, "no such endpoint: " + req.method + " " + path);
  }

  void digest(const httplib::Request& req, httplib::Response& r, const std::string& label) {
    if (req.method == "POST") {
      if (!basic_ok(req)) return fail(r, 401, 401, "a digest needs basic authentication");
      if (digests.contains(label)) {
        return fail(r, 409, 409, "a digest labelled " + label + " exists");
      }
      char key[33];
      std::snprintf(key, sizeof key, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                    static_cast<unsigned long long>(rng()));
      digests[label] = key;
      Json::Value v;
      v["digest_id"] = next_digest++;
      v["digest_key"] = key;
      v["digest_label"] = label;
      return ok(r, v);
    }
    if (req.method == "DELETE") {
      if (!authenticated(req)) return fail(r, 401, 401, "authentication required");
      if (digests.erase(label) == 0) {
        return fail(r, 404, 404, "no digest labelled " + label);
      }
      return ok(r, label);
    }
    return fail(r, 405, 405, "digest takes POST or DELETE");
  }

  void get(const httplib::Request& req, httplib::Response& r, const std::string& path) {
    Json::Value data(Json::arrayValue);
    if (path == "machine") {
      const std::string only = req.get_param_value("mach_id");
      for (const auto& [id, m] : machines) {
        if (only.empty() || only == std::to_string(id)) data.append(machine_json(m));
      }
      if (!only.empty() && data.empty()) return fail(r, 404, 404, "no machine " + only);
      return envelope(r, 200, data);
    }
    if (path == "group") {
      for (const auto& [id, g] : groups) data.append(group_json(g));
      return envelope(r, 200, data);
    }
    if (path == "predevice") {
      for (const auto& [name, d] : devices) data.append(predevice_json(d));
      return envelope(r, 200, data);
    }
    static const std::map<std::string, std::string> kStatus = {
        {"status/gpu", "gpu"}, {"status/mem", "mem"}, {"status/storage", "ssd"}};
    static const std::map<std::string, std::string> kInfo = {
        {"device/info/gpu", "gpu"}, {"device/info/mem", "mem"}, {"device/info/ssd", "ssd"}};
    if (auto it = kStatus.find(path); it != kStatus.end()) {
      for (const auto& [name, d] : devices) {
        if (d.type == it->second) data.append(status_json(d));
      }
      return envelope(r, 200, data);
    }
    if (auto it = kInfo.find(path); it != kInfo.end()) {
      for (const auto& [name, d] : devices) {
        if (d.type == it->second) data.append(info_json(d));
      }
      return envelope(r, 200, data);
    }
    return fail(r, 404, 404, "no such endpoint: GET " + path);
  }

  Machine* machine_of(const Json::Value& m) {
    if (!m.isObject() || !m["mach_id"].isIntegral()) return nullptr;
    auto it = machines.find(m["mach_id"].asInt());
    return it == machines.end() ? nullptr : &it->second;
  }

  void fabric(httplib::Response& r, const std::string& path, const Json::Value& body) {
    Machine* m = machine_of(body);
    if (m == nullptr) return fail(r, 400, 400, path + " needs a Machine with a known mach_id");
    if (path == "fabric/edit") {
      if (edits.contains(m->id)) {
        return fail(r, 409, 409, "machine " + m->name + " is already in fabric edit mode");
      }
      if (o.one_edit_at_a_time && !edits.empty()) {
        return fail(
            r, 409, 409,
            "the fabric is being edited (machine " + machines.at(edits.begin()->first).name + ")");
      }
      edits[m->id] = {};
      most_edits = std::max(most_edits, edits.size());
      return ok(r, machine_json(*m));
    }
    auto e = edits.find(m->id);
    if (e == edits.end()) {
      return fail(r, 409, 409, "machine " + m->name + " is not in fabric edit mode");
    }
    if (path == "fabric/edit/cancel") {
      edits.erase(e);
      return ok(r, machine_json(*m));
    }
    if (path == "fabric/reprogram") {
      for (const Pending& p : e->second) devices.at(p.device).machine = p.relate ? m->id : 0;
      edits.erase(e);
      ++reprograms;
      return ok(r, machine_json(*m));
    }
    return fail(r, 404, 404, "no such endpoint: POST " + path);
  }

  void relate(const httplib::Request& req, httplib::Response& r, const std::string& kind,
              const Json::Value& body) {
    static const std::map<std::string, std::string> kTypes = {
        {"gpu", "gpu"}, {"memory", "mem"}, {"storage", "ssd"}};
    auto type = kTypes.find(kind);
    if (type == kTypes.end()) return fail(r, 404, 404, "no such endpoint: relate/" + kind);
    Machine* m = machine_of(body["machine"]);
    if (m == nullptr) return fail(r, 400, 400, "relate needs a machine with a known mach_id");
    const Json::Value& rel = body["groupDeviceRelator"];
    auto d = devices.find(rel["deviceStatus"]["name"].asString());
    if (d == devices.end() || d->second.type != type->second) {
      return fail(
          r, 404, 404,
          "no " + type->second + " device named '" + rel["deviceStatus"]["name"].asString() + "'");
    }
    if (!rel["group"]["grp_id"].isIntegral() || rel["group"]["grp_id"].asInt() != m->group ||
        d->second.group != m->group) {
      return fail(r, 409, 409,
                  "device " + d->first + " is not in the pool of machine " + m->name + "'s group");
    }
    auto e = edits.find(m->id);
    if (e == edits.end()) {
      return fail(r, 409, 409, "machine " + m->name + " is not in fabric edit mode");
    }
    const bool add = req.method == "POST";
    if (!add && req.method != "DELETE") return fail(r, 405, 405, "relate takes POST or DELETE");
    if (add && d->second.machine != 0) {
      return fail(r, 409, 409, "device " + d->first + " is already related to a machine");
    }
    if (!add && d->second.machine != m->id) {
      return fail(r, 409, 409, "device " + d->first + " is not related to " + m->name);
    }
    e->second.push_back(Pending{d->first, add});
    return ok(r, rel);
  }
};

FakeLiqid::FakeLiqid(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

FakeLiqid::~FakeLiqid() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->stopping_cv.notify_all();
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

Expected<std::unique_ptr<FakeLiqid>> FakeLiqid::start(FakeLiqidOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->o = std::move(options);
  impl->build();
  Impl* p = impl.get();
  auto handler = [p](const httplib::Request& req, httplib::Response& r) { p->handle(req, r); };
  const std::string pattern = std::string(kApi) + ".*";
  p->server.Get(pattern, handler);
  p->server.Post(pattern, handler);
  p->server.Delete(pattern, handler);
  p->server.Put(pattern, handler);
  p->server.set_tcp_nodelay(true);  // headers and body go out in two writes
  if (p->o.port == 0) {
    p->port = p->server.bind_to_any_port("127.0.0.1");
  } else {
    p->port = p->server.bind_to_port("127.0.0.1", p->o.port) ? p->o.port : -1;
  }
  if (p->port <= 0) {
    return Error{ErrorCode::kUnavailable,
                 "fake liqid: cannot listen on 127.0.0.1:" + std::to_string(p->o.port)};
  }
  p->thread = std::thread([p] { p->server.listen_after_bind(); });
  // A stop() before the server thread runs would be lost and the join would wait forever.
  for (int i = 0; i < 5000 && !p->server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::unique_ptr<FakeLiqid>(new FakeLiqid(std::move(impl)));
}

int FakeLiqid::port() const { return impl_->port; }
std::string FakeLiqid::base_url() const { return "http://127.0.0.1:" + std::to_string(port()); }

void FakeLiqid::inject(FakeLiqidFault fault) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->faults.push_back(std::move(fault));
}

Status FakeLiqid::set_state(const std::string& device, const std::string& state) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->devices.find(device);
  if (it == impl_->devices.end()) {
    return Error{ErrorCode::kNotFound, "fake liqid: no device " + device};
  }
  it->second.state = state;
  return Status::Ok();
}

std::vector<std::string> FakeLiqid::machine_devices(const std::string& machine) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<std::string> out;
  for (const auto& [name, d] : impl_->devices) {
    if (d.machine != 0 && impl_->machines.at(d.machine).name == machine) out.push_back(name);
  }
  return out;
}

std::vector<std::string> FakeLiqid::editing() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<std::string> out;
  for (const auto& [id, pending] : impl_->edits) out.push_back(impl_->machines.at(id).name);
  return out;
}

size_t FakeLiqid::pending() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  size_t n = 0;
  for (const auto& [id, pending] : impl_->edits) n += pending.size();
  return n;
}

void FakeLiqid::revoke_digests() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->digests.clear();
}

size_t FakeLiqid::digests() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->digests.size();
}

uint64_t FakeLiqid::writes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->writes;
}

std::vector<int64_t> FakeLiqid::write_epochs() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->write_epochs;
}

uint64_t FakeLiqid::reprograms() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->reprograms;
}

size_t FakeLiqid::most_edits_at_once() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->most_edits;
}

uint64_t FakeLiqid::requests(const std::string& method) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->counts.find(method);
  return it == impl_->counts.end() ? 0 : it->second;
}

Status FakeLiqid::relate_behind_back(const std::string& device, const std::string& machine) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto d = impl_->devices.find(device);
  if (d == impl_->devices.end()) {
    return Error{ErrorCode::kNotFound, "fake liqid: no device " + device};
  }
  for (const auto& [id, m] : impl_->machines) {
    if (m.name == machine) {
      d->second.machine = id;
      return Status::Ok();
    }
  }
  return Error{ErrorCode::kNotFound, "fake liqid: no machine " + machine};
}

}  // namespace composer::testing
