#!/usr/bin/env bash
# Builds the local cluster's binaries from Go modules, once per set of pinned versions.
# Output: $GPUAAS_CACHE/cluster-bin/<key>/{etcd,kube,kwok,kueue} (kube-apiserver,
#         kube-controller-manager, kube-scheduler and kubectl link to kube) plus kueue-config/
#         (Kueue's config/ tree: CRDs, RBAC, webhooks, visibility; rendered at start with
#         `kubectl kustomize kueue-config/default`).
# The cache lives outside the clone so that a fresh clone (CI) reuses it. Each step's wall time
# is printed when it ends, and the total at the end; they also go to
# $GPUAAS_CACHE/build/<key>/timings.tsv (read by benchmarks/bench_cluster.py).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

cache=${GPUAAS_CACHE:-$HOME/.cache/jupyter-gpuaas}
key="k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_kueue-${KUEUE_VERSION}"
out="$cache/cluster-bin/$key"
work="$cache/build/$key"
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local

complete() { [ -f "$out/.complete" ] && [ -f "$out/kueue-config/default/kustomization.yaml" ]; }
if complete; then
  echo "$out"
  exit 0
fi

fail() {
  echo "devcluster build: $1 failed." >&2
  echo "  Rerun with: make cluster-build   (log: $work/build.log)" >&2
  exit 1
}
command -v go >/dev/null || { echo "devcluster build: Go is not installed (need Go >= 1.26 on PATH, for kwok; see https://go.dev/dl/). Rerun with: make cluster-build" >&2; exit 1; }
gov=$(go env GOVERSION 2>/dev/null || true); gov=${gov#go}
case "$gov" in
  1.2[6-9]*|1.[3-9][0-9]*|[2-9].*) ;;
  *) echo "devcluster build: Go $gov is too old (kwok $KWOK_VERSION needs Go >= 1.26). Install a newer Go, then rerun: make cluster-build" >&2; exit 1 ;;
esac

mkdir -p "$out" "$work"
# One build at a time per cache (make cluster-build and a test session may race).
exec 9>"$work/.lock"
if ! flock -n 9; then
  echo "devcluster build: another build of $key is running; waiting for it ..." >&2
  flock 9
fi
if complete; then
  echo "$out"
  exit 0
fi
exec 3>&2
log="$work/build.log"
timings="$work/timings.tsv"
: >"$log"
printf 'step\tstart_epoch\tend_epoch\n' >"$timings"
t_all=$(date +%s)
t_step=""; name_step=""
took() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
# Ends the step under way (its time printed and recorded) and starts the next ("" for none).
step() {
  local t; t=$(date +%s)
  if [ -n "$name_step" ]; then
    printf '%s\t%s\t%s\n' "$name_step" "$t_step" "$t" >>"$timings"
    echo "devcluster build: $name_step took $(took $((t - t_step)))" >&3
  fi
  name_step="$1"; t_step=$t
  [ -n "$1" ] || return 0
  echo "devcluster build: $1 ... ($(date -u +%H:%M:%S))" >&3
  echo "=== $(date -u +%Y-%m-%dT%H:%M:%SZ) $1" >>"$log"
}

minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
staging_version="v0.${KUBERNETES_VERSION#v1.}"

# --- Kubernetes, kwok and Kueue: one wrapper module and one `go build`. The Kubernetes staging
# modules are replaced by their published versions; kwok and Kueue are written against the same
# minor, so client-go, apimachinery, apiserver and the API types are compiled once for all of
# them. The four Kubernetes commands are one executable (devcluster/kube/main.go), linked once;
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl are links to it.
kube_cmds="kube-apiserver kube-controller-manager kube-scheduler kubectl"
missing=""
for cmd in kube kwok kueue; do [ -x "$out/$cmd" ] || missing="$missing $cmd"; done
missing=${missing# }
if [ -n "$missing" ]; then
  step "resolving k8s.io/kubernetes@$KUBERNETES_VERSION, kwok $KWOK_VERSION and kueue $KUEUE_VERSION"
  rm -rf "$work/kube"; mkdir -p "$work/kube"
  cd "$work/kube"
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" 2>>"$log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])') || fail "downloading k8s.io/kubernetes"
  {
    echo "module local/kube"
    echo "go 1.26"
    printf 'require (\n\tk8s.io/kubernetes %s\n\tsigs.k8s.io/kwok %s\n\tsigs.k8s.io/kueue %s\n)\n' \
      "$KUBERNETES_VERSION" "$KWOK_VERSION" "$KUEUE_VERSION"
    grep -E '^\s*k8s.io/[a-z0-9-]+ => \./staging/' "$gomod" | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
  } >go.mod
  cp "$here/kube/main.go" main.go
  printf 'package main\nimport (\n\t_ "sigs.k8s.io/kwok/cmd/kwok"\n\t_ "sigs.k8s.io/kueue/cmd/kueue"\n)\n' >tools.go
  go mod tidy >>"$log" 2>&1 || fail "resolving the Kubernetes, kwok and Kueue modules"
  rm tools.go
  # Module builds keep a placeholder version, which Kueue cannot parse: stamp the real one.
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  pkgs=""
  for cmd in $missing; do
    case $cmd in kube) pkgs="$pkgs ." ;; kwok) pkgs="$pkgs sigs.k8s.io/kwok/cmd/kwok" ;; kueue) pkgs="$pkgs sigs.k8s.io/kueue/cmd/kueue" ;; esac
  done
  step "building $missing (Kubernetes $KUBERNETES_VERSION, kwok $KWOK_VERSION, kueue $KUEUE_VERSION)"
  rm -rf "$work/bin"; mkdir -p "$work/bin"
  # shellcheck disable=SC2086  # one package per word
  go build -trimpath -ldflags "$ldflags" -o "$work/bin/" $pkgs >>"$log" 2>&1 || fail "building $missing"
  for cmd in $missing; do mv "$work/bin/$cmd" "$out/$cmd"; done
fi
for cmd in $kube_cmds; do [ -x "$out/$cmd" ] || ln -sfn kube "$out/$cmd"; done

# --- etcd: its server module has replace directives, so it also needs a wrapper module.
if [ ! -x "$out/etcd" ]; then
  step "building etcd $ETCD_VERSION"
  mkdir -p "$work/etcd"
  cd "$work/etcd"
  printf 'module local/etcdbuild\ngo 1.25\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >go.mod
  printf 'package main\nimport _ "go.etcd.io/etcd/server/v3/etcdmain"\nfunc main() {}\n' >tools.go
  go mod tidy >>"$log" 2>&1 || fail "resolving the etcd modules"
  rm tools.go
  go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3 >>"$log" 2>&1 || fail "building etcd"
  mv "$out/etcd.tmp" "$out/etcd"
fi

cd "$work"
if [ ! -f "$out/kueue-config/default/kustomization.yaml" ]; then
  step "copying Kueue's manifests"
  dir=$(go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" 2>>"$log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') || fail "downloading Kueue's manifests"
  rm -rf "$out/kueue-config"
  cp -r "$dir/config" "$out/kueue-config"
  chmod -R u+w "$out/kueue-config"
fi
step ""
t_end=$(date +%s)
printf 'total\t%s\t%s\n' "$t_all" "$t_end" >>"$timings"
echo "devcluster build: done in $(took $((t_end - t_all))) (steps: $timings)" >&3
touch "$out/.complete"
echo "$out"
