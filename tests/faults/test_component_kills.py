"""Each of netsched's components, and the apiserver, killed with work in flight: nothing lost,
nothing duplicated, no GPU given twice, and a hard network limit kept while the extender is away."""

from __future__ import annotations

import random
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import GPU_RESOURCE, JOB_LABEL, RACK_LABEL
from netsched.devcluster.devcluster import EXTENDER, OPERATOR
from netsched.devcluster.pods import gpu_pod
from netsched.devcluster.processes import pid_alive
from netsched.devcluster.wait import poll
from netsched.records.reader import read_rows
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import kill

GPUS_PER_NODE = 8


def gang(name: str, replicas: int, gpus: int, duration: str, **spec) -> dict:
    return make_gpujob(name, replicas=replicas, gpus=gpus, duration=duration, manifest=True, **spec)


def phase(custom, namespace: str, name: str) -> str | None:
    job = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return (job.get("status") or {}).get("phase")


def test_the_extender_killed_in_a_burst_loses_no_pod_gives_no_gpu_twice_and_keeps_gangs_in_a_rack(
        fault_cluster, core, custom, namespace):
    singles = [gpu_pod(f"single-{i}", 1, duration="600s") for i in range(100)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: core.create_namespaced_pod(namespace, p), singles[:30]))
        poll(lambda: sum(bool(p.spec.node_name) for p in core.list_namespaced_pod(namespace).items) >= 10,
             120, "the burst to be under way")
        kill(fault_cluster, EXTENDER)
        for j in range(5):  # gangs admitted and placed while the extender is away
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, gang(
                f"gang-{j}", 4, 2, "600s", network={"maxPeerDistance": "rack"}))
        list(pool.map(lambda p: core.create_namespaced_pod(namespace, p), singles[30:]))
    poll(lambda: sum(bool(p.spec.node_name) for p in core.list_namespaced_pod(namespace).items) >= 60,
         120, "the scheduler to go on without the extender")
    fault_cluster.restart(EXTENDER)

    pods = poll(lambda: (found := core.list_namespaced_pod(namespace).items) and len(found) == 120
                and all(p.spec.node_name for p in found) and found, 240, "all 120 pods to be bound")
    assert len({p.metadata.name for p in pods}) == 120  # none made twice (names are unique anyway)
    on_node = Counter()
    for p in pods:
        on_node[p.spec.node_name] += sum(int((c.resources.limits or {}).get(GPU_RESOURCE, 0))
                                         for c in p.spec.containers)
    assert max(on_node.values()) <= GPUS_PER_NODE, on_node
    racks = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in core.list_node().items}
    for j in range(5):
        members = [p for p in pods if (p.metadata.labels or {}).get(JOB_LABEL) == f"gang-{j}"]
        assert len(members) == 4 and len({racks[p.spec.node_name] for p in members}) == 1, j

    # the restarted extender is consulted again: a new pod gets its explanation
    core.create_namespaced_pod(namespace, gpu_pod("after", 1, duration="600s"))
    poll(lambda: core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=after,reason=NetworkPlacement").items, 60,
        "a NetworkPlacement Event for the pod made after the restart")


def test_an_operator_killed_again_and_again_through_a_gangs_life_makes_each_pod_once_and_one_record(
        fault_cluster, core, custom, namespace):
    rng = random.Random(7)
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, gang("big", 16, 1, "20s"))
    kills = 0
    while kills < 5 or phase(custom, namespace, "big") != "Succeeded":
        if kills < 5:
            time.sleep(rng.uniform(0.5, 4.0))  # while creating pods, while running, as pods finish
            kill(fault_cluster, OPERATOR)
            kills += 1
            fault_cluster.restart(OPERATOR)
        else:
            poll(lambda: phase(custom, namespace, "big") == "Succeeded", 120, "the gang to succeed")
    pods = core.list_namespaced_pod(namespace).items
    assert sorted(p.metadata.name for p in pods) == sorted(f"big-{i}" for i in range(16))
    uid = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "big")["metadata"]["uid"]
    assert all(p.metadata.owner_references[0].uid == uid for p in pods)  # none orphaned
    poll(lambda: [r for r in read_rows(fault_cluster.records_file) if r["uid"] == uid], 30, "its record")
    assert len([r for r in read_rows(fault_cluster.records_file) if r["uid"] == uid]) == 1


def test_after_an_apiserver_restart_extender_and_operator_recover_without_restarting(
        fault_cluster, core, custom, namespace):
    before = {c: fault_cluster.status()["components"][c]["pid"] for c in (EXTENDER, OPERATOR)}
    fault_cluster.restart("kube-apiserver")
    restarted = time.monotonic()
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, gang("after", 2, 2, "600s"))
    poll(lambda: phase(custom, namespace, "after") == "Running", 90, "a job made after the restart to run")
    poll(lambda: core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=after-0,reason=NetworkPlacement").items, 60,
        "the extender's explanation of its placement")
    print(f"recovered {time.monotonic() - restarted:.1f} s after the apiserver was back")
    after = {c: fault_cluster.status()["components"][c]["pid"] for c in (EXTENDER, OPERATOR)}
    assert after == before and all(pid_alive(pid) for pid in after.values())
