#!/usr/bin/env bash
# Chroots of Debian releases, made from Debian's archive and cached, for building and testing
# slurm-composer against the Slurm each release ships (bookworm 22.05, trixie 24.11, sid 26.05).
#
#   chroot.sh create SUITE KIND   make (or reuse) the cached chroot; prints its folder
#   chroot.sh run SUITE KIND [--overlay] [--bind FROM:TO]... -- COMMAND...
#                                 run COMMAND (bash -c) as root inside it, the source tree at
#                                 /src/main (read-only) and each FROM folder of this machine
#                                 at TO; with --overlay every change to the chroot itself is
#                                 thrown away afterwards
#
# KIND is `build` (compilers, every package contrib/install-deps.sh names, debian/control's
# Build-Depends, Debian's packaging tools) or `run` (only what the e2e scripts need: Slurm,
# munge, a shell's tools): the clean system the built packages are installed into (apt fetches
# their dependencies from the archive then, as on a site's machine); or `guest`: the root file
# system of the QEMU guests of tests/kvm (a kernel, systemd, udev, nvme-cli, ndctl, numactl,
# slurmd and the libraries the built plugin needs), set up by tests/kvm/guest-setup.sh.
#
# Cache: $COMPOSER_CHROOT_CACHE (default /var/cache/slurm-composer/chroots), one folder per
# suite and kind, rebuilt when the package list or this script's recipe changes. Every mount is
# undone when the command ends, whatever happens; a process left running inside is killed first.
# Must run as root. Needs mmdebstrap and network access to Debian's archive the first time.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
CACHE=${COMPOSER_CHROOT_CACHE:-/var/cache/slurm-composer/chroots}
MIRROR=${COMPOSER_DEBIAN_MIRROR:-http://deb.debian.org/debian}
RECIPE=3  # bump when the way a chroot is made changes

log() { echo "chroot: $*" >&2; }
die() { log "$*"; exit 1; }

suite_ok() { [[ $1 == bookworm || $1 == trixie || $1 == sid ]]; }

packages() {  # packages SUITE KIND: the package list, space-separated
  local kind=$2
  case $kind in
    build)
      # Everything the project builds and tests with, and what a package build needs; not the
      # browser the chart render check uses (chromium, python3-pil: it runs on the host only
      # and skips where they are missing), which would only make each chroot much bigger, nor
      # the fuzz level's clang 14 (host only; a newer release has another clang), nor
      # mmdebstrap, which makes these chroots, nor the HA level's etcd and Patroni (tests/ha
      # runs on the host only).
      local deps
      # Nor QEMU, which runs the kvm level's guests on the host.
      deps=$("$SRC/contrib/install-deps.sh" --list | tr ' ' '\n' |
        grep -vxE 'chromium|python3-pil|clang-14|libclang-rt-14-dev|mmdebstrap|etcd-server|patroni|qemu-system-x86' |
        xargs)
      echo "$deps dpkg-dev fakeroot file"
      ;;
    run)
      echo "slurmctld slurmd slurm-client munge curl jq procps iproute2 hostname ca-certificates" \
        "python3 bc openssl tzdata"
      ;;
    guest)
      # The libraries of the plugin built on bookworm under the names each release gives them
      # (trixie has no libjsoncpp25: tests/kvm copies the host's in).
      local libs="libcurl4 libjsoncpp25"
      [[ $1 == bookworm ]] || libs="libcurl4t64 libjsoncpp26"
      echo "linux-image-amd64 systemd systemd-sysv udev kmod dbus nvme-cli numactl ndctl daxctl" \
        "slurmd slurm-client munge $libs libmunge2 iproute2 procps util-linux" \
        "e2fsprogs psmisc"
      ;;
    *) die "unknown kind '$kind': allowed are build, run and guest" ;;
  esac
}

folder() { echo "$CACHE/$1-$2"; }

create() {  # create SUITE KIND
  local suite=$1 kind=$2 dir want list
  suite_ok "$suite" || die "unknown suite '$suite': allowed are bookworm, trixie and sid"
  list=$(packages "$suite" "$kind")
  dir=$(folder "$suite" "$kind")
  want="recipe=$RECIPE suite=$suite kind=$kind packages=$(tr ' ' '\n' <<<"$list" | sort -u | xargs)"
  local hooks=()
  if [[ $kind == build ]]; then
    # And the package's Build-Depends as apt resolves them for this suite (alternatives, build
    # profiles); the chroot is made again when they change.
    want="$want control=$(sha256sum "$SRC/debian/control" | cut -c1-16)"
    hooks+=(--customize-hook="mkdir -p \"\$1/tmp/build-deps/debian\"")
    hooks+=(--customize-hook="copy-in $SRC/debian/control /tmp/build-deps/debian")
    hooks+=(--customize-hook='chroot "$1" apt-get build-dep -y -qq /tmp/build-deps && rm -rf "$1/tmp/build-deps"')
  fi
  if [[ $kind == guest ]]; then
    # A machine of its own rather than a chroot: its boot and its test agent, made again when
    # the setup script changes.
    local setup=$SRC/tests/kvm/guest-setup.sh
    want="$want setup=$(sha256sum "$setup" | cut -c1-16)"
    hooks+=(--customize-hook="copy-in $setup /tmp")
    hooks+=(--customize-hook='chroot "$1" /bin/sh /tmp/guest-setup.sh && rm -f "$1/tmp/guest-setup.sh"')
  fi
  # One maker per chroot: the test command fetches every chroot in the background while the
  # release tests may already ask for theirs; a second caller waits here, then finds it made.
  mkdir -p "$CACHE"
  local lock
  exec {lock}>"$CACHE/.$suite-$kind.lock"
  flock "$lock"
  if [[ -f $dir/.composer-chroot && $(cat "$dir/.composer-chroot") == "$want" ]]; then
    echo "$dir"
    return 0
  fi
  command -v mmdebstrap >/dev/null ||
    die "mmdebstrap is not installed (apt-get install -y mmdebstrap)"
  log "making the $suite $kind chroot in $dir (packages: $list)"
  # Never remove a chroot in use: /proc, /sys and /dev are bound inside while it runs.
  if grep -qE " ($dir|$dir\.new)/" /proc/self/mounts; then
    die "$dir is out of date but in use (mounted); run again when it is not"
  fi
  rm -rf --one-file-system "$dir" "$dir.new"
  local opts=()
  # The archive copy reachable here may be frozen: sid's Release file has then expired.
  [[ $suite == sid ]] && opts+=(--aptopt='Acquire::Check-Valid-Until "false"')
  # Packages start no services inside (policy-rc.d), and nothing is left half-made on failure.
  mmdebstrap --variant=minbase --quiet "${opts[@]}" \
    --include="$(tr ' ' ',' <<<"$list")" \
    --setup-hook='mkdir -p "$1/usr/sbin" && printf "#!/bin/sh\nexit 101\n" >"$1/usr/sbin/policy-rc.d" && chmod 755 "$1/usr/sbin/policy-rc.d"' \
    "${hooks[@]}" \
    "$suite" "$dir.new" "deb $MIRROR $suite main" >&2 ||
    { rm -rf "$dir.new"; die "mmdebstrap of $suite failed"; }
  echo "$want" >"$dir.new/.composer-chroot"
  mv "$dir.new" "$dir"
  echo "$dir"
}

# Mounts, recorded in order so that cleanup undoes exactly these, innermost first.
MOUNTS=()
ROOT=
OVERLAY=
bind() {  # bind FROM TO [ro]
  mkdir -p "$2"
  mount --rbind "$1" "$2"
  mount --make-rslave "$2"
  MOUNTS+=("$2")
  if [[ ${3:-} == ro ]]; then mount -o remount,bind,ro "$2"; fi
}

cleanup() {
  local rc=$? pid link i
  if [[ -n $ROOT ]]; then
    # Whatever still runs inside (a daemon a failed test left behind) holds the mounts.
    for link in /proc/[0-9]*/root; do
      pid=${link#/proc/}
      pid=${pid%/root}
      [[ $(readlink "$link" 2>/dev/null) == "$ROOT"* ]] || continue
      log "killing process $pid left running inside $ROOT: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
      kill -KILL "$pid" 2>/dev/null || true
    done
    sleep 0.2
  fi
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
    umount -R "${MOUNTS[i]}" 2>/dev/null || umount -R -l "${MOUNTS[i]}" ||
      log "could not unmount ${MOUNTS[i]}"
  done
  MOUNTS=()
  # What the commands inside mounted themselves (ip netns makes /run/netns a mount point),
  # deepest first.
  if [[ -n $ROOT ]]; then
    local mounted
    while read -r mounted; do
      umount -l "$mounted" 2>/dev/null || log "could not unmount $mounted"
    done < <(awk -v root="$ROOT/" 'index($2, root) == 1 { print $2 }' /proc/self/mounts | sort -r)
  fi
  if [[ -n $OVERLAY ]]; then
    # Never remove through a mount that is still there (the source tree is bound inside).
    if grep -q " $OVERLAY/" /proc/self/mounts; then
      log "left $OVERLAY in place: something is still mounted under it"
    else
      rm -rf --one-file-system "$OVERLAY"
    fi
  fi
  exit "$rc"
}

run() {  # run SUITE KIND [--overlay] [--bind FROM:TO]... -- COMMAND...
  local suite=$1 kind=$2 base overlay=no binds=()
  shift 2
  while (($#)) && [[ $1 != -- ]]; do
    case $1 in
      --overlay) overlay=yes ;;
      --bind) binds+=("$2"); shift ;;
      *) die "run: unknown option '$1' (allowed: --overlay, --bind FROM:TO)" ;;
    esac
    shift
  done
  [[ ${1:-} == -- ]] || die "usage: chroot.sh run SUITE KIND [--overlay] [--bind FROM:TO]... -- COMMAND..."
  shift
  base=$(create "$suite" "$kind")
  trap cleanup EXIT
  trap 'exit 143' TERM INT
  if [[ $overlay == yes ]]; then
    OVERLAY=$(mktemp -d "$CACHE/.overlay-$suite-$kind.XXXXXX")
    mkdir -p "$OVERLAY"/{upper,work,root}
    mount -t overlay overlay -o "lowerdir=$base,upperdir=$OVERLAY/upper,workdir=$OVERLAY/work" \
      "$OVERLAY/root"
    MOUNTS+=("$OVERLAY/root")
    ROOT=$OVERLAY/root
  else
    ROOT=$base
    # The chroot's / a mount point of its own, as on a machine: mount propagation changes on /
    # ("ip -n NETNS ..." makes / a slave in its own mount namespace) refuse a plain folder.
    bind "$ROOT" "$ROOT"
  fi
  bind /proc "$ROOT/proc"
  bind /sys "$ROOT/sys"
  bind /dev "$ROOT/dev"
  bind "$SRC" "$ROOT/src/main" ro
  local b
  for b in "${binds[@]}"; do
    [[ $b == ?*:/?* && -d ${b%%:*} ]] || die "--bind $b: expected an existing FOLDER:/PATH"
    bind "${b%%:*}" "$ROOT/${b#*:}"
  done
  mkdir -p "$ROOT/tmp" "$ROOT/run"
  chmod 1777 "$ROOT/tmp"
  local rc=0
  chroot "$ROOT" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    CI="${CI:-}" \
    /bin/bash -c "$*" || rc=$?
  return "$rc"
}

[[ $(id -u) == 0 ]] || die "must run as root (chroot and mount)"
case ${1:-} in
  create) (($# == 3)) || die "usage: chroot.sh create SUITE KIND"; create "$2" "$3" ;;
  run) shift; run "$@" ;;
  *) die "usage: chroot.sh create SUITE KIND | run SUITE KIND [--overlay] [--bind FROM:TO]... -- COMMAND..." ;;
esac
