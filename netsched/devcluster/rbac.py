"""Least-privilege RBAC for netsched's own components: the one source of their rules.

Every rule names the calls it exists for (`Use`: a verb set, the file that makes the call and a string
found there). A unit test looks each call up, so a grant whose code went away fails it, and every verb
granted must be named by some call. The dev-cluster applies these rules to the identities it runs the
extender and operator as, so a call the rules miss is refused in the integration tests; the chart grants
the same rules from the template `chart_template` writes (hack/render-manifests.py), which a unit test
keeps equal to this module.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from kubernetes import client

from netsched.api.topology import PUBLISHED_CONFIGMAP
from netsched.jobs.kinds.registry import access

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")  # the order rules list them in
KOPF = "kopf:"  # a Use's `path` inside the installed kopf package (calls the framework makes for us)


@dataclass(frozen=True)
class Use:
    """Calls that need `verbs`: made in `path` (repository-relative, or KOPF + a path in kopf) where
    the text `call` appears; `why` says what for."""
    verbs: tuple[str, ...]
    path: str
    call: str
    why: str


@dataclass(frozen=True)
class Rule:
    """A ClusterRole (or Role) rule: the verbs are exactly those its uses need."""
    group: str
    resources: tuple[str, ...]
    uses: tuple[Use, ...]
    resource_names: tuple[str, ...] = ()

    @property
    def verbs(self) -> list[str]:
        needed = {v for use in self.uses for v in use.verbs}
        return [v for v in VERBS if v in needed] + sorted(needed - set(VERBS))

    def as_dict(self) -> dict[str, list[str]]:
        rule = {"apiGroups": [self.group], "resources": list(self.resources)}
        if self.resource_names:
            rule["resourceNames"] = list(self.resource_names)
        return rule | {"verbs": self.verbs}


WATCH = "netsched/api/watch.py"  # the Reflector: one LIST, then a WATCH from its resourceVersion
LIST_WATCH = ("list", "watch")

EXTENDER_ROLE = "netsched:extender"
EXTENDER = (
    Rule("", ("nodes", "pods"), (
        Use(LIST_WATCH, WATCH, '"nodes": core.list_node', "the cache: node labels and GPUs"),
        Use(LIST_WATCH, WATCH, '"pods": core.list_pod_for_all_namespaces',
            "the cache: where GPU pods are bound"),
    )),
    Rule("netsched.io", ("packingplans",), (
        Use(LIST_WATCH, WATCH, '"packingplans": partial(', "the pins and reservations the filter enforces"),
    )),
    Rule("resource.k8s.io", ("resourceslices", "resourceclaims"), (
        Use(LIST_WATCH, WATCH, "dra.SLICES: partial(",
            "the cache: GPUs a DRA driver publishes, and claims' use"),
    )),
    Rule("", ("events",), (
        Use(("create",), "netsched/extender/explain.py", "create_namespaced_event",
            "NetworkPlacement events: why a pod got its node"),
    )),
    Rule("authentication.k8s.io", ("tokenreviews",), (
        Use(("create",), "netsched/extender/access.py", '"/apis/authentication.k8s.io/v1/tokenreviews"',
            "who calls the metrics and debug port"),
    )),
    Rule("authorization.k8s.io", ("subjectaccessreviews",), (
        Use(("create",), "netsched/extender/access.py",
            '"/apis/authorization.k8s.io/v1/subjectaccessreviews"',
            "may the caller read metrics, debug, or pods in a namespace"),
    )),
)

PODS_LIST = "netsched/packer/live_cluster.py"
DRA = "netsched/api/dra.py"  # one read of ResourceSlices and ResourceClaims
OPERATOR_ROLE = "netsched:operator"
OPERATOR = (
    Rule("netsched.io", ("gpujobs",), (
        Use(LIST_WATCH, "netsched/operator/gpujobs/handlers.py", "@kopf.timer(GROUP, VERSION, PLURAL",
            "kopf lists and watches GPUJobs for their reconcile timer and census"),
        Use(("list",), "netsched/operator/forecaster/loop.py", "list_cluster_custom_object(GROUP",
            "the forecast reads every GPUJob"),
        Use(("patch",), "netsched/packer/controller.py", "patch_namespaced_custom_object(GROUP",
            "the packer marks a GPUJob it restarts"),
    )),
    Rule("netsched.io", ("gpujobs/status",), (
        Use(("patch",), "netsched/operator/gpujobs/controller.py", "patch_namespaced_custom_object_status",
            "phase, conditions and replica counts"),
        Use(("patch",), "netsched/operator/forecaster/loop.py", "patch_namespaced_custom_object_status",
            "predicted start and completion times"),
    )),
    Rule("", ("pods",), (
        Use(LIST_WATCH, "netsched/operator/cluster_index.py", 'WATCHED = ("nodes", "pods")',
            "the cluster index: every pod, to judge whether a gang fits"),
        Use(("create",), "netsched/operator/gpujobs/controller.py", "create_namespaced_pod",
            "a GPUJob's replica pods"),
        Use(("patch",), "netsched/operator/pod_gangs/controller.py", "patch_namespaced_pod",
            "lift a gang's scheduling gate"),
        Use(("patch",), "netsched/packer/controller.py", "patch_namespaced_pod",
            "pin or gate a pod a plan moves"),
        Use(("delete",), "netsched/operator/gpujobs/controller.py", "delete_namespaced_pod",
            "stop a failed or finished GPUJob's pods"),
    )),
    Rule("", ("nodes",), (
        Use(LIST_WATCH, "netsched/operator/cluster_index.py", 'WATCHED = ("nodes", "pods")',
            "the cluster index: every node's GPUs and labels"),
        Use(("list",), "netsched/operator/webhook/hard_limits.py", "core.list_node(",
            "the data-limit webhook: which nodes hold a data source"),
    )),
    Rule("resource.k8s.io", ("resourceslices", "resourceclaims"), (
        Use(LIST_WATCH, WATCH, "dra.SLICES: partial(",
            "the cluster index: GPUs a DRA driver publishes, and claims' use"),
        Use(("list",), DRA, 'listed(api, f"/apis/{GROUP}/{VERSION}/{kind}")',
            "each packing pass counts DRA GPUs"),
    )),
    Rule("", ("events",), (
        Use(("create",), "netsched/operator/gpujobs/controller.py", "create_namespaced_event",
            "GPUJob events, with its conditions' reasons"),
        Use(("create",), "netsched/packer/controller.py", "create_namespaced_event",
            "the packer's evictions"),
        Use(("create",), KOPF + "_cogs/clients/events.py", "await api.post(", "kopf's own events on objects"),
        Use(("list",), "netsched/operator/pod_gangs/controller.py", "reason=FailedCreate",
            "why a pod gang's controller cannot make its pods (FailedCreate events): it is Blocked"),
    )),
    Rule("apiextensions.k8s.io", ("customresourcedefinitions",), (
        Use(LIST_WATCH, KOPF + "_cogs/structs/references.py", "'customresourcedefinitions'",
            "kopf follows CRDs to learn when the GPUJob and PackingPlan resources appear or change"),
    )),
    Rule("netsched.io", ("packingplans",), (
        Use(LIST_WATCH, "netsched/operator/packing/handlers.py", "@kopf.timer(plans.GROUP",
            "kopf watches PackingPlans to carry them out"),
        Use(("list",), "netsched/packer/controller.py", "list_cluster_custom_object(plans.GROUP",
            "the packer's active plans"),
        Use(("create",), "netsched/packer/controller.py", "create_cluster_custom_object(plans.GROUP",
            "record a plan before acting on it"),
        Use(("patch",), KOPF + "_core/actions/application.py", "dummy patch",
            "kopf patches an object its handler asked to be called again later"),
    )),
    Rule("netsched.io", ("packingplans/status",), (
        Use(("patch",), "netsched/packer/controller.py", "patch_cluster_custom_object_status",
            "a plan's phase and progress"),
    )),
    Rule("", ("pods/eviction",), (
        Use(("create",), "netsched/packer/controller.py", "create_namespaced_pod_eviction",
            "evict only through the Eviction API, so PodDisruptionBudgets hold"),
        Use(("create",), "netsched/operator/pod_gangs/controller.py", "create_namespaced_pod_eviction",
            "a pod gang's unbound members whose pinned node can no longer take them"),
        Use(("create",), "netsched/operator/gpujobs/controller.py", "create_namespaced_pod_eviction",
            "a GPUJob's unbound pods whose pinned node can no longer take them"),
    )),
    Rule("policy", ("poddisruptionbudgets",), (
        Use(LIST_WATCH, "netsched/operator/packing/handlers.py", '"policy", "v1", "poddisruptionbudgets"',
            "the budgets a plan must keep"),
        Use(("list",), PODS_LIST, '"/apis/policy/v1/poddisruptionbudgets"', "each packing pass reads them"),
    )),
)

# What the gang kinds' rules (netsched.jobs.kinds, each kind's `access`) are used by, verb by verb.
GANG_USES = {
    "get": Use(("get",), "netsched/jobs/gang_size.py", "get_namespaced_custom_object",
               "a gang's size from its owning object"),
    "list": Use(("list",), "netsched/operator/forecaster/loop.py", "list_job_for_all_namespaces",
                "the forecast's batch Jobs"),
    "patch": Use(("patch",), "netsched/operator/forecaster/loop.py", "patch_namespaced_job",
                 "the forecast's annotations on batch Jobs"),
}


def gang_rules() -> tuple[Rule, ...]:
    return tuple(Rule(a.group, a.resources, tuple(GANG_USES[v] for v in a.verbs)) for a in access())


# the operator's Lease, as the chart names it
OPERATOR_LEASE_NAME = '{{ include "netsched.componentName" (dict "ctx" . "component" "operator") }}'
# Leader election of several operator replicas (--leader-lease): the Lease the chart makes, only that one.
OPERATOR_LEASE = (
    Rule("coordination.k8s.io", ("leases",), (
        Use(("get",), "netsched/operator/leadership.py", 'call(self.api, "GET", self.path',
            "read the Lease: who leads, until when"),
        Use(("update",), "netsched/operator/leadership.py", 'call(self.api, "PUT", self.path',
            "renew or take it"),
    ), resource_names=(OPERATOR_LEASE_NAME,)),
)

# Every authenticated user (whatif and why run as the user) reads the one ConfigMap that publishes the
# operator's topology levels (the chart's topology-configmap.yaml), nothing else of the namespace.
TOPOLOGY_READER = (
    Rule("", ("configmaps",), (
        Use(("get",), "netsched/foresight/published_topology.py", "configmaps/{PUBLISHED_CONFIGMAP}",
            "whatif and why read the topology levels the operator runs with"),
    ), resource_names=(PUBLISHED_CONFIGMAP,)),
)

DISCOVERY = "netsched/telemetry/discovery.py"  # lists only, each from the API server's watch cache
AGENT = (
    Rule("", ("nodes", "pods"), (
        Use(("list",), DISCOVERY, 'self._list("/api/v1/nodes"', "the peers' nodes' topology labels"),
        Use(("list",), DISCOVERY, 'self._list("/api/v1/pods"',
            "the other agents, this node's pods and their gangs' members"),
    )),
    Rule("netsched.io", ("packingplans",), (
        Use(("list",), DISCOVERY, "{plans.PLURAL}", "the nodes a plan is about to bring together"),
    )),
)

EXTENDER_RULES = [r.as_dict() for r in EXTENDER]
OPERATOR_RULES = [r.as_dict() for r in (*OPERATOR, *gang_rules())]
AGENT_RULES = [r.as_dict() for r in AGENT]

# component -> its rules, as the chart's generated template names them
COMPONENTS = {"extender": EXTENDER, "operator": OPERATOR, "operatorLease": OPERATOR_LEASE, "agent": AGENT,
              "topologyReader": TOPOLOGY_READER}
CHART_TEMPLATE = "charts/netsched/templates/_rbac-rules.tpl"  # in the repository; the *-rbac.yaml include it


def define_name(component: str) -> str:
    """The chart's named template holding `component`'s rules, e.g. netsched.extenderRules."""
    return f"netsched.{component}Rules"


def all_rules(component: str) -> tuple[Rule, ...]:
    rules = COMPONENTS[component]
    return (*rules, *gang_rules()) if component == "operator" else rules


def chart_template() -> str:
    """The chart's template of every component's rules (CHART_TEMPLATE), each with what it is for."""
    out = ["{{/*",
           "Generated by hack/render-manifests.py from netsched/devcluster/rbac.py (the one source of",
           "netsched's RBAC rules, each with the calls it exists for): do not edit. The *-rbac.yaml",
           "templates include these.",
           "*/}}"]
    for component in COMPONENTS:
        out.append(f'{{{{- define "{define_name(component)}" -}}}}')
        for rule in all_rules(component):
            for use in rule.uses:
                where = f"kopf {use.path.removeprefix(KOPF)}" if use.path.startswith(KOPF) else use.path
                line = f"{'/'.join(use.verbs)}: {use.why} ({where})"
                out += [f"# {part}" for part in textwrap.wrap(line, 100, subsequent_indent="  ")]
            out += [f"- apiGroups: [{_flow(rule.group)}]", f"  resources: [{', '.join(rule.resources)}]"]
            if rule.resource_names:
                out.append(f"  resourceNames: [{', '.join(rule.resource_names)}]")
            out.append(f"  verbs: [{', '.join(rule.verbs)}]")
        out.append("{{- end }}")
    return "\n".join(out) + "\n"


def _flow(item: str) -> str:
    """An item of a YAML flow list: as it is, but the core API group ("") quoted."""
    return item or '""'


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


def markdown_table() -> str:
    """Every rule of every component with what it is for and where the call is made, as
    docs/security-policies.md shows it (a unit test keeps the two equal)."""
    rows = ["| component | API group | resources | verbs | what for (where the call is made) |",
            "|---|---|---|---|---|"]
    for component in COMPONENTS:
        for rule in all_rules(component):
            uses = "; ".join(f"{'/'.join(u.verbs)}: {u.why} (`{u.path.replace(KOPF, 'kopf: ')}`)"
                             for u in rule.uses)
            names = f" ({', '.join(rule.resource_names)} only)" if rule.resource_names else ""
            names = names.replace(OPERATOR_LEASE_NAME, "its own Lease")
            rows.append(f"| {component} | {rule.group or 'core'} | {', '.join(rule.resources)}{names} | "
                        f"{', '.join(rule.verbs)} | {uses} |")
    return "\n".join(rows) + "\n"
