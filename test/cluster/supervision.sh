#!/usr/bin/env bash
# The local control plane's supervision (dev/cluster/supervise.sh, decision 0022), tested for real
# on a cluster of its own (a private JR2_STATE_DIR; the shared cluster is not touched):
#   (a) kube-scheduler SIGKILLed: the supervisor restarts it and a new pod gets scheduled;
#   (b) kube-apiserver stalled (SIGSTOP) for 20 s: kube-controller-manager and kube-scheduler exit
#       on lost leader election, come back by themselves, `cluster.sh status` says up again within
#       a minute, and a Deployment's pod is created (controller-manager) and scheduled (scheduler).
# Exit 0 if both hold. Run by `npm test` (npm run test:cluster); takes about 65 s.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
# JR2_SUPERVISION_CLUSTER_SH: another cluster.sh, for test/unit/ci-summary.test.ts alone (a stand-in
# whose 'up' fails, to see how this tier's failure reaches CI's closing line).
CLUSTER_SH=${JR2_SUPERVISION_CLUSTER_SH:-$ROOT/dev/cluster/cluster.sh}

# CI's closing line (.ci/run, test/summary-reporter.js, decision 0050) names this tier as it names a
# jest one: its setup's start first, its tests' start once the cluster is up, its totals at the end.
# A cluster that never came up is "cluster: setup failed, 0 run"; a test that fails counts as
# failed and the ones it kept from running as skipped.
TIER=cluster TESTS=2 PASSED=0 FAILED=0 BEGAN=0
summary_line() { [[ -z ${JR2_TEST_SUMMARY:-} ]] || printf '%s\n' "$1" >>"$JR2_TEST_SUMMARY"; }
summary_line "{\"tier\":\"$TIER\",\"started\":\"setup\"}"
began() {
  BEGAN=1
  summary_line "{\"tier\":\"$TIER\",\"started\":\"reporter\"}"
}
report() {
  ((BEGAN)) || return 0
  summary_line "$(printf '{"tier":"%s","passed":%d,"failed":%d,"skipped":%d}' \
    "$TIER" "$PASSED" "$FAILED" "$((TESTS - PASSED - FAILED))")"
}

STALL_SECONDS=20
RECOVERY_SECONDS=60

# A state dir of its own, not yet existing (cluster.sh creates it, marks it as its own and
# removes it on 'down'), inside a fresh private directory.
BASE=$(mktemp -d "${TMPDIR:-/tmp}/jr2-supervision.XXXXXX")
# No real node: a machine has one (the shared cluster's), and these tests need none (decision 0040).
export JR2_STATE_DIR="$BASE/state" JR2_NODES=1 JR2_REAL_NODE=0
PIDS="$JR2_STATE_DIR/clusters/jr2/pids"
LOGS="$JR2_STATE_DIR/clusters/jr2/logs"
SUPERVISOR_LOG="$JR2_STATE_DIR/supervisor.log"

T0=$SECONDS
say() { printf '[supervision +%3ds] %s\n' "$((SECONDS - T0))" "$*"; }
cluster() { bash "$CLUSTER_SH" "$@"; }

cleanup() {
  local rc=$?
  if ((rc != 0)); then
    say "FAILED; supervisor log:"
    cat "$SUPERVISOR_LOG" 2>/dev/null || true
    for f in "$LOGS"/kube-scheduler.log "$LOGS"/kube-controller-manager.log; do
      [[ -f $f ]] && { say "tail of $f:"; tail -n 8 "$f"; }
    done
    ((FAILED == 0)) && FAILED=1
  fi
  report
  # Interrupted during the stall: let the API server go on, so it stops as usual.
  [[ -n ${apiserver:-} ]] && kill -CONT "$apiserver" 2>/dev/null
  # JR2_STATE_DIR is exported: this stops only the test's own cluster.
  cluster down >/dev/null 2>&1 || say "warning: 'cluster.sh down' failed for $JR2_STATE_DIR"
  rmdir "$BASE" 2>/dev/null || true
  say "done in $((SECONDS - T0))s"
  exit "$rc"
}
trap cleanup EXIT

fail() { say "FAIL: $*"; exit 1; }

# within SECONDS DESCRIPTION COMMAND...: poll COMMAND every 0.5 s until it succeeds.
within() {
  local seconds=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + seconds))
  until "$@"; do
    ((SECONDS < deadline)) || fail "not within ${seconds}s: $what"
    sleep 0.5
  done
}

pid_of() { cat "$PIDS/$1.pid" 2>/dev/null; }
# running COMPONENT: its pid file names a live process of that component.
running() {
  local pid
  pid=$(pid_of "$1") || return 1
  [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "/bin/$1 "
}
# replaced COMPONENT OLD_PID: running again, as another process than OLD_PID.
replaced() { running "$1" && [[ $(pid_of "$1") != "$2" ]]; }
restart_logged() { grep -q "$1: restarted as pid $2\b" "$SUPERVISOR_LOG"; }
# restarted COMPONENT OLD_PID: replaced, and the supervisor logged that restart.
restarted() { replaced "$1" "$2" && restart_logged "$1" "$(pid_of "$1")"; }

k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" --request-timeout=5s "$@"; }
scheduled() { [[ -n $(k get pod "$1" -o jsonpath='{.spec.nodeName}' 2>/dev/null) ]]; }
status_up() { cluster status >/dev/null 2>&1; }
# deployment_pod_scheduled NAME: the Deployment's pod exists (controller-manager) and has a node.
deployment_pod_scheduled() {
  k get pods -l "app=$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' 2>/dev/null | grep -q .
}

# ---------------------------------------------------------------------------------------
say "cluster up in $JR2_STATE_DIR"
cluster up >/dev/null
eval "$(cluster env)" # KUBECONFIG=..., KUBECTL=...
status=$(cluster status) || fail "status is not up after 'up':"$'\n'"$status"
grep -q '^supervisor: running' <<<"$status" || fail "status does not report a running supervisor:"$'\n'"$status"
say "$(grep '^supervisor:' <<<"$status")"
began

# (a) ------------------------------------------------------------------------------------
old=$(pid_of kube-scheduler)
say "(a) SIGKILL kube-scheduler (pid $old)"
kill -KILL "$old"
within 15 "kube-scheduler restarted by the supervisor" restarted kube-scheduler "$old"
say "(a) kube-scheduler restarted as pid $(pid_of kube-scheduler)"
k run supervision-a --image=registry.k8s.io/pause:3.10 --restart=Never >/dev/null
# The new scheduler takes the lease once the killed one's expires (15 s).
within 45 "pod supervision-a scheduled" scheduled supervision-a
say "(a) passed: pod supervision-a scheduled on $(k get pod supervision-a -o jsonpath='{.spec.nodeName}')"
PASSED=$((PASSED + 1))

# (b) ------------------------------------------------------------------------------------
apiserver=$(pid_of kube-apiserver) kcm=$(pid_of kube-controller-manager) sched=$(pid_of kube-scheduler)
say "(b) SIGSTOP kube-apiserver (pid $apiserver) for ${STALL_SECONDS}s"
kill -STOP "$apiserver"
sleep "$STALL_SECONDS"
kill -CONT "$apiserver"
resumed=$SECONDS
say "(b) SIGCONT kube-apiserver"
exit_logged() { grep -q "$1: pid $2 exited" "$SUPERVISOR_LOG"; }
# Both give up renewing their lease 10 s (renewDeadline) into the stall; kube-scheduler then
# spends up to 5 s more trying to release it, so it may exit around SIGCONT: allow for that.
within 15 "kube-controller-manager (pid $kcm) exited after the stall" exit_logged kube-controller-manager "$kcm"
within 15 "kube-scheduler (pid $sched) exited after the stall" exit_logged kube-scheduler "$sched"
# Both say why in their logs (kept: the supervisor appends to them).
grep -qi 'leaderelection lost' "$LOGS/kube-controller-manager.log" ||
  fail "kube-controller-manager's log does not say it lost leader election"
grep -qi 'leaderelection lost' "$LOGS/kube-scheduler.log" ||
  fail "kube-scheduler's log does not say it lost leader election"
say "(b) both exited on lost leader election"
# Up means every component's pid file names a live process and /readyz answers.
within $((RECOVERY_SECONDS - (SECONDS - resumed))) "'cluster.sh status' up again after SIGCONT" status_up
say "(b) status up $((SECONDS - resumed))s after SIGCONT"
within 5 "kube-controller-manager restarted" restarted kube-controller-manager "$kcm"
within 5 "kube-scheduler restarted" restarted kube-scheduler "$sched"
k create deployment supervision-b --image=registry.k8s.io/pause:3.10 >/dev/null
within "$RECOVERY_SECONDS" "the Deployment's pod created and scheduled" deployment_pod_scheduled supervision-b
say "(b) passed: the Deployment's pod was created and scheduled"
PASSED=$((PASSED + 1))

grep -E ': (pid [0-9]+ exited|restarted as pid)' "$SUPERVISOR_LOG" | sed 's/; its last log line:.*//' |
  sed 's/^/    /'
say "passed: (a) and (b)"
