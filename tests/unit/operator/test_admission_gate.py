from __future__ import annotations

from netsched.api.labels import GPU_RESOURCE, REPLICA_LABEL
from netsched.operator.admission_gate import AdmissionGate
from netsched.operator.cluster_index import ClusterIndex
from netsched.testing.builders import make_gpujob, make_pod


def test_a_released_gangs_room_is_held_on_the_nodes_its_pods_were_pinned_to_until_they_show_up():
    """Until the watch shows a just-released gang's pods without their gate, their room is held: on the
    node each was pinned to, and as plain requests for one pinned nowhere."""
    body = make_gpujob(name="train")
    key = ("ml", "train", body["metadata"]["uid"])
    gated = [{"name": "netsched.io/gang"}]
    pods = [make_pod(f"train-{i}", gpus=2, uid=f"u{i}", job="train", labels={REPLICA_LABEL: str(i)},
                     schedulingGates=gated) for i in range(3)]
    for pod in pods:
        pod["metadata"]["ownerReferences"] = [{"kind": "GPUJob", "name": "train", "uid": key[2],
                                               "controller": True}]
    index = ClusterIndex()
    index.replace("pods", pods)
    gate = AdmissionGate()
    gate.reserve(key, {GPU_RESOURCE: 2.0}, {"train-0": "n1", "train-1": "n1"})
    pinned, loose = gate.reserved(index.indices({}))
    assert pinned == {"n1": {GPU_RESOURCE: 4.0}} and loose == [{GPU_RESOURCE: 2.0}]
    assert gate.reserved(index.indices({}), but=key) == ({}, [])
    released = [{**p, "spec": {**p["spec"], "schedulingGates": []}} for p in index.pods()]
    index.replace("pods", released)  # shown released: they count as pending (or pinned) from now
    assert gate.reserved(index.indices({})) == ({}, [])
