"""Prometheus metrics of one extender, on its own registry (served at /metrics)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# Requests take well under a millisecond to a few milliseconds; resolve that range.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.latency = Histogram("netsched_extender_request_seconds", "Time to answer one request, by verb.",
                                 ["verb"], buckets=LATENCY_BUCKETS, registry=r)
        self.requests = Counter("netsched_extender_requests", "Requests answered, by verb and outcome "
                                "(ok, bad_request, stale_cache, error).", ["verb", "outcome"], registry=r)
        self.gangs = Counter("netsched_extender_gang_placements", "Gangs placed as one decision (POST "
                             "/gang), by result (placed, unplaced).", ["result"], registry=r)
        self.filtered = Counter("netsched_extender_nodes_filtered", "Candidate nodes removed by the "
                                "filter, by reason.", ["reason"], registry=r)
        self.prioritized = Counter("netsched_extender_prioritized", "Prioritize requests by where the "
                                   "scores came from: reused from the pod's filter or scored fresh.",
                                   ["scores"], registry=r)
        self.candidates = Histogram("netsched_extender_candidates", "Candidate nodes per filter request.",
                                    buckets=(1, 10, 100, 1000, 5000, 10000), registry=r)
        self.cache_age = Gauge("netsched_extender_cache_age_seconds", "Time since the apiserver was last "
                               "heard from on the node and pod watches.", registry=r)
        self.sources = Gauge("netsched_extender_source_synced", "1 while a watched kind (nodes, pods, "
                             "packingplans) is synced; 0 while it is waiting or absent (its CRD not "
                             "installed: the extender serves without it).", ["source"], registry=r)
        self.telemetry_links = Gauge("netsched_extender_telemetry_links", "Links with a measurement "
                                     "younger than the telemetry bound.", registry=r)
        self.telemetry_age = Gauge("netsched_extender_telemetry_feed_age_seconds", "Time since telemetry "
                                   "was last read from Prometheus (+Inf before the first read).", registry=r)
        self.events = Counter("netsched_extender_explain_events", "Placement explanations written as "
                              "pod events, by outcome.", ["outcome"], registry=r)
        self.event_lag = Histogram("netsched_extender_explain_event_seconds", "From the pod watch showing a "
                                   "binding to its explanation Event written: queue wait plus the write.",
                                   buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30), registry=r)
        self.watch_updates = Counter("netsched_extender_watch_updates", "Watch events by kind (nodes, pods, "
                                     "packingplans): changed what requests read, or unchanged (heartbeats, "
                                     "status) and let go in the watch process.", ["kind", "effect"],
                                     registry=r)
        self.model_loaded = Gauge("netsched_extender_model_loaded", "1 while a completion-time model "
                                  "serves, 0 while scoring falls back to the topology heuristic.", registry=r)
        self.model_loads = Counter("netsched_extender_model_loads", "Model artifacts read, by result "
                                   "(loaded, refused).", ["result"], registry=r)
        self.model_fallbacks = Counter("netsched_extender_model_fallbacks", "Requests scored by the "
                                       "topology heuristic instead of the model, by reason (no_model, "
                                       "predict_error).", ["reason"], registry=r)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
