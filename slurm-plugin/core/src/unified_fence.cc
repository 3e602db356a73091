// cgroup v2 fencing: the plugin's BPF_PROG_TYPE_CGROUP_DEVICE program (device_fence.h).
#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/slurm/device_fence.h"

namespace composer::slurm {
namespace fs = std::filesystem;

namespace {

// The name the program carries, by which a later update finds it among the cgroup's programs.
constexpr char kProgramName[] = "composer_fence";
constexpr int kMaxPrograms = 64;

bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst & 0xf;
  i.src_reg = src & 0xf;
  i.off = off;
  i.imm = imm;
  return i;
}

uint64_t as_word(const bpf_insn& i) {
  uint64_t w = 0;
  std::memcpy(&w, &i, sizeof w);
  return w;
}

// r1 = imm64: two instruction slots.
void load_imm64(std::vector<bpf_insn>& p, uint8_t dst, uint64_t value) {
  p.push_back(insn(BPF_LD | BPF_DW | BPF_IMM, dst, 0, 0, static_cast<int32_t>(value & 0xffffffff)));
  p.push_back(insn(0, 0, 0, 0, static_cast<int32_t>(value >> 32)));
}

long bpf(int cmd, bpf_attr& attr) { return ::syscall(__NR_bpf, cmd, &attr, sizeof attr); }

std::string errno_text(int err) { return std::strerror(err); }

// The cgroup id of a cgroup v2 folder (its inode); 0 when it does not exist.
uint64_t cgroup_id(const fs::path& cgroup) {
  struct stat st {};
  if (::stat(cgroup.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
  return st.st_ino;
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  Fd(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_;
};

// The plugin's programs attached to the cgroup open at `cgroup` (by name), and the attach
// flags the cgroup's device programs were attached with.
struct Attached {
  std::vector<Fd> ours;
  uint32_t flags = 0;
  uint32_t count = 0;
};

Expected<Attached> attached(int cgroup, const std::string& scope) {
  std::vector<uint32_t> ids(kMaxPrograms);
  bpf_attr attr{};
  attr.query.target_fd = static_cast<uint32_t>(cgroup);
  attr.query.attach_type = BPF_CGROUP_DEVICE;
  attr.query.prog_ids = reinterpret_cast<uintptr_t>(ids.data());
  attr.query.prog_cnt = kMaxPrograms;
  if (bpf(BPF_PROG_QUERY, attr) != 0) {
    return Error{ErrorCode::kInternal,
                 "cannot list the device programs of " + scope + ": " + errno_text(errno)};
  }
  Attached out;
  out.flags = attr.query.attach_flags;
  out.count = attr.query.prog_cnt;
  for (uint32_t n = 0; n < attr.query.prog_cnt && n < kMaxPrograms; ++n) {
    bpf_attr get{};
    get.prog_id = ids[n];
    Fd fd(static_cast<int>(bpf(BPF_PROG_GET_FD_BY_ID, get)));
    if (!fd) continue;  // detached meanwhile
    bpf_prog_info info{};
    bpf_attr about{};
    about.info.bpf_fd = static_cast<uint32_t>(fd.get());
    about.info.info_len = sizeof info;
    about.info.info = reinterpret_cast<uintptr_t>(&info);
    if (bpf(BPF_OBJ_GET_INFO_BY_FD, about) != 0) continue;
    if (std::strncmp(info.name, kProgramName, sizeof info.name) == 0) {
      out.ours.push_back(std::move(fd));
    }
  }
  return out;
}

Status detach(int cgroup, const Fd& program, const std::string& scope) {
  bpf_attr attr{};
  attr.target_fd = static_cast<uint32_t>(cgroup);
  attr.attach_bpf_fd = static_cast<uint32_t>(program.get());
  attr.attach_type = BPF_CGROUP_DEVICE;
  if (bpf(BPF_PROG_DETACH, attr) != 0 && errno != ENOENT) {
    return Error{ErrorCode::kInternal,
                 "cannot detach the fence program from " + scope + ": " + errno_text(errno)};
  }
  return Status::Ok();
}

}  // namespace

std::vector<uint64_t> fence_program(int job_level, const std::vector<uint64_t>& not_jobs,
                                    const std::vector<FenceRule>& rules) {
  // struct bpf_cgroup_dev_ctx { u32 access_type (type | access << 16); u32 major; u32 minor; }
  std::vector<bpf_insn> p;
  p.push_back(insn(BPF_LDX | BPF_W | BPF_MEM, BPF_REG_6, BPF_REG_1, 0, 0));
  p.push_back(insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_6, 0, 0, 0xffff));
  p.push_back(insn(BPF_LDX | BPF_W | BPF_MEM, BPF_REG_7, BPF_REG_1, 4, 0));
  p.push_back(insn(BPF_LDX | BPF_W | BPF_MEM, BPF_REG_8, BPF_REG_1, 8, 0));
  // r0 = the id of the opener's cgroup at the job cgroups' depth (0 above it).
  p.push_back(insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_1, 0, 0, job_level));
  p.push_back(insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_current_ancestor_cgroup_id));
  // Jumps to the final "allow" are patched once its place is known.
  std::vector<size_t> to_allow;
  p.push_back(insn(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 0, 0));
  to_allow.push_back(p.size() - 1);
  for (uint64_t id : not_jobs) {
    load_imm64(p, BPF_REG_1, id);
    p.push_back(insn(BPF_JMP | BPF_JEQ | BPF_X, BPF_REG_0, BPF_REG_1, 0, 0));
    to_allow.push_back(p.size() - 1);
  }
  for (const FenceRule& r : rules) {
    const int32_t type = r.node.type == 'b' ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR;
    // Not this device: on to the next rule (each rule is 8 instructions).
    p.push_back(insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_6, 0, 7, type));
    p.push_back(
        insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_7, 0, 6, static_cast<int32_t>(r.node.major)));
    p.push_back(
        insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_8, 0, 5, static_cast<int32_t>(r.node.minor)));
    load_imm64(p, BPF_REG_1, r.owner);
    p.push_back(insn(BPF_JMP | BPF_JEQ | BPF_X, BPF_REG_0, BPF_REG_1, 0, 0));
    to_allow.push_back(p.size() - 1);
    p.push_back(insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0));
    p.push_back(insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  }
  const size_t allow = p.size();
  p.push_back(insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1));
  p.push_back(insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  for (size_t at : to_allow) p[at].off = static_cast<int16_t>(allow - at - 1);
  std::vector<uint64_t> out;
  out.reserve(p.size());
  for (const bpf_insn& i : p) out.push_back(as_word(i));
  return out;
}

std::string unified_mount(const std::string& configured) {
  if (!configured.empty()) return configured;
  std::error_code ec;
  for (const char* candidate : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    if (fs::exists(fs::path(candidate) / "cgroup.procs", ec) &&
        fs::exists(fs::path(candidate) / "cgroup.subtree_control", ec)) {
      return candidate;
    }
  }
  return "";
}

std::optional<UnifiedFence> UnifiedFence::of_task(const std::string& mount,
                                                  const std::string& self_cgroup, uint32_t job_id) {
  if (mount.empty()) return std::nullopt;
  const std::string job = "job_" + std::to_string(job_id);
  for (const std::string& line : split(self_cgroup, '\n', {.trim = true, .skip_empty = true})) {
    if (!line.starts_with("0::/")) continue;  // the cgroup v2 line
    fs::path scope(mount);
    for (const fs::path& part : fs::path(line.substr(3)).relative_path()) {
      if (part == job) return UnifiedFence(mount, scope.string());
      scope /= part;
    }
  }
  return std::nullopt;
}

Expected<size_t> UnifiedFence::programs() const {
  Fd cgroup(::open(scope_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!cgroup)
    return Error{ErrorCode::kInternal, "cannot open " + scope_ + ": " + errno_text(errno)};
  Expected<Attached> now = attached(cgroup.get(), scope_);
  if (!now) return now.error();
  return now->ours.size();
}

Status UnifiedFence::apply(const std::map<uint32_t, std::vector<DeviceNode>>& held) const {
  const fs::path relative = fs::path(scope_).lexically_relative(mount_);
  if (relative.empty() || *relative.begin() == "..") {
    return Error{ErrorCode::kInternal, scope_ + " is not below " + mount_};
  }
  int level = 1;  // the job cgroups: one below scope
  for (const fs::path& part : relative) {
    if (part != ".") ++level;
  }
  Fd cgroup(::open(scope_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!cgroup) {
    return Error{ErrorCode::kInternal,
                 "cannot open the cgroup " + scope_ + ": " + errno_text(errno)};
  }
  Expected<Attached> now = attached(cgroup.get(), scope_);
  if (!now) return now.error();

  std::vector<FenceRule> rules;
  for (const auto& [job, nodes] : held) {
    const uint64_t owner = cgroup_id(fs::path(scope_) / ("job_" + std::to_string(job)));
    for (const DeviceNode& n : nodes) rules.push_back({n, owner});
  }
  if (rules.empty()) {
    for (const Fd& old : now->ours) {
      if (Status s = detach(cgroup.get(), old, scope_); !s) return s;
    }
    return Status::Ok();
  }
  // scope's other children (slurmstepd's own "system") are not jobs: nothing is fenced there.
  std::vector<uint64_t> not_jobs;
  std::error_code ec;
  for (const auto& child : fs::directory_iterator(scope_, ec)) {
    std::error_code type_ec;
    if (!child.is_directory(type_ec)) continue;
    if (child.path().filename().string().starts_with("job_")) continue;
    if (const uint64_t id = cgroup_id(child.path()); id != 0) not_jobs.push_back(id);
  }

  const std::vector<uint64_t> words = fence_program(level, not_jobs, rules);
  bpf_attr load{};
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insns = reinterpret_cast<uintptr_t>(words.data());
  load.insn_cnt = static_cast<uint32_t>(words.size());
  load.license = reinterpret_cast<uintptr_t>("GPL");
  std::strncpy(load.prog_name, kProgramName, sizeof load.prog_name - 1);
  Fd program(static_cast<int>(bpf(BPF_PROG_LOAD, load)));
  if (!program) {
    return Error{ErrorCode::kInternal,
                 "the kernel refuses the fence program (" + errno_text(errno) +
                     "; it needs root, and a kernel whose device programs may call "
                     "bpf_get_current_ancestor_cgroup_id)"};
  }
  bpf_attr attach{};
  attach.target_fd = static_cast<uint32_t>(cgroup.get());
  attach.attach_bpf_fd = static_cast<uint32_t>(program.get());
  attach.attach_type = BPF_CGROUP_DEVICE;
  attach.attach_flags = BPF_F_ALLOW_MULTI;
  if (!now->ours.empty()) {
    // In one step: the cgroup is never without a fence while it is replaced.
    attach.attach_flags |= BPF_F_REPLACE;
    attach.replace_bpf_fd = static_cast<uint32_t>(now->ours.front().get());
  }
  if (bpf(BPF_PROG_ATTACH, attach) != 0) {
    const int err = errno;
    std::string why = "cannot attach the fence program to " + scope_ + ": " + errno_text(err);
    if (err == EPERM && now->count > 0 && !(now->flags & BPF_F_ALLOW_MULTI)) {
      why += " (it already holds a device program attached without BPF_F_ALLOW_MULTI)";
    }
    return Error{ErrorCode::kInternal, why};
  }
  for (size_t n = 1; n < now->ours.size(); ++n) {
    if (Status s = detach(cgroup.get(), now->ours[n], scope_); !s) return s;
  }
  return Status::Ok();
}

}  // namespace composer::slurm
