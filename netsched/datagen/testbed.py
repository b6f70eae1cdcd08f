"""A network of "sites" on one machine, for telemetry tests, benchmarks and demos (needs root).

Each site is a network namespace with one interface, `eth0`, joined to a bridge in the
root namespace by a veth pair; the root namespace has the bridge's address, so a
Prometheus there reaches every site. Each site shapes its own egress with an HTB class
per destination site (`tc`), so the rate of every directed pair is set exactly:
`rates[("a", "b")] = 5` makes a->b and b->a 5 Mbit/s. netem (added delay) is not
available on this project's machines, so RTTs differ only by queueing, not by design.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


class TestbedError(RuntimeError):
    pass


def run_checked(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise TestbedError(f"`{' '.join(argv)}` failed: {done.stderr.strip()}")


@dataclass
class Testbed:
    __test__ = False  # not a pytest test class, whatever its name
    sites: tuple[str, ...]
    rates: dict[tuple[str, str], float]  # unordered site pair -> Mbit/s, both directions
    prefix: str = "nst"
    subnet: str = "10.77.0"
    other_rate_mbps: float = 1000.0  # pairs not in `rates`, and traffic to the root namespace
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"{self.prefix}-br"

    @property
    def host_ip(self) -> str:
        return f"{self.subnet}.254"

    def ip(self, site: str) -> str:
        return f"{self.subnet}.{self.sites.index(site) + 1}"

    def namespace(self, site: str) -> str:
        return f"{self.prefix}-{site}"

    def rate(self, a: str, b: str) -> float:
        return self.rates.get((a, b), self.rates.get((b, a), self.other_rate_mbps))

    # ---- lifecycle ------------------------------------------------------------------
    def up(self) -> Testbed:
        self.down()  # whatever an earlier, killed run left
        try:
            run_checked("ip", "link", "add", self.bridge, "type", "bridge")
            run_checked("ip", "addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
            run_checked("ip", "link", "set", self.bridge, "up")
            for i, site in enumerate(self.sites):
                self._add_site(i, site)
        except BaseException:
            self.down()
            raise
        return self

    def _add_site(self, i: int, site: str) -> None:
        ns, veth = self.namespace(site), f"{self.prefix}{i}h"
        run_checked("ip", "netns", "add", ns)
        run_checked("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        run_checked("ip", "link", "set", veth, "master", self.bridge, "up")
        inside = ("ip", "netns", "exec", ns)
        run_checked(*inside, "ip", "addr", "add", f"{self.ip(site)}/24", "dev", "eth0")
        run_checked(*inside, "ip", "link", "set", "eth0", "up")
        run_checked(*inside, "ip", "link", "set", "lo", "up")
        tc = (*inside, "tc")
        run_checked(*tc, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "999")
        run_checked(*tc, "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:999", "htb",
                    "rate", f"{self.other_rate_mbps}mbit")
        for j, other in enumerate(self.sites):
            if other == site:
                continue
            rate = f"{self.rate(site, other)}mbit"
            run_checked(*tc, "class", "add", "dev", "eth0", "parent", "1:", "classid", f"1:{j + 1}", "htb",
                        "rate", rate, "ceil", rate)
            run_checked(*tc, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1",
                        "u32", "match", "ip", "dst", f"{self.ip(other)}/32", "flowid", f"1:{j + 1}")

    def start(self, site: str, argv: list[str], log: Path) -> subprocess.Popen:
        """Run argv inside the site's namespace; stopped by down()."""
        with open(log, "ab") as out:
            proc = subprocess.Popen(["ip", "netns", "exec", self.namespace(site), *argv], stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def down(self) -> None:
        for proc in self.procs:
            stop(proc)
        self.procs.clear()
        existing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        for site in self.sites:
            ns = self.namespace(site)
            if any(line.split()[0] == ns for line in existing.splitlines() if line.strip()):
                pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
                for pid in pids.split():
                    subprocess.run(["kill", "-9", pid], capture_output=True)
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for i in range(len(self.sites)):  # a veth can outlive its namespace for a moment
            subprocess.run(["ip", "link", "del", f"{self.prefix}{i}h"], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)


def stop(proc: subprocess.Popen, grace: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_prometheus(targets: list[str], directory: Path, port: int, scrape_seconds: float = 1.0
                     ) -> subprocess.Popen:
    """A real Prometheus (Debian package `prometheus`) scraping `targets` (host:port) every few seconds."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise TestbedError("prometheus is not installed: `apt-get install prometheus` (Debian package)")
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "prometheus.yml"
    config.write_text(
        f"global:\n  scrape_interval: {int(scrape_seconds * 1000)}ms\n"
        f"scrape_configs:\n  - job_name: netsched-agents\n    static_configs:\n"
        f"      - targets: [{', '.join(repr(t) for t in targets)}]\n")
    log_file = directory / "prometheus.log"
    argv = [binary, f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}"]
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise TestbedError(f"prometheus exited with {proc.returncode}; see {log_file}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=1) as resp:
                if resp.status == 200:
                    return proc
        except OSError:
            time.sleep(0.2)
    stop(proc)
    raise TestbedError(f"prometheus not ready after 30 s; see {log_file}")
