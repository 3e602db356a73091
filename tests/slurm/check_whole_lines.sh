#!/usr/bin/env bash
# Fails when composer-slurmctld writes a log line in more than one write(): slurmctld runs it
# for many jobs at once with one log, and a line written apart from its newline interleaves
# with the others'. Runs it where it logs a line at once (no job in its environment) under
# strace and checks that every write to stderr ends with the newline. Exits 77 (skipped)
# without strace or where ptrace is not allowed.
#
# Usage: check_whole_lines.sh COMPOSER_SLURMCTLD
set -euo pipefail

program=$1
command -v strace >/dev/null || { echo "check_whole_lines: no strace; skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf 'optional spank_composer.so server=http://127.0.0.1:9\n' >"$dir/plugstack.conf"
strace -f -qq -s 4096 -e trace=write -o "$dir/trace" \
  env -i COMPOSER_PLUGSTACK="$dir/plugstack.conf" SLURM_SCRIPT_CONTEXT=prolog_slurmctld \
  "$program" 2>"$dir/stderr" >/dev/null || true
if [[ ! -s $dir/trace ]] || ! grep -q 'execve\|write' "$dir/trace"; then
  echo "check_whole_lines: strace traced nothing (ptrace not allowed?); skipped"
  exit 77
fi
writes=$(grep -E '^([0-9]+ +)?write\(2, ' "$dir/trace" || true)
if [[ -z $writes ]]; then
  echo "check_whole_lines: composer-slurmctld wrote nothing to stderr; its output: $(cat "$dir/stderr")" >&2
  exit 1
fi
if grep -vqE '\\n", [0-9]+\) += [0-9]+$' <<<"$writes"; then
  echo "check_whole_lines: a write to stderr without its line's end:" >&2
  echo "$writes" >&2
  exit 1
fi
echo "check_whole_lines: $(wc -l <<<"$writes") line(s), each in one write"
