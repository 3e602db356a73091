#!/bin/sh
# The fake_redfish binary as shell tests use it: start, find the port, log in, attach a GPU,
# inject a fault through the control endpoint, memory blocks of the size asked for, stop.
set -eu
bin=$1
dir=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
"$bin" --port-file "$dir/port" --gpus-per-zone 3 --hosts 2 --memory-mib 512 >"$dir/log" 2>&1 &
pid=$!
i=0
while [ ! -s "$dir/port" ]; do
  i=$((i + 1)); [ $i -gt 100 ] && { echo "fake_redfish did not start:"; cat "$dir/log"; exit 1; }
  sleep 0.05
done
url=http://127.0.0.1:$(cat "$dir/port")
fail() { echo "FAIL: $*"; exit 1; }

code=$(curl -s -o /dev/null -w '%{http_code}' "$url/redfish/v1/Systems")
[ "$code" = 401 ] || fail "unauthenticated GET answered $code, expected 401"

auth=admin:composer-test-pw
body='{"ResourceBlock":{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/gpu-z1-02"}}'
code=$(curl -s -o /dev/null -w '%{http_code}' -u "$auth" -X POST -d "$body" \
  "$url/redfish/v1/Systems/node01/Actions/ComputerSystem.AddResourceBlock")
[ "$code" = 200 ] || fail "AddResourceBlock answered $code, expected 200"
curl -s "$url/control/state" | grep -q '"node01":\["compute-node01","gpu-z1-02"\]' ||
  fail "control/state does not show gpu-z1-02 on node01"

curl -s -X POST -d '{"kind":"status","method":"GET","path":"Systems","status":503,"message":"maintenance"}' \
  "$url/control/fault" >/dev/null
curl -s -u "$auth" "$url/redfish/v1/Systems" | grep -q maintenance || fail "injected 503 not served"
code=$(curl -s -o /dev/null -w '%{http_code}' -u "$auth" "$url/redfish/v1/Systems")
[ "$code" = 200 ] || fail "the fault outlived its count: $code"
curl -s -u "$auth" "$url/redfish/v1/CompositionService/ResourceBlocks/mem-z1-00/Memory/0" |
  grep -q '"CapacityMiB" *: *512[,}]' || fail "mem-z1-00 is not of the 512 MiB --memory-mib asked for"
echo "fake_redfish smoke test passed"
