#!/usr/bin/env bash
# Prints the absolute path of jr2-confine (effector/confine/, the Effector's Landlock confinement,
# decision 0070), building it first when it is not cached.
#
#   scripts/confine-binary.sh
#
# Cached as $JR2_CACHE_DIR/bin/jr2-confine-<fingerprint> (default ~/.cache/jr2), the fingerprint the
# first 16 hex digits of the sha256 of the module's go.mod, go.sum and .go files: a change to any
# builds a new binary beside the old. Built as dev/cluster/cluster.sh builds its Go binaries: static
# (CGO_ENABLED=0), -trimpath, GOWORK=off, to a temporary file renamed into place (an interrupted
# build leaves nothing half-written); and with no build id and no VCS stamp (a commit or a dirty
# tree would change the bytes), so the same sources give the same bytes wherever they are built.
# Modules come through the machine's own Go configuration (GOPROXY, GOFLAGS); go.sum checks them.
# Progress goes to stderr so stdout is the path alone.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
MODULE_DIR="$HERE/../effector/confine"
MODULE_DIR=$(cd "$MODULE_DIR" && pwd -P)

log() { printf 'confine-binary: %s\n' "$*" >&2; }
die() { printf 'confine-binary: error: %s\n' "$*" >&2; exit 1; }

# abs PATH: absolute form of PATH without requiring it to exist.
abs() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s/%s\n' "$PWD" "$1" ;; esac; }

: "${HOME:?HOME must be set (or set JR2_CACHE_DIR)}"
CACHE_DIR=$(abs "${JR2_CACHE_DIR:-$HOME/.cache/jr2}")
BIN_DIR="$CACHE_DIR/bin"

# fingerprint: each input file's name and content, in a fixed order (the test files too: cheap, and
# a test-only change is then still a new name rather than a silent reuse).
fingerprint() {
  local f
  (
    cd "$MODULE_DIR"
    for f in go.mod go.sum $(LC_ALL=C ls -- *.go); do
      printf '%s\n' "$f"
      cat -- "$f"
    done
  ) | sha256sum | cut -c1-16
}

FP=$(fingerprint)
OUT="$BIN_DIR/jr2-confine-$FP"
if [[ -x $OUT ]]; then
  printf '%s\n' "$OUT"
  exit 0
fi

command -v go >/dev/null 2>&1 ||
  die "'go' not found on PATH. Install Go 1.26 or newer (the official Go distribution), then rerun."
mkdir -p "$BIN_DIR"
tmp="$BIN_DIR/.jr2-confine-$FP.tmp.$$"
trap 'rm -f "$tmp"' EXIT
start=$SECONDS
log "building jr2-confine ($FP) ..."
if ! (cd "$MODULE_DIR" && CGO_ENABLED=0 GOWORK=off go build -trimpath -buildvcs=false -ldflags "-s -w -buildid=" -o "$tmp" .); then
  die "building jr2-confine failed (see go output above)"
fi
chmod 0755 "$tmp"
mv -f "$tmp" "$OUT"
log "built $OUT in $((SECONDS - start))s"
printf '%s\n' "$OUT"
