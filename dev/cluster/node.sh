# The local cluster's one real node and its loopback registry; sourced by cluster.sh, which defines
# log, die, build, abs, k, wait_gone, pid_is_ours, clean_process and the paths used here.
# See docs/decisions/0040-real-node.md.
#
# The node, jr2-real-0, is this machine: containerd (with runc and the CNI bridge plugin) runs its
# pods, a kubelet registers it, kube-proxy (nftables mode) gives this machine and its pods the
# cluster's Service IPs, CoreDNS answers cluster names for both, and kube-network-policies enforces
# NetworkPolicy for its pods. Each is a host process started like kwokctl starts the control plane
# (own session, log in logs/, pid in pids/) and kept running by supervise.sh. Nothing of it is
# reachable from other machines: the pod network is a bridge with no uplink, forwarding to or from
# any other interface is dropped, and the API server (which must listen beyond loopback for pods
# to reach it) takes connections only from loopback and the bridge.

# Names tests and manifests use (printed by `cluster env`). One key for the label and the taint:
# a pod asks for the node with nodeSelector {jr2.dev/node: real} and tolerates that taint.
REAL_NODE_NAME=jr2-real-0
REAL_NODE_KEY=jr2.dev/node
REAL_NODE_VALUE=real
REAL_NODE_LABEL=$REAL_NODE_KEY=$REAL_NODE_VALUE
REAL_NODE_TAINT=$REAL_NODE_KEY=$REAL_NODE_VALUE:NoSchedule
# gVisor (docs/decisions/0055-gvisor.md): containerd's handler `runsc`, the RuntimeClass that names
# it, and the label of the nodes that have it, which the RuntimeClass's scheduling selects.
GVISOR_HANDLER=runsc
GVISOR_RUNTIME_CLASS=gvisor
GVISOR_NODE_KEY=runtime.jr2.dev/gvisor
GVISOR_NODE_VALUE=true
# systrap intercepts syscalls with seccomp and needs no device; KVM needs /dev/kvm, which this VM
# lacks. JR2_GVISOR_PLATFORM=kvm chooses it where it is present.
GVISOR_PLATFORM=${JR2_GVISOR_PLATFORM:-systrap}

# Addresses. The kwok nodes use 10.244.0-249.0/24 (JR2_NODES <= 250); the real node's pod CIDR is
# the last /24 of the same cluster CIDR and its bridge address is the node's own IP, which exists on
# this machine only. Pods reach the API server, the kubelet and DNS there.
CLUSTER_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/16
NODE_POD_CIDR=10.244.255.0/24
NODE_IP=10.244.255.1
NODE_BRIDGE=jr2br0
NODE_DNS=$NODE_IP
API_SERVICE_IP=10.96.0.1
CNI_NETWORK=jr2
NFT_TABLE=jr2-node
# Sandbox pods' IPv4 addresses, kept by the node guard (go/nodeguard) from each pod's CNI ADD to its
# DEL: the input chain drops what they send this node (docs/decisions/0051).
NFT_SANDBOX_SET=sandbox_pods
# TCP ports of the node IP a Sandbox pod may open all the same, empty unless a test adds one: a
# process of this machine that Sandbox pods must reach, such as an Orchestrator run in-cluster mode
# from this machine (test/node/node-guard.ts openToSandboxes).
NFT_SANDBOX_PORTS=sandbox_node_ports
SANDBOX_ANNOTATION=sandbox.jr2.dev/name
# The stand-in public host (docs/decisions/0051): a network namespace holding documentation-range
# addresses (RFC 5737's TEST-NET-2), joined to this machine by a veth pair and routed through it, so
# the node's pods reach "the internet" without anything leaving this machine. 198.51.100.1 is this
# machine's end. Only these four addresses are routed here, each as a /32: a machine may reach its
# own services at documentation addresses (this one's package registries answer at one of
# TEST-NET-3's), and a whole /24 routed to the veth took them away while the cluster ran.
PUBLIC_NETNS=jr2-public
PUBLIC_HOST_IF=jr2pub0
PUBLIC_NETNS_IF=jr2pub1
PUBLIC_GATEWAY=198.51.100.1
PUBLIC_ALLOWED_IP=198.51.100.10 # allowed.egress.example
PUBLIC_OTHER_IP=198.51.100.11   # other.egress.example
PUBLIC_DNS_IP=198.51.100.53     # where CoreDNS forwards attacker.example
PUBLIC_DNS_ZONE=attacker.example
# Ports of this machine the node's processes take (one real node per machine).
KUBELET_PORT=10250
REGISTRY_PORT_DEFAULT=5000

NODE_DIR="$STATE_DIR/node"
NODE_STATUS_FILE="$STATE_DIR/real-node.status" # "up", or "off: <reason>"
REGISTRY_ADDR_FILE="$STATE_DIR/registry.addr"
API_PORT_FILE="$STATE_DIR/apiserver.port"
CONTAINERD_SOCK="$NODE_DIR/containerd/containerd.sock"
# Host-global, so only one cluster's node may own it: the state dir of the owner.
NODE_OWNER_FILE=/run/jr2-real-node.owner
RESOLV_CONF=/etc/resolv.conf
RESOLV_MARK="# jr2 real node: cluster names (dev/cluster/cluster.sh down removes these two lines)"

NODE_COMPONENTS=(containerd kubelet kube-proxy coredns kube-network-policies)

CONTAINERD_VERSION=$(mod_version "$GO_DIR/containerd" github.com/containerd/containerd/v2)
RUNC_VERSION=$(mod_version "$GO_DIR/runc" github.com/opencontainers/runc)
CNI_VERSION=$(mod_version "$GO_DIR/cni" github.com/containernetworking/plugins)
COREDNS_VERSION=$(mod_version "$GO_DIR/coredns" github.com/coredns/coredns)
NETPOL_VERSION=$(mod_version "$GO_DIR/netpol" sigs.k8s.io/kube-network-policies)
GVISOR_VERSION=$(mod_version "$GO_DIR/gvisor" gvisor.dev/gvisor)
[[ -n $CONTAINERD_VERSION && -n $RUNC_VERSION && -n $CNI_VERSION && -n $COREDNS_VERSION && -n $NETPOL_VERSION && -n $GVISOR_VERSION ]] ||
  die "cannot read pinned versions from $GO_DIR/{containerd,runc,cni,coredns,netpol,gvisor}/go.mod"
CONTAINERD_BIN="$BIN_DIR/containerd-$CONTAINERD_VERSION"
RUNC_BIN="$BIN_DIR/runc-$RUNC_VERSION"
CNI_BIN="$BIN_DIR/cni-$CNI_VERSION"
COREDNS_BIN="$BIN_DIR/coredns-$COREDNS_VERSION"
NETPOL_BIN="$BIN_DIR/kube-network-policies-$NETPOL_VERSION"
GVISOR_BIN="$BIN_DIR/gvisor-$GVISOR_VERSION"
RUNC_TAGS="seccomp urfave_cli_no_docs netgo osusergo"
CONTAINERD_FP=$(fingerprint "$GO_DIR/containerd/go.mod" "$GO_DIR/containerd/go.sum")
RUNC_FP=$(fingerprint "$GO_DIR/runc/go.mod" "$GO_DIR/runc/go.sum" -- "$RUNC_TAGS")
CNI_FP=$(fingerprint "$GO_DIR/cni/go.mod" "$GO_DIR/cni/go.sum")
COREDNS_FP=$(fingerprint "$GO_DIR/coredns/go.mod" "$GO_DIR/coredns/go.sum" "$GO_DIR/coredns/main.go")
NETPOL_FP=$(fingerprint "$GO_DIR/netpol/go.mod" "$GO_DIR/netpol/go.sum" "$GO_DIR/netpol/main.go")
GVISOR_FP=$(fingerprint "$GO_DIR/gvisor/go.mod" "$GO_DIR/gvisor/go.sum" "$GO_DIR/gvisor/shim-oom.patch")
# Programs of this repo (no dependency): keyed by their source alone.
PAUSE_FP=$(fingerprint "$GO_DIR/pause/go.mod" "$GO_DIR/pause/main.go")
PAUSE_BIN="$BIN_DIR/pause-$PAUSE_FP"
NODE_GUARD_FP=$(fingerprint "$GO_DIR/nodeguard/go.mod" "$GO_DIR/nodeguard/main.go")
NODE_GUARD_BIN="$BIN_DIR/node-guard-$NODE_GUARD_FP"

# real_node_wanted: JR2_REAL_NODE=0 turns the node off (test/cluster/supervision.sh's own cluster).
real_node_wanted() { [[ ${JR2_REAL_NODE:-1} != 0 ]]; }

# The node's mode for this state dir: recorded at create, so warm commands agree with it.
node_mode_on() { [[ -f $NODE_STATUS_FILE && $(<"$NODE_STATUS_FILE") == up ]]; }

node_off() {
  printf 'off: %s\n' "$1" >"$NODE_STATUS_FILE"
  log "real node: OFF, going on with the kwok nodes only: $1"
}

# ---------------------------------------------------------------------------------------
# Building (cluster.sh's build(), plus runc, which needs cgo: see the decision record).

build_runc() {
  local out=$RUNC_BIN fp=$RUNC_FP stamp="$RUNC_BIN/.runc.fingerprint"
  if [[ -x $out/runc && -f $stamp && $(<"$stamp") == "$fp" ]]; then return 0; fi
  require_go
  mkdir -p "$out"
  local tmp="$out/.runc.tmp.$$" start=$SECONDS
  log "building runc $RUNC_VERSION (cgo, static, with libseccomp) ..."
  # seccomp: profiles such as RuntimeDefault are applied by runc through libseccomp. Static PIE as
  # runc's own release build, so the binary needs no library at run time.
  if ! (cd "$GO_DIR/runc" && CGO_ENABLED=1 GOWORK=off go build -trimpath -buildmode=pie -tags "$RUNC_TAGS" \
    -ldflags "-s -w -X main.version=${RUNC_VERSION#v} -linkmode external -extldflags -static-pie" \
    -o "$tmp" github.com/opencontainers/runc); then
    rm -f "$tmp"
    return 1
  fi
  mv -f "$tmp" "$out/runc"
  printf '%s\n' "$fp" >"$stamp.tmp" && mv -f "$stamp.tmp" "$stamp"
  log "built runc $RUNC_VERSION in $((SECONDS - start))s"
}

# build_gvisor: runsc and its containerd shim (the handler `runsc`, docs/decisions/0055-gvisor.md).
# runsc as the module pins it; the shim from a copy of the module with shim-oom.patch applied, since
# go build may not overlay files in the module cache. Both static (cgo off), as gVisor ships them.
build_gvisor() {
  local out=$GVISOR_BIN fp=$GVISOR_FP stamp="$GVISOR_BIN/.gvisor.fingerprint"
  if [[ -x $out/runsc && -x $out/containerd-shim-runsc-v1 && -f $stamp && $(<"$stamp") == "$fp" ]]; then return 0; fi
  require_go
  command -v patch >/dev/null 2>&1 || { log "'patch' not found (the gVisor shim is built patched): apt-get install -y patch"; return 1; }
  mkdir -p "$out"
  local work="$out/.build.$$" start=$SECONDS src ldflags="-s -w -X gvisor.dev/gvisor/runsc/version.version=$GVISOR_VERSION"
  log "building gVisor $GVISOR_VERSION: runsc and containerd-shim-runsc-v1 (about 6 minutes cold on two cores) ..."
  rm -rf "$work" && mkdir -p "$work/mod"
  if ! src=$(cd "$GO_DIR/gvisor" && GOWORK=off go mod download -json gvisor.dev/gvisor | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p') ||
    [[ ! -d $src ]]; then
    log "could not download gvisor.dev/gvisor $GVISOR_VERSION"; rm -rf "$work"; return 1
  fi
  cp -R "$src" "$work/gvisor" && chmod -R u+w "$work/gvisor"
  if ! patch -s -d "$work/gvisor" -p1 <"$GO_DIR/gvisor/shim-oom.patch"; then
    log "$GO_DIR/gvisor/shim-oom.patch does not apply to gvisor.dev/gvisor $GVISOR_VERSION: update it with the version"
    rm -rf "$work"; return 1
  fi
  cp "$GO_DIR/gvisor/go.mod" "$GO_DIR/gvisor/go.sum" "$work/mod/"
  printf '\nreplace gvisor.dev/gvisor => %s\n' "$work/gvisor" >>"$work/mod/go.mod"
  if ! (cd "$GO_DIR/gvisor" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "$ldflags" -o "$work/runsc" gvisor.dev/gvisor/runsc) ||
    ! (cd "$work/mod" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "-s -w" -o "$work/containerd-shim-runsc-v1" gvisor.dev/gvisor/shim); then
    rm -rf "$work"; return 1
  fi
  mv -f "$work/runsc" "$work/containerd-shim-runsc-v1" "$out/"
  rm -rf "$work"
  printf '%s\n' "$fp" >"$stamp.tmp" && mv -f "$stamp.tmp" "$stamp"
  log "built gVisor $GVISOR_VERSION in $((SECONDS - start))s"
}

ensure_node_binaries() {
  local c p
  for c in kubelet kube-proxy; do
    build "$c" "$KUBE_VERSION" "$GO_DIR/kube" "k8s.io/kubernetes/cmd/$c" "$KUBE_BIN" "$KUBE_FP" "$KUBE_LDFLAGS"
  done
  build containerd "$CONTAINERD_VERSION" "$GO_DIR/containerd" github.com/containerd/containerd/v2/cmd/containerd \
    "$CONTAINERD_BIN" "$CONTAINERD_FP"
  build containerd-shim-runc-v2 "$CONTAINERD_VERSION" "$GO_DIR/containerd" \
    github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 "$CONTAINERD_BIN" "$CONTAINERD_FP"
  for p in main/bridge ipam/host-local main/loopback; do
    build "${p#*/}" "$CNI_VERSION" "$GO_DIR/cni" "github.com/containernetworking/plugins/plugins/$p" "$CNI_BIN" "$CNI_FP"
  done
  build coredns "$COREDNS_VERSION" "$GO_DIR/coredns" . "$COREDNS_BIN" "$COREDNS_FP"
  build kube-network-policies "$NETPOL_VERSION" "$GO_DIR/netpol" . "$NETPOL_BIN" "$NETPOL_FP"
  build pause "$PAUSE_FP" "$GO_DIR/pause" . "$PAUSE_BIN" "$PAUSE_FP"
  build jr2-node-guard "$NODE_GUARD_FP" "$GO_DIR/nodeguard" . "$NODE_GUARD_BIN" "$NODE_GUARD_FP"
  build_runc || return 1
  build_gvisor || return 1
}

# ---------------------------------------------------------------------------------------
# Pre-flight: can this machine run containers? Each check names what failed and the fix.

# preflight_host: checks that need no binary of ours. Prints the first failure; fails on it.
preflight_host() {
  local uid d t
  uid=$(id -u)
  if ((uid != 0)); then echo "not root (uid $uid): containerd, runc, the CNI bridge and the kubelet need root; run as root or set JR2_REAL_NODE=0"; return 1; fi
  if ! grep -qw overlay /proc/filesystems; then echo "no overlayfs in this kernel (/proc/filesystems): containerd's snapshotter needs it"; return 1; fi
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    for c in cpu memory pids; do
      grep -qw "$c" /sys/fs/cgroup/cgroup.controllers || { echo "cgroup v2 without the $c controller (/sys/fs/cgroup/cgroup.controllers)"; return 1; }
    done
  else
    for c in cpu cpuacct cpuset memory pids; do
      [[ -d /sys/fs/cgroup/$c ]] || { echo "no cgroup v1 $c hierarchy at /sys/fs/cgroup/$c (nor cgroup v2 at /sys/fs/cgroup)"; return 1; }
    done
    t=/sys/fs/cgroup/memory/jr2-preflight.$$
    mkdir "$t" 2>/dev/null && rmdir "$t" || { echo "cannot create a cgroup under /sys/fs/cgroup/memory (read-only or delegated cgroups)"; return 1; }
  fi
  # A real mount, since a kernel that lists overlay may still refuse it (e.g. inside a container).
  d=$(mktemp -d "${TMPDIR:-/tmp}/jr2-overlay.XXXXXX")
  mkdir "$d/l" "$d/u" "$d/w" "$d/m"
  if ! mount -t overlay overlay -o "lowerdir=$d/l,upperdir=$d/u,workdir=$d/w" "$d/m" 2>/dev/null; then
    rm -rf "$d"
    echo "mounting an overlayfs failed (mount -t overlay): containerd's snapshotter needs it"; return 1
  fi
  umount "$d/m"; rm -rf "$d"
  [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] || { echo "no br_netfilter (/proc/sys/net/bridge): Services and NetworkPolicy need bridged traffic to pass netfilter"; return 1; }
  [[ -e /proc/net/netfilter/nfnetlink_queue ]] || { echo "no nfnetlink_queue in this kernel: kube-network-policies needs it"; return 1; }
  command -v ip >/dev/null 2>&1 || { echo "'ip' not found: apt-get install -y iproute2"; return 1; }
  command -v nft >/dev/null 2>&1 || { echo "'nft' not found (kube-proxy's nftables mode and the node guard run it): apt-get install -y nftables"; return 1; }
  nft list tables >/dev/null 2>&1 || { echo "'nft list tables' failed: this kernel has no usable nf_tables"; return 1; }
  command -v openssl >/dev/null 2>&1 || { echo "'openssl' not found (signs the node's client certificates): apt-get install -y openssl"; return 1; }
  if [[ ! -x $RUNC_BIN/runc || ! -f $RUNC_BIN/.runc.fingerprint || $(<"$RUNC_BIN/.runc.fingerprint") != "$RUNC_FP" ]]; then
    command -v cc >/dev/null 2>&1 || { echo "no C compiler to build runc (cgo): apt-get install -y gcc libseccomp-dev"; return 1; }
    [[ $(cc -print-file-name=libseccomp.a) == /* ]] || { echo "no libseccomp.a to build runc with seccomp: apt-get install -y libseccomp-dev"; return 1; }
  fi
  case $GVISOR_PLATFORM in
    systrap | ptrace) ;;
    kvm) [[ -c /dev/kvm ]] || { echo "JR2_GVISOR_PLATFORM=kvm, but this machine has no /dev/kvm: leave it unset (systrap)"; return 1; } ;;
    *) echo "JR2_GVISOR_PLATFORM=$GVISOR_PLATFORM is not a gVisor platform: systrap (default), kvm or ptrace"; return 1 ;;
  esac
  if [[ ! -x $GVISOR_BIN/runsc || ! -f $GVISOR_BIN/.gvisor.fingerprint || $(<"$GVISOR_BIN/.gvisor.fingerprint") != "$GVISOR_FP" ]]; then
    command -v patch >/dev/null 2>&1 || { echo "'patch' not found (the gVisor shim is built patched): apt-get install -y patch"; return 1; }
  fi
  local owner=""
  [[ -f $NODE_OWNER_FILE ]] && owner=$(<"$NODE_OWNER_FILE")
  [[ $owner == "$STATE_DIR" ]] && return 0 # this cluster's own node holds what is checked below
  if [[ -n $owner && -d $owner/node ]] && pgrep -f "$owner/clusters/$CLUSTER_NAME/bin/kubelet" >/dev/null 2>&1; then
    echo "the cluster in $owner runs this machine's real node (one per machine: bridge $NODE_BRIDGE, port $KUBELET_PORT); stop it or set JR2_REAL_NODE=0"
    return 1
  fi
  if ss -Hltn "sport = :$KUBELET_PORT" 2>/dev/null | grep -q .; then
    echo "port $KUBELET_PORT (the kubelet's) is taken by another process: $(ss -Hltnp "sport = :$KUBELET_PORT" | head -1)"; return 1
  fi
  return 0
}

# preflight_binaries: each binary the node runs answers --version.
preflight_binaries() {
  local b out
  for b in "$KUBE_BIN/kubelet" "$KUBE_BIN/kube-proxy" "$CONTAINERD_BIN/containerd" "$CONTAINERD_BIN/containerd-shim-runc-v2" \
    "$RUNC_BIN/runc" "$COREDNS_BIN/coredns" "$CNI_BIN/bridge" "$NODE_GUARD_BIN/jr2-node-guard" \
    "$GVISOR_BIN/runsc" "$GVISOR_BIN/containerd-shim-runsc-v1"; do
    [[ -x $b ]] || { echo "$b is missing"; return 1; }
  done
  for b in "$KUBE_BIN/kubelet --version" "$KUBE_BIN/kube-proxy --version" "$CONTAINERD_BIN/containerd --version" \
    "$RUNC_BIN/runc --version" "$COREDNS_BIN/coredns -version" "$GVISOR_BIN/runsc --version"; do
    if ! out=$($b 2>&1); then echo "'$b' failed: $(head -c 300 <<<"$out")"; return 1; fi
  done
}

# ---------------------------------------------------------------------------------------
# The registry (loopback only; also when the node is off, so images can be pushed either way).

registry_addr() { [[ -f $REGISTRY_ADDR_FILE ]] && cat "$REGISTRY_ADDR_FILE"; }

port_free() { ! ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

# choose_registry_addr: JR2_REGISTRY_PORT (default 5000) unless another process has it, then the
# next free port; recorded so the address stays the same for this cluster's life.
choose_registry_addr() {
  local p=${JR2_REGISTRY_PORT:-$REGISTRY_PORT_DEFAULT}
  [[ $p =~ ^[0-9]+$ && $p -gt 0 && $p -lt 65536 ]] || die "JR2_REGISTRY_PORT must be a TCP port, got '$p'"
  if [[ -z ${JR2_REGISTRY_PORT:-} ]]; then
    while ! port_free "$p"; do p=$((p + 1)); done
  elif ! port_free "$p"; then
    die "JR2_REGISTRY_PORT $p is taken: $(ss -Hltnp "sport = :$p" | head -1)"
  fi
  echo "127.0.0.1:$p" >"$REGISTRY_ADDR_FILE"
}

registry_config() {
  cat <<EOF
# Written by dev/cluster/cluster.sh; see docs/decisions/0040-real-node.md.
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $STATE_DIR/registry}
  delete: {enabled: true}
http:
  addr: $(registry_addr)
EOF
}

registry_ready() { curl -fsS -o /dev/null --max-time 2 "http://$(registry_addr)/v2/" 2>/dev/null; }

ensure_registry() {
  [[ -f $REGISTRY_ADDR_FILE ]] || choose_registry_addr
  if component_alive registry && registry_ready; then return 0; fi
  mkdir -p "$STATE_DIR/registry"
  registry_config >"$STATE_DIR/registry.yaml"
  start_component registry "$STATE_DIR" "$REGISTRY_BIN/registry" serve "$STATE_DIR/registry.yaml"
  wait_for "the registry at $(registry_addr)" registry_ready
}

# ---------------------------------------------------------------------------------------
# Starting processes as kwokctl does, so supervise.sh can restart them.

# start_component NAME CWD BINARY ARGS...: BINARY is linked into the cluster dir (the supervisor
# only supervises processes whose argv[0] lies there), started detached in its own session with its
# log in logs/NAME.log, and its pid written to pids/NAME.pid.
start_component() {
  local name=$1 cwd=$2 bin=$3 pid
  shift 3
  mkdir -p "$CLUSTER_DIR/bin" "$CLUSTER_DIR/logs" "$CLUSTER_DIR/pids"
  ln -sfn "$bin" "$CLUSTER_DIR/bin/$name"
  (
    clean_process
    cd "$cwd" || exit 127
    exec setsid "$CLUSTER_DIR/bin/$name" "$@"
  ) </dev/null >>"$CLUSTER_DIR/logs/$name.log" 2>&1 &
  pid=$!
  printf '%s' "$pid" >"$CLUSTER_DIR/pids/$name.pid.tmp" && mv -f "$CLUSTER_DIR/pids/$name.pid.tmp" "$CLUSTER_DIR/pids/$name.pid"
}

# component_pid NAME: the pid of NAME's live process (its pid file names a process whose argv[0]
# is NAME's link in the cluster dir, so a recycled pid is not it). Builtins only: 'up' asks often.
component_pid() {
  local f="$CLUSTER_DIR/pids/$1.pid" pid a0=""
  [[ -f $f ]] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  { IFS= read -r -d '' a0 <"/proc/$pid/cmdline"; } 2>/dev/null
  [[ $a0 == "$CLUSTER_DIR/bin/$1" ]] || return 1
  printf '%s\n' "$pid"
}
component_alive() { component_pid "$1" >/dev/null; }

# stop_component NAME: SIGTERM, SIGKILL after 10 s; the pid file goes (stopped on purpose).
stop_component() {
  local pid
  if pid=$(component_pid "$1"); then
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone 100 "$pid"; then
      log "$1 ($pid) did not stop on SIGTERM; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      wait_gone 50 "$pid" || true
    fi
  fi
  rm -f "$CLUSTER_DIR/pids/$1.pid"
}

# ---------------------------------------------------------------------------------------
# The node's network: bridge, routes, firewall, sysctls. Set up before the control plane starts,
# since the API server binds every address and its certificate must name the node IP.

api_port() { [[ -f $API_PORT_FILE ]] && cat "$API_PORT_FILE"; }

# choose_api_port: the API server's port, chosen here (not by kwokctl) so the firewall rule that
# keeps it from other machines is in place before it listens. Kept for the cluster's life.
choose_api_port() {
  [[ -f $API_PORT_FILE ]] && return 0
  local p=6443
  while ! port_free "$p"; do p=$((p + 1)); done
  echo "$p" >"$API_PORT_FILE"
}

nft_rules() {
  cat <<EOF
table inet $NFT_TABLE {
  # Sandbox pods' addresses, added by the node guard (CNI, go/nodeguard) before a pod's containers
  # start and removed when its sandbox goes. IPv4 only: the pod network is IPv4 (IPv6 below).
  set $NFT_SANDBOX_SET {
    type ipv4_addr
  }
  set $NFT_SANDBOX_PORTS {
    type inet_service
  }
  # The API server listens on every address so pods reach it at the node IP; other machines may not.
  chain input {
    type filter hook input priority filter; policy accept;
    # This node is closed to Sandbox pods (docs/decisions/0051): kube-network-policies polices pod
    # traffic in postrouting, which a pod's connection to its own node never passes, so no egress
    # policy keeps a pod from the API server's port, the kubelet or DNS here. Whatever a Sandbox pod
    # sends this node is dropped, TCP, UDP or ICMP, any port, any of its addresses (Service IPs
    # DNATed here too), except replies to connections the node opened (the kubelet's probes).
    ip saddr @$NFT_SANDBOX_SET ct direction reply accept
    ip saddr @$NFT_SANDBOX_SET ip daddr $NODE_IP tcp dport @$NFT_SANDBOX_PORTS accept
    ip saddr @$NFT_SANDBOX_SET drop
    # IPv6: the bridge has none (disable_ipv6), so no pod reaches this node over IPv6; stated here too.
    iifname "$NODE_BRIDGE" meta nfproto ipv6 drop
    iifname != { "lo", "$NODE_BRIDGE" } tcp dport { $(api_port), $KUBELET_PORT } drop
    iifname != { "lo", "$NODE_BRIDGE" } ip daddr $CLUSTER_CIDR drop
    # The stand-in public host answers this machine (CoreDNS's forwards, tests) and opens nothing here.
    iifname "$PUBLIC_HOST_IF" ct direction original drop
  }
  # Pods reach each other, this machine, Services and the stand-in public host, and nothing beyond
  # it; nothing beyond reaches them.
  chain forward {
    type filter hook forward priority filter; policy accept;
    iifname "$NODE_BRIDGE" oifname "$NODE_BRIDGE" accept
    iifname "$NODE_BRIDGE" oifname "$PUBLIC_HOST_IF" ip daddr { $PUBLIC_ALLOWED_IP, $PUBLIC_OTHER_IP, $PUBLIC_DNS_IP } accept
    iifname "$PUBLIC_HOST_IF" oifname "$NODE_BRIDGE" ct state established,related accept
    iifname "$NODE_BRIDGE" drop
    oifname "$NODE_BRIDGE" drop
    iifname "$PUBLIC_HOST_IF" drop
    oifname "$PUBLIC_HOST_IF" drop
  }
}
EOF
}

node_network_up() {
  mkdir -p "$NODE_DIR"
  choose_api_port
  if ! ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    ip link add "$NODE_BRIDGE" type bridge || return 1
  fi
  ip addr replace "$NODE_IP/24" dev "$NODE_BRIDGE" || return 1
  # No IPv6 on the pod network: the node has no address there that the guard's IPv4 set misses.
  if [[ -d /proc/sys/net/ipv6 ]]; then sysctl -qw "net.ipv6.conf.$NODE_BRIDGE.disable_ipv6=1" || return 1; fi
  ip link set "$NODE_BRIDGE" up || return 1
  # Service IPs belong on the bridge: kube-proxy rewrites them to a pod (or the API server) before
  # they leave; without kube-proxy they go nowhere instead of out of the machine's uplink. The kwok
  # nodes' pod IPs are not real: unreachable, not sent to the uplink either.
  ip route replace "$SERVICE_CIDR" dev "$NODE_BRIDGE" src "$NODE_IP" || return 1
  ip route replace unreachable "$CLUSTER_CIDR" || return 1
  { nft delete table inet "$NFT_TABLE" 2>/dev/null; nft_rules | nft -f -; } || return 1
  # Recorded once per boot (reboot clears /run), restored by 'down'.
  [[ -f $NODE_DIR/ip_forward.orig ]] || cat /proc/sys/net/ipv4/ip_forward >"$NODE_DIR/ip_forward.orig"
  sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 || return 1
  public_host_up || return 1
  echo "$STATE_DIR" >"$NODE_OWNER_FILE"
}

# public_host_up: the stand-in public host's namespace, veth pair, addresses and routes (idempotent).
# This machine routes the three addresses (each a /32) to the veth; the namespace's default route
# comes back through it, so pods' own addresses reach the host and its answers reach them (no NAT).
# The forward and input chains above let the bridge in and nothing else new. Refused when one of them
# is where this machine's own package registries answer.
public_host_up() {
  local a clash
  clash=$(public_host_clash)
  [[ -z $clash ]] || { echo "the stand-in public host's address $clash is where this machine reaches its package registries: change PUBLIC_*_IP in dev/cluster/node.sh"; return 1; }
  # Whatever is there and not as it should be (an earlier version's /24 took the registries'
  # addresses) goes first.
  public_host_ok || public_host_down
  [[ -e /run/netns/$PUBLIC_NETNS ]] || ip netns add "$PUBLIC_NETNS" || return 1
  if ip link show "$PUBLIC_HOST_IF" >/dev/null 2>&1 && ! ip -n "$PUBLIC_NETNS" link show "$PUBLIC_NETNS_IF" >/dev/null 2>&1; then
    ip link del "$PUBLIC_HOST_IF" || return 1 # its peer is not in the namespace: start over
  fi
  if ! ip link show "$PUBLIC_HOST_IF" >/dev/null 2>&1; then
    ip link add "$PUBLIC_HOST_IF" type veth peer name "$PUBLIC_NETNS_IF" netns "$PUBLIC_NETNS" || return 1
  fi
  if [[ -d /proc/sys/net/ipv6 ]]; then
    sysctl -qw "net.ipv6.conf.$PUBLIC_HOST_IF.disable_ipv6=1" || return 1
    ip netns exec "$PUBLIC_NETNS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || return 1
  fi
  ip addr replace "$PUBLIC_GATEWAY/32" dev "$PUBLIC_HOST_IF" || return 1
  ip link set "$PUBLIC_HOST_IF" up || return 1
  ip -n "$PUBLIC_NETNS" link set lo up || return 1
  for a in "$PUBLIC_ALLOWED_IP" "$PUBLIC_OTHER_IP" "$PUBLIC_DNS_IP"; do
    ip -n "$PUBLIC_NETNS" addr replace "$a/32" dev "$PUBLIC_NETNS_IF" || return 1
  done
  ip -n "$PUBLIC_NETNS" link set "$PUBLIC_NETNS_IF" up || return 1
  for a in "$PUBLIC_ALLOWED_IP" "$PUBLIC_OTHER_IP" "$PUBLIC_DNS_IP"; do
    ip route replace "$a/32" dev "$PUBLIC_HOST_IF" src "$PUBLIC_GATEWAY" || return 1
  done
  ip -n "$PUBLIC_NETNS" route replace "$PUBLIC_GATEWAY/32" dev "$PUBLIC_NETNS_IF" || return 1
  ip -n "$PUBLIC_NETNS" route replace default via "$PUBLIC_GATEWAY" dev "$PUBLIC_NETNS_IF" || return 1
}

# public_host_clash: a stand-in address that one of this machine's package registries (npm's, the
# Go module proxy's) resolves to, or nothing. Their hosts come from the machine's own configuration.
public_host_clash() {
  local url host ip
  for url in $(command -v npm >/dev/null 2>&1 && npm config get registry 2>/dev/null) \
    $(command -v go >/dev/null 2>&1 && go env GOPROXY 2>/dev/null | tr ',|' '  '); do
    host=${url#*://}
    host=${host%%/*}
    [[ -n $host && $host != "$url" ]] || continue
    for ip in $(getent ahostsv4 "$host" 2>/dev/null | awk '{ print $1 }' | sort -u); do
      case $ip in "$PUBLIC_GATEWAY" | "$PUBLIC_ALLOWED_IP" | "$PUBLIC_OTHER_IP" | "$PUBLIC_DNS_IP") echo "$ip"; return 0 ;; esac
    done
  done
}

# public_host_ok: the namespace holds its addresses and this machine's end is up.
public_host_ok() {
  ip -n "$PUBLIC_NETNS" -4 addr show dev "$PUBLIC_NETNS_IF" 2>/dev/null | grep -q "inet $PUBLIC_DNS_IP/" &&
    ip -4 addr show dev "$PUBLIC_HOST_IF" up 2>/dev/null | grep -q "inet $PUBLIC_GATEWAY/32" &&
    ! ip -4 addr show dev "$PUBLIC_HOST_IF" 2>/dev/null | grep -q "inet $PUBLIC_GATEWAY/24" &&
    ip route show "$PUBLIC_ALLOWED_IP/32" 2>/dev/null | grep -q "$PUBLIC_HOST_IF"
}

# public_host_down: the namespace and, with it, the veth pair. A test's listeners in it are its own
# processes (test/node/public-host.ts stops them); they lose their addresses here.
public_host_down() {
  ip netns del "$PUBLIC_NETNS" 2>/dev/null || true
  ip link del "$PUBLIC_HOST_IF" 2>/dev/null || true
}

node_network_down() {
  ip link del "$NODE_BRIDGE" 2>/dev/null || true # takes the Service route with it
  ip route del unreachable "$CLUSTER_CIDR" 2>/dev/null || true
  nft delete table inet "$NFT_TABLE" 2>/dev/null || true
  public_host_down
  nft delete table ip kube-proxy 2>/dev/null || true
  nft delete table ip6 kube-proxy 2>/dev/null || true
  nft delete table ip jr2-netpol 2>/dev/null || true
  nft delete table inet kube-network-policies 2>/dev/null || true
  if [[ -f $NODE_DIR/ip_forward.orig ]]; then sysctl -qw "net.ipv4.ip_forward=$(<"$NODE_DIR/ip_forward.orig")" || true; fi
  node_host_leftovers
  resolv_conf_restore
  if [[ -f $NODE_OWNER_FILE && $(<"$NODE_OWNER_FILE") == "$STATE_DIR" ]]; then rm -f "$NODE_OWNER_FILE"; fi
}

# node_host_leftovers: what the node's processes write outside the state dir, where they cannot be
# told otherwise: the kubelet's /var/log/containers links, CNI's result cache, the NRI socket's dir.
node_host_leftovers() {
  local f d
  for f in /var/log/containers/*.log; do
    [[ -L $f && $(readlink "$f") == "$NODE_DIR"/* ]] && rm -f "$f"
  done
  # CNI's results of our network and of containerd's own loopback one; the fixed-path sockets of
  # the kubelet's device plugins and of NRI (both only ours: one real node per machine).
  rm -f /var/lib/cni/results/"$CNI_NETWORK"-* /var/lib/cni/results/cni-loopback-* 2>/dev/null
  rm -f /var/lib/kubelet/device-plugins/kubelet.sock /run/nri/nri.sock
  # The shims' sockets (fixed dir; a shim killed by node_kill_pods leaves its own behind).
  pgrep -f containerd-shim >/dev/null 2>&1 || rm -f /run/containerd/s/*
  for d in /var/log/containers /var/lib/cni/results /var/lib/cni /run/nri /var/lib/kubelet/device-plugins /var/lib/kubelet \
    /run/containerd/runc/k8s.io /run/containerd/runc /run/containerd/s /run/containerd; do
    rmdir "$d" 2>/dev/null || true
  done
  return 0
}

# This machine resolves <svc>.<ns>.svc through CoreDNS: its address goes first in resolv.conf,
# and CoreDNS forwards every other name to the nameservers that were there.
resolv_conf_add() {
  grep -qxF "$RESOLV_MARK" "$RESOLV_CONF" 2>/dev/null && return 0
  local tmp
  tmp=$(mktemp "$RESOLV_CONF.jr2.XXXXXX")
  { echo "$RESOLV_MARK"; echo "nameserver $NODE_DNS"; cat "$RESOLV_CONF"; } >"$tmp"
  chmod --reference="$RESOLV_CONF" "$tmp" 2>/dev/null || chmod 644 "$tmp"
  # Written in place (not renamed over) in case resolv.conf is a bind mount.
  cat "$tmp" >"$RESOLV_CONF"
  rm -f "$tmp"
}

resolv_conf_restore() {
  grep -qxF "$RESOLV_MARK" "$RESOLV_CONF" 2>/dev/null || return 0
  local rest
  rest=$(awk -v m="$RESOLV_MARK" -v ns="nameserver $NODE_DNS" 'skip && $0 == ns { skip = 0; next } $0 == m { skip = 1; next } { skip = 0; print }' "$RESOLV_CONF")
  printf '%s\n' "$rest" >"$RESOLV_CONF"
}

# upstream_nameservers: the machine's own nameservers (ours left out).
upstream_nameservers() {
  awk -v ours="$NODE_DNS" '$1 == "nameserver" && $2 != ours { printf "%s ", $2 }' "$RESOLV_CONF"
}

# ---------------------------------------------------------------------------------------
# Configuration.

# node_kubeconfig USER FILE: a kubeconfig for USER's client certificate, signed by the cluster CA.
node_kubeconfig() {
  local user=$1 name=$2 group=${3:-} dir="$NODE_DIR/pki" server subj
  mkdir -p "$dir"
  server=$(awk '$1 == "server:" { print $2; exit }' "$KUBECONFIG_PATH")
  subj="/CN=$user"
  [[ -n $group ]] && subj="/O=$group/CN=$user"
  openssl ecparam -name prime256v1 -genkey -noout -out "$dir/$name.key" 2>/dev/null
  openssl req -new -key "$dir/$name.key" -subj "$subj" -out "$dir/$name.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$CLUSTER_DIR/pki/ca.crt" -CAkey "$CLUSTER_DIR/pki/ca.key" \
    -CAcreateserial -days 3650 -out "$dir/$name.crt" 2>/dev/null || return 1
  cat >"$NODE_DIR/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: jr2
  cluster: {server: $server, certificate-authority: $CLUSTER_DIR/pki/ca.crt}
users:
- name: $user
  user: {client-certificate: $dir/$name.crt, client-key: $dir/$name.key}
contexts:
- name: jr2
  context: {cluster: jr2, user: $user}
current-context: jr2
EOF
}

# What CoreDNS and kube-network-policies may read (a ClusterRole of their own instead of admin).
node_rbac() {
  cat <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "jr2:node-services"}
rules:
- apiGroups: [""]
  resources: [pods, namespaces, services, endpoints, nodes]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "jr2:node-services"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "jr2:node-services"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "jr2:node-services"}
EOF
}

# has_cap_sys_resource: this process holds CAP_SYS_RESOURCE (capability 24).
has_cap_sys_resource() {
  local eff
  eff=$(awk '$1 == "CapEff:" { print $2 }' /proc/self/status)
  (((16#${eff:-0} >> 24) & 1))
}

containerd_config() {
  cat <<EOF
# Written by dev/cluster/cluster.sh; see docs/decisions/0040-real-node.md.
version = 3
root = "$NODE_DIR/containerd/root"
state = "$NODE_DIR/containerd/state"

[grpc]
  address = "$CONTAINERD_SOCK"

[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE_DIR/containerd/opt"

[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".registry]
    # The loopback registry is named here as plain HTTP (hosts.toml).
    config_path = "$NODE_DIR/containerd/certs.d"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE_IMAGE"

[plugins."io.containerd.cri.v1.runtime"]
  # Sandboxes' network namespaces under the state dir, so 'down' finds them with the rest.
  netns_mounts_under_state_dir = true
  # Without CAP_SYS_RESOURCE (this VM's root lacks it) no process may lower its oom_score_adj, and
  # runc fails every pod whose kubelet-given score is negative (the sandbox's -998, a Guaranteed
  # pod's -997); containerd then raises such scores to its own (0).
  restrict_oom_score_adj = $(has_cap_sys_resource && echo false || echo true)
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      runtime_path = "$CONTAINERD_BIN/containerd-shim-runc-v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$RUNC_BIN/runc"
        # runc's container state (default /run/containerd/runc) with the rest of the node's.
        Root = "$NODE_DIR/runc"
        SystemdCgroup = false
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.$GVISOR_HANDLER]
      runtime_type = "io.containerd.runsc.v1"
      runtime_path = "$GVISOR_BIN/containerd-shim-runsc-v1"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.$GVISOR_HANDLER.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "$NODE_DIR/containerd/runsc.toml"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$CNI_BIN", "$NODE_GUARD_BIN"]
    conf_dir = "$NODE_DIR/cni"
    max_conf_num = 1

[plugins."io.containerd.nri.v1.nri"]
  # kube-network-policies learns new pods' IPs here before the API server does.
  disable = false
EOF
}

# The shim's own options (read by containerd-shim-runsc-v1), runsc's flags under runsc_config.
runsc_config() {
  cat <<EOF
# Written by dev/cluster/cluster.sh; see docs/decisions/0055-gvisor.md.
binary_name = "$GVISOR_BIN/runsc"
# runsc's container state (default /run/containerd/runsc) with the rest of the node's.
root = "$NODE_DIR/runsc"
[runsc_config]
  platform = "$GVISOR_PLATFORM"
EOF
}

# The RuntimeClass pods name to run under gVisor: scheduled only to nodes labelled as having it,
# and tolerating the real node's taint, since here that node is the only one that has it.
node_runtime_classes() {
  cat <<EOF
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: $GVISOR_RUNTIME_CLASS}
handler: $GVISOR_HANDLER
scheduling:
  nodeSelector: {$GVISOR_NODE_KEY: "$GVISOR_NODE_VALUE"}
  tolerations:
  - {key: $REAL_NODE_KEY, operator: Equal, value: $REAL_NODE_VALUE, effect: NoSchedule}
EOF
}

cni_config() {
  cat <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$NODE_DIR/cni-ipam",
        "ranges": [[{"subnet": "$NODE_POD_CIDR", "gateway": "$NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {
      "type": "jr2-node-guard",
      "nft": "$(command -v nft)",
      "family": "inet",
      "table": "$NFT_TABLE",
      "set": "$NFT_SANDBOX_SET",
      "annotation": "$SANDBOX_ANNOTATION",
      "capabilities": {"io.kubernetes.cri.pod-annotations": true}
    }
  ]
}
EOF
}

kubelet_config() {
  cat <<EOF
# Written by dev/cluster/cluster.sh; see docs/decisions/0040-real-node.md.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1 (hybrid); kubelet 1.35+ runs on it only when told to (it warns).
failCgroupV1: false
cgroupDriver: cgroupfs
# The node's pods live under /jr2 in every cgroup hierarchy, so 'down' finds all of them.
cgroupRoot: /jr2
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $CLUSTER_DIR/pki/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
clusterDNS: [$NODE_DNS]
resolvConf: $NODE_DIR/resolv.conf
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
podLogsDir: $NODE_DIR/pod-logs
volumePluginDir: $NODE_DIR/kubelet/volume-plugins
registerWithTaints:
- {key: $REAL_NODE_KEY, value: $REAL_NODE_VALUE, effect: NoSchedule}
serializeImagePulls: false
# Disk thresholds of a shared development machine: evict only when it is really short.
evictionHard: {memory.available: 100Mi, nodefs.available: 5%, imagefs.available: 5%}
imageGCHighThresholdPercent: 95
imageGCLowThresholdPercent: 90
# Leave this machine's sysctls as they are.
protectKernelDefaults: false
failSwapOn: false
EOF
}

kube_proxy_config() {
  cat <<EOF
# Written by dev/cluster/cluster.sh; see docs/decisions/0040-real-node.md.
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: $REAL_NODE_NAME
clusterCIDR: $CLUSTER_CIDR
clientConnection: {kubeconfig: $NODE_DIR/kube-proxy.kubeconfig}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [$NODE_IP/32]
# 0: leave this machine's conntrack sysctls as they are.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

corefile() {
  cat <<EOF
# Written by dev/cluster/cluster.sh; see docs/decisions/0040-real-node.md.
.:53 {
    bind $NODE_DNS
    errors
    health 127.0.0.1:10254
    ready 127.0.0.1:10255
    # <svc>.<ns>.svc as this machine asks it (no search list): the cluster.local name.
    rewrite name suffix .svc. .svc.cluster.local. answer auto
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $NODE_DIR/node-services.kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    forward . $(upstream_nameservers)
    cache 30
}
# The stand-in public host's names (docs/decisions/0051), answered here: nothing is asked upstream.
egress.example:53 {
    bind $NODE_DNS
    errors
    hosts $NODE_DIR/public.hosts {
        ttl 5
        no_reverse
    }
}
# Forwarded to the stand-in public host, where a test may run a DNS recorder: it sees whether a
# lookup left the cluster. Not cached, so every lookup is seen.
$PUBLIC_DNS_ZONE:53 {
    bind $NODE_DNS
    errors
    forward . $PUBLIC_DNS_IP:53
}
EOF
}

public_hosts_file() {
  printf '%s allowed.egress.example\n%s other.egress.example\n' "$PUBLIC_ALLOWED_IP" "$PUBLIC_OTHER_IP"
}

# ---------------------------------------------------------------------------------------
# Up and down.

# The pod sandbox image: dev/cluster/go/pause in a one-file image on the loopback registry.
PAUSE_IMAGE=""
node_pause_image() { PAUSE_IMAGE="$(registry_addr)/jr2/pause:$PAUSE_FP"; }

# node_mkcgroups: the kubelet's cgroupRoot (/jr2) in every v1 hierarchy (it refuses to start
# without it); a new cpuset cgroup has no CPUs or memory nodes until given its parent's.
node_mkcgroups() {
  local h
  for h in /sys/fs/cgroup/*/; do
    h=${h%/}
    [[ -f $h/cgroup.procs && $h != /sys/fs/cgroup/unified ]] || continue
    mkdir -p "$h/jr2" 2>/dev/null || continue
    if [[ -f $h/cpuset.cpus ]]; then
      cat "$h/cpuset.cpus" >"$h/jr2/cpuset.cpus"
      cat "$h/cpuset.mems" >"$h/jr2/cpuset.mems"
    fi
  done
}

# node_kill_pods: every process in the node's cgroups (the pods' containers), then the shims.
node_kill_pods() {
  local f pid i left
  for ((i = 0; i < 50; i++)); do
    left=""
    for f in /sys/fs/cgroup/pids/jr2 /sys/fs/cgroup/memory/jr2 /sys/fs/cgroup/jr2; do
      [[ -d $f ]] || continue
      while IFS= read -r pid; do
        [[ -n $pid ]] || continue
        kill -KILL "$pid" 2>/dev/null && left+=" $pid"
      done < <(find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null)
    done
    [[ -z $left ]] && break
    sleep 0.1
  done
  # Shims are started by containerd with its address on their command line.
  for pid in $(pgrep -f "containerd-shim-(runc-v2|runsc-v1) .*-address $CONTAINERD_SOCK" 2>/dev/null); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  for ((i = 0; i < 50; i++)); do
    pgrep -f "containerd-shim-(runc-v2|runsc-v1) .*-address $CONTAINERD_SOCK" >/dev/null 2>&1 || break
    sleep 0.1
  done
}

node_rm_cgroups() {
  local h
  for h in /sys/fs/cgroup/*/jr2 /sys/fs/cgroup/jr2; do
    [[ -d $h ]] || continue
    find "$h" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

# node_unmount: every mount under the state dir (rootfs overlays, shm, netns, volumes), deepest first.
node_unmount() {
  local m i
  for ((i = 0; i < 3; i++)); do
    mapfile -t mounts < <(awk -v d="$STATE_DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
    ((${#mounts[@]})) || return 0
    for m in "${mounts[@]}"; do
      m=$(printf '%b' "$m") # mountinfo escapes spaces as \040
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
  done
}

# node_stop: stop the node's processes and pods; unmount and remove what they left (not the network).
node_stop() {
  local c
  stop_component kubelet
  node_kill_pods
  for c in kube-network-policies kube-proxy coredns containerd; do stop_component "$c"; done
  node_unmount
  node_rm_cgroups
  # The pods' addresses were freed with their network namespaces.
  rm -rf "$NODE_DIR/cni-ipam" "$NODE_DIR/fingerprint"
}

# node_down: stop the node and undo all it did to this machine. Safe on any state, e.g. after a crash.
node_down() {
  [[ -d $NODE_DIR || -f $NODE_STATUS_FILE ]] || ip link show "$NODE_BRIDGE" >/dev/null 2>&1 || return 0
  node_stop
  node_network_down
}

# What the running node was started from (binaries and this file); a change restarts it.
node_fingerprint() {
  { printf '%s ' "$KUBE_FP" "$CONTAINERD_FP" "$RUNC_FP" "$CNI_FP" "$COREDNS_FP" "$NETPOL_FP" "$PAUSE_FP" "$NODE_GUARD_FP" "$GVISOR_FP"
    cat "${BASH_SOURCE[0]}"; } | sha256sum | cut -c1-16
}
node_current() { [[ -f $NODE_DIR/fingerprint && $(<"$NODE_DIR/fingerprint") == "$(node_fingerprint)" ]]; }

node_registered() { k get node "$REAL_NODE_NAME" >/dev/null 2>&1; }
node_ready() {
  [[ $(k get node "$REAL_NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}
dns_answers() {
  # kubernetes.default's ClusterIP through CoreDNS, as a pod would ask.
  getent ahostsv4 kubernetes.default.svc 2>/dev/null | grep -q "^$API_SERVICE_IP "
}
nft_table_exists() { nft list table "$@" >/dev/null 2>&1; }
containerd_up() { [[ -S $CONTAINERD_SOCK ]]; }

# node_components_alive: every node process runs (and so the node was started by this state).
node_components_alive() {
  local c
  for c in "${NODE_COMPONENTS[@]}"; do component_alive "$c" || return 1; done
}

# node_healthy: up as started, Ready, with its Services and DNS answering.
node_healthy() {
  node_mode_on && node_components_alive && node_ready && nft_table_exists ip kube-proxy && nft_table_exists ip jr2-netpol
}

node_step() { echo "$1" >"$NODE_DIR/step"; }

node_start() {
  mkdir -p "$NODE_DIR"/{containerd/certs.d,cni,cni-ipam,pod-logs,kubelet}
  local reg
  reg=$(registry_addr)
  node_pause_image
  mkdir -p "$NODE_DIR/containerd/certs.d/$reg"
  cat >"$NODE_DIR/containerd/certs.d/$reg/hosts.toml" <<EOF
# The loopback registry speaks plain HTTP (it is reachable from this machine only).
server = "http://$reg"
[host."http://$reg"]
  capabilities = ["pull", "resolve"]
EOF
  containerd_config >"$NODE_DIR/containerd/config.toml"
  runsc_config >"$NODE_DIR/containerd/runsc.toml"
  cni_config >"$NODE_DIR/cni/10-$CNI_NETWORK.conflist"
  echo "nameserver $NODE_DNS" >"$NODE_DIR/resolv.conf"
  kubelet_config >"$NODE_DIR/kubelet-config.yaml"
  kube_proxy_config >"$NODE_DIR/kube-proxy.yaml"
  corefile >"$NODE_DIR/Corefile"
  public_hosts_file >"$NODE_DIR/public.hosts"
  node_step "signing the node's client certificates (openssl)"
  node_kubeconfig "system:node:$REAL_NODE_NAME" kubelet system:nodes || return 1
  node_kubeconfig system:kube-proxy kube-proxy || return 1
  node_kubeconfig "jr2:node-services" node-services || return 1
  node_step "the node's RBAC"; node_rbac | k apply -f - >/dev/null || return 1
  node_step "pushing the pod sandbox image $PAUSE_IMAGE"; node_push_pause || return 1
  node_mkcgroups

  component_alive containerd ||
    start_component containerd "$NODE_DIR" "$CONTAINERD_BIN/containerd" --config "$NODE_DIR/containerd/config.toml"
  node_step "containerd's socket"; wait_for "containerd's socket" containerd_up
  component_alive kube-network-policies ||
    start_component kube-network-policies "$NODE_DIR" "$NETPOL_BIN/kube-network-policies" \
      --kubeconfig "$NODE_DIR/node-services.kubeconfig" --hostname-override "$REAL_NODE_NAME" --pod-cidr "$NODE_POD_CIDR"
  component_alive kube-proxy ||
    start_component kube-proxy "$NODE_DIR" "$KUBE_BIN/kube-proxy" --config "$NODE_DIR/kube-proxy.yaml"
  component_alive coredns ||
    start_component coredns "$NODE_DIR" "$COREDNS_BIN/coredns" -conf "$NODE_DIR/Corefile"
  component_alive kubelet ||
    start_component kubelet "$NODE_DIR" "$KUBE_BIN/kubelet" --config "$NODE_DIR/kubelet-config.yaml" \
      --kubeconfig "$NODE_DIR/kubelet.kubeconfig" --root-dir "$NODE_DIR/kubelet" --cert-dir "$NODE_DIR/kubelet/pki" \
      --hostname-override "$REAL_NODE_NAME" --node-ip "$NODE_IP" --node-labels "$REAL_NODE_LABEL,$GVISOR_NODE_KEY=$GVISOR_NODE_VALUE"
  node_step "the kubelet registering node $REAL_NODE_NAME"
  wait_for "node $REAL_NODE_NAME registered" node_registered
  # The pod CIDR is set once (the API server refuses a change); the kubelet does not set it.
  if [[ -z $(k get node "$REAL_NODE_NAME" -o jsonpath='{.spec.podCIDR}') ]]; then
    k patch node "$REAL_NODE_NAME" --type merge \
      -p "{\"spec\":{\"podCIDR\":\"$NODE_POD_CIDR\",\"podCIDRs\":[\"$NODE_POD_CIDR\"]}}" >/dev/null || return 1
  fi
  # --node-labels is applied when the kubelet registers the node only; a node registered before
  # gained it is labelled here.
  k label node "$REAL_NODE_NAME" --overwrite "$GVISOR_NODE_KEY=$GVISOR_NODE_VALUE" >/dev/null || return 1
  node_step "the RuntimeClass $GVISOR_RUNTIME_CLASS"; node_runtime_classes | k apply -f - >/dev/null || return 1
  node_step "node $REAL_NODE_NAME turning Ready"; wait_for "node $REAL_NODE_NAME Ready" node_ready
  node_step "kube-proxy's rules"; wait_for "kube-proxy's rules (nft table ip kube-proxy)" nft_table_exists ip kube-proxy
  node_step "kube-network-policies' rules"; wait_for "kube-network-policies' rules (nft table ip jr2-netpol)" nft_table_exists ip jr2-netpol
  resolv_conf_add
  node_step "CoreDNS answering kubernetes.default.svc"; wait_for "CoreDNS to answer kubernetes.default.svc" dns_answers
}

# node_push_pause: the pod sandbox image, made by crane from dev/cluster/go/pause and pushed to the
# loopback registry. Nothing is pulled from outside this machine.
node_push_pause() {
  local crane="$CRANE_BIN/crane" dir="$NODE_DIR/pause"
  if "$crane" digest --insecure "$PAUSE_IMAGE" >/dev/null 2>&1; then return 0; fi
  mkdir -p "$dir/rootfs"
  cp "$PAUSE_BIN/pause" "$dir/rootfs/pause"
  tar -C "$dir/rootfs" --owner=0 --group=0 --numeric-owner --mtime='2026-01-01 00:00:00' -cf "$dir/layer.tar" pause
  "$crane" append --insecure --oci-empty-base -f "$dir/layer.tar" -t "$PAUSE_IMAGE" >/dev/null 2>&1 ||
    { log "crane append of $PAUSE_IMAGE failed"; return 1; }
  "$crane" mutate --insecure "$PAUSE_IMAGE" --entrypoint /pause --user 65535:65535 -t "$PAUSE_IMAGE" >/dev/null 2>&1 ||
    { log "crane mutate of $PAUSE_IMAGE failed"; return 1; }
}

# node_up: pre-flight, build, network, processes. On any failure: say which, undo, kwok only.
# Runs after the control plane is up (its CA signs the node's certificates).
node_up() {
  local start=$SECONDS
  # In a subshell: a failed wait (die) ends node_start, not 'up'. Its last step names what failed.
  if ! (node_start); then
    node_dump_logs
    node_stop
    node_network_down
    node_off "the node did not come up: $(cat "$NODE_DIR/step" 2>/dev/null || echo 'see above') failed (logs: $CLUSTER_DIR/logs)"
    return 0
  fi
  echo up >"$NODE_STATUS_FILE"
  node_fingerprint >"$NODE_DIR/fingerprint"
  log "real node $REAL_NODE_NAME Ready in $((SECONDS - start))s (pod CIDR $NODE_POD_CIDR, DNS $NODE_DNS, registry $(registry_addr))"
}

node_dump_logs() {
  local c
  for c in "${NODE_COMPONENTS[@]}"; do
    [[ -f $CLUSTER_DIR/logs/$c.log ]] || continue
    log "--- tail of $CLUSTER_DIR/logs/$c.log"
    tail -n 8 "$CLUSTER_DIR/logs/$c.log" >&2
  done
}
