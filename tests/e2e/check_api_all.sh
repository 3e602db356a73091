#!/usr/bin/env bash
# Holds api.sh's api_all to a ledger larger than one argument may be (128 KiB): three pages of
# 1,000 events, each page larger than that, come back as one list in order. No cluster needed:
# api answers from generated pages.
set -euo pipefail
command -v jq >/dev/null || { echo "check_api_all: no jq; skipped"; exit 77; }
# shellcheck source-path=SCRIPTDIR source=api.sh
source "$(dirname "${BASH_SOURCE[0]}")/api.sh"

# Page N (cursor c1, c2 or none) of /v1/events: 1,000 events with a 150-byte detail each.
api() {
  local path=$1 query=${2:-} page=0
  [[ $path == /v1/events ]] || return 1
  [[ $query == *cursor=c1* ]] && page=1
  [[ $query == *cursor=c2* ]] && page=2
  jq -cn --argjson p "$page" '{
    events: [range(1000) | {id: ($p * 1000 + .), kind: "refused", detail: ("x" * 150)}],
    next_cursor: (if $p < 2 then "c\($p + 1)" else "" end)}'
}

out=$(api_all /v1/events "job=7")
n=$(jq '.events | length' <<<"$out")
ordered=$(jq '[.events[].id] == [range(3000)]' <<<"$out")
if [[ $n != 3000 || $ordered != true ]]; then
  echo "check_api_all: api_all gave $n events (in order: $ordered), expected 3000 in order" >&2
  exit 1
fi
echo "check_api_all: $n events over 3 pages of $(api /v1/events | wc -c) bytes each"
