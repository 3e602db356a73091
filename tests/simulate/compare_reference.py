#!/usr/bin/env python3
"""The Philly trace on the fixed and the composable cluster of contrib/simulate, through
`composerctl simulate` and through reference_model.py (a second model written from
docs/CAPACITY.md): they must agree within 5% on stranded GPU-hours and the mean wait.

    compare_reference.py --composerctl PATH --source SOURCE_DIR
"""

import argparse
import json
import os
import subprocess
import sys

TOLERANCE = 0.05
FIGURES = [("stranded_gpu_hours", "stranded_gpu_hours"), ("wait_mean_s", "wait")]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--composerctl", required=True)
    parser.add_argument("--source", required=True)
    args = parser.parse_args()
    trace = os.path.join(args.source, "contrib/simulate/traces/philly_subset_training.csv")
    model = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference_model.py")
    bad = 0
    for name in ("fixed.conf", "composable.conf"):
        cluster = os.path.join(args.source, "contrib/simulate", name)
        ours = json.loads(subprocess.run(
            [args.composerctl, "simulate", "--trace", trace, "--cluster", cluster, "--json"],
            check=True, capture_output=True, text=True).stdout)["scenarios"][0]
        ref = json.loads(subprocess.run(
            [sys.executable, model, "--trace", trace, "--cluster", cluster],
            check=True, capture_output=True, text=True).stdout)
        for ref_key, our_key in FIGURES:
            mine = ours[our_key]["mean_s"] if our_key == "wait" else ours[our_key]
            theirs = ref[ref_key]
            off = abs(mine - theirs) / max(abs(theirs), 1e-9)
            verdict = "ok" if off <= TOLERANCE else "DIFFERS"
            print(f"{name}: {ref_key}: composerctl {mine:.1f}, reference {theirs:.1f} "
                  f"({off * 100:.2f}% apart) {verdict}")
            bad += off > TOLERANCE
        if ours["jobs"] != ref["jobs"] or ours["started"] != ref["started"]:
            print(f"{name}: jobs {ours['jobs']}/{ours['started']} against "
                  f"{ref['jobs']}/{ref['started']} DIFFERS")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
