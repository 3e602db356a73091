#include "composer/drivers/sim_fabric.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

#include "composer/common/files.h"
#include "composer/common/strings.h"

namespace composer {
namespace {

// Finished operations are remembered for status queries; beyond this many the oldest go.
constexpr size_t kMaxRememberedOperations = 100000;
constexpr uint32_t kFirstPciBus = 0x41;
constexpr uint32_t kFirstNumaNode = 2;

std::string pci_address(uint32_t counter) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04x:%02x:00.0", (counter >> 8) & 0xffff, counter & 0xff);
  return buf;
}

// 64-bit FNV-1a: a stable hash for the synthetic GPU UUIDs (the same on every run and build).
uint64_t fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ULL) {
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

// What a host would recognise the device by (sim_fabric.h).
DeviceIdentity sim_identity(const Device& d) {
  DeviceIdentity id;
  id.serial = "SIM" + std::to_string(fnv1a(d.id) % 10000000000ULL);
  if (d.type == DeviceType::kGpu) {
    id.pci_vendor = "0x10de";
    id.pci_device = "0x20b5";
    const uint64_t a = fnv1a(d.id);
    const uint64_t b = fnv1a("uuid", a);
    char buf[48];
    std::snprintf(buf, sizeof buf, "GPU-%08x-%04x-4%03x-8%03x-%012llx",
                  static_cast<unsigned>(a >> 32), static_cast<unsigned>((a >> 16) & 0xffff),
                  static_cast<unsigned>(a & 0xfff), static_cast<unsigned>((b >> 48) & 0xfff),
                  static_cast<unsigned long long>(b & 0xffffffffffffULL));
    id.uuid = buf;
  } else if (d.type == DeviceType::kNvme) {
    id.pci_vendor = "0x144d";
    id.pci_device = "0xa824";
  }
  return id;
}

std::string device_id(const std::string& group, uint32_t index, uint32_t count) {
  const size_t width = std::to_string(count - 1).size();
  std::string n = std::to_string(index);
  return group + "-" + std::string(width - n.size(), '0') + n;
}

Error bad_config(std::string message) {
  return Error{ErrorCode::kInvalidArgument, "sim fabric: " + std::move(message)};
}

}  // namespace

struct SimFabric::Impl {
  const Clock& clock;
  int latency_ms = 0;

  std::mutex mu;
  std::vector<Host> hosts;
  std::set<std::string, std::less<>> fabric_hosts;
  std::vector<Device> devices;  // in configuration order
  std::unordered_map<std::string, size_t> index;
  std::map<std::string, std::string> attached;  // device id -> fabric host

  struct PendingFailures {
    uint32_t left = 0;
    std::string message;
  };
  PendingFailures attach_failures;
  PendingFailures detach_failures;

  struct Op {
    int64_t done_at_ms = 0;
    bool failed = false;
    std::string error;
  };
  uint64_t next_op = 1;
  std::map<std::string, Op> ops;
  std::deque<std::string> op_order;

  bool serialise = false;
  int64_t busy_until_ms = 0;  // serialise: when the last change started has ended

  Impl(const Clock& c, int latency) : clock(c), latency_ms(latency) {}

  std::string state_file;
  std::string health_file;

  // Gives the devices in `out` the health the health file names for them, if there is one.
  Status apply_health_file(std::vector<Device>& out) const {
    if (health_file.empty()) return Status::Ok();
    auto named = read_health_file();
    if (!named) return named.error();
    for (Device& d : out) {
      if (auto it = named->find(d.id); it != named->end()) d.health = it->second;
    }
    return Status::Ok();
  }

  // The health file's devices and their health; kInvalidArgument naming a line that does not
  // parse or a device the fabric lacks.
  Expected<std::map<std::string, Health>> read_health_file() const {
    std::map<std::string, Health> named;
    std::ifstream in(health_file);
    if (!in) {
      if (errno == ENOENT) return named;
      return Error{ErrorCode::kUnavailable, "sim fabric: cannot read SimHealthFile " + health_file +
                                                ": " + std::strerror(errno)};
    }
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      line = line.substr(0, line.find('#'));
      const auto words = split(line, ' ', {.skip_empty = true});
      if (words.empty()) continue;
      const auto health = words.size() == 2 ? parse_health(words[1]) : std::nullopt;
      if (!health) {
        return Error{ErrorCode::kInvalidArgument,
                     "sim fabric: SimHealthFile " + health_file + " line " +
                         std::to_string(number) +
                         ": expected a device and its health (ok, warning or critical)"};
      }
      if (!index.contains(words[0])) {
        return Error{ErrorCode::kInvalidArgument, "sim fabric: SimHealthFile " + health_file +
                                                      " line " + std::to_string(number) +
                                                      ": the fabric has no device named so"};
      }
      named[words[0]] = *health;
    }
    return named;
  }

  // The state file is the simulated fabric's own memory, which outlives composerd's crash and
  // restart as a real fabric would: a journal of lines "DEVICE HOST" (attached there) and
  // "DEVICE" (attached nowhere), the last line of a device winning. Each change appends its
  // lines in one write, not synced to disk (a real fabric's change costs the fabric, not the
  // host composerd runs on); load() and a journal grown past kCompactAfter lines plus four
  // times the attached devices rewrite it whole (write_file_atomically).
  static constexpr size_t kCompactAfter = 4096;
  int journal_fd = -1;
  size_t journal_lines = 0;

  ~Impl() {
    if (journal_fd >= 0) ::close(journal_fd);
  }

  // The devices a change touched, each with the host it was on before (nullopt: none).
  using Undo = std::vector<std::pair<std::string, std::optional<std::string>>>;

  void place(const std::string& id, const std::optional<std::string>& host, Undo& undo) {
    auto it = attached.find(id);
    undo.emplace_back(id, it == attached.end() ? std::nullopt : std::optional(it->second));
    if (host) {
      attached[id] = *host;
    } else if (it != attached.end()) {
      attached.erase(it);
    }
  }

  void roll_back(const Undo& undo) {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
      if (it->second) {
        attached[it->first] = *it->second;
      } else {
        attached.erase(it->first);
      }
    }
  }

  Status compact() {
    if (journal_fd >= 0) ::close(journal_fd);
    journal_fd = -1;
    std::string text;
    text.reserve(attached.size() * 32);
    for (const auto& [device, host] : attached)
      text.append(device).append(" ").append(host) += '\n';
    if (Status s = write_file_atomically(state_file, text, 0600, Durability::kCrash); !s) return s;
    journal_lines = attached.size();
    return Status::Ok();
  }

  // Records the devices `undo` names where they are now; on failure puts them back and says
  // why.
  Status persist(const Undo& undo) {
    if (state_file.empty() || undo.empty()) return Status::Ok();
    auto failed = [&](const std::string& why) {
      const int err = errno;  // before the roll-back can touch it
      roll_back(undo);
      return Status(
          Error{ErrorCode::kUnavailable, "sim fabric: cannot record its attachments: " + why + " " +
                                             state_file + ": " + std::strerror(err)});
    };
    if (journal_lines > kCompactAfter + 4 * attached.size()) {
      if (Status s = compact(); !s) {
        roll_back(undo);
        return Error{ErrorCode::kUnavailable,
                     "sim fabric: cannot record its attachments: " + s.error().message};
      }
    }
    if (journal_fd < 0) {
      journal_fd = ::open(state_file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
      if (journal_fd < 0) return failed("cannot open");
    }
    std::string text;
    for (const auto& [device, was] : undo) {
      text += device;
      if (auto it = attached.find(device); it != attached.end())
        text.append(" ").append(it->second);
      text += '\n';
    }
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(journal_fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return failed("cannot append to");
      done += static_cast<size_t>(n);
    }
    journal_lines += undo.size();
    return Status::Ok();
  }

  // Reads the state file, when there is one, into `attached`, and rewrites it whole. A last
  // line without its newline (a write cut short) is not taken.
  Status load() {
    if (state_file.empty()) return Status::Ok();
    std::ifstream in(state_file);
    if (!in) {
      if (errno == ENOENT) return Status::Ok();  // a fabric nothing was ever attached on
      return bad_config("cannot read its state file " + state_file + ": " + std::strerror(errno));
    }
    std::string whole;
    std::getline(in, whole, '\0');
    size_t at = 0;
    int number = 0;
    for (size_t end = whole.find('\n'); end != std::string::npos;
         at = end + 1, end = whole.find('\n', at)) {
      ++number;
      const std::string line = whole.substr(at, end - at);
      const std::vector<std::string> words = split(line, ' ');
      if (words.empty() || words.size() > 2 || words[0].empty() ||
          (words.size() == 2 && words[1].empty())) {
        return bad_config("state file " + state_file + " line " + std::to_string(number) +
                          ": expected DEVICE HOST (attached there) or DEVICE (attached nowhere)");
      }
      if (!index.contains(words[0])) continue;
      if (words.size() == 2 && fabric_hosts.contains(words[1])) {
        attached[words[0]] = words[1];
      } else {
        attached.erase(words[0]);
      }
    }
    if (Status s = compact(); !s) return bad_config(s.error().message);
    return Status::Ok();
  }

  Operation describe(const std::string& id, const Op& op) const {
    Operation out;
    out.id = id;
    if (clock.now_ms() < op.done_at_ms) {
      out.state = OperationState::kRunning;
    } else if (op.failed) {
      out.state = OperationState::kFailed;
      out.error = op.error;
    } else {
      out.state = OperationState::kDone;
    }
    return out;
  }

  PendingFailures& failures_of(const FabricChange& c) {
    return c.attach ? attach_failures : detach_failures;
  }

  // The fabric's state after a change that passed validation: an attach takes the devices to
  // the host, a detach takes off the host only what is on it.
  void apply(const FabricChange& c, Undo& undo) {
    for (const std::string& id : c.device_ids) {
      if (c.attach) {
        place(id, c.fabric_host, undo);
      } else if (auto it = attached.find(id); it != attached.end() && it->second == c.fabric_host) {
        place(id, std::nullopt, undo);
      }
    }
  }

  // One attach or detach, all or nothing (an injected failure changes nothing).
  Expected<Operation> change(const FabricChange& c) {
    std::lock_guard lock(mu);
    if (Status s = validate(c.fabric_host, c.device_ids, c.attach); !s) return s.error();
    std::string message;
    if (take_failure(failures_of(c), &message)) return start_op(true, message);
    Undo undo;
    apply(c, undo);
    if (Status s = persist(undo); !s) return s.error();
    return start_op(false, "");
  }

  Operation start_op(bool failed, std::string error) {
    std::string id = "sim-op-" + std::to_string(next_op++);
    int64_t done_at = clock.now_ms() + latency_ms;
    if (serialise) {
      done_at = std::max(clock.now_ms(), busy_until_ms) + latency_ms;
      busy_until_ms = done_at;
    }
    Op op{done_at, failed, std::move(error)};
    Operation out = describe(id, op);
    ops.emplace(id, std::move(op));
    op_order.push_back(id);
    while (op_order.size() > kMaxRememberedOperations) {
      ops.erase(op_order.front());
      op_order.pop_front();
    }
    return out;
  }

  // Checks the call as a whole before anything changes.
  Status validate(const std::string& fabric_host, const std::vector<std::string>& ids,
                  bool attaching) const {
    if (!fabric_hosts.contains(fabric_host)) {
      return Error{ErrorCode::kNotFound, "sim fabric: unknown host '" + fabric_host + "'"};
    }
    for (const std::string& id : ids) {
      if (!index.contains(id)) {
        return Error{ErrorCode::kNotFound, "sim fabric: unknown device '" + id + "'"};
      }
      // Detaching a device attached to another host is done already for this one: it stays.
      auto it = attached.find(id);
      if (attaching && it != attached.end() && it->second != fabric_host) {
        return Error{ErrorCode::kConflict, "sim fabric: device " + id + " is attached to " +
                                               it->second + ", cannot attach it to " + fabric_host};
      }
    }
    return Status::Ok();
  }

  // Consumes one injected failure, if any is pending.
  static bool take_failure(PendingFailures& f, std::string* message) {
    if (f.left == 0) return false;
    --f.left;
    *message = f.message;
    return true;
  }
};

SimFabric::SimFabric(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SimFabric::~SimFabric() = default;

Expected<std::unique_ptr<SimFabric>> SimFabric::create(SimConfig config, const Clock& clock) {
  if (config.latency_ms < 0) {
    return bad_config("latency " + std::to_string(config.latency_ms) +
                      " ms is negative; use 0 or more milliseconds");
  }
  auto impl = std::make_unique<Impl>(clock, config.latency_ms);
  impl->serialise = config.serialise;
  std::set<std::string> nodes;
  for (Host& h : config.hosts) {
    if (h.node.empty()) return bad_config("a host has no node name");
    if (h.fabric_id.empty()) h.fabric_id = h.node;
    if (!nodes.insert(h.node).second) return bad_config("node '" + h.node + "' is listed twice");
    if (!impl->fabric_hosts.insert(h.fabric_id).second) {
      return bad_config("fabric host id '" + h.fabric_id + "' is used by two hosts");
    }
    impl->hosts.push_back(h);
  }
  std::set<std::string> groups;
  size_t devices = 0;
  for (const SimConfig::Group& g : config.groups) devices += g.count;
  impl->devices.reserve(devices);  // no copy of a pool of 100,000 devices while it grows
  uint32_t pci = kFirstPciBus;
  uint32_t numa = kFirstNumaNode;
  for (const SimConfig::Group& g : config.groups) {
    if (g.name.empty()) return bad_config("a device group has no name");
    if (!groups.insert(g.name).second) {
      return bad_config("device group '" + g.name + "' is listed twice");
    }
    if (g.count == 0) {
      return bad_config("device group '" + g.name + "' has a count of 0; give 1 or more");
    }
    if (g.zone.empty()) return bad_config("device group '" + g.name + "' has no zone");
    if (g.type == DeviceType::kMem && g.size_bytes == 0) {
      return bad_config("memory group '" + g.name + "' has no block size");
    }
    for (uint32_t i = 0; i < g.count; ++i) {
      Device d;
      d.id = device_id(g.name, i, g.count);
      d.type = g.type;
      d.model = g.model;
      d.capacity_bytes = g.type == DeviceType::kGpu ? 0 : g.size_bytes;
      d.zone = g.zone;
      d.domains = g.domains;
      d.address =
          g.type == DeviceType::kMem ? "numa:" + std::to_string(numa++) : pci_address(pci++);
      d.identity = sim_identity(d);
      // Distinct group names give distinct ids: the suffix after the last '-' is all digits.
      impl->index.emplace(d.id, impl->devices.size());
      impl->devices.push_back(std::move(d));
    }
  }
  impl->state_file = std::move(config.state_file);
  impl->health_file = std::move(config.health_file);
  if (Status s = impl->load(); !s) return s.error();
  impl->attach_failures = {config.fail_attaches, "injected attach failure"};
  impl->detach_failures = {config.fail_detaches, "injected detach failure"};
  return std::unique_ptr<SimFabric>(new SimFabric(std::move(impl)));
}

Expected<FabricInventory> SimFabric::inventory() {
  std::lock_guard lock(impl_->mu);
  FabricInventory inv;
  inv.hosts = impl_->hosts;
  inv.devices = impl_->devices;
  if (Status s = impl_->apply_health_file(inv.devices); !s) return s.error();
  inv.attached = impl_->attached;
  return inv;
}

Expected<Operation> SimFabric::attach(const std::string& fabric_host,
                                      const std::vector<std::string>& device_ids) {
  return impl_->change(FabricChange{true, fabric_host, device_ids});
}

bool SimFabric::serialises_changes(const std::string& /*lane*/) const { return impl_->serialise; }

Expected<BatchStarted> SimFabric::apply_batch(const std::vector<FabricChange>& changes) {
  std::lock_guard lock(impl_->mu);
  BatchStarted out;
  Impl::Undo undo;
  bool any = false;
  for (size_t i = 0; i < changes.size(); ++i) {
    const FabricChange& c = changes[i];
    if (Status s = impl_->validate(c.fabric_host, c.device_ids, c.attach); !s) {
      out.refused.emplace(i, s.error());
      continue;
    }
    std::string message;
    if (Impl::take_failure(impl_->failures_of(c), &message)) {
      out.refused.emplace(i, Error{ErrorCode::kFabric, "sim fabric: " + message});
      continue;
    }
    impl_->apply(c, undo);
    any = true;
  }
  if (!any) {
    out.operation = Operation{"", OperationState::kDone, ""};
    return out;
  }
  if (Status s = impl_->persist(undo); !s) return s.error();
  out.operation = impl_->start_op(false, "");
  return out;
}

Expected<Operation> SimFabric::detach(const std::string& fabric_host,
                                      const std::vector<std::string>& device_ids) {
  return impl_->change(FabricChange{false, fabric_host, device_ids});
}

Expected<Operation> SimFabric::operation_status(const std::string& operation_id) {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->ops.find(operation_id);
  if (it == impl_->ops.end()) {
    return Error{ErrorCode::kNotFound, "sim fabric: unknown operation '" + operation_id + "'"};
  }
  return impl_->describe(it->first, it->second);
}

Expected<std::vector<std::pair<std::string, Health>>> SimFabric::health() {
  std::lock_guard lock(impl_->mu);
  std::vector<Device> devices = impl_->devices;
  if (Status s = impl_->apply_health_file(devices); !s) return s.error();
  std::vector<std::pair<std::string, Health>> out;
  out.reserve(devices.size());
  for (const Device& d : devices) out.emplace_back(d.id, d.health);
  return out;
}

void SimFabric::fail_next_attaches(uint32_t n, std::string message) {
  std::lock_guard lock(impl_->mu);
  impl_->attach_failures.left += n;
  impl_->attach_failures.message = message.empty() ? "injected attach failure" : std::move(message);
}

void SimFabric::fail_next_detaches(uint32_t n, std::string message) {
  std::lock_guard lock(impl_->mu);
  impl_->detach_failures.left += n;
  impl_->detach_failures.message = message.empty() ? "injected detach failure" : std::move(message);
}

Status SimFabric::set_health(const std::string& device_id, Health health) {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->index.find(device_id);
  if (it == impl_->index.end()) {
    return Error{ErrorCode::kNotFound, "sim fabric: unknown device '" + device_id + "'"};
  }
  impl_->devices[it->second].health = health;
  return Status::Ok();
}

Status SimFabric::lose_attachment(const std::string& device_id) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->index.contains(device_id)) {
    return Error{ErrorCode::kNotFound, "sim fabric: unknown device '" + device_id + "'"};
  }
  Impl::Undo undo;
  impl_->place(device_id, std::nullopt, undo);
  return impl_->persist(undo);
}

Status SimFabric::attach_behind_back(const std::string& device_id, const std::string& fabric_host) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->index.contains(device_id)) {
    return Error{ErrorCode::kNotFound, "sim fabric: unknown device '" + device_id + "'"};
  }
  if (!impl_->fabric_hosts.contains(fabric_host)) {
    return Error{ErrorCode::kNotFound, "sim fabric: unknown host '" + fabric_host + "'"};
  }
  Impl::Undo undo;
  impl_->place(device_id, fabric_host, undo);
  return impl_->persist(undo);
}

}  // namespace composer
