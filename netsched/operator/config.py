"""Settings of `netsched operator`: its flags, defaults and Helm values, in one place (its packer's are
netsched.packer.config.PackerConfig, under `packer`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from netsched.api.labels import SCHEDULER_NAME
from netsched.api.settings import (
    SECONDS,
    SECONDS_OR_ZERO,
    dra_gpu_drivers_setting,
    number,
    setting,
    topology_setting,
)
from netsched.api.topology import Topology
from netsched.packer.config import PackerConfig

CHART_PORTS = "the chart's probes and Service are bound to it"
CHART_EXTENDER_TLS = ("the chart passes the extender's CA and kube-scheduler's client certificate, which it "
                      "mounts, when extender.tls is on")
CHART_WEBHOOK = ("the chart passes all three with operator.webhook.enabled: port 9443, behind the Service "
                 "its MutatingWebhookConfiguration names, and the certificate Secret it mounts")


def lease_name(text: str) -> str:
    """A --leader-lease value: NAMESPACE/NAME, else argparse's one-line error naming the fix."""
    namespace, _, name = text.partition("/")
    if not (namespace and name) or "/" in name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAMESPACE/NAME: give the Lease's namespace and "
                                         "name, e.g. netsched-system/netsched-operator")
    return text


@dataclass(frozen=True)
class OperatorConfig:
    kubeconfig: str | None = setting(
        flag="--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)",
        fixed="in a cluster the pod's ServiceAccount is used")
    records: Path | None = setting(
        flag="--records", fixed="the chart mounts the records volume at /var/lib/netsched",
        help="job records file, JSON Lines (default: "
        "$XDG_STATE_HOME/netsched/job-records.jsonl; in a cluster, a path on a PVC)")
    host: str = setting("0.0.0.0", flag="--host", fixed=CHART_PORTS,
                        help="address for the health and metrics endpoints")
    health_port: int = setting(8080, flag="--health-port", fixed=CHART_PORTS,
                               help="GET /healthz (default 8080)")
    metrics_port: int = setting(9090, flag="--metrics-port", fixed=CHART_PORTS,
                                help="Prometheus /metrics (default 9090)")
    interval: float = setting(
        1.0, flag="--interval", metavar="SECONDS", parse=SECONDS, helm="operator.intervalSeconds",
        help="how often each unfinished GPUJob is reconciled (default 1)")
    forecast_interval: float = setting(
        15.0, flag="--forecast-interval", metavar="SECONDS", parse=SECONDS,
        helm="operator.forecastIntervalSeconds",
        help="how often every unfinished GPUJob's predicted start and completion are worked out again "
        "(default 15)")
    never_fits_timeout: float = setting(
        0.0, flag="--never-fits-timeout", metavar="SECONDS", parse=SECONDS_OR_ZERO,
        helm="operator.neverFitsTimeout",
        help="a GPUJob that could never fit the cluster as it is (phase Blocked, reason NeverFits) fails "
        "after this many seconds Blocked; 0 (default): it stays Blocked until nodes are added or the "
        "job is changed")
    scheduler_name: str = setting(
        SCHEDULER_NAME, flag="--scheduler-name", helm="scheduler.name",
        help="schedulerName of the pods it creates, unless a job's template sets one (default "
        "netsched: the scheduler profile that calls the extender)")
    leader_lease: str | None = setting(
        flag="--leader-lease", metavar="NAMESPACE/NAME", parse=lease_name,
        fixed="the chart elects through the Lease <release>-operator in its namespace when operator.replicas "
        "is above 1",
        help="elect the one acting replica of several through this coordination.k8s.io Lease; every replica "
        "serves the admission webhook, only the leader runs GPUJobs, the pod gangs, the forecast and the "
        "packer (default: none, this replica acts alone)")
    lease_duration: float = setting(
        15.0, flag="--lease-duration", metavar="SECONDS", parse=number(at_least=2),
        helm="operator.leaseDurationSeconds",
        help="with --leader-lease: a leader that has not renewed the Lease for this long is replaced; it "
        "stops acting after two thirds of it (default 15)")
    prometheus_url: str | None = setting(
        flag="--prometheus-url", helm="extender.telemetry.prometheusUrl",
        help="Prometheus scraping the agents: each job's links at start go "
        "into its training record (default: none; records without links)")
    model: Path | None = setting(
        flag="--model", metavar="PATH", helm="extender.model.path",
        help="predict each job's run time with this completion-time model (an artifact directory or a "
        "current.json manifest, re-read when it changes) beside the user's hint and the records "
        "(default: none; the chart passes the extender's)")
    telemetry_max_age: float = setting(
        120.0, flag="--telemetry-max-age", metavar="SECONDS", parse=SECONDS,
        helm="extender.telemetry.maxAgeSeconds",
        help="a link measured longer ago than this is not recorded (default 120)")
    extender_url: str | None = setting(
        flag="--extender-url", metavar="URL", fixed="the chart passes its extender's Service",
        help="ask this extender where each member of a gang goes as its gates lift, and pin each pod to its "
        "node (default: none; gangs are released into their domain and placed pod by pod)")
    extender_ca_file: Path | None = setting(
        flag="--extender-ca-file", metavar="PEM", fixed=CHART_EXTENDER_TLS,
        help="with an https --extender-url: the CA its serving certificate is verified with (default: the "
        "system's)")
    extender_cert_file: Path | None = setting(
        flag="--extender-cert-file", metavar="PEM", fixed=CHART_EXTENDER_TLS,
        help="with an https --extender-url: the client certificate presented to it (an extender with "
        "--client-ca-file answers no other client)")
    extender_key_file: Path | None = setting(
        flag="--extender-key-file", metavar="PEM", fixed=CHART_EXTENDER_TLS,
        help="the private key of --extender-cert-file")
    webhook_port: int = setting(
        0, flag="--webhook-port", fixed=CHART_WEBHOOK,
        help="serve the admission webhook that puts the gang gate on the pods of recognised gangs (batch "
        "Jobs, JobSets, ...) at creation, on this port over HTTPS with --webhook-cert-file and "
        "--webhook-key-file (default 0: no webhook)")
    webhook_cert_file: Path | None = setting(
        flag="--webhook-cert-file", metavar="PEM", fixed=CHART_WEBHOOK,
        help="the webhook's serving certificate, valid for the name the API server calls it by; "
        "read again when it changes")
    webhook_key_file: Path | None = setting(
        flag="--webhook-key-file", metavar="PEM", fixed=CHART_WEBHOOK,
        help="the private key of --webhook-cert-file")
    topology: Topology = topology_setting()
    dra_gpu_drivers: tuple[str, ...] = dra_gpu_drivers_setting()
    packer: PackerConfig = field(default_factory=PackerConfig)
