"""The openb trace loader: tiny CSV files written here (the project commits no copy of the trace)."""

from __future__ import annotations

import pytest

from netsched.datagen.openb import NODE_FILE, POD_FILE, TraceError, read_nodes, read_pods, read_trace

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,96000,393216,8,G2\n"
PODS = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
        "scheduled_time\n"
        "p0,12000,16384,1,1000,,LS,Running,0,125,0\n"
        "p1,6000,12288,1,460,V100M16|V100M32,BE,Running,4,,\n"
        "p2,8000,8192,0,0,,LS,Pending,9,,\n"
        "p3,32000,65536,8,1000,,Burstable,Running,10,20,11\n")


def test_reads_nodes_and_pods(tmp_path):
    (tmp_path / NODE_FILE).write_text(NODES)
    (tmp_path / POD_FILE).write_text(PODS)
    nodes, pods = read_trace(tmp_path)
    assert [(n.name, n.gpus, n.model) for n in nodes] == [("n0", 2, "P100"), ("n1", 8, "G2")]
    assert [p.gpu_request for p in pods] == [1.0, 0.46, 0.0, 8.0]
    assert [p.shares_gpu for p in pods] == [False, True, False, False]
    assert pods[1].gpu_spec == ("V100M16", "V100M32") and pods[1].deletion_time is None
    assert pods[0].deletion_time == 125 and pods[3].qos == "Burstable"


@pytest.mark.parametrize(("text", "message"), [
    ("sn,cpu_milli,memory_mib,gpu\nn0,1,1,1\n",
     "row 1: missing column(s) model (expected sn, cpu_milli, memory_mib, gpu, model)"),
    (NODES + "n2,lots,1,1,T4\n", "row 4: column cpu_milli: 'lots' is not a whole number"),
    (NODES + "n2,1,1,-2,T4\n", "row 4: column gpu: -2 is negative"),
    (NODES + "n2,1,1\n", "row 4: expected 5 cells"),
    (NODES + ",1,1,1,T4\n", "row 4: column sn is empty"),
], ids=["missing-column", "not-a-number", "negative", "short-row", "empty-name"])
def test_a_malformed_node_file_names_file_row_and_column(tmp_path, text, message):
    path = tmp_path / NODE_FILE
    path.write_text(text)
    with pytest.raises(TraceError) as caught:
        read_nodes(path)
    assert str(caught.value) == f"{path}: {message}"


@pytest.mark.parametrize(("row", "message"), [
    ("p9,1,1,1,1500,,LS,Running,0,,", "row 6: column gpu_milli: 1500 is not a share of one GPU (1..1000) "
                                      "for a pod with num_gpu 1"),
    ("p9,1,1,2,500,,LS,Running,0,,", "row 6: column gpu_milli: a pod of 2 GPUs must ask whole GPUs (1000), "
                                     "got 500"),
    ("p9,1,1,1,1000,,LS,Running,soon,,", "row 6: column creation_time: 'soon' is not a whole number"),
], ids=["share-above-one", "fraction-of-many", "bad-time"])
def test_a_malformed_pod_row_names_file_row_and_column(tmp_path, row, message):
    path = tmp_path / POD_FILE
    path.write_text(PODS + row + "\n")
    with pytest.raises(TraceError) as caught:
        read_pods(path)
    assert str(caught.value) == f"{path}: {message}"


def test_a_missing_file_says_where_to_put_it(tmp_path):
    with pytest.raises(TraceError, match=f"{tmp_path / NODE_FILE}: no such file; put the openb trace's CSV"):
        read_trace(tmp_path)
