import math

import numpy as np
import pytest

from netsched.models.features import (
    FEATURE_NAMES,
    FEATURES,
    NETWORK_BLIND,
    SchemaError,
    comm_gb_per_hour,
    feature_matrix,
    kind_features,
)


def test_feature_matrix_broadcasts_job_scalars_and_keeps_schema_order():
    values = {name: float(i) for i, name in enumerate(FEATURE_NAMES)}
    values["node_free_gpus"] = np.array([1.0, 2.0, 3.0])
    values["data_bw_mbps"] = np.array([math.nan, 10.0, 20.0])
    m = feature_matrix(values, 3)
    assert m.shape == (3, len(FEATURE_NAMES))
    assert m[:, FEATURE_NAMES.index("job_gpus")].tolist() == [0.0, 0.0, 0.0]
    assert m[:, FEATURE_NAMES.index("node_free_gpus")].tolist() == [1.0, 2.0, 3.0]
    bw = FEATURE_NAMES.index("data_bw_mbps")
    assert np.isnan(m[0, bw]) and m[2, bw] == 20
    assert m[1, -1] == len(FEATURE_NAMES) - 1  # the last feature sits in the last column


def test_feature_matrix_names_every_missing_feature():
    values = dict.fromkeys(FEATURE_NAMES, 1.0)
    del values["nic_util"], values["replicas"]
    with pytest.raises(SchemaError, match=r"missing for replicas, nic_util \(schema v2\); pass NaN"):
        feature_matrix(values, 2)


def test_feature_matrix_over_a_subset_of_names():
    values = dict.fromkeys(FEATURE_NAMES, 2.0)
    assert feature_matrix(values, 1, NETWORK_BLIND).shape == (1, len(NETWORK_BLIND))


def test_schema_names_are_unique_and_the_blind_set_has_no_network_feature():
    assert len(set(FEATURE_NAMES)) == len(FEATURE_NAMES)
    groups = {f.name: f.group for f in FEATURES}
    assert {groups[n] for n in NETWORK_BLIND} == {"job", "node"}
    assert "peer_bw_mbps" not in NETWORK_BLIND and "job_gpus" in NETWORK_BLIND


def test_one_hot_helpers():
    assert kind_features("etl") == {"kind_training": 0.0, "kind_inference": 0.0, "kind_etl": 1.0,
                                    "kind_batch": 0.0}
    assert sum(kind_features(None).values()) == 0



def test_communication_is_the_stated_gb_per_hour_else_what_its_level_stands_for():
    assert comm_gb_per_hour("42.5", "high") == 42.5
    assert comm_gb_per_hour(None, "high") == 600.0 and comm_gb_per_hour("lots", "low") == 10.0
    assert math.isnan(comm_gb_per_hour(None, None)) and math.isnan(comm_gb_per_hour(-1, "extreme"))
