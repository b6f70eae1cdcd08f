import pytest

from netsched.extender.plugin import InvalidNeeds, Refused
from netsched.extender.plugins.data_distance import DataDistance
from netsched.extender.plugins.data_distance.annotation import max_data_distance
from netsched.testing.extender import plugin_request


def need(source: str, distance: str | None = None) -> dict:
    found = {"netsched.io/data-source": source}
    return found if distance is None else found | {"netsched.io/max-data-distance": distance}


@pytest.mark.parametrize("annotations, rejected", [
    pytest.param({}, set(), id="no-annotation"),
    pytest.param(need("zone:zone-a"), set(), id="a-source-alone-is-no-limit"),
    pytest.param(need("zone:zone-a", "zone"), {"b1-0"}, id="zone"),
    pytest.param(need("rack:rack-a1", "rack"), {"a2-0", "b1-0"}, id="rack"),
    pytest.param(need("node:a1-1", "node"), {"a1-0", "a2-0", "b1-0"}, id="node"),
    pytest.param(need("zone:zone-z", "zone"), Refused, id="a-source-the-cluster-lacks-refuses"),
])
def test_data_distance(annotations, rejected):
    req, idx, names = plugin_request(annotations)
    if rejected is Refused:
        with pytest.raises(Refused, match="is not in this cluster's topology"):
            DataDistance().reject(req, idx)
        return
    assert {names[pos] for pos in DataDistance().reject(req, idx)} == rejected


@pytest.mark.parametrize("annotations, message", [
    pytest.param({"netsched.io/max-data-distance": "rack"}, "needs netsched.io/data-source to name",
                 id="without-a-source"),
    pytest.param(need("endpoint:10.0.0.5:9000", "rack"), "for an endpoint use", id="towards-an-endpoint"),
    pytest.param(need("zone:zone-a", "far"), "write one of node, rack, zone", id="not-a-distance"),
    pytest.param(need("s3://bucket", "zone"), "must be <kind>:<name>", id="a-source-of-no-kind"),
])
def test_max_data_distance_annotation_errors(annotations, message):
    with pytest.raises(InvalidNeeds, match=message):
        max_data_distance(annotations)
