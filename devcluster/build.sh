#!/usr/bin/env bash
# Builds the local cluster's binaries from Go modules, once per set of pinned versions.
# Output: $GPUAAS_CACHE/cluster-bin/<key>/{etcd,kube-apiserver,kube-controller-manager,
#         kube-scheduler,kubectl,kwok,kueue} plus kueue-config/ (CRDs, webhooks, RBAC of Kueue).
# The cache lives outside the clone so that a fresh clone (CI) reuses it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

cache=${GPUAAS_CACHE:-$HOME/.cache/jupyter-gpuaas}
key="k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_kueue-${KUEUE_VERSION}"
out="$cache/cluster-bin/$key"
work="$cache/build/$key"
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local

fail() {
  echo "devcluster build: $1 failed." >&2
  echo "  Rerun with: make cluster-build   (log: $work/build.log)" >&2
  exit 1
}
command -v go >/dev/null || { echo "devcluster build: Go is not installed (need Go >= 1.25 on PATH)." >&2; exit 1; }

if [ -f "$out/.complete" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$out" "$work"
exec 3>&2
log="$work/build.log"
: >"$log"
step() { echo "devcluster build: $1 ..." >&3; }

minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
staging_version="v0.${KUBERNETES_VERSION#v1.}"

# --- Kubernetes: a wrapper module replacing each staging module by its published version.
if [ ! -x "$out/kubectl" ]; then
  step "resolving k8s.io/kubernetes@$KUBERNETES_VERSION"
  mkdir -p "$work/k8s"
  cd "$work/k8s"
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" 2>>"$log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])') || fail "downloading k8s.io/kubernetes"
  {
    echo "module local/k8sbuild"
    echo "go 1.25"
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    grep -E '^\s*k8s.io/[a-z0-9-]+ => \./staging/' "$gomod" | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
  } >go.mod
  printf 'package main\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver/app"\nfunc main() {}\n' >tools.go
  go mod tidy >>"$log" 2>&1 || fail "resolving the Kubernetes modules"
  rm tools.go
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    [ -x "$out/$cmd" ] && continue
    step "building $cmd $KUBERNETES_VERSION"
    go build -trimpath -ldflags "$ldflags" -o "$out/$cmd" "k8s.io/kubernetes/cmd/$cmd" >>"$log" 2>&1 || fail "building $cmd"
  done
fi

# --- etcd: its server module has replace directives, so it also needs a wrapper module.
if [ ! -x "$out/etcd" ]; then
  step "building etcd $ETCD_VERSION"
  mkdir -p "$work/etcd"
  cd "$work/etcd"
  printf 'module local/etcdbuild\ngo 1.25\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >go.mod
  printf 'package main\nimport _ "go.etcd.io/etcd/server/v3/etcdmain"\nfunc main() {}\n' >tools.go
  go mod tidy >>"$log" 2>&1 || fail "resolving the etcd modules"
  rm tools.go
  go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3 >>"$log" 2>&1 || fail "building etcd"
fi

# --- kwok and Kueue install directly from the module proxy.
if [ ! -x "$out/kwok" ]; then
  step "building kwok $KWOK_VERSION"
  GOBIN="$out" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >>"$log" 2>&1 || fail "building kwok"
fi
if [ ! -x "$out/kueue" ]; then
  step "building kueue $KUEUE_VERSION"
  GOBIN="$out" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" >>"$log" 2>&1 || fail "building kueue"
fi
if [ ! -d "$out/kueue-config" ]; then
  dir=$(cd "$work" && go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" 2>>"$log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') || fail "downloading Kueue's manifests"
  cp -r "$dir/config/components" "$out/kueue-config"
  chmod -R u+w "$out/kueue-config"
fi
touch "$out/.complete"
echo "$out"
