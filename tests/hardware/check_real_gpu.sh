#!/usr/bin/env bash
# On a machine with NVIDIA GPUs: the plugin's identity code against the real sysfs,
# /proc/driver/nvidia and /dev, compared with what nvidia-smi reports where it is installed; and
# the GPU health check's NVML path (libnvidia-ml.so.1 through dlopen, as composer-node-check and
# the epilog load it, or the library $NVML_LIBRARY names): NVML must give each GPU the driver's
# UUID at its address, and each GPU's real health is printed.
# Usage: check_real_gpu.sh [PATH-TO-host_identity_check]  (default: build/tests/hardware/...)
# Exits 77 (skipped) on a host without NVIDIA GPUs.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
probe=${1:-$here/../../build/tests/hardware/host_identity_check}
[[ -x $probe ]] || { echo "check_real_gpu: $probe not built" >&2; exit 2; }
nvml=()
[[ -n ${NVML_LIBRARY:-} ]] && nvml=(--nvml "$NVML_LIBRARY")
if command -v nvidia-smi >/dev/null 2>&1; then
  smi=$(mktemp)
  trap 'rm -f "$smi"' EXIT
  nvidia-smi --query-gpu=pci.bus_id,uuid --format=csv,noheader >"$smi"
  echo "nvidia-smi:"; sed 's/^/  /' "$smi"
  exec "$probe" --nvidia-smi "$smi" "${nvml[@]}"
fi
echo "nvidia-smi not installed: checking against the driver's /proc files only"
exec "$probe" "${nvml[@]}"
