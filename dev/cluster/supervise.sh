#!/usr/bin/env bash
# Keeps the local control plane's processes running, as a kubelet keeps static pods running.
# Started by `cluster.sh up` (never by hand) once the cluster is healthy; stopped first by
# `cluster.sh down`. See docs/decisions/0022-control-plane-supervision.md.
#
#   supervise.sh STATE_DIR CLUSTER_DIR
#
# kwokctl's binary runtime starts each component once, detached, and records its pid in
# CLUSTER_DIR/pids/<component>.pid; nothing restarts a component that exits (kube-controller-
# manager and kube-scheduler exit by design when they lose leader election, e.g. after a stall of
# kube-apiserver). This loop checks every second that each recorded pid is still that component.
# One that exited is started again with the argv and working directory it was started with (read
# from /proc while it ran), detached in its own session, stdout/stderr appended to its log, and its
# pid file rewritten, after a delay that doubles per restart from 1 s to 30 s and goes back to 1 s
# once a run lasted 60 s (a kubelet's CrashLoopBackOff, scaled down). A missing pid file means
# the component was stopped on purpose (`kwokctl stop/delete` remove it): it is left alone.
#
# Each exit and restart is logged, one line each, to stdout (cluster.sh points it at
# STATE_DIR/supervisor.log). Only builtins run in the steady state (one `sleep` a second).
set -u

STATE_DIR=${1:?usage: supervise.sh STATE_DIR CLUSTER_DIR}
CLUSTER_DIR=${2:?usage: supervise.sh STATE_DIR CLUSTER_DIR}
PIDS_DIR=$CLUSTER_DIR/pids
SPEC_DIR=$STATE_DIR/supervisor # <component>.argv (NUL-separated) and <component>.cwd
PID_FILE=$STATE_DIR/supervisor.pid
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok-controller)
# Started by cluster.sh itself (node.sh), the same way: the loopback registry, and the real node's
# processes when it has one (docs/decisions/0040-real-node.md). Absent ones are not an error.
OPTIONAL=(registry containerd kube-network-policies kube-proxy coredns kubelet)
BACKOFF_FIRST=1
BACKOFF_CAP=30
BACKOFF_RESET=60 # a run at least this long starts the next backoff from BACKOFF_FIRST again
POLL=1

say() { printf '%(%Y-%m-%dT%H:%M:%S%z)T %s\n' -1 "$*"; }

STOP=""
# Only a flag: the loop exits at a point where no restart is half done (a started process
# always has its pid file written, so `cluster.sh down` finds it).
trap 'STOP=1' TERM INT HUP

# One supervisor per cluster. The lock's fd is closed in every process started below.
mkdir -p "$SPEC_DIR"
if command -v flock >/dev/null 2>&1; then
  exec {LOCK_FD}>"$STATE_DIR/supervisor.lock"
  if ! flock -n "$LOCK_FD"; then
    say "another supervisor holds $STATE_DIR/supervisor.lock; exiting"
    exit 0
  fi
fi

# argv0 PID: sets REPLY to PID's argv[0] ("" if PID is gone or a zombie). Builtins only.
argv0() {
  REPLY=""
  [[ $1 =~ ^[0-9]+$ ]] || return 1
  { IFS= read -r -d '' REPLY <"/proc/$1/cmdline"; } 2>/dev/null
  [[ -n $REPLY ]]
}

# read_pid COMPONENT: sets REPLY to the pid in its pid file; fails if there is no pid file.
# (kwokctl writes it without a newline, so read reports EOF but still assigns.)
read_pid() {
  REPLY=""
  [[ -f $PIDS_DIR/$1.pid ]] || return 1
  { IFS= read -r REPLY <"$PIDS_DIR/$1.pid"; } 2>/dev/null
  [[ -f $PIDS_DIR/$1.pid ]]
}

# Record each running component's command line and working directory. Taken from the live
# processes, so they are exactly what kwokctl ran; kept on disk so a later supervisor of the
# same cluster can still restart a component that is down when it starts.
declare -A ARG0=()
SUPERVISED=()
for c in "${COMPONENTS[@]}" "${OPTIONAL[@]}"; do
  if [[ " ${OPTIONAL[*]} " == *" $c "* && ! -f $PIDS_DIR/$c.pid ]]; then continue; fi
  if read_pid "$c" && pid=$REPLY && argv0 "$pid" && [[ $REPLY == "$CLUSTER_DIR"/* ]]; then
    cat "/proc/$pid/cmdline" >"$SPEC_DIR/$c.argv.tmp" 2>/dev/null &&
      readlink "/proc/$pid/cwd" >"$SPEC_DIR/$c.cwd.tmp" 2>/dev/null &&
      mv -f "$SPEC_DIR/$c.argv.tmp" "$SPEC_DIR/$c.argv" &&
      mv -f "$SPEC_DIR/$c.cwd.tmp" "$SPEC_DIR/$c.cwd"
  fi
  if [[ -s $SPEC_DIR/$c.argv && -s $SPEC_DIR/$c.cwd ]]; then
    { IFS= read -r -d '' a0 <"$SPEC_DIR/$c.argv"; } 2>/dev/null
    ARG0[$c]=$a0
    SUPERVISED+=("$c")
  else
    say "$c: no recorded command line (not running when supervision began); not supervised"
  fi
done

printf '%s' "$$" >"$PID_FILE.tmp" && mv -f "$PID_FILE.tmp" "$PID_FILE"
say "supervising ${SUPERVISED[*]} of $CLUSTER_DIR (pid $$; backoff ${BACKOFF_FIRST}s doubling to ${BACKOFF_CAP}s, reset after ${BACKOFF_RESET}s up)"

# Per component: the pid last seen running, when it started (as far as we know), the next delay,
# when a pending restart is due ("" if none), and how many restarts so far.
declare -A LAST_PID=() STARTED=() DELAY=() DUE=() RESTARTS=()
declare -A CHILD=() # pids this supervisor started: their exit status can be collected
now=$EPOCHSECONDS
for c in "${SUPERVISED[@]}"; do
  LAST_PID[$c]="" STARTED[$c]=$now DELAY[$c]=$BACKOFF_FIRST DUE[$c]="" RESTARTS[$c]=0
done

# alive COMPONENT PID: PID is running and is that component (a recycled pid is not).
alive() { argv0 "$2" && [[ $REPLY == "${ARG0[$1]}" ]]; }

# started_at PID: sets REPLY to when PID started (epoch seconds), from /proc; "" if unknown.
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
started_at() {
  local stat up fields
  REPLY=""
  { IFS= read -r stat <"/proc/$1/stat" && read -r up _ </proc/uptime; } 2>/dev/null || return 1
  # Fields after "(comm)", which may hold spaces; starttime (field 22) is the 20th of them.
  read -r -a fields <<<"${stat##*) }"
  [[ ${fields[19]:-} =~ ^[0-9]+$ ]] || return 1
  REPLY=$((EPOCHSECONDS - ${up%%.*} + fields[19] / CLK_TCK))
}

# how_it_ended PID: "exit N" / "killed by SIGX" for a process we started (reaping it), else unknown.
how_it_ended() {
  local pid=$1 st
  if [[ -n ${CHILD[$pid]:-} ]]; then
    unset "CHILD[$pid]"
    wait "$pid" 2>/dev/null
    st=$?
    if ((st > 128)); then REPLY="killed by SIG$(kill -l $((st - 128)) 2>/dev/null || echo $((st - 128)))"; else REPLY="exit $st"; fi
  else
    REPLY="exit status unknown: not started by this supervisor"
  fi
}

# run_component CWD ARGV...: becomes the component (in the background job forked for it), as
# kwokctl starts one: in CWD, no fd but stdin/stdout/stderr (not the lock, nothing of ours), its
# own session, default signal dispositions (a script's background job may ignore SIGINT).
run_component() {
  local fd
  cd "$1" || exit 127
  shift
  for fd in "/proc/$BASHPID/fd"/*; do
    fd=${fd##*/}
    if ((fd > 2)); then exec {fd}>&-; fi
  done
  exec env --default-signal setsid "$@"
}

restart() {
  local c=$1 now=$2 pid cwd log=$CLUSTER_DIR/logs/$1.log argv=()
  mapfile -d '' -t argv <"$SPEC_DIR/$c.argv"
  IFS= read -r cwd <"$SPEC_DIR/$c.cwd"
  RESTARTS[$c]=$((RESTARTS[$c] + 1))
  # kwokctl truncates the log when it starts a component; appending keeps the crash's reason.
  printf '%(%Y-%m-%dT%H:%M:%S%z)T ===== restarted by dev/cluster/supervise.sh (restart %d) =====\n' \
    -1 "${RESTARTS[$c]}" >>"$log"
  # (When a job dies of a signal, bash itself notes it in our log as "<pid> Killed  run_component ...".)
  run_component "$cwd" "${argv[@]}" </dev/null >>"$log" 2>&1 &
  pid=$!
  CHILD[$pid]=1
  printf '%s' "$pid" >"$PIDS_DIR/$c.pid.tmp" && mv -f "$PIDS_DIR/$c.pid.tmp" "$PIDS_DIR/$c.pid"
  LAST_PID[$c]=$pid STARTED[$c]=$now DUE[$c]=""
  local next=$((DELAY[$c] * 2))
  DELAY[$c]=$((next > BACKOFF_CAP ? BACKOFF_CAP : next))
  say "$c: restarted as pid $pid (restart ${RESTARTS[$c]})"
}

check() {
  local c=$1 now=$2 pid ran line
  if ! read_pid "$c"; then
    # Stopped on purpose (kwokctl stop cluster / delete cluster remove the pid file).
    if [[ -n ${DUE[$c]} ]]; then say "$c: pid file removed; not restarting it"; fi
    LAST_PID[$c]="" DUE[$c]=""
    return
  fi
  pid=$REPLY
  if alive "$c" "$pid"; then
    if [[ $pid != "${LAST_PID[$c]}" ]]; then
      # First sight of this process (at start, or started by someone else, e.g. kwokctl start).
      started_at "$pid" && STARTED[$c]=$REPLY
      LAST_PID[$c]=$pid DUE[$c]=""
    fi
    return
  fi
  if [[ -z ${DUE[$c]} ]]; then
    ran=$((now - STARTED[$c]))
    ((ran >= BACKOFF_RESET)) && DELAY[$c]=$BACKOFF_FIRST
    DUE[$c]=$((now + DELAY[$c]))
    how_it_ended "$pid"
    line=$(tail -n 1 "$CLUSTER_DIR/logs/$c.log" 2>/dev/null | cut -c1-300)
    say "$c: pid $pid exited ($REPLY) after ${ran}s; restarting in ${DELAY[$c]}s; its last log line: $line"
    return
  fi
  ((now >= DUE[$c])) && restart "$c" "$now"
}

while :; do
  [[ -n $STOP ]] && { say "stopping on signal"; exit 0; }
  [[ -d $PIDS_DIR ]] || { say "$PIDS_DIR is gone; exiting"; exit 0; }
  # A newer supervisor of a recreated cluster owns the pid file: this one is stale.
  owner=""
  { IFS= read -r owner <"$PID_FILE"; } 2>/dev/null
  [[ $owner == "$$" ]] || { say "$PID_FILE no longer names this process; exiting"; exit 0; }
  now=$EPOCHSECONDS
  for c in "${SUPERVISED[@]}"; do
    [[ -n $STOP ]] && break
    check "$c" "$now"
  done
  sleep "$POLL" &
  wait $!
done
