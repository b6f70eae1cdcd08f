"""`netsched pack`, `whatif` and `why`: the dry-run answers for people at a terminal, their settings and
their exit codes (2: bad input, a kind netsched does not gang; `why` 1: no such object); their entries
in the CLI."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netsched.api.settings import option, parse_topology
from netsched.api.subcommand import Command
from netsched.api.topology import PRESETS, PUBLISHED_CONFIGMAP, PUBLISHED_NAMESPACE, BadTopology, Topology

if TYPE_CHECKING:
    from kubernetes import client

    from netsched.foresight.manifests import Document
    from netsched.foresight.whatif import WhatIfError
    from netsched.operator.gang_placer import GangPlacer

EXTENDER_ENV = "NETSCHED_EXTENDER_URL"  # where whatif asks where a gang would go, by default
TOPOLOGY_ENV = "NETSCHED_TOPOLOGY"  # what whatif and why take the cluster's topology from by default
KUBECONFIG_HELP = "kubeconfig file (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)"


def _dra_gpu_drivers() -> tuple[str, ...]:
    return option((), flag="--dra-gpu-driver", metavar="DRIVER",
                  help="a DRA driver whose devices count as GPUs, as the operator's --dra-gpu-driver (repeat "
                  "for more; default: none, only allocatable nvidia.com/gpu)")



@dataclass(frozen=True)
class PackSettings:
    snapshot: str | None = option(flag="snapshot", help="snapshot file (JSON or YAML)")
    from_cluster: bool = option(False, flag="--from-cluster",
                                help="snapshot the live cluster instead (read only: a dry run)")
    kubeconfig: str | None = option(flag="--kubeconfig", help=f"with --from-cluster: {KUBECONFIG_HELP}")
    context: str | None = option(flag="--context", help="with --from-cluster: the kubeconfig context to use "
                                 "(default: its current one)")
    save_snapshot: str | None = option(flag="--save-snapshot", metavar="FILE",
                                       help="also write the snapshot solved, as JSON")
    budget: float = option(1.0, flag="--budget", metavar="SECONDS",
                           help="wall-clock limit for the whole solve (default 1)")
    policy: str | None = option(
        flag="--policy", metavar="FILE",
        help="disruption policy, YAML or JSON, as the operator's --pack-policy (default: priced, "
        "as the operator's)")
    json: bool = option(False, flag="--json", help="print the plan as JSON")
    dra_gpu_drivers: tuple[str, ...] = _dra_gpu_drivers()


def pack_main(settings: PackSettings) -> int:
    import yaml

    from netsched.packing.policy import DisruptionPolicy, InvalidPolicy, read_policy
    from netsched.packing.problem import Problem
    from netsched.packing.report import plan_json, plan_text
    from netsched.packing.solver import solve

    if bool(settings.snapshot) == settings.from_cluster:
        print("netsched: error: pack: give a snapshot file or --from-cluster (not both)", file=sys.stderr)
        return 2
    if settings.from_cluster:
        from netsched.packer.live_cluster import problem_from_cluster

        problem = problem_from_cluster(_connect(settings.kubeconfig, settings.context),
                                       dra_gpu_drivers=settings.dra_gpu_drivers)
    else:
        try:
            problem = Problem.from_json(yaml.safe_load(Path(str(settings.snapshot)).read_text()))
        except (OSError, yaml.YAMLError, ValueError, TypeError) as exc:
            print(f"netsched: error: pack {settings.snapshot}: {exc}", file=sys.stderr)
            return 2
    try:
        disruption = read_policy(Path(settings.policy)) if settings.policy else DisruptionPolicy()
    except InvalidPolicy as exc:
        print(f"netsched: error: pack: {exc}", file=sys.stderr)
        return 2
    if settings.save_snapshot:
        Path(settings.save_snapshot).write_text(json.dumps(problem.to_json(), indent=1))
    plan = solve(problem, budget=settings.budget, policy=disruption.resolve(problem))
    print(json.dumps(plan_json(problem, plan), indent=2) if settings.json else plan_text(problem, plan))
    if settings.from_cluster and not settings.json:
        print("dry run: nothing in the cluster was changed")
    return 0


def _namespace() -> str | None:
    return option(flag="--namespace", short="-n",
                  help="namespace (default: the kubeconfig context's, else default)")


def _output() -> str:
    return option("text", flag="--output", short="-o", choices=("text", "json", "yaml"),
                  help="text for people (default), json or yaml for tools")


def _kubeconfig() -> str | None:
    return option(flag="--kubeconfig", help=KUBECONFIG_HELP)


def _context() -> str | None:
    return option(flag="--context", help="the kubeconfig context to use (default: its current one)")


def _topology() -> Topology | None:
    return option(flag="--topology", parse=parse_topology, metavar="LEVELS",
                  help="the cluster's topology levels, as the operator's --topology (a preset: "
                  f"{', '.join(PRESETS)}, or NAME=LABEL,... widest first); default ${TOPOLOGY_ENV} if set, "
                  f"else the levels the cluster publishes (ConfigMap {PUBLISHED_CONFIGMAP} in "
                  f"${{NETSCHED_NAMESPACE:-{PUBLISHED_NAMESPACE}}}), else netsched's")


PUBLISHED = "published"  # _topology_of: read the levels the cluster publishes, once connected


def _topology_of(settings: WhatIfSettings | WhySettings, command: str) -> Topology | str | None:
    """The --topology given, else ${TOPOLOGY_ENV}'s, else PUBLISHED (the cluster's, read once connected:
    `_cluster_topology`); None (said on stderr) when the variable holds no topology."""
    if settings.topology is not None:
        return settings.topology
    if not os.environ.get(TOPOLOGY_ENV):
        return PUBLISHED
    try:
        return Topology.parse(os.environ[TOPOLOGY_ENV])
    except BadTopology as exc:
        print(f"netsched: error: {command}: ${TOPOLOGY_ENV}: {exc}", file=sys.stderr)
        return None


def _cluster_topology(api: client.ApiClient, chosen: Topology | str) -> tuple[Topology, str | None]:
    """The topology `_topology_of` chose, else the one the cluster publishes, with a note when none could
    be read."""
    if isinstance(chosen, Topology):
        return chosen, None
    from netsched.foresight.published_topology import NAMESPACE_ENV, published

    return published(api, os.environ.get(NAMESPACE_ENV) or PUBLISHED_NAMESPACE)


def _connect(kubeconfig: str | None, context: str | None) -> Any:
    """The API client of the kubeconfig and context, once its server answered."""
    from netsched.api.connect import api_client, reachable

    return reachable(api_client(kubeconfig, context=context))


def _namespace_of(settings: WhatIfSettings | WhySettings) -> str:
    from netsched.api.connect import default_namespace

    return settings.namespace or default_namespace(settings.kubeconfig, settings.context)


@dataclass(frozen=True, kw_only=True)
class WhatIfSettings:
    filename: str = option(flag="--filename", short="-f", required=True,
                           help="GPUJob, Job, JobSet, LeaderWorkerSet or Kubeflow job (PyTorchJob, ...) "
                           "manifests: a YAML or JSON file "
                           "(several YAML documents: one answer "
                           "each), a directory of .yaml/.yml/.json files, or - for stdin")
    records: str | None = option(flag="--records", metavar="FILE",
                                 help="the operator's job records, to learn run times from "
                                 "(default: only the finished GPUJobs still in the cluster)")
    budget: float = option(1.0, flag="--budget", metavar="SECONDS",
                           help="wall-clock limit of the packer's dry run (default 1)")
    extender_url: str | None = option(
        flag="--extender-url", metavar="URL",
        help=f"ask netsched's extender where each gang would go, as the operator asks it when it releases "
        f"the gang (default: ${EXTENDER_ENV}; without one, where it would run is estimated from free room)")
    extender_ca_file: str | None = option(
        flag="--extender-ca-file", metavar="PEM",
        help="with an https --extender-url: the CA its certificate is verified with (default: the system's)")
    extender_cert_file: str | None = option(
        flag="--extender-cert-file", metavar="PEM",
        help="with an https --extender-url: the client certificate it asks for (mutual TLS: the one the "
        "chart issues kube-scheduler and the operator)")
    extender_key_file: str | None = option(
        flag="--extender-key-file", metavar="PEM", help="the private key of --extender-cert-file")
    namespace: str | None = _namespace()
    output: str = _output()
    kubeconfig: str | None = _kubeconfig()
    context: str | None = _context()
    topology: Topology | None = _topology()
    dra_gpu_drivers: tuple[str, ...] = _dra_gpu_drivers()


@dataclass(frozen=True, kw_only=True)
class WhySettings:
    job: str = option(flag="job", required=True,
                      help="a GPUJob's name, or KIND/NAME for a job/NAME, jobset/NAME or lws/NAME")
    namespace: str | None = _namespace()
    output: str = _output()
    kubeconfig: str | None = _kubeconfig()
    context: str | None = _context()
    topology: Topology | None = _topology()
    dra_gpu_drivers: tuple[str, ...] = _dra_gpu_drivers()


def whatif_main(settings: WhatIfSettings) -> int:
    """One answer per object the API server and the operator would accept; each other object refused in
    one line on stderr (exit 2; the others are still answered)."""
    from netsched.foresight.manifests import ManifestError, read_documents
    from netsched.foresight.whatif import WhatIfError, render
    from netsched.foresight.whatif_workloads import render_workload
    from netsched.operator.gang_placer import BadExtenderTLS

    topology = _topology_of(settings, "whatif")
    if topology is None:
        return 2
    try:
        documents = read_documents(settings.filename)
        placer = _placer(settings)
    except (ManifestError, BadExtenderTLS) as exc:
        print(f"netsched: error: whatif: {exc}", file=sys.stderr)
        return 2
    answers, refused = [], 0
    for doc, outcome in _whatif_outcomes(documents, settings, topology, placer):
        if isinstance(outcome, WhatIfError):
            print(f"netsched: error: whatif: {doc.label}: {outcome}", file=sys.stderr)
            refused += 1
        else:
            answers.append(outcome)
    if settings.output == "text":
        if answers:
            print("\n\n".join(render_workload(a) if "workload" in a else render(a) for a in answers))
    elif answers or len(documents) > 1:  # one object in: its answer; several: a list of the answers
        print(_formatted(answers[0] if len(documents) == 1 else answers, settings.output))
    return 2 if refused else 0


def _placer(settings: WhatIfSettings) -> GangPlacer | None:
    """The extender to ask where each gang would go (--extender-url or $NETSCHED_EXTENDER_URL), with the
    TLS files given; BadExtenderTLS names the flag whose file cannot be used."""
    from netsched.operator.gang_placer import GangPlacer, tls_context

    url = settings.extender_url or os.environ.get(EXTENDER_ENV)
    if not url:
        return None
    files = (settings.extender_ca_file, settings.extender_cert_file, settings.extender_key_file)
    context = tls_context(*(Path(f) if f else None for f in files))
    return GangPlacer(url, context=context, log_failures=False)


def _whatif_outcomes(documents: list[Document], settings: WhatIfSettings, topology: Topology | str,
                     placer: GangPlacer | None = None) -> Iterator[tuple[Document, dict | WhatIfError]]:
    """Each document with its answer or why there is none: the API server's verdict on the object (and,
    for a GPUJob, on the pods the operator would make from it; a JobSet or LeaderWorkerSet it does not
    serve goes on unchecked, said in its answer), the operator's own checks, then the answer from one
    read of the cluster."""
    from netsched.api.gpujob import KIND
    from netsched.foresight.admission import (
        NotServed,
        admitted,
        defaulted,
        pods_admitted,
        serves_group,
        templates_admitted,
    )
    from netsched.foresight.suspension import KUEUE_GROUP, QUEUE_LABEL
    from netsched.foresight.whatif import (
        Cluster,
        WhatIfError,
        as_submitted,
        check,
        history,
        start_loading_packer,
        what_if,
    )
    from netsched.foresight.whatif_workloads import what_if_workload

    if any(doc.body is not None and doc.body.get("kind") == KIND for doc in documents):
        start_loading_packer()  # a GPUJob that does not fit now gets the packer's dry run
    api: client.ApiClient | None = None  # connected at the first object to ask about
    namespace = _namespace_of(settings)
    accepted = []
    for doc in documents:
        try:
            if doc.body is None:
                raise WhatIfError(doc.error)
            api = api or _connect(settings.kubeconfig, settings.context)
            body = defaulted(doc.body)
            try:
                stored, unchecked = admitted(api, body, namespace), None
            except NotServed as exc:
                templates_admitted(api, body, namespace)
                stored, unchecked = body, str(exc)
            accepted.append((doc, as_submitted(stored, namespace), unchecked))
        except WhatIfError as exc:
            yield doc, exc
    if api is None or not accepted:
        return
    levels, note = _cluster_topology(api, topology)
    cluster = Cluster.read(api, levels, settings.dra_gpu_drivers)
    cluster = replace(cluster, placer=placer, notes=(*cluster.notes, *([note] if note else [])))
    past = history(cluster, Path(settings.records) if settings.records else None)
    # asked only when a workload names a Kueue queue: is there a Kueue to admit it
    kueue = serves_group(api, KUEUE_GROUP) if any(
        QUEUE_LABEL in ((m.get("metadata") or {}).get("labels") or {}) for _, m, _ in accepted) else None
    for doc, manifest, unchecked in accepted:
        try:
            if manifest["kind"] != KIND:
                where = manifest["metadata"]["namespace"]
                yield doc, what_if_workload(cluster, manifest, where, _opted_in(api, where), unchecked, past,
                                            kueue_installed=kueue)
                continue
            check(cluster, manifest)
            pods_admitted(api, manifest)
            yield doc, what_if(cluster, manifest, past, budget=settings.budget)
        except WhatIfError as exc:
            yield doc, exc
        except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError) as exc:
            # a value the checks above let through and the answer cannot use: this object gets no
            # answer, the others still do
            yield doc, WhatIfError(f"netsched cannot answer for it: {type(exc).__name__}: {exc} (a bug in "
                                   "netsched's checks: please report it with this manifest)")


def _opted_in(api: client.ApiClient, namespace: str) -> bool | None:
    """Does `namespace` carry the label that opts it in to netsched's gang-gate webhook (None: its labels
    cannot be read, e.g. no permission to get namespaces)?"""
    from kubernetes import client as k8s

    from netsched.api.labels import GANG_OPT_IN_LABEL, GANG_OPT_IN_VALUE

    try:
        labels = k8s.CoreV1Api(api).read_namespace(namespace).metadata.labels or {}
    except k8s.ApiException:
        return None
    return labels.get(GANG_OPT_IN_LABEL) == GANG_OPT_IN_VALUE


def why_main(settings: WhySettings) -> int:
    """Exit 2 for a kind `why` does not know, 1 for an object not found."""
    from netsched.api.gpujob import KIND
    from netsched.foresight.whatif import Cluster, WhatIfError
    from netsched.foresight.why import render_why, why
    from netsched.foresight.why_workloads import Live, UnknownKind, render_why_workload, target, why_workload

    topology = _topology_of(settings, "why")
    if topology is None:
        return 2
    try:
        kind, name = target(settings.job)
    except UnknownKind as exc:
        print(f"netsched: error: why: {exc}", file=sys.stderr)
        return 2
    try:
        api = _connect(settings.kubeconfig, settings.context)
        namespace = _namespace_of(settings)
        levels, note = _cluster_topology(api, topology)
        if note:
            print(f"netsched: note: {note}", file=sys.stderr)
        if kind == KIND:
            answer = why(Cluster.read(api, levels, settings.dra_gpu_drivers), namespace, name)
        else:
            live = Live.read(api, kind, namespace, name)
            answer = why_workload(Cluster.read(api, levels, settings.dra_gpu_drivers), live, kind,
                                  namespace, name)
    except WhatIfError as exc:
        print(f"netsched: error: why: {exc}", file=sys.stderr)
        return 1
    if settings.output != "text":
        print(_formatted(answer, settings.output))
    else:
        print(render_why(answer) if kind == KIND else render_why_workload(answer))
    return 0


def _formatted(answer: dict | list[dict], output: str) -> str:
    import yaml

    return json.dumps(answer, indent=2) if output == "json" else yaml.safe_dump(answer, sort_keys=False)


PACK = Command(
    "pack", "solve a snapshot with the CP-SAT packer (dry run: prints the plan)", PackSettings, pack_main,
    "Read a snapshot (JSON or YAML: nodes, pods, budgets; see netsched/packing/problem.py), find the "
    "placement that serves the highest priorities best with the fewest pods moved or evicted, and print "
    "it. Nothing is changed in any cluster.")
WHATIF = Command(
    "whatif", "what a GPUJob, Job, JobSet, LeaderWorkerSet or Kubeflow job would do if submitted now",
    WhatIfSettings, whatif_main,
    "Read the live cluster once and answer, with the operator's own rules: would the GPUJob fit now, where "
    "would it run, how long would it run and when would it start and finish, which jobs go before it, and "
    "what the packer would evict or move to make room. Nothing is created or changed.")
WHY = Command(
    "why", "why a GPUJob (or job/NAME, jobset/NAME, lws/NAME) waits and what would change it", WhySettings,
    why_main,
    "The GPUJob's Schedulable reason and message (the smallest change that would let it run), its "
    "predicted start and completion, and the room per node, rack or zone now. For job/NAME, jobset/NAME "
    "or lws/NAME: its gangs' gated pods, the gang controller's last Event on each, where its pods run and "
    "its predicted-start/finish annotations.")
