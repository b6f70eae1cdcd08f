"""Gangs on one node, per gang kind, with the real kube-scheduler: placed as one decision (the operator
asks the extender for every member's node as it lifts the gates, and pins them) against pod by pod
(the same release without the extender's answer: each pod placed on its own as kube-scheduler gets to it).

    python bench/gang_kinds.py [--nodes 200] [--gangs 40] --json FILE
    python bench/gang_kinds.py --report FILE      # the "Gang kinds on one node" section

One dev-cluster (kube-apiserver, kube-scheduler with the extender, the operator, KWOK nodes of 8 GPUs in 4
zones). Per arm and kind, --gangs gangs of 4 x 2 GPUs, each followed by 4 single-GPU pods, created by 4
client threads so gangs and singles interleave at the scheduler:

  gpujob    GPUJobs
  job       indexed batch Jobs, gated by their template (as the admission webhook gates them)
  jobset    Jobs whose pod template carries the labels JobSet's controller writes (its controller not run)
  podgroup  bare pods labelled with a scheduler-plugins PodGroup of minMember 4 (the CRD served, its
            controllers not run)
  kueue     bare pods with Kueue's pod-group label and total-count annotation (Kueue not installed)

Nothing finishes: the cluster ends under a third full, so a node with room for a whole gang (8 GPUs)
exists at every release. Reported: the share of gangs whose 4 pods share one node, and one rack. The
pod-by-pod arm restarts the operator with `--extender-url=` (no placement asked).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kubernetes import client

from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import RACK_LABEL
from netsched.devcluster.crds import install_crds
from netsched.devcluster.devcluster import OPERATOR, DevCluster
from netsched.devcluster.pods import gated_job, gpu_pod
from netsched.devcluster.wait import poll
from netsched.jobs.replica_pods import GANG_GATE
from netsched.testing import pod_groups
from netsched.testing.builders import make_gpujob

sys.path.insert(0, str(Path(__file__).parent))
from extender_throughput import BindWatch  # noqa: E402
from gang_locality import code  # noqa: E402
from report import exit_on_sigterm, publish  # noqa: E402

SECTION = "## Gang kinds on one node"
REPLICAS, GPUS, SINGLES = 4, 2, 4
KINDS = ("gpujob", "job", "jobset", "podgroup", "kueue")
ARMS = ("joint", "pod-by-pod")
GANG_LABEL = "bench.netsched.io/gang"  # on every member, whatever its kind: how the bench finds a gang


class Apis:
    def __init__(self, cluster: DevCluster):
        api = cluster.api_client()
        self.core, self.batch = client.CoreV1Api(api), client.BatchV1Api(api)
        self.custom = client.CustomObjectsApi(api)


def bare(name: str, gang: str, labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict:
    pod = gpu_pod(name, GPUS, labels={GANG_LABEL: gang, **labels}, annotations=annotations)
    pod["spec"]["schedulingGates"] = [{"name": GANG_GATE}]
    return pod


def create_gang(apis: Apis, ns: str, kind: str, g: int) -> None:
    """One gang of `kind` and its singles, the singles after it."""
    name = f"{kind}-{g}"
    if kind == "gpujob":
        job = make_gpujob(name, replicas=REPLICAS, gpus=GPUS, manifest=True)
        job["spec"]["template"]["metadata"] = {"labels": {GANG_LABEL: name}}
        apis.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, job)
    elif kind in ("job", "jobset"):
        labels = {GANG_LABEL: name}
        if kind == "jobset":
            labels |= {"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": "w",
                       "jobset.sigs.k8s.io/replicatedjob-replicas": "1", "jobset.sigs.k8s.io/job-index": "0"}
        apis.batch.create_namespaced_job(ns, gated_job(name, REPLICAS, GPUS, None, labels=labels))
    elif kind == "podgroup":
        apis.custom.create_namespaced_custom_object(
            pod_groups.GROUP, pod_groups.VERSION, ns, pod_groups.PLURAL,
            {"apiVersion": f"{pod_groups.GROUP}/{pod_groups.VERSION}", "kind": "PodGroup",
             "metadata": {"name": name}, "spec": {"minMember": REPLICAS}})
        for r in range(REPLICAS):
            apis.core.create_namespaced_pod(ns, bare(f"{name}-{r}", name, {pod_groups.POD_GROUP_LABEL: name}))
    else:
        for r in range(REPLICAS):
            apis.core.create_namespaced_pod(ns, bare(
                f"{name}-{r}", name, {"kueue.x-k8s.io/pod-group-name": name},
                {"kueue.x-k8s.io/pod-group-total-count": str(REPLICAS)}))
    for i in range(SINGLES):
        apis.core.create_namespaced_pod(ns, gpu_pod(f"s{g}-{i}", 1))


def one_kind(apis: Apis, arm: str, kind: str, gangs: int, racks: dict[str, str]) -> dict:
    ns = f"kinds-{arm}-{kind}"
    apis.core.create_namespace({"metadata": {"name": ns}})
    poll(lambda: apis.core.read_namespaced_service_account("default", ns), 60, f"the default SA in {ns}")
    pods = gangs * (REPLICAS + SINGLES)
    watch = BindWatch(apis.core, ns)
    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda g: create_gang(apis, ns, kind, g), range(gangs)))
    poll(lambda: len(watch.bound) >= pods, 900, f"{pods} pods of {ns} to be bound", interval=0.5)
    watch.stop.set()
    by_gang: dict[str, set[str]] = defaultdict(set)
    pinned = 0
    for p in apis.core.list_namespaced_pod(ns, label_selector=GANG_LABEL).items:
        by_gang[p.metadata.labels[GANG_LABEL]].add(watch.bound[p.metadata.name][1])
        pinned += "netsched.io/pinned-node" in (p.metadata.annotations or {})
    spans = [len(n) for n in by_gang.values()]
    return {"arm": arm, "kind": kind, "gangs": len(by_gang), "pinned_pods": pinned,
            "one_node": sum(s == 1 for s in spans) / len(spans),
            "one_rack": sum(len({racks[n] for n in nodes}) == 1 for nodes in by_gang.values()) / len(by_gang),
            "nodes_per_gang": sum(spans) / len(spans), "seconds": time.monotonic() - started}


def clear(apis: Apis, ns: str) -> None:
    if ns.endswith("gpujob"):  # or the operator makes the pods again
        apis.custom.delete_collection_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
    apis.batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
    apis.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    apis.core.delete_namespace(ns)
    poll(lambda: not [n for n in apis.core.list_namespace().items if n.metadata.name == ns], 600,
         f"namespace {ns} to go", interval=1)


def run(args: argparse.Namespace, say: Callable[[str], None]) -> dict:
    results = []
    with tempfile.TemporaryDirectory() as d:
        cluster = DevCluster(directory=Path(d), nodes=args.nodes, zones=4,
                             racks_per_zone=max(1, args.nodes // 80), progress=say)
        cluster.up()
        try:
            apis = Apis(cluster)
            install_crds(cluster.api_client(), [pod_groups.CRD])
            racks = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in apis.core.list_node().items}
            for arm in ARMS:
                if arm == "pod-by-pod":  # the last --extender-url wins: none, so no placement is asked
                    cluster.restart(OPERATOR, ("--extender-url=",))
                for kind in args.kinds:
                    results.append(one_kind(apis, arm, kind, args.gangs, racks))
                    r = results[-1]
                    say(f"{arm} {kind}: {r['one_node']:.1%} of {r['gangs']} gangs on one node, "
                        f"{r['one_rack']:.1%} in one rack, {r['nodes_per_gang']:.2f} nodes per gang, "
                        f"{r['pinned_pods']} pods pinned")
                    clear(apis, f"kinds-{arm}-{kind}")
        finally:
            cluster.down(quiet=True)
    return {"nodes": args.nodes, "gangs": args.gangs, "racks": len(set(racks.values())), "code": code(),
            "date": time.strftime("%Y-%m-%d"), "results": results}


def report(doc: dict) -> str:
    by = {(r["arm"], r["kind"]): r for r in doc["results"]}
    kinds = [k for k in KINDS if ("joint", k) in by]

    def cell(arm: str, kind: str) -> str:
        r = by.get((arm, kind))
        return "-" if r is None else f"{r['one_node']:.0%} ({r['nodes_per_gang']:.2f})"
    return "\n".join([
        SECTION, "",
        f"Command: `python bench/gang_kinds.py --nodes {doc['nodes']} --gangs {doc['gangs']} --json FILE`, "
        f"then `--report FILE` (code {doc['code']}, {doc['date']}; 2 cores shared with other work, one run).",
        "",
        f"The dev-cluster's kube-scheduler with netsched's extender and operator; {doc['nodes']} KWOK "
        f"nodes x 8 GPUs in 4 zones / {doc['racks']} racks. Per kind {doc['gangs']} gangs of {REPLICAS} x "
        f"{GPUS} GPUs, each followed by {SINGLES} single-GPU pods, 4 client threads; nothing finishes and "
        "the cluster ends under a third full, so a node with room for every gang existed at each release. "
        "Cell: gangs on one node (mean nodes per gang). joint: the operator asks the extender for every "
        "member's node and pins them; pod by pod: the same release, no placement asked "
        "(`--extender-url=`).", "",
        "| arm | " + " | ".join(kinds) + " |",
        "|---|" + "---|" * len(kinds),
        *(f"| {arm} | " + " | ".join(cell(arm, k) for k in kinds) + " |" for arm in ARMS), "",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--gangs", type=int, default=40)
    parser.add_argument("--kinds", type=lambda s: s.split(","), default=list(KINDS))
    parser.add_argument("--json", help="write this run's figures here")
    parser.add_argument("--report", metavar="FILE", help="write docs/benchmarks-history.md's section")
    args = parser.parse_args()
    exit_on_sigterm()
    if args.report:
        publish(report(json.loads(Path(args.report).read_text())))
    elif args.json:
        doc = run(args, lambda m: print(m, file=sys.stderr, flush=True))
        Path(args.json).write_text(json.dumps(doc, indent=1))
        print(report(doc))
    else:
        parser.error("give --json FILE (a run) or --report FILE")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
