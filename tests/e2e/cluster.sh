#!/usr/bin/env bash
# A throw-away single-node Slurm cluster with slurm-composer on this machine.
#
#   cluster.sh start   install slurm+munge if missing, generate configs, start munged,
#                      composerd, slurmctld and slurmd; wait until the node is idle
#   cluster.sh stop    stop everything this script started, by PID
#   cluster.sh env     print the variables a shell needs to use the cluster
#
# Environment: BUILD_DIR (default build; PLUGIN_DIR, COMPOSERD and FAKE_REDFISH override the
# paths inside it), E2E_DIR (default /tmp/composer-e2e), the ports E2E_PORT (composerd),
# CTLD_PORT and SLURMD_PORT, FABRIC and the pool:
#   FABRIC=sim      (default) composerd's simulated fabric holding E2E_GPUS (8) A100 GPUs,
#                   E2E_MEM_BLOCKS (4) 64G CXL memory blocks and E2E_NVME (4) NVMe drives;
#   FABRIC=redfish  the fake Redfish composition service (tests/drivers/fake_redfish) on
#                   loopback, this node mapped to its composed system node01: E2E_GPUS/2 GPUs
#                   in each of its two zones plus the devices of the DMTF mockup it serves.
# Slurm's licenses and GRES counts are taken from the pool composerd publishes, whatever the
# fabric. E2E_SLURM_SYNC=yes turns on composerd's SlurmSync (hold and blocker reservations kept
# in step by composerd) and gives slurm.conf a cap license per class sized to the pool, as
# composerctl slurm-config prints them. Must run as root (slurmd does).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD_DIR=$(cd "${BUILD_DIR:-$SRC/build}" && pwd)
E2E_DIR=$(realpath -m "${E2E_DIR:-/tmp/composer-e2e}")
# The folder is wiped at start: only ever one of ours.
[[ $(basename "$E2E_DIR") == composer-e2e* ]] || { echo "cluster: E2E_DIR must be named composer-e2e*" >&2; exit 2; }
E2E_GPUS=${E2E_GPUS:-8}
E2E_MEM_BLOCKS=${E2E_MEM_BLOCKS:-4}
E2E_NVME=${E2E_NVME:-4}
E2E_PORT=${E2E_PORT:-16830}
CTLD_PORT=${CTLD_PORT:-16817}
SLURMD_PORT=${SLURMD_PORT:-16818}
NODE=$(hostname -s)
FABRIC=${FABRIC:-sim}
E2E_SLURM_SYNC=${E2E_SLURM_SYNC:-no}
[[ $FABRIC == sim || $FABRIC == redfish ]] ||
  { echo "cluster: FABRIC=$FABRIC: allowed are sim and redfish" >&2; exit 2; }

PLUGINS=$(realpath -m "${PLUGIN_DIR:-$BUILD_DIR/slurm-plugin}")
COMPOSERD=$(realpath -m "${COMPOSERD:-$BUILD_DIR/composer/server/composerd}")
FAKE_REDFISH=$(realpath -m "${FAKE_REDFISH:-$BUILD_DIR/tests/drivers/fake_redfish/fake_redfish}")
MUNGE_SOCKET=$E2E_DIR/munge/munge.socket
SLURM_CONF=$E2E_DIR/etc/slurm.conf

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
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2
  shift 2
  for ((i = 0; i < limit * 10; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  die "timed out after ${limit}s waiting for $what"
}

write_configs() {  # the folder and every file but slurm.conf and gres.conf (they need the pool)
  rm -rf "$E2E_DIR"
  mkdir -p "$E2E_DIR"/{etc,munge,state,spool,log,run,composer,plugin-state,sys/bus/pci/devices}
  mkdir -p "$E2E_DIR/spool/slurmd-$NODE"
  chmod 755 "$E2E_DIR" "$E2E_DIR/munge"
  : >"$E2E_DIR/sys/bus/pci/rescan"

  cat >"$E2E_DIR/etc/composer.conf" <<CONF
ListenAddress=127.0.0.1
ListenPort=$E2E_PORT
StateDir=$E2E_DIR/composer
LogFile=$E2E_DIR/log/composerd.log
LogLevel=info
AdminUsers=root
Workloads=training,inference
MungeSocket=$MUNGE_SOCKET
ComposeTimeout=20
ReleaseTimeout=20
ReconcileInterval=5
Durable=no
CONF
  if [[ $E2E_SLURM_SYNC == yes ]]; then
    printf 'SlurmSync=yes\nSlurmConf=%s\n' "$SLURM_CONF" >>"$E2E_DIR/etc/composer.conf"
  fi
  if [[ $FABRIC == sim ]]; then
    cat >>"$E2E_DIR/etc/composer.conf" <<CONF
Fabric=sim
SimLatency=20
NodeName=$NODE Zones=z1 GpuSlots=$E2E_GPUS MemSlots=$E2E_MEM_BLOCKS NvmeSlots=$E2E_NVME
DeviceGroup=gpu-a Type=gpu Model=A100-80G Zone=z1 Count=$E2E_GPUS
DeviceGroup=cxl-a Type=mem Model=CXL-DDR5 Zone=z1 Count=$E2E_MEM_BLOCKS Size=64G
DeviceGroup=nvme-a Type=nvme Model=P5620 Zone=z1 Count=$E2E_NVME Size=1T
CONF
  fi
  # The redfish lines need the fake's port: start_fake_redfish appends them.

  cat >"$E2E_DIR/etc/plugstack.conf" <<CONF
required $PLUGINS/spank_composer.so server=http://127.0.0.1:$E2E_PORT timeout=30 connect_timeout=2 retries=2 backoff_ms=200 state_dir=$E2E_DIR/plugin-state munge_socket=$MUNGE_SOCKET sysfs_root=$E2E_DIR/sys proc_root=/proc host_check=rescan busy_wait=5
CONF
}

# The DMTF mockup the fake serves, less the device blocks already composed into the mockup's
# own systems: this cluster is about the node composerd serves, and those blocks belong to
# hosts it leaves alone. The mockup's free blocks stay in the pool.
# The mockups are served whole, as a real service holds them: composed systems, blocks
# already composed into them, shared blocks. composerd must leave all of that alone.
mockups_dir() {
  local from
  from=$(realpath -m "${COMPOSER_REDFISH_MOCKUPS:-$SRC/../shared/data/redfish}")
  [[ -d $from/public-composability ]] ||
    die "Redfish mockups not found at $from (set COMPOSER_REDFISH_MOCKUPS)"
  echo "$from"
}

# The fake Redfish service, and composer.conf's fabric lines pointing at it. It serves
# composed systems node01.. reaching both its zones; this node is node01. Attach slots: the
# fake publishes none, so FabricSlots lets one host hold the whole pool, as with sim.
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
  setsid "$FAKE_REDFISH" --mockups "$mockups" --port-file "$port_file" --hosts 1 --gpus-per-zone $((E2E_GPUS / 2)) \
    --task-ms 20 --username composer --password "$password" \
    >>"$E2E_DIR/log/fake_redfish.log" 2>&1 &
  echo $! >"$E2E_DIR/run/fake_redfish.pid"
  wait_for 10 "fake_redfish to listen" test -s "$port_file"
  cat >>"$E2E_DIR/etc/composer.conf" <<CONF
Fabric=redfish
FabricName=fake-redfish
FabricUrl=http://127.0.0.1:$(cat "$port_file")
FabricCredentials=$cred
FabricAuth=session
FabricTimeout=5s
FabricPollInterval=20ms
FabricTaskWait=15s
FabricSlots=64
NodeName=$NODE FabricHost=node01
CONF
}

# slurm.conf and gres.conf, with licenses and GRES counts from the pool composerd published.
write_slurm_configs() {
  local snapshot=$E2E_DIR/composer/snapshot.json gpus mem_gib nvme cpus=16 mem_mb
  gpus=$(jq -er '.pools.gpu.total' "$snapshot") || die "no GPU count in $snapshot"
  mem_gib=$(jq -er '.pools.mem.total_bytes / 1073741824 | floor' "$snapshot") ||
    die "no memory size in $snapshot"
  nvme=$(jq -er '.pools.nvme.total' "$snapshot") || die "no NVMe count in $snapshot"
  ((gpus > 0 && mem_gib > 0 && nvme > 0)) ||
    die "the pool lacks a device type (gpus=$gpus mem=${mem_gib}G nvme=$nvme): $snapshot"
  mem_mb=$(($(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) / 2))
  local caps="" class
  if [[ $E2E_SLURM_SYNC == yes ]]; then
    for class in training inference; do
      caps+=",${class}_gpu_cap:$gpus,${class}_mem_cap:$mem_gib,${class}_nvme_cap:$nvme"
    done
  fi

  cat >"$E2E_DIR/etc/gres.conf" <<CONF
AutoDetect=off
NodeName=$NODE Name=cgpu Count=$gpus
NodeName=$NODE Name=cnvme Count=$nvme
CONF

  cat >"$SLURM_CONF" <<CONF
ClusterName=composer-e2e
SlurmctldHost=$NODE
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$E2E_DIR/state
SlurmdSpoolDir=$E2E_DIR/spool/slurmd-%n
SlurmctldPidFile=$E2E_DIR/run/slurmctld.pid
SlurmdPidFile=$E2E_DIR/run/slurmd.pid
SlurmctldLogFile=$E2E_DIR/log/slurmctld.log
SlurmdLogFile=$E2E_DIR/log/slurmd.log
SlurmctldDebug=verbose
SlurmdDebug=verbose
PluginDir=$PLUGINS:/usr/lib/x86_64-linux-gnu/slurm-wlm
PlugStackConfig=$E2E_DIR/etc/plugstack.conf
JobSubmitPlugins=composer
PrologFlags=Alloc
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=bf_licenses,bf_interval=2,sched_min_interval=100000
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
MinJobAge=600
MaxArraySize=1001
SlurmdParameters=config_overrides
DefMemPerCPU=100
Licenses=fabric_gpu:$gpus,fabric_mem:$mem_gib,fabric_nvme:$nvme$caps
GresTypes=cgpu,cnvme
NodeName=$NODE CPUs=$cpus RealMemory=$mem_mb Gres=cgpu:$gpus,cnvme:$nvme State=UNKNOWN
PartitionName=main Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
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

start_composerd() {
  [[ -x $COMPOSERD ]] || die "composerd not built: $COMPOSERD"
  setsid "$COMPOSERD" -f "$E2E_DIR/etc/composer.conf" >>"$E2E_DIR/log/composerd.out" 2>&1 &
  echo $! >"$E2E_DIR/run/composerd.pid"
  wait_for 20 "composerd on port $E2E_PORT" curl -fsS "http://127.0.0.1:$E2E_PORT/v1/health"
  wait_for 10 "the pool snapshot" test -s "$E2E_DIR/composer/snapshot.json"
}

stop_composerd() { stop_pid composerd; }

start_slurm() {
  for so in spank_composer.so job_submit_composer.so; do
    [[ -f $PLUGINS/$so ]] || die "plugin not built: $PLUGINS/$so"
  done
  COMPOSER_CONF=$E2E_DIR/etc/composer.conf /usr/sbin/slurmctld -f "$SLURM_CONF"
  /usr/sbin/slurmd -f "$SLURM_CONF"
  wait_for 30 "node $NODE to be idle" bash -c \
    "SLURM_CONF='$SLURM_CONF' sinfo -h -n '$NODE' -o %T | grep -qx idle"
}

stop_pid() {  # stop_pid NAME: TERM, then KILL, the process whose pid file we wrote
  local file=$E2E_DIR/run/$1.pid pid
  [[ -f $file ]] || return 0
  pid=$(cat "$file")
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

case ${1:-} in
  start)
    [[ $(id -u) == 0 ]] || die "must run as root (slurmd and the job prolog run as root)"
    install_packages
    "$0" stop || true
    write_configs
    start_munged
    if [[ $FABRIC == redfish ]]; then start_fake_redfish; fi
    start_composerd
    write_slurm_configs
    start_slurm
    log "up: SLURM_CONF=$SLURM_CONF, composerd on 127.0.0.1:$E2E_PORT (Fabric=$FABRIC), logs in $E2E_DIR/log"
    ;;
  stop)
    # Order: no new jobs, then their prologs' server, then authentication.
    stop_pid slurmd
    stop_pid slurmctld
    stop_composerd
    stop_pid fake_redfish
    stop_pid munged
    ;;
  start-composerd) start_composerd ;;
  stop-composerd) stop_composerd ;;
  env)
    echo "export SLURM_CONF=$SLURM_CONF E2E_DIR=$E2E_DIR E2E_PORT=$E2E_PORT MUNGE_SOCKET=$MUNGE_SOCKET NODE=$NODE FABRIC=$FABRIC"
    ;;
  *)
    echo "usage: $0 start|stop|env|start-composerd|stop-composerd" >&2
    exit 2
    ;;
esac
