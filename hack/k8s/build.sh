#!/usr/bin/env bash
# Build the local Kubernetes control plane from Go modules into a cache outside the repository:
#   ${GPUOPS_K8S_CACHE:-~/.cache/gpuops/k8s}/<KUBE_VERSION>/bin/
#     kube-apiserver kube-controller-manager kube-scheduler   (k8s.io/kubernetes, hack/k8s/kube)
#     etcd                                                    (go.etcd.io/etcd/server/v3, hack/k8s/kube/etcd)
#     kwok                                                    (sigs.k8s.io/kwok, in hack/k8s/kube: see below)
#   optional, built only when named (hack/k8s/build.sh kueue prometheus kube-state-metrics metrics-standin):
#     kueue                   (sigs.k8s.io/kueue, hack/k8s/kueue)
#     prometheus              (github.com/prometheus/prometheus/cmd/prometheus, hack/k8s/prometheus;
#                              tags remove_all_sd, no builtinassets: static/file/http SD only, no web UI assets)
#     kube-state-metrics      (k8s.io/kube-state-metrics/v2, hack/k8s/kube-state-metrics; the version is
#                              the wrapper's pin there; its own client-go, not the control plane's)
#     gpuops-metrics-standin  (hack/k8s/kube/gpuops-metrics-standin: the lab's external/custom metrics
#                              server on sigs.k8s.io/custom-metrics-apiserver; lab code, never shipped;
#                              a package of the kube wrapper module, so it reuses the control plane's
#                              compiled packages: a few dozen of its own to compile)
# Versions: hack/k8s/versions.env. A binary is rebuilt only when its wrapper module changed.
# etcd, kwok and the stand-in are built in the kube wrapper module (hack/k8s/pin.sh holds every
# dependency they share with Kubernetes at Kubernetes' version; etcd is the release whose client
# Kubernetes uses), after kube: they reuse its compiled packages, so a cold build of each compiles a
# hundred packages or fewer of its own instead of 580 (etcd), 750 (kwok) or 1,000 (stand-in).
#
# Usage: hack/k8s/build.sh            build what is missing, print the bin directory last
#        hack/k8s/build.sh kueue prometheus    the same plus the optional component(s) named
#        hack/k8s/build.sh --check [COMPONENT...]  exit 1 (and say why) unless everything (and those named) is built
#        hack/k8s/build.sh --bin-dir  print the bin directory and exit
# Environment: GPUOPS_K8S_CACHE (cache root), GPUOPS_K8S_BUILD_JOBS (go build -p, default 2).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
. "$here/versions.env"

cache_root="${GPUOPS_K8S_CACHE:-${HOME}/.cache/gpuops/k8s}"
bin="$cache_root/$KUBE_VERSION/bin"
jobs="${GPUOPS_K8S_BUILD_JOBS:-2}"

# component -> wrapper dir, binaries, stamp source
module_of() { # the wrapper module a component is built in
  case "$1" in etcd|kwok|metrics-standin) echo kube ;; *) echo "$1" ;; esac
}
source_of() { # the directory of the component's own Go files (none for a plain wrapper)
  case "$1" in etcd) echo kube/etcd ;; metrics-standin) echo kube/gpuops-metrics-standin ;; kube|kwok) ;; *) echo "$1" ;; esac
}
stamp_of() { # the wrapper's pinned state: a rebuild is needed when it changes
  local f m src files=("$here/versions.env")
  m="$(module_of "$1")"
  files+=("$here/$m/go.mod" "$here/$m/go.sum")
  src="$(source_of "$1")"
  if [[ -n "$src" ]]; then for f in "$here/$src"/*.go; do [[ -e "$f" ]] && files+=("$f"); done; fi
  cat "${files[@]}" | sha256sum | cut -c1-16
}
binaries_of() {
  case "$1" in
    kube) echo "kube-apiserver kube-controller-manager kube-scheduler" ;;
    etcd) echo "etcd" ;;
    kwok) echo "kwok" ;;
    kueue) echo "kueue" ;;
    prometheus) echo "prometheus" ;;
    kube-state-metrics) echo "kube-state-metrics" ;;
    metrics-standin) echo "gpuops-metrics-standin" ;;
  esac
}
COMPONENTS="kube etcd kwok"  # etcd and kwok after kube: they compile against the control plane's packages
kueue_version() { awk '$1 == "sigs.k8s.io/kueue" { print $2 }' "$here/kueue/go.mod"; }
gomod_version() { # gomod_version WRAPPER MODULE: the version the wrapper's go.mod pins
  awk -v m="$2" '$1 == m { print $2 }' "$here/$1/go.mod"
}
OPTIONAL_COMPONENTS="kueue prometheus kube-state-metrics metrics-standin"

is_built() {
  local c="$1" b
  [[ -f "$bin/.$c.stamp" && "$(cat "$bin/.$c.stamp")" == "$(stamp_of "$c")" ]] || return 1
  for b in $(binaries_of "$c"); do [[ -x "$bin/$b" ]] || return 1; done
}

mode="${1:-}"
case "$mode" in --check|--bin-dir) shift ;; *) mode="" ;; esac
for c in "$@"; do
  case " $OPTIONAL_COMPONENTS " in
    *" $c "*) COMPONENTS="$COMPONENTS $c" ;;
    *) echo "usage: $0 [--check|--bin-dir] [optional component: $OPTIONAL_COMPONENTS]; unknown: $c" >&2; exit 2 ;;
  esac
done

case "$mode" in
  --bin-dir) echo "$bin"; exit 0 ;;
  --check)
    missing=""
    for c in $COMPONENTS; do is_built "$c" || missing="$missing $(binaries_of "$c")"; done
    if [[ -n "$missing" ]]; then
      command -v go >/dev/null || missing="$missing (and Go, needed to build them, is not installed)"
      echo "hack/k8s/build.sh: not built in $bin:$missing (run: make k8s-build)" >&2; exit 1
    fi
    echo "$bin"; exit 0 ;;
esac

# everything asked for is built: no need to wait for a build of other components that holds the lock
# (make test builds the optional components in the background while the stages that need only the
# control plane run)
all_built() { local c; for c in $COMPONENTS; do is_built "$c" || return 1; done; }
if all_built; then
  for c in $COMPONENTS; do echo "[build $c] cached: $(binaries_of "$c") in $bin"; done
  echo "$bin"
  exit 0
fi
if ! command -v go >/dev/null; then
  echo "hack/k8s/build.sh: Go is not installed; the local Kubernetes control plane is built from Go modules (need go >= 1.26)" >&2
  exit 1
fi
mkdir -p "$bin"
exec 9>"$cache_root/$KUBE_VERSION/.build.lock"
if ! flock -n 9; then
  echo "hack/k8s/build.sh: another build holds $cache_root/$KUBE_VERSION/.build.lock; waiting" >&2
  # that build may be making what this one needs and then go on to other components: stop waiting
  # as soon as everything asked for is built
  until flock -n 9; do
    if all_built; then
      echo "hack/k8s/build.sh: built meanwhile by the other build: $COMPONENTS"; echo "$bin"; exit 0
    fi
    sleep 5
  done
fi

# Progress: go build -v names each package as it is compiled; print a count every 100.
progress() {
  local c="$1" start="$2"
  awk -v c="$c" -v start="$start" '
    /^(#|go: |[^ ]+\.go:|\t)/ { print "[build " c "] " $0; fflush(); next }
    { n++; if (n % 100 == 0) { cmd = "date +%s"; cmd | getline now; close(cmd);
        printf("[build %s] %d packages compiled, %ds\n", c, n, now - start); fflush() } }
    END { printf("[build %s] %d packages compiled\n", c, n) }'
}

build_component() {
  local c="$1" start out ldflags pkgs=() tags=""
  start=$(date +%s)
  out="$bin/.tmp-$c"
  rm -rf "$out"; mkdir -p "$out"
  ldflags="-s -w"
  case "$c" in
    kube)
      local minor v
      minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
      for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags="$ldflags -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor"
        ldflags="$ldflags -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
      done
      for b in $(binaries_of kube); do pkgs+=("k8s.io/kubernetes/cmd/$b"); done ;;
    etcd) pkgs=(./etcd) ;;
    kwok)
      ldflags="$ldflags -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"
      pkgs=(sigs.k8s.io/kwok/cmd/kwok) ;;
    kueue)
      # the version is the wrapper's pin (hack/k8s/kueue/go.mod), not versions.env: a change there
      # would change every other component's stamp
      ldflags="$ldflags -X sigs.k8s.io/kueue/pkg/version.GitVersion=$(kueue_version)"
      pkgs=(sigs.k8s.io/kueue/cmd/kueue) ;;
    prometheus)
      tags="remove_all_sd"
      pkgs=(github.com/prometheus/prometheus/cmd/prometheus) ;;
    kube-state-metrics)
      # what its Makefile stamps (--version, the build_info metric), from the wrapper's pins
      local v
      v="$(gomod_version kube-state-metrics k8s.io/kube-state-metrics/v2)"
      ldflags="$ldflags -X github.com/prometheus/common/version.Version=$v"
      ldflags="$ldflags -X k8s.io/kube-state-metrics/v2/pkg/app.ClientGoVersion=$(gomod_version kube-state-metrics k8s.io/client-go)"
      pkgs=(k8s.io/kube-state-metrics/v2) ;;
    metrics-standin) pkgs=(./gpuops-metrics-standin) ;;
  esac
  echo "[build $c] go build -p $jobs ${pkgs[*]} (cold on an idle 2-core machine: kube about 5.5 min, then etcd, kwok and the stand-in seconds each, Prometheus 2, kube-state-metrics 3 (5 CPU-min), Kueue 6; far longer under load)"
  local rc=0
  (
    cd "$here/$(module_of "$c")"
    # CGO off: static binaries, no C toolchain needed; -mod=readonly: go.sum is the pin.
    CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" go build -p "$jobs" -v -trimpath ${tags:+-tags "$tags"} -ldflags "$ldflags" -o "$out/" "${pkgs[@]}" 2>&1
  ) | progress "$c" "$start" || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "[build $c] FAILED (go build exit $rc)" >&2; rm -rf "$out"; return "$rc"
  fi
  mv -f "$out"/* "$bin/"
  rmdir "$out"
  stamp_of "$c" > "$bin/.$c.stamp"
  echo "[build $c] done in $(( $(date +%s) - start ))s: $(binaries_of "$c")"
}

# One after the other: side by side (tried 2026-12-05) the cold etcd + kwok + kube build took 463 s
# instead of 448 s on an idle 2-core machine, each build compiling the packages they share again.
# The stand-in comes after kube (OPTIONAL_COMPONENTS): it compiles against the control plane's packages.
for c in $COMPONENTS; do
  if is_built "$c"; then
    echo "[build $c] cached: $(binaries_of "$c") in $bin"
  else
    build_component "$c"
  fi
done
echo "$bin"
