#!/usr/bin/env bash
# A throw-away single-node Slurm cluster with slurm-composer on this machine.
#
#   cluster.sh start   install slurm+munge if missing, generate configs, start munged,
#                      composerd, slurmctld and slurmd; wait until the node is idle
#   cluster.sh stop    stop everything this script started, by PID
#   cluster.sh env     print the variables a shell needs to use the cluster
#
# Environment: BUILD_DIR (default build; PLUGIN_DIR and COMPOSERD override the paths inside it),
# E2E_DIR (default /tmp/composer-e2e), and the pool:
# E2E_GPUS (8), E2E_MEM_BLOCKS (4, 64G each), E2E_NVME (4). Must run as root (slurmd does).
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

PLUGINS=$(realpath -m "${PLUGIN_DIR:-$BUILD_DIR/slurm-plugin}")
COMPOSERD=$(realpath -m "${COMPOSERD:-$BUILD_DIR/composer/server/composerd}")
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

write_configs() {
  rm -rf "$E2E_DIR"
  mkdir -p "$E2E_DIR"/{etc,munge,state,spool,log,run,composer,plugin-state,sys/bus/pci/devices}
  mkdir -p "$E2E_DIR/spool/slurmd-$NODE"
  chmod 755 "$E2E_DIR" "$E2E_DIR/munge"
  : >"$E2E_DIR/sys/bus/pci/rescan"
  local cpus mem_mb
  cpus=16
  mem_mb=$(($(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) / 2))
  local mem_gib=$((E2E_MEM_BLOCKS * 64))

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
Fabric=sim
SimLatency=20
NodeName=$NODE Zones=z1 GpuSlots=$E2E_GPUS MemSlots=$E2E_MEM_BLOCKS NvmeSlots=$E2E_NVME
DeviceGroup=gpu-a Type=gpu Model=A100-80G Zone=z1 Count=$E2E_GPUS
DeviceGroup=cxl-a Type=mem Model=CXL-DDR5 Zone=z1 Count=$E2E_MEM_BLOCKS Size=64G
DeviceGroup=nvme-a Type=nvme Model=P5620 Zone=z1 Count=$E2E_NVME Size=1T
CONF

  cat >"$E2E_DIR/etc/plugstack.conf" <<CONF
required $PLUGINS/spank_composer.so server=http://127.0.0.1:$E2E_PORT timeout=30 connect_timeout=2 retries=2 backoff_ms=200 state_dir=$E2E_DIR/plugin-state munge_socket=$MUNGE_SOCKET sysfs_root=$E2E_DIR/sys proc_root=/proc host_check=rescan busy_wait=5
CONF

  cat >"$E2E_DIR/etc/gres.conf" <<CONF
AutoDetect=off
NodeName=$NODE Name=cgpu Count=$E2E_GPUS
NodeName=$NODE Name=cnvme Count=$E2E_NVME
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
Licenses=fabric_gpu:$E2E_GPUS,fabric_mem:$mem_gib,fabric_nvme:$E2E_NVME
GresTypes=cgpu,cnvme
NodeName=$NODE CPUs=$cpus RealMemory=$mem_mb Gres=cgpu:$E2E_GPUS,cnvme:$E2E_NVME State=UNKNOWN
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
    start_composerd
    start_slurm
    log "up: SLURM_CONF=$SLURM_CONF, composerd on 127.0.0.1:$E2E_PORT, logs in $E2E_DIR/log"
    ;;
  stop)
    # Order: no new jobs, then their prologs' server, then authentication.
    stop_pid slurmd
    stop_pid slurmctld
    stop_composerd
    stop_pid munged
    ;;
  start-composerd) start_composerd ;;
  stop-composerd) stop_composerd ;;
  env)
    echo "export SLURM_CONF=$SLURM_CONF E2E_DIR=$E2E_DIR E2E_PORT=$E2E_PORT MUNGE_SOCKET=$MUNGE_SOCKET NODE=$NODE"
    ;;
  *)
    echo "usage: $0 start|stop|env|start-composerd|stop-composerd" >&2
    exit 2
    ;;
esac
