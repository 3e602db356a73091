#!/usr/bin/env bash
# A throw-away Slurm cluster with slurm-composer on this machine: one node by default, or
# several, each in a network namespace of its own.
#
#   cluster.sh start   install slurm+munge if missing, generate configs, start munged,
#                      composerd, slurmctld and slurmd; wait until the nodes are idle
#   cluster.sh stop    stop everything this script started, by PID (also after a start that
#                      failed half-way, and twice)
#   cluster.sh env     print the variables a shell needs to use the cluster
#   cluster.sh start-slurmd NODE | stop-slurmd NODE   one node's slurmd (E2E_NODES>1)
#   cluster.sh start-composerd [I] | stop-composerd [I]   composerd I (1 or 2), or every one;
#                      started again, a composerd of two is a standby until the other dies
#
# Environment: BUILD_DIR (default build; PLUGIN_DIR, COMPOSERD and FAKE_REDFISH override the
# paths inside it), E2E_DIR (default /tmp/composer-e2e), the ports E2E_PORT (composerd),
# CTLD_PORT and SLURMD_PORT, FABRIC and the pool:
#   FABRIC=sim      (default) composerd's simulated fabric holding E2E_GPUS (8) A100 GPUs,
#                   E2E_MEM_BLOCKS (4) 64G CXL memory blocks and E2E_NVME (4) NVMe drives;
#                   E2E_GPU_MODELS=MODEL:N,... splits the GPUs into groups gpu-a, gpu-b, ... of
#                   those models (the counts add up to E2E_GPUS); E2E_GPU_DOMAINS=yes puts each
#                   group in an enclosure of its own (DomainLevels=enclosure, gpu-a in
#                   enclosure:encl-a, ...), the failure domains of the pool. E2E_ZONES=Z
#                   (default 1) splits every group evenly over zones z1..zZ (gpu-a-z1, ...;
#                   each count must divide by Z) and gives node cnI the one zone z((I-1)%Z+1):
#                   a pool whose nodes reach different parts of it. Its SimHealthFile is
#                   $E2E_DIR/composer/sim-health: "DEVICE critical" there fails a device as a
#                   fabric reports it, "DEVICE ok" heals it;
#   FABRIC=redfish  the fake Redfish composition service (tests/drivers/fake_redfish) on
#                   loopback, this node mapped to its composed system node01: E2E_GPUS/2 GPUs
#                   in each of its two zones plus the devices of the DMTF mockup it serves.
# Slurm's licenses and GRES counts are taken from the pool composerd publishes, whatever the
# fabric. E2E_SLURM_SYNC=yes turns on composerd's SlurmSync (hold and blocker reservations kept
# in step by composerd) and gives slurm.conf a cap license per class sized to the pool, as
# composerctl slurm-config prints them. E2E_SLURM_LICENSES=remote (with E2E_SLURM_SYNC=yes and
# E2E_ACCOUNTING=yes): the pool's and the models' licenses are slurmdbd's remote licenses that
# composerd creates and counts (SlurmLicenses=remote), so slurm.conf lists only the caps and has
# SchedulerParameters=allow_zero_lic. Must run as root (slurmd does).
#
# E2E_NODES=N (default 1: the host itself is the one node, composerd on 127.0.0.1), N>=2:
# compute nodes cn1..cnN, each slurmd in a network namespace of its own (ce2e<S>-cnI) on a
# private bridge cbr<S> (S: E2E_SUBNET, default 231, so that suites running side by side do
# not clash): the host (slurmctld, composerd, slurmdbd) is 10.S.0.1, node I is 10.S.0.(10+I).
# Each node has its own plugin state directory and fake sysfs, bind-mounted in its own mount
# namespace over $E2E_DIR/plugin-state and $E2E_DIR/sys (the host's copies are those of
# $E2E_DIR/nodes/cnI). Sim fabric only.
# E2E_ACCOUNTING=yes adds slurmdbd (port E2E_DBD_PORT, default 26819) on a MariaDB of our own
# (data under $E2E_DIR/db, TCP on 127.0.0.1:E2E_DB_PORT, default 26820), installing
# mariadb-server and slurmdbd if missing.
# E2E_COMPOSERDS=2 (default 1): two composerd on the controller host, the first active and
# the second its standby (ports E2E_PORT and E2E_PORT2, default E2E_PORT+1; Unix sockets
# run/composerd.sock and run/composerd-2.sock; logs log/composerd.log and log/composerd-2.log;
# composer.conf and composer-2.conf), sharing one store on a PostgreSQL of our own
# (StateBackend=postgresql; Debian's postgresql-15, installed if missing, initdb'd under
# $E2E_DIR/pg and run as the user postgres with its socket there, on port E2E_PG_PORT, default
# 26821, and no TCP; composer.conf's StateUrlFile= is etc/composer-state.url) and one StateDir (the sim fabric's state file, the pool snapshot). The
# plugstack's server= and controller_server= list both. Sim fabric only.
# E2E_SLURM_EXTRA: lines added to slurm.conf as they are (a scenario's Epilog, say).
# E2E_OUTAGE_WAIT (default 10): how long composer-slurmctld and the node prologs ask again
# while composerd is away (the plugstack line's outage_wait=), short so that a scenario that
# keeps composerd away sees its job requeued (or, with compose=node, its node drained) soon.
# E2E_HOST_CHECK=rescan (default): the plugin rescans a fake sysfs where nothing appears.
# E2E_HOST_CHECK=wait (one node only): the node is a fake host (composer_fake_host, root
# $E2E_DIR/host) whose kernel follows the fabric: at the prolog's rescan the devices composerd
# attached appear with the identities the fabric reported, and the real processes holding its
# device files show in its /proc; the plugin finds each device (host_check=wait).
# E2E_GUEST=yes (FABRIC=redfish, E2E_NODES from 1 to 4): each node I is a QEMU guest of the
# kvm level (tests/kvm/guest.sh, folder $E2E_DIR/guests/node0I, node name guestI, composed
# system node0I) with its own kernel: the fake Redfish service hot-plugs each drive it composes
# into its guest over QMP (tests/kvm/qmp.py), and each guest runs munged (this cluster's key) and
# slurmd with the real plugin, which finds each device in the guest's kernel (host_check=wait,
# no roots), each job in a cgroup v2 of its own (task/cgroup) where the plugin fences its
# devices. A guest sees this host's loopback at 10.0.2.2 (QEMU's user networking) and
# slurmctld reaches guest I's slurmd at 127.0.0.1:SLURMD_PORT+I-1 (hostfwd; a job's steps
# stay on one node: a guest cannot reach another's slurmd). The build tree is shared
# into the guest at its own path, so the plugin must be built inside BUILD_DIR. The guest has
# this cluster's files at the same paths ($E2E_DIR/etc, its own munge socket, plugin state and
# spool), its log folder being the host's $E2E_DIR/guests/node0I/share/log; jobs see the
# guest's mailbox at /mnt/share. Fabric calls get a minute (pciehp's removal takes seconds).
# E2E_GUEST_CXL=MiB (with E2E_GUEST=yes; default 0: none; a multiple of 256 up to 4096): each
# guest boots with a CXL Type 3 device of that size (guest.sh's GUEST_CXL), the fabric's memory
# blocks are that size, and Slurm constrains each job's cores and memory nodes (ConstrainCores):
# the prolog in the guest makes the region and onlines it as a NUMA node, the task hook widens
# the job's cpuset to it, and the epilog offlines and destroys it.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
# Not needed to exist for stop and env: start says which binary is missing.
BUILD_DIR=$(realpath -m "${BUILD_DIR:-$SRC/build}")
E2E_DIR=$(realpath -m "${E2E_DIR:-/tmp/composer-e2e}")
# The folder is wiped at start: only ever one of ours.
[[ $(basename "$E2E_DIR") == composer-e2e* ]] || { echo "cluster: E2E_DIR must be named composer-e2e*" >&2; exit 2; }
E2E_GPUS=${E2E_GPUS:-8}
E2E_GPU_MODELS=${E2E_GPU_MODELS:-A100-80G:$E2E_GPUS}
E2E_GPU_DOMAINS=${E2E_GPU_DOMAINS:-no}
E2E_MEM_BLOCKS=${E2E_MEM_BLOCKS:-4}
E2E_NVME=${E2E_NVME:-4}
E2E_ZONES=${E2E_ZONES:-1}
[[ $E2E_ZONES =~ ^[1-9]$ ]] || { echo "cluster: E2E_ZONES=$E2E_ZONES: expected 1 to 9" >&2; exit 2; }
E2E_PORT=${E2E_PORT:-16830}
CTLD_PORT=${CTLD_PORT:-16817}
SLURMD_PORT=${SLURMD_PORT:-16818}
CTLD_HOST=$(hostname -s)
FABRIC=${FABRIC:-sim}
E2E_SLURM_SYNC=${E2E_SLURM_SYNC:-no}
E2E_SLURM_LICENSES=${E2E_SLURM_LICENSES:-local}
E2E_NODES=${E2E_NODES:-1}
E2E_SUBNET=${E2E_SUBNET:-231}
E2E_ACCOUNTING=${E2E_ACCOUNTING:-no}
E2E_HOST_CHECK=${E2E_HOST_CHECK:-rescan}
E2E_GUEST=${E2E_GUEST:-no}
[[ $E2E_GUEST == yes || $E2E_GUEST == no ]] ||
  { echo "cluster: E2E_GUEST=$E2E_GUEST: expected yes or no" >&2; exit 2; }
E2E_GUEST_CXL=${E2E_GUEST_CXL:-0}
if ! [[ $E2E_GUEST_CXL =~ ^[0-9]+$ ]] || ((E2E_GUEST_CXL % 256 != 0 || E2E_GUEST_CXL > 4096)) ||
  [[ $E2E_GUEST_CXL != 0 && $E2E_GUEST != yes ]]; then
  echo "cluster: E2E_GUEST_CXL=$E2E_GUEST_CXL: allowed are 0 (no CXL memory) and, with E2E_GUEST=yes, multiples of 256 up to 4096 (MiB)" >&2
  exit 2
fi
if [[ $E2E_GUEST == yes && ($FABRIC != redfish || ! ${E2E_NODES:-1} =~ ^[1-4]$ || $E2E_HOST_CHECK != rescan) ]]; then
  echo "cluster: E2E_GUEST=yes needs FABRIC=redfish, E2E_NODES from 1 to 4 and no E2E_HOST_CHECK (the guests' kernels are the hosts)" >&2
  exit 2
fi
[[ $E2E_HOST_CHECK == rescan || $E2E_HOST_CHECK == wait ]] ||
  { echo "cluster: E2E_HOST_CHECK=$E2E_HOST_CHECK: allowed are rescan and wait" >&2; exit 2; }
[[ $E2E_HOST_CHECK == rescan || $E2E_NODES == 1 ]] ||
  { echo "cluster: E2E_HOST_CHECK=wait needs E2E_NODES=1 (one fake host)" >&2; exit 2; }
# Where jobs are composed: controller (the plugin's default: PrologSlurmctld runs
# composer-slurmctld; the prologs do the host side only) or node (each node's prolog).
E2E_COMPOSE=${E2E_COMPOSE:-controller}
[[ $E2E_COMPOSE == node || $E2E_COMPOSE == controller ]] ||
  { echo "cluster: E2E_COMPOSE=$E2E_COMPOSE: allowed are node and controller" >&2; exit 2; }
E2E_OUTAGE_WAIT=${E2E_OUTAGE_WAIT:-10}
E2E_DBD_PORT=${E2E_DBD_PORT:-26819}
E2E_DB_PORT=${E2E_DB_PORT:-26820}
E2E_COMPOSERDS=${E2E_COMPOSERDS:-1}
E2E_PORT2=${E2E_PORT2:-$((E2E_PORT + 1))}
E2E_PG_PORT=${E2E_PG_PORT:-26821}
[[ $E2E_COMPOSERDS == 1 || $E2E_COMPOSERDS == 2 ]] ||
  { echo "cluster: E2E_COMPOSERDS=$E2E_COMPOSERDS: expected 1 or 2" >&2; exit 2; }
if [[ $E2E_COMPOSERDS == 2 && ($FABRIC != sim || $E2E_HOST_CHECK != rescan) ]]; then
  echo "cluster: E2E_COMPOSERDS=2 needs FABRIC=sim and E2E_HOST_CHECK=rescan (both composerd" \
    "take over the sim fabric's state file in their shared StateDir)" >&2
  exit 2
fi
[[ $FABRIC == sim || $FABRIC == redfish ]] ||
  { echo "cluster: FABRIC=$FABRIC: allowed are sim and redfish" >&2; exit 2; }
[[ $E2E_NODES =~ ^[1-9][0-9]?$ ]] ||
  { echo "cluster: E2E_NODES=$E2E_NODES: expected a node count from 1 to 99" >&2; exit 2; }
if ! [[ $E2E_SUBNET =~ ^[0-9]+$ ]] || ((E2E_SUBNET < 1 || E2E_SUBNET > 254)); then
  echo "cluster: E2E_SUBNET=$E2E_SUBNET: expected 1 to 254 (the X of 10.X.0.0/24)" >&2
  exit 2
fi
[[ $E2E_ACCOUNTING == yes || $E2E_ACCOUNTING == no ]] ||
  { echo "cluster: E2E_ACCOUNTING=$E2E_ACCOUNTING: expected yes or no" >&2; exit 2; }
if [[ $E2E_SLURM_LICENSES == remote ]]; then
  [[ $E2E_SLURM_SYNC == yes && $E2E_ACCOUNTING == yes ]] || {
    echo "cluster: E2E_SLURM_LICENSES=remote needs E2E_SLURM_SYNC=yes and E2E_ACCOUNTING=yes" >&2
    exit 2
  }
elif [[ $E2E_SLURM_LICENSES != local ]]; then
  echo "cluster: E2E_SLURM_LICENSES=$E2E_SLURM_LICENSES: expected local or remote" >&2
  exit 2
fi
if ((E2E_ZONES > 1)) && [[ $FABRIC != sim || $E2E_NODES -lt $E2E_ZONES ]]; then
  echo "cluster: E2E_ZONES=$E2E_ZONES needs FABRIC=sim and at least as many nodes (E2E_NODES)" >&2
  exit 2
fi
if ((E2E_NODES > 1)) && [[ $FABRIC != sim && $E2E_GUEST == no ]]; then
  echo "cluster: E2E_NODES=$E2E_NODES needs FABRIC=sim: the fake Redfish service maps one" \
    "composed system to this host only" >&2
  exit 2
fi
# The nodes: this host alone, or cn1..cnN behind the bridge. NODE is the first of them.
if ((E2E_NODES > 1)) && [[ $E2E_GUEST == no ]]; then
  MULTI=yes
  NODES=()
  for ((n = 1; n <= E2E_NODES; n++)); do NODES+=("cn$n"); done
  BRIDGE=cbr$E2E_SUBNET
  HOST_ADDR=10.$E2E_SUBNET.0.1
  LISTEN_ADDR=$HOST_ADDR  # composerd, where the nodes' prologs reach it
else
  MULTI=no
  NODES=("$CTLD_HOST")
  LISTEN_ADDR=127.0.0.1
  if [[ $E2E_GUEST == yes ]]; then
    NODES=()
    for ((n = 1; n <= E2E_NODES; n++)); do NODES+=("guest$n"); done
  fi
fi
NODE=${NODES[0]}
E2E_URL=http://$LISTEN_ADDR:$E2E_PORT
# Every composerd, in the order clients try them (the plugstack's lists).
COMPOSERDS=(1)
E2E_URLS=$E2E_URL
CTLD_SERVERS=unix:$E2E_DIR/run/composerd.sock
if [[ $E2E_COMPOSERDS == 2 ]]; then
  COMPOSERDS=(1 2)
  E2E_URLS+=,http://$LISTEN_ADDR:$E2E_PORT2
  CTLD_SERVERS+=,unix:$E2E_DIR/run/composerd-2.sock
fi
PG_DIR=$E2E_DIR/pg  # the PostgreSQL of E2E_COMPOSERDS=2: its data, and its socket

PLUGINS=$(realpath -m "${PLUGIN_DIR:-$BUILD_DIR/slurm-plugin}")
COMPOSERD=$(realpath -m "${COMPOSERD:-$BUILD_DIR/composer/server/composerd}")
FAKE_REDFISH=$(realpath -m "${FAKE_REDFISH:-$BUILD_DIR/tests/drivers/fake_redfish/fake_redfish}")
FAKE_HOST=$(realpath -m "${FAKE_HOST:-$BUILD_DIR/tests/support/composer_fake_host}")
MUNGE_SOCKET=$E2E_DIR/munge/munge.socket
SLURM_CONF=$E2E_DIR/etc/slurm.conf
DB_SOCKET=$E2E_DIR/db/mysqld.sock

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }

install_packages() {
  local missing=()
  for bin in slurmctld slurmd sbatch munged; do
    command -v "$bin" >/dev/null 2>&1 || [[ -x /usr/sbin/$bin ]] || missing+=("$bin")
  done
  if ((${#missing[@]})); then
    log "installing slurm and munge (missing: ${missing[*]})"
    DEBIAN_FRONTEND=noninteractive apt-get install -y slurmctld slurmd slurm-client munge >/dev/null
  fi
  if [[ $E2E_ACCOUNTING == yes ]]; then
    missing=()
    for bin in slurmdbd mariadbd mariadb-install-db mariadb; do
      command -v "$bin" >/dev/null 2>&1 || [[ -x /usr/sbin/$bin ]] || missing+=("$bin")
    done
    if ((${#missing[@]})); then
      install_stopping_services "missing: ${missing[*]}" mariadb-server slurmdbd
    fi
  fi
  if [[ $E2E_COMPOSERDS == 2 && -z $(pg_bindir) ]]; then
    install_stopping_services "no /usr/lib/postgresql/*/bin/postgres" postgresql-15
  fi
}

# install_stopping_services WHY PACKAGE...: the packages' postinst may start the system's own
# MariaDB, slurmdbd or PostgreSQL where policy-rc.d lets it: those are stopped again, by their
# pid files, when the install started them. Ours never depend on them (their own data, socket
# and port).
install_stopping_services() {
  local why=$1 pidfile before=()
  shift
  for pidfile in "${SYSTEM_PID_FILES[@]}"; do
    if pid_file_alive "$pidfile"; then before+=("$pidfile"); fi
  done
  log "installing $* ($why)"
  # A fresh chroot has no package lists yet: read them, then try again.
  DEBIAN_FRONTEND=noninteractive apt-get install -y "$@" >/dev/null 2>&1 || {
    apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y "$@" >/dev/null
  } || die "cannot install $*"
  for pidfile in "${SYSTEM_PID_FILES[@]}"; do
    [[ " ${before[*]} " == *" $pidfile "* ]] && continue
    if pid_file_alive "$pidfile"; then
      log "the install started $(ps -o comm= -p "$(head -1 "$pidfile")"): stopping it"
      kill -TERM "$(head -1 "$pidfile")" || true
    fi
  done
}
SYSTEM_PID_FILES=(/run/mysqld/mysqld.pid /run/slurmdbd.pid /run/postgresql/15-main.pid)
pid_file_alive() { [[ -s $1 ]] && kill -0 "$(head -1 "$1")" 2>/dev/null; }
# The newest PostgreSQL's binaries, or nothing.
pg_bindir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do [[ -x $d/postgres ]] && echo "$d"; done | sort -V | tail -1
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...: by the clock (a try may take seconds)
  local limit=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + limit))
  while ((SECONDS < deadline)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  die "timed out after ${limit}s waiting for $what"
}

# zone_groups "NAME Type=.. Model=.." COUNT [EXTRA]: one DeviceGroup line, or with E2E_ZONES=Z
# one per zone (NAME-zK, COUNT/Z devices in zone zK).
zone_groups() {
  local name=${1%% *} rest=${1#* } count=$2 extra=${3:-} z
  if ((E2E_ZONES == 1)); then
    echo "DeviceGroup=$name $rest Zone=z1 Count=$count$extra"
    return 0
  fi
  ((count % E2E_ZONES == 0)) || die "E2E_ZONES=$E2E_ZONES: $name's $count devices do not split evenly"
  for ((z = 1; z <= E2E_ZONES; z++)); do
    echo "DeviceGroup=$name-z$z $rest Zone=z$z Count=$((count / E2E_ZONES))$extra"
  done
}

# The sim fabric's GPU groups from E2E_GPU_MODELS: gpu-a, gpu-b, ... one per model.
gpu_groups() {
  local entry model count sum=0 letters=abcdefghij i=0
  local -a entries
  IFS=, read -ra entries <<<"$E2E_GPU_MODELS"
  for entry in "${entries[@]}"; do
    model=${entry%%:*} count=${entry#*:}
    [[ $entry == *:* && $model =~ ^[A-Za-z0-9._-]+$ && $count =~ ^[1-9][0-9]*$ && $i -lt 10 ]] ||
      die "E2E_GPU_MODELS=$E2E_GPU_MODELS: expected MODEL:COUNT,... (at most 10 models)"
    zone_groups "gpu-${letters:i:1} Type=gpu Model=$model" "$count" "$(
      [[ $E2E_GPU_DOMAINS == yes ]] && echo " Domains=enclosure:encl-${letters:i:1}")"
    sum=$((sum + count)) i=$((i + 1))
  done
  ((sum == E2E_GPUS)) || die "E2E_GPU_MODELS=$E2E_GPU_MODELS: the counts add up to $sum, not E2E_GPUS=$E2E_GPUS"
}

write_configs() {  # the folder and every file but slurm.conf and gres.conf (they need the pool)
  rm -rf "$E2E_DIR"
  mkdir -p "$E2E_DIR"/{etc,munge,state,spool,log,run,composer,plugin-state,sys/bus/pci/devices}
  chmod 755 "$E2E_DIR" "$E2E_DIR/munge"
  : >"$E2E_DIR/sys/bus/pci/rescan"
  local n
  for n in "${NODES[@]}"; do
    mkdir -p "$E2E_DIR/spool/slurmd-$n"
    if [[ $MULTI == yes ]]; then  # what each node's slurmd sees as plugin-state and sys
      mkdir -p "$E2E_DIR/nodes/$n"/{plugin-state,sys/bus/pci/devices}
      : >"$E2E_DIR/nodes/$n/sys/bus/pci/rescan"
    fi
  done

  local fabric_wait=20
  [[ $E2E_GUEST == yes ]] && fabric_wait=120
  cat >"$E2E_DIR/etc/composer.conf" <<CONF
ListenAddress=$LISTEN_ADDR
ListenPort=$E2E_PORT
$([[ $E2E_COMPOSE == controller ]] && echo "ListenSocket=$E2E_DIR/run/composerd.sock")
StateDir=$E2E_DIR/composer
LogFile=$E2E_DIR/log/composerd.log
LogLevel=info
AdminUsers=root
Workloads=training,inference
MungeSocket=$MUNGE_SOCKET
ComposeTimeout=$fabric_wait
ReleaseTimeout=$fabric_wait
ReconcileInterval=5
Durable=no
CONF
  [[ $E2E_SLURM_SYNC == yes ]] && printf 'SlurmSync=yes\n' >>"$E2E_DIR/etc/composer.conf"
  if [[ $E2E_SLURM_LICENSES == remote ]]; then
    printf 'SlurmLicenses=remote\nSlurmCluster=composer-e2e\nSlurmSacctmgr=%s\n' \
      "$(command -v sacctmgr)" >>"$E2E_DIR/etc/composer.conf"
  fi
  # A node whose slurmd dies runs no epilog: composerd's reconciler asks Slurm (squeue) which
  # jobs still run and releases the compositions of the others after OrphanGrace (60 s by
  # default, 10 here so that the node failure scenario stays short). The scenarios check that
  # it has nothing to do where the epilogs do their work.
  printf 'SlurmConf=%s\nSlurmJobCheck=yes\nOrphanGrace=10\n' "$SLURM_CONF" >>"$E2E_DIR/etc/composer.conf"
  if [[ $FABRIC == sim ]]; then
    {
      printf 'Fabric=sim\nSimLatency=20\nSimHealthFile=%s\n' "$E2E_DIR/composer/sim-health"
      [[ $E2E_GPU_DOMAINS == yes ]] && echo "DomainLevels=enclosure"
      local i=0
      for n in "${NODES[@]}"; do
        echo "NodeName=$n Zones=z$((i % E2E_ZONES + 1)) GpuSlots=$E2E_GPUS MemSlots=$E2E_MEM_BLOCKS NvmeSlots=$E2E_NVME"
        i=$((i + 1))
      done
      gpu_groups
      zone_groups "cxl-a Type=mem Model=CXL-DDR5" "$E2E_MEM_BLOCKS" " Size=64G"
      zone_groups "nvme-a Type=nvme Model=P5620" "$E2E_NVME" " Size=1T"
    } >>"$E2E_DIR/etc/composer.conf"
  fi
  # The redfish lines need the fake's port: start_fake_redfish appends them.
  if [[ $E2E_COMPOSERDS == 2 ]]; then
    # The connection string in a file only composerd's user reads, as a site keeps it.
    (
      umask 077
      echo "host=$PG_DIR port=$E2E_PG_PORT dbname=composer user=composer" >"$E2E_DIR/etc/composer-state.url"
    )
    printf 'StateBackend=postgresql\nStateUrlFile=%s\n' "$E2E_DIR/etc/composer-state.url" \
      >>"$E2E_DIR/etc/composer.conf"
    # The second composerd: the same settings and StateDir, its own port, socket and log.
    sed -e "s|^ListenPort=.*|ListenPort=$E2E_PORT2|" \
      -e "s|^ListenSocket=.*|ListenSocket=$E2E_DIR/run/composerd-2.sock|" \
      -e "s|^LogFile=.*|LogFile=$E2E_DIR/log/composerd-2.log|" \
      "$E2E_DIR/etc/composer.conf" >"$E2E_DIR/etc/composer-2.conf"
  fi

  cat >"$E2E_DIR/etc/plugstack.conf" <<CONF
required $PLUGINS/spank_composer.so server=$E2E_URLS timeout=30 connect_timeout=2 retries=2 backoff_ms=200 state_dir=$E2E_DIR/plugin-state munge_socket=$MUNGE_SOCKET $(host_roots) busy_wait=5 compose=$E2E_COMPOSE outage_wait=$E2E_OUTAGE_WAIT$([[ $E2E_COMPOSE == controller ]] && echo " controller_server=$CTLD_SERVERS")
CONF
  if [[ $E2E_COMPOSE == controller ]]; then
    # slurmctld gives its scripts an environment of its own: the wrapper names the plugstack
    # file composer-slurmctld reads its settings from, and the slurm.conf its epilog's squeue
    # and sinfo read. PrologSlurmctld and EpilogSlurmctld are the one wrapper. Its stderr goes
    # to log/composer-slurmctld.log (the harness runs no syslog).
    local ctld_prog
    ctld_prog=$(realpath -m "${COMPOSER_SLURMCTLD:-$BUILD_DIR/slurm-plugin/composer-slurmctld}")
    [[ -x $ctld_prog ]] || die "composer-slurmctld not built: $ctld_prog"
    printf '#!/bin/sh\nCOMPOSER_PLUGSTACK=%s SLURM_CONF=%s exec %s 2>>%s\n' \
      "$E2E_DIR/etc/plugstack.conf" "$SLURM_CONF" "$ctld_prog" \
      "$E2E_DIR/log/composer-slurmctld.log" >"$E2E_DIR/etc/prolog-slurmctld"
    chmod 755 "$E2E_DIR/etc/prolog-slurmctld"
  fi
}

# The DMTF mockup the fake serves, less the device blocks already composed into the mockup's
# own systems: this cluster is about the node composerd serves, and those blocks belong to
# hosts it leaves alone. The mockup's free blocks stay in the pool.
# The mockups are served whole, as a real service holds them: composed systems, blocks
# already composed into them, shared blocks. composerd must leave all of that alone.
mockups_dir() {
  local from
  from=$(realpath -m "${COMPOSER_REDFISH_MOCKUPS:-$SRC/tests/drivers/fake_redfish/mockups}")
  [[ -d $from/public-composability ]] ||
    die "Redfish mockups not found at $from (set COMPOSER_REDFISH_MOCKUPS)"
  echo "$from"
}

# The fake Redfish service, and composer.conf's fabric lines pointing at it. It serves
# composed systems node01.. reaching both its zones; this node is node01. Attach slots: the
# fake publishes none, so FabricSlots lets one host hold the whole pool, as with sim.
# The plugin's view of the host: the fake sysfs and the real /proc, or the fake host's tree.
host_roots() {
  if [[ $E2E_GUEST == yes ]]; then
    # Under TCG a hot-added drive takes seconds to show.
    echo "host_check=wait host_wait=120"
  elif [[ $E2E_HOST_CHECK == wait ]]; then
    echo "sysfs_root=$E2E_DIR/host/sys proc_root=$E2E_DIR/host/proc dev_root=$E2E_DIR/host/dev host_check=wait host_wait=10"
  else
    echo "sysfs_root=$E2E_DIR/sys proc_root=/proc host_check=rescan"
  fi
}

start_fake_host() {  # after composerd: its kernel asks composerd what the fabric attached
  [[ -x $FAKE_HOST ]] || die "composer_fake_host not built: $FAKE_HOST"
  setsid "$FAKE_HOST" --root "$E2E_DIR/host" --node "$NODE" --server "$E2E_URL" \
    --munge-socket "$MUNGE_SOCKET" >>"$E2E_DIR/log/fake_host.log" 2>&1 &
  echo $! >"$E2E_DIR/run/fake_host.pid"
  wait_for 10 "the fake host's tree" test -e "$E2E_DIR/host/sys/bus/pci/rescan"
}

start_fake_redfish() {
  [[ -x $FAKE_REDFISH ]] || die "fake_redfish not built: $FAKE_REDFISH"
  local mockups
  mockups=$(mockups_dir) || exit 1
  local port_file=$E2E_DIR/run/fake_redfish.port cred=$E2E_DIR/etc/fabric.cred
  local password="e2e-$RANDOM$RANDOM"
  (
    umask 077
    printf 'username=composer\npassword=%s\n' "$password" >"$cred"
  )
  rm -f "$port_file"
  # The guest's drives are the fake's own (the mockups' drives have no hot-plug), QEMU's NVMe
  # controllers (1b36:0010), plugged as the change is asked for: the fake's tasks (--task-ms)
  # run no hot-plug.
  local pool=(--mockups "$mockups" --task-ms 20) fabric_timeout=5s
  if [[ $E2E_GUEST == yes ]]; then
    pool=(--drive-ids 0x1b36:0x0010 --hot-plug "$SRC/tests/kvm/qmp.py --guests $E2E_DIR/guests")
    if ((E2E_GUEST_CXL > 0)); then pool+=(--memory-mib "$E2E_GUEST_CXL"); fi
    fabric_timeout=60s
  fi
  setsid "$FAKE_REDFISH" "${pool[@]}" --port-file "$port_file" --hosts "${#NODES[@]}" --gpus-per-zone $((E2E_GPUS / 2)) \
    --username composer --password "$password" \
    >>"$E2E_DIR/log/fake_redfish.log" 2>&1 &
  echo $! >"$E2E_DIR/run/fake_redfish.pid"
  wait_for 10 "fake_redfish to listen" test -s "$port_file"
  cat >>"$E2E_DIR/etc/composer.conf" <<CONF
Fabric=redfish
FabricName=fake-redfish
FabricUrl=http://127.0.0.1:$(cat "$port_file")
FabricCredentials=$cred
FabricAuth=session
FabricTimeout=$fabric_timeout
FabricPollInterval=20ms
FabricTaskWait=$([[ $E2E_GUEST == yes ]] && echo 60s || echo 15s)
FabricSlots=64
CONF
  local i
  for ((i = 1; i <= ${#NODES[@]}; i++)); do
    echo "NodeName=${NODES[i - 1]} FabricHost=$(printf 'node%02d' "$i")"
  done >>"$E2E_DIR/etc/composer.conf"
}

# slurm.conf and gres.conf, with licenses and GRES counts from the pool composerd published.
write_slurm_configs() {
  local snapshot=$E2E_DIR/composer/snapshot.json gpus mem_gib mem_slots nvme cpus=16 mem_mb
  gpus=$(jq -er '.pools.gpu.total' "$snapshot") || die "no GPU count in $snapshot"
  # A node's memory attach slots (MemSlots, or FabricSlots for redfish): the cmem GRES.
  mem_slots=$(jq -er '.pools.mem.max_node_slots' "$snapshot") || die "no memory slots in $snapshot"
  mem_gib=$(jq -er '.pools.mem.total_bytes / 1073741824 | floor' "$snapshot") ||
    die "no memory size in $snapshot"
  nvme=$(jq -er '.pools.nvme.total' "$snapshot") || die "no NVMe count in $snapshot"
  ((gpus > 0 && mem_gib > 0 && nvme > 0)) ||
    die "the pool lacks a device type (gpus=$gpus mem=${mem_gib}G nvme=$nvme): $snapshot"
  mem_mb=$(($(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) / 2))
  local caps="" class
  local pool_licenses="fabric_gpu:$gpus,fabric_mem:$mem_gib,fabric_nvme:$nvme"
  if [[ $E2E_SLURM_SYNC == yes ]]; then
    for class in training inference; do
      caps+=",${class}_gpu_cap:$gpus,${class}_mem_cap:$mem_gib,${class}_nvme_cap:$nvme"
    done
    # A license per GPU model (fabric_gpu_<model in lower case>), as slurm-config prints them.
    local model count
    while IFS=$'\t' read -r model count; do
      pool_licenses+=",fabric_gpu_${model,,}:$count"
    done < <(jq -r '.pools.gpu.models | to_entries[] | "\(.key)\t\(.value)"' "$snapshot")
  fi
  # Remote licenses: composerd creates the pool's in slurmdbd; slurm.conf has only the caps,
  # and a job asking for more than a lowered count must wait, not be refused.
  local licenses="$pool_licenses$caps" sched_extra=""
  if [[ $E2E_SLURM_LICENSES == remote ]]; then
    licenses=${caps#,} sched_extra=",allow_zero_lic"
  fi

  local n
  {
    echo "AutoDetect=off"
    for n in "${NODES[@]}"; do
      echo "NodeName=$n Name=cgpu Count=$gpus"
      echo "NodeName=$n Name=cmem Count=$mem_slots"
      echo "NodeName=$n Name=cnvme Count=$nvme"
    done
  } >"$E2E_DIR/etc/gres.conf"

  # A requeued job waits cred_expire + 1 s before it may start again (its old launch
  # credential is revoked on its node until then; started sooner there, Slurm kills it:
  # "Job credential revoked"): 30 s instead of 120 keeps the requeue scenarios short.
  local ctld=$CTLD_HOST slurmd_files=slurmd auth_extra=,cred_expire=30
  if [[ $MULTI == yes ]]; then
    ctld="$CTLD_HOST($HOST_ADDR)"  # the name slurmctld checks, the address the nodes use
    slurmd_files=slurmd-%n          # slurmd expands %n to its node name (-N)
  fi
  cat >"$SLURM_CONF" <<CONF
ClusterName=composer-e2e
SlurmctldHost=$ctld
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET$auth_extra
StateSaveLocation=$E2E_DIR/state
SlurmdSpoolDir=$E2E_DIR/spool/slurmd-%n
SlurmctldPidFile=$E2E_DIR/run/slurmctld.pid
SlurmdPidFile=$E2E_DIR/run/$slurmd_files.pid
SlurmctldLogFile=$E2E_DIR/log/slurmctld.log
SlurmdLogFile=$E2E_DIR/log/$slurmd_files.log
SlurmctldDebug=verbose
SlurmdDebug=verbose
PluginDir=$PLUGINS:/usr/lib/x86_64-linux-gnu/slurm-wlm
PlugStackConfig=$E2E_DIR/etc/plugstack.conf
JobSubmitPlugins=composer
PrologFlags=Alloc
$([[ $E2E_COMPOSE == controller ]] && printf 'PrologSlurmctld=%s\nEpilogSlurmctld=%s\n' \
  "$E2E_DIR/etc/prolog-slurmctld" "$E2E_DIR/etc/prolog-slurmctld")
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=bf_licenses,bf_interval=2,sched_min_interval=100000$sched_extra
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
$(accounting_lines)
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
MinJobAge=600
MaxArraySize=1001
SlurmdParameters=config_overrides
DefMemPerCPU=100
Licenses=$licenses
GresTypes=cgpu,cmem,cnvme
${E2E_SLURM_EXTRA:-}
CONF
  if [[ $E2E_GUEST == yes ]]; then
    local i
    for ((i = 1; i <= E2E_NODES; i++)); do
      echo "NodeName=guest$i NodeAddr=127.0.0.1 Port=$((SLURMD_PORT + i - 1)) CPUs=$cpus RealMemory=$mem_mb Gres=cgpu:$gpus,cmem:$mem_slots,cnvme:$nvme State=UNKNOWN"
    done >>"$SLURM_CONF"
    echo "PartitionName=main Nodes=guest[1-$E2E_NODES] Default=YES MaxTime=INFINITE State=UP" >>"$SLURM_CONF"
    return 0
  fi
  if [[ $MULTI == no ]]; then
    cat >>"$SLURM_CONF" <<CONF
NodeName=$NODE CPUs=$cpus RealMemory=$mem_mb Gres=cgpu:$gpus,cmem:$mem_slots,cnvme:$nvme State=UNKNOWN
PartitionName=main Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
CONF
    return 0
  fi
  # A node that stops answering is DOWN after SlurmdTimeout (slurmctld pings every third of
  # it), and its jobs end NODE_FAIL: 10 s keeps the node failure scenario short (the default
  # is 300). ReturnToService=2 (above) lets such a node back, idle, as soon as its slurmd
  # registers again, with no scontrol update.
  echo "SlurmdTimeout=10" >>"$SLURM_CONF"
  local i
  for ((i = 1; i <= E2E_NODES; i++)); do
    echo "NodeName=cn$i NodeAddr=$(node_addr "$i") CPUs=$cpus RealMemory=$mem_mb Gres=cgpu:$gpus,cmem:$mem_slots,cnvme:$nvme State=UNKNOWN"
  done >>"$SLURM_CONF"
  {
    echo "PartitionName=main Nodes=cn[1-$E2E_NODES] Default=YES MaxTime=INFINITE State=UP"
    # Jobs that plain squeue does not list, for composerd's SlurmJobCheck (squeue --all).
    echo "PartitionName=hidden Nodes=cn[1-$E2E_NODES] Hidden=YES MaxTime=INFINITE State=UP"
  } >>"$SLURM_CONF"
}

# slurm.conf's accounting lines. With munge, AccountingStoragePass names the munge socket
# that slurmctld and the clients (sacct, sacctmgr) use towards slurmdbd: AuthInfo does not
# count there, and without it they look for the system's /run/munge socket.
accounting_lines() {
  if [[ $E2E_ACCOUNTING != yes ]]; then
    echo "AccountingStorageType=accounting_storage/none"
    return 0
  fi
  cat <<CONF
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$(dbd_addr)
AccountingStoragePort=$E2E_DBD_PORT
AccountingStoragePass=$MUNGE_SOCKET
AccountingStorageTRES=gres/cgpu,gres/cmem,gres/cnvme$([[ $E2E_SLURM_LICENSES == local ]] && echo ",license/fabric_gpu,license/fabric_mem,license/fabric_nvme")
CONF
}

start_munged() {
  head -c 1024 /dev/urandom >"$E2E_DIR/munge/munge.key"
  chmod 400 "$E2E_DIR/munge/munge.key"
  /usr/sbin/munged --force --num-threads=4 --key-file="$E2E_DIR/munge/munge.key" \
    --socket="$MUNGE_SOCKET" --pid-file="$E2E_DIR/run/munged.pid" \
    --log-file="$E2E_DIR/log/munged.log" --seed-file="$E2E_DIR/munge/munged.seed"
  wait_for 10 "munged" bash -c "munge -S '$MUNGE_SOCKET' -n | unmunge -S '$MUNGE_SOCKET'"
}

composerd_suffix() { [[ $1 == 1 ]] || echo "-$1"; }  # composerd_suffix I: its files' suffix
composerd_is() { [[ $(curl -fsS "$2/v1/health" | jq -r .role) == "$1" ]]; }  # ROLE URL

# start_composerd [I]: composerd I, or each in turn. Of two, the first started takes the
# leadership: the second is started once the first says it is active.
start_composerd() {
  [[ -x $COMPOSERD ]] || die "composerd not built: $COMPOSERD"
  local i sfx url
  for i in "${@:-${COMPOSERDS[@]}}"; do
    [[ " ${COMPOSERDS[*]} " == *" $i "* ]] || die "no composerd '$i' in this cluster (${COMPOSERDS[*]})"
    sfx=$(composerd_suffix "$i")
    url=$(cut -d, -f"$i" <<<"$E2E_URLS")
    setsid "$COMPOSERD" -f "$E2E_DIR/etc/composer$sfx.conf" >>"$E2E_DIR/log/composerd$sfx.out" 2>&1 &
    echo $! >"$E2E_DIR/run/composerd$sfx.pid"
    wait_for 20 "composerd $i on $url" curl -fsS "$url/v1/health"
    if [[ $E2E_COMPOSERDS == 2 && $# == 0 && $i == 1 ]]; then
      wait_for 20 "composerd 1 to be active" composerd_is active "$url"
    fi
  done
  wait_for 10 "the pool snapshot" test -s "$E2E_DIR/composer/snapshot.json"
}

stop_composerd() {  # stop_composerd [I]: composerd I, or every one
  local i
  for i in "${@:-${COMPOSERDS[@]}}"; do stop_pid "composerd$(composerd_suffix "$i")"; done
}

# --- E2E_COMPOSERDS=2: their PostgreSQL ---------------------------------------------------------
# As the store's tests start theirs (tests/support's PgServer): initdb, then postgres as a user
# that is not root, its socket in its own folder and no TCP, fsync off (a test's data).
pg_user() { if id postgres >/dev/null 2>&1; then echo postgres; else echo nobody; fi; }
as_pg_user() {
  local user
  user=$(pg_user)
  setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups -- "$@"
}
start_postgresql() {
  local bindir
  bindir=$(pg_bindir)
  [[ -n $bindir ]] || die "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres)"
  mkdir -p "$PG_DIR"
  chown "$(pg_user)": "$PG_DIR"
  as_pg_user "$bindir/initdb" -D "$PG_DIR/data" -U composer -A trust --no-locale -E UTF8 \
    --no-sync >>"$E2E_DIR/log/postgres-init.log" 2>&1 ||
    die "initdb failed (see $E2E_DIR/log/postgres-init.log)"
  setsid setpriv --reuid="$(pg_user)" --regid="$(id -g "$(pg_user)")" --init-groups -- \
    "$bindir/postgres" -D "$PG_DIR/data" -k "$PG_DIR" -p "$E2E_PG_PORT" -c listen_addresses= \
    -c fsync=off >>"$E2E_DIR/log/postgres.log" 2>&1 </dev/null &
  echo $! >"$E2E_DIR/run/postgres.pid"
  wait_for 30 "postgres on $PG_DIR port $E2E_PG_PORT" \
    "$bindir/pg_isready" -q -h "$PG_DIR" -p "$E2E_PG_PORT" -U composer
  "$bindir/createdb" -h "$PG_DIR" -p "$E2E_PG_PORT" -U composer composer ||
    die "cannot create the database composer (see $E2E_DIR/log/postgres.log)"
}


# --- Several nodes: a bridge, one network namespace per node --------------------------------
node_addr() { echo "10.$E2E_SUBNET.0.$((10 + $1))"; }  # node_addr I
node_netns() { echo "ce2e$E2E_SUBNET-$1"; }             # node_netns cnI
node_index() {                                          # node_index cnI: I, or fails
if [[ $MULTI == yes && $1 =~ ^cn([1-9][0-9]?)$ ]] && ((BASH_REMATCH[1] <= E2E_NODES)); then
    echo "${BASH_REMATCH[1]}"
  else
    die "no node '$1' in this cluster (nodes: ${NODES[*]})"
  fi
}

# What start creates is written down before it is created (run/bridge, run/netns), so that
# stop removes exactly that, after a start that failed half-way too. Names already taken
# (another cluster on the same E2E_SUBNET, or one that was never stopped) are refused, not
# taken over.
start_network() {
  ip link show "$BRIDGE" >/dev/null 2>&1 &&
    die "bridge $BRIDGE exists: another cluster uses E2E_SUBNET=$E2E_SUBNET (stop it, pick another E2E_SUBNET, or remove a stale one: ip link del $BRIDGE)"
  local i ns veth
  for ((i = 1; i <= E2E_NODES; i++)); do
    ns=$(node_netns "cn$i")
    ! ip netns list | grep -qw -- "$ns" ||
      die "network namespace $ns exists: another cluster uses E2E_SUBNET=$E2E_SUBNET (or remove a stale one: ip netns del $ns)"
  done
  echo "$BRIDGE" >"$E2E_DIR/run/bridge"
  ip link add "$BRIDGE" type bridge
  ip addr add "$HOST_ADDR/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for ((i = 1; i <= E2E_NODES; i++)); do
    ns=$(node_netns "cn$i") veth=cve$E2E_SUBNET-$i
    echo "$ns $veth" >>"$E2E_DIR/run/netns"
    ip netns add "$ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$BRIDGE" up
    ip -n "$ns" addr add "$(node_addr "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
}

# What is left in each node's namespace once its slurmd is stopped: job steps outlive a
# killed slurmd (slurmstepd and the job's processes). TERM, then KILL.
stop_network_processes() {
  local ns veth pids i
  [[ -f $E2E_DIR/run/netns ]] || return 0
  while read -r ns veth; do
    ip netns list | grep -qw -- "$ns" || continue
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
    [[ -n ${pids// /} ]] || continue
    log "stopping what is left in $ns: $pids"
    # shellcheck disable=SC2086  # one pid a word
    kill -TERM $pids 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      [[ -z $(ip netns pids "$ns" 2>/dev/null) ]] && break
      sleep 0.1
    done
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
    # shellcheck disable=SC2086
    [[ -z ${pids// /} ]] || kill -KILL $pids 2>/dev/null || true
  done <"$E2E_DIR/run/netns"
}

# The namespaces, their veths and the bridge.
stop_network() {
  local ns veth
  if [[ -f $E2E_DIR/run/netns ]]; then
    while read -r ns veth; do
      ip netns del "$ns" 2>/dev/null || true
      ip link del "$veth" 2>/dev/null || true
    done <"$E2E_DIR/run/netns"
    rm -f "$E2E_DIR/run/netns"
  fi
  if [[ -f $E2E_DIR/run/bridge ]]; then
    ip link del "$(cat "$E2E_DIR/run/bridge")" 2>/dev/null || true
    rm -f "$E2E_DIR/run/bridge"
  fi
}

# One node's slurmd in its namespace, with a mount namespace of its own (unshare, private:
# nothing propagates back to the host): the bind mounts give this node its own plugin state
# and sysfs, seen by slurmd and what it starts only, and they vanish with the last of them.
# nsenter joins the network namespace alone: "ip netns exec" would also mount a fresh /sys,
# without /sys/fs/cgroup, and slurmd 22.05 then refuses to start ("No filesystem mounted on
# /sys/fs/cgroup", "Unable to initialize cgroup plugin").
start_slurmd() {  # start_slurmd cnI
  local n=$1
  node_index "$n" >/dev/null || exit 1
  # shellcheck disable=SC2016  # the inner shell expands its own arguments
  nsenter --net="/run/netns/$(node_netns "$n")" unshare --mount --propagation private bash -c '
    set -e
    mount --bind "$1/plugin-state" "$2/plugin-state"
    mount --bind "$1/sys" "$2/sys"
    exec /usr/sbin/slurmd -f "$3" -N "$4"' \
    slurmd "$E2E_DIR/nodes/$n" "$E2E_DIR" "$SLURM_CONF" "$n" ||
    die "slurmd of $n did not start (see $E2E_DIR/log/slurmd-$n.log)"
  wait_for 10 "the pid file of $n's slurmd" test -s "$E2E_DIR/run/slurmd-$n.pid"
}

stop_slurmd() { node_index "$1" >/dev/null || exit 1; stop_pid "slurmd-$1"; }

nodes_idle() {  # every node idle
  local idle
  idle=$(SLURM_CONF=$SLURM_CONF sinfo -h -N -t idle -o %N | sort -u | wc -l)
  ((idle == ${#NODES[@]}))
}

# --- E2E_GUEST=yes: the nodes are QEMU guests ----------------------------------------------
guest_sh() { "$SRC/tests/kvm/guest.sh" "$@"; }
guest_dir() { printf '%s/guests/node%02d' "$E2E_DIR" "$1"; }  # guest_dir I

# Booted in the background while slurmctld starts (40 to 80 s each under TCG); slurmctld
# reaches each guest's slurmd through QEMU's hostfwd on this host's loopback.
start_guests() {
  [[ $PLUGINS/ == "$BUILD_DIR"/* ]] || die "E2E_GUEST=yes: the plugins ($PLUGINS) must be inside BUILD_DIR ($BUILD_DIR), the tree the guests see"
  local i port
  for ((i = 1; i <= E2E_NODES; i++)); do
    port=$((SLURMD_PORT + i - 1))
    # QEMU's hostfwd cannot bind a port that still has connections in TIME-WAIT (a cluster
    # started again at once: its last slurmd's, for up to a minute).
    wait_for 90 "port $port to be free of the last guest's connections" bash -c \
      "[[ -z \$(ss -Htan state time-wait '( sport = :$port )') ]]"
    GUEST_TREE=$BUILD_DIR GUEST_CXL=$E2E_GUEST_CXL GUEST_HOSTFWD="tcp:127.0.0.1:$port-:$port" \
      guest_sh start "$(guest_dir "$i")" >>"$E2E_DIR/log/guest$i-boot.log" 2>&1 &
    echo $! >"$E2E_DIR/run/guest$i-boot.pid"
  done
}

# Each guest's copies of this cluster's files: the controller and composerd where the guest
# reaches them, then its own munged (this cluster's key) and slurmd, at the same paths.
start_guest_slurmd() {  # start_guest_slurmd I
  local i=$1 dir pid
  dir=$(guest_dir "$i")
  pid=$(cat "$E2E_DIR/run/guest$i-boot.pid")
  wait "$pid" || die "guest $i did not boot: $(tail -3 "$E2E_DIR/log/guest$i-boot.log")"
  rm -f "$E2E_DIR/run/guest$i-boot.pid"
  local files=$dir/share/e2e
  mkdir -p "$files" "$dir/share/log"
  # The guest's slurmd puts each job in a cgroup v2 of its own, as a site's does, under the
  # systemd unit it runs in (Delegate=yes), so that the plugin fences the jobs' devices; Slurm
  # constrains none itself (ConstrainDevices=no): a refused open is the plugin's.
  sed -e "s|^SlurmctldHost=.*|SlurmctldHost=$CTLD_HOST(10.0.2.2)|" \
    -e 's|^TaskPlugin=.*|TaskPlugin=task/cgroup|' -e 's|^ProctrackType=.*|ProctrackType=proctrack/cgroup|' \
    "$SLURM_CONF" >"$files/slurm.conf"
  printf 'CgroupPlugin=cgroup/v2\nConstrainDevices=no\n' >"$files/cgroup.conf"
  # With CXL memory the job's cpuset holds its cores' memory node, which the plugin widens.
  if ((E2E_GUEST_CXL > 0)); then echo ConstrainCores=yes >>"$files/cgroup.conf"; fi
  sed 's|http://127\.0\.0\.1:|http://10.0.2.2:|g' "$E2E_DIR/etc/plugstack.conf" >"$files/plugstack.conf"
  cp "$E2E_DIR/etc/gres.conf" "$E2E_DIR/munge/munge.key" "$files/"
  # The guest's $E2E_DIR is a tmpfs of its own: the path may lie in the build tree, which the
  # guest sees read-only.
  guest_sh exec "$dir" --timeout 120 -- "set -e
    d=$E2E_DIR
    mkdir -p \$d
    mount -t tmpfs -o mode=755 composer-e2e \$d
    mkdir -p \$d/etc \$d/munge \$d/run \$d/log \$d/state \$d/spool/slurmd-guest$i \$d/plugin-state
    mount --bind /mnt/share/log \$d/log
    cp /mnt/share/e2e/slurm.conf /mnt/share/e2e/cgroup.conf /mnt/share/e2e/plugstack.conf \
      /mnt/share/e2e/gres.conf \$d/etc/
    install -m 400 /mnt/share/e2e/munge.key \$d/munge/munge.key
    /usr/sbin/munged --force --num-threads=2 --key-file=\$d/munge/munge.key --socket=$MUNGE_SOCKET \
      --pid-file=\$d/run/munged.pid --log-file=\$d/log/munged.log --seed-file=\$d/munge/munged.seed
    systemd-run --unit=composer-slurmd -p Delegate=yes /usr/sbin/slurmd -D -f \$d/etc/slurm.conf -N guest$i" \
    >>"$E2E_DIR/log/guest$i-boot.log" 2>&1 ||
    die "munged or slurmd did not start in guest $i: $(tail -5 "$E2E_DIR/log/guest$i-boot.log"; tail -5 "$dir/share/log/slurmd.log" 2>/dev/null)"
}

stop_guests() {  # ends with status 0 without guests: stop_all runs under set -e
  local file dir
  for file in "$E2E_DIR"/run/guest*-boot.pid; do
    if [[ -f $file ]]; then stop_pid "$(basename "$file" .pid)"; fi
  done
  for dir in "$E2E_DIR"/guests/node*; do
    if [[ -d $dir ]]; then guest_sh stop "$dir" 2>/dev/null || true; fi
  done
  return 0
}

start_slurm() {
  for so in spank_composer.so job_submit_composer.so; do
    [[ -f $PLUGINS/$so ]] || die "plugin not built: $PLUGINS/$so"
  done
  COMPOSER_CONF=$E2E_DIR/etc/composer.conf /usr/sbin/slurmctld -f "$SLURM_CONF"
  if [[ $E2E_GUEST == yes ]]; then
    local i
    for ((i = 1; i <= E2E_NODES; i++)); do start_guest_slurmd "$i"; done
    # Their registrations cross QEMU's user networking under TCG: seconds.
    wait_for 120 "nodes ${NODES[*]} to be idle" nodes_idle
    return 0
  fi
  if [[ $MULTI == no ]]; then
    /usr/sbin/slurmd -f "$SLURM_CONF"
    wait_for 30 "node $NODE to be idle" bash -c \
      "SLURM_CONF='$SLURM_CONF' sinfo -h -n '$NODE' -o %T | grep -qx idle"
    return 0
  fi
  local n
  for n in "${NODES[@]}"; do start_slurmd "$n"; done
  wait_for 60 "nodes ${NODES[*]} to be idle" nodes_idle
}

# --- Accounting: our own MariaDB and slurmdbd -------------------------------------------------
dbd_addr() { if [[ $MULTI == yes ]]; then echo "$HOST_ADDR"; else echo 127.0.0.1; fi; }
db_root() { mariadb --no-defaults -S "$DB_SOCKET" -u root "$@"; }

# MariaDB on a data directory of its own: --no-defaults, so that nothing of the system's
# my.cnf (nor its socket, port or data) counts; TCP on loopback, for slurmdbd, on our port.
start_mariadb() {
  local db=$E2E_DIR/db
  mkdir -p "$db"
  mariadb-install-db --no-defaults --datadir="$db/data" --user=root --skip-test-db \
    --auth-root-authentication-method=socket >>"$E2E_DIR/log/mariadb-install.log" 2>&1 ||
    die "mariadb-install-db failed (see $E2E_DIR/log/mariadb-install.log)"
  # slurmdbd's recommended InnoDB sizes, so that it does not warn.
  setsid "$(command -v mariadbd || echo /usr/sbin/mariadbd)" --no-defaults --user=root \
    --datadir="$db/data" --socket="$DB_SOCKET" --bind-address=127.0.0.1 --port="$E2E_DB_PORT" \
    --pid-file="$E2E_DIR/run/mariadbd.pid" --log-error="$E2E_DIR/log/mariadbd.log" \
    --skip-name-resolve --innodb-buffer-pool-size=128M --innodb-log-file-size=64M \
    --innodb-lock-wait-timeout=900 >>"$E2E_DIR/log/mariadbd.out" 2>&1 &
  wait_for 30 "mariadbd on 127.0.0.1:$E2E_DB_PORT" db_root -e 'SELECT 1'
  wait_for 5 "mariadbd's pid file" test -s "$E2E_DIR/run/mariadbd.pid"
}

start_slurmdbd() {
  local password="e2e-$RANDOM$RANDOM"
  # The database is made here, as a site makes it: slurmdbd would otherwise connect, find no
  # database, create it and connect again on the same handle, which MariaDB's client library
  # 3.4.10 (Debian's 11.8.9, trixie and sid) leaves broken (error 5027 "Number of columns in
  # result (=1) set execeeds maxmimum allowed number of columns (=0)" at its first query).
  db_root -e "CREATE DATABASE slurm_acct_db;
    CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$password';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" || die "cannot create slurmdbd's database and user"
  # slurmdbd reads slurmdbd.conf beside slurm.conf (SLURM_CONF); it holds the database
  # password, so slurmdbd refuses it unless it is SlurmUser's alone.
  (
    umask 077
    cat >"$E2E_DIR/etc/slurmdbd.conf" <<CONF
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
DbdHost=$CTLD_HOST
DbdAddr=$(dbd_addr)
DbdPort=$E2E_DBD_PORT
SlurmUser=root
DebugLevel=verbose
LogFile=$E2E_DIR/log/slurmdbd.log
PidFile=$E2E_DIR/run/slurmdbd.pid
PluginDir=/usr/lib/x86_64-linux-gnu/slurm-wlm
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$E2E_DB_PORT
StorageUser=slurm
StoragePass=$password
StorageLoc=slurm_acct_db
CONF
  )
  chown root:root "$E2E_DIR/etc/slurmdbd.conf"
  SLURM_CONF=$SLURM_CONF /usr/sbin/slurmdbd || die "slurmdbd did not start (see $E2E_DIR/log/slurmdbd.log)"
  if ! (wait_for 60 "slurmdbd on port $E2E_DBD_PORT" env SLURM_CONF="$SLURM_CONF" sacctmgr -n list cluster); then
    tail -n 20 "$E2E_DIR/log/slurmdbd.log" >&2 || true
    die "slurmdbd did not answer (the end of $E2E_DIR/log/slurmdbd.log above)"
  fi
  if ! SLURM_CONF=$SLURM_CONF sacctmgr -n -P list cluster format=cluster | grep -qx composer-e2e; then
    SLURM_CONF=$SLURM_CONF sacctmgr -i add cluster composer-e2e >/dev/null ||
      die "sacctmgr could not add cluster composer-e2e"
  fi
}

stop_pid() {  # stop_pid NAME [SECONDS]: TERM, then KILL, the process whose pid file we wrote
  local file=$E2E_DIR/run/$1.pid pid limit=${2:-10}
  [[ -f $file ]] || return 0
  pid=$(cat "$file")
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < limit * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$file"
}

stop_all() {
  # Order: no new jobs (each node's slurmd, then what is left in its namespace: job steps
  # outlive a killed slurmd), then the controller and its accounting, their prologs' server,
  # authentication, and last the network.
  local file
  for file in "$E2E_DIR"/run/slurmd.pid "$E2E_DIR"/run/slurmd-*.pid; do
    [[ -f $file ]] || continue
    stop_pid "$(basename "$file" .pid)" &  # the nodes side by side: each takes seconds
  done
  wait
  stop_guests
  stop_network_processes
  stop_pid slurmctld
  stop_pid slurmdbd
  stop_pid mariadbd 30  # it flushes InnoDB first
  stop_composerd
  stop_pid postgres 30  # once its clients are gone: a smart shutdown waits for them
  stop_pid fake_redfish
  stop_pid fake_host
  stop_pid munged
  stop_network
}

case ${1:-} in
  start)
    [[ $(id -u) == 0 ]] || die "must run as root (slurmd and the job prolog run as root)"
    install_packages
    "$0" stop || true
    write_configs
    if [[ $MULTI == yes ]]; then start_network; fi
    start_munged
    if [[ $FABRIC == redfish ]]; then start_fake_redfish; fi
    if [[ $E2E_COMPOSERDS == 2 ]]; then start_postgresql; fi
    start_composerd
    # After composerd: guests booting under TCG take every core, and composerd has 20 s.
    if [[ $E2E_GUEST == yes ]]; then start_guests; fi
    if [[ $E2E_HOST_CHECK == wait ]]; then start_fake_host; fi
    write_slurm_configs
    if [[ $E2E_ACCOUNTING == yes ]]; then
      start_mariadb
      start_slurmdbd
    fi
    start_slurm
    log "up: SLURM_CONF=$SLURM_CONF, nodes ${NODES[*]}, composerd on ${E2E_URLS//http:\/\//} (Fabric=$FABRIC), accounting $E2E_ACCOUNTING, logs in $E2E_DIR/log"
    ;;
  stop) stop_all ;;
  start-composerd) shift; start_composerd "$@" ;;
  stop-composerd) shift; stop_composerd "$@" ;;
  start-slurmd) start_slurmd "${2:?usage: $0 start-slurmd NODE}" ;;
  stop-slurmd) stop_slurmd "${2:?usage: $0 stop-slurmd NODE}" ;;
  env)
    echo "export SLURM_CONF=$SLURM_CONF E2E_DIR=$E2E_DIR E2E_PORT=$E2E_PORT MUNGE_SOCKET=$MUNGE_SOCKET NODE=$NODE FABRIC=$FABRIC"
    echo "export E2E_URL=$E2E_URL E2E_NODES=$E2E_NODES E2E_NODE_NAMES='${NODES[*]}' E2E_ACCOUNTING=$E2E_ACCOUNTING E2E_COMPOSE=$E2E_COMPOSE"
    echo "export E2E_HOST_CHECK=$E2E_HOST_CHECK E2E_COMPOSERDS=$E2E_COMPOSERDS E2E_URLS=$E2E_URLS"
    ;;
  *)
    echo "usage: $0 start|stop|env|start-composerd [I]|stop-composerd [I]|start-slurmd NODE|stop-slurmd NODE" >&2
    exit 2
    ;;
esac
