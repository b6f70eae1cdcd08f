"""The operator's GPUJob metrics as Prometheus reads them from the real operator: jobs by phase, the
queue-time histogram and the oldest waiting job, against the real control plane."""

from __future__ import annotations

import json
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from netsched.api.gpujob import GROUP, PLURAL, VERSION, Phase
from netsched.devcluster.wait import poll
from netsched.testing.builders import make_gpujob


def scrape(dev_cluster) -> dict[tuple[str, tuple], float]:
    """The operator's /metrics: (sample name, sorted labels) -> value."""
    port = json.loads((dev_cluster.directory / "state.json").read_text())["ports"]["operator-metrics"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def by_phase(metrics: dict) -> dict[str, float]:
    return {dict(labels)["phase"]: v for (name, labels), v in metrics.items() if name == "netsched_gpujobs"}


def queued(metrics: dict) -> float:
    return metrics.get(("netsched_gpujob_queue_seconds_count", ()), 0.0)


def test_jobs_by_phase_and_queue_time_follow_a_job_and_leave_nothing_when_it_is_deleted(dev_cluster, jobs,
                                                                                        namespace):
    before = scrape(dev_cluster)
    assert set(by_phase(before)) == set(Phase)  # every phase, 0 or not
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "metered", replicas=2, gpus=4, duration="600s", manifest=True))

    def running() -> dict | None:
        job = jobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "metered")
        return job if (job.get("status") or {}).get("phase") == "Running" else None

    job = poll(running, 90, "GPUJob metered to run")
    now = poll(lambda: (m := scrape(dev_cluster)) and by_phase(m)["Running"] >= 1
               and queued(m) >= queued(before) + 1 and m, 30, "the operator to count the running job")
    sums = [m.get(("netsched_gpujob_queue_seconds_sum", ()), 0.0) for m in (now, before)]
    total = sums[0] - sums[1]
    assert 0 < total < 90  # this job's wait, seconds from its creation to both replicas running
    assert ("netsched_gpujob_oldest_waiting_seconds", ()) in now

    jobs.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "metered")

    def census_matches_the_api() -> bool:
        listed = jobs.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
        return (job["metadata"]["uid"] not in {j["metadata"]["uid"] for j in listed}
                and sum(by_phase(scrape(dev_cluster)).values()) == len(listed))
    poll(census_matches_the_api, 60, "the deleted job to leave the phase gauge")
