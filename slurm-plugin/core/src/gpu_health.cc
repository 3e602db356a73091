#include "composer/slurm/gpu_health.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

namespace composer::slurm {
namespace {

// From NVIDIA's public nvml.h (the ABI every driver since R450 keeps): only what is used here.
using nvmlReturn_t = int;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlEventSet_st;
using nvmlEventSet_t = nvmlEventSet_st*;
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID for nvmlEventTypeXidCriticalError
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x8ULL;
constexpr int NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;
constexpr int NVML_VOLATILE_ECC = 0;

}  // namespace

struct Nvml::Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*handle_by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*get_uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  // Optional: a driver without one skips that check.
  nvmlReturn_t (*remapped_rows)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*total_ecc)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*event_set_create)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*event_set_wait)(nvmlEventSet_t, nvmlEventData_t*, unsigned) = nullptr;
  nvmlReturn_t (*event_set_free)(nvmlEventSet_t) = nullptr;

  std::string error(nvmlReturn_t rc) const {
    const char* text = error_string != nullptr ? error_string(rc) : nullptr;
    return (text != nullptr ? std::string(text) : "error") + " (" + std::to_string(rc) + ")";
  }
};

namespace {

template <typename F>
void bind(void* handle, const char* name, F*& out) {
  // dlsym answers void*; the symbol is a function of the type nvml.h gives it.
  out = reinterpret_cast<F*>(dlsym(handle, name));
}

}  // namespace

bool critical_xid(unsigned long long xid) {
  static const std::set<unsigned long long> kCritical = {48, 62, 64, 74, 79, 95, 119, 120, 140};
  return kCritical.contains(xid);
}

Nvml::Nvml(void* handle, std::unique_ptr<Api> api) : handle_(handle), api_(std::move(api)) {}

Nvml::~Nvml() {
  if (api_->shutdown != nullptr) api_->shutdown();
  dlclose(handle_);
}

Expected<std::unique_ptr<Nvml>> Nvml::load(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Error{ErrorCode::kUnavailable,
                 "NVML not loaded: " + std::string(why != nullptr ? why : library)};
  }
  auto api = std::make_unique<Api>();
  bind(handle, "nvmlInit_v2", api->init);
  bind(handle, "nvmlShutdown", api->shutdown);
  bind(handle, "nvmlErrorString", api->error_string);
  bind(handle, "nvmlDeviceGetHandleByPciBusId_v2", api->handle_by_pci);
  bind(handle, "nvmlDeviceGetUUID", api->get_uuid);
  bind(handle, "nvmlDeviceGetRemappedRows", api->remapped_rows);
  bind(handle, "nvmlDeviceGetTotalEccErrors", api->total_ecc);
  bind(handle, "nvmlEventSetCreate", api->event_set_create);
  bind(handle, "nvmlDeviceRegisterEvents", api->register_events);
  bind(handle, "nvmlEventSetWait_v2", api->event_set_wait);
  bind(handle, "nvmlEventSetFree", api->event_set_free);
  if (api->init == nullptr || api->shutdown == nullptr || api->handle_by_pci == nullptr) {
    dlclose(handle);
    return Error{ErrorCode::kUnavailable,
                 "NVML not usable: " + library +
                     " lacks nvmlInit_v2, nvmlShutdown or nvmlDeviceGetHandleByPciBusId_v2"};
  }
  if (nvmlReturn_t rc = api->init(); rc != NVML_SUCCESS) {
    const std::string why = api->error(rc);
    dlclose(handle);
    return Error{ErrorCode::kUnavailable, "NVML did not start: nvmlInit_v2: " + why};
  }
  return std::unique_ptr<Nvml>(new Nvml(handle, std::move(api)));
}

std::string Nvml::problem(const std::string& address) const {
  nvmlDevice_t device = nullptr;
  nvmlReturn_t rc = api_->handle_by_pci(address.c_str(), &device);
  if (rc == NVML_ERROR_GPU_IS_LOST) {
    return "NVML reports the GPU lost (fallen off the bus; XID 79)";
  }
  if (rc != NVML_SUCCESS) return "";
  if (api_->remapped_rows != nullptr) {
    unsigned corrected = 0;
    unsigned uncorrected = 0;
    unsigned pending = 0;
    unsigned failure = 0;
    rc = api_->remapped_rows(device, &corrected, &uncorrected, &pending, &failure);
    if (rc == NVML_ERROR_GPU_IS_LOST)
      return "NVML reports the GPU lost (fallen off the bus; XID 79)";
    if (rc == NVML_SUCCESS && failure != 0) {
      return "NVML reports a row remapping failure (" + std::to_string(uncorrected) +
             " rows remapped for uncorrectable errors)";
    }
  }
  if (api_->total_ecc != nullptr) {
    unsigned long long count = 0;
    rc = api_->total_ecc(device, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &count);
    if (rc == NVML_ERROR_GPU_IS_LOST)
      return "NVML reports the GPU lost (fallen off the bus; XID 79)";
    if (rc == NVML_SUCCESS && count > 0) {
      return "NVML reports " + std::to_string(count) +
             " uncorrectable ECC error(s) since the driver loaded";
    }
  }
  return "";
}

std::string Nvml::uuid(const std::string& address) const {
  nvmlDevice_t device = nullptr;
  if (api_->get_uuid == nullptr || api_->handle_by_pci(address.c_str(), &device) != NVML_SUCCESS) {
    return "";
  }
  char text[96] = {};  // NVML_DEVICE_UUID_V2_BUFFER_SIZE is 96
  if (api_->get_uuid(device, text, sizeof text) != NVML_SUCCESS) return "";
  return text;
}

std::map<std::string, std::string> Nvml::critical_xids(const std::vector<std::string>& addresses,
                                                       std::chrono::milliseconds wait) const {
  std::map<std::string, std::string> out;
  if (api_->event_set_create == nullptr || api_->register_events == nullptr ||
      api_->event_set_wait == nullptr || api_->event_set_free == nullptr || addresses.empty()) {
    return out;
  }
  nvmlEventSet_t set = nullptr;
  if (api_->event_set_create(&set) != NVML_SUCCESS) return out;
  std::vector<std::pair<nvmlDevice_t, std::string>> registered;
  for (const std::string& address : addresses) {
    nvmlDevice_t device = nullptr;
    if (api_->handle_by_pci(address.c_str(), &device) != NVML_SUCCESS) continue;
    // A GPU that does not offer XID events (NVML_ERROR_NOT_SUPPORTED) is skipped.
    if (api_->register_events(device, nvmlEventTypeXidCriticalError, set) == NVML_SUCCESS) {
      registered.emplace_back(device, address);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!registered.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    nvmlEventData_t data{};
    const nvmlReturn_t rc =
        api_->event_set_wait(set, &data, static_cast<unsigned>(std::max<int64_t>(left.count(), 0)));
    if (rc != NVML_SUCCESS) break;  // NVML_ERROR_TIMEOUT (10): nothing came
    if ((data.eventType & nvmlEventTypeXidCriticalError) != 0 && critical_xid(data.eventData)) {
      for (const auto& [device, address] : registered) {
        if (device == data.device && !out.contains(address)) {
          out[address] = "XID " + std::to_string(data.eventData);
        }
      }
    }
    if (left.count() <= 0) break;
  }
  api_->event_set_free(set);
  return out;
}

std::vector<BadGpu> check_gpus(const HostDevices& host, const Nvml* nvml,
                               const std::vector<Device>& devices,
                               std::chrono::milliseconds xid_wait) {
  std::vector<BadGpu> bad;
  std::vector<std::string> on_bus;
  for (const Device& d : devices) {
    if (d.type != DeviceType::kGpu || d.address.empty()) continue;
    const std::string path = host.sysfs_path(d);
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      bad.push_back({d.id, d.address,
                     "gone from the bus: the host no longer shows PCI function " + d.address +
                         " (" + path + ")"});
      continue;
    }
    if (nvml == nullptr) continue;
    if (std::string why = nvml->problem(d.address); !why.empty()) {
      bad.push_back({d.id, d.address, why + " at " + d.address});
      continue;
    }
    on_bus.push_back(d.address);
  }
  if (nvml != nullptr && !on_bus.empty()) {
    const std::map<std::string, std::string> xids = nvml->critical_xids(on_bus, xid_wait);
    for (const Device& d : devices) {
      if (d.type != DeviceType::kGpu) continue;
      if (auto it = xids.find(d.address); it != xids.end()) {
        bad.push_back(
            {d.id, d.address, "NVML reports critical " + it->second + " at " + d.address});
      }
    }
  }
  return bad;
}

}  // namespace composer::slurm
