#!/usr/bin/env bash
# The kvm level's default scenario: an NVMe drive composed for a job is hot-plugged into a QEMU
# guest (QMP device_add of an nvme whose serial is the drive's, into a free pcie-root-port),
# found by the plugin's prolog code in the guest's own kernel, used by the job, held by the
# release while a process keeps it open, and removed by device_del once it is free.
#
#   composerd (this machine, 127.0.0.1:KVM_PORT, munge) -- Redfish --> fake_redfish
#     --hot-plug qmp.py --> the guest's QMP socket
#   the guest (tests/kvm/guest.sh, node "guest", composed system node01): munged with this
#   run's key, and the node hooks as slurmd runs them (composer_kvm_host_side: prolog, task,
#   epilog; composer-node-check for the held release), talking to composerd at 10.0.2.2.
#
# Prints the time from the compose request to the drive usable in the guest, split into the
# fabric (composerd, Redfish and QMP), the kernel's hot-add and the prolog's own time, and the
# release's. Environment: BUILD_DIR (default build), KVM_DIR (default /tmp/guest-kvm; wiped at
# start), KVM_PORT (default 29830, below the ephemeral ports), KVM_DRIVES (default 1; up to 4; 0:
# no drive): the drives the job asks for, hot-plugged into as many root ports at once.
# KVM_CXL (default 0: none; MiB, a multiple of 256): the guest boots with a CXL Type 3 device of
# that much persistent memory (QEMU 7.2 offers no other kind; guest.sh's GUEST_CXL), and the
# fake Redfish service's memory blocks are of that size. Then, after the drive, one job per
# memory policy (bind, preferred, interleave) composes a block: the prolog makes the region
# and onlines it as a NUMA node, the task allocates under the policy the task hook gave it
# and /proc/PID/numa_maps must show its pages where the policy says, and the epilog offlines
# the node and destroys the region. KVM_POLICIES (default "bind preferred interleave
# weighted:3:1") names those jobs' policies. A weighted one on a guest kernel without weighted
# interleave (before 6.9) must be refused with the kernel it needs; on one with it, the prolog
# must write D and C to the DRAM and CXL nodes' weights, the pages must split D:C within 2% of
# the buffer, and the epilog must put the weights back as they were. KVM_SUITE (default
# bookworm: Linux 6.1; trixie: Linux 6.12) is the guest image's Debian release (guest.sh's
# GUEST_SUITE); libraries of the host's build the guest's release lacks (trixie has no
# libjsoncpp25) are copied into the guest's share and found there by LD_LIBRARY_PATH.
# KVM_PMEM (default 0: none; MiB, a multiple of 128; not with KVM_CXL): the guest boots with
# that much persistent memory (an ACPI NVDIMM, guest.sh's GUEST_PMEM) on CPU-less NUMA node 1,
# made one dax device in devdax mode before the jobs, as an admin would; the same jobs then
# compose blocks of its size, the prolog onlines it with kmem and the epilog gives it back to
# device_dax. The task hook's set_mempolicy(2) is then the task's own, as under slurmd: the
# program the task runs allocates under it. Linux 6.12 makes no CXL region in a virtual machine (committing one fails:
# "Failed to synchronize CPU cache state": it does not invalidate CPU caches for a region under
# a hypervisor), so on trixie this is the memory that the policies place.
# Root; installs qemu-system-x86 and mmdebstrap if missing;
# exits 77 (skipped) when it cannot (no network for apt or for the first image).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD_DIR=$(realpath -m "${BUILD_DIR:-$SRC/build}")
KVM_DIR=$(realpath -m "${KVM_DIR:-/tmp/guest-kvm}")
KVM_PORT=${KVM_PORT:-29830}
GUEST=$KVM_DIR/guests/node01
KVM_DRIVES=${KVM_DRIVES:-1}
JOB=101
T0=$SECONDS

log() { echo "kvm: [$((SECONDS - T0)) s] $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

KVM_CXL=${KVM_CXL:-0}
KVM_SUITE=${KVM_SUITE:-bookworm}
KVM_POLICIES=${KVM_POLICIES:-bind preferred interleave weighted:3:1}
for policy in $KVM_POLICIES; do
  [[ $policy =~ ^(bind|preferred|interleave|weighted:[1-9][0-9]*:[1-9][0-9]*)$ ]] ||
    fail "KVM_POLICIES: '$policy': allowed are bind, preferred, interleave and weighted:D:C"
done
[[ $KVM_DRIVES =~ ^[0-4]$ ]] || fail "KVM_DRIVES=$KVM_DRIVES: allowed are 0 to 4 (the guest's root ports)"
[[ $KVM_CXL =~ ^[0-9]+$ ]] && ((KVM_CXL % 256 == 0 && KVM_CXL <= 4096)) ||
  fail "KVM_CXL=$KVM_CXL: allowed are 0 (no CXL memory) and multiples of 256 up to 4096 (MiB)"
KVM_PMEM=${KVM_PMEM:-0}
[[ $KVM_PMEM =~ ^[0-9]+$ ]] && ((KVM_PMEM % 128 == 0 && KVM_PMEM <= 4096 && (KVM_PMEM == 0 || KVM_CXL == 0))) ||
  fail "KVM_PMEM=$KVM_PMEM: allowed are 0 (none) and multiples of 128 up to 4096 (MiB), without KVM_CXL"
((KVM_DRIVES + KVM_CXL + KVM_PMEM > 0)) || fail "KVM_DRIVES, KVM_CXL and KVM_PMEM are 0: nothing to check"
# The size of the memory blocks the fabric composes: the CXL device's, or the dax device's of
# the persistent memory, whose first 2 MiB hold the namespace's own block (devdax's alignment).
MEM_MIB=$((KVM_CXL > 0 ? KVM_CXL : KVM_PMEM > 0 ? KVM_PMEM - 2 : 0))
[[ $(id -u) == 0 ]] || { log "skipped: must run as root (QEMU's guest image, munged)"; exit 77; }
COMPOSERD=$BUILD_DIR/composer/server/composerd
FAKE_REDFISH=$BUILD_DIR/tests/drivers/fake_redfish/fake_redfish
HOST_SIDE=$BUILD_DIR/tests/kvm/composer_kvm_host_side
NODE_CHECK=$BUILD_DIR/slurm-plugin/composer-node-check
TOUCH=$BUILD_DIR/tests/kvm/composer_kvm_touch
for f in "$COMPOSERD" "$FAKE_REDFISH" "$HOST_SIDE" "$NODE_CHECK" "$TOUCH"; do
  [[ -n $f && -x $f ]] || fail "not built: ${f:-composerd} (build composerd, fake_redfish, composer_kvm_host_side, composer_kvm_touch, composer-node-check)"
done

missing=()
command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v munged >/dev/null || missing+=(munge)
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null ||
    { log "skipped: cannot install ${missing[*]}"; exit 77; }
fi

PIDS=()
cleanup() {
  local rc=$? pid
  "$HERE/guest.sh" stop "$GUEST" || true
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if ((rc != 0 && rc != 77)); then
    local f
    for f in "$KVM_DIR"/log/*.log "$GUEST/console.log"; do
      [[ -f $f ]] && { echo "--- last lines of $f"; tail -25 "$f"; }
    done >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

rm -rf "$KVM_DIR"
mkdir -p "$KVM_DIR"/{etc,munge,log,run,composer,guests}
chmod 755 "$KVM_DIR" "$KVM_DIR/munge"

# The image first (cached; from Debian's archive the first time), then the guest boots while
# the services start.
t=$SECONDS
GUEST_SUITE=$KVM_SUITE "$HERE/guest.sh" image >/dev/null 2>"$KVM_DIR/log/image.log" ||
  { cat "$KVM_DIR/log/image.log" >&2; log "skipped: no guest image (Debian's archive unreachable?)"; exit 77; }
log "guest image ready in $((SECONDS - t)) s"
t_boot=$SECONDS
GUEST_SUITE=$KVM_SUITE GUEST_CXL=$KVM_CXL GUEST_PMEM=$KVM_PMEM GUEST_TREE=$BUILD_DIR "$HERE/guest.sh" start "$GUEST" 2>"$KVM_DIR/log/boot.log" &
boot_pid=$!

MUNGE_SOCKET=$KVM_DIR/munge/munge.socket
head -c 1024 /dev/urandom >"$KVM_DIR/munge/munge.key"
chmod 400 "$KVM_DIR/munge/munge.key"
/usr/sbin/munged --force --key-file="$KVM_DIR/munge/munge.key" --socket="$MUNGE_SOCKET" \
  --pid-file="$KVM_DIR/run/munged.pid" --log-file="$KVM_DIR/log/munged.log" \
  --seed-file="$KVM_DIR/munge/munged.seed"
PIDS+=("$(cat "$KVM_DIR/run/munged.pid")")

cred=$KVM_DIR/etc/fabric.cred
(umask 077 && printf 'username=composer\npassword=kvm-%s\n' "$RANDOM$RANDOM" >"$cred")
setsid "$FAKE_REDFISH" --port-file "$KVM_DIR/run/fake_redfish.port" --hosts 1 --gpus-per-zone 1 \
  --username composer --password "$(sed -n 's/^password=//p' "$cred")" \
  --drive-ids 0x1b36:0x0010 --memory-mib "$((MEM_MIB > 0 ? MEM_MIB : 65536))" --hot-plug "$HERE/qmp.py --guests $KVM_DIR/guests" \
  >>"$KVM_DIR/log/fake_redfish.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [[ -s $KVM_DIR/run/fake_redfish.port ]] && break; sleep 0.1; done
[[ -s $KVM_DIR/run/fake_redfish.port ]] || fail "fake_redfish did not start"

# The pcie-root-port's hot-plug takes seconds under TCG (pciehp's attention button: 5 s), so
# the fabric's calls get a minute.
cat >"$KVM_DIR/etc/composer.conf" <<CONF
ListenAddress=127.0.0.1
ListenPort=$KVM_PORT
StateDir=$KVM_DIR/composer
LogFile=$KVM_DIR/log/composerd.log
LogLevel=info
AdminUsers=root
MungeSocket=$MUNGE_SOCKET
ComposeTimeout=120
ReleaseTimeout=120
Durable=no
Fabric=redfish
FabricName=kvm-redfish
FabricUrl=http://127.0.0.1:$(cat "$KVM_DIR/run/fake_redfish.port")
FabricCredentials=$cred
FabricAuth=session
FabricTimeout=60s
FabricSlots=4
NodeName=guest FabricHost=node01
CONF
setsid "$COMPOSERD" -f "$KVM_DIR/etc/composer.conf" >>"$KVM_DIR/log/composerd.out" 2>&1 &
PIDS+=($!)
composerd_pid=$!
for _ in $(seq 200); do
  timeout 2 bash -c "</dev/tcp/127.0.0.1/$KVM_PORT" 2>/dev/null && break
  kill -0 "$composerd_pid" 2>/dev/null || fail "composerd exited: $(tail -3 "$KVM_DIR/log/composerd.out")"
  sleep 0.1
done

wait "$boot_pid" || fail "the guest did not boot: $(cat "$KVM_DIR/log/boot.log")"
cat "$KVM_DIR/log/boot.log" >&2
log "guest up $((SECONDS - t_boot)) s after its start"

G_ENV=
g() { "$HERE/guest.sh" exec "$GUEST" --timeout "${TIMEOUT:-300}" -- "$G_ENV$*"; }

# The host's libraries the built programs need and the guest's release lacks, by the names the
# guest's loader misses.
mapfile -t missing < <(g "ldd $HOST_SIDE $NODE_CHECK" | sed -n 's/^[[:space:]]*\([^ ]*\) => not found$/\1/p' | sort -u)
if ((${#missing[@]})); then
  mkdir -p "$GUEST/share/lib"
  for lib in "${missing[@]}"; do
    from=$(ldd "$HOST_SIDE" "$NODE_CHECK" | sed -n "s|^[[:space:]]*$lib => \([^ ]*\) .*|\1|p" | head -1)
    [[ -n $from ]] || fail "the guest lacks $lib, and this machine has none to give it"
    cp -L "$from" "$GUEST/share/lib/"
  done
  G_ENV="export LD_LIBRARY_PATH=/mnt/share/lib; "
  log "guest: this machine's ${missing[*]} in /mnt/share/lib"
fi

cp "$KVM_DIR/munge/munge.key" "$GUEST/share/munge.key"
ARGS="server=http://10.0.2.2:$KVM_PORT compose=node state_dir=/run/slurm-composer host_check=wait host_wait=120 busy_wait=5 timeout=180 retries=0 outage_wait=30"
printf 'required spank_composer.so %s\n' "$ARGS" >"$GUEST/share/plugstack.conf"
g "install -o munge -g munge -m 400 /mnt/share/munge.key /etc/munge/munge.key &&
   mkdir -p /run/munge && chown munge:munge /run/munge &&
   runuser -u munge -- /usr/sbin/munged &&
   for i in \$(seq 120); do timeout 2 bash -c '</dev/tcp/10.0.2.2/$KVM_PORT' 2>/dev/null && exit 0; sleep 0.5; done
   echo 'composerd at 10.0.2.2:$KVM_PORT not reachable from the guest'; ip -4 addr; exit 1" ||
  fail "the guest cannot reach composerd"
log "guest: munged up, composerd reachable"

if ((KVM_DRIVES > 0)); then
# --- compose, hot-add, prolog
before=$(g "ls /sys/bus/pci/devices | wc -l")
# The kernel's block uevents with their times (the guest's monotonic clock, as /proc/uptime).
g "nohup udevadm monitor --kernel --subsystem-match=block >/mnt/share/uevents 2>&1 </dev/null & echo \$! >/mnt/share/monitor.pid"
out=$(g "SLURM_JOB_USER=root $HOST_SIDE prolog $JOB 0 --option compose-nvme=$KVM_DRIVES -- $ARGS 2>&1") ||
  fail "the prolog failed in the guest: $out"
echo "$out" >&2
timing=$(grep '^timing: prolog' <<<"$out") || fail "no timing line from the prolog"
mapfile -t serials < <(grep -o '^qmp: attach [A-Z0-9]*' "$KVM_DIR/log/fake_redfish.log" | cut -d' ' -f3)
((${#serials[@]} == KVM_DRIVES)) ||
  fail "the fabric hot-plugged ${#serials[@]} drive(s), not $KVM_DRIVES: $(cat "$KVM_DIR/log/fake_redfish.log")"
qmp_add=$(grep -o "^qmp: attach ${serials[0]}: device_add into rp[0-9]* [0-9.]* s" "$KVM_DIR/log/fake_redfish.log" | awk '{print $(NF-1)}')

# --- the job: its variables, its block device, the drive's identity in the guest's kernel
vars=$(g "$HOST_SIDE task $JOB 0 -- $ARGS 2>/dev/null") || fail "the task hook failed: $vars"
IFS=, read -r -a devs <<<"$(sed -n 's/^COMPOSER_NVME=//p' <<<"$vars")"
((${#devs[@]} == KVM_DRIVES)) || fail "COMPOSER_NVME names ${#devs[@]} device(s), not $KVM_DRIVES: $vars"
seen=()
for dev in "${devs[@]}"; do
  [[ $dev == /dev/nvme*n1 ]] || fail "COMPOSER_NVME holds '$dev', not a namespace's block device: $vars"
  got=$(g "test -b $dev && cat /sys/class/block/${dev#/dev/}/device/serial | tr -d ' ' && dd if=$dev of=/dev/null bs=4096 count=16 status=none && echo read-ok") ||
    fail "the job cannot use $dev: $got"
  serial=${got%$'\n'read-ok}
  [[ $got == "$serial"$'\n'read-ok && " ${serials[*]} " == *" $serial "* && " ${seen[*]} " != *" $serial "* ]] ||
    fail "the guest's $dev has serial/read '$got'; the fabric attached ${serials[*]}"
  seen+=("$serial")
  log "job $JOB: $dev is drive $serial (a serial the fabric reported), readable"
done
dev=${devs[0]}

# The split: the fabric is the prolog's compose call (composerd, Redfish and QMP's device_add);
# the kernel's hot-add runs from pciehp's "Card present" to the namespace's block device (its
# start lies inside the compose call: the fabric answers once QEMU has the device); the prolog's
# own time is the rest, after composerd answered and the kernel had finished.
read -r p_start p_compose p_end < <(sed 's/.*start=\([0-9.]*\) compose_done=\([0-9.]*\) end=\([0-9.]*\).*/\1 \2 \3/' <<<"$timing")
g "kill \$(cat /mnt/share/monitor.pid)" || true
# With several drives: from the first card present to the last block device.
blk_add=$(sed -n "s|^KERNEL\[\([0-9.]*\)\] add .*/nvme[0-9]*n1 (block)\$|\1|p" "$GUEST/share/uevents" | sort -n | tail -1)
card=$(g "dmesg" | sed -n 's/^\[ *\([0-9.]*\)\] pcieport.*Card present$/\1/p' | sort -n | head -1)
(($(grep -c ' add .*/nvme[0-9]*n1 (block)$' "$GUEST/share/uevents") == KVM_DRIVES)) && [[ -n $card ]] ||
  fail "not $KVM_DRIVES block uevents for the drives, or no pciehp 'Card present' in the guest's log"
awk -v s="$p_start" -v c="$p_compose" -v e="$p_end" -v k="$card" -v b="$blk_add" -v q="${qmp_add:-?}" 'BEGIN {
  waited = b - c; if (waited < 0) waited = 0
  printf "kvm: compose request to drive usable in the guest: %.2f s: fabric %.2f s (composerd, Redfish; QMP device_add %s s), kernel hot-add %.2f s (pciehp card present to %s; %.2f s of it after composerd answered), prolog %.2f s\n", e - s, c - s, q, b - k, "the block device", waited, e - c - waited
}' >&2

# --- the release: busy while a process holds the drive, removed by device_del once free. The
# holder has only the namespace's generic character device open (/dev/ng<N>n<M>, which the
# kernel shows beside the block device): that uses the drive as much.
generic=/dev/ng${dev#/dev/nvme}
g "test -c $generic" || fail "the guest shows no generic character device $generic for $dev"
g "nohup sleep 600 <$generic >/dev/null 2>&1 & echo \$! >/mnt/share/holder.pid"
t=$SECONDS
out=$(g "$HOST_SIDE epilog $JOB 0 -- $ARGS 2>&1") || fail "the epilog failed: $out"
echo "$out" >&2
grep -q "still in use after 5 s: pid [0-9]* holds [a-z0-9-]* ($generic)" <<<"$out" || fail "the epilog did not hold the drive $generic keeps busy: $out"
g "test -b $dev" || fail "the epilog took $dev away from under its process"
log "epilog: drive held while a process keeps $generic open ($((SECONDS - t)) s)"
g "kill \$(cat /mnt/share/holder.pid)"
t=$SECONDS
out=$(g "c0=\$(cut -d' ' -f1 /proc/uptime); COMPOSER_PLUGSTACK=/mnt/share/plugstack.conf $NODE_CHECK 2>&1; echo \"rc=\$? start=\$c0 end=\$(cut -d' ' -f1 /proc/uptime)\"")
echo "$out" >&2
grep -q '^rc=0' <<<"$out" || fail "composer-node-check failed: $out"
qmp_del=$(grep -o "^qmp: detach [A-Z0-9]*: device_del until DEVICE_DELETED [0-9.]* s" "$KVM_DIR/log/fake_redfish.log" | awk '{print $(NF-1)}' | xargs)
(($(wc -w <<<"$qmp_del") == KVM_DRIVES)) ||
  fail "the fabric did not detach all of ${serials[*]}: $(tail -5 "$KVM_DIR/log/fake_redfish.log")"
for dev in "${devs[@]}"; do
  g "test ! -e $dev" || fail "$dev is still in the guest after the release"
done
g "! ls /sys/class/nvme/ 2>/dev/null | grep -q ." || fail "the guest still shows NVMe controllers: $(g 'ls /sys/class/nvme')"
dev=${devs[0]}
after=$(g "ls /sys/bus/pci/devices | wc -l")
[[ $after == "$before" ]] || fail "the guest shows $after PCI functions after the release, $before before the attach"
log "release once free: $((SECONDS - t)) s (QMP device_del until DEVICE_DELETED: $qmp_del s); ${devs[*]} gone from the guest"
fi

if ((KVM_PMEM > 0)); then
  # The admin's part: the persistent memory as one dax device (devdax, its page map in RAM),
  # which the prolog finds by its size and onlines with kmem, and the epilog gives back.
  dax=$(g "modprobe dax_pmem && ndctl create-namespace -f -e namespace0.0 -m devdax --map=mem >/dev/null &&
    cat /sys/bus/dax/devices/dax0.0/size /sys/bus/dax/devices/dax0.0/target_node" | xargs) ||
    fail "no dax device of the guest's persistent memory: $dax"
  [[ $dax == "$((MEM_MIB << 20)) 1" ]] ||
    fail "the guest's dax0.0 has size and node '$dax', not $((MEM_MIB << 20)) bytes on node 1"
  log "guest: dax0.0 of $MEM_MIB MiB on node 1 in devdax mode"
fi

if ((KVM_CXL + KVM_PMEM > 0)); then
  # --- CXL memory: one job per policy, each composing a block of the guest's CXL device's size.
  wi=/sys/kernel/mm/mempolicy/weighted_interleave
  kernel=$(g "uname -r; test -d $wi && echo weighted || echo no-weighted" | xargs)
  # The kernel's node-wide weights of weighted interleave, "node0:3 node1:1" (none before 6.9).
  weights() { g "test -d $wi && grep -H . $wi/node* | sed 's|^$wi/||' | xargs || true"; }
  job=200
  for policy in $KVM_POLICIES; do
    job=$((job + 1))
    if [[ $policy == weighted:* && $kernel == *" no-weighted" ]]; then
      # weighted interleave needs Linux 6.9. The prolog composes nothing and records why, so
      # that the job's steps fail with it (the node is not drained for it).
      out=$(g "SLURM_JOB_USER=root $HOST_SIDE prolog $job 0 --option compose-mem=${MEM_MIB}M --option compose-mem-policy=$policy -- $ARGS 2>&1") || true
      grep -q "$policy needs Linux 6.9 or later" <<<"$out" || fail "the $policy policy's refusal names no kernel: $out"
      [[ $(g "ls /sys/bus/cxl/devices 2>/dev/null | grep -c '^region' || true") == 0 ]] || fail "the refused job made a region"
      if got=$(g "$HOST_SIDE task $job 0 -- $ARGS 2>&1"); then
        fail "the task of job $job, whose $policy policy was refused, ran: $got"
      fi
      grep -q 'needs Linux 6.9 or later' <<<"$got" || fail "job $job's task failed without the kernel's sentence: $got"
      log "$policy refused on Linux ${kernel% *}: $(grep -o 'needs Linux 6.9[^;]*' <<<"$out" | head -1)"
      continue
    fi
    # The node-wide weights before the job, to be found again after its epilog.
    before=$(weights)
    out=$(g "SLURM_JOB_USER=root $HOST_SIDE prolog $job 0 --option compose-mem=${MEM_MIB}M --option compose-mem-policy=$policy -- $ARGS 2>&1") ||
      fail "the prolog of job $job ($policy) failed in the guest on Linux ${kernel% *}: $out"
    [[ $out != *"needs Linux 6.9"* ]] || fail "job $job ($policy): refused on Linux ${kernel% *}, which has weighted interleave: $out"
    read -r p_start p_compose p_end < <(grep '^timing: prolog' <<<"$out" |
      sed 's/.*start=\([0-9.]*\) compose_done=\([0-9.]*\) end=\([0-9.]*\).*/\1 \2 \3/')
    if ((KVM_CXL > 0)); then
      regions=$(g "ls /sys/bus/cxl/devices | grep -c '^region' || true")
      [[ $regions == 1 ]] || fail "job $job: the guest shows $regions CXL regions, not the one its prolog made"
    else
      [[ $(g "basename \$(readlink /sys/bus/dax/devices/dax0.0/driver)") == kmem ]] ||
        fail "job $job: the prolog did not give dax0.0 to kmem"
    fi
    during=$(weights)
    # The persistent memory is RAM to QEMU: the task hook sets the task's own policy there,
    # which the job's program inherits. QEMU 7.2's CXL window runs no code (composer_kvm_touch).
    own=
    ((KVM_PMEM == 0)) || own=--own-policy
    got=$(g "$HOST_SIDE task $job 0 $own --run '$TOUCH 32' -- $ARGS 2>&1") || fail "job $job's task failed: $got"
    node=$(sed -n 's/^COMPOSER_MEM_NUMA=//p' <<<"$got")
    [[ $node =~ ^[0-9]+$ && $node != 0 ]] || fail "job $job: COMPOSER_MEM_NUMA is '$node', not the CXL node: $got"
    pages=$(grep '^pages:' <<<"$got") || fail "job $job: no pages line: $got"
    # The policy the task hook set, as get_mempolicy(2) answers it: MPOL_BIND (2) on the CXL
    # node, MPOL_PREFERRED_MANY (5) on DRAM, MPOL_INTERLEAVE (3) and
    # MPOL_WEIGHTED_INTERLEAVE (6) on both.
    case $policy in
      bind) want="2:$(printf '0x%x' $((1 << node)))" ;;
      preferred) want=5:0x1 ;;
      interleave) want="3:$(printf '0x%x' $((1 | 1 << node)))" ;;
      weighted:*) want="6:$(printf '0x%x' $((1 | 1 << node)))" ;;
    esac
    [[ $pages == *" policy $want" ]] || fail "job $job ($policy): the task hook set policy ${pages##* policy }, not $want"
    if [[ $policy == weighted:* ]]; then
      # The prolog wrote D to the DRAM node's weight and C to the job's CXL node's.
      IFS=: read -r _ d c <<<"$policy"
      [[ " $during " == *" node0:$d "* && " $during " == *" node$node:$c "* ]] ||
        fail "job $job ($policy): the weights during the job are '$during', not node0:$d and node$node:$c (before: '$before')"
    fi
    # The node's memory as the kernel counts it, online.
    mib=$(g "grep MemTotal /sys/devices/system/node/node$node/meminfo" | awk '{print int($(NF-1) / 1024)}')
    awk -v p="$policy" -v n="$node" -v line="$pages" 'BEGIN {
      split(line, w, /[ =]/); total = 0
      for (i = 1; i in w; i++) if (w[i] ~ /^N[0-9]+$/) { c[substr(w[i], 2)] = w[i + 1]; total += w[i + 1] }
      dram = c[0] + 0; cxl = c[n] + 0
      if (total == 0) { print "no pages counted: " line; exit 1 }
      if (p == "bind" && cxl < total * 0.99) { print "bind: " cxl " of " total " pages on node " n; exit 1 }
      if (p == "preferred" && dram < total * 0.99) { print "preferred: " dram " of " total " pages on DRAM node 0"; exit 1 }
      if (p == "interleave" && (dram + cxl < total * 0.99 || (dram - cxl) ^ 2 > (total * 0.05) ^ 2)) {
        print "interleave: node 0 " dram ", node " n " " cxl " of " total " pages: not within 5% of even"; exit 1 }
      if (p ~ /^weighted:/) {
        split(p, r, ":"); share = r[3] / (r[2] + r[3])
        if (dram + cxl < total * 0.99 || (cxl / total - share) ^ 2 > 0.02 ^ 2) {
          printf "%s: node 0 %d, node %s %d of %d pages: CXL holds %.4f, not %.4f within 0.02\n", p, dram, n, cxl, total, cxl / total, share; exit 1 }
        printf "kvm: %s: node 0 %d, node %s %d pages (%.3f:1; wanted %s:%s): CXL holds %.4f of them, wanted %.4f\n", p, dram, n, cxl, dram / cxl * 1.0, r[2], r[3], cxl / total, share
      }
    }' >&2 || fail "job $job ($policy): the pages are not where the policy says: $pages"
    awk -v j="$job" -v s="$p_start" -v c="$p_compose" -v e="$p_end" -v p="$policy" -v n="$node" -v m="$mib" -v pg="$pages" 'BEGIN {
      printf "kvm: job %s (%s): compose request to memory usable in the guest: %.2f s: fabric %.2f s (composerd, Redfish), host side %.2f s (region and namespace where it makes them, dax, kmem, blocks online); node %s, %s MiB online; %s\n", j, p, e - s, c - s, e - c, n, m, pg
    }' >&2
    t=$SECONDS
    out=$(g "$HOST_SIDE epilog $job 0 -- $ARGS 2>&1") || fail "job $job's epilog failed: $out"
    left=$(g "ls /sys/bus/cxl/devices 2>/dev/null | grep -c '^region' || true; ls /sys/bus/dax/devices | wc -l; ls /sys/devices/system/node/node$node 2>/dev/null | grep -c '^memory' || true" | xargs)
    # The persistent memory's dax device is the admin's: back to device_dax, not destroyed.
    want="0 0 0"
    ((KVM_PMEM == 0)) || want="0 1 0"
    [[ $left == "$want" ]] || fail "job $job: after the epilog the guest shows CXL regions, dax devices, blocks of node $node: $left, not $want"
    after=$(weights)
    [[ $after == "$before" ]] || fail "job $job ($policy): the epilog left the weights '$after', before the job they were '$before'"
    log "job $job ($policy): $pages${during:+; weights during the job: $during, after its epilog: $after}; epilog offlined node $node (and destroyed the region it made) in $((SECONDS - t)) s"
  done
fi
log "PASS"
