"""A packer snapshot built from API objects: who may move, where pods may go, which PDB covers them."""

from gpujob_builders import node

from netsched.operator.cluster_snapshot import snapshot_of

TAINT = {"key": "gpu", "value": "reserved", "effect": "NoSchedule"}


def raw_pod(name: str, node_name: str | None = None, owner: str | None = "ReplicaSet", **spec) -> dict:
    meta = {"name": name, "namespace": "ml", "labels": {"app": name}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x", "controller": True}]
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    status = {"phase": "Running", "conditions": []} if node_name else {"phase": "Pending",
                                                                      "conditions": [unschedulable]}
    container = {"name": "m", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
    return {"metadata": meta, "status": status, "spec": {"schedulerName": "netsched", "nodeName": node_name,
                                                         "priority": 10, **spec, "containers": [container]}}


def test_pods_get_movability_allowed_nodes_and_pdbs():
    nodes = [node("a1-0"), node("a1-1", taints=[TAINT])]
    pods = [raw_pod("kept", "a1-0", owner=None), raw_pod("web", "a1-0"), raw_pod("waiting")]
    pdbs = [{"metadata": {"name": "all", "namespace": "ml"}, "spec": {"selector": {}},
             "status": {"disruptionsAllowed": 1}}]
    snap = snapshot_of(nodes, pods, pdbs)
    by = {p.name: p for p in snap.pods}
    assert not by["ml/kept"].movable and by["ml/web"].movable  # only what a controller recreates moves
    assert by["ml/waiting"].allowed == ("a1-0",)  # the tainted node is not tolerated
    assert by["ml/web"].requests == {"cpu": 500, "memory": 2**30, "pods": 1}
    assert {p.pdb for p in snap.pods} == {"ml/all"}  # an empty selector covers every pod
    assert snap.budgets[0].allowed == 1
