// A fake compute host for tests of the plugin's host side: sysfs, /proc/driver/nvidia and /dev
// under a test root, laid out as the kernel lays them out, and a thread that does what the
// kernel does when root writes to them:
//   <root>/sys/devices/pci<DDDD>:<BB>/<address>/   vendor, device, class, subsystem_vendor,
//       subsystem_device, revision, numa_node, remove, config (64 bytes), resource0; for a
//       drive nvme/nvme<N>/{serial,model} and nvme/nvme<N>/{nvme<N>n1,ng<N>n1}/ (the
//       namespace's block and generic character device; with the controller, or
//       set_namespace_delay() later, as the nvme driver's namespace scan)
//   <root>/sys/bus/pci/devices/<address> -> ../../../devices/pci<DDDD>:<BB>/<address>
//   <root>/sys/bus/pci/rescan        writing "1": every function the fabric attached appears
//   <root>/sys/devices/system/node/node<N>/
//   <root>/proc/driver/nvidia/gpus/<address>/information  (Model, GPU UUID, Bus Location,
//       Device Minor) for NVIDIA GPUs
//   <root>/dev/nvidia<minor>, <root>/dev/nvme<N>, <root>/dev/nvme<N>n1, <root>/dev/ng<N>n1
//       (plain files; nvme<N>n1 holds the namespace's first kNamespaceBytes, which a job
//       reads); their numbers in <root>/proc/devices (nvidia 195) and in the `dev`
//       files of nvme/nvme<N>/ (kNvmeMajor:N), nvme/nvme<N>/nvme<N>n1/ (kBlockExtMajor:N) and
//       nvme/nvme<N>/ng<N>n1/ (kNvmeGenericMajor:N)
//   <root>/sys/bus/dax/devices/dax<R>.0/   target_node, size, driver -> the dax driver bound
//   <root>/sys/bus/dax/drivers/{device_dax,kmem}/{new_id,unbind}
//   <root>/sys/devices/system/memory/memory<K>/  state, node<N> -> its node; and
//       <root>/sys/devices/system/node/node<N>/memory<K> -> the block
// CXL memory as the kernel's dax and memory-hotplug interfaces show it: a dax device the fabric
// attached is bound to device_dax; a dax device's name written to kmem/new_id (after
// device_dax/unbind, as `daxctl reconfigure-device --mode=system-ram` does) or to kmem/bind
// binds it to kmem if no driver has it,
// and its memory blocks appear offline on its target node; "online", "online_movable" or
// "online_kernel" written to a block's state onlines it, "offline" offlines it unless the node
// is busy (set_memory_busy: pages that cannot be migrated; the state stays "online"); kmem/unbind
// of a device whose blocks are all offline removes them, and it goes back to device_dax. A node
// kmem made for a region goes with its last block, as a memory-only node goes offline.
// CXL memory in no region yet (add_cxl_memory: a Type 3 device present at boot, as QEMU 7.2's
// persistent memory in tests/kvm), as the kernel's CXL and libnvdimm buses show it:
//   <root>/sys/bus/cxl/devices/decoder0.<W> (root decoders, fixed memory windows: devtype,
//       cap_pmem, target_list, size, start, create_pmem_region offering the next region's name,
//       delete_region), root0/dport<uid> and port<N> (uport) both the host bridge's ACPI
//       device, mem<K> (pmem/size), endpoint<P> under its host bridge's port
//       (uport -> mem<K>, decoders_committed) with its decoder<P>.0 (mode, dpa_size),
//       region<N> (uuid, interleave_ways, interleave_granularity, size, target0, commit,
//       resource; the region offered is shown before the write that takes it, where the
//       kernel makes it at that write)
//   <root>/sys/bus/cxl/drivers/cxl_region/{bind,unbind}
//   <root>/sys/bus/nd/devices/region<M>, namespace<M>.0, dax<M>.0 and
//   <root>/sys/bus/nd/drivers/dax_pmem/{bind,unbind}
// A committed region bound to cxl_region becomes a libnvdimm region at the same address, with
// its namespace and dax seeds 150 ms later (libnvdimm probes its devices asynchronously),
// unless its endpoint decoder is another such region's already
// (the kernel refuses a decoder to a second region: it stays uncommitted, and nothing comes of
// it); its dax seed bound to dax_pmem (over a namespace of the region's size) becomes the dax
// device <root>/sys/bus/dax/devices/dax<M>.0 (a link to its directory under the libnvdimm dax
// device, as in the kernel), bound to device_dax a round later (udev loads the module), smaller
// than the region by the memory map it keeps on the device, as the kernel's is; kmem then
// onlines it as above.
// dax_pmem/unbind of a dax device kmem let go removes it, cxl_region/unbind removes the
// libnvdimm region, and delete_region a region no longer committed.
// Writing "1" to a function's `remove` makes it disappear with its /proc and /dev entries, as
// the kernel's hot-unplug does. A drive's namespace is emptied before its file goes: a process
// that keeps it open reads 0 bytes from then on, with no error, and its descriptor shows
// "<path> (deleted)", as a job's reads of a drive pulled under an open file end on Linux 6.1
// (the disk's size is 0 once it is removed; tests/kvm's kvm_slurm). The thread acts on writes after
// they return, where the kernel acts within them; it keeps their order as far as it matters: a
// rescan written before a remove does not bring back what the remove took away. A function that
// goes leaves its directory's inode number taken (the directory moves to <root>/gone), so a
// function shown again at the same address has another, as the kernel numbers each sysfs node anew.
// Processes are not faked: tests that need a holder start a real one, and the plugin reads the real
// /proc for file descriptors, or, with mirror_processes(), <root>/proc, where the host shows each
// real process that has one of its files open as <root>/proc/<pid>/fd/<n> (a link to that file), as
// the kernel shows holders.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace composer::test_support {

// One PCI function as the host shows it.
struct FakePciFunction {
  std::string address;  // "0000:41:00.0"
  std::string vendor = "0x10de";
  std::string device = "0x20b5";
  std::string class_code = "0x030200";  // 3D controller; "0x010802" for an NVMe drive
  std::string subsystem_vendor = "0x10de";
  std::string subsystem_device = "0x1533";
  int numa_node = -1;
  // NVIDIA GPUs (vendor 0x10de, class 0x03xxxx): the driver's view, unless nvidia_driver is
  // false (a GPU the nvidia driver has not bound).
  std::string gpu_uuid;   // "GPU-..."; written to the information file
  int nvidia_minor = -1;  // -1: the next free minor
  bool nvidia_driver = true;
  // NVMe drives (class 0x0108xx): the controller's serial; its number is the next free one.
  std::string serial;
};

// An NVIDIA GPU with the nvidia driver bound: UUID `uuid`, /dev/nvidia<minor> (-1: the next
// free minor).
inline FakePciFunction nvidia_gpu(const std::string& address, const std::string& uuid,
                                  int minor = -1) {
  FakePciFunction f;
  f.address = address;
  f.gpu_uuid = uuid;
  f.nvidia_minor = minor;
  return f;
}

class FakeHost {
 public:
  // The device numbers the host gives NVMe controllers and namespaces (dynamic on a real host).
  static constexpr int kNvmeMajor = 241;
  static constexpr int kBlockExtMajor = 259;
  static constexpr int kNvmeGenericMajor = 240;
  // What a drive's namespace file holds while the drive is there (its data, all zero).
  static constexpr size_t kNamespaceBytes = 64 * 1024;

  // Lays out an empty host (no PCI functions, NUMA nodes 0 and 1) under `root` and starts
  // the thread that acts on rescan and remove.
  explicit FakeHost(std::filesystem::path root);
  ~FakeHost();
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  std::string sysfs_root() const { return (root_ / "sys").string(); }
  std::string proc_root() const { return (root_ / "proc").string(); }
  std::string dev_root() const { return (root_ / "dev").string(); }

  // A function the host shows from the start (a local GPU, a boot drive).
  void add_present(const FakePciFunction& f);
  // A function the fabric attached: it appears at the next rescan, after `delay`.
  void attach(FakePciFunction f, std::chrono::milliseconds delay = std::chrono::milliseconds(0));
  // How long after a drive's controller its namespace (nvme<N>n1 in sysfs and /dev) appears
  // (default: with it). The real kernel's nvme driver scans namespaces once the controller is
  // up, after the function and its serial are shown (tests/kvm: about 0.2 s under TCG).
  void set_namespace_delay(std::chrono::milliseconds delay);
  // CXL memory or any NUMA node: <sys>/devices/system/node/node<N>/ appears at once.
  void add_numa_node(int node);
  // A CXL memory region the fabric attached, as a dax device in devdax mode: `name`
  // ("dax0.0"), the NUMA node its memory becomes (`target_node`), its size, and how many
  // memory blocks kmem makes of it.
  void add_dax(const std::string& name, int target_node, uint64_t size_bytes, int blocks);
  // The fabric took the region away: the dax device goes, and its memory blocks with it.
  void remove_dax(const std::string& name);
  // A CXL Type 3 device `memdev` ("mem0") of `size_bytes` of persistent memory, present from
  // the start and in no region (see the top). A region made of it targets `target_node`, and
  // kmem makes `blocks` memory blocks of it.
  // It sits behind host bridge `host_bridge` (its uid, as a window's target_list names it).
  // Without a window of the test's own, the host has QEMU's one: decoder0.0 of 4 GiB for host
  // bridge 32.
  void add_cxl_memory(const std::string& memdev, uint64_t size_bytes, int target_node, int blocks,
                      int host_bridge = 32);
  // A fixed memory window (a root decoder, `decoder` "decoder0.1") of `size_bytes` that takes
  // persistent memory behind the host bridges `host_bridges` (target_list). The kernel commits
  // a region only in a window that targets its device's host bridge and has room for it.
  void add_cxl_window(const std::string& decoder, const std::vector<int>& host_bridges,
                      uint64_t size_bytes);
  // The CXL regions committed (<sys>/bus/cxl/devices/region<N>/commit says 1), by name.
  std::vector<std::string> cxl_regions() const;
  // The dax devices the host shows (<sys>/bus/dax/devices), by name.
  std::vector<std::string> dax_names() const;
  // Pages on `node` that cannot be migrated: its blocks refuse to go offline.
  void set_memory_busy(int node, bool busy);
  // The state of each memory block of `node` ("online", "offline"), in block order.
  std::vector<std::string> memory_states(int node) const;

  // What the fabric has attached to this host, asked at every rescan (on the host's thread):
  // each function it answers that the host does not show yet appears, as after attach().
  void set_rescan_source(std::function<std::vector<FakePciFunction>()> source);
  // The fabric took a function away without asking (a surprise hot-unplug): it disappears now,
  // and what a process still reads of a drive it had open ends (see the top).
  void unplug_now(const std::string& address);
  // The addresses of the functions the host shows.
  std::vector<std::string> present() const;
  // <root>/proc/<pid>/fd/<n> for each real process with a file under <root> open, kept in step
  // with the real /proc while the host runs (see the top of this file).
  void mirror_processes();

  // Rescans the host has seen, and functions removed through `remove`.
  int rescans() const { return rescans_.load(); }
  std::vector<std::string> removed() const;
  // The /dev paths and the NVMe controller name of a function the host shows ("" if none).
  std::string nvme_controller(const std::string& address) const;

 private:
  struct Pending {
    FakePciFunction f;
    std::chrono::milliseconds delay;
  };
  void materialise(const FakePciFunction& f);
  void add_namespace(const std::filesystem::path& ctrl_dir, const std::string& ctrl);
  void unplug(const std::string& address);
  void retire(const std::filesystem::path& dir);
  void unplug_removed();
  void mirror();
  void follow_dax();
  void follow_cxl();
  void offer_region(const std::string& decoder);
  void add_window(const std::string& decoder, const std::vector<int>& host_bridges,
                  uint64_t size_bytes);
  std::filesystem::path host_bridge_port(int uid);
  bool window_takes(const std::filesystem::path& region) const;
  void drop_node_if_empty(int node);
  void watch();

  std::filesystem::path root_;
  mutable std::mutex mu_;
  std::vector<Pending> pending_;
  std::vector<std::pair<std::chrono::steady_clock::time_point, FakePciFunction>> arriving_;
  struct DueNamespace {
    std::chrono::steady_clock::time_point due;
    std::string address;
    std::string ctrl;  // "nvme3"
  };
  std::vector<DueNamespace> namespaces_due_;
  std::chrono::milliseconds namespace_delay_{0};
  std::vector<std::string> present_;
  std::vector<std::string> removed_;
  std::set<std::string> removed_after_rescan_;  // since the rescan now waiting was written
  int next_minor_ = 0;
  int next_nvme_ = 0;
  int retired_ = 0;
  std::function<std::vector<FakePciFunction>()> source_;
  bool mirror_ = false;
  std::set<std::string> mirrored_pids_;
  struct Dax {
    int target_node = 0;
    int blocks = 0;
    int first_block = -1;  // -1 while kmem has not made its blocks
  };
  std::map<std::string, Dax> dax_;
  std::set<int> busy_nodes_;
  std::set<int> memory_only_nodes_;  // made by kmem for a region, gone with its last block
  int next_block_ = 32;
  struct CxlMemory {
    uint64_t size = 0;
    int target_node = 0;
    int blocks = 0;
    std::string endpoint_decoder;  // "decoder2.0"
    int host_bridge = 32;
  };
  std::vector<std::string> windows_;                   // root decoders, in the order made
  std::map<int, std::filesystem::path> bridge_ports_;  // host bridge uid -> its port
  uint64_t next_window_start_ = uint64_t{0x11} << 28;
  std::map<std::string, CxlMemory> cxl_;             // by memdev
  std::map<std::string, std::string> nd_region_of_;  // CXL region -> its libnvdimm region
  std::set<std::string> unbound_dax_;  // made by dax_pmem, bound to device_dax next round
  // libnvdimm regions whose seeds are still to come, and when they come
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::string>> unprobed_nd_;
  int next_region_ = 0;
  int next_port_ = 1;  // port1 the first host bridge's, as on Linux 6.1
  std::atomic<int> rescans_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace composer::test_support
