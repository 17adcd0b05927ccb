#!/usr/bin/env bash
# Local Kubernetes control plane for jr2-operator tests, built entirely from Go modules.
#
#   npm run cluster -- up            build what is missing, start (or reuse) the cluster and
#                                    its supervisor; last stdout line: KUBECONFIG=<absolute path>
#   npm run cluster -- down          stop the supervisor, then every process it started; remove state
#   npm run cluster -- status        up/down, supervisor, kubeconfig, nodes; exit 0 if up, 1 if down
#   npm run cluster -- env           KUBECONFIG=<path>, KUBECTL=<path>, CRANE=<path>, JR2_REGISTRY=<host:port>
#                                    and the real node's JR2_REAL_NODE_* (for scripts)
#   npm run cluster -- kubectl-path  path of the cached kubectl
#   npm run cluster -- kubectl ARGS  run the cached kubectl against the cluster
#   npm run cluster -- ctr ARGS      run ctr against the real node's containerd (namespace k8s.io)
#   npm run cluster -- binary NAME [MODULE]  build (if not cached) and print the path of etcd, or of
#                                    a Kubernetes command from the wrapper module go/MODULE (default
#                                    kube); dev/cluster/apiserver.sh takes an older API server from it;
#                                    agent-sandbox-controller (go/agent-sandbox) for the versus bench
#
# Why this shape: no Docker and no downloads besides Go modules. etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok and kwokctl are compiled from the
# pinned modules under dev/cluster/go/ and kwokctl's "binary" runtime runs them as plain
# processes on 127.0.0.1. kwok plays the kubelet for fake nodes (Ready nodes, Running pods).
# A supervisor (supervise.sh, started by 'up') restarts any of those processes that exits, with
# its same command line and a backoff, as a kubelet does for static pods; its log is
# $JR2_STATE_DIR/supervisor.log (docs/decisions/0022-control-plane-supervision.md).
# Beside the kwok nodes, 'up' starts one real node, this machine (containerd, runc, CNI, kubelet,
# kube-proxy, CoreDNS, kube-network-policies; node.sh, docs/decisions/0040-real-node.md), and a
# registry on loopback that serves it images. When this machine cannot run containers, 'up' says
# which check failed and goes on with the kwok nodes only.
#
# Environment:
#   JR2_CACHE_DIR  binaries and state (default ~/.cache/jr2)
#   JR2_STATE_DIR  the running cluster's files (default $JR2_CACHE_DIR/state)
#   JR2_NODES      number of fake nodes (default 3)
#   JR2_REAL_NODE  0: no real node (default 1: one, if this machine can run containers)
#   JR2_REGISTRY_PORT  the loopback registry's port (default 5000, or the next free one)
# Progress goes to stderr so stdout stays machine-readable.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
GO_DIR="$HERE/go"
CLUSTER_NAME=jr2
NODE_PREFIX=jr2-node-
# ImageVolume (KEP-4639) is GA and locked on in 1.36, so it is not passed (setting a locked
# gate only earns a deprecation warning). PodLevelResources (KEP-2837) is beta, on by default
# in 1.36; pinning it keeps the tests independent of that default.
FEATURE_GATES=PodLevelResources=true
WAIT_SECONDS=120
# How long 'up' gives a supervised cluster that is not healthy (a component in restart backoff,
# at most 30 s, plus its start) to recover before recreating it, which would lose its objects.
RECOVERY_SECONDS=90

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { printf 'cluster: error: %s\n' "$*" >&2; exit 1; }

# abs PATH: absolute form of PATH without requiring it to exist (state may not exist yet).
abs() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s/%s\n' "$PWD" "$1" ;; esac; }

: "${HOME:?HOME must be set (or set JR2_CACHE_DIR)}"
CACHE_DIR=$(abs "${JR2_CACHE_DIR:-$HOME/.cache/jr2}")
STATE_DIR=$(abs "${JR2_STATE_DIR:-$CACHE_DIR/state}")
BIN_DIR="$CACHE_DIR/bin"
CLUSTER_DIR="$STATE_DIR/clusters/$CLUSTER_NAME"  # kwokctl's layout under KWOK_WORKDIR
KUBECONFIG_PATH="$CLUSTER_DIR/kubeconfig.yaml"
KUBECTL_LINK="$BIN_DIR/kubectl"                   # stable path for scripts and humans
SUPERVISOR="$HERE/supervise.sh"
SUPERVISOR_PID_FILE="$STATE_DIR/supervisor.pid"   # written by the supervisor itself
SUPERVISOR_LOG="$STATE_DIR/supervisor.log"        # one line per component exit and restart
NODES=${JR2_NODES:-3}
[[ $NODES =~ ^[1-9][0-9]*$ && $NODES -le 250 ]] || die "JR2_NODES must be 1..250, got '$NODES'"

# ---------------------------------------------------------------------------------------
# Versions and build fingerprints. Read from go.mod text (not `go list`) so the warm path
# and `env`/`status` work without invoking Go.

# mod_version DIR MODULE: the version MODULE is required at in DIR/go.mod.
mod_version() {
  awk -v m="$2" '($1 == m && $2 ~ /^v/) { print $2; exit } ($1 == "require" && $2 == m) { print $3; exit }' "$1/go.mod"
}

KUBE_VERSION=$(mod_version "$GO_DIR/kube" k8s.io/kubernetes)
ETCD_VERSION=$(mod_version "$GO_DIR/etcd" go.etcd.io/etcd/server/v3)
KWOK_VERSION=$(mod_version "$GO_DIR/kwok" sigs.k8s.io/kwok)
CRANE_VERSION=$(mod_version "$GO_DIR/crane" github.com/google/go-containerregistry)
REGISTRY_VERSION=$(mod_version "$GO_DIR/registry" github.com/distribution/distribution/v3)
[[ -n $KUBE_VERSION && -n $ETCD_VERSION && -n $KWOK_VERSION && -n $CRANE_VERSION && -n $REGISTRY_VERSION ]] ||
  die "cannot read pinned versions from $GO_DIR/{kube,etcd,kwok,crane,registry}/go.mod"

# Directories are keyed by version so a version bump builds new binaries next to the old.
KUBE_BIN="$BIN_DIR/kube-$KUBE_VERSION"
ETCD_BIN="$BIN_DIR/etcd-$ETCD_VERSION"
KWOK_BIN="$BIN_DIR/kwok-$KWOK_VERSION"
CRANE_BIN="$BIN_DIR/crane-$CRANE_VERSION"
REGISTRY_BIN="$BIN_DIR/registry-$REGISTRY_VERSION"

# Without these -X flags the binaries report v0.0.0-master, which kwokctl cannot interpret.
# buildDate is fixed so that the same sources give the same binary.
kube_ldflags() {
  local version=${1:-$KUBE_VERSION}
  local v=${version#v} p flags=""
  local major=${v%%.*} rest=${v#*.}
  local minor=${rest%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $p.gitVersion=$version -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    flags+=" -X $p.gitTreeState=clean -X $p.buildDate=2026-01-01T00:00:00Z"
  done
  printf '%s' "$flags"
}
KUBE_LDFLAGS=$(kube_ldflags)

# fingerprint FILE... [-- EXTRA]: short hash of the inputs that decide a binary's content;
# a change (go.sum, replaces, ldflags) rebuilds even when the version string did not move.
fingerprint() {
  local extra="" files=()
  while (($#)); do
    if [[ $1 == -- ]]; then extra=$2; break; fi
    files+=("$1"); shift
  done
  { cat "${files[@]}"; printf '%s' "$extra"; } | sha256sum | cut -c1-16
}
KUBE_FP=$(fingerprint "$GO_DIR/kube/go.mod" "$GO_DIR/kube/go.sum" -- "$KUBE_LDFLAGS")
ETCD_FP=$(fingerprint "$GO_DIR/etcd/go.mod" "$GO_DIR/etcd/go.sum" "$GO_DIR/etcd/main.go")
KWOK_FP=$(fingerprint "$GO_DIR/kwok/go.mod" "$GO_DIR/kwok/go.sum")
CRANE_FP=$(fingerprint "$GO_DIR/crane/go.mod" "$GO_DIR/crane/go.sum")
REGISTRY_FP=$(fingerprint "$GO_DIR/registry/go.mod" "$GO_DIR/registry/go.sum")

KUBECTL="$KUBE_BIN/kubectl"
KWOKCTL="$KWOK_BIN/kwokctl"

# shellcheck source=node.sh
source "$HERE/node.sh"

# ---------------------------------------------------------------------------------------
# Building.

GO_CHECKED=""
require_go() {
  [[ -n $GO_CHECKED ]] && return 0
  command -v go >/dev/null 2>&1 ||
    die "'go' not found on PATH. Install Go 1.26 or newer (the official Go distribution), then rerun."
  # Asked inside the module so GOTOOLCHAIN switching, if allowed, is reflected.
  local v
  v=$(cd "$GO_DIR/kube" && go env GOVERSION) || die "'go env' failed; is Go 1.26+ installed?"
  local num=${v#go} major minor
  major=${num%%.*}; minor=${num#*.}; minor=${minor%%[!0-9]*}
  if ((major < 1 || (major == 1 && minor < 26))); then
    die "found $v; Go 1.26 or newer is required (the pinned Kubernetes, etcd and kwok modules need it)"
  fi
  GO_CHECKED=1
}

# build NAME VERSION MODULE_DIR PACKAGE OUT_DIR FINGERPRINT [LDFLAGS]
# Skips when OUT_DIR/NAME exists with the same fingerprint. Builds to a temp file in the
# same directory and renames it, so an interrupted build never leaves a half-written binary.
build() {
  local name=$1 version=$2 moddir=$3 pkg=$4 out=$5 fp=$6 ldflags=${7:-}
  local stamp="$out/.$name.fingerprint"
  if [[ -x $out/$name && -f $stamp && $(<"$stamp") == "$fp" ]]; then
    return 0
  fi
  require_go
  mkdir -p "$out"
  local tmp="$out/.$name.tmp.$$" start=$SECONDS
  log "building $name $version ..."
  # CGO off: static binaries that run anywhere; -trimpath: no local paths in them.
  # GOWORK=off: a go.work further up must not change what gets built.
  if ! (cd "$moddir" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "-s -w $ldflags" -o "$tmp" "$pkg"); then
    rm -f "$tmp"
    die "building $name failed (see go output above)"
  fi
  mv -f "$tmp" "$out/$name"
  printf '%s\n' "$fp" >"$stamp.tmp" && mv -f "$stamp.tmp" "$stamp"
  log "built $name $version in $((SECONDS - start))s"
}

ensure_binaries() {
  mkdir -p "$BIN_DIR"
  build etcd "$ETCD_VERSION" "$GO_DIR/etcd" . "$ETCD_BIN" "$ETCD_FP"
  local c
  for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    build "$c" "$KUBE_VERSION" "$GO_DIR/kube" "k8s.io/kubernetes/cmd/$c" "$KUBE_BIN" "$KUBE_FP" "$KUBE_LDFLAGS"
  done
  build kwok "$KWOK_VERSION" "$GO_DIR/kwok" sigs.k8s.io/kwok/cmd/kwok "$KWOK_BIN" "$KWOK_FP"
  build kwokctl "$KWOK_VERSION" "$GO_DIR/kwok" sigs.k8s.io/kwok/cmd/kwokctl "$KWOK_BIN" "$KWOK_FP"
  # Images are assembled with crane and served by a registry on loopback (no container engine).
  build crane "$CRANE_VERSION" "$GO_DIR/crane" github.com/google/go-containerregistry/cmd/crane "$CRANE_BIN" "$CRANE_FP"
  build registry "$REGISTRY_VERSION" "$GO_DIR/registry" github.com/distribution/distribution/v3/cmd/registry "$REGISTRY_BIN" "$REGISTRY_FP"
  link_kubectl
}

# Keep $CACHE/bin/kubectl pointing at the kubectl of the pinned version (atomic replace).
link_kubectl() {
  [[ -x $KUBECTL ]] || return 0
  [[ $(readlink "$KUBECTL_LINK" 2>/dev/null) == "kube-$KUBE_VERSION/kubectl" ]] && return 0
  ln -sfn "kube-$KUBE_VERSION/kubectl" "$KUBECTL_LINK.tmp.$$"
  mv -fT "$KUBECTL_LINK.tmp.$$" "$KUBECTL_LINK"
}

# ---------------------------------------------------------------------------------------
# Cluster configuration. kwokctl loads $KWOK_WORKDIR/kwok.yaml by default; keeping the
# work dir private means ~/.kwok is neither read nor written.

kwokctl_config() {
  cat <<EOF
# Written by dev/cluster/cluster.sh; regenerated on every 'up'.
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  runtime: binary
  # Loopback only: nothing of this cluster is reachable from other hosts.
  bindAddress: 127.0.0.1
  kubeVersion: $KUBE_VERSION
  etcdVersion: ${ETCD_VERSION#v}
  # Local binaries; with every one set, kwokctl has nothing to download.
  etcdBinary: $ETCD_BIN/etcd
  kubeApiserverBinary: $KUBE_BIN/kube-apiserver
  kubeControllerManagerBinary: $KUBE_BIN/kube-controller-manager
  kubeSchedulerBinary: $KUBE_BIN/kube-scheduler
  kubectlBinary: $KUBE_BIN/kubectl
  kwokControllerBinary: $KWOK_BIN/kwok
  # Anything kwokctl might still want to cache stays inside our state.
  cacheDir: $STATE_DIR/cache
  # RBAC (authorization-mode Node,RBAC) and the default admission plugins, which include
  # MutatingAdmissionWebhook and ValidatingAdmissionWebhook. These are kwokctl's defaults
  # with a secure port; stated so a change of default cannot silently drop them.
  securePort: true
  kubeAuthorization: true
  kubeAdmission: true
  kubeFeatureGates: $FEATURE_GATES
EOF
  if [[ $NETWORK_MODE == node ]]; then
    cat <<EOF
  # Pods reach the API server at the node IP (the kubernetes Service's endpoint); the certificate
  # names it and the Service IP. The port is chosen before it listens (node.sh choose_api_port).
  kubeApiserverPort: $(api_port)
  kubeApiserverCertSANs: [$NODE_IP, $API_SERVICE_IP]
EOF
  fi
  cat <<EOF
componentsPatches:
- name: kube-apiserver
  extraArgs:
  # The default, 10.0.0.0/24, holds 254 Services: the benchmark's 1000 Sandboxes need a Service each.
  - key: service-cluster-ip-range
    value: $SERVICE_CIDR
EOF
  if [[ $NETWORK_MODE == node ]]; then
    cat <<EOF
  # Every address, so pods reach it at the node IP; node.sh's firewall keeps other machines out.
  # (etcd and the other components stay on 127.0.0.1.)
  - key: bind-address
    value: 0.0.0.0
  - key: advertise-address
    value: $NODE_IP
  # kubectl exec and logs: the API server calls the real node's kubelet as the cluster's admin.
  - key: kubelet-client-certificate
    value: $CLUSTER_DIR/pki/admin.crt
  - key: kubelet-client-key
    value: $CLUSTER_DIR/pki/admin.key
  - key: kubelet-preferred-address-types
    value: InternalIP
# kwok plays the kubelet for the fake nodes only (they carry the annotation), not the real one.
- name: kwok-controller
  extraArgs:
  - key: manage-all-nodes
    value: "false"
  - key: manage-nodes-with-annotation-selector
    value: kwok.x-k8s.io/node=fake
EOF
  else
    cat <<EOF
  # Without a default route kube-apiserver refuses to start unless told what to advertise.
  - key: advertise-address
    value: 127.0.0.1
EOF
  fi
}

# NETWORK_MODE: "node" (a real node beside the kwok nodes) or "loopback" (kwok nodes only). 'up'
# decides it from JR2_REAL_NODE and the pre-flight checks; other commands read what 'up' recorded.
NETWORK_MODE=""
NETWORK_MODE_FILE="$STATE_DIR/network.mode"
NODE_OFF_REASON=""
recorded_network_mode() {
  NETWORK_MODE=loopback
  if [[ -f $NETWORK_MODE_FILE ]]; then NETWORK_MODE=$(<"$NETWORK_MODE_FILE"); fi
  return 0
}
decide_network_mode() {
  NETWORK_MODE=loopback
  if ! real_node_wanted; then
    NODE_OFF_REASON="JR2_REAL_NODE=0"
  elif NODE_OFF_REASON=$(preflight_host); then
    NETWORK_MODE=node
  fi
  return 0
}

# Fingerprint of everything the running cluster was created from; a mismatch means recreate.
cluster_fingerprint() {
  { printf '%s %s %s\n' "$KUBE_FP" "$ETCD_FP" "$KWOK_FP"; kwokctl_config; node_manifest 0; } | sha256sum | cut -c1-16
}

# clean_process: for a subshell about to exec kwokctl or the supervisor. A private kwok work
# dir, no KWOK_* settings from the caller's environment (they override the config file and could
# e.g. select docker), and no fd open above stderr. The supervisor gets the same environment as
# kwokctl, so a component it restarts runs in the environment kwokctl gave the original.
clean_process() {
  local v fd
  while IFS= read -r v; do unset "$v"; done < <(compgen -e | grep '^KWOK_' || true)
  export KWOK_WORKDIR="$STATE_DIR"
  # kwokctl polls the API with kubectl; keep kubectl's cache out of ~/.kube too.
  export KUBECACHEDIR="$STATE_DIR/kubectl-cache"
  # The components kwokctl forks (and the supervisor) inherit its open fds; without this they
  # would hold the lock (fd 9), or a caller's (`flock FILE npm run cluster -- up`), for their
  # whole life and every later lock on it would block. So every fd above stderr is closed here.
  # ({fd}>&- closes the fd numbered $fd; closing one that is no longer open is not an error.
  # No redirection on that command: bash would park stderr on a fd >= 10 the loop then closes.)
  for fd in "/proc/$BASHPID/fd"/*; do
    fd=${fd##*/}
    if ((fd > 2)); then exec {fd}>&-; fi
  done
}

kwokctl() { (clean_process && exec "$KWOKCTL" "$@"); }

# --cache-dir: kubectl's discovery cache defaults to ~/.kube/cache; keep it in our state.
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG_PATH" --cache-dir "$STATE_DIR/kubectl-cache" "$@"; }

# ---------------------------------------------------------------------------------------
# Process bookkeeping. kwokctl records one pid file per component. A pid only counts as
# ours when its command line mentions our cluster dir, so a recycled pid is never touched.

pid_is_ours() {
  local pid=$1 args
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  if [[ -r /proc/$pid/cmdline ]]; then
    args=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  else
    args=$(ps -o args= -p "$pid" 2>/dev/null) || return 1
  fi
  [[ $args == *"$CLUSTER_DIR"* ]]
}

# our_pids: pids of live component processes of this cluster, one per line.
our_pids() {
  local f pid
  for f in "$CLUSTER_DIR"/pids/*.pid; do
    [[ -f $f ]] || continue
    pid=$(<"$f")
    if pid_is_ours "$pid"; then printf '%s\n' "$pid"; fi
  done
  return 0
}

# All five control plane components (etcd, apiserver, controller-manager, scheduler, kwok) alive?
# (The registry and the real node's processes are checked on their own.)
components_alive() {
  local c f
  for c in etcd kube-apiserver kube-controller-manager kube-scheduler kwok-controller; do
    f="$CLUSTER_DIR/pids/$c.pid"
    [[ -f $f ]] || return 1
    pid_is_ours "$(<"$f")" || return 1
  done
}

# The state was created from the binaries and config this script would create it from now.
state_current() {
  [[ -f $KUBECONFIG_PATH && -x $KUBECTL && -f $STATE_DIR/fingerprint ]] || return 1
  [[ $(<"$STATE_DIR/fingerprint") == "$(cluster_fingerprint)" ]]
}

control_plane_healthy() {
  state_current || return 1
  components_alive || return 1
  k get --raw /readyz --request-timeout=5s >/dev/null 2>&1
}

# ---------------------------------------------------------------------------------------
# Supervision (supervise.sh). kwokctl starts each component once; the supervisor restarts one
# that exits. It is started detached (own session, stdin /dev/null, output to its log, no other
# fd: see clean_process), so neither the caller's terminal nor its lock holds it.

# supervisor_pid: the pid of this cluster's running supervisor; fails if there is none.
supervisor_pid() {
  local pid args
  [[ -f $SUPERVISOR_PID_FILE ]] || return 1
  pid=$(<"$SUPERVISOR_PID_FILE")
  pid_is_ours "$pid" || return 1
  args=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $args == *supervise.sh* ]] || return 1
  printf '%s\n' "$pid"
}

ensure_supervisor() {
  local pid i
  supervisor_pid >/dev/null && return 0
  rm -f "$SUPERVISOR_PID_FILE"
  local session=()
  command -v setsid >/dev/null 2>&1 && session=(setsid)
  # One fork, which becomes the supervisor: no shell of ours stays behind waiting for it (and
  # holding the lock fds that one would still have).
  (clean_process && exec "${session[@]}" "$BASH" "$SUPERVISOR" "$STATE_DIR" "$CLUSTER_DIR") \
    </dev/null >>"$SUPERVISOR_LOG" 2>&1 &
  # It writes its pid file once it has recorded the components' command lines.
  for ((i = 0; i < 100; i++)); do
    if pid=$(supervisor_pid); then
      log "supervisor running (pid $pid; restarts are logged in $SUPERVISOR_LOG)"
      return 0
    fi
    sleep 0.1
  done
  tail -n 5 "$SUPERVISOR_LOG" >&2 2>/dev/null || true
  die "the supervisor did not start (see $SUPERVISOR_LOG)"
}

# Stop the supervisor before anything else is stopped, so it does not restart what is stopped.
stop_supervisor() {
  local pid
  if pid=$(supervisor_pid); then
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone 50 "$pid"; then
      log "supervisor $pid did not stop on SIGTERM; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      wait_gone 50 "$pid" || die "supervisor $pid still running"
    fi
  fi
  rm -f "$SUPERVISOR_PID_FILE"
}

# A supervised cluster that is unhealthy may only be between a component's exit and restart.
# Waits for it (up to RECOVERY_SECONDS) instead of recreating it; fails if it does not recover.
await_recovery() {
  local deadline=$((SECONDS + RECOVERY_SECONDS))
  log "the control plane is not healthy but its supervisor runs; waiting up to ${RECOVERY_SECONDS}s for it to recover (see $SUPERVISOR_LOG)"
  until control_plane_healthy; do
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
  log "the control plane recovered"
}

# ---------------------------------------------------------------------------------------
# Nodes.

node_manifest() {
  local i=$1
  local zones=(a b c)
  cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: $NODE_PREFIX$i
  annotations:
    # kwok manages nodes carrying this annotation: heartbeats, Ready, and their pods.
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  # The labels a cloud's kubelet and node controller put on a node, so placement rules written for
  # a real cluster (zone spread, instance types, OS and arch selectors) mean the same here.
  labels:
    beta.kubernetes.io/arch: amd64
    beta.kubernetes.io/os: linux
    beta.kubernetes.io/instance-type: m6i.8xlarge
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: $NODE_PREFIX$i
    kubernetes.io/os: linux
    kubernetes.io/role: agent
    node-role.kubernetes.io/agent: ""
    node.kubernetes.io/instance-type: m6i.8xlarge
    topology.kubernetes.io/region: local-1
    topology.kubernetes.io/zone: local-1${zones[i % 3]}
    failure-domain.beta.kubernetes.io/region: local-1
    failure-domain.beta.kubernetes.io/zone: local-1${zones[i % 3]}
    type: kwok
spec:
  # Distinct per node; kwok hands out pod IPs from it.
  podCIDR: 10.244.$i.0/24
  podCIDRs:
  - 10.244.$i.0/24
# An m6i.8xlarge's capacity, and what a kubelet with the usual reservations leaves allocatable
# (kube-reserved and system-reserved CPU and memory, an eviction threshold, a share of the disk).
# Pods: room for the benchmark's 3000 Sandboxes and as many plain pods beside them on three nodes
# (kwok runs nothing for real), where a real kubelet's default is 110.
status:
  capacity: {cpu: "32", memory: 128Gi, ephemeral-storage: 500Gi, hugepages-1Gi: "0", hugepages-2Mi: "0", pods: "2500"}
  allocatable: {cpu: 31750m, memory: 124Gi, ephemeral-storage: 460Gi, hugepages-1Gi: "0", hugepages-2Mi: "0", pods: "2500"}
  nodeInfo:
    architecture: amd64
    operatingSystem: linux
    osImage: Debian GNU/Linux 12 (bookworm)
    containerRuntimeVersion: containerd://1.7.24
    kernelVersion: 6.1.0-28-cloud-amd64
EOF
}

# ready_nodes: names of our fake nodes whose Ready condition is True.
ready_nodes() {
  k get nodes -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' \
    2>/dev/null | awk -v p="$NODE_PREFIX" 'index($1, p) == 1 && $2 == "True" { print $1 }'
}

nodes_as_wanted() {
  local want i have
  have=$(ready_nodes | sort) || return 1
  want=$(for ((i = 0; i < NODES; i++)); do echo "$NODE_PREFIX$i"; done | sort)
  [[ $have == "$want" ]]
}

# Create the wanted nodes (idempotent) and delete ones beyond JR2_NODES.
ensure_nodes() {
  local i name
  for ((i = 0; i < NODES; i++)); do node_manifest "$i"; done | k apply -f - >/dev/null
  for name in $(k get nodes -o name 2>/dev/null | sed -n "s|^node/\(${NODE_PREFIX}[0-9]*\)$|\1|p"); do
    i=${name#"$NODE_PREFIX"}
    if ((i >= NODES)); then k delete node "$name" --wait=false >/dev/null; fi
  done
  wait_for "$NODES fake nodes Ready" nodes_as_wanted
}

# ---------------------------------------------------------------------------------------
# Waiting.

# wait_for DESCRIPTION COMMAND...: poll COMMAND until it succeeds or WAIT_SECONDS pass.
wait_for() {
  local what=$1; shift
  local deadline=$((SECONDS + WAIT_SECONDS))
  until "$@"; do
    ((SECONDS < deadline)) || { dump_logs; die "timed out after ${WAIT_SECONDS}s waiting for $what"; }
    sleep 0.5
  done
}

api_ready() { k get --raw /readyz --request-timeout=5s >/dev/null 2>&1; }
default_sa_exists() { k get serviceaccount default -n default >/dev/null 2>&1; }

dump_logs() {
  local f
  if [[ -f $STATE_DIR/kwokctl.log ]]; then
    log "--- tail of $STATE_DIR/kwokctl.log"
    tail -n 20 "$STATE_DIR/kwokctl.log" >&2
  fi
  for f in "$CLUSTER_DIR"/logs/*.log; do
    [[ -f $f ]] || continue
    log "--- tail of $f"
    tail -n 10 "$f" >&2
  done
}

# ---------------------------------------------------------------------------------------
# Teardown.

# Only ever remove a directory this script created (marker file) or an empty one, so a
# mistaken JR2_STATE_DIR (say, $HOME) is never deleted.
remove_state_dir() {
  [[ -e $STATE_DIR ]] || return 0
  if [[ -f $STATE_DIR/.jr2-cluster-state ]]; then
    rm -rf -- "$STATE_DIR"
  elif ! rmdir -- "$STATE_DIR" 2>/dev/null; then
    die "$STATE_DIR exists, is not empty and was not created by this script; not removing it"
  fi
}

# wait_gone TENTHS PID...: wait up to TENTHS/10 s until none of PID is ours any more.
wait_gone() {
  local tenths=$1 pid i left
  shift
  for ((i = 0; i < tenths; i++)); do
    left=""
    for pid in "$@"; do
      if pid_is_ours "$pid"; then left+=" $pid"; fi
    done
    [[ -z $left ]] && return 0
    sleep 0.1
  done
  return 1
}

# terminate PID...: SIGTERM those of PID that are ours, SIGKILL them after 10 s.
terminate() {
  local pid
  (($#)) || return 0
  for pid in "$@"; do
    if pid_is_ours "$pid"; then kill -TERM "$pid" 2>/dev/null || true; fi
  done
  wait_gone 100 "$@" && return 0
  for pid in "$@"; do
    if pid_is_ours "$pid"; then
      log "process $pid did not stop on SIGTERM; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  wait_gone 50 "$@" || die "processes still running after down: $*"
}

stop_cluster() {
  local pids=() pid i alive
  stop_supervisor
  # The real node first: its pods, mounts and network, then its processes (node.sh).
  node_down
  stop_component registry
  mapfile -t pids < <(our_pids)
  if [[ -d $CLUSTER_DIR && -x $KWOKCTL ]]; then
    # kwokctl SIGKILLs the components in order (kwok and controllers before etcd). Its
    # --kubeconfig names a file to drop our context from; unlike 'create', it rejects "" and
    # defaults to ~/.kube/config, so point it at a file that does not exist (left untouched).
    kwokctl delete cluster --name "$CLUSTER_NAME" --kubeconfig "$STATE_DIR/no-such-kubeconfig" \
      >>"$STATE_DIR/kwokctl.log" 2>&1 ||
      log "kwokctl delete cluster failed; stopping processes directly"
  fi
  # Whatever survived (kwokctl missing or failing): etcd last, since kube-apiserver can hang
  # in its graceful shutdown once etcd is gone.
  local etcd_pid=""
  [[ -f $CLUSTER_DIR/pids/etcd.pid ]] && etcd_pid=$(<"$CLUSTER_DIR/pids/etcd.pid")
  local others=()
  for pid in "${pids[@]}"; do
    if [[ $pid != "$etcd_pid" ]]; then others+=("$pid"); fi
  done
  terminate "${others[@]}"
  if [[ -n $etcd_pid ]]; then terminate "$etcd_pid"; fi
  remove_state_dir
  # The components were reparented to init when kwokctl exited; give it a moment to reap
  # them so no <defunct> entry lingers for a caller that checks with pgrep right after.
  for ((i = 0; i < 50; i++)); do
    alive=""
    for pid in "${pids[@]}"; do
      if kill -0 "$pid" 2>/dev/null; then alive+=" $pid"; fi
    done
    [[ -z $alive ]] && break
    sleep 0.1
  done
  return 0
}

# ---------------------------------------------------------------------------------------
# Commands.

# Serialize up/down: two concurrent 'up's would both try to create the cluster.
take_lock() {
  mkdir -p "$CACHE_DIR"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$CACHE_DIR/.lock"
    flock 9
  fi
}

create_cluster() {
  mkdir -p "$STATE_DIR"
  touch "$STATE_DIR/.jr2-cluster-state"
  kwokctl_config >"$STATE_DIR/kwok.yaml"
  log "starting control plane (kube $KUBE_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION) ..."
  # --kubeconfig "": do not add a context to ~/.kube/config; the cluster has its own file.
  if ! kwokctl create cluster --name "$CLUSTER_NAME" --runtime binary --kubeconfig "" \
    --timeout "${WAIT_SECONDS}s" >"$STATE_DIR/kwokctl.log" 2>&1; then
    dump_logs
    die "kwokctl create cluster failed"
  fi
  [[ -f $KUBECONFIG_PATH ]] || { dump_logs; die "kwokctl did not write $KUBECONFIG_PATH"; }
}

# build_node: the real node's binaries, then each answers --version; on failure NETWORK_MODE
# becomes loopback with the reason in NODE_OFF_REASON.
build_node() {
  if ! ensure_node_binaries; then
    NETWORK_MODE=loopback NODE_OFF_REASON="building the node's binaries failed (see the output above)"
  elif ! NODE_OFF_REASON=$(preflight_binaries); then
    NETWORK_MODE=loopback
  fi
  return 0
}

# ensure_real_node: on a healthy control plane created with the node: (re)start what is missing.
# Returns 0 if nothing had to be started.
ensure_real_node() {
  local deadline
  # The stand-in public host is put back without a restart if only it is missing (node.sh).
  if node_current && node_healthy && { public_host_ok || public_host_up; }; then return 0; fi
  if node_current && node_mode_on && supervisor_pid >/dev/null; then
    log "the real node is not healthy but its supervisor runs; waiting up to ${RECOVERY_SECONDS}s for it"
    deadline=$((SECONDS + RECOVERY_SECONDS))
    until node_healthy; do
      ((SECONDS < deadline)) || break
      sleep 1
    done
    node_healthy && return 0
  fi
  log "(re)starting the real node"
  stop_supervisor
  node_stop
  build_node
  if [[ $NETWORK_MODE != node ]]; then
    node_network_down
    node_off "$NODE_OFF_REASON"
  elif node_network_up; then
    node_up
  else
    node_network_down
    node_off "setting up the node's network (bridge $NODE_BRIDGE, routes, nft table $NFT_TABLE) failed"
  fi
  return 1
}

cmd_up() {
  local start=$SECONDS
  take_lock
  decide_network_mode
  if ! control_plane_healthy && state_current && supervisor_pid >/dev/null; then
    await_recovery || log "it did not recover"
  fi
  if control_plane_healthy; then
    nodes_as_wanted || ensure_nodes
    if ! component_alive registry || ! registry_ready; then
      stop_supervisor
      ensure_registry
    fi
    if [[ $NETWORK_MODE == node ]]; then ensure_real_node || true; fi
  else
    ensure_binaries
    if [[ $NETWORK_MODE == node ]]; then build_node; fi
    if [[ -e $STATE_DIR ]]; then
      log "existing cluster state is stale or from other binaries/config; recreating"
      stop_cluster
    fi
    mkdir -p "$STATE_DIR"
    touch "$STATE_DIR/.jr2-cluster-state"
    if [[ $NETWORK_MODE == node ]] && ! node_network_up; then
      node_network_down
      NETWORK_MODE=loopback
      NODE_OFF_REASON="setting up the node's network (bridge $NODE_BRIDGE, routes, nft table $NFT_TABLE) failed"
    fi
    echo "$NETWORK_MODE" >"$NETWORK_MODE_FILE"
    create_cluster
    wait_for "the API server" api_ready
    ensure_nodes
    # The service-account controller creates it; pods in 'default' need it.
    wait_for "ServiceAccount default/default" default_sa_exists
    ensure_registry
    if [[ $NETWORK_MODE == node ]]; then node_up; else node_off "$NODE_OFF_REASON"; fi
    cluster_fingerprint >"$STATE_DIR/fingerprint"
    log "cluster up in $((SECONDS - start))s"
  fi
  ensure_supervisor
  link_kubectl
  echo "KUBECONFIG=$KUBECONFIG_PATH"
}

cmd_down() {
  take_lock
  if [[ ! -e $STATE_DIR ]]; then
    log "cluster is down (no state at $STATE_DIR)"
    return 0
  fi
  stop_cluster
  log "cluster is down; removed $STATE_DIR"
}

# "supervisor: running (pid N, R restarts so far; log FILE)" or "supervisor: not running".
supervisor_line() {
  local pid restarts=0
  if pid=$(supervisor_pid); then
    [[ -f $SUPERVISOR_LOG ]] && restarts=$(grep -c ': restarted as pid ' "$SUPERVISOR_LOG" || true)
    echo "supervisor: running (pid $pid, $restarts restarts so far; log $SUPERVISOR_LOG)"
  else
    echo "supervisor: not running"
  fi
}

# "registry: ..." and "real node: ..." lines for status.
node_lines() {
  local st=""
  if component_alive registry && registry_ready; then
    echo "registry: $(registry_addr) (running)"
  else
    echo "registry: not running"
  fi
  [[ -f $NODE_STATUS_FILE ]] && st=$(<"$NODE_STATUS_FILE")
  if [[ $st == up ]]; then
    if node_healthy; then echo "real node: up ($REAL_NODE_NAME, Ready)"; else echo "real node: not healthy ($REAL_NODE_NAME; 'up' restarts it; logs in $CLUSTER_DIR/logs)"; fi
  else
    echo "real node: ${st:-off: not started}"
  fi
}

cmd_status() {
  recorded_network_mode
  if control_plane_healthy; then
    echo "status: up"
    supervisor_line
    node_lines
    echo "KUBECONFIG=$KUBECONFIG_PATH"
    k get nodes
    return 0
  fi
  if [[ -e $STATE_DIR ]] && supervisor_pid >/dev/null; then
    echo "status: down (recovering? the supervisor restarts what exited; 'up' waits for it)"
    supervisor_line
  elif [[ -e $STATE_DIR ]]; then
    echo "status: down (stale state in $STATE_DIR; 'up' recreates, 'down' removes it)"
    supervisor_line
  else
    echo "status: down"
  fi
  return 1
}

cmd_env() {
  local st=off
  echo "KUBECONFIG=$KUBECONFIG_PATH"
  echo "KUBECTL=$KUBECTL_LINK"
  echo "CRANE=$CRANE_BIN/crane"
  # The loopback registry; images for the real node are named JR2_REGISTRY/<repo>:<tag>.
  echo "JR2_REGISTRY=$(registry_addr)"
  [[ -f $NODE_STATUS_FILE && $(<"$NODE_STATUS_FILE") == up ]] && st=up
  # up or off ('status' says why it is off); a pod asks for the node with the label as its
  # nodeSelector and tolerates the taint.
  echo "JR2_REAL_NODE_STATUS=$st"
  echo "JR2_REAL_NODE_NAME=$REAL_NODE_NAME"
  echo "JR2_REAL_NODE_LABEL=$REAL_NODE_LABEL"
  echo "JR2_REAL_NODE_TAINT=$REAL_NODE_TAINT"
  echo "JR2_REAL_NODE_DNS=$NODE_DNS"
  # This machine's address on the node's bridge: where the node's pods reach a process of this
  # machine (npm start's Orchestrator, in-cluster mode).
  echo "JR2_REAL_NODE_IP=$NODE_IP"
  # The RuntimeClass whose pods run under gVisor on the real node (docs/decisions/0055-gvisor.md).
  echo "JR2_GVISOR_RUNTIME_CLASS=$GVISOR_RUNTIME_CLASS"
  # The node guard (CNI plugin) and the nft set of Sandbox pods' addresses it keeps, and the
  # stand-in public host's network namespace and addresses (docs/decisions/0051).
  echo "JR2_NODE_GUARD=$NODE_GUARD_BIN/jr2-node-guard"
  echo "JR2_NODE_GUARD_SET=inet/$NFT_TABLE/$NFT_SANDBOX_SET"
  echo "JR2_NODE_GUARD_PORTS=inet/$NFT_TABLE/$NFT_SANDBOX_PORTS"
  echo "JR2_SANDBOX_ANNOTATION=$SANDBOX_ANNOTATION"
  echo "JR2_PUBLIC_NETNS=$PUBLIC_NETNS"
  echo "JR2_PUBLIC_ALLOWED_IP=$PUBLIC_ALLOWED_IP"
  echo "JR2_PUBLIC_OTHER_IP=$PUBLIC_OTHER_IP"
  echo "JR2_PUBLIC_DNS_IP=$PUBLIC_DNS_IP"
  echo "JR2_PUBLIC_DNS_ZONE=$PUBLIC_DNS_ZONE"
}

cmd_kubectl_path() {
  [[ -x $KUBECTL ]] || die "kubectl $KUBE_VERSION is not built yet; run: npm run cluster -- up"
  link_kubectl
  echo "$KUBECTL_LINK"
}

# ctr, containerd's own client, from the same pinned module as the node's containerd (built on first
# use, cached beside it): what lists and removes the node's images, which kubectl cannot (the
# real-node bench empties the node's image store before each cold run). Built here rather than in
# node.sh's ensure_node_binaries because node.sh's text is part of the node's fingerprint: adding it
# there would restart a running node on the next 'up'.
cmd_ctr() {
  [[ -S $CONTAINERD_SOCK ]] || die "no containerd socket at $CONTAINERD_SOCK: is the real node up? (npm run cluster -- status)"
  build ctr "$CONTAINERD_VERSION" "$GO_DIR/containerd" github.com/containerd/containerd/v2/cmd/ctr \
    "$CONTAINERD_BIN" "$CONTAINERD_FP"
  exec "$CONTAINERD_BIN/ctr" --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"
}

# binary NAME [MODULE]: the cached path of one binary, built first when missing or stale. etcd is
# the cluster's own; a Kubernetes command comes from the wrapper module go/MODULE at the version its
# go.mod pins, cached as kube-<version>/ with the same fingerprint and ldflags as the cluster's
# (an older API server beside the cluster, docs/decisions/0059-kubernetes-1-34.md).
cmd_binary() {
  local name=${1:-} module=${2:-kube}
  case $name in
    etcd)
      build etcd "$ETCD_VERSION" "$GO_DIR/etcd" . "$ETCD_BIN" "$ETCD_FP"
      echo "$ETCD_BIN/etcd"
      ;;
    kube-apiserver | kube-controller-manager | kube-scheduler | kubectl)
      local dir="$GO_DIR/$module"
      [[ $module =~ ^kube(-[0-9.]+)?$ && -f $dir/go.mod ]] || die "no wrapper module $dir/go.mod"
      local version ldflags fp
      version=$(mod_version "$dir" k8s.io/kubernetes)
      [[ -n $version ]] || die "$dir/go.mod pins no k8s.io/kubernetes"
      ldflags=$(kube_ldflags "$version")
      fp=$(fingerprint "$dir/go.mod" "$dir/go.sum" -- "$ldflags")
      build "$name" "$version" "$dir" "k8s.io/kubernetes/cmd/$name" "$BIN_DIR/kube-$version" "$fp" "$ldflags"
      echo "$BIN_DIR/kube-$version/$name"
      ;;
    agent-sandbox-controller)
      # The side-by-side bench's reference controller, with its Sandbox CRD copied beside it from
      # the same module version (bench/versus-bench.ts).
      local dir="$GO_DIR/agent-sandbox" version fp out src
      version=$(mod_version "$dir" sigs.k8s.io/agent-sandbox)
      fp=$(fingerprint "$dir/go.mod" "$dir/go.sum")
      out="$BIN_DIR/agent-sandbox-$version"
      build "$name" "$version" "$dir" sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller "$out" "$fp"
      if [[ ! -f $out/sandboxes-crd.yaml ]]; then
        src=$(cd "$dir" && GOWORK=off go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)
        cp "$src/k8s/crds/agents.x-k8s.io_sandboxes.yaml" "$out/.sandboxes-crd.yaml.tmp.$$"
        mv -f "$out/.sandboxes-crd.yaml.tmp.$$" "$out/sandboxes-crd.yaml"
      fi
      echo "$out/$name"
      ;;
    *) die "binary: say etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl or agent-sandbox-controller" ;;
  esac
}

usage() {
  sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

main() {
  local cmd=${1:-}
  (($#)) && shift
  case $cmd in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    env) cmd_env ;;
    kubectl-path) cmd_kubectl_path ;;
    kubectl)
      [[ -x $KUBECTL ]] || die "kubectl is not built yet; run: npm run cluster -- up"
      exec "$KUBECTL" --kubeconfig "$KUBECONFIG_PATH" --cache-dir "$STATE_DIR/kubectl-cache" "$@"
      ;;
    ctr) cmd_ctr "$@" ;;
    binary) cmd_binary "$@" ;;
    -h | --help | help) usage ;;
    *) usage; exit 2 ;;
  esac
}

main "$@"
