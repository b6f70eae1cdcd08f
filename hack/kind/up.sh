#!/usr/bin/env bash
# netsched on kind, for a machine with Docker, kind, kubectl and helm. UNTESTED: the machine netsched
# is developed on has no Docker engine, so this script has never run there; docs/install.md says so.
#
#   hack/kind/up.sh            # cluster (if missing), image built and loaded, KWOK GPU nodes, helm install
#   hack/kind/up.sh --down     # delete the kind cluster
# Environment: KIND_CLUSTER (default netsched), PYTHON (default .venv/bin/python, for the GPU nodes).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cluster="${KIND_CLUSTER:-netsched}"
python="${PYTHON:-$root/.venv/bin/python}"
kwok=v0.7.0
step() { echo "[kind] $*" >&2; }

if [[ ${1:-} == --down ]]; then
  kind delete cluster --name "$cluster"
  exit 0
fi
for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null || { echo "[kind] error: $tool is not on PATH" >&2; exit 1; }
done
[[ -x $python ]] || { echo "[kind] error: no $python: run \`make install\` first (or set PYTHON)" >&2; exit 1; }

version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/pyproject.toml")"
image="netsched:$version"
if ! kind get clusters | grep -qx "$cluster"; then
  step "creating kind cluster $cluster"
  kind create cluster --name "$cluster" --config "$here/kind-config.yaml"
fi
kubectl config use-context "kind-$cluster" >/dev/null

step "building $image and loading it into the cluster's node"
docker build -t "$image" "$root"
kind load docker-image "$image" --name "$cluster"

# KWOK with its fast stages; netsched's pod stages replace the pod ones (same names: a pod annotated
# netsched.io/duration finishes after it). Then 8 fake GPU nodes in 2 zones.
step "KWOK $kwok and 8 fake GPU nodes"
kubectl apply -f "https://github.com/kubernetes-sigs/kwok/releases/download/$kwok/kwok.yaml"
kubectl apply -f "https://github.com/kubernetes-sigs/kwok/releases/download/$kwok/stage-fast.yaml"
"$python" -c 'from netsched.devcluster.kwok_stages import stages_yaml; print(stages_yaml())' | kubectl apply -f -
"$python" -c 'import yaml; from netsched.devcluster.topology import gpu_nodes
print(yaml.safe_dump_all([n.manifest() for n in gpu_nodes(8)]))' | kubectl apply -f -

# The upstream kube-scheduler at the cluster's own version; every netsched pod on the kind node.
server="$(kubectl version -o json | "$python" -c 'import json, sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')"
pin=(--set-string 'operator.nodeSelector.netsched\.io/real-node=true'
     --set-string 'extender.nodeSelector.netsched\.io/real-node=true'
     --set-string 'scheduler.nodeSelector.netsched\.io/real-node=true'
     --set-string 'agent.nodeSelector.netsched\.io/real-node=true')
step "helm install netsched (kube-scheduler $server)"
helm upgrade --install netsched "$root/charts/netsched" -n netsched-system --create-namespace \
  --set image.repository=netsched --set image.tag="$version" --set image.pullPolicy=Never \
  --set scheduler.image.tag="$server" --set extender.replicas=1 --set extender.tls.enabled=true \
  "${pin[@]}" --wait --timeout 5m "$@"
step "ready: kubectl apply -f $root/manifests/examples/ && kubectl get gj -w"
