// Cluster files: composer.conf's own lines through composerd's parser and fabric set-up, plus
// FixedNode lines for servers with their own devices.

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/config/conf_file.h"
#include "composer/setup/composer_conf.h"
#include "composer/setup/fabric_setup.h"
#include "composer/simulate/simulate.h"

namespace composer::simulate {
namespace {

Error invalid(std::string why) { return Error{ErrorCode::kInvalidArgument, std::move(why)}; }

// "FixedNode=gpu[01-04] Gpus=8 GpuModel=V100 Memory=1T MemBlock=4G": one host per name, each
// with a private zone "fixed:<name>" holding its devices.
Status parse_fixed_line(const config::Line& line, Cluster& c, std::set<std::string>& names) {
  auto expanded = config::expand_hostlist(line.value());
  if (!expanded) return invalid("FixedNode: " + expanded.error().message);
  uint32_t gpus = 0;
  std::string model = "GPU";
  uint64_t memory = 0;
  uint64_t block = kDefaultFixedMemBlock;
  for (size_t i = 1; i < line.pairs.size(); ++i) {
    const std::string k = lower(line.pairs[i].key);
    const std::string& v = line.pairs[i].value;
    if (k == "gpus") {
      auto n = config::whole_number(line.pairs[i].key, v, 0, 1024);
      if (!n) return n.error();
      gpus = static_cast<uint32_t>(*n);
    } else if (k == "gpumodel") {
      if (auto s = config::name(line.pairs[i].key, v); !s) return s;
      model = v;
    } else if (k == "memory" || k == "memblock") {
      auto size = parse_size(v, k == "memory" ? ZeroSize::kNone : ZeroSize::kRefused);
      if (!size) return invalid(line.pairs[i].key + "=" + v + ": " + size.error().message);
      (k == "memory" ? memory : block) = *size;
    } else {
      return invalid("unknown FixedNode option '" + line.pairs[i].key +
                     "' (allowed: Gpus, GpuModel, Memory, MemBlock)");
    }
  }
  if (memory % block != 0) {
    return invalid("FixedNode=" + line.value() + ": Memory=" + format_size(memory) +
                   " is not a whole number of MemBlock=" + format_size(block) + " blocks");
  }
  const uint64_t blocks = memory / block;
  if (blocks > 65536) {
    return invalid("FixedNode=" + line.value() + ": Memory=" + format_size(memory) + " makes " +
                   std::to_string(blocks) + " blocks of " + format_size(block) +
                   "; at most 65536: choose a larger MemBlock=");
  }
  if (gpus == 0 && blocks == 0) {
    return invalid("FixedNode=" + line.value() + " needs Gpus= or Memory=");
  }
  for (const std::string& n : *expanded) {
    if (!names.insert(n).second) return invalid("node '" + n + "' is declared twice");
    Host h;
    h.node = n;
    h.fabric_id = n;
    h.zones = {"fixed:" + n};
    h.gpu_slots = gpus;
    h.mem_slots = static_cast<uint32_t>(blocks);
    for (uint32_t g = 0; g < gpus; ++g) {
      Device d;
      d.id = n + ":gpu" + std::to_string(g);
      d.type = DeviceType::kGpu;
      d.model = model;
      d.zone = h.zones.front();
      c.devices.push_back(std::move(d));
    }
    for (uint64_t b = 0; b < blocks; ++b) {
      Device d;
      d.id = n + ":mem" + std::to_string(b);
      d.type = DeviceType::kMem;
      d.model = "DRAM";
      d.capacity_bytes = block;
      d.zone = h.zones.front();
      c.devices.push_back(std::move(d));
    }
    c.hosts.push_back(std::move(h));
    ++c.fixed_servers;
  }
  return Status::Ok();
}

}  // namespace

Expected<Cluster> parse_cluster(std::string_view text, const std::string& path) {
  Cluster c;
  c.name = path;
  std::set<std::string> fixed_names;
  // The other lines go to composerd's parser as they are, at the same line numbers.
  std::vector<std::string> rest = split(text, '\n');
  bool composable = false;
  Status read = config::read_lines(text, path, [&](const config::Line& line) -> Status {
    // Only the lines that describe hardware: a misspelt key would otherwise be a silent
    // default (SimulateCluster.BadLinesAreRefusedWithASentence).
    if (line.key != "fixednode" && !line.key.starts_with("fabric") && line.key != "nodename" &&
        line.key != "devicegroup") {
      return invalid("unknown key '" + line.written_key() +
                     "' (allowed in a cluster file: FixedNode, NodeName, DeviceGroup, Fabric, "
                     "FabricName)");
    }
    if (line.key == "fixednode") {
      rest[static_cast<size_t>(line.number - 1)].clear();
      return parse_fixed_line(line, c, fixed_names);
    }
    composable |= line.key == "nodename" || line.key == "devicegroup" || line.key == "fabricname";
    return Status::Ok();
  });
  if (!read) return read.error();
  if (composable) {
    auto cfg = setup::parse_config(join(rest, "\n"), path);
    if (!cfg) return cfg.error();
    for (const auto& spec : cfg->fabrics) {
      if (spec.driver != "sim") {
        return config::at(path, spec.line,
                          "FabricName=" + spec.name + " (Driver=" + spec.driver +
                              "): a cluster file describes hardware to simulate; use Driver=sim "
                              "with DeviceGroup lines");
      }
    }
    if (cfg->fabrics.empty() && cfg->fabric != "sim") {
      return config::at(path, 0,
                        "Fabric=" + cfg->fabric +
                            ": a cluster file describes hardware to simulate; use Fabric=sim "
                            "with DeviceGroup lines");
    }
    auto fabric = setup::make_fabric(*cfg);
    if (!fabric) return config::at(path, 0, fabric.error().message);
    auto inventory = (*fabric)->inventory();
    if (!inventory) return config::at(path, 0, inventory.error().message);
    for (Host& h : inventory->hosts) {
      if (fixed_names.contains(h.node)) {
        return config::at(path, 0, "node '" + h.node + "' is both a FixedNode and a NodeName");
      }
      c.hosts.push_back(std::move(h));
    }
    for (Device& d : inventory->devices) c.devices.push_back(std::move(d));
  }
  if (c.hosts.empty()) {
    return config::at(path, 0, "no FixedNode= or NodeName= line: the cluster has no node");
  }
  std::set<std::string> gpu_zones;
  std::set<std::string> mem_zones;
  for (const Device& d : c.devices) {
    if (d.type == DeviceType::kGpu) {
      ++c.gpus;
      gpu_zones.insert(d.zone);
    }
    if (d.type == DeviceType::kMem) {
      c.mem_bytes += d.capacity_bytes;
      mem_zones.insert(d.zone);
    }
  }
  // A cluster no job could use runs every trace to "never runnable": refused instead
  // (SimulateCluster.BadLinesAreRefusedWithASentence).
  const bool serves = std::any_of(c.hosts.begin(), c.hosts.end(), [&](const Host& h) {
    return std::any_of(h.zones.begin(), h.zones.end(), [&](const std::string& z) {
      return (h.gpu_slots > 0 && gpu_zones.contains(z)) ||
             (h.mem_slots > 0 && mem_zones.contains(z));
    });
  });
  if (!serves) {
    return config::at(path, 0,
                      "no node can take a GPU or a memory block (no GPU or memory in the zones "
                      "it reaches, or no GpuSlots=/MemSlots=): the cluster can serve no job");
  }
  return c;
}

Expected<Cluster> load_cluster(const std::string& path) {
  auto text = config::read_file(path);
  if (!text) return text.error();
  return parse_cluster(*text, path);
}

}  // namespace composer::simulate
