#!/usr/bin/env bash
# Build the local control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok, helm) from Go modules into a cache outside git,
# keyed by version. A warm cache returns at once. Prints the bin directory last.
#   --node              also kubelet, kube-proxy and a pause binary (`dev-cluster up --real-node`)
#   --kubernetes 1.MM   the Kubernetes minor to build (default: $NETSCHED_KUBERNETES, else
#                       KUBERNETES_DEFAULT in versions.env); each minor has its own go.mod in v1.MM/
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
node=false
minor_wanted="${NETSCHED_KUBERNETES:-$KUBERNETES_DEFAULT}"
while (($#)); do
  case $1 in
    --node) node=true ;;
    --kubernetes) minor_wanted="${2:?--kubernetes needs a minor such as 1.37}"; shift ;;
    --kubernetes=*) minor_wanted="${1#--kubernetes=}" ;;
    *) echo "build.sh: unknown argument $1 (use --node, --kubernetes 1.MM)" >&2; exit 2 ;;
  esac
  shift
done
minor_wanted="${minor_wanted#v}"
module="$here/v$minor_wanted"
if [[ ! -f "$module/go.mod" ]]; then
  echo "build.sh: Kubernetes $minor_wanted is not pinned here (known: $KUBERNETES_MINORS); set --kubernetes or NETSCHED_KUBERNETES to one of them" >&2
  exit 2
fi
# shellcheck source=v1.37/versions.env
source "$module/versions.env"

cache="${NETSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netsched}"
key="k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_helm-${HELM_VERSION}"
bin="$cache/bin/$key"
if [[ -f "$bin/.complete" ]] && { ! $node || [[ -f "$bin/.node-complete" ]]; }; then
  echo "[controlplane] cached in $bin" >&2
  echo "$bin"
  exit 0
fi

export GOTOOLCHAIN=local GOFLAGS=-mod=mod
export GOMODCACHE="${GOMODCACHE:-$cache/go/mod}" GOCACHE="${GOCACHE:-$cache/go/build}"
mkdir -p "$bin"
step() { echo "[controlplane] $*" >&2; }
start=$SECONDS

minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
ld="-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION"
ld+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
ld+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION"
ld+=" -X k8s.io/component-base/version.gitTreeState=clean"

cd "$module"
if [[ -f "$bin/.complete" ]]; then
  step "control plane cached in $bin"
else
step "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl $KUBERNETES_VERSION (cold: ~5 min)"
go build -ldflags "$ld" -o "$bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl >&2
step "building etcd $ETCD_VERSION"
go build -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.Version=${ETCD_VERSION#v}" \
  -o "$bin/etcd" go.etcd.io/etcd/server/v3 >&2
step "building kwok $KWOK_VERSION (cold: ~1.5 min)"
GOBIN="$bin" GOFLAGS= go install \
  -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
  "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
step "building helm $HELM_VERSION (cold: ~1.5 min)"
GOBIN="$bin" GOFLAGS= go install \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2

touch "$bin/.complete"
fi

if $node && [[ ! -f "$bin/.node-complete" ]]; then
  # Same flags as above so the Go build cache is shared (a CGO_ENABLED=0 build would miss all of it).
  step "building kubelet, kube-proxy $KUBERNETES_VERSION (warm Go cache: ~1 min; cold: ~5 min)"
  go build -ldflags "$ld" -o "$bin/" k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy >&2
  step "building pause"
  go build -C "$here/pause" -ldflags "-s -w" -o "$bin/pause" . >&2
  touch "$bin/.node-complete"
fi
step "built in $((SECONDS - start)) s"
echo "$bin"
