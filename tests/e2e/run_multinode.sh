#!/usr/bin/env bash
# The multi-node suite (multinode_scenarios.sh) on a cluster of three nodes cn1..cn3, each in a
# network namespace of its own, with accounting (slurmdbd on a MariaDB of its own): run.sh
# with that cluster and that scenario file. Its ports and subnet differ from the one-node
# suites' defaults, so it may run beside them.
# Usage: BUILD_DIR=<build> tests/e2e/run_multinode.sh [scenario...]. About four minutes.
# Exits 77 (skipped) when not root.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export E2E_NODES=3 E2E_ACCOUNTING=yes
export E2E_PORT=${E2E_PORT:-26830} CTLD_PORT=${CTLD_PORT:-26817} SLURMD_PORT=${SLURMD_PORT:-26818}
export E2E_DBD_PORT=${E2E_DBD_PORT:-26819} E2E_DB_PORT=${E2E_DB_PORT:-26820}
export E2E_SUBNET=${E2E_SUBNET:-231}
export E2E_SCENARIOS=$HERE/multinode_scenarios.sh E2E_DIR_TAG=-multinode
exec "$HERE/run.sh" "$@"
