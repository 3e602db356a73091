#!/usr/bin/env bash
# The high-availability suite (ha_scenarios.sh) on a cluster of three nodes cn1..cn3, each in a
# network namespace of its own, with two composerd on one PostgreSQL of their own
# (E2E_COMPOSERDS=2), composed by PrologSlurmctld: run.sh with that cluster and that scenario
# file. Its ports and subnet differ from the other suites' defaults, so it may run beside them.
# Usage: BUILD_DIR=<build> tests/e2e/run_ha.sh [scenario...]. Exits 77 (skipped) when not root.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export E2E_NODES=3 E2E_COMPOSERDS=2 E2E_COMPOSE=controller
export E2E_PORT=${E2E_PORT:-28830} E2E_PORT2=${E2E_PORT2:-28831} E2E_PG_PORT=${E2E_PG_PORT:-28821}
export CTLD_PORT=${CTLD_PORT:-28817} SLURMD_PORT=${SLURMD_PORT:-28818}
export E2E_SUBNET=${E2E_SUBNET:-236}
export E2E_SCENARIOS=$HERE/ha_scenarios.sh E2E_DIR_TAG=-ha
exec "$HERE/run.sh" "$@"
