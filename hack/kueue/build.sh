#!/usr/bin/env bash
# Build Kueue's manager from its Go module into a cache outside git, keyed by
# version, with the CRDs, webhook manifests and CRD conversion patches of the
# same module beside it.
# A warm cache returns at once. Prints the output directory last.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

cache="${NETSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netsched}"
out="$cache/bin/kueue-${KUEUE_VERSION}"
if [[ -f "$out/.complete" ]]; then
  echo "[kueue] cached in $out" >&2
  echo "$out"
  exit 0
fi

# Kueue's own go.mod pins newer k8s.io/* modules than hack/controlplane, so it is
# built with `go install pkg@version` (its go.mod, no replace directives) rather
# than from the control plane's module.
export GOTOOLCHAIN=local GOFLAGS=
export GOMODCACHE="${GOMODCACHE:-$cache/go/mod}" GOCACHE="${GOCACHE:-$cache/go/build}"
mkdir -p "$out"
step() { echo "[kueue] $*" >&2; }
start=$SECONDS

step "building kueue $KUEUE_VERSION (cold: ~14 min on 2 cores)"
GOBIN="$out" go install \
  -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
  "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" >&2

step "copying CRDs and webhook manifests from the module"
src="$(go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
mkdir -p "$out/crds"
cp "$src"/config/components/crd/bases/*.yaml "$out/crds/"
cp "$src/config/components/webhook/manifests.yaml" "$out/webhooks.yaml"
# the CRDs whose versions Kueue converts: the conversion patches its kustomization applies
crd="$src/config/components/crd"
mkdir -p "$out/conversion"
for patch in $(sed -n 's|^- path: \(patches/webhook_in_.*\.yaml\)$|\1|p' "$crd/kustomization.yaml"); do
  cp "$crd/$patch" "$out/conversion/"
done
chmod -R u+w "$out"

touch "$out/.complete"
step "built in $((SECONDS - start)) s"
echo "$out"
