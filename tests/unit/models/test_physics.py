import math

import numpy as np
import pytest

from netsched.models.features import FEATURE_NAMES, INDEX, NETWORK_BLIND
from netsched.models.physics import (
    REFERENCE_MEM_BW_GBPS,
    REFERENCE_TFLOPS16,
    TOTAL,
    estimate_names,
    peers_by_reach,
    with_estimates,
)
from netsched.testing.models import sim_rows
from netsched.training.dataset import dataset_from_rows
from netsched.training.fitting import fit_model

ALL = estimate_names(FEATURE_NAMES)


def row(**values: float) -> np.ndarray:
    """One schema row: a 2-replica job with an hour's hint on a reference GPU, data one hop away, a peer
    in another rack; `values` change it."""
    base = {name: math.nan for name in FEATURE_NAMES}
    base.update(expected_seconds=3600.0, gpu_tflops16=REFERENCE_TFLOPS16,
                gpu_mem_bw_gbps=REFERENCE_MEM_BW_GBPS, input_size_gb=100.0, replicas=2.0,
                data_bw_mbps=8000.0, data_distance=2.0, nic_util=0.0,
                comm_gb_per_hour=36.0, peer_count=1.0, peer_frac_node=0.0, peer_bw_mbps=4000.0)
    base.update(values)
    return np.array([[base[name] for name in FEATURE_NAMES]])


def estimates(**values: float) -> dict[str, float]:
    Z = with_estimates(row(**values), FEATURE_NAMES)
    return dict(zip(ALL, Z[0, len(FEATURE_NAMES):], strict=True))


@pytest.mark.parametrize("values, name, seconds", [
    ({}, "est_log_compute_s", 3600.0),  # the hint, on the reference GPU
    ({"gpu_tflops16": REFERENCE_TFLOPS16 / 4}, "est_log_compute_s", 7200.0),  # sqrt(4 x 1)
    ({"gpu_tflops16": REFERENCE_TFLOPS16 / 2, "gpu_mem_bw_gbps": REFERENCE_MEM_BW_GBPS / 2},
     "est_log_compute_s", 7200.0),
    ({}, "est_log1p_transfer_s", 50 * 8000 / 8000),  # 50 GB per replica at 8 Gbit/s
    ({"nic_util": 0.5}, "est_log1p_transfer_s", 50 * 8000 / 4000),  # half the NIC left
    ({"data_distance": 0.0}, "est_log1p_transfer_s", 0.0),  # on the node's own disk
    ({}, "est_log1p_exchange_s", 2 * 1 / 2 * 36 * 8000 / 4000),  # ring all-reduce of 36 GB at 4 Gbit/s
    ({"peer_count": 0.0}, "est_log1p_exchange_s", 0.0),
    ({"peer_frac_node": 1.0}, "est_log1p_exchange_s", 0.0),  # every peer on this node: NVLink
    ({}, TOTAL, 3600.0 + 50 + 72),
], ids=["reference", "quarter-tflops", "half-both", "transfer", "busy-nic", "local-data", "exchange",
        "no-peers", "peers-on-node", "total"])
def test_each_estimate_adds_time_up_as_the_physics_says(values, name, seconds):
    log = np.log1p if name.startswith("est_log1p") else np.log
    assert estimates(**values)[name] == pytest.approx(log(seconds))


def test_an_unknown_input_leaves_its_estimate_unknown_never_infinite():
    unknown = estimates(expected_seconds=math.nan, peer_bw_mbps=math.nan, data_bw_mbps=0.0)
    assert math.isnan(unknown["est_log_compute_s"]) and math.isnan(unknown[TOTAL])
    assert math.isnan(unknown["est_log1p_exchange_s"]) and math.isnan(unknown["est_log1p_transfer_s"])


def test_the_network_blind_features_get_no_estimate_that_reads_a_network_column():
    assert estimate_names(NETWORK_BLIND) == ("est_log_compute_s",)
    X = row()[:, [INDEX[f] for f in NETWORK_BLIND]]
    assert with_estimates(X, NETWORK_BLIND).shape == (1, len(NETWORK_BLIND) + 1)


def test_the_physics_kind_ranks_a_gpu_faster_than_any_it_trained_on_as_faster():
    """Trees alone score a GPU beyond their training range like the fastest one they saw; the linear
    part over the estimates carries it on."""
    ds = dataset_from_rows(sim_rows(jobs=120, seed=4))
    fastest_seen = np.nanmax(ds.X[:, INDEX["gpu_tflops16"]])
    job = ds.X[ds.X[:, INDEX["gpu_tflops16"]] == fastest_seen][:1]
    faster = job.copy()
    faster[0, INDEX["gpu_tflops16"]] *= 2
    faster[0, INDEX["gpu_mem_bw_gbps"]] *= 2
    rows = np.vstack([job, faster])
    log_y = np.log(ds.y)
    physics = fit_model("hist_gradient_boosting_physics", FEATURE_NAMES, ds.X, log_y, ds.candidate_set, 0)
    trees = fit_model("hist_gradient_boosting_whole", FEATURE_NAMES, ds.X, log_y, ds.candidate_set, 0)
    seen, new = physics.predict(rows)
    assert new < seen - 0.1
    seen, new = trees.predict(rows)
    assert new == pytest.approx(seen)


def test_peers_by_reach_counts_nearer_peers_in_every_wider_share_and_links_as_slowness_none_fastest():
    rows = np.vstack([
        row(peer_count=4.0, peer_frac_node=0.25, peer_frac_rack=0.25, peer_frac_zone=0.25),
        row(peer_count=2.0, peer_frac_node=1.0, peer_frac_rack=0.0, peer_frac_zone=0.0, peer_bw_mbps=math.nan,
            peer_rtt_ms=math.nan),
        row(peer_count=0.0, peer_frac_node=math.nan, peer_bw_mbps=math.nan, peer_rtt_ms=math.nan),
        row(peer_count=1.0, peer_frac_node=0.0, peer_frac_rack=1.0, peer_frac_zone=0.0, peer_bw_mbps=math.nan,
            peer_rtt_ms=math.nan),  # a remote peer whose link was not measured stays unknown
    ])
    out = peers_by_reach(rows, FEATURE_NAMES)
    at = [INDEX[f] for f in ("peer_frac_node", "peer_frac_rack", "peer_frac_zone", "peer_bw_mbps",
                             "peer_rtt_ms")]
    np.testing.assert_array_equal(out[0, at], [0.25, 0.5, 0.75, 1 / 4000.0, rows[0, INDEX["peer_rtt_ms"]]])
    np.testing.assert_array_equal(out[1, at], [1.0, 1.0, 1.0, 0.0, 0.0])  # no link: the fastest
    assert out[2, INDEX["peer_bw_mbps"]] == 0.0 and out[2, INDEX["peer_rtt_ms"]] == 0.0
    assert np.isnan(out[3, INDEX["peer_bw_mbps"]]) and out[3, INDEX["peer_frac_rack"]] == 1.0
    assert np.isnan(rows[1, INDEX["peer_bw_mbps"]])  # the caller's rows are left as they were
    assert np.isnan(peers_by_reach(row(peer_bw_mbps=0.0), FEATURE_NAMES)[0, INDEX["peer_bw_mbps"]])
    blind = rows[:, [INDEX[f] for f in NETWORK_BLIND]]
    assert peers_by_reach(blind, NETWORK_BLIND) is blind  # no peer columns: nothing to restate


def test_a_physics_model_pickled_before_peers_by_reach_reads_the_peer_columns_as_written():
    ds = dataset_from_rows(sim_rows(jobs=40, seed=5))
    model = fit_model("hist_gradient_boosting_physics", FEATURE_NAMES, ds.X, np.log(ds.y), ds.candidate_set,
                      seed=0, identity=False)  # the GPU flags, after these columns, are not what is tested
    assert model.by_reach
    np.testing.assert_array_equal(model.inputs(ds.X), peers_by_reach(with_estimates(ds.X, FEATURE_NAMES),
                                                                     FEATURE_NAMES))
    del model.__dict__["by_reach"]  # as unpickled from an artifact written before it existed
    np.testing.assert_array_equal(model.inputs(ds.X), with_estimates(ds.X, FEATURE_NAMES))
