#!/usr/bin/env bash
# Builds cosign from the Go module pinned in dev/cluster/go/cosign (decision 0073) and prints the
# binary's path. Cached by version and by a fingerprint of go.mod and go.sum under
# ${JR2_CACHE_DIR:-~/.cache/jr2}/bin/cosign-<version>/, as dev/helm.sh caches helm, so a warm call
# does not invoke Go; one build at a time (a release and a test may both ask).
#
#   scripts/release/cosign.sh          build if needed, print the path of cosign
#   scripts/release/cosign.sh version  print the pinned version
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MOD_DIR="$HERE/../../dev/cluster/go/cosign"

die() { printf 'cosign.sh: error: %s\n' "$*" >&2; exit 1; }
log() { printf 'cosign.sh: %s\n' "$*" >&2; }

: "${HOME:?HOME must be set (or set JR2_CACHE_DIR)}"
CACHE_DIR=${JR2_CACHE_DIR:-$HOME/.cache/jr2}
VERSION=$(awk '($1 == "github.com/sigstore/cosign/v3" && $2 ~ /^v/) { print $2; exit }' "$MOD_DIR/go.mod")
[[ -n $VERSION ]] || die "cannot read the pinned github.com/sigstore/cosign/v3 version from $MOD_DIR/go.mod"

if [[ ${1:-} == version ]]; then printf '%s\n' "$VERSION"; exit 0; fi
[[ $# -eq 0 ]] || die "usage: scripts/release/cosign.sh [version]"

OUT="$CACHE_DIR/bin/cosign-$VERSION"
# `cosign version` reports what ldflags set; fixed values, so the same sources give the same binary.
LDFLAGS="-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$VERSION -X sigs.k8s.io/release-utils/version.gitTreeState=clean"
FP=$({ cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum"; printf '%s' "$LDFLAGS"; } | sha256sum | cut -c1-16)
STAMP="$OUT/.cosign.fingerprint"

if [[ -x $OUT/cosign && -f $STAMP && $(<"$STAMP") == "$FP" ]]; then
  printf '%s\n' "$OUT/cosign"
  exit 0
fi

command -v go >/dev/null 2>&1 || die "'go' not found on PATH; Go 1.26 or newer builds cosign"
mkdir -p "$OUT"
exec 9>"$OUT/.build.lock"
flock 9
if [[ -x $OUT/cosign && -f $STAMP && $(<"$STAMP") == "$FP" ]]; then
  printf '%s\n' "$OUT/cosign"
  exit 0
fi
tmp="$OUT/.cosign.tmp.$$"
trap 'rm -f "$tmp"' EXIT
start=$SECONDS
log "building cosign $VERSION (the first build takes minutes) ..."
# Static, no local paths, no go.work from further up: as dev/helm.sh and cluster.sh build.
(cd "$MOD_DIR" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "$LDFLAGS" -o "$tmp" github.com/sigstore/cosign/v3/cmd/cosign) ||
  die "building cosign failed (see go output above)"
mv -f "$tmp" "$OUT/cosign"
printf '%s\n' "$FP" >"$STAMP.tmp" && mv -f "$STAMP.tmp" "$STAMP"
log "built cosign $VERSION in $((SECONDS - start))s"
printf '%s\n' "$OUT/cosign"
