#!/usr/bin/env bash
# Builds helm from the Go module pinned in dev/cluster/go/helm (decision 0060) and prints the
# binary's path. Cached by version and by a fingerprint of go.mod and go.sum under
# ${JR2_CACHE_DIR:-~/.cache/jr2}/bin/helm-<version>/, as dev/cluster/cluster.sh caches its
# binaries, so a warm call does not invoke Go. Its own script so that building it never changes
# dev/cluster/ files that decide whether the shared real node restarts.
#
#   dev/helm.sh          build if needed, print the path of helm
#   dev/helm.sh version  print the pinned version
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MOD_DIR="$HERE/cluster/go/helm"

die() { printf 'helm.sh: error: %s\n' "$*" >&2; exit 1; }
log() { printf 'helm.sh: %s\n' "$*" >&2; }

: "${HOME:?HOME must be set (or set JR2_CACHE_DIR)}"
CACHE_DIR=${JR2_CACHE_DIR:-$HOME/.cache/jr2}
VERSION=$(awk '($1 == "helm.sh/helm/v4" && $2 ~ /^v/) { print $2; exit }' "$MOD_DIR/go.mod")
[[ -n $VERSION ]] || die "cannot read the pinned helm.sh/helm/v4 version from $MOD_DIR/go.mod"

if [[ ${1:-} == version ]]; then printf '%s\n' "$VERSION"; exit 0; fi
[[ $# -eq 0 ]] || die "usage: dev/helm.sh [version]"

OUT="$CACHE_DIR/bin/helm-$VERSION"
# Without the -X flag, `helm version` reports a development version (and the charts' own
# kubeVersion checks see it); the values are fixed so the same sources give the same binary.
LDFLAGS="-s -w -X helm.sh/helm/v4/internal/version.version=$VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
FP=$({ cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum"; printf '%s' "$LDFLAGS"; } | sha256sum | cut -c1-16)
STAMP="$OUT/.helm.fingerprint"

if [[ -x $OUT/helm && -f $STAMP && $(<"$STAMP") == "$FP" ]]; then
  printf '%s\n' "$OUT/helm"
  exit 0
fi

command -v go >/dev/null 2>&1 || die "'go' not found on PATH; Go 1.26 or newer builds helm"
mkdir -p "$OUT"
# One build at a time (the build and a test may both ask); a waiter finds the binary made.
exec 9>"$OUT/.build.lock"
flock 9
if [[ -x $OUT/helm && -f $STAMP && $(<"$STAMP") == "$FP" ]]; then
  printf '%s\n' "$OUT/helm"
  exit 0
fi
tmp="$OUT/.helm.tmp.$$"
trap 'rm -f "$tmp"' EXIT
start=$SECONDS
log "building helm $VERSION ..."
# Same flags as cluster.sh's build: static, no local paths, no go.work from further up.
(cd "$MOD_DIR" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "$LDFLAGS" -o "$tmp" helm.sh/helm/v4/cmd/helm) ||
  die "building helm failed (see go output above)"
mv -f "$tmp" "$OUT/helm"
printf '%s\n' "$FP" >"$STAMP.tmp" && mv -f "$STAMP.tmp" "$STAMP"
log "built helm $VERSION in $((SECONDS - start))s"
printf '%s\n' "$OUT/helm"
