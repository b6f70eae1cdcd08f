import logging
import math
import re

import pytest

from netsched.api.labels import GPU_MEMORY_MIB_LABEL, GPU_TFLOPS_FP32_LABEL, GPU_TFLOPS_LABEL
from netsched.models import gpus
from netsched.models.gpus import BUILTIN, GPU_FEATURES, GpuTable, GpuTableError

H100 = {"gpu_tflops16": 989.0, "gpu_tflops_fp32": 67.0, "gpu_mem_bw_gbps": 3350.0, "gpu_memory_gib": 80.0}


def test_a_known_product_is_its_numbers_whatever_the_case_and_separators():
    table = GpuTable(BUILTIN)
    assert table.features("NVIDIA-H100-80GB-HBM3") == H100
    assert table.features("nvidia h100_80gb hbm3") == H100
    assert set(table.features("Tesla-T4")) == set(GPU_FEATURES)


@pytest.mark.parametrize("product, nearest", [
    pytest.param("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", "NVIDIA-H100-80GB-HBM3", id="a MIG slice: its GPU"),
    pytest.param("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "NVIDIA-A100-SXM4-40GB", id="family, then closest name"),
    pytest.param("NVIDIA-L4-24GB", "NVIDIA-L4", id="not the L40 or L40S"),
    pytest.param("Tesla-V100-SXM3-32GB", "Tesla-V100-SXM2-32GB", id="an unknown V100 variant"),
])
def test_an_unknown_gpu_gets_the_nearest_known_capability_and_one_warning_naming_it_and_the_fix(
        caplog, product, nearest):
    table = GpuTable(BUILTIN)
    with caplog.at_level(logging.WARNING, logger="netsched.models.gpus"):
        first, again = table.features(product), table.features(product)
    assert first == again == table.features(nearest)
    assert not any(math.isnan(v) or v == 0 for v in first.values())  # never silent zeros
    [warning] = caplog.records  # once per product, not once per node or request
    assert product in warning.message and repr(nearest) in warning.message
    assert "gpuCapabilities" in warning.message and "netsched.io/gpu-tflops" in warning.message


def test_a_gpu_of_no_known_family_still_gets_the_most_similar_name():
    table = GpuTable(BUILTIN)
    found = table.lookup("NVIDIA-GH200-480GB")
    assert found is not None and found[0] in BUILTIN


def test_node_labels_override_the_table_value_by_value():
    table = GpuTable(BUILTIN)
    labels = {GPU_TFLOPS_LABEL: "700", GPU_MEMORY_MIB_LABEL: "81559"}
    features = table.features("NVIDIA-H100-80GB-HBM3", labels)
    assert features["gpu_tflops16"] == 700.0 and features["gpu_memory_gib"] == pytest.approx(79.65, abs=0.01)
    assert features["gpu_mem_bw_gbps"] == 3350.0
    unlabelled = table.features(None, {GPU_TFLOPS_LABEL: "100", GPU_TFLOPS_FP32_LABEL: "oops"})
    assert unlabelled["gpu_tflops16"] == 100.0 and math.isnan(unlabelled["gpu_tflops_fp32"])


def test_a_node_without_a_product_label_is_unknown_not_zero():
    assert all(math.isnan(v) for v in GpuTable(BUILTIN).features(None).values())


def test_the_admin_table_adds_products_and_corrects_built_in_ones(tmp_path):
    path = tmp_path / "gpus.yaml"
    path.write_text("NVIDIA-RTX-PRO-6000: {tflops16: 500, tflopsFp32: 120, memoryBandwidthGBps: 1790, "
                    "memoryGiB: 96}\nNVIDIA-H100-80GB-HBM3: {tflops16: 900}\n")
    table = GpuTable.load(path)
    assert table.features("NVIDIA-RTX-PRO-6000") == {"gpu_tflops16": 500.0, "gpu_tflops_fp32": 120.0,
                                                     "gpu_mem_bw_gbps": 1790.0, "gpu_memory_gib": 96.0}
    assert table.features("NVIDIA-H100-80GB-HBM3") == {**H100, "gpu_tflops16": 900.0}
    assert str(path) in table.source


@pytest.mark.parametrize("text, message", [
    pytest.param("[1, 2]", "want a mapping of GPU product name", id="not a mapping"),
    pytest.param('{"X1": {"tflops16": 5}}', "X1: missing tflopsFp32, memoryBandwidthGBps, memoryGiB",
                 id="a new product needs every field"),
    pytest.param('{"NVIDIA-L4": {"tflops": 5}}', "NVIDIA-L4: unknown field(s) tflops", id="a typo"),
    pytest.param('{"NVIDIA-L4": {"tflops16": -5}}', "NVIDIA-L4.tflops16: -5 must be a positive number",
                 id="not positive"),
])
def test_a_bad_table_file_is_refused_naming_the_file_the_entry_and_the_fix(tmp_path, text, message):
    path = tmp_path / "gpus.json"
    path.write_text(text)
    with pytest.raises(GpuTableError, match=re.escape(f"GPU table {path}: ") + ".*" + re.escape(message)):
        GpuTable.load(path)
    with pytest.raises(GpuTableError, match="cannot be read .* --gpu-table or NETSCHED_GPU_TABLE"):
        GpuTable.load(tmp_path / "absent.json")


def test_the_table_in_use_comes_from_the_environment_until_configured(tmp_path, monkeypatch):
    path = tmp_path / "gpus.json"
    path.write_text('{"X9": {"tflops16": 1, "tflopsFp32": 2, "memoryBandwidthGBps": 3, "memoryGiB": 4}}')
    monkeypatch.setattr(gpus, "_table", None)
    monkeypatch.setenv(gpus.TABLE_ENV, str(path))
    assert gpus.gpu_features("X9")["gpu_memory_gib"] == 4.0
    gpus.configure(None)
    assert gpus.table().entries == BUILTIN
    monkeypatch.setattr(gpus, "_table", None)
