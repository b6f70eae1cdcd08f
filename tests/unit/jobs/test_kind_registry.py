"""The pod-gang kinds' registry (netsched.jobs.kinds.registry): every kind file is found, in the order
gang_of tries them, and what each declares holds together (its size's object readable with its RBAC,
the names `why` takes unambiguous)."""

import importlib
import pkgutil

from netsched.jobs import kinds
from netsched.jobs.kinds.kind import GangKind
from netsched.jobs.kinds.registry import KINDS, access, answered


def test_every_kind_file_is_registered():
    """A module of netsched.jobs.kinds is a kind's file (one GangKind, registered) or a shared piece."""
    shared = {"kind", "pod_templates", "registry"}
    for module in pkgutil.iter_modules(kinds.__path__):
        found = vars(importlib.import_module(f"{kinds.__name__}.{module.name}")).values()
        declared = [value for value in found if isinstance(value, GangKind)]
        if module.name in shared:
            assert declared == [], module.name
        else:
            assert declared and all(k in KINDS for k in declared), module.name


def test_the_most_specific_kind_is_tried_first():
    # a group that states itself, then the controller that made the pods, the batch Job last
    assert [k.kind for k in KINDS] == ["NativePodGroup", "KueuePodGroup", "PodGroup", "LeaderWorkerSet",
                                       "JobSet", "KubeflowJob", "Job"]


def test_the_object_that_sizes_a_gang_is_readable_with_the_kinds_rbac():
    granted = {(g, r, v) for a in access() for g in [a.group] for r in a.resources for v in a.verbs}
    for k in KINDS:
        if k.sized_by is not None:
            for _, resource in k.sized_by.kinds:
                assert (k.sized_by.group, resource, "get") in granted, k.kind


def test_each_rule_is_granted_once():
    rules = [a.rule() for a in access()]
    assert len(rules) == len({repr(r) for r in rules})


KUBEFLOW = ["JAXJob", "MPIJob", "PaddleJob", "PyTorchJob", "TFJob", "XGBoostJob"]


def test_whatif_and_why_answer_for_jobs_jobsets_leaderworkersets_and_kubeflow_jobs_by_their_own_names():
    assert list(answered()) == sorted(["Job", "JobSet", "LeaderWorkerSet", *KUBEFLOW])
    names = [name for kind, a in answered().items() for name in a.names(kind)]
    assert len(names) == len(set(names)) and all(name == name.lower() for name in names)
    assert {kind: a.names(kind)[0] for kind, a in answered().items()} == {
        "Job": "job", "JobSet": "jobset", "LeaderWorkerSet": "lws", **{k: k.lower() for k in KUBEFLOW}}
    # one gang kind, six API kinds: each its own resource, reader and name
    assert {answered()[k].plural for k in KUBEFLOW} == {f"{k.lower()}s" for k in KUBEFLOW}


def test_a_kind_names_its_gang_by_labels_or_by_a_pod_field():
    for k in KINDS:
        assert bool(k.name_labels) != bool(k.name_field), k.kind
