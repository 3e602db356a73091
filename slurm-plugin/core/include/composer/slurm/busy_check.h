// The epilog's busy check, shared by the epilogs of a node that end together.
//
// Each epilog must know, before anything is detached, which processes on the host still hold
// its devices (HostDevices::holders), from a walk of every process that began after its job's
// processes were gone. A walk costs the kernel tens of milliseconds on a busy host, and the
// tasks of a job array end in waves: eight epilogs walking at once on two cores took half a
// second each, the largest part of what a composed task's end costs before the next one
// starts (docs/BENCHMARKS.md, "Short composed jobs"). So one walk answers every epilog that
// asked before it began:
//
//   <state_dir>/busy/<job>.ask      an epilog waiting for a walk; its pid
//   <state_dir>/busy/<job>.holders  what a walk found for it, one holder a line
//   <state_dir>/busy.lock           exclusive: one walk at a time, and its answers read under it
//
// An epilog writes its ask, then takes the lock. Under it, an answer for its job was written by
// a walk that took the ask away before it began, so after the epilog asked: the epilog takes
// it. Without one, the epilog walks itself, for its own devices and those of every job whose
// ask it finds (their state files name them), and leaves each of those its answer. A process
// that asks is never a holder of what it asks about (as holders() leaves out its caller).
//
// A job's processes are gone earlier than its epilog: Slurm runs the batch script's step's
// exit hook after it has killed and waited for every process of that step, and starts the
// epilog a few hundred milliseconds later (after telling the controller). So the batch
// script's end asks too (ask_at_batch_end), as <job>-<composition>.ask, and walks at once
// where no walk is under way, for itself and every ask there is; otherwise the next walk
// answers it (<job>-<composition>.holders). The epilog finds its answer waiting. That answer
// stands only while the batch script's step was the job's only one on the node: any other
// step (srun, the extern step of PrologFlags=Contain, an interactive step) may run processes
// after that walk, so each one's start leaves <job>.steps (note_step), before its processes
// start, and an epilog that finds it takes only an answer to its own ask. The composition's
// id in the name keeps an answer from an earlier run of a requeued job for what it is.
// tests/slurm/busy_check_test.cc pins each of these (BusyCheckTest).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "composer/model/model.h"
#include "composer/slurm/host_devices.h"

namespace composer::slurm {

// The processes holding `devices` (job `job_id`'s, composition `composition_id`'s, as its
// state file in `state_dir` names them), from a walk of the host's processes that began after
// this call, or after the batch script's end asked (ask_at_batch_end) where no other step of
// the job ran on the node. Waits up to `lock_wait` for a walk another epilog is making; past
// it, walks alone.
std::vector<Holder> shared_holders(const HostDevices& host, const std::string& state_dir,
                                   uint32_t job_id, int64_t composition_id,
                                   const std::vector<Device>& devices,
                                   std::chrono::milliseconds lock_wait);

// A step of job `job_id` other than its batch script starts on the node: left as
// <job>.steps, before any of its processes start.
Status note_step(const std::string& state_dir, uint32_t job_id);
// That mark gone, where the job's epilog makes no busy check (shared_holders removes it).
void forget_steps(const std::string& state_dir, uint32_t job_id);

// The batch script's step of job `job_id` (composition `composition_id`) has ended, every
// process of it gone: asks, and walks on `host` unless a walk is under way; nothing where
// another step of the job ran on the node (note_step) or the id is unknown (0): the epilog
// then asks alone.
Status ask_at_batch_end(const HostDevices& host, const std::string& state_dir, uint32_t job_id,
                        int64_t composition_id);

}  // namespace composer::slurm
