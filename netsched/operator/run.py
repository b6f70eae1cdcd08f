"""`netsched operator`: start kopf with netsched's handlers, a metrics server and a health endpoint."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import kopf
from prometheus_client import start_http_server

from netsched.api.connect import api_client
from netsched.api.labels import SCHEDULER_NAME
from netsched.operator.handlers import Operator, register
from netsched.operator.packer import Packer, PackerConfig, register_packer
from netsched.operator.records import JobRecords
from netsched.telemetry.prometheus import PrometheusFeed
from netsched.telemetry.store import TelemetryStore

log = logging.getLogger(__name__)


def run_operator(kubeconfig: str | None, records: Path, host: str = "0.0.0.0", health_port: int = 8080,
                 metrics_port: int = 9090, interval: float = 1.0, peering: str | None = None,
                 scheduler: str = SCHEDULER_NAME, packer: PackerConfig | None = None,
                 prometheus_url: str | None = None, telemetry_max_age: float = 120.0) -> None:
    """Run until SIGINT/SIGTERM. With `peering` (a ClusterKopfPeering name) several replicas
    can run and only the one kopf elects acts; without it, this one acts alone."""
    if kubeconfig:
        os.environ["KUBECONFIG"] = kubeconfig  # kopf's own login reads the same file
    operator = Operator(api_client(kubeconfig), JobRecords(records), interval=interval, scheduler=scheduler,
                        telemetry=_telemetry(prometheus_url, telemetry_max_age))
    packer = packer or PackerConfig()
    registry = kopf.OperatorRegistry()
    register(registry, operator)
    register_packer(registry, Packer(operator.api, packer, operator.metrics, scheduler), interval)

    @kopf.on.login(registry=registry)
    def login(**kwargs):
        if kubeconfig:
            return kopf.login_with_kubeconfig(**kwargs)
        return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)

    start_http_server(metrics_port, addr=host, registry=operator.metrics.registry)
    log.info("netsched operator: records in %s, metrics on :%d, health on :%d/healthz; packer %s",
             records, metrics_port, health_port,
             f"budget {packer.budget:g} s, after {packer.wait:g} s" if packer.enabled else "off")
    kopf.run(registry=registry, clusterwide=True, standalone=peering is None, peering_name=peering,
             liveness_endpoint=f"http://{host}:{health_port}/healthz")


def _telemetry(prometheus_url: str | None, max_age: float) -> TelemetryStore | None:
    """Link measurements from Prometheus for the job records; None (records without links) without a URL."""
    if not prometheus_url:
        return None
    store = TelemetryStore(max_age=max_age)
    PrometheusFeed(prometheus_url, store).start()
    log.info("job records take links at job start from Prometheus at %s", prometheus_url)
    return store
