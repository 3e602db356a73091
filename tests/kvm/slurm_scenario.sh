#!/usr/bin/env bash
# The kvm level's Slurm scenario: the nodes of a tests/e2e cluster are QEMU guests with their
# own kernels (cluster.sh's E2E_GUEST=yes), whose slurmd runs the real plugin. A batch job
# submitted with --compose-nvme=1 lands on guest1; composer-slurmctld composes the drive, the
# fake Redfish service hot-plugs it over QMP, the plugin's prolog in slurmd finds it by its
# serial in the guest's kernel, the job's task sees COMPOSER_NVME name that drive's namespace
# and reads it, and after the job the epilog and composer-slurmctld release it: device_del, and
# the drive is gone from the guest, nothing attached, no state file left.
# Then a process outside the jobs keeps a job's drive open past the job: the epilog's busy
# check (the guest's /proc) holds the composition until the next job's prolog finds the
# process gone and releases it.
# Then a job holds its drive open and reads it; another job on the node is refused that
# drive (EPERM: the plugin's cgroup v2 device program, in the guest's kernel). Then a surprise
# removal: the fabric pulls the drive by itself (fake_redfish's /control/unplug: device_del,
# the fabric no longer lists it). The job's reads come back short, composerd's reconciler
# marks the drive failed (the fabric lost the attachment) and tells the job on its standard
# error (notify), the job ends, its epilog's line says the drive was lost and released, and
# its release leaves nothing composed, on the fabric or in the guest's state.
# With E2E_NODES=N (up to 4) the cluster has N guests, guest1..guestN; the jobs above run on
# guest1, then one job on each guest at once gets a drive hot-plugged into its own guest.
# With E2E_GUEST_CXL=MiB (cluster.sh) the guests have CXL memory, and a job on guest1 first
# composes a block of it: a region and a NUMA node in the guest's kernel, the node in the job's
# cpuset, a buffer of the job's on it, and the node offline and the region gone after the job.
#
#   slurm_scenario.sh
#
# Environment: BUILD_DIR (default build), E2E_DIR (default /tmp/composer-e2e-kvm; wiped at
# start; named composer-e2e*), E2E_NODES (default 1), and cluster.sh's ports E2E_PORT,
# CTLD_PORT and SLURMD_PORT (guest I's slurmd on SLURMD_PORT+I-1; the ctest entries give each
# scenario its own). Root; exits 77 (skipped) without QEMU, mmdebstrap or the guest image
# (tests/kvm/guest.sh image), or not root.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD_DIR=$(realpath -m "${BUILD_DIR:-$SRC/build}")
E2E_DIR=$(realpath -m "${E2E_DIR:-/tmp/composer-e2e-kvm}")
export BUILD_DIR E2E_DIR E2E_GUEST=yes FABRIC=redfish
T0=$SECONDS

log() { echo "kvm: [$((SECONDS - T0)) s] $*" >&2; }
die() { log "FAIL: $*"; exit 1; }

[[ $(id -u) == 0 ]] || { log "skipped: must run as root (slurmd, QEMU's guest image)"; exit 77; }
missing=()
command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null ||
    { log "skipped: cannot install ${missing[*]}"; exit 77; }
fi
image_log=$(mktemp)
"$HERE/guest.sh" image >/dev/null 2>"$image_log" ||
  { cat "$image_log" >&2; rm -f "$image_log"; log "skipped: no guest image (Debian's archive unreachable?)"; exit 77; }
rm -f "$image_log"

CLUSTER=$SRC/tests/e2e/cluster.sh
cleanup() {
  local rc=$? f
  if ((rc != 0)); then
    for f in "$E2E_DIR"/log/{slurmctld,composerd,composer-slurmctld,fake_redfish}.log \
      "$E2E_DIR"/log/guest*-boot.log "$E2E_DIR"/guests/node*/share/log/slurmd.log "$E2E_DIR"/guests/node*/console.log; do
      [[ -f $f ]] && { echo "--- last lines of $f"; tail -25 "$f"; }
    done >&2
  fi
  "$CLUSTER" stop || true
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

t=$SECONDS
"$CLUSTER" start || die "the cluster with its guest node did not start"
log "cluster up with its guests as its nodes in $((SECONDS - t)) s ($(cat "$E2E_DIR"/log/guest*-boot.log | grep -o 'booted under tcg in [0-9]* s\|booted under kvm in [0-9]* s' | paste -sd, -))"
eval "$("$CLUSTER" env)"
export SLURM_CONF
# shellcheck source-path=SCRIPTDIR source=../e2e/scenarios.sh
source "$SRC/tests/e2e/scenarios.sh"  # api, wait_until, job_state, attached, ...
# The jobs run on guest1, whose folder is guests/node01 (its /mnt/share is SHARE).
GUEST_DIR=$E2E_DIR/guests/node01
SHARE=$GUEST_DIR/share
g() { "$HERE/guest.sh" exec "$GUEST_DIR" --timeout 120 -- "$@"; }

# --- with E2E_GUEST_CXL: a job composes CXL memory through slurmd. The prolog in the guest
# makes a region of the guest's CXL Type 3 device and onlines it as a NUMA node, the task hook
# widens the job's cpuset (Slurm's ConstrainCores holds it to node 0) to that node, and the
# job's program places a buffer there with mbind(2): QEMU 7.2 emulates the CXL window as I/O
# memory, which holds data but runs no code, so the job keeps its own policy (the default,
# preferred) and binds only its buffer (composer_kvm_touch). A job started beside it is fenced
# from that node. After the job the epilog offlines the node and destroys the region.
if ((${E2E_GUEST_CXL:-0} > 0)); then
  touch_prog=$BUILD_DIR/tests/kvm/composer_kvm_touch
  [[ -x $touch_prog ]] || die "not built: $touch_prog"
  # shellcheck disable=SC2016  # the job's shell expands its variables
  j=$(sbatch --parsable -w guest1 "--compose-mem=${E2E_GUEST_CXL}M" --chdir=/mnt/share -o "/mnt/share/job-%j.out" --wrap '
    env | grep ^COMPOSER_ | sort
    n=$COMPOSER_MEM_NUMA
    cg=/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/self/cgroup)
    echo "MEMS=$(cat "$cg/cpuset.mems.effective")"
    echo "JOB_MEMS=$(cat "${cg%%/step_*}/cpuset.mems")"
    echo "ONLINE_KIB=$(awk "/MemTotal/ {print \$(NF-1)}" "/sys/devices/system/node/node$n/meminfo")"
    COMPOSER_KVM_TASK_POLICY="2:$((1 << n))" '"$touch_prog"' 32
    touch "/mnt/share/cxl-$SLURM_JOB_ID"
    for i in $(seq 600); do [ -e "/mnt/share/done-$SLURM_JOB_ID" ] && break; sleep 0.2; done') ||
    die "sbatch refused the CXL memory job"
  t=$SECONDS
  wait_until 180 test -e "$SHARE/cxl-$j" || die "job $j never placed its buffer ($(job_state "$j")): $(cat "$SHARE/job-$j.out" 2>/dev/null)"
  # A job beside it: Slurm gives it every memory node online, the CXL node too; its task hook
  # takes that node out (the plugin's fence), so only node 0 is left to it.
  # shellcheck disable=SC2016  # the job's shell expands its variables
  beside=$(sbatch --parsable -w guest1 --chdir=/mnt/share -o "/mnt/share/job-%j.out" --wrap '
    echo "MEMS=$(cat "/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/self/cgroup)/cpuset.mems.effective")"') ||
    die "sbatch refused the job beside job $j"
  wait_until 120 finished "$beside" || die "job $beside did not finish ($(job_state "$beside"))"
  beside_mems=$(sed -n 's/^MEMS=//p' "$SHARE/job-$beside.out")
  [[ $beside_mems == 0 ]] || die "job $beside, beside job $j's CXL memory, may use memory nodes '$beside_mems', not only node 0"
  touch "$SHARE/done-$j"
  wait_until 180 finished "$j" || die "job $j did not finish within 180 s ($(job_state "$j"))"
  out=$SHARE/job-$j.out
  [[ $(job_state "$j") == COMPLETED ]] || die "job $j ended $(job_state "$j"): $(cat "$out" 2>/dev/null)"
  node=$(sed -n 's/^COMPOSER_MEM_NUMA=//p' "$out")
  [[ $node =~ ^[1-9][0-9]*$ ]] || die "job $j: COMPOSER_MEM_NUMA is '$node', not a node of the guest's CXL memory: $(cat "$out")"
  mems=$(sed -n 's/^MEMS=//p' "$out")
  # A cpuset's list ("0-1", "0,2"): is the node in it?
  awk -v list="$mems" -v n="$node" 'BEGIN {
    k = split(list, part, ","); for (i = 1; i <= k; i++) { split(part[i], r, "-"); if (!(2 in r)) r[2] = r[1]
      if (part[i] != "" && n + 0 >= r[1] + 0 && n + 0 <= r[2] + 0) exit 0 }
    exit 1 }' || die "job $j: its cpuset allows memory nodes '$mems', not the CXL node $node"
  # What Slurm set on the job's cgroup (ConstrainCores), widened by the task hook.
  job_mems=$(sed -n 's/^JOB_MEMS=//p' "$out")
  online=$(sed -n 's/^ONLINE_KIB=//p' "$out")
  if ! [[ $online =~ ^[1-9][0-9]*$ ]]; then die "job $j: node $node holds '$online' KiB online"; fi
  pages=$(grep '^pages:' "$out") || die "job $j: no pages line: $(cat "$out")"
  awk -v n="$node" -v line="$pages" 'BEGIN {
    split(line, w, /[ =]/); total = 0
    for (i = 1; i in w; i++) if (w[i] ~ /^N[0-9]+$/) { c[substr(w[i], 2)] = w[i + 1]; total += w[i + 1] }
    if (total == 0 || c[n] < total * 0.99) { print "node " n " holds " c[n] + 0 " of " total " pages"; exit 1 }
  }' >&2 || die "job $j: its buffer is not on the CXL node $node: $pages"
  ids=$(api /v1/events "job=$j" | jq -r '[.events[] | select(.kind == "ready") | .devices[]] | unique | join(",")')
  [[ -n $ids && $ids != *,* ]] || die "composerd's ledger names '$ids' as job $j's memory"
  log "job $j: memory block $ids is node $node in the guest (cpuset mems $mems, the job's cgroup's own '$job_mems'; $((online / 1024)) MiB online): $pages; ran in $((SECONDS - t)) s; job $beside beside it had memory node $beside_mems only"
  wait_until 60 nothing_attached || die "$(attached) devices still attached after job $j"
  left=$(g "ls /sys/bus/cxl/devices 2>/dev/null | grep -c '^region' || true; ls /sys/bus/dax/devices | wc -l; ls /sys/devices/system/node/node$node 2>/dev/null | grep -c '^memory' || true" | xargs)
  [[ $left == "0 0 0" ]] || die "job $j: after its epilog the guest shows CXL regions, dax devices, blocks of node $node: $left, not 0 0 0"
  [[ $(event_kinds "$j") == *released* ]] || die "ledger of job $j: $(event_kinds "$j")"
  g "test ! -e $E2E_DIR/plugin-state/job-$j.json" || die "the guest's plugin state of job $j is left behind"
  log "job $j: released; the epilog offlined node $node and destroyed its region"
fi

# --- a job composes a drive: hot-plugged, found by its serial, used by the job, released
# shellcheck disable=SC2016  # the job's shell expands its variables
j=$(sbatch --parsable -w guest1 --compose-nvme=1 --chdir=/mnt/share -o "/mnt/share/job-%j.out" --wrap '
  env | grep ^COMPOSER_ | sort
  d=${COMPOSER_NVME%%,*}
  test -b "$d" && echo "SERIAL=$(tr -d " " <"/sys/class/block/${d#/dev/}/device/serial")"
  dd if="$d" of=/dev/null bs=4096 count=16 status=none && echo READ=ok') || die "sbatch refused the job"
t=$SECONDS
wait_until 120 finished "$j" || die "job $j did not finish within 120 s ($(job_state "$j"))"
[[ $(job_state "$j") == COMPLETED ]] || die "job $j ended $(job_state "$j")"
log "job $j ran on the guest and completed in $((SECONDS - t)) s"
out=$SHARE/job-$j.out
[[ -f $out ]] || die "job $j wrote no output in the guest"
[[ $(job_field "$j" NodeList) == guest1 ]] || die "job $j ran on $(job_field "$j" NodeList), not guest1"
dev=$(sed -n 's/^COMPOSER_NVME=//p' "$out")
[[ $dev =~ ^/dev/nvme[0-9]+n1$ ]] || die "COMPOSER_NVME is '$dev', not one namespace of the guest's kernel: $(cat "$out")"
# The drive composerd composed for the job, by the serial the fabric reported for it.
ids=$(api /v1/events "job=$j" | jq -r '[.events[] | select(.kind == "ready") | .devices[]] | unique | join(",")')
[[ -n $ids && $ids != *,* ]] || die "composerd's ledger names '$ids' as job $j's drive"
serial=$(api_all /v1/devices type=nvme | jq -r --arg id "$ids" '.devices[] | select(.id == $id) | .identity.serial')
[[ -n $serial ]] || die "composerd reports no serial for $ids"
grep -qx "SERIAL=$serial" "$out" || die "job $j's $dev has serial '$(sed -n 's/^SERIAL=//p' "$out")', composerd's $ids has $serial"
grep -qx READ=ok "$out" || die "job $j could not read $dev: $(cat "$out")"
grep -q "^qmp: attach $serial: device_add into rp[0-9]" "$E2E_DIR/log/fake_redfish.log" ||
  die "the fabric did not hot-plug $serial into the guest"
log "job $j: $dev is drive $ids (serial $serial, hot-plugged over QMP), readable in the job"

# The release: the epilog in the guest, composer-slurmctld's, and the fabric's device_del.
wait_until 60 nothing_attached || die "$(attached) devices still attached after job $j"
grep -q "^qmp: detach $serial: device_del until DEVICE_DELETED" "$E2E_DIR/log/fake_redfish.log" ||
  die "the fabric did not device_del $serial: $(tail -3 "$E2E_DIR/log/fake_redfish.log")"
g "test ! -e $dev && ! ls /sys/class/nvme/ 2>/dev/null | grep -q ." ||
  die "the guest still shows $dev or an NVMe controller after the release"
[[ $(event_kinds "$j") == *released* ]] || die "ledger of job $j: $(event_kinds "$j")"
g "test ! -e $E2E_DIR/plugin-state/job-$j.json" || die "the guest's plugin state of job $j is left behind"
log "job $j: released, device_del done, $dev gone from the guest ($(grep -o "DEVICE_DELETED [0-9.]* s" "$E2E_DIR/log/fake_redfish.log" | tail -1))"

# --- the busy check in the guest's kernel: a process outside the job keeps the job's drive
# open past the job's end. The epilog finds it in the guest's /proc, waits busy_wait (5 s)
# and has composerd hold the composition instead of releasing it: the node stays in service
# and neither EpilogSlurmctld nor the reconciler detaches the drive under the process. Once
# the process has gone, the next job's prolog on the node releases it (device_del).
# shellcheck disable=SC2016  # the job's shell expands its variables
j=$(sbatch --parsable -w guest1 --compose-nvme=1 --chdir=/mnt/share -o "/mnt/share/job-%j.out" --wrap '
  echo "NVME=${COMPOSER_NVME%%,*}"
  for i in $(seq 600); do [ -e "/mnt/share/go-$SLURM_JOB_ID" ] && break; sleep 0.2; done') ||
  die "sbatch refused the held-drive job"
wait_until 120 grep -qs '^NVME=/' "$SHARE/job-$j.out" || die "job $j never named its drive ($(job_state "$j"))"
dev=$(sed -n 's/^NVME=//p' "$SHARE/job-$j.out")
# Outside the job (the guest's agent), so that Slurm does not end it with the job.
holder=$(g "setsid bash -c 'exec 3<$dev; exec sleep 300' </dev/null >/dev/null 2>&1 & echo \$!" | tr -d '[:space:]')
[[ $holder =~ ^[0-9]+$ ]] || die "no process holds $dev in the guest: '$holder'"
touch "$SHARE/go-$j"
t=$SECONDS
wait_until 60 finished "$j" || die "job $j did not finish ($(job_state "$j"))"
wait_until 60 is_held "$j" || die "composerd holds no composition of job $j: $(api "/v1/compositions/$j/guest1")"
[[ $(hold_of "$j") == *"pid $holder holds"* ]] ||
  die "composerd's hold on job $j: '$(hold_of "$j")' (pid $holder holds $dev in the guest)"
sleep 3  # EpilogSlurmctld and a reconciler pass have had their turn
[[ $(api "/v1/compositions/$j/guest1" | jq -r .state) == ready ]] ||
  die "the held composition of job $j is $(api "/v1/compositions/$j/guest1" | jq -r .state)"
[[ $(node_state guest1) != drain* ]] || die "guest1 is $(node_state guest1): a held drive must not drain it"
g "test -b $dev" || die "the held drive $dev left the guest under its holder"
grep -q "composer: epilog: job $j on node guest1: devices still in use after 5 s: pid $holder holds" \
  "$GUEST_DIR/share/log/slurmd.log" || die "no epilog line for job $j in the guest's slurmd.log: $(grep "job $j" "$GUEST_DIR/share/log/slurmd.log")"
log "job $j: its drive $dev held past the job by pid $holder in the guest: $(hold_of "$j") ($((SECONDS - t)) s after the job's end)"
g "kill $holder"
k=$(sbatch --parsable -w guest1 -o /dev/null --wrap true) || die "sbatch refused the job after the holder"
wait_until 120 finished "$k" || die "job $k did not finish ($(job_state "$k"))"
wait_until 60 nothing_attached || die "$(attached) devices still attached after job $k, with job $j's holder gone"
[[ $(event_kinds "$j") == *"hold unhold releasing released"* ]] || die "ledger of job $j: $(event_kinds "$j")"
g "test ! -e $dev && ! ls /sys/class/nvme/ 2>/dev/null | grep -q ." ||
  die "the guest still shows $dev or an NVMe controller after the held drive's release"
g "test ! -e $E2E_DIR/plugin-state/job-$j.json" || die "the guest's plugin state of job $j is left behind"
log "job $k's prolog released job $j's drive once its holder had gone: device_del done, $dev gone"

# --- surprise removal: the fabric pulls a running job's drive by itself (fake_redfish's
# /control/unplug: device_del in the guest, and the fabric no longer lists the drive on node01).
# The job holds the drive open and reads it (O_DIRECT, past the page cache) until a read comes
# back short: Linux 6.1 answers reads of a drive removed under an open file with end of file
# (0 bytes, the disk's size now 0), not with an error.
# shellcheck disable=SC2016  # the job's shell expands its variables
j=$(sbatch --parsable -w guest1 --compose-nvme=1 --chdir=/mnt/share -o "/mnt/share/job-%j.out" --wrap '
  d=${COMPOSER_NVME%%,*}
  exec 3<"$d" || exit 1
  echo "HOLDING=$d"
  n=0
  while got=$(dd bs=4096 count=1 iflag=direct status=none <&3 2>/tmp/read.err | wc -c); [ "$got" = 4096 ]; do
    n=$((n + 1))
    [ $n -lt 1500 ] || { echo NEVER_LOST; exit 1; }
    [ $n != 1 ] || touch "/mnt/share/reading-$SLURM_JOB_ID"
    sleep 0.2
  done
  echo "LOST after $n reads: a read gave $got bytes $(cat /tmp/read.err)"
  # Degraded, the job carries on until the test has looked.
  for i in $(seq 600); do [ -e "/mnt/share/done-$SLURM_JOB_ID" ] && break; sleep 0.2; done') ||
  die "sbatch refused the surprise job"
wait_until 120 test -e "$SHARE/reading-$j" || die "job $j never read its drive ($(job_state "$j"))"
ids=$(attached_to_job_of_type "$j" nvme)
[[ -n $ids && $ids != *,* ]] || die "composerd holds '$ids' as job $j's drive"

# --- the fence, in the guest's cgroup v2: another job on the node cannot open that drive
# (the plugin's device program; Slurm constrains no device here), a process outside the jobs can.
dev=$(sed -n 's/^HOLDING=//p' "$SHARE/job-$j.out")
other=$(sbatch --parsable -w guest1 --chdir=/mnt/share -o "/mnt/share/job-%j.out" \
  --wrap "dd if=$dev of=/dev/null bs=4096 count=1 status=none && echo OPENED") || die "sbatch refused the fenced job"
wait_until 120 finished "$other" || die "job $other did not finish ($(job_state "$other"))"
grep -q "failed to open '$dev': Operation not permitted" "$SHARE/job-$other.out" ||
  die "job $other, beside job $j, was not refused $dev: $(cat "$SHARE/job-$other.out")"
g "dd if=$dev of=/dev/null bs=4096 count=1 status=none" || die "a process outside the jobs cannot read $dev"
log "job $other: $(cat "$SHARE/job-$other.out") (job $j's drive; outside the jobs it opens)"
serial=$(api_all /v1/devices type=nvme | jq -r --arg id "$ids" '.devices[] | select(.id == $id) | .identity.serial')
port=$(cat "$E2E_DIR/run/fake_redfish.port")
t=$SECONDS
curl -fsS -X POST -d "{\"block\":\"$ids\"}" "http://127.0.0.1:$port/control/unplug" ||
  die "the fabric could not pull $ids"
log "the fabric pulled $ids (serial $serial) from under job $j in $((SECONDS - t)) s ($(grep -o "DEVICE_DELETED [0-9.]* s" "$E2E_DIR/log/fake_redfish.log" | tail -1))"
out=$SHARE/job-$j.out
wait_until 60 grep -q '^LOST after' "$out" || die "job $j's reads of its drive never failed: $(cat "$out")"
log "job $j: $(grep '^LOST after' "$out")"
g "! ls /sys/class/nvme/ 2>/dev/null | grep -q ." || die "the guest still shows an NVMe controller after the pull"
# composerd's reconciler sees the lost attachment: the drive failed, the job told (notify,
# the default reaction) on its standard error.
device() { api_all /v1/devices type=nvme | jq -c --arg id "$ids" '.devices[] | select(.id == $id)'; }
device_failed() { [[ $(device | jq -r .health) == critical ]]; }
wait_until 60 device_failed || die "composerd did not mark $ids failed: $(device)"
log "composerd: $ids $(device | jq -r '"health \(.health), state \(.state)"')"
wait_until 60 grep -q "device $ids failed" "$out" || die "job $j was not told: $(cat "$out")"
log "job $j told: $(grep "device $ids failed" "$out" | head -1)"
touch "$SHARE/done-$j"
wait_until 60 finished "$j" || die "job $j did not finish after its drive was pulled ($(job_state "$j"))"
log "job $j ended $(job_state "$j")"
# Nothing leaked: no composition, the drive on no system of the fabric and in no state file.
wait_until 60 nothing_attached || die "$(attached) devices still attached after job $j"
[[ $(event_kinds "$j") == *released* ]] || die "ledger of job $j: $(event_kinds "$j")"
g "test ! -e $E2E_DIR/plugin-state/job-$j.json" || die "the guest's plugin state of job $j is left behind"
curl -fsS "http://127.0.0.1:$port/control/state" | jq -e --arg id "$ids" 'all(.systems[]; index($id) == null)' >/dev/null ||
  die "the fabric still lists $ids on a system: $(curl -fsS "http://127.0.0.1:$port/control/state")"
# Its line says the drive was lost, as composerd's answer to the release shows it.
grep -q "composer: epilog: job $j on node guest1: released (busy check [0-9]* ms, release [0-9]* ms); $ids was lost by the fabric while the job held it and stays drained until an admin resumes it" \
  "$GUEST_DIR/share/log/slurmd.log" ||
  die "the guest's epilog did not release job $j saying $ids was lost: $(grep "job $j" "$GUEST_DIR/share/log/slurmd.log")"
# Released, the pulled drive stays out of the pool (drained) until an admin resumes it.
[[ $(device | jq -r .drained) == true ]] || die "composerd offers the pulled drive again: $(device)"
log "job $j: released by its epilog; composerd now shows $ids $(device | jq -c '{state, health, drain_reason}')"

# --- E2E_NODES guests side by side: one job on each at once, each drive hot-plugged into the
# job's own guest and found there by its serial.
if ((${E2E_NODES:-1} > 1)); then
  # k, not i: scenarios.sh's wait_until counts with i.
  jobs=()
  for ((k = 1; k <= E2E_NODES; k++)); do
    # shellcheck disable=SC2016  # the job's shell expands its variables
    jobs+=("$(sbatch --parsable -w "guest$k" --compose-nvme=1 --chdir=/mnt/share -o "/mnt/share/job-%j.out" --wrap '
      d=${COMPOSER_NVME%%,*}
      echo "SERIAL=$(tr -d " " <"/sys/class/block/${d#/dev/}/device/serial")"
      echo "DRIVES=$(ls /sys/class/nvme | wc -l)"
      sleep 10')") || die "sbatch refused the job for guest$k"
  done
  for ((k = 1; k <= E2E_NODES; k++)); do
    j=${jobs[k - 1]}
    wait_until 180 finished "$j" || die "job $j on guest$k did not finish ($(job_state "$j"))"
    [[ $(job_state "$j") == COMPLETED ]] || die "job $j on guest$k ended $(job_state "$j")"
    ids=$(api /v1/events "job=$j" | jq -r '[.events[] | select(.kind == "ready") | .devices[]] | unique | join(",")')
    serial=$(api_all /v1/devices type=nvme | jq -r --arg id "$ids" '.devices[] | select(.id == $id) | .identity.serial')
    out=$(printf '%s/guests/node%02d/share/job-%s.out' "$E2E_DIR" "$k" "$j")
    [[ -n $serial && $(cat "$out" 2>/dev/null) == "SERIAL=$serial"$'\n'"DRIVES=1" ]] ||
      die "job $j on guest$k saw '$(cat "$out" 2>/dev/null)'; composerd composed $ids (serial $serial) for it"
    log "job $j: guest$k shows its drive $ids (serial $serial) and no other"
  done
  wait_until 60 nothing_attached || die "$(attached) devices still attached after jobs ${jobs[*]}"
  for ((k = 1; k <= E2E_NODES; k++)); do
    "$HERE/guest.sh" exec "$(printf '%s/guests/node%02d' "$E2E_DIR" "$k")" -- "! ls /sys/class/nvme | grep -q ." ||
      die "guest$k still shows an NVMe controller after the release"
  done
  log "jobs ${jobs[*]}: released, every guest without its drive"
fi
log PASS
