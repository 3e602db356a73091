#!/usr/bin/python3
"""Reads a /metrics scrape of composerd with an independent parser (prometheus_client).

  check_scrape.py families SCRAPE             every family has samples; prints "name type n"
  check_scrape.py queries SCRAPE FILE...      every metric and label a Grafana dashboard (.json)
                                              or a Prometheus rule file (.yml) uses is in SCRAPE

Exit 0 when all is well, 1 with one line per fault, 77 when prometheus_client is not installed.
"""
import json
import re
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("python3-prometheus-client is not installed (contrib/install-deps.sh installs it)")
    sys.exit(77)

# PromQL words that look like metric names but are not.
KEYWORDS = {
    "sum", "min", "max", "avg", "count", "by", "without", "rate", "irate", "increase",
    "histogram_quantile", "on", "ignoring", "group_left", "group_right", "and", "or",
    "unless", "bool", "time", "vector", "scalar", "abs", "clamp_min", "clamp_max", "delta",
    "deriv", "changes", "resets", "max_over_time", "min_over_time", "avg_over_time", "offset",
    "absent", "absent_over_time", "label_values", "topk", "bottomk", "le", "inf", "nan",
}


def families(text):
    """name -> (type, [(sample name, labels)])"""
    out = {}
    for fam in text_string_to_metric_families(text):
        out[fam.name] = (fam.type, [(s.name, s.labels) for s in fam.samples])
    return out


def series_labels(fams):
    """sample name -> set of label names seen on it"""
    out = {}
    for _, samples in fams.values():
        for name, labels in samples:
            out.setdefault(name, set()).update(labels)
    return out


def expressions(path):
    if path.endswith(".json"):
        found = []

        def walk(node):
            if isinstance(node, dict):
                for k, v in node.items():
                    if k == "expr" and isinstance(v, str):
                        found.append(v)
                    else:
                        walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(json.load(open(path)))
        return found
    import yaml  # python3-yaml

    doc = yaml.safe_load(open(path))
    return [r["expr"] for g in doc.get("groups", []) for r in g.get("rules", [])]


def check_query(expr, known):
    faults = []
    # Template variables of the dashboard and string literals carry no names.
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr.replace("$__rate_interval", "5m"))
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors
    for m in re.finditer(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{([^}]*)\})?", text):
        name, selector = m.group(1), m.group(3)
        if name in KEYWORDS or not re.match(r"(composer|process)_", name):
            continue
        if name not in known:
            faults.append(f"{expr}: metric {name} is not in the scrape")
            continue
        for matcher in re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", selector or ""):
            if matcher not in known[name]:
                faults.append(f"{expr}: {name} has no label {matcher}")
    # Labels kept by an aggregation must be on some metric of the query.
    used = [n for n in re.findall(r"\b((?:composer|process)_[a-zA-Z0-9_]*)", text) if n in known]
    for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", text):
        for label in [g.strip() for g in group.split(",") if g.strip()]:
            if not any(label in known[n] for n in used):
                faults.append(f"{expr}: no metric of the query has label {label}")
    return faults


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("families", "queries"):
        print(__doc__)
        return 2
    fams = families(open(sys.argv[2]).read())
    faults = []
    if sys.argv[1] == "families":
        for name, (kind, samples) in fams.items():
            print(name, kind, len(samples))
            if kind == "unknown":
                faults.append(f"{name}: no TYPE line next to its samples")
            if not samples:
                faults.append(f"{name}: a family without samples")
    else:
        known = series_labels(fams)
        count = 0
        for path in sys.argv[3:]:
            for expr in expressions(path):
                count += 1
                faults += [f"{path}: {f}" for f in check_query(expr, known)]
        print(f"{count} queries checked")
        if count == 0:
            faults.append("no query found")
    for f in faults:
        print(f)
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
