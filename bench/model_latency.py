"""Measure the extender's latency when it scores by the completion-time model, 100 to 5,000 nodes.

    python bench/model_latency.py [--model models/current.json] [--quick] [--seed 1] [--telemetry]

The same cluster, requests and HTTP stack as extender_latency.py, with the extender's
scorer the model (ModelScorer) instead of the topology heuristic, and the request's pod
carrying the operator's workload hints. Both scorers run in the same run, so the ratio is
like for like. Rewrites "Model serving latency" in docs/benchmarks-history.md; with --telemetry,
"Model serving latency with telemetry": every node has a fresh measured link to each node of
the job's pods and to the pod's data endpoint, and a NIC reading, so every network feature is
known (as with agents and Prometheus), not NaN.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import orjson
from threadpoolctl import threadpool_limits

from netsched.api.labels import (
    COMMUNICATION,
    DATA_SOURCE,
    EXPECTED_SECONDS,
    INPUT_SIZE_GB,
    REPLICAS,
    WORKLOAD_KIND,
)
from netsched.extender.engine import Extender
from netsched.extender.learned import ModelScorer, ModelSource
from netsched.extender.metrics import Metrics
from netsched.extender.scorers import TopologyScorer
from netsched.models.predictor import SCREEN_ROWS
from netsched.telemetry.store import TelemetryStore

sys.path.insert(0, str(Path(__file__).parent))
from extender_latency import (  # noqa: E402
    JOB,
    QUICK_REQUESTS,
    QUICK_WARMUP,
    REQUESTS,
    SIZES,
    WARMUP,
    build_cache,
    measure_http,
    ms,
    request_bodies,
    start_uvicorn,
)
from report import publish  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Model serving latency"
DATA = "10.0.0.9:9000"  # the data endpoint of the pods in --telemetry runs
HINTS = {WORKLOAD_KIND: "training", REPLICAS: "4", INPUT_SIZE_GB: "200", COMMUNICATION: "high",
         EXPECTED_SECONDS: "3600"}


def hinted(bodies: list[bytes], data: str | None = None) -> list[bytes]:
    """The bodies with the operator's workload hints on the pod (and a data endpoint, if given)."""
    out = []
    for body in bodies:
        doc = orjson.loads(body)
        notes = doc["Pod"]["metadata"].setdefault("annotations", {})
        notes.update(HINTS)
        if data:
            notes[DATA_SOURCE] = f"endpoint:{data}"
        out.append(orjson.dumps(doc))
    return out


def measured_everything(cache, names: list[str], seed: int) -> TelemetryStore:
    """Fresh links from every node to each node of the bench job's pods and to DATA, and NIC readings."""
    rng = np.random.default_rng(seed)
    store = TelemetryStore(max_age=3600.0)
    targets = [*dict.fromkeys(cache.snapshot("default", JOB).peers), DATA]
    store.record_many([(node, target, float(rng.uniform(0.05, 3)), float(rng.uniform(100, 25000)), None)
                       for target in targets for node in names],
                      [(node, float(rng.uniform(0, 1)), None) for node in names])
    return store


def run(n: int, model: Path | None, shortlist: int, seed: int, count: int, warmup: int,
        telemetry: bool = False) -> dict:
    cache, names = build_cache(n, seed)
    store = measured_everything(cache, names, seed) if telemetry else None
    metrics = Metrics()
    scorer = TopologyScorer()
    if model is not None:
        source = ModelSource(model, metrics, reload_seconds=3600)
        source.poll()
        if source.predictor is None:
            raise SystemExit(f"model {model} could not be loaded; see the log line above")
        scorer = ModelScorer(source, scorer, metrics)
    port, stop = start_uvicorn(Extender(cache, telemetry=store, scorer=scorer, shortlist=shortlist,
                                        metrics=metrics))
    try:
        times = measure_http(port, hinted(request_bodies(names, seed), data=DATA if telemetry else None),
                             count, warmup)
    finally:
        stop()
    failed = metrics.registry.get_sample_value("netsched_extender_model_fallbacks_total",
                                               {"reason": "predict_error"})
    if failed:
        raise SystemExit("the model failed on some requests: these would be the heuristic's figures")
    return times


def main() -> int:
    threadpool_limits(1, user_api="openmp")  # as `netsched extender --model` runs
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "models/current.json")
    parser.add_argument("--quick", action="store_true", help="few requests: a smoke run, not figures")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--telemetry", action="store_true", help="every network feature measured (see above)")
    args = parser.parse_args()
    warmup, requests = (QUICK_WARMUP, QUICK_REQUESTS) if args.quick else (WARMUP, REQUESTS)
    lines = ["| nodes | shortlist | scorer | filter | prioritize | filter + prioritize |",
             "|---:|---:|---|---:|---:|---:|"]
    for n in SIZES:
        for shortlist in (1, 0):
            for label, model in (("topology heuristic", None), ("model", args.model)):
                t = run(n, model, shortlist, args.seed, requests[n], warmup, args.telemetry)
                lines.append(f"| {n:,} | {shortlist} | {label} | {ms(t['filter'])} | "
                             f"{ms(t['prioritize'])} | {ms(t['both'])} |")
                print(f"{n} nodes, shortlist {shortlist}, {label}: done", file=sys.stderr)
    command = " ".join(["python bench/model_latency.py", *sys.argv[1:]])
    measured = ("Every node has a fresh measured link to each node of the job's pods and to the pod's data "
                "endpoint (`netsched.io/data-source: endpoint:...`) and a NIC reading: every network feature "
                "is known, as with agents and Prometheus. " if args.telemetry else "")
    publish("\n".join([
        SECTION + (" with telemetry" if args.telemetry else ""), "",
        f"Command: `{command}` ({time.strftime('%Y-%m-%d')}, 2 cores). Model: `{args.model}`.", "",
        "Wall time per request in ms, **p50 / p99**, measured as in *Extender latency* (same cluster, "
        "requests and HTTP stack); the pod carries workload hints. Filter scores all candidates in one "
        "batch: the artifact's linear screen over all of them, the chosen model (its boosted trees run by "
        f"ONNX Runtime) over the best {SCREEN_ROWS}; prioritize answers with the scores of its pod's filter. "
        f"{measured}With shortlist 1 kube-scheduler skips prioritize, so filter alone is the per-pod cost. "
        "Target: filter + prioritize p99 <= 5 ms at 5,000 node names.", "",
        *lines, ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
