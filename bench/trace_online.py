"""The openb trace replayed online (arrivals and departures at the trace's own times) through netsched's
scoring and kube-scheduler's default scoring: queueing delay, GPU utilisation, pods never placed.

    python bench/trace_online.py [--trace-dir ../shared/openb] [--seeds 3] [--fraction 0.125]
                                 [--compress 1000] [--no-publish]

netsched.datagen.trace_online: each pod arrives at its creation time, runs for its own run time
(deletion - scheduled) and waits in kube-scheduler's queue order while it fits nowhere. Two settings:
the trace's 1,213 GPU nodes at the trace's own times, and a cluster of --fraction of those nodes (a
seeded sample, the same for every policy; --seeds samples) with arrivals --compress times faster (run
times kept), where pods queue. Pod sets: GPU pods sharing no GPU (netsched's scope) and every GPU pod
(shares included: netsched asks a whole GPU for a share, the others share). Pods asking no GPU are left
out (the trace's cluster ran them on 310 CPU-only nodes the node file lacks), as are pods the real
cluster never scheduled (no run time). Policies: kube-scheduler's default scoring, netsched as served
(its extender's scoring; the packer does not take part) and BestFit as a published reference.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from netsched.datagen.gpu_cluster import Ask
from netsched.datagen.openb import DEFAULT_DIR, MILLI, TraceError, TraceNode, TracePod, read_trace
from netsched.datagen.placement_policies import best_fit, kube_default, netsched_served
from netsched.datagen.trace_online import OnlineOutcome, replay_online, runs

sys.path.insert(0, str(Path(__file__).parent))
from report import publish_unless  # noqa: E402

SECTION = "## Trace replay online (openb)"


def whole_gpus(pod: TracePod) -> Ask:
    """netsched's request for a trace pod: whole GPUs (Kubernetes counts nvidia.com/gpu in whole GPUs)."""
    return Ask(pod.cpu_milli, pod.memory_mib, pod.num_gpu, MILLI if pod.num_gpu else 0, pod.gpu_spec)


POLICIES = (("kube default", kube_default, Ask.of), ("BestFit", best_fit, Ask.of),
            ("netsched scoring", netsched_served, whole_gpus))


def sample(nodes: list[TraceNode], fraction: float, seed: int) -> list[TraceNode]:
    if fraction >= 1:
        return nodes
    pick = np.random.default_rng(seed).choice(len(nodes), max(1, round(fraction * len(nodes))), replace=False)
    return [nodes[i] for i in sorted(pick)]


def rows(outcomes: dict[str, list[OnlineOutcome]]) -> list[str]:
    out = ["| policy | pods | queueing p50 s | queueing p95 s | GPU utilisation % | utilisation while pods "
           "wait % | hours some pod waited | waiting at last arrival | never placed | wall s per run |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for name, runs_ in outcomes.items():
        def mean(attr: str, runs_: list[OnlineOutcome] = runs_) -> float:
            return statistics.mean(getattr(r, attr) for r in runs_)
        out.append(f"| {name} | {mean('pods'):.0f} | {mean('queue_p50'):.0f} | {mean('queue_p95'):.0f} | "
                   f"{100 * mean('utilisation'):.2f} | {100 * mean('utilisation_waiting'):.2f} | "
                   f"{mean('waited_seconds') / 3600:.2f} | "
                   f"{mean('waiting_at_end'):.1f} | {mean('never_placed'):.1f} | {mean('seconds'):.1f} |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace-dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--seeds", type=int, default=3, help="node samples of the smaller cluster")
    ap.add_argument("--fraction", type=float, default=0.125,
                    help="share of the nodes the smaller cluster keeps")
    ap.add_argument("--compress", type=float, default=1000.0, help="arrivals this many times faster there")
    ap.add_argument("--no-publish", action="store_true")
    args = ap.parse_args()
    try:
        nodes, pods = read_trace(args.trace_dir)
    except TraceError as exc:
        print(f"trace_online: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    gpu_pods = [p for p in pods if p.num_gpu]
    sets = (("GPU pods sharing no GPU", [p for p in gpu_pods if not p.shares_gpu]),
            ("every GPU pod (shares included)", gpu_pods))
    settings = ((f"the trace's {len(nodes)} GPU nodes, the trace's own times", 1.0, 1.0, 1),
                (f"{args.fraction:g} of the nodes ({args.seeds} samples), arrivals {args.compress:g}x faster",
                 args.fraction, args.compress, args.seeds))
    sections = []
    for setting, fraction, compress, seeds in settings:
        for title, chosen in sets:
            outcomes: dict[str, list[OnlineOutcome]] = {name: [] for name, _, _ in POLICIES}
            for seed in range(seeds):
                cluster = sample(nodes, fraction, seed)
                for name, choose, ask in POLICIES:
                    outcomes[name].append(replay_online(name, cluster, chosen, choose, ask, compress, seed))
                    o = outcomes[name][-1]
                    print(f"  {setting}, {title}, seed {seed}, {name}: p95 {o.queue_p95:.0f} s, "
                          f"{o.seconds:.1f} s", flush=True)
            gpus = statistics.mean(sum(n.gpus for n in sample(nodes, fraction, s)) for s in range(seeds))
            sections += [f"**{setting}** ({gpus:.0f} GPUs), {title}: {len(runs(chosen))} pods with a run "
                         "time", "", *rows(outcomes), ""]
    text = "\n".join([
        SECTION, "",
        f"`python bench/trace_online.py --seeds {args.seeds} --fraction {args.fraction:g} --compress "
        f"{args.compress:g}` ({time.strftime('%Y-%m-%d')}, {time.monotonic() - started:.0f} s): the openb "
        "trace's pods arriving at their creation times and running their own run times; means over the "
        "node samples.", "", *sections])
    return publish_unless(args.no_publish, text)


if __name__ == "__main__":
    sys.exit(main())
