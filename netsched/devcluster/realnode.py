"""One real kubelet node for the dev-cluster (`dev-cluster up --real-node`), no Docker.

containerd, runc and the CNI plugins come from Debian packages; kubelet and kube-proxy are built
from the control plane's pinned module (`hack/controlplane/build.sh --node`). The node lives in a
private network namespace, `netsched-<hash of the cluster directory>`, holding a bridge `cni0`
whose address is the node IP, so that nothing binds and no iptables rule is written in the host's
namespace. `nodenet` (a process) relays the apiserver and answers cluster DNS inside it.

containerd runs in a private mount namespace (from `ip netns exec`) that the kubelet joins, so
volume mounts reach containers; in it, the host-global sysctls the kubelet would set are
read-only files holding the values it wants, and the paths the kubelet and CNI hard-code
(/var/log/containers, /var/lib/cni) are bind mounts of the node's directory. Pods' cgroups live
under `/<node name>` of each hierarchy. `remove` undoes all of it: no process, mount, netns or
cgroup is left.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from netsched.devcluster import pki as pkilib
from netsched.devcluster.pki import REAL_NODE

NODE_IP = pkilib.NODE_IP
POD_SUBNET = "10.88.0.0/16"
NODE_LABEL = "netsched.io/real-node"
PAUSE_IMAGE = "netsched.local/pause:dev"
# kubelet's kernel tunables (pkg/kubelet/cm): in its mount namespace they already hold these values.
KUBELET_SYSCTLS = {"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10",
                   "kernel/panic_on_oops": "1", "kernel/keys/root_maxkeys": "1000000",
                   "kernel/keys/root_maxbytes": "25000000"}
HOST_PATHS = ("/var/log/containers", "/var/lib/cni")  # hard-coded by the kubelet and by libcni
TOOLS = {"ip": "iproute2", "containerd": "containerd", "ctr": "containerd", "runc": "runc",
         "umoci": "umoci", "iptables": "iptables", "conntrack": "conntrack", "nsenter": "util-linux",
         "mount": "mount"}
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")
CNI_DIR = Path("/usr/lib/cni")


class RealNodeError(RuntimeError):
    """The machine cannot run the real node; the message names what is missing and how to get it."""


def check_prerequisites() -> None:
    problems = []
    if os.geteuid() != 0:
        problems.append("run as root (network and mount namespaces, containerd, kubelet)")
    missing = sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
    missing += ["containernetworking-plugins"] if any(not (CNI_DIR / p).exists() for p in CNI_PLUGINS) else []
    if missing:
        problems.append(f"missing packages: apt-get install -y {' '.join(missing)}")
    if "overlay" not in Path("/proc/filesystems").read_text():
        problems.append("no overlay filesystem (containerd's snapshotter): modprobe overlay")
    if not Path("/proc/self/ns/net").exists():
        problems.append("the kernel has no network namespaces (CONFIG_NET_NS)")
    if problems:
        raise RealNodeError("cannot start a real node: " + "; ".join(problems))


def pack_binary_image(binary: Path, path: str, tarball: Path) -> Path:
    """An OCI image (tar of an OCI layout, tag "dev") holding one static binary at `path`, its
    entrypoint: the pause image, or the upstream kube-scheduler image's layout, without a registry."""
    layout = tarball.with_suffix(".oci")
    shutil.rmtree(layout, ignore_errors=True)
    ref = f"{layout}:dev"
    _run("umoci", "init", "--layout", str(layout))
    _run("umoci", "new", "--image", ref)
    _run("umoci", "insert", "--image", ref, str(binary), path)
    _run("umoci", "config", "--image", ref, "--config.entrypoint", path)
    _run("tar", "-C", str(layout), "-cf", str(tarball), ".")
    shutil.rmtree(layout)
    return tarball


def _run(*argv: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, input=input)
    if check and proc.returncode != 0:
        raise RealNodeError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


@dataclass
class RealNode:
    directory: Path  # the node's files: <cluster dir>/node
    bin_dir: Path
    name: str = REAL_NODE

    @property
    def netns(self) -> str:
        return "netsched-" + hashlib.sha256(str(self.directory.resolve()).encode()).hexdigest()[:8]

    @property
    def socket(self) -> Path:
        return self.directory / "containerd" / "containerd.sock"

    @property
    def egress_socket(self) -> Path:
        """Where node-net takes the apiserver's HTTP CONNECT requests into the node's network."""
        return self.directory / "egress.sock"

    def egress_selection(self) -> dict:
        """The apiserver's EgressSelectorConfiguration: its traffic to the cluster (admission webhooks,
        aggregated APIs, kubelets) through node-net into the node's network, where Service and pod IPs
        answer; the apiserver itself stays on the host's 127.0.0.1."""
        uds = {"udsName": str(self.egress_socket)}
        return {"apiVersion": "apiserver.k8s.io/v1beta1", "kind": "EgressSelectorConfiguration",
                "egressSelections": [{"name": "cluster", "connection": {
                    "proxyProtocol": "HTTPConnect", "transport": {"uds": uds}}}]}

    @property
    def manifest_file(self) -> Path:
        """What `prepare` made on the host, for `remove` to undo, even after a crash."""
        return self.directory / "host-changes.json"

    # ---- host side ---------------------------------------------------------------
    def prepare(self) -> None:
        """The netns with its bridge, mount points, configuration files and the pause image's tarball."""
        check_prerequisites()
        d = self.directory
        for sub in ("containerd", "cni/net.d", "cni/ipam", "cni/cache", "kubelet", "kubelet-pki", "pod-logs",
                    "container-logs", "sysctl"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        changes: dict[str, list[str]] = {"netns": [], "dirs": []}
        for path in HOST_PATHS:  # mount points on the host: empty there, bind-mounted for the node
            if not Path(path).exists():
                Path(path).mkdir(parents=True)
                changes["dirs"].append(path)
        self.manifest_file.write_text(json.dumps(changes))
        _run("ip", "netns", "add", self.netns)
        changes["netns"].append(self.netns)
        self.manifest_file.write_text(json.dumps(changes))
        ns = ("ip", "netns", "exec", self.netns)
        _run(*ns, "ip", "link", "set", "lo", "up")
        _run(*ns, "ip", "link", "add", "cni0", "type", "bridge")
        _run(*ns, "ip", "addr", "add", f"{NODE_IP}/16", "dev", "cni0")
        _run(*ns, "ip", "link", "set", "cni0", "up")
        _run(*ns, "ip", "route", "add", "default", "dev", "cni0")  # Service IPs, before kube-proxy's DNAT
        _run(*ns, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward")  # this namespace's own copy
        for key, value in KUBELET_SYSCTLS.items():
            (d / "sysctl" / key.replace("/", ".")).write_text(value + "\n")
        self._write_configs()
        self._pack_pause_image()

    def _write_configs(self) -> None:
        d = self.directory
        c = d / "containerd"
        (d / "containerd.toml").write_text(f"""version = 2
root = "{c / 'root'}"
state = "{c / 'state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{self.socket}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{c / 'opt'}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{shutil.which('runc')}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_DIR}"
    conf_dir = "{d / 'cni' / 'net.d'}"
""")
        conflist = {"cniVersion": "1.0.0", "name": "netsched", "plugins": [
            {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": True, "hairpinMode": True,
             "ipam": {"type": "host-local", "dataDir": str(d / "cni" / "ipam"),
                      "ranges": [[{"subnet": POD_SUBNET, "rangeStart": "10.88.1.0", "gateway": NODE_IP}]],
                      "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}}]}
        (d / "cni" / "net.d" / "10-netsched.conflist").write_text(json.dumps(conflist, indent=1))
        kubelet = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": NODE_IP, "readOnlyPort": 0, "healthzBindAddress": NODE_IP, "healthzPort": 10248,
            # The apiserver has no kubelet client certificate; the kubelet listens only inside the netns.
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "cgroupDriver": "cgroupfs", "cgroupsPerQOS": False, "cgroupRoot": f"/{self.name}",
            "enforceNodeAllocatable": [], "failSwapOn": False, "protectKernelDefaults": False,
            "clusterDNS": [NODE_IP], "clusterDomain": "cluster.local",
            "containerRuntimeEndpoint": f"unix://{self.socket}", "podLogsDir": str(d / "pod-logs"),
            # Local images cannot be pulled back: never collect them; a busy shared disk is no pressure.
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "serializeImagePulls": False, "staticPodPath": "", "maxPods": 110,
            # this host mounts cgroup v1, which the kubelet refuses by default from 1.35 on
            "failCgroupV1": False,
        }
        (d / "kubelet.yaml").write_text(yaml.safe_dump(kubelet))
        proxy = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(d / "kube-proxy.kubeconfig")},
            "mode": "iptables", "clusterCIDR": POD_SUBNET, "hostnameOverride": self.name,
            "bindAddress": NODE_IP, "healthzBindAddress": f"{NODE_IP}:10256",
            "metricsBindAddress": f"{NODE_IP}:10249",
            # Service traffic is SNATed, so replies between pods on the bridge come back through the
            # node's stack without br_netfilter (a host kernel module); conntrack's global sysctls stay.
            "iptables": {"masqueradeAll": True},
            "conntrack": {"maxPerCore": 0, "min": 0},
        }
        (d / "kube-proxy.yaml").write_text(yaml.safe_dump(proxy))

    def _pack_pause_image(self) -> None:
        pack_binary_image(self.bin_dir / "pause", "/pause", self.directory / "pause.tar")

    def ctr(self, *args: str) -> subprocess.CompletedProcess:
        return _run("ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args)

    def import_image(self, tarball: Path) -> None:
        """Load an image archive (docker-archive or OCI layout tar) into the node's containerd."""
        self.ctr("images", "import", "--no-unpack", str(tarball))

    def import_pause(self) -> None:
        self.import_binary_image(self.directory / "pause.tar", PAUSE_IMAGE)

    def import_binary_image(self, tarball: Path, name: str) -> None:
        """An image `pack_binary_image` wrote, under `name` (repository:tag, the tag being "dev"
        or given to the packer)."""
        repository, _, tag = name.rpartition(":")
        self.ctr("images", "import", "--base-name", repository, str(tarball))
        if tag != "dev":
            self.ctr("images", "tag", "--force", f"{repository}:dev", name)

    # ---- the node's processes ---------------------------------------------------------
    def argv(self, component: str, kubeconfigs: dict[str, Path],
             containerd_pid: int | None = None) -> list[str]:
        d, ns = self.directory, ["ip", "netns", "exec", self.netns]
        if component == "node-net":
            return [sys.executable, "-m", "netsched.devcluster.nodenet", f"--netns={self.netns}",
                    f"--node-ip={NODE_IP}", f"--apiserver-port={self._apiserver_port(kubeconfigs)}",
                    f"--kubeconfig={kubeconfigs['admin']}", f"--egress-socket={self.egress_socket}"]
        if component == "containerd":
            mounts = [f"mount --bind {d / 'sysctl' / k.replace('/', '.')} /proc/sys/{k} && "
                      f"mount -o remount,bind,ro /proc/sys/{k}" for k in KUBELET_SYSCTLS]
            mounts += [f"mount --bind {d / 'container-logs'} /var/log/containers",
                       f"mount --bind {d / 'cni' / 'cache'} /var/lib/cni",
                       f"mount --bind {d / 'kubelet'} {d / 'kubelet'}",
                       f"mount --make-rshared {d / 'kubelet'}"]
            script = " && ".join(mounts) + f" && exec containerd --config {d / 'containerd.toml'}"
            # Not `ip netns exec`: it remounts /sys, and the kubelet (which joins this mount namespace)
            # then finds no cgroup mounts.
            return ["nsenter", f"--net=/run/netns/{self.netns}", "--", "unshare", "--mount", "--propagation",
                    "slave", "--", "sh", "-c", script]
        if component == "kubelet":
            assert containerd_pid is not None
            return ["nsenter", f"--mount=/proc/{containerd_pid}/ns/mnt", f"--net=/run/netns/{self.netns}",
                    "--",
                    str(self.bin_dir / "kubelet"), f"--config={d / 'kubelet.yaml'}",
                    f"--kubeconfig={d / 'kubelet.kubeconfig'}", f"--root-dir={d / 'kubelet'}",
                    f"--cert-dir={d / 'kubelet-pki'}", f"--hostname-override={self.name}",
                    f"--node-ip={NODE_IP}", f"--node-labels={NODE_LABEL}=true"]
        if component == "kube-proxy":
            return [*ns, str(self.bin_dir / "kube-proxy"), f"--config={d / 'kube-proxy.yaml'}"]
        raise ValueError(component)

    @staticmethod
    def _apiserver_port(kubeconfigs: dict[str, Path]) -> int:
        server = yaml.safe_load(kubeconfigs["admin"].read_text())["clusters"][0]["cluster"]["server"]
        return int(server.rsplit(":", 1)[1])

    def write_kubeconfigs(self, server_port: int, ca_cert: Path, tokens: dict[str, str]) -> None:
        server = f"https://{NODE_IP}:{server_port}"
        pkilib.write_kubeconfig(self.directory / "kubelet.kubeconfig", server, ca_cert,
                                f"system:node:{self.name}", tokens[f"system:node:{self.name}"])
        pkilib.write_kubeconfig(self.directory / "kube-proxy.kubeconfig", server, ca_cert,
                                "system:kube-proxy", tokens["system:kube-proxy"])

    def containerd_ready(self) -> bool:
        return self.socket.exists() and _run("ctr", "--address", str(self.socket), "version",
                                             check=False).returncode == 0

    # ---- teardown --------------------------------------------------------------------
    def stop_containers(self) -> None:
        """Kill every pod's processes through containerd, so that it removes their cgroups."""
        if not self.containerd_ready():
            return
        tasks = self.ctr("tasks", "list", "-q").stdout.split()
        for task in tasks:
            _run("ctr", "--address", str(self.socket), "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", task,
                 check=False)
        for task in tasks:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if _run("ctr", "--address", str(self.socket), "-n", "k8s.io", "tasks", "delete", task,
                        check=False).returncode == 0:
                    break
                time.sleep(0.2)

    def remove(self) -> list[str]:
        """Everything `prepare` and the node's processes left on the host, after they stopped.
        Returns what it removed, for the caller to report."""
        removed = []
        for pid in self._shim_pids():  # shims outlive containerd; their children are the containers
            for child in [*self._descendants(pid), pid]:
                try:
                    os.kill(child, signal.SIGKILL)
                    removed.append(f"process {child}")
                except ProcessLookupError:
                    pass
        try:
            changes = json.loads(self.manifest_file.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            changes = {"netns": [self.netns] if Path(f"/run/netns/{self.netns}").exists() else [], "dirs": []}
        for ns in changes["netns"]:
            for pid in _run("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                    removed.append(f"process {pid}")
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
            if _run("ip", "netns", "delete", ns, check=False).returncode == 0:
                removed.append(f"netns {ns}")
        for mount in reversed(self.host_mounts()):
            if _run("umount", "-l", mount, check=False).returncode == 0:
                removed.append(f"mount {mount}")
        removed += self._remove_cgroups()
        for path in changes["dirs"]:
            try:
                Path(path).rmdir()
                removed.append(f"directory {path}")
            except OSError:
                pass  # something else put files there since: not ours to delete
        return removed

    def host_mounts(self) -> list[str]:
        """Mount points under the node's directory visible in the host's mount namespace."""
        root = str(self.directory.resolve())
        points = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point == root or point.startswith(root + "/"):
                points.append(point)
        return points

    def leftovers(self) -> list[str]:
        """What of the node is still on the host (empty after `remove`)."""
        left = [f"netns {self.netns}"] if Path(f"/run/netns/{self.netns}").exists() else []
        left += [f"mount {m}" for m in self.host_mounts()]
        left += [f"process {p}" for p in self._shim_pids()]
        left += [f"cgroup {c}" for c in self._cgroups()]
        return left

    def _shim_pids(self) -> list[int]:
        needle = str(self.socket).encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                except OSError:
                    continue
                if b"containerd-shim" in cmdline and needle in cmdline:
                    pids.append(int(entry.name))
        return pids

    @staticmethod
    def _descendants(pid: int) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry.name))
        out, todo = [], [pid]
        while todo:
            for child in children.get(todo.pop(), []):
                out.append(child)
                todo.append(child)
        return out

    def _cgroups(self) -> list[Path]:
        return [p for p in Path("/sys/fs/cgroup").glob(f"*/{self.name}") if p.is_dir()]

    def _remove_cgroups(self) -> list[str]:
        removed = []
        for top in self._cgroups():
            for path in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    path.rmdir()
            try:
                top.rmdir()
                removed.append(f"cgroup {top}")
            except OSError:
                pass
        return removed
