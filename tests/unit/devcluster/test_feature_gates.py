"""Feature gates are passed only where the built control plane has them and they differ from its default."""

from __future__ import annotations

import pytest

from netsched.devcluster.feature_gates import BadFeatureGate, gates_to_pass, known_gates, parse

HELP_1_34 = """
      --feature-gates colonSeparatedMultimapStringString   Comma-separated list of component:key=value
                          kube:APIResponseCompression=true|false (BETA - default=true)
                          kube:DRAExtendedResource=true|false (ALPHA - default=false)
"""


def test_the_help_lists_the_settable_gates_with_their_defaults():
    assert known_gates(HELP_1_34) == {"APIResponseCompression": True, "DRAExtendedResource": False}
    older = "  DRAExtendedResource=true|false (ALPHA - default=false)"
    assert known_gates(older) == {"DRAExtendedResource": False}


@pytest.mark.parametrize("wanted, passed", [
    pytest.param({"DRAExtendedResource": True}, ["DRAExtendedResource=true"], id="alpha-turned-on"),
    pytest.param({"APIResponseCompression": True}, [], id="already-the-default"),
    pytest.param({"DynamicResourceAllocation": True}, [], id="ga-not-listed"),
])
def test_a_gate_is_passed_only_where_needed(wanted, passed):
    assert gates_to_pass(wanted, known_gates(HELP_1_34))[0] == passed


@pytest.mark.parametrize("text", ["DRAExtendedResource", "DRAExtendedResource=yes", "x=true"])
def test_a_malformed_gate_is_refused_naming_the_form(text):
    with pytest.raises(BadFeatureGate, match="give NAME=true or NAME=false"):
        parse([text])


def test_the_gates_a_minor_needs_and_the_ones_asked_for_go_in_one_flag():
    from netsched.devcluster.feature_gates import one_feature_gates_flag
    assert one_feature_gates_flag(["--feature-gates=GenericWorkload=true", "--runtime-config=x=true",
                                   "--feature-gates=DRAExtendedResource=true"]) == [
        "--runtime-config=x=true", "--feature-gates=GenericWorkload=true,DRAExtendedResource=true"]
    assert one_feature_gates_flag(["--runtime-config=x=true"]) == ["--runtime-config=x=true"]
