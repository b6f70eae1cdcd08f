"""`netsched operator`: start kopf with netsched's handlers, a metrics server and a health endpoint."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

import kopf
from kubernetes import client
from prometheus_client import start_http_server

from netsched.api.connect import api_client, reachable
from netsched.api.settings import summary
from netsched.api.watch import Reflector
from netsched.operator.admission import register_admission, server
from netsched.operator.cluster_index import WATCHED, ClusterIndex
from netsched.operator.config import OperatorConfig
from netsched.operator.forecaster import Forecaster
from netsched.operator.handlers import Operator, register
from netsched.operator.leadership import Alone, Election
from netsched.operator.packer_handlers import register_packer
from netsched.operator.pod_gangs import PodGangController
from netsched.packer.controller import Packer
from netsched.packing.policy import DisruptionPolicy, read_policy
from netsched.records.writer import JobRecords, default_path
from netsched.telemetry.prometheus import PrometheusFeed
from netsched.telemetry.store import TelemetryStore

log = logging.getLogger(__name__)


class PortTaken(OSError):
    """A port the operator serves on is in use."""


class WebhookUnset(ValueError):
    """--webhook-port without the certificate to serve it with."""


def run_operator(settings: OperatorConfig) -> None:
    """Run until SIGINT/SIGTERM. With `settings.leader_lease` several replicas can run: each serves the
    webhook and keeps its watches warm, and only the one the Lease elects acts (netsched.operator.leadership);
    without it, this one acts alone."""
    kubeconfig, host, packer = settings.kubeconfig, settings.host, settings.packer
    webhook = _webhook(settings)
    ports = [("--metrics-port", settings.metrics_port), ("--health-port", settings.health_port)]
    if webhook is not None:
        ports.append(("--webhook-port", settings.webhook_port))
    for flag, port in ports:
        check_port(host, port, flag)
    api = reachable(api_client(kubeconfig))  # a cluster that is not there is one line, before any log
    log.info("netsched operator settings: %s", summary(settings))
    records = settings.records or default_path()
    if kubeconfig:
        os.environ["KUBECONFIG"] = kubeconfig  # kopf's own login reads the same file
    operator = Operator(api, JobRecords(records), interval=settings.interval,
                        scheduler=settings.scheduler_name, never_fits_timeout=settings.never_fits_timeout,
                        topology=settings.topology,
                        telemetry=_telemetry(settings.prometheus_url, settings.telemetry_max_age))
    leadership = _leadership(api, settings)
    disruption = read_policy(packer.policy) if packer.policy else DisruptionPolicy()
    packing = Packer(operator.api, packer, operator.metrics, settings.scheduler_name, disruption,
                     settings.topology, leads=leadership.leads)
    cluster = ClusterIndex(on_room_change=packing.room_changed, topology=settings.topology)
    registry = kopf.OperatorRegistry()
    register(registry, operator, cluster, leads=leadership.leads)
    operator.packer_note = lambda job: packing.blocked.get(job)  # read at each use: a pass replaces it
    register_packer(registry, packing, settings.interval)
    if webhook is not None:
        register_admission(registry, operator.metrics, settings.scheduler_name, operator.core,
                           settings.topology)

        @kopf.on.startup(registry=registry)
        def serve_admission(**kwargs: Any) -> None:  # every replica serves it, leader or not
            kwargs["settings"].admission.server = webhook
    forecaster = Forecaster(operator.api, operator.records, operator.metrics, cluster,
                            settings.forecast_interval, gangs_live=lambda: bool(cluster.pod_gangs()),
                            model=settings.model, topology=settings.topology, leads=leadership.leads)
    pod_gangs = PodGangController(operator, cluster, settings.interval, leads=leadership.leads)

    def changed(leading: bool) -> None:
        operator.metrics.leader.set(int(leading))
        if leading:  # catch up now: GPUJobs, pod gangs and plans are looked at within one interval anyway
            forecaster.wake()
            packing.request(0)

    operator.metrics.leader.set(int(leadership.leads()))
    leadership.on_change(changed)

    @kopf.on.startup(registry=registry)
    def elect(**_: Any) -> None:
        leadership.start()

    @kopf.on.cleanup(registry=registry)
    def give_up(**_: Any) -> None:  # the next replica leads at once, not a lease duration later
        leadership.release()

    @kopf.on.startup(registry=registry)
    def gang_pods(**_: Any) -> None:
        pod_gangs.start()

    @kopf.on.startup(registry=registry)
    def forecast(**_: Any) -> None:
        forecaster.start()

    @kopf.on.startup(registry=registry)
    def watch(**_: Any) -> None:
        for kind in WATCHED:
            Reflector(operator.api, cluster, kind).start()

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        if kubeconfig:
            return kopf.login_with_kubeconfig(**kwargs)
        return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)

    start_http_server(settings.metrics_port, addr=host, registry=operator.metrics.registry)
    log.info("netsched operator: records in %s, metrics on :%d, health on :%d/healthz; packer %s",
             records, settings.metrics_port, settings.health_port,
             f"{disruption.mode}, budget {packer.budget:g} s, after {packer.wait:g} s"
             if packer.enabled else "off")
    # every replica runs kopf on its own: the Lease, not kopf's peering, says which one acts
    kopf.run(registry=registry, clusterwide=True, standalone=True,
             liveness_endpoint=f"http://{host}:{settings.health_port}/healthz")


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


def _webhook(settings: OperatorConfig) -> kopf.WebhookServer | None:
    """The admission webhook's server with --webhook-port, else None."""
    if not settings.webhook_port:
        return None
    if not (settings.webhook_cert_file and settings.webhook_key_file):
        raise WebhookUnset("--webhook-port needs --webhook-cert-file and --webhook-key-file: the API server "
                           "calls webhooks over HTTPS only")
    for flag, path in (("--webhook-cert-file", settings.webhook_cert_file),
                       ("--webhook-key-file", settings.webhook_key_file)):
        if not os.access(path, os.R_OK):
            raise WebhookUnset(f"{flag}={path} cannot be read: give the webhook's PEM file (in the chart, "
                               "the Secret of operator.webhook.tls, mounted at /etc/netsched/webhook)")
    return server(settings.host, settings.webhook_port, settings.webhook_cert_file, settings.webhook_key_file)


def _telemetry(prometheus_url: str | None, max_age: float) -> TelemetryStore | None:
    """Link measurements from Prometheus for the job records; None (records without links) without a URL."""
    if not prometheus_url:
        return None
    store = TelemetryStore(max_age=max_age)
    PrometheusFeed(prometheus_url, store).start()
    log.info("job records take links at job start from Prometheus at %s", prometheus_url)
    return store
