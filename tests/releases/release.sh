#!/usr/bin/env bash
# One Debian release end to end, in chroots made from Debian's archive (tests/releases/chroot.sh):
#   1. in the release's build chroot, the Debian packages are built with dpkg-buildpackage
#      against the release's own Slurm and toolchain, warnings as errors; the package build
#      compiles the test suites too and runs the unit level (dh_auto_test);
#   2. in that build tree: the integration level and the e2e suite slurm_e2e (all e2e suites
#      with --full; COMPOSER_RELEASE_E2E=REGEX names others, e.g.
#      '^(policy_e2e|remote_licenses_e2e)$' for Slurm's licenses following the pool) on a
#      throw-away cluster of the release's Slurm, on ports of its own;
#   3. the packages are installed into a clean chroot of the release (a throw-away overlay of
#      its run chroot) and a composed job runs from the installed files alone.
# Usage: tests/releases/release.sh SUITE [--full] [--no-tests] [--wide-install] [--installed COMMAND]
#                                    [--packages|--check]
#   SUITE       bookworm (Slurm 22.05), trixie (24.11) or sid (26.05)
#   --full      every e2e suite in step 2 (also COMPOSER_RELEASE_FULL=1 in the environment)
#   --no-tests  packages only (nocheck): steps 1 and 3, no test suites compiled
#   --wide-install  step 3 runs every one-node e2e scenario but the 50-job array from the
#               installed files, not three: the release's e2e suite when step 2 does not run
#   --installed COMMAND  step 3 runs COMMAND (bash, in the source tree) instead, e.g. one
#               multi-node scenario from the installed files: --no-tests --check --installed
#               tests/e2e/zone_scenarios.sh. It finds the installed paths in BUILD_DIR,
#               PLUGIN_DIR, COMPOSERD and COMPOSER_SLURMCTLD, the release's ports in E2E_PORT,
#               CTLD_PORT and SLURMD_PORT and its subnet in E2E_SUBNET (each may be set anew
#               in COMMAND), and the results folder at /debs
#   --packages  step 1 alone; --check: steps 2 and 3 alone, on the packages (and, with tests,
#               the build tree) an earlier --packages left. The test command runs them as two
#               ctest entries so that only the compiling one holds the build lock.
# Results: $COMPOSER_RELEASE_OUT (default build/releases)/SUITE: the .deb files and the logs.
# Must run as root.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
CHROOT=$HERE/chroot.sh

suite=${1:-}
shift || true
full=no
[[ ${COMPOSER_RELEASE_FULL:-0} == 1 ]] && full=yes
tests=yes wide=no steps=all installed=
while (($#)); do
  case $1 in
    --full) full=yes ;;
    --no-tests) tests=no ;;
    --wide-install) wide=yes ;;
    --installed)
      [[ -n ${2:-} ]] || { echo "release: --installed needs a COMMAND (e.g. tests/e2e/run.sh)" >&2; exit 2; }
      installed=$2
      shift
      ;;
    --packages) steps=packages ;;
    --check) steps=check ;;
    *)
      echo "release: unknown option '$1' (allowed: --full, --no-tests, --wide-install," \
        "--installed COMMAND, --packages, --check)" >&2
      exit 2
      ;;
  esac
  shift
done
case $suite in
  bookworm) port_base=21000 ;;
  trixie) port_base=22000 ;;
  sid) port_base=23000 ;;
  *)
    echo "release: usage: release.sh bookworm|trixie|sid [--full] [--no-tests] [--wide-install]" \
      "[--installed COMMAND] [--packages|--check]" >&2
    exit 2
    ;;
esac
[[ $(id -u) == 0 ]] || { echo "release: must run as root (chroot, mount, slurmd)" >&2; exit 1; }
command -v mmdebstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null

out=$(realpath -m "${COMPOSER_RELEASE_OUT:-$SRC/build/releases}/$suite")
if [[ $steps == check ]]; then
  compgen -G "$out/*.deb" >/dev/null ||
    { echo "release $suite: no packages in $out: run release.sh $suite --packages first" >&2; exit 1; }
else
  rm -rf "$out"
  mkdir -p "$out"
fi
log() { echo "release $suite: $*" >&2; }
step() {  # step NAME COMMAND...: runs it, its output in $out/NAME.log, says how it went
  local name=$1 start=$SECONDS rc=0
  shift
  log "$name ..."
  "$@" >"$out/$name.log" 2>&1 || rc=$?
  if ((rc == 0)); then
    log "$name: ok ($((SECONDS - start)) s)"
  else
    log "$name: FAILED (exit $rc, $((SECONDS - start)) s); the end of $out/$name.log:"
    tail -n 60 "$out/$name.log" >&2
  fi
  return "$rc"
}

# Inside the build chroot: a fresh copy of the sources, then the package build. ccache's
# cache stays in the chroot, so a second run compiles only what changed.
# Without --full the build is unoptimised and without debug information (noopt, -g0, no
# dbgsym packages): less than half the compile time of a site's build, the same sources, the
# release's compiler and Slurm headers with warnings as errors, though not the warnings only
# the optimiser finds (those the host's own -O2 build and --full catch). --full builds as a
# site does.
build_script() {
  local opts="werror parallel=$(nproc)" flags=""
  [[ $tests == no ]] && opts="$opts nocheck"
  [[ $full == no ]] && opts="$opts noopt noddebs" flags="export DEB_CFLAGS_APPEND=-g0 DEB_CXXFLAGS_APPEND=-g0"
  cat <<SCRIPT
set -euo pipefail
rm -rf /build/src /build/*.deb /build/*.buildinfo /build/*.changes
mkdir -p /build/src /var/cache/ccache
tar -C /src/main --exclude=./build --exclude='./obj-*' --exclude=./.git -cf - . | tar -C /build/src -xf -
cd /build/src
export CCACHE_DIR=/var/cache/ccache CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
export DEB_BUILD_OPTIONS="$opts"
$flags
echo "Slurm \$(dpkg-query -W -f='\${Version}' libslurm-dev), \$(gcc --version | head -1), cmake \$(cmake --version | head -1 | cut -d' ' -f3)"
dpkg-buildpackage -us -uc -b
cp /build/*.deb /out/
ccache -s | grep -iE 'hit|miss' || true
SCRIPT
}

# Inside the build chroot again: the integration level and e2e from the package build's tree.
test_script() {
  local e2e=${COMPOSER_RELEASE_E2E:-'^slurm_e2e$'}
  [[ $full == yes ]] && e2e='.'
  cat <<SCRIPT
set -euo pipefail
cd /build/src
tree=\$(ls -d obj-*-linux-gnu | head -1)
export E2E_PORT=$((port_base + 830)) CTLD_PORT=$((port_base + 817)) SLURMD_PORT=$((port_base + 818))
rc=0
ctest --test-dir "\$tree" --output-on-failure --timeout 900 -L integration || rc=1
ctest --test-dir "\$tree" --output-on-failure --timeout 900 -L e2e -R '$e2e' || rc=1
exit "\$rc"
SCRIPT
}

# Inside a throw-away copy of the run chroot: install the packages, then one composed job on
# a throw-away cluster that uses the installed composerd and plugins only.
install_script() {
  cat <<SCRIPT
set -euo pipefail
# As on a site's machine: apt fetches what the packages depend on from the archive.
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \$(ls /debs/*.deb | grep -v dbgsym) </dev/null
plugins=\$(dirname "\$(dpkg -L slurm-composer-plugins | grep -E '/job_submit_composer\.so\$')")
[[ -f \$plugins/spank_composer.so ]]
composerd=\$(command -v composerd)
composerd --version
# compose=controller, the default: slurmctld runs the installed composer-slurmctld.
export COMPOSER_SLURMCTLD=\$(dpkg -L slurm-composer-plugins | grep -E '/composer-slurmctld\$')
[[ -x \$COMPOSER_SLURMCTLD ]]
export COMPOSER_NODE_CHECK=\$(dpkg -L slurm-composer-plugins | grep -E '/composer-node-check\$')
[[ -x \$COMPOSER_NODE_CHECK ]]
export E2E_PORT=$((port_base + 930)) CTLD_PORT=$((port_base + 917)) SLURMD_PORT=$((port_base + 918))
# A multi-node scenario's subnet (--installed): 10.221.0.0/24 to 10.223.0.0/24, no e2e suite's.
export E2E_SUBNET=$((port_base / 1000 + 200))
export BUILD_DIR=/tmp PLUGIN_DIR=\$plugins COMPOSERD=\$composerd
$(installed_scenarios)
SCRIPT
}

# What step 3 runs: three scenarios where step 2 ran the release's e2e suite from the build
# tree, else that suite itself (tests/e2e/scenarios.sh's own list), less its 50-job array
# (minutes of waiting; the host runs it); or --installed's command.
installed_scenarios() {
  if [[ -n $installed ]]; then
    printf 'cd /src/main\n%s\n' "$installed"
    return
  fi
  if [[ $wide == no ]]; then
    echo "/src/main/tests/e2e/run.sh batch_job_sees_its_devices srun_job_sees_its_devices" \
      "hand_made_gres_refused"
    return
  fi
  echo "E2E_SKIP=array_of_50_leaks_nothing /src/main/tests/e2e/run.sh"
}

# hosts: slurmctld resolves this machine's name inside the chroot too.
prepare() {  # prepare KIND: the chroot exists, and knows this machine's name
  local dir
  dir=$("$CHROOT" create "$suite" "$1")
  cp /etc/hosts "$dir/etc/hosts"
  cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
}

start=$SECONDS
rc=0
if [[ $steps != check ]]; then
  step chroot-build prepare build || exit 1
  step package "$CHROOT" run "$suite" build --bind "$out:/out" -- "$(build_script)" || exit 1
fi
if [[ $steps != packages ]]; then
  step chroot-run prepare run || exit 1
  if [[ $tests == yes ]]; then
    step tests "$CHROOT" run "$suite" build -- "$(test_script)" || rc=1
  fi
  step installed "$CHROOT" run "$suite" run --overlay --bind "$out:/debs" -- "$(install_script)" || rc=1
fi
if ((rc == 0)); then
  log "passed in $((SECONDS - start)) s; packages in $out"
else
  log "FAILED after $((SECONDS - start)) s; logs in $out"
fi
exit "$rc"
