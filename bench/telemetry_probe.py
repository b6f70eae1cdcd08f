"""What probing costs and how well it measures: agents with their default schedule on a shaped testbed.

    sudo python bench/telemetry_probe.py [--minutes 3] [--interval 30]

Four sites in network namespaces (netsched/datagen/testbed.py) with every pair shaped by
`tc` htb to a different rate, an agent per site with default settings except --interval,
and a real Prometheus scraping them. After --minutes it reports, per node, the bytes its
bandwidth probes sent per minute (from netsched_probe_bytes_total) and the share of time
its links carried probe traffic, and per link the shaped rate against the last measurement.
Writes the "Telemetry probes" section of docs/benchmarks-history.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from netsched.datagen.testbed import Testbed, start_prometheus, stop
from netsched.telemetry.agent import ProbePlan

sys.path.insert(0, str(Path(__file__).parent))
from report import publish  # noqa: E402

SECTION = "## Telemetry probes"
SITES = ("a", "b", "c", "d")
RATES = {("a", "b"): 5, ("a", "c"): 20, ("a", "d"): 80, ("b", "c"): 40, ("b", "d"): 10, ("c", "d"): 160}


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.read()


def _probe_bytes(prom: str) -> dict[tuple[str, str], float]:
    """Bytes each agent's bandwidth probes sent to each target so far, from Prometheus."""
    q = urllib.parse.urlencode({"query": "netsched_probe_bytes_total"})
    doc = json.loads(_get(f"{prom}/api/v1/query?{q}"))
    return {(r["metric"]["instance"], r["metric"]["dst"]): float(r["value"][1])
            for r in doc["data"]["result"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--interval", type=float, default=30.0)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="netsched-telemetry-bench-"))
    net = Testbed(SITES, RATES, prefix="nstb", subnet="10.77.8").up()
    prom_proc = None
    try:
        for site in SITES:
            peers = [f"--peer={p}={net.ip(p)}:9102" for p in SITES if p != site]
            net.start(site, [sys.executable, "-m", "netsched", "agent", f"--node-name={site}",
                             f"--interval={args.interval}", *peers], tmp / f"agent-{site}.log")
        prom_proc = start_prometheus([f"{net.ip(s)}:9101" for s in SITES], tmp / "prometheus", 19091)
        prom = "http://127.0.0.1:19091"
        time.sleep(5)
        start, t0 = _probe_bytes(prom), time.monotonic()
        print(f"measuring for {args.minutes:g} minutes ...", file=sys.stderr)
        time.sleep(args.minutes * 60)
        end, elapsed = _probe_bytes(prom), time.monotonic() - t0
        rows = {s: json.loads(_get(f"http://{net.ip(s)}:9101/matrix"))["links"] for s in SITES}
    finally:
        if prom_proc:
            stop(prom_proc)
        net.down()
    section = report(args, net, start, end, elapsed, rows)
    publish(section)
    return 0


def report(args, net: Testbed, start: dict, end: dict, elapsed: float, rows: dict) -> str:
    plan = ProbePlan()
    node_lines = []
    for s in SITES:
        inst = f"{net.ip(s)}:9101"
        sent = {dst: (end.get((inst, dst), 0) - start.get((inst, dst), 0)) / elapsed for dst in rows[s]}
        # share of time each link carried probe bytes: bytes sent / what the shaped link carries
        busy = [rate * 8 / (net.rate(s, dst) * 1e6) for dst, rate in sent.items()]
        node_lines.append(f"| {s} | {sum(sent.values()) * 60 / 1e6:.1f} MB | {len(rows[s])} | "
                          f"{sum(busy) / len(busy):.1%} | {max(busy):.1%} |")
    link_lines = []
    for (a, b) in sorted(RATES):
        for src, dst in ((a, b), (b, a)):
            got = rows[src].get(dst, {}).get("bandwidth_mbps")
            shaped = net.rate(src, dst)
            err = f"{(got - shaped) / shaped:+.0%}" if got else "no measurement"
            link_lines.append(f"| {src} -> {dst} | {shaped:g} | {got:.1f} | {err} |" if got else
                              f"| {src} -> {dst} | {shaped:g} | - | {err} |")
    return "\n".join([
        SECTION, "",
        f"Command: `sudo python bench/telemetry_probe.py --minutes {args.minutes:g} "
        f"--interval {args.interval:g}` ({time.strftime('%Y-%m-%d')}, 2 cores).", "",
        f"Four sites (network namespaces, `tc` htb per destination), one agent each with default probe "
        f"settings (target {plan.target_seconds:g} s per bandwidth probe, budget "
        f"{plan.budget_bytes_per_minute / 2**20:g} MiB/min, {plan.peers_per_round} peers per round) and "
        f"`--interval {args.interval:g}`; a real Prometheus scraping them. Probe bytes per minute from "
        f"`netsched_probe_bytes_total` over {elapsed / 60:.1f} minutes; busy share = probe bytes sent over a "
        "link / what its shaped rate carries in the same time.", "",
        "| node | probe bytes / minute | links | busy share, mean | busy share, max |",
        "|---|---|---|---|---|",
        *node_lines, "",
        "| link | shaped Mbit/s | measured Mbit/s | error |", "|---|---|---|---|",
        *link_lines, "",
    ])


if __name__ == "__main__":
    raise SystemExit(main())
