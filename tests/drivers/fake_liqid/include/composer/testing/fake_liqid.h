// A fake Liqid Director for tests: a real HTTP server on loopback that speaks the Liqid REST
// API v2 (under /liqid/api/v2), keeps state and injects faults.
//
// State: groups, each with machines "node01".. and a pool of GPUs, memory and NVMe drives, plus
// devices in the system free pool. Relating a device to a machine needs the machine in fabric
// edit mode; the change is pending until fabric/reprogram applies it, and fabric/edit/cancel
// discards it. Every answer is a Liqid envelope {"response": {"code", "errors", "data"}}.
// Authentication: HTTP basic, or the X-API-Key of a digest created with POST digest/<label>.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "composer/common/error.h"

namespace composer::testing {

struct FakeLiqidOptions {
  // Groups "group1".."groupN"; machines are numbered across groups: node01, node02, ... in
  // group1, then the next ones in group2, and so on.
  uint32_t groups = 1;
  uint32_t machines_per_group = 2;
  // Per group pool: GPUs "gpu<N>" (model A100-80G), 64 GiB memory "mem<N>", 3.84 TB NVMe
  // "nvme<N>"; N counts across groups.
  uint32_t gpus_per_group = 4;
  uint32_t memory_per_group = 1;
  uint32_t drives_per_group = 1;
  // Every device's status record carries the PCI vendor id ("vid": 0x10de for GPUs, 0x144d
  // otherwise) and, for GPUs and drives, the PCI device id ("did": 0x20b5, 0xa824); its device
  // info carries "serial_num" ("LQD" and its index in 7 digits).
  // GPUs in the system free pool, in no group: "freegpu<N>".
  uint32_t free_gpus = 1;
  std::string username = "admin";
  std::string password = "liqid-test-pw";
  int port = 0;  // 0: any free port on 127.0.0.1
  // A reprogram takes this long before it answers (the fabric reprogramming its switches);
  // the machine stays in edit mode meanwhile, and other requests are served.
  int reprogram_ms = 0;
  // As a Director: one fabric edit at a time. While a machine is in edit mode, fabric/edit
  // for any machine answers 409 "the fabric is being edited (machine ...)".
  bool one_edit_at_a_time = false;
};

// A fault for the next `count` requests whose method matches (empty: any) and whose API path
// (after /liqid/api/v2/, without the query) contains `path` (empty: any), after `skip` matching
// requests were let through. The digest calls are never faulted.
struct FakeLiqidFault {
  enum class Kind {
    kStatus,    // answer HTTP `status` with an envelope error carrying `message`
    kEnvelope,  // answer HTTP 200 with envelope code 1 and an error carrying `message`
    kDelay,     // wait delay_ms before serving (a timeout for a short client)
    kReset,     // close the connection part way through the answer
  };
  Kind kind = Kind::kStatus;
  std::string method;
  std::string path;
  int status = 500;
  int delay_ms = 0;
  std::string message = "injected fault";
  uint32_t count = 1;
  uint32_t skip = 0;
};

class FakeLiqid {
 public:
  static Expected<std::unique_ptr<FakeLiqid>> start(FakeLiqidOptions options = {});
  ~FakeLiqid();  // stops serving and waits for the server thread
  FakeLiqid(const FakeLiqid&) = delete;
  FakeLiqid& operator=(const FakeLiqid&) = delete;

  int port() const;
  std::string base_url() const;  // http://127.0.0.1:PORT

  void inject(FakeLiqidFault fault);
  // device_state of a device ("ACTIVE", "DEGRADED", "FAILED", ...). kNotFound if unknown.
  Status set_state(const std::string& device, const std::string& state);
  // Devices related to a machine (applied by a reprogram), sorted.
  std::vector<std::string> machine_devices(const std::string& machine) const;
  // Machines in fabric edit mode now, and the changes pending in their edits.
  std::vector<std::string> editing() const;
  size_t pending() const;
  // Forgets every digest, as a Director does when an admin revokes the API keys.
  void revoke_digests();
  // Digests (API keys) that exist; requests served per method.
  size_t digests() const;
  uint64_t requests(const std::string& method) const;
  // Requests that would change the Director: any method but GET, the digest calls aside.
  uint64_t writes() const;
  // The X-Composer-Epoch each of those writes came with (0: none), in order.
  std::vector<int64_t> write_epochs() const;
  // Reprograms applied; the most machines ever in edit mode at once.
  uint64_t reprograms() const;
  size_t most_edits_at_once() const;
  // Relates a device to a machine at once, as an admin in the Director would (an orphan).
  Status relate_behind_back(const std::string& device, const std::string& machine);

 private:
  struct Impl;
  explicit FakeLiqid(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace composer::testing
