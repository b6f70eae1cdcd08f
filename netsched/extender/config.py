"""Settings of `netsched extender`: its flags, defaults and Helm values, in one place."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from netsched.api.settings import SECONDS, dra_gpu_drivers_setting, number, setting, topology_setting
from netsched.api.topology import Topology
from netsched.extender.holds import HOLD_SECONDS

IN_CLUSTER = "in a cluster the pod's ServiceAccount is used"
CHART_PORT = "the chart's Service and probes are bound to it"
CHART_GPU_TABLE = ("the chart writes its gpuCapabilities value to a ConfigMap, mounts it and passes "
                   "this flag when the value is not empty")
CHART_TLS = ("the chart passes both with extender.tls.enabled: the certificate Secret it mounts is "
             "extender.tls.secretName's, or one the chart makes")
CHART_MTLS = ("the chart passes it with extender.tls.enabled and extender.tls.clientAuth: the CA of the "
              "client certificate it gives its kube-scheduler, or extender.tls.clientCABundle")


@dataclass(frozen=True)
class ExtenderConfig:
    kubeconfig: str | None = setting(
        flag="--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)",
        fixed=IN_CLUSTER)
    host: str = setting("0.0.0.0", flag="--host", help="address to listen on (default 0.0.0.0)",
                        fixed=CHART_PORT)
    port: int = setting(8888, flag="--port", fixed=CHART_PORT,
                        help="the scheduling port, kube-scheduler's: filter, prioritize, preempt "
                        "(default 8888)")
    metrics_port: int = setting(
        8889, flag="--metrics-port", fixed=CHART_PORT,
        help="port of /healthz and /readyz (open), /metrics and /debug/decisions (for a bearer token the "
        "API server accepts, with the right to them: docs/security.md); HTTPS with --tls-cert-file "
        "(default 8889)")
    tls_cert_file: Path | None = setting(
        flag="--tls-cert-file", metavar="PEM", fixed=CHART_TLS,
        help="serve HTTPS with this certificate (with --tls-private-key-file); kube-scheduler's "
        "extender entry then needs an https urlPrefix and a tlsConfig that trusts it (default: HTTP)")
    tls_private_key_file: Path | None = setting(
        flag="--tls-private-key-file", metavar="PEM", fixed=CHART_TLS,
        help="the private key of --tls-cert-file")
    client_ca_file: Path | None = setting(
        flag="--client-ca-file", metavar="PEM", fixed=CHART_MTLS,
        help="mutual TLS on the scheduling port: only a client whose certificate this CA signed "
        "(kube-scheduler with certFile and keyFile in its extender tlsConfig) completes the handshake; "
        "needs --tls-cert-file (default: any client)")
    shortlist: int = setting(
        1, flag="--shortlist", metavar="N", parse=number(at_least=0, kind=int), helm="extender.shortlist",
        help="filter hands back at most the N best nodes of the best network tier "
        "(default 1: one scheduling round trip; 0 returns every feasible node)")
    max_cache_age: float = setting(
        30.0, flag="--max-cache-age", metavar="SECONDS", parse=SECONDS, helm="extender.maxCacheAge",
        help="oldest cache the extender answers from; older means filter returns Error "
        "and kube-scheduler decides alone if the extender is ignorable (default 30)")
    hold_seconds: float = setting(
        HOLD_SECONDS, flag="--hold-seconds", metavar="SECONDS", parse=SECONDS, helm="extender.holdSeconds",
        help="a job's first node keeps the rest of its room for the job's other replicas this long "
        "after that pod was bound; give every replica the same value (default 15)")
    prometheus_url: str | None = setting(
        flag="--prometheus-url", helm="extender.telemetry.prometheusUrl",
        help="read link telemetry (the agents' metrics) from this "
        "Prometheus, e.g. http://prometheus:9090 (default: none; topology only)")
    telemetry_max_age: float = setting(
        120.0, flag="--telemetry-max-age", metavar="SECONDS", parse=SECONDS,
        helm="extender.telemetry.maxAgeSeconds",
        help="a link measured longer ago than this is unknown, never used (default 120)")
    # The chart derives the path from extender.model.source too (the image's model, a claim, or none).
    model: Path | None = setting(
        flag="--model", metavar="PATH", helm="extender.model.path",
        help="score by this completion-time model: an artifact directory or a current.json "
        "manifest from `netsched train`/`retrain` (default: none; the topology heuristic). "
        "Re-read when its files change; a bad artifact falls back to the heuristic")
    model_reload_seconds: float = setting(
        5.0, flag="--model-reload-seconds", metavar="SECONDS", parse=SECONDS,
        helm="extender.model.reloadSeconds",
        help="how often the model's files are checked for a new artifact (default 5)")
    gpu_table: Path | None = setting(
        flag="--gpu-table", metavar="FILE", fixed=CHART_GPU_TABLE,
        help="GPU capability table (JSON or YAML: product -> tflops16, tflopsFp32, memoryBandwidthGBps, "
        "memoryGiB) extending netsched's built-in one for the completion-time model's GPU features "
        "(netsched/models/gpus.py)")
    topology: Topology = topology_setting()
    dra_gpu_drivers: tuple[str, ...] = dra_gpu_drivers_setting()
    explain_events: bool = setting(
        True, flag="--no-explain-events", helm="extender.explainEvents",
        help="do not write a NetworkPlacement event on each placed pod")
