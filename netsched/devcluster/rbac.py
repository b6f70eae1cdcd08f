"""Least-privilege RBAC for netsched's own components, as API objects.

The dev-cluster applies these for the identities it runs components as; the Helm
chart (charts/netsched) grants the same rules to ServiceAccounts.
"""

from __future__ import annotations

from kubernetes import client

from netsched.jobs.kinds.kubeflow import JOB_KINDS as KUBEFLOW_JOB_KINDS

EXTENDER_ROLE = "netsched:extender"
EXTENDER_RULES = [
    # the cache: node labels and GPUs, and where GPU pods are bound
    {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]},
    # PackingPlans: the pins and reservations the filter enforces
    {"apiGroups": ["netsched.io"], "resources": ["packingplans"], "verbs": ["get", "list", "watch"]},
    # placement explanations on pods
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]

OPERATOR_ROLE = "netsched:operator"
OPERATOR_RULES = [
    # GPUJobs: watch them, write their status (kopf patches its own annotations on the object)
    {"apiGroups": ["netsched.io"], "resources": ["gpujobs"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": ["netsched.io"], "resources": ["gpujobs/status"], "verbs": ["get", "patch", "update"]},
    # the jobs' pods: create, lift gang gates, stop; all pods and nodes to judge whether a gang fits
    {"apiGroups": [""], "resources": ["pods"],
     "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    # kopf follows CRDs to learn when the GPUJob resource appears or changes
    {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
     "verbs": ["get", "list", "watch"]},
    # the packer: record PackingPlans and carry them out (kopf patches its finalizer on them)
    {"apiGroups": ["netsched.io"], "resources": ["packingplans"],
     "verbs": ["get", "list", "watch", "create", "patch"]},
    {"apiGroups": ["netsched.io"], "resources": ["packingplans/status"], "verbs": ["get", "patch", "update"]},
    # evict only through the Eviction API, so PodDisruptionBudgets hold; read the budgets to plan
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["get", "list", "watch"]},
    # pod gangs: the size of a gang only its object knows: a Job's parallelism, a PodGroup's minMember,
    # a Kubeflow training job's replicas; the forecast lists Jobs and patches only their annotations
    # (predicted start and finish)
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "patch"]},
    {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups"], "verbs": ["get"]},
    {"apiGroups": ["kubeflow.org"], "resources": [resource for _, resource in KUBEFLOW_JOB_KINDS],
     "verbs": ["get"]},
]


def cluster_role(name: str, rules: list[dict]) -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": rules}


def bind_user(name: str, user: str) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }


def grant(api: client.ApiClient, role: str, rules: list[dict], user: str) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_cluster_role(cluster_role(role, rules))
    rbac.create_cluster_role_binding(bind_user(role, user))
