"""Where the extender's time goes when it scores by the model: filter at 5,000 nodes, profiled.

    python bench/model_profile.py [--model models/current.json] [--calls 200]

In-process (no HTTP), as `netsched extender --model` runs, on the cluster and requests of
extender_latency.py with the workload hints of model_latency.py. Filter is where the model
runs (prioritize answers with its filter's scores). Prints the mean time per filter and the
parts: the linear screen, the model's trees (ONNX Runtime), the feature building. Writes nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
from pathlib import Path

import orjson
from threadpoolctl import threadpool_limits

from netsched.extender.engine import Extender
from netsched.extender.learned import ModelScorer, ModelSource
from netsched.extender.metrics import Metrics
from netsched.extender.protocol import parse_args
from netsched.extender.scorers import TopologyScorer

sys.path.insert(0, str(Path(__file__).parent))
from extender_latency import BIG, build_cache, measure_calls, request_bodies  # noqa: E402
from model_latency import ROOT, hinted  # noqa: E402

PARTS = {  # label -> (file suffix, function name) in the profile
    "linear screen": ("netsched/models/predictor.py", "predict_values"),
    "trees (ONNX Runtime)": ("netsched/models/compiled.py", "predict"),
    "feature building": ("netsched/extender/model_features.py", "feature_values"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "models/current.json")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    threadpool_limits(1, user_api="openmp")
    cache, names = build_cache(BIG, 1)
    metrics = Metrics()
    source = ModelSource(args.model, metrics, reload_seconds=3600)
    source.poll()
    extender = Extender(cache, scorer=ModelScorer(source, TopologyScorer(), metrics), shortlist=1)
    requests = [parse_args(orjson.loads(b)) for b in hinted(request_bodies(names, 1))]
    seconds = measure_calls(lambda i: extender.filter(requests[i % len(requests)]), args.calls, len(requests))
    print(f"filter at {BIG:,} nodes: {seconds.mean() * 1000:.2f} ms per call")
    profile = cProfile.Profile()
    profile.enable()
    for i in range(args.calls):
        extender.filter(requests[i % len(requests)])
    profile.disable()
    stats = pstats.Stats(profile).stats
    for label, (suffix, name) in PARTS.items():
        hits = [(v[1], v[3]) for (file, _, func), v in stats.items()
                if file.endswith(suffix) and func == name]  # (calls, cumulative seconds)
        calls, seconds = sum(h[0] for h in hits), sum(h[1] for h in hits)
        print(f"  {label}: {seconds / args.calls * 1000:.2f} ms per filter "
              f"({calls / args.calls:.0f} calls; timed under the profiler)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
