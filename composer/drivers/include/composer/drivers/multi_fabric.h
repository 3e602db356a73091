// Several fabric managers behind one Fabric: composerd serves nodes on more than one fabric
// (a Redfish pod and a Liqid pod, say) through the one driver interface it knows.
//
// Every name a member fabric gives is qualified with the member's name and a colon, so that
// two fabrics may use the same ids without meeting: device "GPU-1" of fabric "pod-a" is
// "pod-a:GPU-1", its zone "z1" is "pod-a:z1" and host "node7" is "pod-a:node7"; operation ids
// likewise. A member's held devices come qualified too (their holders' words unchanged), its
// skipped resources prefixed with "pod-a: ". The allocator only gives a host devices of the zones
// it reaches, and a host only reaches its own fabric's zones, so a composition never spans two
// fabrics. Slurm node names are not qualified; one node is served by one fabric, and inventory()
// refuses two fabrics that both claim a node.
//
// inventory() and health() read every member and fail, naming the member, when one does:
// the reconciler then skips its round instead of taking a fabric that did not answer for one
// that lost its devices. attach(), detach() and operation_status() go to the one member that
// owns the host or operation, so one fabric's outage does not stop the others' compositions.
//
// Thread-safe when the members are: this class keeps no state of its own after creation.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "composer/core/fabric.h"

namespace composer {

class MultiFabric final : public Fabric {
 public:
  struct Member {
    std::string name;  // letters, digits, '-', '_' and '.'; no ':'
    std::unique_ptr<Fabric> fabric;
  };

  // Refuses no member, an empty, malformed or repeated name, or a null fabric.
  static Expected<std::unique_ptr<MultiFabric>> create(std::vector<Member> members);

  // "pod-a=redfish,pod-b=liqid"
  std::string_view driver() const override { return driver_; }
  Expected<FabricInventory> inventory() override;
  Expected<Operation> attach(const std::string& fabric_host,
                             const std::vector<std::string>& device_ids) override;
  Expected<Operation> detach(const std::string& fabric_host,
                             const std::vector<std::string>& device_ids) override;
  Expected<Operation> operation_status(const std::string& operation_id) override;
  std::string lane(const std::string& fabric_host) const override;
  bool serialises_changes(const std::string& lane) const override;
  // The changes of one member's lane, passed to it whole.
  Expected<BatchStarted> apply_batch(const std::vector<FabricChange>& changes) override;
  Expected<std::vector<std::pair<std::string, Health>>> health() override;

  // "pod-a", "GPU-1" -> "pod-a:GPU-1"
  static std::string qualify(std::string_view member, std::string_view id);

 private:
  explicit MultiFabric(std::vector<Member> members);

  // The member a qualified name belongs to and the name without its qualifier.
  Expected<std::pair<Member*, std::string>> split(const std::string& qualified,
                                                  std::string_view what);
  Expected<Operation> change(bool attach, const std::string& fabric_host,
                             const std::vector<std::string>& device_ids);

  std::vector<Member> members_;
  std::string driver_;
};

}  // namespace composer
