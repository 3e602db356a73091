#!/usr/bin/env python3
"""Where the tasks of one job array spent their time, from slurmctld's log (SlurmctldDebug
verbose: each task's allocation, its PrologSlurmctld's end, its end), composerd's log (each
composition made and released) and slurmd's (each node epilog's busy check and release, as its
"released (busy check N ms, release M ms)" line says). Prints the median and the mean of each
phase, and how many tasks Slurm started from its main scheduler and how many from its backfill
pass.
Used by array_bench.sh; docs/BENCHMARKS.md, "Short composed jobs", says what the phases are."""
import argparse
import calendar
import re
import statistics
import time

TASK = r"JobId=(\d+)_(\d+)\((\d+)\)"


def local_seconds(stamp):  # slurmctld: "2026-12-07T00:52:11.403", the machine's local time
    whole, _, frac = stamp.partition(".")
    return time.mktime(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


def utc_seconds(stamp):  # composerd: "2026-12-07T00:52:11.488Z"
    whole, _, frac = stamp.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--job", required=True, help="the array's job id")
    parser.add_argument("--width", type=int, required=True, help="tasks running at once")
    parser.add_argument("--slurmctld", required=True, help="slurmctld's log of the run")
    parser.add_argument("--composerd", help="composerd's log (composed arrays)")
    parser.add_argument("--slurmd", help="slurmd's log (composed arrays: the node epilogs)")
    args = parser.parse_args()

    alloc, by_backfill, configured, done, composed, released = {}, set(), {}, {}, {}, {}
    line_re = re.compile(r"^\[([0-9T:.-]+)\] (.*)$")
    with open(args.slurmctld, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = line_re.match(line)
            if not m:
                continue
            at, text = local_seconds(m.group(1)), m.group(2)
            t = re.search(TASK, text)
            if not t or t.group(1) != args.job:
                continue
            task = int(t.group(3))
            if text.startswith("sched: Allocate ") or "_start_job: Started " in text:
                alloc[task] = at
                if "backfill" in text:
                    by_backfill.add(task)
            elif "prolog_running_decr: Configuration for" in text:
                configured[task] = at
            elif text.startswith("_job_complete: ") and text.endswith(" done"):
                done[task] = at
    if args.composerd:
        event_re = re.compile(r"^ts=(\S+) level=\w+ msg=(composed|released) job=(\d+) ")
        with open(args.composerd, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = event_re.match(line)
                if m and int(m.group(3)) in alloc:
                    (composed if m.group(2) == "composed" else released)[int(m.group(3))] = (
                        utc_seconds(m.group(1)))

    # The node epilog writes its line once the release is done: its busy check began at the
    # line's time less the two.
    epilog = {}
    if args.slurmd:
        epilog_re = re.compile(r"^\[([0-9T:.-]+)\] composer: epilog: job (\d+) on node \S+: "
                               r"released \(busy check (\d+) ms, release (\d+) ms\)")
        with open(args.slurmd, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = epilog_re.match(line)
                if m and int(m.group(2)) in alloc:
                    check, release = int(m.group(3)) / 1000, int(m.group(4)) / 1000
                    epilog[int(m.group(2))] = (local_seconds(m.group(1)) - check - release,
                                               check, release)

    tasks = sorted(alloc, key=lambda j: alloc[j])
    ended = sorted(done, key=lambda j: done[j])
    phases = []

    def phase(name, values):
        if values:
            ms = [v * 1000 for v in values]
            phases.append((name, statistics.median(ms), statistics.mean(ms), len(ms)))

    phase("allocation -> composed (PrologSlurmctld: start, compose call, composerd)",
          [composed[j] - alloc[j] for j in tasks if j in composed])
    phase("composed -> PrologSlurmctld's end noted by slurmctld",
          [configured[j] - composed[j] for j in tasks if j in composed and j in configured])
    phase("allocation -> PrologSlurmctld's end noted by slurmctld",
          [configured[j] - alloc[j] for j in tasks if j in configured])
    phase("PrologSlurmctld's end -> job end (launch and the 1 s task)",
          [done[j] - configured[j] for j in tasks if j in configured and j in done])
    phase("job end -> the node epilog's busy check begins (Slurm starts the epilog)",
          [epilog[j][0] - done[j] for j in tasks if j in epilog and j in done])
    phase("node epilog: busy check (the walk of the node's processes)",
          [epilog[j][1] for j in tasks if j in epilog])
    phase("node epilog: release call", [epilog[j][2] for j in tasks if j in epilog])
    phase("job end -> released",
          [released[j] - done[j] for j in tasks if j in released and j in done])
    # The k-th task to start after the first `width` takes the place of the k-th to end.
    gaps, after_release = [], []
    for k, j in enumerate(tasks[args.width:]):
        if k < len(ended):
            gaps.append(alloc[j] - done[ended[k]])
            if ended[k] in released:
                after_release.append(alloc[j] - released[ended[k]])
    phase("job end -> the next task's allocation (its place taken)", gaps)
    phase("release -> the next task's allocation", after_release)
    print(f"phases of array {args.job} ({len(tasks)} tasks), ms: median / mean (count)")
    for name, median, mean, count in phases:
        print(f"  {name}: {median:.0f} / {mean:.0f} ({count})")
    print(f"  tasks started by the main scheduler: {len(tasks) - len(by_backfill)}, "
          f"by the backfill pass: {len(by_backfill)}")


if __name__ == "__main__":
    main()
