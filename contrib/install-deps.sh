#!/usr/bin/env bash
# Installs the Debian packages slurm-composer builds, tests and demos with. Idempotent: when
# everything is present it changes nothing and needs no network.
# prometheus brings promtool (alert rule tests), python3-prometheus-client and python3-yaml the
# independent /metrics parser of tests/integration/check_scrape.py; chromium and python3-pil
# render every chart into a PNG that must not be blank (tests/accounting/check_chart_render.sh);
# clang-14 and libclang-rt-14-dev build the fuzz targets with libFuzzer (tests/fuzz); libpq-dev
# and postgresql the PostgreSQL store and its tests against a server they start themselves;
# etcd-server and patroni the HA suite's replicated PostgreSQL (tests/ha).
# mmdebstrap makes the release matrix's chroots (tests/releases) and the kvm level's guest image;
# qemu-system-x86 runs its guests (tests/kvm).
# Usage: contrib/install-deps.sh [--list]   (--list prints the packages and installs nothing)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ccache debhelper systemd
  clang-format clang-tidy clang-14 libclang-rt-14-dev
  libsqlite3-dev sqlite3 libpq-dev postgresql etcd-server patroni libjsoncpp-dev libcurl4-openssl-dev libssl-dev libboost-dev libcpp-httplib-dev libcli11-dev
  libgtest-dev libgmock-dev
  munge libmunge-dev libsystemd-dev
  slurmctld slurmd slurm-client libslurm-dev
  curl procps iproute2 tzdata bc jq openssl hostname libxml2-dev
  prometheus python3-prometheus-client python3-yaml
  chromium python3-pil
  mmdebstrap qemu-system-x86
)

if [[ ${1:-} == --list ]]; then
  echo "${packages[*]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The Debian slurm packages start nothing by themselves here (no systemd), which is what the
# throw-away test cluster wants.
exit 0
