"""`netsched dev-cluster`: a real Kubernetes control plane on 127.0.0.1, no Docker.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK run as
local processes built from Go modules; KWOK plays the kubelets of N fake GPU
nodes. Everything lives under one directory: PKI, kubeconfigs, etcd data, a
state file with pids and ports, and one log per component under logs/.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import shutil
import ssl
import sys
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from kubernetes import client

from netsched.api.connect import api_client, items
from netsched.api.labels import RACK_LABEL, SCHEDULER_NAME, ZONE_LABEL
from netsched.api.topology import (
    DEFAULT_PRESET,
    PUBLISHED_CONFIGMAP,
    PUBLISHED_KEY,
    PUBLISHED_NAMESPACE,
    Topology,
)
from netsched.devcluster import audit, processes
from netsched.devcluster import kueue as kueuelib
from netsched.devcluster import pki as pkilib
from netsched.devcluster.binaries import ensure_binaries, ensure_kueue, kubernetes_minor, normalise_minor
from netsched.devcluster.crds import install_crds
from netsched.devcluster.feature_gates import feature_gate_args, one_feature_gates_flag
from netsched.devcluster.features import component_flags
from netsched.devcluster.kwok_stages import stages_yaml
from netsched.devcluster.rbac import EXTENDER_ROLE, EXTENDER_RULES, OPERATOR_ROLE, OPERATOR_RULES, grant
from netsched.devcluster.realnode import NODE_IP, RealNode, check_prerequisites
from netsched.devcluster.scheduler_config import ExtenderSettings, ExtenderTLS, scheduler_config
from netsched.devcluster.topology import KWOK_ANNOTATION, gpu_nodes
from netsched.devcluster.wait import poll
from netsched.operator.webhook.configurations import (
    HANDLER_ID,
    LIMITS_HANDLER_ID,
    hard_limits_configuration,
    webhook_configuration,
)

EXTENDER = "netsched-extender"
OPERATOR = "netsched-operator"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", EXTENDER, "kube-scheduler", OPERATOR,
              "kwok", kueuelib.KUEUE)
NODE_COMPONENTS = ("node-net", "containerd", "kubelet", "kube-proxy")  # `real_node`, in start order
EGRESS_SELECTION = "egress-selection.yaml"  # `real_node`: the apiserver reaches the cluster through node-net
SERVICE_CIDR = "10.0.0.0/24"
POD_CIDR = "10.244.0.0/16"  # must not overlap the service range
LEASE_SECONDS = 40  # kubelet's node lease duration
NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
START_ATTEMPTS = 3  # dev-cluster starts, each on new ports, when one was taken by another process
WEBHOOK_CONFIGURATION = "netsched-gang-gate"  # the operator's admission webhooks, as the chart names them
LIMITS_CONFIGURATION = "netsched-hard-limits"


def default_dir() -> Path:
    env = os.environ.get("NETSCHED_DEV_CLUSTER_DIR")
    if env:
        return Path(env)
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state) / "netsched" / "dev-cluster"


class ClusterError(RuntimeError):
    """The dev-cluster cannot do what was asked; the message says what to do."""


@dataclass
class DevCluster:
    directory: Path = field(default_factory=default_dir)
    nodes: int = 8
    zones: int = 2
    racks_per_zone: int = 2
    # the label keys of each node's zone and rack: another scheme's keys make a cluster netsched must
    # be told the topology of (`--topology` in extender_args)
    topology_labels: tuple[str, str] = (ZONE_LABEL, RACK_LABEL)
    # a topology setting (a preset such as "gke", or NAME=LABEL,...): the nodes are labelled for its
    # levels, the extender and operator run with it as --topology, and it is published where whatif and
    # why read it (netsched.api.topology: PUBLISHED_CONFIGMAP). None: netsched's zone and rack, published
    # when `topology_labels` are netsched's own
    topology: str | None = None
    # None: run netsched's own extender and point the netsched profile at it;
    # settings with a urlPrefix: use that extender instead; run_extender=False and None: no extender.
    extender: ExtenderSettings | None = None
    run_extender: bool = True
    extender_args: tuple[str, ...] = ()  # more `netsched extender` flags, e.g. ("--model=<path>",)
    # netsched's own extender over mutual TLS, as the chart runs it: kube-scheduler presents a client
    # certificate the extender's client CA signed (pki.write_extender_pki). False: plain HTTP (benchmarks
    # whose figures predate it). Either way /metrics and /debug/* are on the metrics port, for a bearer
    # token the API server accepts and allows.
    extender_mtls: bool = True
    run_operator: bool = True  # the GPUJob operator (its CRDs are installed either way)
    operator_args: tuple[str, ...] = ()  # more `netsched operator` flags, e.g. ("--model=<path>",)
    real_node: bool = False  # one real kubelet node besides the KWOK ones (netsched.devcluster.realnode)
    kueue: bool = False  # Kueue's manager, its CRDs and webhooks (netsched.devcluster.kueue)
    # NAME=true|false for the control plane, passed where the built version needs it (feature_gates.py)
    feature_gates: tuple[str, ...] = ()
    # the Kubernetes minor ("1.37", "1.34"); None: NETSCHED_KUBERNETES, else hack/controlplane's default
    kubernetes: str | None = None
    # kube-scheduler's own gang scheduling of native PodGroups (its GenericWorkload gate) on or off; the
    # Workload/PodGroup API itself is served on every minor that has it (netsched.devcluster.features)
    kube_gang_scheduling: bool = False
    progress: Callable[[str], None] = functools.partial(print, flush=True)

    # ---- paths -------------------------------------------------------------
    @property
    def minor(self) -> str:
        """The Kubernetes minor this dev-cluster runs ("1.37")."""
        return normalise_minor(self.kubernetes) if self.kubernetes else kubernetes_minor()

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "admin.kubeconfig"

    @property
    def state_file(self) -> Path:
        return self.directory / "state.json"

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"

    @property
    def extender_url(self) -> str | None:
        """Where netsched's own extender serves kube-scheduler, when the dev-cluster runs it: https with
        `extender_mtls` (a client then needs `pki.scheduler_client_cert`, as kube-scheduler has)."""
        return self._extender_at("extender")

    @property
    def extender_metrics_url(self) -> str | None:
        """The extender's metrics port: /healthz, /readyz, and for a bearer token with the right,
        /metrics and /debug/decisions."""
        return self._extender_at("extender-metrics")

    def _extender_at(self, port: str) -> str | None:
        state = self._load()
        if EXTENDER not in state.get("components", {}):
            return None
        scheme = "https" if state.get("extender_mtls") else "http"
        return f"{scheme}://127.0.0.1:{state['ports'][port]}"

    @property
    def pki(self) -> pkilib.Pki:
        return pkilib.Pki(self.directory / "pki")

    def extender_argv(self, port: int, metrics_port: int) -> list[str]:
        """`netsched extender` as the dev-cluster runs it (with `extender_args`), on these two ports: a
        second replica is this with ports of its own."""
        pki = self.pki
        tls = [f"--tls-cert-file={pki.extender_cert}", f"--tls-private-key-file={pki.extender_key}",
               f"--client-ca-file={pki.extender_client_ca_cert}"] if self.extender_mtls else []
        return [sys.executable, "-m", "netsched", "extender",
                f"--kubeconfig={self.directory / pkilib.kubeconfig_name(pkilib.User(EXTENDER))}",
                "--host=127.0.0.1", f"--port={port}", f"--metrics-port={metrics_port}", *tls,
                *self._topology_args(), *self.extender_args]

    def _topology_args(self) -> list[str]:
        """--topology for the extender and the operator, when the cluster is labelled for a topology."""
        return [f"--topology={self.topology}"] if self.topology else []

    @property
    def audit_log(self) -> Path:
        """The API server's log of the extender's and operator's requests (netsched.devcluster.audit)."""
        return self.log_dir / audit.LOG_FILE

    @property
    def records_file(self) -> Path:
        """The operator's training dataset (job records)."""
        return self.directory / "job-records.jsonl"

    def log(self, component: str) -> Path:
        return self.log_dir / f"{component}.log"

    # ---- lifecycle ---------------------------------------------------------
    def up(self) -> dict:
        """Start every component and the GPU nodes; on any failure stop what started."""
        if self.running_components():
            raise ClusterError(
                f"a dev-cluster is already running in {self.directory}; "
                "run `netsched dev-cluster down` first (or pass another --dir)"
            )
        started = time.monotonic()
        if self.real_node:
            check_prerequisites()
        bin_dir = ensure_binaries(node=self.real_node, kubernetes=self.kubernetes)
        kueue_dir = ensure_kueue() if self.kueue else None
        self._remove_real_node()  # what a killed earlier run may have left
        for attempt in range(1, START_ATTEMPTS + 1):
            self._reset_directory()
            state: dict = {"bin_dir": str(bin_dir), "kubernetes": self.minor, "components": {},
                           "ports": self._pick_ports(),
                           "real_node": self.real_node, "kueue_dir": str(kueue_dir) if kueue_dir else None}
            try:
                self._start_all(bin_dir, state)
                self._create_nodes()
                if self.real_node:
                    self._start_real_node(bin_dir, state)
                break
            except BaseException as exc:
                self.progress("start failed; stopping the components that started")
                self.down(quiet=True)
                # ports are picked free before the components start: another process (a second
                # dev-cluster starting beside this one) can bind one first
                if not (isinstance(exc, processes.ComponentFailed) and exc.port_taken()
                        and attempt < START_ATTEMPTS):
                    raise
                self.progress(f"{exc.name}'s port was taken by another process; starting again on new ports")
        state["start_seconds"] = round(time.monotonic() - started, 1)
        self._save(state)
        real = f" and real node {self._node(bin_dir).name}" if self.real_node else ""
        self.progress(f"dev-cluster up in {state['start_seconds']} s: {self.nodes} GPU nodes{real} Ready")
        return state

    def down(self, quiet: bool = False) -> list[str]:
        """Stop every recorded component, last started first. Returns their names."""
        state = self._load()
        stopped = []
        for name, info in reversed(list(state.get("components", {}).items())):
            if name == "containerd" and processes.pid_alive(info["pid"]):
                self._node(Path(state["bin_dir"])).stop_containers()  # the kubelet has stopped
            processes.stop(info["pid"])
            stopped.append(name)
            if not quiet:
                self.progress(f"stopped {name} (pid {info['pid']})")
        if state:
            state["components"] = {}
            self._save(state)
        for what in self._remove_real_node():
            if not quiet:
                self.progress(f"removed {what}")
        return stopped

    def _node(self, bin_dir: Path) -> RealNode:
        return RealNode(self.directory / "node", bin_dir)

    def _remove_real_node(self) -> list[str]:
        """Undo the real node's host changes (netns, mounts, cgroups, mount points), if any."""
        node = self._node(Path(self._load().get("bin_dir", ".")))
        if not node.directory.exists() and not node.leftovers():
            return []
        return node.remove()

    def running_components(self) -> list[str]:
        comps = self._load().get("components", {})
        return [name for name, info in comps.items() if processes.pid_alive(info["pid"])]

    def status(self) -> dict:
        state = self._load()
        comps = state.get("components", {})
        report = {
            "directory": str(self.directory),
            "kubeconfig": str(self.kubeconfig),
            "components": {
                name: {
                    "pid": info["pid"],
                    "running": processes.pid_alive(info["pid"]),
                    "log": info["log"],
                }
                for name, info in comps.items()
            },
        }
        if comps and all(c["running"] for c in report["components"].values()):
            report["apiserver"] = state.get("apiserver")
            report["nodes_ready"] = self._ready_node_count(self.api_client())
        return report

    def api_client(self) -> client.ApiClient:
        return api_client(str(self.kubeconfig))

    def components(self) -> tuple[str, ...]:
        skip = {EXTENDER} if not self.run_extender or self.extender else set()
        skip |= set() if self.run_operator else {OPERATOR}
        skip |= set() if self.kueue else {kueuelib.KUEUE}
        return tuple(c for c in COMPONENTS if c not in skip)

    def _start_real_node(self, bin_dir: Path, state: dict) -> None:
        """The node's netns and files, then node-net, containerd (with the pause image), kubelet and
        kube-proxy, each recorded before it is awaited, as the control plane's components are."""
        from netsched.devcluster.nodenet import in_netns

        node = self._node(bin_dir)
        t0 = time.monotonic()
        node.prepare()
        pki = pkilib.Pki(self.directory / "pki")
        node.write_kubeconfigs(state["ports"]["apiserver"], pki.ca_cert, pkilib.read_tokens(pki))
        kubeconfigs = {"admin": self.kubeconfig}
        core = client.CoreV1Api(self.api_client())

        def node_ready() -> bool:
            try:
                n = core.read_node(node.name)
            except client.ApiException as exc:
                if exc.status == 404:  # not registered yet
                    return False
                raise
            return any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])

        def proxy_healthy() -> bool:
            with in_netns(node.netns):
                return _http_ok(f"http://{NODE_IP}:10256/healthz")

        checks = {"node-net": lambda: "relaying" in self.log("node-net").read_text(errors="replace"),
                  "containerd": node.containerd_ready, "kubelet": node_ready, "kube-proxy": proxy_healthy}
        for name in NODE_COMPONENTS:
            t = time.monotonic()
            pid = state["components"].get("containerd", {}).get("pid")
            argv = node.argv(name, kubeconfigs, containerd_pid=pid)
            with processes.signals_deferred():
                proc = processes.start(name, argv, self.log(name), cwd=self.directory)
                state["components"][name] = {"pid": proc.pid, "log": str(proc.log), "argv": argv}
                self._save(state)
            processes.wait_until(proc, checks[name], timeout=120)
            if name == "containerd":
                node.import_pause()
            self.progress(f"{name} ready in {time.monotonic() - t:.1f} s (log: {proc.log})")
        self.progress(f"real node {node.name} ({NODE_IP}, netns {node.netns}) Ready in "
                      f"{time.monotonic() - t0:.1f} s")

    def restart(self, name: str, extra_args: tuple[str, ...] = ()) -> None:
        """Start a recorded component again (after it died or was killed) and wait until it serves;
        `extra_args` are added to its recorded command line for this run only."""
        state = self._load()
        info = state.get("components", {}).get(name)
        if info is None:
            raise ClusterError(f"{name} is not a component of the dev-cluster in {self.directory}")
        processes.stop(info["pid"])
        with processes.signals_deferred():
            proc = processes.start(name, [*info["argv"], *extra_args], self.log(name), cwd=self.directory)
            info["pid"] = proc.pid
            self._save(state)
        pki = pkilib.Pki(self.directory / "pki")
        admin = pkilib.read_tokens(pki)["admin"]
        checks = _health_checks(state["ports"], state["apiserver"], pki.ca_cert, admin,
                                state.get("extender_mtls", False))
        ready, port = checks[name]
        processes.wait_until(proc, ready, timeout=60, port=port)

    def _operator_to_extender(self, ports: dict[str, int]) -> list[str]:
        """The operator's flags for the extender it asks to place gangs whole (netsched.extender.gang),
        over mutual TLS with kube-scheduler's client certificate when the extender asks for one."""
        extender = self._extender(ports)
        if extender is None:
            return []
        flags = [f"--extender-url={extender.url_prefix}"]
        if extender.tls is not None:
            tls = extender.tls
            flags += [f"--extender-ca-file={tls.ca_file}", f"--extender-cert-file={tls.cert_file}",
                      f"--extender-key-file={tls.key_file}"]
        return flags

    def _extender(self, ports: dict[str, int]) -> ExtenderSettings | None:
        if self.extender is not None:
            return self.extender
        if self.run_extender and self.extender_mtls:
            pki = self.pki
            tls = ExtenderTLS(pki.extender_ca_cert, pki.scheduler_client_cert, pki.scheduler_client_key)
            return ExtenderSettings(url_prefix=f"https://127.0.0.1:{ports['extender']}", tls=tls)
        if self.run_extender:
            return ExtenderSettings(url_prefix=f"http://127.0.0.1:{ports['extender']}")
        return None

    # ---- start-up steps ----------------------------------------------------
    def _reset_directory(self) -> None:
        if self.directory.exists():
            shutil.rmtree(self.directory)
        self.log_dir.mkdir(parents=True)

    @staticmethod
    def _pick_ports() -> dict[str, int]:
        ports: dict[str, int] = {}
        names = ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok", "extender",
                 "extender-metrics", "operator-health", "operator-metrics", "operator-webhook",
                 "kueue-health", "kueue-metrics", "kueue-webhook")
        while len(set(ports.values())) < len(names):
            ports = {name: processes.free_port() for name in names}
        return ports

    def _start_all(self, bin_dir: Path, state: dict) -> None:
        d, ports = self.directory, state["ports"]
        pki = pkilib.write_extender_pki(pkilib.write_pki(d / "pki"))
        tokens = pkilib.read_tokens(pki)
        server = f"https://127.0.0.1:{ports['apiserver']}"
        state["apiserver"] = server
        state["extender_mtls"] = self.extender_mtls and self.run_extender and self.extender is None
        kubeconfigs = {
            user.name: pkilib.write_kubeconfig(
                d / pkilib.kubeconfig_name(user), server, pki.ca_cert, user.name, tokens[user.name]
            )
            for user in pkilib.USERS
        }
        scheduler_yaml = d / "scheduler.yaml"
        scheduler_yaml.write_text(
            yaml.safe_dump(scheduler_config(kubeconfigs["system:kube-scheduler"], self._extender(ports)))
        )
        stages = d / "kwok-stages.yaml"
        stages.write_text(stages_yaml())
        if self.real_node:
            (d / EGRESS_SELECTION).write_text(yaml.safe_dump(self._node(bin_dir).egress_selection()))

        plan = _component_argv(bin_dir, d, ports, pki, kubeconfigs, scheduler_yaml, stages, self.real_node)
        gates, left_out = feature_gate_args(bin_dir, self.feature_gates)
        for words in left_out:
            self.progress(f"feature gate {words}")
        by_minor = component_flags(self.minor, self.kube_gang_scheduling)
        for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
            plan[name] += one_feature_gates_flag([*by_minor.get(name, []), *gates])
        lease = lease_seconds(self.nodes)
        plan["kwok"].append(f"--node-lease-duration-seconds={lease}")
        if lease > LEASE_SECONDS:  # the default grace (50 s) would call them unreachable
            plan["kube-controller-manager"].append(f"--node-monitor-grace-period={lease + 10}s")
        plan[EXTENDER] = self.extender_argv(ports["extender"], ports["extender-metrics"])
        plan[OPERATOR] += self._operator_to_extender(ports)
        plan[OPERATOR] += (*self._topology_args(), *self.operator_args)
        checks = _health_checks(ports, server, pki.ca_cert, tokens["admin"], state["extender_mtls"])
        for name in self.components():
            t0 = time.monotonic()
            if name == EXTENDER:
                grant(self.api_client(), EXTENDER_ROLE, EXTENDER_RULES, EXTENDER)
            if name == OPERATOR:
                grant(self.api_client(), OPERATOR_ROLE, OPERATOR_RULES, OPERATOR)
                self._register_webhook(ports["operator-webhook"], pki)
            if name == kueuelib.KUEUE:
                config = kueuelib.prepare(self.api_client(), Path(state["kueue_dir"]), d / "kueue", ports)
                plan[name] = kueuelib.argv(Path(state["kueue_dir"]), d / "kueue", config, self.kubeconfig)
            with processes.signals_deferred():
                proc = processes.start(name, plan[name], self.log(name), cwd=d)
                state["components"][name] = {"pid": proc.pid, "log": str(proc.log), "argv": plan[name]}
                self._save(state)
            ready, port = checks[name]
            processes.wait_until(proc, ready, timeout=120 if name == "kube-apiserver" else 60, port=port)
            if name == "kube-apiserver":  # the extender watches PackingPlans, operator or not
                install_crds(self.api_client())
            if name == kueuelib.KUEUE:  # the apiserver calls Kueue's webhooks only once it serves them
                kueuelib.register_webhooks(self.api_client(), Path(state["kueue_dir"]), d / "kueue",
                                           ports["kueue-webhook"])
            self.progress(f"{name} ready in {time.monotonic() - t0:.1f} s (log: {proc.log})")

    def _register_webhook(self, port: int, pki: pkilib.Pki) -> None:
        """The operator's admission webhook at https://127.0.0.1:<port>, with a certificate of its own
        for that address; it gates gang pods in namespaces labelled netsched.io/gang-scheduling=enabled
        and writes the data limit of pods that ask for one as node affinity, in every namespace."""
        ca, cert, key = pkilib.serving_certificate("127.0.0.1", ["localhost"], ip_addresses=("127.0.0.1",))
        webhook_cert(pki).write_bytes(cert)
        webhook_key(pki).write_bytes(key)
        webhook_key(pki).chmod(0o600)
        bundle = base64.b64encode(ca).decode()
        admission = client.AdmissionregistrationV1Api(self.api_client())
        def at(path: str) -> dict[str, str]:
            return {"url": f"https://127.0.0.1:{port}/{path}", "caBundle": bundle}
        admission.create_mutating_webhook_configuration(
            webhook_configuration(WEBHOOK_CONFIGURATION, at(HANDLER_ID), SCHEDULER_NAME))
        admission.create_mutating_webhook_configuration(
            hard_limits_configuration(LIMITS_CONFIGURATION, at(LIMITS_HANDLER_ID), SCHEDULER_NAME))

    def _create_nodes(self) -> None:
        api = self.api_client()
        core = client.CoreV1Api(api)
        # The ServiceAccount admission plugin rejects pods until this exists.
        poll(lambda: core.read_namespaced_service_account("default", "default"),
             timeout=60, what="the default ServiceAccount (kube-controller-manager)")
        levels = Topology.parse(self.topology) if self.topology else None
        manifests = [n.manifest(*self.topology_labels, topology=levels)
                     for n in gpu_nodes(self.nodes, self.zones, self.racks_per_zone)]
        self._publish_topology(core)
        # several at a time: one by one, 5,000 nodes took minutes of round trips on a busy machine
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(core.create_node, manifests))
        # KWOK marks them Ready and the controller-manager lifts their not-ready taint in batches:
        # about 10 nodes a second here when the machine is busy
        # a look lists every node: at 10,000 nodes, looking every 0.2 s kept the API server so busy
        # serialising them that KWOK's leases fell behind and nodes went unreachable again
        poll(lambda: self._ready_node_count(api) >= self.nodes, timeout=120 + self.nodes / 5,
             what=f"{self.nodes} GPU nodes to become Ready and schedulable (kwok)",
             interval=max(0.2, self.nodes / 1000))

    def _publish_topology(self, core: client.CoreV1Api) -> None:
        """The topology the extender and operator run with, where the chart publishes it (a ConfigMap in
        netsched-system), so whatif and why against this cluster use the same levels."""
        if self.topology is None and self.topology_labels != (ZONE_LABEL, RACK_LABEL):
            return  # levels of a test's own, given only as flags: nothing to publish
        if not (self.run_operator or self.run_extender):
            return  # netsched is installed into it later (the chart): the chart publishes its own
        namespace = client.V1Namespace(metadata=client.V1ObjectMeta(name=PUBLISHED_NAMESPACE))
        try:
            core.create_namespace(namespace)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
        core.create_namespaced_config_map(PUBLISHED_NAMESPACE, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=PUBLISHED_CONFIGMAP),
            data={PUBLISHED_KEY: self.topology or DEFAULT_PRESET}))

    @staticmethod
    def _ready_node_count(api: client.ApiClient) -> int:
        """Nodes Ready and no longer tainted not-ready: the controller-manager lifts that taint up to
        a node-monitor period after Ready, and until it does kube-scheduler places nothing there."""
        # plain dicts: the client's model classes cost about 10 ms a node, 100 s of CPU a look at 10,000
        nodes = items(client.CoreV1Api(api).list_node)
        return sum(
            any(c["type"] == "Ready" and c["status"] == "True"
                for c in (n.get("status") or {}).get("conditions") or [])
            and not any(t["key"] in NOT_READY_TAINTS for t in (n.get("spec") or {}).get("taints") or [])
            for n in nodes
        )

    # ---- state file --------------------------------------------------------
    def _load(self) -> dict:
        try:
            return json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return {}

    def _save(self, state: dict) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_file)


def lease_seconds(nodes: int) -> int:
    """KWOK nodes' lease duration, renewed every quarter of it: kubelet's 40 s up to 5,000 nodes (at
    most 500 lease writes a second, KWOK's 4 workers at a time), longer above so the writes a second
    stay those of 5,000 nodes. At 40 s, 10,000 KWOK nodes on 2 cores fell behind their leases (20
    minutes after they were made, 6,193 were NotReady, unreachable), while the Ready count below also
    listed every node 5 times a second; at 80 s and a look every 10 s all were Ready in 235 s. 40 s
    with the slower looks alone was not tried."""
    return max(LEASE_SECONDS, LEASE_SECONDS * nodes // 5000)


def _component_argv(
    bin_dir: Path,
    d: Path,
    ports: dict[str, int],
    pki: pkilib.Pki,
    kubeconfigs: dict[str, Path],
    scheduler_yaml: Path,
    stages: Path,
    real_node: bool = False,
) -> dict[str, list[str]]:
    etcd_url = f"http://127.0.0.1:{ports['etcd']}"
    kcm = str(kubeconfigs["system:kube-controller-manager"])
    sched = str(kubeconfigs["system:kube-scheduler"])
    if real_node:
        # The `kubernetes` Service's endpoint is the node IP, where node-net relays to the apiserver,
        # so pods reach it through kube-proxy. KWOK leaves the real node to its kubelet.
        endpoints = [f"--advertise-address={NODE_IP}", "--endpoint-reconciler-type=lease",
                     "--kubelet-preferred-address-types=InternalIP,Hostname",
                     f"--egress-selector-config-file={d / EGRESS_SELECTION}"]
        kwok_nodes = ["--manage-all-nodes=false",
                      f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake"]
    else:
        endpoints = ["--advertise-address=127.0.0.1",
                     "--endpoint-reconciler-type=none"]  # 127.0.0.1 cannot be a Service endpoint
        kwok_nodes = ["--manage-all-nodes=true"]
    return {
        "etcd": [
            str(bin_dir / "etcd"), f"--data-dir={d / 'etcd'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{ports['etcd-peer']}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{ports['etcd-peer']}",
            f"--initial-cluster=default=http://127.0.0.1:{ports['etcd-peer']}",
            "--unsafe-no-fsync",  # throwaway data: trade durability for speed
        ],
        "kube-apiserver": [
            str(bin_dir / "kube-apiserver"), f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", *endpoints,
            f"--secure-port={ports['apiserver']}",
            f"--tls-cert-file={pki.apiserver_cert}", f"--tls-private-key-file={pki.apiserver_key}",
            f"--client-ca-file={pki.ca_cert}", f"--token-auth-file={pki.token_file}",
            # Published in kube-system/extension-apiserver-authentication: without it a scheduler in
            # a pod logs a missing requestheader CA every few seconds.
            f"--requestheader-client-ca-file={pki.front_proxy_ca_cert}",
            f"--requestheader-allowed-names={pkilib.FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki.front_proxy_client_cert}",
            f"--proxy-client-key-file={pki.front_proxy_client_key}",
            "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.service_account_key}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--allow-privileged=true",
            # what the extender and operator ask, and whether RBAC allowed it (tests/integration/test_rbac.py)
            *audit.apiserver_args(d, d / "logs"),
        ],
        "kube-controller-manager": [
            str(bin_dir / "kube-controller-manager"), f"--kubeconfig={kcm}",
            f"--authentication-kubeconfig={kcm}", f"--authorization-kubeconfig={kcm}",
            "--authentication-skip-lookup=true", "--bind-address=127.0.0.1",
            f"--secure-port={ports['controller-manager']}", f"--cert-dir={d / 'certs'}",
            "--leader-elect=false", "--controllers=*",
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--root-ca-file={pki.ca_cert}", "--use-service-account-credentials=true",
            f"--flex-volume-plugin-dir={d / 'flexvolume'}",
            # at the default 20 requests/s the node lifecycle controller lifts the not-ready taint of
            # some 5 new nodes a second: 1,000 KWOK nodes would wait 3 minutes to be schedulable
            "--kube-api-qps=200", "--kube-api-burst=400",
        ],
        "kube-scheduler": [
            str(bin_dir / "kube-scheduler"), f"--config={scheduler_yaml}",
            f"--authentication-kubeconfig={sched}", f"--authorization-kubeconfig={sched}",
            "--authentication-skip-lookup=true", "--bind-address=127.0.0.1",
            f"--secure-port={ports['scheduler']}", f"--cert-dir={d / 'certs'}",
        ],
        OPERATOR: [
            sys.executable, "-m", "netsched", "operator", f"--kubeconfig={kubeconfigs[OPERATOR]}",
            "--host=127.0.0.1", f"--health-port={ports['operator-health']}",
            f"--metrics-port={ports['operator-metrics']}", f"--records={d / 'job-records.jsonl'}",
            "--forecast-interval=5",  # a few nodes: forecasts are cheap, and demos and tests see them soon
            f"--webhook-port={ports['operator-webhook']}", f"--webhook-cert-file={webhook_cert(pki)}",
            f"--webhook-key-file={webhook_key(pki)}",
        ],
        "kwok": [
            str(bin_dir / "kwok"), f"--kubeconfig={kubeconfigs['kwok']}",
            *kwok_nodes, f"--server-address=127.0.0.1:{ports['kwok']}",
            f"--cidr={POD_CIDR}", f"--config={stages}",
        ],
    }


def webhook_cert(pki: pkilib.Pki) -> Path:
    return pki.dir / "operator-webhook.crt"


def webhook_key(pki: pkilib.Pki) -> Path:
    return pki.dir / "operator-webhook.key"


def _health_checks(ports: dict[str, int], server: str, ca: Path, admin_token: str | None,
                   tls: bool = False) -> dict[str, tuple[Callable[[], bool], int]]:
    """component -> a call that is True once it serves, and the port it asks: the component must be the
    process listening there (processes.wait_until)."""
    def at(port: str, path: str, scheme: str = "http") -> tuple[Callable[[], bool], int]:
        return (lambda: _http_ok(f"{scheme}://127.0.0.1:{ports[port]}{path}")), ports[port]

    return {
        "etcd": at("etcd", "/health"),
        "kube-apiserver": ((lambda: _http_ok(f"{server}/readyz", ca=ca, token=admin_token)),
                           ports["apiserver"]),
        "kube-controller-manager": at("controller-manager", "/healthz", "https"),
        "kube-scheduler": at("scheduler", "/healthz", "https"),
        "kwok": at("kwok", "/healthz"),
        EXTENDER: at("extender-metrics", "/readyz", "https" if tls else "http"),
        OPERATOR: at("operator-health", "/healthz"),
        kueuelib.KUEUE: at("kueue-health", "/readyz"),
    }


def _http_ok(url: str, ca: Path | None = None, token: str | None = None) -> bool:
    """GET url and report a 200. Self-signed component certs are only health-checked."""
    if url.startswith("https"):
        ctx = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()
    else:
        ctx = None
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
            return resp.status == 200
    except urllib.error.HTTPError:
        return False
