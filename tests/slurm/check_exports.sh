#!/usr/bin/env bash
# The plugins export exactly what Slurm looks up, nothing else (linker version scripts).
# Usage: check_exports.sh PLUGIN.so NAME...
set -euo pipefail
so=$1
shift
actual=$(nm -D --defined-only "$so" | awk '{print $3}' | sort)
expected=$(printf '%s\n' "$@" | sort)
if [[ $actual != "$expected" ]]; then
  echo "$so exports:"
  echo "$actual"
  echo "expected:"
  echo "$expected"
  exit 1
fi
