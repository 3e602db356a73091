#!/usr/bin/env bash
# The HA suite: starts the cluster of tests/ha/cluster.sh (HA_DIR, HA_PORT, HA_TTL as there),
# runs ha_test against it, and stops the cluster whatever happened.
#   run.sh PATH-TO-ha_test [gtest arguments...]
# COMPOSER_HA_FAULTS (primary, composerd-kill, composerd-freeze, separated by commas, or all;
# default primary; contrib/test.sh --full sets all), COMPOSER_HA_ROUNDS (rounds of each; default
# 1, --full 20) and COMPOSER_HA_CLIENTS (12) size the campaign (ha_failover_test.cc). Must run
# as root (the cluster runs as postgres).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[[ $# -ge 1 && -x $1 ]] || { echo "run.sh: give the ha_test binary" >&2; exit 2; }
if [[ $(id -u) != 0 ]]; then
  echo "run.sh: the HA suite runs as root (it starts etcd and Patroni as postgres); skipped" >&2
  exit 77
fi
test=$1
shift
trap '"$here/cluster.sh" stop' EXIT
"$here/cluster.sh" start
eval "$("$here/cluster.sh" env)"
export HA_CONNINFO HA_CLUSTER="$here/cluster.sh" HA_TTL=${HA_TTL:-10}
"$test" "$@"
