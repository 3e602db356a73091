#!/usr/bin/env python3
"""Writes a Redfish mockup (DMTF's layout: DIR/<path>/index.json for /redfish/v1/<path>) as
one input of the answer_server.h format: records "PATH\\nBODY" separated by lines "%%".
With --keep FILE, only the paths listed there (one per line, as COMPOSER_FUZZ_PATHS records
them) are written, so a seed holds what the driver reads and nothing else.
Usage: seed_from_mockup.py MOCKUP_DIR [--keep PATHS_FILE] > seed"""
import json
import os
import sys


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    root = args[0]
    keep = None
    if len(args) == 3 and args[1] == "--keep":
        with open(args[2]) as f:
            keep = {line.strip() for line in f if line.strip()}
    records = []
    for here, _, files in sorted(os.walk(root)):
        if "index.json" not in files:
            continue
        rel = os.path.relpath(here, root)
        path = "/redfish/v1" if rel == "." else "/redfish/v1/" + rel
        if keep is not None and path not in keep:
            continue
        with open(os.path.join(here, "index.json")) as f:
            body = json.dumps(json.load(f), separators=(",", ":"))
        records.append(path + "\n" + body)
    sys.stdout.write("\n%%\n".join(records))


main()
