#!/usr/bin/env python3
"""A second, independent model of `composerctl simulate` for GPU-only traces.

Written from docs/CAPACITY.md ("How the simulation decides", "Definitions"), not from the
engine: clusters are counts (free GPUs per server or fabric zone, attach slots per host), not
devices, and the scheduler is a plain loop over a sorted queue. It covers what the comparison
needs: the normalised CSV trace without memory, FixedNode lines, and Fabric=sim pools of
NodeName and GPU DeviceGroup lines, without a policy.

    reference_model.py --trace TRACE --cluster CLUSTER   prints one JSON object

Standard library only.
"""

import argparse
import csv
import heapq
import json
import re
import sys

MAX_JOB_TEST = 1000  # jobs examined per pass, like Slurm's bf_max_job_test
BF_INTERVAL = 30  # s: a reservation is recomputed after ends at most this often


def hostlist(text):
    """gpu[01-04] -> gpu01 ... gpu04; a plain name stays itself."""
    m = re.fullmatch(r"([^\[]*)\[([^\]]+)\](.*)", text)
    if not m:
        return [text]
    prefix, ranges, suffix = m.groups()
    names = []
    for part in ranges.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            for n in range(int(lo), int(hi) + 1):
                names.append(f"{prefix}{n:0{len(lo)}d}{suffix}")
        else:
            names.append(prefix + part + suffix)
    return names


class Cluster:
    """Hosts in file order, each with its zones (nearest first) and GPU attach slots."""

    def __init__(self, path):
        self.zone_index = {}
        self.zone_gpus = []  # installed GPUs per zone
        self.hosts = []  # (name, [zone], gpu slots)
        for raw in open(path, encoding="utf-8"):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            pairs = dict(p.split("=", 1) for p in line.split())
            key = line.split("=", 1)[0].lower()
            if key == "fixednode":
                gpus = int(pairs.get("Gpus", "0"))
                for name in hostlist(pairs["FixedNode"]):
                    z = self.zone("fixed:" + name)
                    self.zone_gpus[z] += gpus
                    self.hosts.append((name, [z], gpus))
            elif key == "nodename":
                zones = [self.zone(z) for z in pairs.get("Zones", "").split(",") if z]
                for name in hostlist(pairs["NodeName"]):
                    self.hosts.append((name, zones, int(pairs.get("GpuSlots", "0"))))
            elif key == "devicegroup" and pairs.get("Type", "").lower() == "gpu":
                self.zone_gpus[self.zone(pairs["Zone"])] += int(pairs.get("Count", "1"))
        self.gpus = sum(self.zone_gpus)
        # The most GPUs one node can take: its slots, and the GPUs its zones hold.
        self.max_node_gpus = max(
            min(slots, sum(self.zone_gpus[z] for z in zones)) for _, zones, slots in self.hosts
        )

    def zone(self, name):
        if name not in self.zone_index:
            self.zone_index[name] = len(self.zone_gpus)
            self.zone_gpus.append(0)
        return self.zone_index[name]


class Job:
    def __init__(self, index, submit, duration, gpus, max_node_gpus):
        self.index = index
        self.submit = submit
        self.duration = duration
        self.limit = duration  # the trace has no time limits: a perfect estimate
        self.gpus = gpus
        nodes = max(1, -(-gpus // max_node_gpus))
        # GPUs split evenly over the nodes, the first ones taking the remainder.
        self.parts = tuple(gpus // nodes + (1 if n < gpus % nodes else 0) for n in range(nodes))
        self.start = None
        self.placed = None  # [(host, {zone: gpus})]


def read_trace(path, max_node_gpus):
    jobs = []
    with open(path, encoding="utf-8") as f:
        for n, row in enumerate(csv.DictReader(f)):
            if not row["duration_s"]:
                continue
            gpus = -(-float(row["gpus"] or 0) // 1)
            jobs.append(Job(n, int(row["submit_time_s"]), int(row["duration_s"]), int(gpus),
                            max_node_gpus))
    jobs.sort(key=lambda j: j.submit)  # stable: file order on equal submits
    return jobs


class Model:
    def __init__(self, cluster, jobs):
        self.c = cluster
        self.jobs = jobs
        self.free = list(cluster.zone_gpus)  # free GPUs per zone now
        self.slots_used = [0] * len(cluster.hosts)
        self.running = {}  # job index -> job
        self.reservation = None  # (top job, shadow, {zone: gpus}, {host: spare slots})
        self.reserved_at = None
        self.ended_since = False

    # ---- placement: first fit on distinct hosts in file order ----

    def place(self, job, free, slots_used, cap=None, spare=None):
        """Where the job's parts would go, or None. `cap` bounds what may be taken per zone,
        `spare` the slots per host (a job running past the shadow time)."""
        free = list(free)
        cap = dict(cap) if cap is not None else None
        slots_used = list(slots_used)
        used_hosts = set()
        out = []
        for part in job.parts:
            for h, (_, zones, slots) in enumerate(self.c.hosts):
                if h in used_hosts or slots_used[h] + part > slots:
                    continue
                if spare is not None and h in spare and part > spare[h]:
                    continue

                def avail(z):
                    return free[z] if cap is None else min(free[z], cap.get(z, free[z]))

                if sum(avail(z) for z in zones) < part:
                    continue
                take = {}
                whole = [z for z in zones if avail(z) >= part]
                if whole:
                    take[whole[0]] = part
                else:
                    left = part
                    for z in zones:
                        n = min(left, avail(z))
                        if n:
                            take[z] = n
                            left -= n
                for z, n in take.items():
                    free[z] -= n
                    if cap is not None and z in cap:
                        cap[z] -= n
                slots_used[h] += part
                used_hosts.add(h)
                out.append((h, take))
                break
            else:
                return None
        return out

    def take(self, placed, sign):
        for h, take in placed:
            for z, n in take.items():
                self.free[z] -= sign * n
            self.slots_used[h] += sign * sum(take.values())

    # ---- EASY backfill ----

    def reserve(self, top, t):
        """Release running jobs in order of their expected end until the top job fits: the
        shadow time and the places it would take then."""
        free = list(self.free)
        slots_used = list(self.slots_used)
        at = t
        where = self.place(top, free, slots_used)
        if where is None:
            for j in sorted(self.running.values(), key=lambda j: (j.start + j.limit, j.index)):
                for h, take in j.placed:
                    for z, n in take.items():
                        free[z] += n
                    slots_used[h] -= sum(take.values())
                at = max(t, j.start + j.limit)
                if top.gpus > sum(free):
                    continue
                where = self.place(top, free, slots_used)
                if where is not None:
                    break
        self.reserved_at = t
        self.ended_since = False
        if where is None:
            self.reservation = (top.index, None, {}, {})
            return
        need = {}
        spare = {}
        for h, take in where:
            for z, n in take.items():
                need[z] = need.get(z, 0) + n
            spare[h] = self.c.hosts[h][2] - slots_used[h] - sum(take.values())
        self.reservation = (top.index, at, need, spare)

    def past_shadow_cap(self):
        """What a job running past the shadow time may take per zone: what is free now, less
        what the reserved job needs there and will not find freed by its shadow time."""
        _, shadow, need, _ = self.reservation
        freed = {}
        for j in self.running.values():
            if j.start + j.limit <= shadow:
                for _, take in j.placed:
                    for z, n in take.items():
                        freed[z] = freed.get(z, 0) + n
        return {z: max(0, self.free[z] - max(0, n - freed.get(z, 0))) for z, n in need.items()}

    # ---- the run ----

    def start(self, job, placed, t):
        job.start = t
        job.placed = placed
        self.take(placed, 1)
        self.running[job.index] = job
        heapq.heappush(self.ends, (t + job.duration, job.index))

    def run(self):
        self.ends = []
        queue = []
        stranded_s = 0
        strand = False
        backfilled = 0
        nxt = 0
        now = self.jobs[0].submit if self.jobs else 0
        first = now
        last_end = now
        by_index = {j.index: j for j in self.jobs}
        while nxt < len(self.jobs) or self.ends:
            t = min(self.jobs[nxt].submit if nxt < len(self.jobs) else float("inf"),
                    self.ends[0][0] if self.ends else float("inf"))
            if strand:
                stranded_s += sum(self.free) * (t - now)
            now = t
            while self.ends and self.ends[0][0] == t:
                _, i = heapq.heappop(self.ends)
                job = self.running.pop(i)
                self.take(job.placed, -1)
                self.ended_since = True
                last_end = t
            while nxt < len(self.jobs) and self.jobs[nxt].submit == t:
                queue.append(self.jobs[nxt])
                nxt += 1
            # One pass over the queue in submit order.
            failed = set()
            failed_past = set()
            blocked = False
            waiting = []
            for q, job in enumerate(queue):
                if q >= MAX_JOB_TEST:
                    waiting.extend(queue[q:])
                    break
                started = False
                if blocked:
                    shadow = self.reservation[1]
                    in_time = shadow is None or t + job.limit <= shadow
                    if job.parts not in failed and (in_time or job.parts not in failed_past):
                        if in_time:
                            placed = self.place(job, self.free, self.slots_used)
                        else:
                            placed = self.place(job, self.free, self.slots_used,
                                                self.past_shadow_cap(), self.reservation[3])
                        if placed is not None:
                            self.start(job, placed, t)
                            backfilled += 1
                            started = True
                        else:
                            (failed if in_time else failed_past).add(job.parts)
                else:
                    placed = None
                    if job.parts not in failed:
                        placed = self.place(job, self.free, self.slots_used)
                    if placed is not None:
                        self.start(job, placed, t)
                        started = True
                    else:
                        failed.add(job.parts)
                        blocked = True
                        r = self.reservation
                        if (r is None or r[0] != job.index or (r[1] is not None and r[1] <= t)
                                or (self.ended_since and t - self.reserved_at >= BF_INTERVAL)):
                            self.reserve(job, t)
                if not started:
                    waiting.append(job)
            queue = waiting
            # Stranded: a waiting job (of the first MAX_JOB_TEST) fits the free GPUs in total
            # but finds no place.
            strand = False
            for job in queue[:MAX_JOB_TEST]:
                if job.gpus == 0 or job.gpus > sum(self.free):
                    continue
                if job.parts in failed or self.place(job, self.free, self.slots_used) is None:
                    failed.add(job.parts)
                    strand = sum(self.free) > 0
                    break
        waits = [j.start - j.submit for j in self.jobs if j.start is not None]
        del by_index
        return {
            "jobs": len(self.jobs),
            "started": len(waits),
            "stranded_gpu_hours": stranded_s / 3600.0,
            "wait_mean_s": sum(waits) / len(waits) if waits else 0.0,
            "wait_max_s": max(waits) if waits else 0,
            "makespan_s": last_end - first,
            "backfilled": backfilled,
        }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", required=True)
    parser.add_argument("--cluster", required=True)
    args = parser.parse_args()
    cluster = Cluster(args.cluster)
    jobs = read_trace(args.trace, cluster.max_node_gpus)
    json.dump(Model(cluster, jobs).run(), sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
