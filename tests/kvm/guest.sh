#!/usr/bin/env bash
# QEMU guests for the kvm test level: compute hosts with a real kernel (Debian's) whose PCIe
# devices a test fabric hot-plugs over QMP (qmp.py).
#
#   guest.sh image              make (or reuse) the cached guest image; prints its folder
#   guest.sh start DIR          boot a guest whose files are DIR's (made if missing)
#   guest.sh exec DIR [--timeout S] -- COMMAND...   run COMMAND (bash -c) as root in the guest;
#                               prints its output and exits with its status (124 on timeout)
#   guest.sh stop DIR           stop the guest (by its PID), also after a start that failed
#
# The image: the root file system chroot.sh makes (kind guest: tests/kvm/guest-setup.sh) as an
# ext4 disk image, with its kernel and initrd beside it, in SUITE-guest-image/ of
# $COMPOSER_GUEST_CACHE (default /var/cache/slurm-composer/guests, where that root file system
# is cached too), made again when the root file system is. SUITE is GUEST_SUITE: bookworm (the
# default; Linux 6.1) or trixie (Linux 6.12, which has weighted interleave); each image is
# cached under its own name. A guest boots it read-only
# (snapshot: its writes are thrown away) by direct kernel boot, with:
#   DIR/qmp.sock      its QMP socket; DIR/console.log  its serial console; DIR/qemu.pid
#   DIR/share         a 9p share the guest mounts at /mnt/share: the test agent's mailbox
#   $GUEST_TREE       (default: this source tree; the scenarios share the build tree) shared
#                     read-only at the same path inside, so that the built programs run there
#                     as they are
#   GUEST_SLOTS       (default 4) empty pcie-root-ports rp1..rpN with native hot-plug (pciehp)
#   GUEST_MEM         (default 1024) MiB of memory, GUEST_CPUS (default 2)
#   GUEST_CXL         (default 0: none) MiB of CXL memory: a CXL Type 3 device present at
#                     boot (QEMU 7.2 offers persistent memory only: its `memdev`, a file
#                     DIR/cxl-mem.raw, and a label area DIR/cxl-lsa.raw) behind a CXL host bridge
#                     (pxb-cxl) and root port (cxl-rp), and a fixed memory window (cxl-fmw) of
#                     4 GiB for it: no region until the host side creates one
#   GUEST_PMEM        (default 0: none; not with GUEST_CXL) MiB of persistent memory: an ACPI
#                     NVDIMM (its memory a file, DIR/pmem.raw) on NUMA node 1, which has no
#                     CPUs: memory a dax device brings online as a node of its own, as a CXL
#                     region's is, where the guest's kernel makes no CXL region
# QEMU's user networking: the guest is 10.0.2.15 and reaches this machine's loopback at
# 10.0.2.2; GUEST_HOSTFWD (default none), QEMU's hostfwd rule (tcp:127.0.0.1:PORT-:PORT),
# lets this machine reach a port of the guest. KVM is used where a guest boots under it within GUEST_KVM_WAIT (default 60) s, else
# TCG; the verdict is kept in the cache for this QEMU, kernel and host kernel
# (GUEST_ACCEL=kvm|tcg forces one). start waits up to GUEST_BOOT_WAIT (default 600) s for
# the agent and prints how long the boot took. Must run as root; needs qemu-system-x86.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
CACHE=${COMPOSER_GUEST_CACHE:-/var/cache/slurm-composer/guests}
GUEST_TREE=${GUEST_TREE:-$SRC}
SUITE=${GUEST_SUITE:-bookworm}

log() { echo "guest: $*" >&2; }
die() { log "$*"; exit 1; }

image() {
  local root want img=$CACHE/$SUITE-guest-image
  root=$(COMPOSER_CHROOT_CACHE=$CACHE "$SRC/tests/releases/chroot.sh" create "$SUITE" guest)
  want=$(cat "$root/.composer-chroot")
  local lock
  exec {lock}>"$CACHE/.$SUITE-guest-image.lock"
  flock "$lock"
  if [[ -f $img/marker && $(cat "$img/marker") == "$want" ]]; then
    echo "$img"
    return 0
  fi
  log "making the guest's disk image in $img"
  rm -rf "$img.new"
  mkdir -p "$img.new"
  local mib
  mib=$(($(du -sm --one-file-system "$root" | cut -f1) * 3 / 2 + 512))
  mke2fs -q -t ext4 -F -L root -d "$root" "$img.new/root.img" "${mib}M" ||
    { rm -rf "$img.new"; die "mke2fs of the guest image failed"; }
  local kernel initrd
  kernel=$(ls "$root"/boot/vmlinuz-* | sort -V | tail -1)
  initrd=$(ls "$root"/boot/initrd.img-* | sort -V | tail -1)
  [[ -f $kernel && -f $initrd ]] || { rm -rf "$img.new"; die "no kernel or initrd in $root/boot"; }
  cp "$kernel" "$img.new/vmlinuz"
  cp "$initrd" "$img.new/initrd.img"
  echo "$want" >"$img.new/marker"
  rm -rf "$img"
  mv "$img.new" "$img"
  echo "$img"
}

pid_of() { [[ -f $1/qemu.pid ]] && cat "$1/qemu.pid"; }

alive() {
  local pid
  pid=$(pid_of "$1") || return 1
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null
}

stop() {
  local dir=$1 pid i
  pid=$(pid_of "$dir") || return 0
  if kill -TERM "$pid" 2>/dev/null; then
    for ((i = 0; i < 100; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/qemu.pid"
}

boot() {  # boot DIR IMAGE ACCEL WAIT: 0 once the agent answers within WAIT seconds
  local dir=$1 img=$2 accel=$3 wait=$4 slots=${GUEST_SLOTS:-4} i
  local args=(
    -machine "q35,accel=$accel" -m "${GUEST_MEM:-1024}" -smp "${GUEST_CPUS:-2}"
    -nodefaults -no-user-config -display none
    -kernel "$img/vmlinuz" -initrd "$img/initrd.img"
    -append "root=/dev/vda rw console=ttyS0 panic=-1 composer.src=$GUEST_TREE"
    -serial "file:$dir/console.log"
    -qmp "unix:$dir/qmp.sock,server=on,wait=off"
    # Each device on the root bus by name: QEMU would put one without a bus on a CXL host
    # bridge's bus (GUEST_CXL), which takes only bridges.
    -drive "file=$img/root.img,if=none,id=root,format=raw,snapshot=on"
    -device virtio-blk-pci,drive=root,bus=pcie.0
    -fsdev "local,id=share,path=$dir/share,security_model=none"
    -device virtio-9p-pci,fsdev=share,mount_tag=share,bus=pcie.0
    -fsdev "local,id=src,path=$GUEST_TREE,security_model=none,readonly=on"
    -device virtio-9p-pci,fsdev=src,mount_tag=src,bus=pcie.0
    -netdev "user,id=net0${GUEST_HOSTFWD:+,hostfwd=$GUEST_HOSTFWD}" -device virtio-net-pci,netdev=net0,bus=pcie.0
    # Native PCIe hot-plug (pciehp and its attention button), as a server's slots, rather
    # than QEMU's ACPI hot-plug.
    -global ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off
    -pidfile "$dir/qemu.pid" -daemonize
  )
  for ((i = 1; i <= slots; i++)); do
    args+=(-device "pcie-root-port,id=rp$i,bus=pcie.0,chassis=$i,slot=$i")
  done
  local cxl=${GUEST_CXL:-0}
  [[ $cxl =~ ^[0-9]+$ ]] || die "GUEST_CXL=$cxl: expected MiB of CXL memory (0: none)"
  if ((cxl > 0)); then
    # Regions are made of 256 MiB granules of the window.
    ((cxl % 256 == 0 && cxl <= 4096)) || die "GUEST_CXL=$cxl: allowed are multiples of 256 up to 4096"
    args[1]="q35,accel=$accel,cxl=on"
    # The guest's RAM as NUMA node 0 by name: QEMU then gives the guest an SRAT, and only with
    # one does Linux make a NUMA node of its own for the CXL window (node 1), which the
    # region's memory joins when it is onlined.
    args+=(
      -object "memory-backend-ram,id=ram0,size=${GUEST_MEM:-1024}M"
      -numa "node,nodeid=0,cpus=0-$((${GUEST_CPUS:-2} - 1)),memdev=ram0"
      -object "memory-backend-file,id=cxl-mem0,share=on,mem-path=$dir/cxl-mem.raw,size=${cxl}M"
      -object "memory-backend-file,id=cxl-lsa0,share=on,mem-path=$dir/cxl-lsa.raw,size=256M"
      -device pxb-cxl,bus_nr=32,bus=pcie.0,id=cxl.0
      -device cxl-rp,port=0,bus=cxl.0,id=cxl-rp0,chassis=32,slot=0
      -device cxl-type3,bus=cxl-rp0,memdev=cxl-mem0,lsa=cxl-lsa0,id=cxl-pmem0
      -M cxl-fmw.0.targets.0=cxl.0,cxl-fmw.0.size=4G
    )
    rm -f "$dir/cxl-mem.raw" "$dir/cxl-lsa.raw"
  fi
  local pmem=${GUEST_PMEM:-0}
  [[ $pmem =~ ^[0-9]+$ ]] || die "GUEST_PMEM=$pmem: expected MiB of persistent memory (0: none)"
  if ((pmem > 0)); then
    ((cxl == 0 && pmem % 128 == 0 && pmem <= 4096)) ||
      die "GUEST_PMEM=$pmem: allowed are multiples of 128 up to 4096, without GUEST_CXL"
    args[1]="q35,accel=$accel,nvdimm=on"
    args[3]="${GUEST_MEM:-1024},slots=1,maxmem=$((${GUEST_MEM:-1024} + pmem))M"
    args+=(
      -object "memory-backend-ram,id=ram0,size=${GUEST_MEM:-1024}M"
      -numa "node,nodeid=0,cpus=0-$((${GUEST_CPUS:-2} - 1)),memdev=ram0"
      -numa node,nodeid=1
      -object "memory-backend-file,id=pmem0,share=on,mem-path=$dir/pmem.raw,size=${pmem}M"
      -device nvdimm,memdev=pmem0,id=nvdimm0,node=1
    )
    rm -f "$dir/pmem.raw"
  fi
  rm -rf "$dir/share"
  mkdir -p "$dir/share"
  rm -f "$dir/qmp.sock" "$dir/console.log"
  local t0=$SECONDS
  qemu-system-x86_64 "${args[@]}" || die "qemu-system-x86_64 did not start (see above)"
  while ((SECONDS - t0 < wait)); do
    if [[ -f $dir/share/agent-ready ]]; then
      log "booted under $accel in $((SECONDS - t0)) s (guest's uptime then: $(cut -d' ' -f1 "$dir/share/agent-ready") s)"
      return 0
    fi
    alive "$dir" || { log "QEMU ($accel) exited during the boot; console: $(tail -3 "$dir/console.log" 2>/dev/null)"; return 1; }
    sleep 1
  done
  log "no agent within $wait s under $accel; console's last lines: $(tail -3 "$dir/console.log" 2>/dev/null)"
  stop "$dir"
  return 1
}

start() {
  local dir=$1 img accel verdict key
  [[ -d $GUEST_TREE ]] || die "GUEST_TREE $GUEST_TREE is not a folder"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  alive "$dir" && die "a guest already runs in $dir (pid $(pid_of "$dir")); stop it first"
  img=$(image)
  key="$(qemu-system-x86_64 --version | head -1) | $(cat "$img/marker" | sha256sum | cut -c1-16) | $(uname -r)"
  # One verdict per suite: each image's key would otherwise overwrite the other's.
  verdict=$CACHE/accel
  [[ $SUITE == bookworm ]] || verdict=$CACHE/accel-$SUITE
  if [[ -n ${GUEST_ACCEL:-} ]]; then
    [[ $GUEST_ACCEL == kvm || $GUEST_ACCEL == tcg ]] ||
      die "GUEST_ACCEL=$GUEST_ACCEL: allowed are kvm and tcg"
    accel=$GUEST_ACCEL
  elif [[ -f $verdict && $(head -1 "$verdict") == "$key" ]]; then
    accel=$(sed -n 2p "$verdict")
  elif [[ -r /dev/kvm && -w /dev/kvm ]]; then
    accel=try-kvm
  else
    accel=tcg
  fi
  if [[ $accel == try-kvm ]]; then
    if boot "$dir" "$img" kvm "${GUEST_KVM_WAIT:-60}"; then
      printf '%s\nkvm\n' "$key" >"$verdict"
      return 0
    fi
    log "KVM does not boot this guest here; TCG from now on (verdict in $verdict)"
    printf '%s\ntcg\n' "$key" >"$verdict"
    accel=tcg
  fi
  boot "$dir" "$img" "$accel" "${GUEST_BOOT_WAIT:-600}" || die "the guest in $dir did not boot"
}

run_in() {  # exec DIR [--timeout S] -- COMMAND...
  local dir=$1 timeout=600
  shift
  if [[ ${1:-} == --timeout ]]; then timeout=$2; shift 2; fi
  [[ ${1:-} == -- ]] || die "usage: guest.sh exec DIR [--timeout S] -- COMMAND..."
  shift
  [[ -f $dir/share/agent-ready ]] || die "no guest agent in $dir (not started?)"
  local id box=$dir/share/cmd t0=$SECONDS
  id=$(date +%s%N)-$$-$RANDOM
  printf '%s\n' "$*" >"$box/$id.tmp"
  mv "$box/$id.tmp" "$box/$id.sh"
  while [[ ! -f $box/$id.rc ]]; do
    alive "$dir" || die "the guest in $dir is gone"
    if ((SECONDS - t0 >= timeout)); then
      log "no answer from the guest within $timeout s to: $*"
      cat "$box/$id.out" 2>/dev/null
      return 124
    fi
    sleep 0.1
  done
  cat "$box/$id.out"
  local rc
  rc=$(cat "$box/$id.rc")
  rm -f "$box/$id".*
  return "$rc"
}

[[ $(id -u) == 0 ]] || die "must run as root"
[[ $SUITE == bookworm || $SUITE == trixie ]] ||
  die "GUEST_SUITE=$SUITE: allowed are bookworm (Linux 6.1) and trixie (Linux 6.12)"
case ${1:-} in
  image) (($# == 1)) || die "usage: guest.sh image"; mkdir -p "$CACHE"; image ;;
  start) (($# == 2)) || die "usage: guest.sh start DIR"; start "$2" ;;
  exec) (($# >= 3)) || die "usage: guest.sh exec DIR [--timeout S] -- COMMAND..."; shift; run_in "$@" ;;
  stop) (($# == 2)) || die "usage: guest.sh stop DIR"; stop "$2" ;;
  *) die "usage: guest.sh image | start DIR | exec DIR [--timeout S] -- COMMAND... | stop DIR" ;;
esac
