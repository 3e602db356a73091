#include "composer/slurm/busy_check.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>

#include "composer/common/files.h"
#include "composer/common/units.h"
#include "composer/slurm/job_state.h"

namespace composer::slurm {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kBusyLock = "busy.lock";
constexpr std::string_view kAsk = ".ask";
constexpr std::string_view kAnswer = ".holders";
// A step besides the batch script ran on the node (note_step): no answer to the batch
// script's end is taken.
constexpr std::string_view kSteps = ".steps";
// An answer no epilog took (its epilog was killed while it waited) is removed after this long.
constexpr std::chrono::hours kStaleAnswer{1};

std::string file_of(const std::string& dir, uint32_t job, std::string_view kind) {
  return dir + "/" + std::to_string(job) + std::string(kind);
}

// The batch script's end asks as <job>-<composition>: an answer so named is for this run of
// the job, never one from an earlier run of the same job id (a requeue).
std::string batch_end_file(const std::string& dir, uint32_t job, int64_t composition,
                           std::string_view kind) {
  return dir + "/" + std::to_string(job) + "-" + std::to_string(composition) + std::string(kind);
}

// One holder a line: pid, device id and target, tab-separated (a newline in a target, which
// only the log shows, becomes '?').
std::string answer_text(const std::vector<Holder>& holders) {
  std::string out;
  for (const Holder& h : holders) {
    std::string target = h.target;
    std::replace(target.begin(), target.end(), '\n', '?');
    out += std::to_string(h.pid) + "\t" + h.device_id + "\t" + target + "\n";
  }
  return out;
}

// The answer a walk left at `path`; nullopt when there is none, or when any line of it does
// not read (the epilog then walks itself: an answer it cannot read wholly is no answer).
std::optional<std::vector<Holder>> read_answer(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::vector<Holder> out;
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find('\t');
    const size_t b = a == std::string::npos ? std::string::npos : line.find('\t', a + 1);
    if (b == std::string::npos) return std::nullopt;
    const Expected<uint32_t> pid = parse_count(line.substr(0, a), INT32_MAX);
    if (!pid || b == a + 1) return std::nullopt;
    out.push_back(
        Holder{static_cast<int>(*pid), line.substr(a + 1, b - a - 1), line.substr(b + 1)});
  }
  if (in.bad()) return std::nullopt;
  return out;
}

// The holders among `found` of `devices`, less the process `asker`.
std::vector<Holder> holders_of(const std::vector<Holder>& found, const std::vector<Device>& devices,
                               int asker) {
  std::set<std::string> ids;
  for (const Device& d : devices) ids.insert(d.id);
  std::vector<Holder> out;
  for (const Holder& h : found) {
    if (h.pid != asker && ids.contains(h.device_id)) out.push_back(h);
  }
  return out;
}

// An epilog (or a batch script's end) waiting for a walk: its job, the name its answer takes,
// its pid and its devices.
struct Asker {
  uint32_t job = 0;
  std::string answer;
  int pid = 0;
  std::vector<Device> devices;
};

// The asks in `dir`, each taken away (the walk about to begin answers them), with the devices
// their jobs' state files name; `mine` is taken away and not returned. An ask whose job has no
// state file that reads gets no answer, and its epilog walks itself. Answers left longer than
// kStaleAnswer go.
std::vector<Asker> take_asks(const std::string& dir, const std::string& state_dir, uint32_t mine) {
  std::vector<Asker> out;
  std::error_code ec;
  const auto stale = fs::file_time_type::clock::now() - kStaleAnswer;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code gone;
    if (name.ends_with(kAnswer)) {
      if (fs::last_write_time(entry.path(), gone) < stale && !gone) fs::remove(entry.path(), gone);
      continue;
    }
    if (!name.ends_with(kAsk)) continue;
    // JOB (an epilog) or JOB-COMPOSITION (a batch script's end).
    const std::string stem = name.substr(0, name.size() - kAsk.size());
    const Expected<uint32_t> job = parse_count(stem.substr(0, stem.find('-')), UINT32_MAX);
    std::string pid_text;
    std::getline(std::ifstream(entry.path()), pid_text);
    fs::remove(entry.path(), gone);
    if (!job || *job == mine) continue;
    const Expected<uint32_t> pid = parse_count(pid_text, INT32_MAX);
    Expected<std::optional<JobState>> state = read_job_state(state_dir, *job);
    if (!pid || !state || !state->has_value()) continue;
    out.push_back(Asker{*job, dir + "/" + stem + std::string(kAnswer), static_cast<int>(*pid),
                        std::move((*state)->devices)});
  }
  return out;
}

// One walk, under busy.lock, for `devices` (of job `mine`; 0 and none: only for the others)
// and for every job whose ask is in `dir`, each of which gets its answer; answers the holders
// of `devices`.
std::vector<Holder> walk_for_asks(const HostDevices& host, const std::string& dir,
                                  const std::string& state_dir, uint32_t mine,
                                  const std::vector<Device>& devices) {
  std::vector<Asker> others = take_asks(dir, state_dir, mine);
  std::vector<Device> all = devices;
  for (const Asker& o : others) all.insert(all.end(), o.devices.begin(), o.devices.end());
  const std::vector<Holder> found = host.holders(all);
  for (const Asker& o : others) {
    // Not written: that epilog finds no answer and walks itself.
    (void)write_file_atomically(o.answer, answer_text(holders_of(found, o.devices, o.pid)), 0644,
                                Durability::kCrash);
  }
  return holders_of(found, devices, -1);
}

}  // namespace

Status note_step(const std::string& state_dir, uint32_t job_id) {
  const std::string dir = state_dir + "/busy";
  std::error_code ec;
  fs::create_directories(dir, ec);
  return write_file_atomically(file_of(dir, job_id, kSteps), "", 0644, Durability::kCrash);
}

void forget_steps(const std::string& state_dir, uint32_t job_id) {
  std::error_code ec;
  fs::remove(file_of(state_dir + "/busy", job_id, kSteps), ec);
}

Status ask_at_batch_end(const HostDevices& host, const std::string& state_dir, uint32_t job_id,
                        int64_t composition_id) {
  const std::string dir = state_dir + "/busy";
  std::error_code ec;
  if (composition_id <= 0 || fs::exists(file_of(dir, job_id, kSteps), ec)) return Status::Ok();
  fs::create_directories(dir, ec);
  if (Status s = write_file_atomically(batch_end_file(dir, job_id, composition_id, kAsk),
                                       std::to_string(getpid()) + "\n", 0644, Durability::kCrash);
      !s) {
    return s;
  }
  // No walk under way: this one walks now, while Slurm goes on to the epilog, for itself and
  // every ask there is. Otherwise the next walk answers it; it waits for none.
  if (Expected<HostLock> lock =
          HostLock::take(state_dir, std::chrono::milliseconds(0), kBusyLock)) {
    walk_for_asks(host, dir, state_dir, 0, {});
  }
  return Status::Ok();
}

std::vector<Holder> shared_holders(const HostDevices& host, const std::string& state_dir,
                                   uint32_t job_id, int64_t composition_id,
                                   const std::vector<Device>& devices,
                                   std::chrono::milliseconds lock_wait) {
  const std::string dir = state_dir + "/busy";
  const std::string ask = file_of(dir, job_id, kAsk);
  const std::string answer = file_of(dir, job_id, kAnswer);
  const std::string ended_ask = batch_end_file(dir, job_id, composition_id, kAsk);
  const std::string ended_answer = batch_end_file(dir, job_id, composition_id, kAnswer);
  std::error_code ec;
  fs::create_directories(dir, ec);
  // An answer from before this ask answers something else.
  fs::remove(answer, ec);
  const bool asked =
      write_file_atomically(ask, std::to_string(getpid()) + "\n", 0644, Durability::kCrash).ok();
  std::optional<Expected<HostLock>> lock;
  if (asked) lock.emplace(HostLock::take(state_dir, lock_wait, kBusyLock));
  if (!lock || !*lock) {
    fs::remove(ask, ec);
    return host.holders(devices);
  }
  // Under the lock no walk takes or answers this job's asks: what is left of them goes now.
  // The answer to the batch script's end counts only where no other step of the job ran on
  // the node (note_step), whose processes may have outlived that walk.
  const bool steps = fs::exists(file_of(dir, job_id, kSteps), ec);
  std::optional<std::vector<Holder>> mine;
  if (composition_id > 0 && !steps) mine = read_answer(ended_answer);
  if (!mine) mine = read_answer(answer);
  for (const std::string& f :
       {ask, answer, ended_ask, ended_answer, file_of(dir, job_id, kSteps)}) {
    fs::remove(f, ec);
  }
  // This epilog, which did not exist when a walk answered the batch script's end, is no
  // holder of its own devices either.
  if (mine) return holders_of(*mine, devices, getpid());
  return walk_for_asks(host, dir, state_dir, job_id, devices);
}

}  // namespace composer::slurm
