import math

import numpy as np
import pytest

from netsched.models.features import FEATURE_NAMES, TARGET, SchemaError
from netsched.models.gpus import GPU_FEATURES, gpu_features
from netsched.testing.models import sim_rows
from netsched.training.dataset import COLUMNS, dataset_from_rows, read_dataset, write_dataset


def write_csv(path, header, rows):
    path.write_text("\n".join([",".join(header), *(",".join(r) for r in rows)]) + "\n")
    return path


def test_write_read_round_trip(tmp_path):
    rows = sim_rows(jobs=5)
    assert write_dataset(tmp_path / "d.csv", rows) == 40
    ds = read_dataset(tmp_path / "d.csv")
    want = dataset_from_rows(rows)
    assert len(ds) == 40
    np.testing.assert_allclose(ds.X, want.X, rtol=1e-5)  # cells keep 6 significant digits
    assert (np.isnan(ds.X) == np.isnan(want.X)).all()  # an unknown stays unknown
    np.testing.assert_allclose(ds.y, want.y, rtol=1e-5)
    np.testing.assert_allclose(ds.start, want.start, atol=1e-3)  # Unix times keep their milliseconds
    assert ds.candidate_set.tolist() == want.candidate_set.tolist()
    assert ds.chosen.tolist() == want.chosen.tolist()
    assert [len(s) for s in ds.sets()] == [8] * 5
    assert [ds.candidate_set[s[0]] for s in ds.sets()] == [f"sim-3-{k:06d}" for k in range(5)]  # by start


def test_append_writes_the_header_once(tmp_path):
    rows = sim_rows(jobs=2)
    write_dataset(tmp_path / "d.csv", rows[:8], append=True)
    write_dataset(tmp_path / "d.csv", rows[8:], append=True)
    lines = (tmp_path / "d.csv").read_text().splitlines()
    assert lines[0] == ",".join(COLUMNS) and len(lines) == 17
    assert len(read_dataset(tmp_path / "d.csv")) == 16


def test_a_row_lacking_a_column_is_refused(tmp_path):
    row = dict(sim_rows(jobs=1)[0])
    del row["nic_util"]
    with pytest.raises(SchemaError, match="row 1 .* lacks column.s. nic_util"):
        write_dataset(tmp_path / "d.csv", [row])


def cells(row: dict) -> list[str]:
    return ["" if isinstance(row[c], float) and math.isnan(row[c]) else str(row[c]) for c in COLUMNS]


@pytest.fixture
def good(tmp_path):
    return [cells(r) for r in sim_rows(jobs=1)]


def test_a_header_missing_a_column(tmp_path, good):
    header = [c for c in COLUMNS if c != "nic_util"]
    rows = [[v for c, v in zip(COLUMNS, r, strict=True) if c != "nic_util"] for r in good]
    with pytest.raises(SchemaError, match=r"header does not match schema v2: missing \['nic_util'\]"):
        read_dataset(write_csv(tmp_path / "d.csv", header, rows))


def test_another_schema_version_names_the_line(tmp_path, good):
    good[2][0] = "3"
    with pytest.raises(SchemaError, match="d.csv: line 4: schema_version '3', this netsched reads version 2"):
        read_dataset(write_csv(tmp_path / "d.csv", COLUMNS, good))


def test_a_non_numeric_cell_names_line_and_column(tmp_path, good):
    good[5][COLUMNS.index("node_cpu_load")] = "busy"
    with pytest.raises(SchemaError, match="line 7: column node_cpu_load: 'busy' is not a number"):
        read_dataset(write_csv(tmp_path / "d.csv", COLUMNS, good))


def test_a_torn_row_names_its_line_even_after_blank_lines(tmp_path, good):
    path = write_csv(tmp_path / "d.csv", COLUMNS, good)
    text = path.read_text().splitlines()
    text.insert(2, "")  # a blank line: skipped, but it still counts as a line
    text[5] = text[5][: len(text[5]) // 2]  # a crash mid-write
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(SchemaError, match=rf"d.csv: line 6: \d+ cells, the header has {len(COLUMNS)}"):
        read_dataset(path)


def test_a_bad_target_or_flag(tmp_path, good):
    good[1][COLUMNS.index(TARGET)] = "-3"
    with pytest.raises(SchemaError, match="line 3: column duration_seconds: '-3' must be a positive finite"):
        read_dataset(write_csv(tmp_path / "d.csv", COLUMNS, good))
    good[1][COLUMNS.index(TARGET)] = "30"
    good[0][COLUMNS.index("chosen")] = "yes"
    with pytest.raises(SchemaError, match="line 2: column chosen: 'yes' must be 0 or 1"):
        read_dataset(write_csv(tmp_path / "d.csv", COLUMNS, good))


def test_files_that_are_not_datasets(tmp_path):
    with pytest.raises(SchemaError, match="nope.csv: no such dataset file"):
        read_dataset(tmp_path / "nope.csv")
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(SchemaError, match="not a netsched dataset"):
        read_dataset(tmp_path / "x.csv")
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SchemaError, match="bin.csv: not a readable CSV dataset"):
        read_dataset(tmp_path / "bin.csv")
    write_csv(tmp_path / "empty.csv", COLUMNS, [])
    with pytest.raises(SchemaError, match="no rows under it"):
        read_dataset(tmp_path / "empty.csv")


def test_columns_are_meta_then_features_then_target():
    assert COLUMNS[:8][0] == "schema_version" and COLUMNS[8:-1] == FEATURE_NAMES and COLUMNS[-1] == TARGET


def test_a_schema_1_file_is_read_as_schema_2_gpu_flags_as_capability_levels_as_gb_per_hour(tmp_path):
    from netsched.models.features import INDEX

    v1 = ["schema_version", "source", "job_id", "candidate_set", "node", "site", "start_unix", "chosen",
          *[c for c in COLUMNS[8:] if not c.startswith("gpu_") and c != "comm_gb_per_hour"],
          "comm_intensity", "gpu_h100", "gpu_a100", "gpu_l40s", "gpu_v100"]
    rows = []
    for i, (comm, flags) in enumerate([("3", "1000"), ("1", "0001"), ("", "0000")]):
        row = dict.fromkeys(v1, "1")
        row.update(schema_version="1", job_id=f"j{i}", candidate_set=f"j{i}", start_unix=str(i), chosen="1",
                   comm_intensity=comm, **dict(zip(["gpu_h100", "gpu_a100", "gpu_l40s", "gpu_v100"], flags,
                                                   strict=True)))
        rows.append([row[c] for c in v1])
    path = tmp_path / "v1.csv"
    write_csv(path, v1, rows)
    ds = read_dataset(path)
    assert ds.X[:, INDEX["gpu_tflops16"]][:2].tolist() == [989.0, 125.0]  # H100, V100
    assert ds.X[:, INDEX["comm_gb_per_hour"]][:2].tolist() == [600.0, 10.0]
    assert np.isnan(ds.X[2, INDEX["gpu_tflops16"]]) and np.isnan(ds.X[2, INDEX["comm_gb_per_hour"]])


def by_product(good: list[list[str]], products: list[str]) -> tuple[list[str], list[list[str]]]:
    """The rows with a gpu_product column in place of the four GPU capability columns."""
    keep = [i for i, c in enumerate(COLUMNS) if c not in GPU_FEATURES]
    header = [COLUMNS[i] for i in keep] + ["gpu_product"]
    return header, [[r[i] for i in keep] + [p] for r, p in zip(good, products, strict=True)]


def test_a_gpu_product_column_stands_for_the_capability_columns(tmp_path, good):
    header, rows = by_product(good, ["NVIDIA-L40S", "", *["tesla-t4"] * (len(good) - 2)])
    ds = read_dataset(write_csv(tmp_path / "d.csv", header, rows))
    gpu = ds.X[:, [FEATURE_NAMES.index(f) for f in GPU_FEATURES]]
    assert gpu[0].tolist() == list(gpu_features("NVIDIA-L40S").values())
    assert np.isnan(gpu[1]).all()  # no product: unknown
    assert gpu[2].tolist() == list(gpu_features("Tesla-T4").values())  # the table's case-insensitive match


def test_a_gpu_product_the_table_does_not_know_is_refused_with_the_fix(tmp_path, good):
    header, rows = by_product(good, ["NVIDIA-L40S", "NVIDIA-GH200-Superchip", *[""] * (len(good) - 2)])
    with pytest.raises(SchemaError, match=r"d.csv: line 3: gpu_product 'NVIDIA-GH200-Superchip' is not in "
                       r"the GPU capability table .*--gpu-table"):
        read_dataset(write_csv(tmp_path / "d.csv", header, rows))
