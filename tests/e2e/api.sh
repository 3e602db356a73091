#!/usr/bin/env bash
# composerd's API for the e2e scenarios (sourced by scenarios.sh): api GETs one answer with a
# munge credential, api_all reads every page of a list. Needs E2E_URL and MUNGE_SOCKET.
# check_api_all.sh holds api_all to a ledger larger than one argument may be.

# GET on composerd's API with a munge credential for "GET <path>".
api() {
  local path=$1 query=${2:-}
  curl -fsS -H "Authorization: Munge $(munge -S "$MUNGE_SOCKET" -s "GET $path")" \
    "$E2E_URL$path${query:+?$query}"
}
# Every page of a list (GET /v1/devices, /v1/compositions, /v1/events: the last path segment
# names its key) as one answer {"KEY": [...]}; each page's next_cursor asks for the next. The
# pages gather in a file, never in an argument: a big ledger is larger than one argument may be
# (128 KiB, "Argument list too long").
api_all() {
  local path=$1 query=${2:-} key=${1##*/} cursor="" page pages status=0
  pages=$(mktemp) || return 1
  while :; do
    page=$(api "$path" "$query${cursor:+${query:+&}cursor=$cursor}") || { status=1; break; }
    jq -c --arg k "$key" '.[$k]' <<<"$page" >>"$pages" || { status=1; break; }
    cursor=$(jq -r '.next_cursor // empty' <<<"$page")
    [[ -n $cursor ]] || break
  done
  if ((status == 0)); then
    jq -c -s --arg k "$key" '{($k): (add // [])}' "$pages" || status=1
  fi
  rm -f "$pages"
  return "$status"
}
