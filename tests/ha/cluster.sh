#!/usr/bin/env bash
# A throw-away highly available PostgreSQL on loopback: a three-member etcd (Debian's
# etcd-server) and three PostgreSQL under Patroni (Debian's patroni), in synchronous_mode with
# synchronous_mode_strict (a commit is acknowledged only once a standby has it; never
# asynchronous), for the HA tests and the benchmark. Everything runs as the user postgres, or
# nobody where there is none.
#
#   cluster.sh start     install the packages if missing, wait (up to 70 s) until no socket
#                        uses the cluster's ports, start etcd and Patroni, wait until
#                        there is a primary with a synchronous standby and a database composer
#   cluster.sh stop      stop everything this script started, by PID (also after a start that
#                        failed half-way, and twice)
#   cluster.sh env       print HA_CONNINFO (the libpq multi-host string composerd takes) and
#                        each member's ports
#   cluster.sh primary   print the primary's member name (pg1..pg3), or nothing
#   cluster.sh pid NAME  print the PID of member NAME's postmaster
#   cluster.sh sync      print the synchronous standby's member name, or nothing
#   cluster.sh kill NAME SIGKILL member NAME's Patroni and PostgreSQL at once (its whole
#                        session), as if its host died
#   cluster.sh revive NAME  start member NAME's Patroni again (it rejoins as a standby)
#   cluster.sh wait      wait (up to 180 s) for a primary, a synchronous standby and three
#                        running members
#   cluster.sh psql ARGS psql on the primary as the superuser
#
# Environment: HA_DIR (default /tmp/composer-ha; wiped at start, so it must be one of ours:
# /tmp/composer-ha*), HA_PORT (default 31000; everything within HA_PORT..HA_PORT+99, which must
# lie in 31000-31999, below Linux's ephemeral ports, 32768-60999, that any program's outgoing
# connection may take): member I (1..3) has etcd's client port HA_PORT+10*I+1 and peer port
# +2, Patroni's REST API +3 and PostgreSQL +4. HA_TTL (default 10), HA_LOOP_WAIT (2) and
# HA_RETRY_TIMEOUT (3) are Patroni's ttl, loop_wait and retry_timeout (loop_wait +
# 2*retry_timeout must not exceed ttl): short, so that a failover takes seconds. PostgreSQL
# is kept small (shared_buffers 16MB, 60 connections).
set -euo pipefail

HA_DIR=$(realpath -m "${HA_DIR:-/tmp/composer-ha}")
HA_PORT=${HA_PORT:-31000}
HA_TTL=${HA_TTL:-10}
HA_LOOP_WAIT=${HA_LOOP_WAIT:-2}
HA_RETRY_TIMEOUT=${HA_RETRY_TIMEOUT:-3}
MEMBERS=(1 2 3)

die() {
  echo "cluster.sh: $*" >&2
  [[ ${STOP_ON_DIE:-} == yes ]] && stop
  exit 1
}

case $HA_DIR in
  /tmp/composer-ha*) ;;
  *) die "HA_DIR=$HA_DIR: only a folder under /tmp/composer-ha* is allowed (it is wiped at start)" ;;
esac
[[ $HA_PORT =~ ^[0-9]+$ ]] && ((HA_PORT >= 31000 && HA_PORT + 99 <= 31999)) ||
  die "HA_PORT=$HA_PORT: give a number from 31000 to 31900 (the cluster uses HA_PORT..HA_PORT+99)"
for v in HA_TTL HA_LOOP_WAIT HA_RETRY_TIMEOUT; do
  [[ ${!v} =~ ^[0-9]+$ ]] && ((${!v} > 0)) || die "$v=${!v}: give a whole number of seconds"
done
((HA_LOOP_WAIT + 2 * HA_RETRY_TIMEOUT <= HA_TTL)) ||
  die "HA_LOOP_WAIT + 2*HA_RETRY_TIMEOUT ($HA_LOOP_WAIT + 2*$HA_RETRY_TIMEOUT) exceeds HA_TTL ($HA_TTL), which Patroni needs"

etcd_client() { echo $((HA_PORT + 10 * $1 + 1)); }
etcd_peer() { echo $((HA_PORT + 10 * $1 + 2)); }
rest_port() { echo $((HA_PORT + 10 * $1 + 3)); }
pg_port() { echo $((HA_PORT + 10 * $1 + 4)); }

# Whether no socket uses any of the cluster's ports. They lie in the kernel's range for the
# local ports of outgoing connections, and after a run of many clients one of them may be a
# closed connection's for up to a minute (TIME_WAIT): PostgreSQL then cannot listen on it, and
# a member whose start failed so came up unable to stream.
ports_free() {
  local i p
  for i in "${MEMBERS[@]}"; do
    for p in "$(etcd_client "$i")" "$(etcd_peer "$i")" "$(rest_port "$i")" "$(pg_port "$i")"; do
      [[ -z $(ss -Htan "( sport = :$p )" 2>/dev/null) ]] || return 1
    done
  done
}

etcd_hosts() {
  local out=() i
  for i in "${MEMBERS[@]}"; do out+=("127.0.0.1:$(etcd_client "$i")"); done
  (
    IFS=,
    echo "${out[*]}"
  )
}

conninfo() {
  local hosts=() ports=() i
  for i in "${MEMBERS[@]}"; do
    hosts+=(127.0.0.1)
    ports+=("$(pg_port "$i")")
  done
  local IFS=,
  echo "host=${hosts[*]} port=${ports[*]} dbname=composer user=composer password=composer-ha" \
    "target_session_attrs=read-write connect_timeout=2"
}

run_user() {
  if id postgres >/dev/null 2>&1; then echo postgres; else echo nobody; fi
}

install_packages() {
  local missing=() p
  for p in etcd-server patroni postgresql-15 curl iproute2; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "cluster.sh: installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
      die "could not install ${missing[*]}"
  fi
}

pg_bindir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do [[ -x $d/postgres ]] && echo "$d"; done | sort -V | tail -1
}

# Starts "$@" as the run user in a session of its own, output into $1's log; records its PID.
spawn() {
  local name=$1
  shift
  local user
  user=$(run_user)
  setsid setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups -- "$@" \
    >>"$HA_DIR/$name.log" 2>&1 </dev/null &
  echo $! >"$HA_DIR/$name.pid"
}

write_patroni_conf() {
  local i=$1 bindir=$2
  cat >"$HA_DIR/pg$i.yml" <<EOF
scope: composer-ha
name: pg$i
log:
  level: WARNING
restapi:
  listen: 127.0.0.1:$(rest_port "$i")
  connect_address: 127.0.0.1:$(rest_port "$i")
etcd3:
  hosts: $(etcd_hosts)
bootstrap:
  dcs:
    ttl: $HA_TTL
    loop_wait: $HA_LOOP_WAIT
    retry_timeout: $HA_RETRY_TIMEOUT
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: true
    postgresql:
      use_pg_rewind: true
      parameters:
        max_connections: 60
        shared_buffers: 16MB
        max_wal_senders: 6
        max_replication_slots: 6
        wal_keep_size: 64MB
        wal_log_hints: "on"
        # A standby whose primary died asks for WAL again this soon (PostgreSQL's default 5 s):
        # with synchronous_mode_strict no commit is taken until the standby left streams from
        # the new primary (docs/BENCHMARKS.md, "High availability").
        wal_retrieve_retry_interval: 500ms
  initdb:
    - encoding: UTF8
    - no-locale
    - auth: scram-sha-256
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 scram-sha-256
    - host all all 127.0.0.1/32 scram-sha-256
postgresql:
  listen: 127.0.0.1:$(pg_port "$i")
  connect_address: 127.0.0.1:$(pg_port "$i")
  data_dir: $HA_DIR/pg$i/data
  bin_dir: $bindir
  pgpass: $HA_DIR/pg$i/pgpass
  authentication:
    replication:
      username: replicator
      password: replicator-ha
    superuser:
      username: postgres
      password: postgres-ha
  parameters:
    unix_socket_directories: $HA_DIR/pg$i
    shared_buffers: 16MB
    work_mem: 1MB
    maintenance_work_mem: 8MB
    max_worker_processes: 4
    max_parallel_workers: 0
    autovacuum_max_workers: 1
tags:
  nofailover: false
  noloadbalance: false
EOF
}

etcd_healthy() {
  local i
  for i in "${MEMBERS[@]}"; do
    curl -s --max-time 2 "http://127.0.0.1:$(etcd_client "$i")/health" | grep -q '"health":"true"' ||
      return 1
  done
}

rest() { curl -s --max-time 2 "http://127.0.0.1:$(rest_port "$1")/$2" || true; }

member_role() { rest "$1" patroni | sed -n 's/.*"role": *"\([a-z_]*\)".*/\1/p'; }

primary() {
  local i
  for i in "${MEMBERS[@]}"; do
    [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$(rest_port "$i")/primary" || true) == 200 ]] &&
      echo "pg$i" && return 0
  done
  return 0
}

sync_standby() {
  local i
  for i in "${MEMBERS[@]}"; do
    [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$(rest_port "$i")/sync" || true) == 200 ]] &&
      echo "pg$i" && return 0
  done
  return 0
}

member_pid() {
  local f="$HA_DIR/$1/data/postmaster.pid"
  [[ -r $f ]] && head -1 "$f"
}

psql_primary() {
  local p
  p=$(primary)
  [[ -n $p ]] || return 1
  PGPASSWORD=postgres-ha psql -X -q -At -h 127.0.0.1 -p "$(pg_port "${p#pg}")" -U postgres -d postgres "$@"
}

# Sends each PID in the files $@ name SIGTERM at once, waits up to 10 s for them all, then
# SIGKILLs what is left.
stop_pidfiles() {
  local f pid pids=()
  for f in "$@"; do
    [[ -r $f ]] || continue
    pid=$(cat "$f")
    [[ $pid =~ ^[0-9]+$ ]] && kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
  done
  wait_gone "${pids[@]}"
  rm -f "$@"
}

wait_gone() {
  local pid left
  for _ in $(seq 1 100); do
    left=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && left=1; done
    ((left)) || return 0
    sleep 0.1
  done
  for pid in "$@"; do kill -KILL "$pid" 2>/dev/null || true; done
}

stop() {
  [[ -d $HA_DIR ]] || return 0
  local i pid pids=()
  # Patroni first (it stops its PostgreSQL), then any postmaster left behind (a Patroni killed
  # or one that died), then etcd.
  stop_pidfiles "$HA_DIR"/patroni{1,2,3}.pid
  for i in "${MEMBERS[@]}"; do
    pid=$(member_pid "pg$i" || true)
    if [[ $pid =~ ^[0-9]+$ ]] && [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == */postgres ]]; then
      kill -INT "$pid" 2>/dev/null && pids+=("$pid")
    fi
  done
  wait_gone "${pids[@]}"
  stop_pidfiles "$HA_DIR"/etcd{1,2,3}.pid
}

start() {
  install_packages
  local bindir user i
  bindir=$(pg_bindir)
  [[ -n $bindir ]] || die "no PostgreSQL binaries under /usr/lib/postgresql/*/bin"
  user=$(run_user)
  stop
  local deadline=$((SECONDS + 70))
  until ports_free; do
    ((SECONDS < deadline)) || die "a port in $HA_PORT..$((HA_PORT + 99)) is still in use after 70 s (ss -tan)"
    sleep 1
  done
  rm -rf "$HA_DIR"
  mkdir -p "$HA_DIR"
  chmod 755 "$HA_DIR"
  local cluster=()
  for i in "${MEMBERS[@]}"; do
    cluster+=("etcd$i=http://127.0.0.1:$(etcd_peer "$i")")
    mkdir -p "$HA_DIR/etcd$i" "$HA_DIR/pg$i"
    chmod 700 "$HA_DIR/pg$i"
  done
  chown -R "$user:" "$HA_DIR"
  local initial
  initial=$(
    IFS=,
    echo "${cluster[*]}"
  )
  for i in "${MEMBERS[@]}"; do
    # Short heartbeats, so that a lost member is noticed soon.
    spawn "etcd$i" etcd --name "etcd$i" --data-dir "$HA_DIR/etcd$i" \
      --listen-client-urls "http://127.0.0.1:$(etcd_client "$i")" \
      --advertise-client-urls "http://127.0.0.1:$(etcd_client "$i")" \
      --listen-peer-urls "http://127.0.0.1:$(etcd_peer "$i")" \
      --initial-advertise-peer-urls "http://127.0.0.1:$(etcd_peer "$i")" \
      --initial-cluster "$initial" --initial-cluster-state new \
      --initial-cluster-token composer-ha --heartbeat-interval 100 --election-timeout 1000 \
      --quota-backend-bytes 134217728
  done
  deadline=$((SECONDS + 60))
  until etcd_healthy; do
    ((SECONDS < deadline)) || die "etcd did not become healthy within 60 s; see $HA_DIR/etcd*.log"
    sleep 0.5
  done
  for i in "${MEMBERS[@]}"; do
    write_patroni_conf "$i" "$bindir"
    chown "$user:" "$HA_DIR/pg$i.yml"
    spawn "patroni$i" patroni "$HA_DIR/pg$i.yml"
    # The first one bootstraps alone; the others then copy it with pg_basebackup.
    if ((i == 1)); then
      deadline=$((SECONDS + 120))
      until [[ -n $(primary) ]]; do
        ((SECONDS < deadline)) || die "no primary within 120 s; see $HA_DIR/patroni1.log"
        sleep 0.5
      done
    fi
  done
  wait_healthy
  # CREATEDB: the benchmark makes a fresh database for each composerd it starts.
  psql_primary -c "CREATE ROLE composer LOGIN CREATEDB PASSWORD 'composer-ha'" >/dev/null
  psql_primary -c "CREATE DATABASE composer OWNER composer" >/dev/null
  echo "cluster.sh: primary $(primary), synchronous standby $(sync_standby); ttl ${HA_TTL} s, loop_wait ${HA_LOOP_WAIT} s, retry_timeout ${HA_RETRY_TIMEOUT} s"
}

wait_healthy() {
  local deadline=$((SECONDS + 180))
  until [[ -n $(primary) ]] && [[ -n $(sync_standby) ]] && [[ $(running_members) == 3 ]]; do
    ((SECONDS < deadline)) || die "no primary, synchronous standby and three running members within 180 s; see $HA_DIR/patroni*.log"
    sleep 0.5
  done
}

member_number() {
  [[ ${1:-} =~ ^pg([123])$ ]] || die "give a member name, pg1, pg2 or pg3"
  echo "${BASH_REMATCH[1]}"
}

kill_member() {
  local i pid
  i=$(member_number "$1")
  pid=$(cat "$HA_DIR/patroni$i.pid" 2>/dev/null || true)
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || die "$1's Patroni is not running"
  # Patroni leads its own process group (spawn's setsid); it starts its postmaster detached,
  # in a group of its own with every backend.
  local postmaster group=""
  postmaster=$(member_pid "pg$i" || true)
  [[ $postmaster =~ ^[0-9]+$ ]] && group=$(ps -o pgid= -p "$postmaster" | tr -d ' ')
  kill -KILL -- "-$pid"
  if [[ $group =~ ^[0-9]+$ ]] && ((group > 1)); then
    kill -KILL -- "-$group" 2>/dev/null || true
  fi
  rm -f "$HA_DIR/patroni$i.pid"
}

revive_member() {
  local i
  i=$(member_number "$1")
  [[ -r $HA_DIR/patroni$i.pid ]] && kill -0 "$(cat "$HA_DIR/patroni$i.pid")" 2>/dev/null &&
    die "$1's Patroni is running"
  spawn "patroni$i" patroni "$HA_DIR/pg$i.yml"
}

running_members() {
  local n=0 i state
  for i in "${MEMBERS[@]}"; do
    state=$(rest "$i" patroni | sed -n 's/.*"state": *"\([a-z ]*\)".*/\1/p')
    [[ $state == running || $state == streaming ]] && n=$((n + 1))
  done
  echo "$n"
}

env_vars() {
  echo "HA_CONNINFO='$(conninfo)'"
  echo "HA_ETCD='$(etcd_hosts)'"
  local i
  for i in "${MEMBERS[@]}"; do
    echo "HA_PG${i}_PORT=$(pg_port "$i") HA_REST${i}_PORT=$(rest_port "$i") HA_ETCD${i}_PORT=$(etcd_client "$i")"
  done
}

case ${1:-} in
  start)
    # A start that fails half-way leaves nothing running.
    trap 'stop' ERR
    STOP_ON_DIE=yes
    start
    trap - ERR
    ;;
  stop) stop ;;
  env) env_vars ;;
  primary) primary ;;
  sync) sync_standby ;;
  pid)
    member_number "${2:-}" >/dev/null
    member_pid "$2"
    ;;
  kill) kill_member "${2:-}" ;;
  revive) revive_member "${2:-}" ;;
  wait) wait_healthy ;;
  psql)
    shift
    psql_primary "$@"
    ;;
  *) die "usage: cluster.sh start|stop|env|primary|sync|pid NAME|kill NAME|revive NAME|wait|psql ARGS" ;;
esac
