"""`netsched operator`: the manager. It makes what the loops share (the API client, one set of metrics,
the ClusterIndex, the AdmissionGate, the election), makes each loop (gpujobs, pod_gangs, webhook,
forecaster, packing), registers their kopf handlers, starts them, and runs kopf with a metrics server
and a health endpoint."""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from typing import Any

import kopf
from kubernetes import client
from prometheus_client import start_http_server

from netsched.api.connect import api_client, reachable
from netsched.api.settings import summary
from netsched.api.watch import Reflector
from netsched.operator.admission_gate import AdmissionGate
from netsched.operator.cluster_index import ClusterIndex
from netsched.operator.config import OperatorConfig
from netsched.operator.forecaster.loop import Forecaster
from netsched.operator.gang_placer import GangPlacer, tls_context
from netsched.operator.gpujobs import handlers as gpujob_handlers
from netsched.operator.gpujobs.controller import GPUJobController
from netsched.operator.leadership import Alone, Election
from netsched.operator.metrics import OperatorMetrics
from netsched.operator.packing import handlers as packing_handlers
from netsched.operator.pod_gangs.controller import PodGangController
from netsched.operator.webhook import handlers as webhook_handlers
from netsched.operator.webhook.server import webhook_server
from netsched.packer.controller import Packer
from netsched.packing.policy import DisruptionPolicy, read_policy
from netsched.records.writer import JobRecords, default_path
from netsched.telemetry.prometheus import PrometheusFeed
from netsched.telemetry.store import TelemetryStore

log = logging.getLogger(__name__)


class PortTaken(OSError):
    """A port the operator serves on is in use."""


@dataclass(frozen=True)
class Loops:
    """The loops of one operator process and what they share."""
    records: JobRecords
    metrics: OperatorMetrics
    leadership: Election | Alone
    cluster: ClusterIndex
    gpujobs: GPUJobController
    packer: Packer
    disruption: DisruptionPolicy  # the packer's
    forecaster: Forecaster
    pod_gangs: PodGangController


def run_operator(settings: OperatorConfig) -> None:
    """Run until SIGINT/SIGTERM. With `settings.leader_lease` several replicas can run: each serves the
    webhook and keeps its watches warm, and only the one the Lease elects acts (netsched.operator.leadership);
    without it, this one acts alone."""
    webhook = webhook_server(settings)
    _check_ports(settings, webhook is not None)
    api = reachable(api_client(settings.kubeconfig))  # a cluster that is not there: one line, before any log
    log.info("netsched operator settings: %s", summary(settings))
    if settings.kubeconfig:
        os.environ["KUBECONFIG"] = settings.kubeconfig  # kopf's own login reads the same file
    loops = _loops(api, settings)
    registry = _registry(api, loops, settings, webhook is not None)
    # the handlers below keep the ids kopf has always known them by: run_operator.<locals>.<name>
    if webhook is not None:
        @kopf.on.startup(registry=registry)
        def serve_admission(**kwargs: Any) -> None:  # every replica serves it, leader or not
            kwargs["settings"].admission.server = webhook
    _follow_leadership(loops)

    @kopf.on.startup(registry=registry)
    def elect(**_: Any) -> None:
        loops.leadership.start()

    @kopf.on.cleanup(registry=registry)
    def give_up(**_: Any) -> None:  # the next replica leads at once, not a lease duration later
        loops.leadership.release()

    @kopf.on.startup(registry=registry)
    def gang_pods(**_: Any) -> None:
        loops.pod_gangs.start()

    @kopf.on.startup(registry=registry)
    def forecast(**_: Any) -> None:
        loops.forecaster.start()

    @kopf.on.startup(registry=registry)
    def watch(**_: Any) -> None:
        for kind in loops.cluster.kinds:
            Reflector(api, loops.cluster, kind).start()

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        if settings.kubeconfig:
            return kopf.login_with_kubeconfig(**kwargs)
        return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)

    _serve_metrics(settings, loops)
    # every replica runs kopf on its own: the Lease, not kopf's peering, says which one acts
    kopf.run(registry=registry, clusterwide=True, standalone=True,
             liveness_endpoint=f"http://{settings.host}:{settings.health_port}/healthz")


def _check_ports(settings: OperatorConfig, webhook: bool) -> None:
    ports = [("--metrics-port", settings.metrics_port), ("--health-port", settings.health_port)]
    if webhook:
        ports.append(("--webhook-port", settings.webhook_port))
    for flag, port in ports:
        check_port(settings.host, port, flag)


def _loops(api: client.ApiClient, settings: OperatorConfig) -> Loops:
    """Each loop, given what it shares with the others: the GPUJob controller and the pod gangs one
    AdmissionGate, every loop one set of metrics and one election, most one ClusterIndex."""
    records = JobRecords(settings.records or default_path())
    metrics, gate = OperatorMetrics(), AdmissionGate()
    metrics.report.watch(records, settings.model)
    placer = GangPlacer(settings.extender_url, metrics, context=tls_context(
        settings.extender_ca_file, settings.extender_cert_file, settings.extender_key_file))
    gpujobs = GPUJobController(api, records, metrics, interval=settings.interval, gate=gate, placer=placer,
                               scheduler=settings.scheduler_name, topology=settings.topology,
                               never_fits_timeout=settings.never_fits_timeout,
                               telemetry=_telemetry(settings.prometheus_url, settings.telemetry_max_age))
    leadership = _leadership(api, settings)
    disruption = read_policy(settings.packer.policy) if settings.packer.policy else DisruptionPolicy()
    packer = Packer(api, settings.packer, metrics, settings.scheduler_name, disruption, settings.topology,
                    leads=leadership.leads, dra_gpu_drivers=settings.dra_gpu_drivers)
    cluster = ClusterIndex(on_room_change=packer.room_changed, topology=settings.topology,
                           dra_gpu_drivers=settings.dra_gpu_drivers)
    gpujobs.packer_note = lambda job: packer.blocked.get(job)  # read at each use: a pass replaces it
    forecaster = Forecaster(api, records, metrics, cluster, settings.forecast_interval,
                            gangs_live=lambda: bool(cluster.pod_gangs()), model=settings.model,
                            topology=settings.topology, leads=leadership.leads)
    pod_gangs = PodGangController(api, metrics, gate, cluster, settings.topology, settings.interval,
                                  leads=leadership.leads, placer=placer)
    return Loops(records, metrics, leadership, cluster, gpujobs, packer, disruption, forecaster, pod_gangs)


def _registry(api: client.ApiClient, loops: Loops, settings: OperatorConfig,
              webhook: bool) -> kopf.OperatorRegistry:
    """The loops' own kopf handlers, in the order kopf has always been given them."""
    registry = kopf.OperatorRegistry()
    gpujob_handlers.register(registry, loops.gpujobs, loops.cluster, leads=loops.leadership.leads)
    packing_handlers.register(registry, loops.packer, settings.interval)
    if webhook:
        webhook_handlers.register(registry, loops.metrics, settings.scheduler_name, client.CoreV1Api(api),
                                  settings.topology)
    return registry


def _follow_leadership(loops: Loops) -> None:
    """The leader gauge follows the election; a replica that comes to lead catches up at once."""
    def changed(leading: bool) -> None:
        loops.metrics.leader.set(int(leading))
        if leading:  # catch up now: GPUJobs, pod gangs and plans are looked at within one interval anyway
            loops.forecaster.wake()
            loops.packer.request(0)

    loops.metrics.leader.set(int(loops.leadership.leads()))
    loops.leadership.on_change(changed)


def _serve_metrics(settings: OperatorConfig, loops: Loops) -> None:
    start_http_server(settings.metrics_port, addr=settings.host, registry=loops.metrics.registry)
    packer = settings.packer
    log.info("netsched operator: records in %s, metrics on :%d, health on :%d/healthz; packer %s",
             loops.records.path, settings.metrics_port, settings.health_port,
             f"{loops.disruption.mode}, budget {packer.budget:g} s, after {packer.wait:g} s"
             if packer.enabled else "off")


def _leadership(api: client.ApiClient, settings: OperatorConfig) -> Election | Alone:
    if settings.leader_lease is None:
        return Alone()
    namespace, name = settings.leader_lease.split("/")
    return Election(api, namespace, name, settings.lease_duration)


def check_port(host: str, port: int, flag: str) -> None:
    """Said before anything starts: a taken port would otherwise end the operator (or kopf's health
    server) later, with a traceback that names neither the port nor the flag."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise PortTaken(f"{host}:{port} ({flag}) is in use ({exc.strerror}): stop what serves there, "
                            f"or give {flag} another port") from exc


def _telemetry(prometheus_url: str | None, max_age: float) -> TelemetryStore | None:
    """Link measurements from Prometheus for the job records; None (records without links) without a URL."""
    if not prometheus_url:
        return None
    store = TelemetryStore(max_age=max_age)
    PrometheusFeed(prometheus_url, store).start()
    log.info("job records take links at job start from Prometheus at %s", prometheus_url)
    return store
