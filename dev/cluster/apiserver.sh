#!/usr/bin/env bash
# A lone API server of another Kubernetes version, beside the local cluster and apart from it: its
# own etcd (the cluster's cached etcd binary, its own data directory and ports), its own CA and
# state directory, no controllers, no nodes. For admission on an older API server
# (docs/decisions/0059-kubernetes-1-34.md): the module runs on this machine against it as it does
# against the cluster.
#
#   dev/cluster/apiserver.sh up [MODULE]    build what is missing, start afresh; last stdout line:
#                                           KUBECONFIG=<absolute path>   (MODULE default kube-1.34)
#   dev/cluster/apiserver.sh down [MODULE]  stop its etcd and API server (by their recorded pids),
#                                           remove its state
#
# The binaries come from `cluster.sh binary` (cached by version under $JR2_CACHE_DIR/bin; a cold
# build of kube-apiserver takes minutes, a warm one nothing). The state is
# $JR2_CACHE_DIR/apiserver-<MODULE>/ (JR2_APISERVER_STATE_DIR overrides). Ports: the first free of
# 26443+100k (API server) and 26479+100k, 26480+100k (etcd), k = 0..9; JR2_APISERVER_PORT_BASE
# moves the base. Needs openssl. Progress goes to stderr.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
log() { printf 'apiserver: %s\n' "$*" >&2; }
die() { printf 'apiserver: error: %s\n' "$*" >&2; exit 1; }

cmd=${1:-}
MODULE=${2:-kube-1.34}
[[ $MODULE =~ ^kube(-[0-9.]+)?$ ]] || die "MODULE must be a wrapper module under dev/cluster/go (e.g. kube-1.34)"
: "${HOME:?HOME must be set (or set JR2_CACHE_DIR)}"
CACHE_DIR=${JR2_CACHE_DIR:-$HOME/.cache/jr2}
STATE_DIR=${JR2_APISERVER_STATE_DIR:-$CACHE_DIR/apiserver-$MODULE}
PORT_BASE=${JR2_APISERVER_PORT_BASE:-26400}
[[ $PORT_BASE =~ ^[0-9]+$ ]] || die "JR2_APISERVER_PORT_BASE must be a number"

# alive PIDFILE: the recorded process still runs.
alive() { [[ -f $1 ]] && kill -0 "$(<"$1")" 2>/dev/null; }

# stop PIDFILE: TERM, then KILL after 10 s, the one process recorded there.
stop() {
  local f=$1 pid i
  [[ -f $f ]] || return 0
  pid=$(<"$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

cmd_down() {
  stop "$STATE_DIR/apiserver.pid"
  stop "$STATE_DIR/etcd.pid"
  # Only a directory this script made (its marker), never whatever a mistyped variable names.
  if [[ -f $STATE_DIR/.jr2-apiserver-state ]]; then rm -rf "$STATE_DIR"; fi
  log "$MODULE is down"
}

# free PORT: nothing listens on 127.0.0.1:PORT.
free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

choose_ports() {
  local k
  for ((k = 0; k < 10; k++)); do
    API_PORT=$((PORT_BASE + 43 + 100 * k))
    ETCD_PORT=$((PORT_BASE + 79 + 100 * k))
    PEER_PORT=$((PORT_BASE + 80 + 100 * k))
    free "$API_PORT" && free "$ETCD_PORT" && free "$PEER_PORT" && return 0
  done
  die "no free ports from $PORT_BASE (tried ten sets); set JR2_APISERVER_PORT_BASE"
}

# The CA (its key beside its certificate, as dev/operator-identity.ts looks for it), the serving
# certificate for 127.0.0.1, an admin client certificate (system:masters), the service-account key.
make_pki() {
  local d=$STATE_DIR/pki
  mkdir -p "$d"
  command -v openssl >/dev/null 2>&1 || die "openssl not found: apt-get install -y openssl"
  (
    cd "$d"
    # RSA for the CA: dev/operator-identity.ts signs the operator's certificate with node-forge, which reads RSA keys only.
    openssl genrsa -out ca.key 2048 2>/dev/null
    openssl req -x509 -new -key ca.key -subj "/CN=jr2-$MODULE-ca" -days 30 -out ca.crt 2>/dev/null
    openssl ecparam -name prime256v1 -genkey -noout -out serving.key 2>/dev/null
    openssl req -new -key serving.key -subj "/CN=kube-apiserver" -out serving.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >serving.ext
    openssl x509 -req -in serving.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
      -extfile serving.ext -out serving.crt 2>/dev/null
    openssl ecparam -name prime256v1 -genkey -noout -out admin.key 2>/dev/null
    openssl req -new -key admin.key -subj "/O=system:masters/CN=jr2-admin" -out admin.csr 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' >admin.ext
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
      -extfile admin.ext -out admin.crt 2>/dev/null
    openssl ecparam -name prime256v1 -genkey -noout -out sa.key 2>/dev/null
    openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
    chmod 600 ./*.key
  ) || die "making the certificates in $d failed"
}

write_kubeconfig() {
  cat >"$STATE_DIR/kubeconfig.yaml" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $MODULE
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $STATE_DIR/pki/ca.crt
users:
- name: jr2-admin
  user:
    client-certificate: $STATE_DIR/pki/admin.crt
    client-key: $STATE_DIR/pki/admin.key
contexts:
- name: $MODULE
  context: { cluster: $MODULE, user: jr2-admin }
current-context: $MODULE
EOF
  chmod 600 "$STATE_DIR/kubeconfig.yaml"
}

# wait_ready URL WHAT SECONDS: polls until the URL answers 200 (with the admin's certificate).
wait_ready() {
  local url=$1 what=$2 deadline=$((SECONDS + $3))
  local pki=$STATE_DIR/pki
  until curl -fsS --max-time 2 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$url" >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then
      tail -n 30 "$STATE_DIR/$what.log" >&2 || true
      die "$what did not answer $url within $3 s (log: $STATE_DIR/$what.log)"
    fi
    alive "$STATE_DIR/$what.pid" || { tail -n 30 "$STATE_DIR/$what.log" >&2 || true; die "$what exited (log: $STATE_DIR/$what.log)"; }
    sleep 0.3
  done
}

cmd_up() {
  local start=$SECONDS etcd apiserver
  etcd=$(bash "$HERE/cluster.sh" binary etcd) || die "no etcd binary"
  apiserver=$(bash "$HERE/cluster.sh" binary kube-apiserver "$MODULE") || die "no kube-apiserver from $MODULE"
  command -v curl >/dev/null 2>&1 || die "curl not found: apt-get install -y curl"
  # Afresh each time: what a test leaves in a lone API server is of no use to the next run.
  cmd_down 2>/dev/null
  mkdir -p "$STATE_DIR"
  touch "$STATE_DIR/.jr2-apiserver-state"
  choose_ports
  make_pki
  # setsid: its own session, so a terminal's signals or a test runner's process group leave it be;
  # `down` stops it by its pid.
  setsid "$etcd" --name "jr2-$MODULE" --data-dir "$STATE_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
    --initial-cluster "jr2-$MODULE=http://127.0.0.1:$PEER_PORT" \
    --listen-metrics-urls "" --log-level warn \
    </dev/null >"$STATE_DIR/etcd.log" 2>&1 &
  echo $! >"$STATE_DIR/etcd.pid"
  local pki=$STATE_DIR/pki
  # The default admission plugins (MutatingAdmissionWebhook, ValidatingAdmissionWebhook among
  # them) but ServiceAccount: with no controller-manager no namespace gets its default account,
  # and the operator's pod creates would be refused for it before any webhook is asked.
  setsid "$apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --tls-cert-file "$pki/serving.crt" --tls-private-key-file "$pki/serving.key" \
    --client-ca-file "$pki/ca.crt" --authorization-mode RBAC \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc \
    --service-cluster-ip-range 10.96.0.0/16 --allow-privileged=true \
    --disable-admission-plugins ServiceAccount \
    --cert-dir "$STATE_DIR/cert-dir" \
    </dev/null >"$STATE_DIR/apiserver.log" 2>&1 &
  echo $! >"$STATE_DIR/apiserver.pid"
  wait_ready "https://127.0.0.1:$API_PORT/readyz" apiserver 120
  write_kubeconfig
  log "$MODULE ($("$apiserver" --version 2>/dev/null)) up on 127.0.0.1:$API_PORT in $((SECONDS - start))s"
  echo "KUBECONFIG=$STATE_DIR/kubeconfig.yaml"
}

case $cmd in
  up) cmd_up ;;
  down) cmd_down ;;
  *) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
