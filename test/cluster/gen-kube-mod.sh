#!/usr/bin/env bash
# Writes a wrapper Go module that builds Kubernetes commands from k8s.io/kubernetes at one tag.
#
#   test/cluster/gen-kube-mod.sh VERSION DIR COMMAND...
#   e.g. test/cluster/gen-kube-mod.sh v1.34.4 dev/cluster/go/kube-1.34 kube-apiserver
#
# Why a wrapper: k8s.io/kubernetes replaces its staging modules with ./staging/..., which
# `go install` refuses, so the wrapper requires it and pins each staging module to its published
# v0.MINOR.PATCH tag (docs/decisions/0002-local-control-plane.md). The staging list is read from
# the tag's own go.mod, so a new or dropped staging module needs no edit here. The `godebug`
# default follows the tag's go.mod: the binary behaves as the upstream release does.
set -euo pipefail

(($# >= 3)) || { echo "usage: $0 VERSION DIR COMMAND..." >&2; exit 2; }
version=$1 dir=$2
shift 2
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "VERSION must look like v1.34.4" >&2; exit 2; }
staging_version="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"

mkdir -p "$dir"
cd "$dir"
export GOWORK=off GOFLAGS=-mod=mod

upstream=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f $upstream ]] || { echo "cannot download k8s.io/kubernetes@$version's go.mod" >&2; exit 1; }
go_line=$(awk '$1 == "go" { print $2; exit }' "$upstream")
godebug=$(awk '$1 == "godebug" { print $2; exit }' "$upstream")
mapfile -t staging < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "$upstream" | sort)
((${#staging[@]} > 0)) || { echo "no staging modules in k8s.io/kubernetes@$version's go.mod" >&2; exit 1; }

{
  echo "// Wrapper module: builds Kubernetes commands from k8s.io/kubernetes at a pinned tag."
  echo "// go install refuses k8s.io/kubernetes (its replace directives point at ./staging), so this module"
  echo "// requires it and pins each staging module to the matching published tag. Regenerate with"
  echo "// test/cluster/gen-kube-mod.sh; see docs/decisions/0002-local-control-plane.md."
  echo "module jr2.dev/cluster/kube-${version#v}"
  echo
  echo "go $go_line"
  echo
  [[ -n $godebug ]] && { echo "godebug $godebug"; echo; }
  echo "require k8s.io/kubernetes $version"
  echo
  echo "replace ("
  for m in "${staging[@]}"; do printf '\t%s => %s %s\n' "$m" "$m" "$staging_version"; done
  echo ")"
  echo
  echo "tool ("
  for c in "$@"; do printf '\tk8s.io/kubernetes/cmd/%s\n' "$c"; done
  echo ")"
} >go.mod
rm -f go.sum
go mod tidy
echo "wrote $dir/go.mod for k8s.io/kubernetes $version (${#staging[@]} staging modules at $staging_version)" >&2
