#!/usr/bin/env bash
# composer_bench on PostgreSQL with one synchronous standby: starts the cluster of cluster.sh
# (HA_DIR, HA_PORT as there), runs composer_bench --postgresql against its primary, and stops
# the cluster whatever happened. Results: docs/BENCHMARKS.md.
#   bench.sh PATH-TO-composer_bench [composer_bench arguments...]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[[ $# -ge 1 && -x $1 ]] || { echo "bench.sh: give the composer_bench binary" >&2; exit 2; }
bench=$1
shift
trap '"$here/cluster.sh" stop' EXIT
"$here/cluster.sh" start
eval "$("$here/cluster.sh" env)"
echo "bench.sh: synchronous standby $("$here/cluster.sh" sync); synchronous_commit $("$here/cluster.sh" psql -c 'SHOW synchronous_commit'), synchronous_standby_names $("$here/cluster.sh" psql -c 'SHOW synchronous_standby_names')"
"$bench" --postgresql "$HA_CONNINFO" "$@"
