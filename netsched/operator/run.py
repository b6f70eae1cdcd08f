"""`netsched operator`: start kopf with netsched's handlers, a metrics server and a health endpoint."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import kopf
from kubernetes import client, config
from prometheus_client import start_http_server

from netsched.operator.handlers import Operator, register
from netsched.operator.records import JobRecords

log = logging.getLogger(__name__)


def run_operator(kubeconfig: str | None, records: Path, host: str = "0.0.0.0", health_port: int = 8080,
                 metrics_port: int = 9090, interval: float = 1.0) -> None:
    if kubeconfig:
        os.environ["KUBECONFIG"] = kubeconfig  # kopf's own login reads the same file
        api = config.new_client_from_config(config_file=kubeconfig)
    else:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        api = client.ApiClient()
    operator = Operator(api, JobRecords(records), interval=interval)
    registry = kopf.OperatorRegistry()
    register(registry, operator)

    @kopf.on.login(registry=registry)
    def login(**kwargs):
        if kubeconfig:
            return kopf.login_with_kubeconfig(**kwargs)
        return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)

    start_http_server(metrics_port, addr=host, registry=operator.metrics.registry)
    log.info("netsched operator: records in %s, metrics on :%d, health on :%d/healthz",
             records, metrics_port, health_port)
    kopf.run(registry=registry, clusterwide=True, standalone=True,
             liveness_endpoint=f"http://{host}:{health_port}/healthz")
