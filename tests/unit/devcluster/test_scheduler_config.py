from pathlib import Path

from netsched.api.labels import SCHEDULER_NAME
from netsched.devcluster.scheduler_config import ExtenderSettings, scheduler_config


def test_netsched_profile_scores_every_node_without_leader_election():
    config = scheduler_config(Path("/k/scheduler.kubeconfig"))
    assert config["clientConnection"]["kubeconfig"] == "/k/scheduler.kubeconfig"
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["percentageOfNodesToScore"] == 100
    assert SCHEDULER_NAME in [p["schedulerName"] for p in config["profiles"]]
    assert "extenders" not in config


def test_extender_block_manages_gpus_but_keeps_scheduler_gpu_accounting():
    config = scheduler_config(Path("k"), ExtenderSettings(url_prefix="http://127.0.0.1:8888"))
    (block,) = config["extenders"]
    assert block["urlPrefix"] == "http://127.0.0.1:8888"
    assert (block["filterVerb"], block["prioritizeVerb"]) == ("filter", "prioritize")
    assert block["nodeCacheCapable"] is True and block["ignorable"] is True
    assert block["managedResources"] == [{"name": "nvidia.com/gpu", "ignoredByScheduler": False}]
    assert block["weight"] >= 1


def test_netsched_profile_packs_gpus_so_a_fallback_without_the_extender_keeps_gangs_together():
    (profile,) = [p for p in scheduler_config(Path("k"))["profiles"] if p["schedulerName"] == SCHEDULER_NAME]
    (fit,) = profile["pluginConfig"]
    assert fit["name"] == "NodeResourcesFit"
    assert fit["args"]["scoringStrategy"] == {"type": "MostAllocated",
                                              "resources": [{"name": "nvidia.com/gpu", "weight": 1}]}
