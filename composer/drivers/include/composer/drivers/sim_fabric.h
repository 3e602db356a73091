// The simulated fabric: a deterministic in-memory fabric manager for demos and tests, with
// injectable latency and faults. It behaves like the real drivers as composerd sees them:
// attach and detach answer an Operation that may still be running, and it keeps its own idea
// of what is attached, which may drift from composerd's records (lost attachments, orphans).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "composer/common/clock.h"
#include "composer/common/error.h"
#include "composer/core/fabric.h"
#include "composer/model/model.h"

namespace composer {

struct SimConfig {
  // Hosts the fabric can attach to. An empty fabric_id is taken to be the node name.
  std::vector<Host> hosts;
  // `count` devices named "<name>-<NN>", NN zero-padded to the width of count-1.
  struct Group {
    std::string name;
    DeviceType type = DeviceType::kGpu;
    std::string model;
    std::string zone;
    uint32_t count = 0;
    uint64_t size_bytes = 0;  // per memory block or drive; 0 for GPUs
    // Failure domains every device of the group sits in (composer.conf's Domains=), sorted
    // by level name.
    std::vector<FailureDomain> domains;
  };
  std::vector<Group> groups;
  // How long attach and detach stay running; 0 completes them within the call.
  int latency_ms = 0;
  // composer.conf's SimSerialize=yes: the fabric applies one change at a time, as a Liqid
  // Director does (an edit, then a reprogram): a change starts when the one before it has
  // ended, so N changes sent at once take N latencies, and apply_batch() makes many changes
  // one, taking one latency.
  bool serialise = false;
  // Where the fabric keeps what is attached, so that it survives a restart (or a crash) of its
  // owner as a real fabric's state does: read and rewritten whole at create(), appended to at
  // every change (0600, not synced to disk). Empty: in memory only.
  std::string state_file;
  // Faults from the start (composer.conf's SimFailAttaches=, SimFailDetaches=): the first n
  // attach (detach) calls fail, as fail_next_attaches(n) would make them.
  uint32_t fail_attaches = 0;
  uint32_t fail_detaches = 0;
  // composer.conf's SimHealthFile=: what the fabric reports of its devices' health, as an
  // operator or a test sets it from outside, read at every inventory() and health() call
  // (the reconciler takes health from the inventory, every round). One "DEVICE HEALTH"
  // line each (ok, warning or critical), '#' starts a comment; a device it names has that
  // health, the others what set_health() gave them (ok). A missing file names none; a line
  // that does not parse makes both calls fail naming the file and the line.
  std::string health_file;
};

// Addresses are deterministic: GPUs and NVMe drives get PCI addresses "DDDD:BB:00.0" from
// one counter over the groups in order (bus 0x41 upwards, carrying into the domain past
// 0xff); memory blocks get "numa:N", N from 2 upwards, one NUMA node per block.
// Identities are synthetic and deterministic too: every device has serial "SIM" and 1 to 10
// digits from a hash of its id; GPUs are PCI 0x10de:0x20b5 with a UUID
// "GPU-xxxxxxxx-xxxx-4xxx-8xxx-xxxxxxxxxxxx" from that hash, NVMe drives 0x144d:0xa824; memory
// blocks have no PCI ids.
//
// Attach and detach are all or nothing per call: an unknown host or device (kNotFound), or
// for an attach a device attached to another host (kConflict), refuses the whole call at once
// (detaching a device from a host it is not attached to changes nothing and succeeds), and an
// injected failure attaches or detaches nothing. Injected failures are reported through the
// operation, as a real fabric reports a failed task: kFailed at once with no latency,
// otherwise kRunning until the latency has passed and then kFailed. A successful call changes
// the fabric's state at once; its operation reports kDone when the latency has passed.
//
// With a state file, a change the file cannot record is undone and answered kUnavailable
// naming the file. The file is a journal: "DEVICE HOST" (attached there) or "DEVICE" (attached
// nowhere), a device's last line holding; at create() a device or host the configuration no
// longer has is dropped.
//
// Thread-safe: every public method may be called from any thread.
class SimFabric final : public Fabric {
 public:
  // Refuses a configuration with a sentence naming what is wrong: an empty or repeated
  // group name, a count of 0, a memory group with no size, an empty zone, a repeated node
  // or fabric id, a negative latency, or a state file that cannot be read or has a malformed
  // line (named by its number).
  static Expected<std::unique_ptr<SimFabric>> create(SimConfig config,
                                                     const Clock& clock = SystemClock::instance());
  ~SimFabric() override;
  SimFabric(const SimFabric&) = delete;
  SimFabric& operator=(const SimFabric&) = delete;

  std::string_view driver() const override { return "sim"; }
  Expected<FabricInventory> inventory() override;
  Expected<Operation> attach(const std::string& fabric_host,
                             const std::vector<std::string>& device_ids) override;
  Expected<Operation> detach(const std::string& fabric_host,
                             const std::vector<std::string>& device_ids) override;
  Expected<Operation> operation_status(const std::string& operation_id) override;
  Expected<std::vector<std::pair<std::string, Health>>> health() override;
  bool serialises_changes(const std::string& lane) const override;
  // Every change validated alone (one the fabric refuses, or that an injected failure takes,
  // is refused alone); the rest applied as one change with one operation.
  Expected<BatchStarted> apply_batch(const std::vector<FabricChange>& changes) override;

  // Fault injection. The next n attach (detach) calls that pass validation fail with
  // `message`; a later call adds to what is left.
  void fail_next_attaches(uint32_t n, std::string message);
  void fail_next_detaches(uint32_t n, std::string message);
  // kNotFound for an unknown device.
  Status set_health(const std::string& device_id, Health health);
  // The fabric forgets that the device is attached (hardware loss). Not attached: no-op.
  Status lose_attachment(const std::string& device_id);
  // Attaches the device to a fabric host without any request from composerd (an orphan).
  // kNotFound for an unknown device or host; replaces any attachment the device had.
  Status attach_behind_back(const std::string& device_id, const std::string& fabric_host);

 private:
  struct Impl;
  explicit SimFabric(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace composer
