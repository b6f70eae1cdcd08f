"""The training and evaluation dataset: CSV, one row per (job, candidate node), schema-versioned.

Columns, in order: the meta columns below, the features of `netsched.models.features`
in schema order, then the target `duration_seconds`. Rows sharing a `candidate_set`
are the candidate nodes of one placement decision, each with its true completion time
(simulated, or measured by the testbed runner); `chosen` = 1 marks the candidate the
job really got in the run that produced the row (the operator's records are sets of one
such row). A cell left empty is NaN: unknown. The simulator, the testbed runner and the
operator's records (converted by `netsched.training.record_rows`) all produce these rows;
`read_dataset` also reads the operator's JSON Lines file directly.

Instead of the four GPU capability columns a file may name each row's GPU in a `gpu_product`
column (the node's `nvidia.com/gpu.product` label), as `netsched predict`'s candidates may: the
GPU table (netsched.models.gpus) turns it into the numbers. A product the table does not hold is
refused rather than given its nearest product's numbers, which predict and the extender do: a
model must not learn a GPU's history under another GPU's numbers.
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from netsched.models.features import COMM_LEVELS, FEATURE_NAMES, SCHEMA_VERSION, TARGET, SchemaError
from netsched.models.gpus import GPU_FEATURES, TABLE_ENV, gpu_features, table
from netsched.training.record_rows import rows_from_records

META_COLUMNS = {
    "schema_version": "this file format's version (SCHEMA_VERSION)",
    "source": "simulator, testbed or operator",
    "job_id": "the job (GPUJob uid, or the simulator's/runner's id)",
    "candidate_set": "the placement decision this row is a candidate of",
    "node": "the candidate node",
    "site": "the candidate node's zone: what the by-site cross-validation holds out",
    "start_unix": "when the job started, Unix seconds: what the by-time split orders by",
    "chosen": "1 if the job really ran on this candidate, 0 for a counterfactual candidate",
}
TEXT_COLUMNS = ("candidate_set", "job_id", "node", "site", "source")
GPU_PRODUCT = "gpu_product"  # optional: the node's GPU product, in place of the GPU_FEATURES columns
COLUMNS: tuple[str, ...] = (*META_COLUMNS, *FEATURE_NAMES, TARGET)


@dataclass(frozen=True)
class Dataset:
    X: np.ndarray  # (rows, features) float64, schema order
    y: np.ndarray  # completion seconds
    candidate_set: np.ndarray  # str per row
    job_id: np.ndarray
    node: np.ndarray
    site: np.ndarray
    start: np.ndarray  # Unix seconds
    chosen: np.ndarray  # bool
    source: np.ndarray
    # the cluster each row comes from, where the caller names it (`read_datasets(clusters_by_file=True)`,
    # `dataset_from_rows(cluster=...)`); "" unnamed. Not a column: cross-validation holds out one named
    # cluster at a time, where the records name several (netsched.training.train.site_folds)
    cluster: np.ndarray

    def __len__(self) -> int:
        return len(self.y)

    def take(self, rows: np.ndarray) -> Dataset:
        """The rows selected by a boolean mask or an index array, in that order."""
        return Dataset(**{k: v[rows] for k, v in self.__dict__.items()})

    def sets(self) -> list[np.ndarray]:
        """Row indices of each candidate set, sets ordered by start time (then id)."""
        return self._groups(self.candidate_set)

    def jobs(self) -> list[np.ndarray]:
        """Row indices of each job (all its candidate sets), jobs ordered by start time (then id)."""
        return self._groups(self.job_id)

    def _groups(self, keys: np.ndarray) -> list[np.ndarray]:
        ids, inverse = np.unique(keys, return_inverse=True)
        first_start = np.full(len(ids), np.inf)
        np.minimum.at(first_start, inverse, self.start)
        order = np.lexsort((ids, first_start))
        rows = np.argsort(inverse, kind="stable")
        bounds = np.cumsum(np.bincount(inverse, minlength=len(ids)))[:-1]
        groups = np.split(rows, bounds)
        return [groups[i] for i in order]


def dataset_from_rows(rows: Sequence[Mapping], cluster: str = "") -> Dataset:
    """Rows as the writers take them (mappings with every column), without a file in between; `cluster`
    names the cluster they come from."""
    X = np.array([[row[n] for n in FEATURE_NAMES] for row in rows], dtype=np.float64)
    text = {c: np.array([str(row[c]) for row in rows], dtype=object) for c in TEXT_COLUMNS}
    return Dataset(X=X.reshape(-1, len(FEATURE_NAMES)),
                   y=np.array([row[TARGET] for row in rows], dtype=np.float64),
                   start=np.array([row["start_unix"] for row in rows], dtype=np.float64),
                   chosen=np.array([bool(row["chosen"]) for row in rows]),
                   cluster=np.full(len(rows), cluster, dtype=object), **text)


def concat(parts: Sequence[Dataset]) -> Dataset:
    fields = Dataset.__dataclass_fields__
    return Dataset(**{k: np.concatenate([getattr(p, k) for p in parts]) for k in fields})


def write_dataset(path: Path, rows: Iterable[Mapping], append: bool = False) -> int:
    """Write rows (mappings with every column) as CSV; with append, add to an existing file
    (writing the header only if the file is new). Returns the number of rows written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not (append and path.exists() and path.stat().st_size > 0)
    count = 0
    with open(path, "a" if append else "w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        if new:
            out.writerow(COLUMNS)
        for count, row in enumerate(rows, start=1):
            missing = [c for c in COLUMNS if c not in row]
            if missing:
                raise SchemaError(f"{path}: row {count} (job {row.get('job_id')!r}) lacks column(s) "
                                  f"{', '.join(missing)}; every row needs all {len(COLUMNS)} columns")
            out.writerow(_cell(row[c]) for c in COLUMNS)
    return count


def _cell(value) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.3f}" if abs(value) >= 1e6 else f"{value:.6g}"  # Unix times keep their milliseconds
    return "" if value is None else str(value)


def read_dataset(path: Path) -> Dataset:
    """A dataset file (CSV), or an operator records file (*.jsonl), checked against the schema."""
    path = Path(path)
    if not path.is_file():
        raise SchemaError(f"{path}: no such dataset file")
    if path.suffix == ".jsonl":
        return dataset_from_rows(rows_from_records(path))
    try:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if not header or "schema_version" not in header:
                raise SchemaError(f"{path}: not a netsched dataset (no schema_version column in the header)")
            return _parse(path, header, reader)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise SchemaError(f"{path}: not a readable CSV dataset ({exc})") from None


def _parse(path: Path, header: list[str], reader) -> Dataset:
    version_at = header.index("schema_version")
    columns: dict[str, list[str]] = {c: [] for c in header}
    original = header
    lines: list[int] = []  # each row's line in the file, for error messages
    version = None
    for cells in reader:
        if not cells:
            continue
        line = reader.line_num
        if len(cells) != len(header):
            raise SchemaError(f"{path}: line {line}: {len(cells)} cells, the header has {len(header)}")
        readable = cells[version_at] in (str(SCHEMA_VERSION), str(V1))
        if not readable or version not in (None, cells[version_at]):
            raise SchemaError(f"{path}: line {line}: schema_version {cells[version_at]!r}, this netsched "
                              f"reads version {SCHEMA_VERSION} (and {V1}, converted), one version a file; "
                              "regenerate the data with this version")
        if not lines:  # after the version check: data of another version gets that message, not this one
            version = cells[version_at]
            if version == str(V1):
                header = _v1_header(path, header)
            _check_header(path, header)
            columns = {c: [] for c in header}
        for name, cell in zip(original, cells, strict=True):
            columns.setdefault(name, []).append(cell)
        lines.append(line)
    if not lines:
        raise SchemaError(f"{path}: the header has no rows under it")
    if version == str(V1):
        _upgrade_v1(columns)
    if GPU_PRODUCT in columns:
        _gpu_from_product(path, columns, lines)
    return _arrays(path, columns, lines)


V1 = 1  # schema 1: four GPU-family flags and communication as a level 1-3; read by converting (below)
V1_GPU_FAMILIES = {"gpu_h100": "NVIDIA-H100-80GB-HBM3", "gpu_a100": "NVIDIA-A100-SXM4-80GB",
                   "gpu_l40s": "NVIDIA-L40S", "gpu_v100": "Tesla-V100-SXM2-32GB"}  # the products v1 data held
V1_COMM = {"1": "low", "2": "medium", "3": "high"}


def _v1_header(path: Path, header: list[str]) -> list[str]:
    """A schema 1 header with its columns renamed to schema 2's (the values are converted by _upgrade_v1)."""
    if not set(V1_GPU_FAMILIES) <= set(header) or "comm_intensity" not in header:
        raise SchemaError(f"{path}: schema_version 1 but not the version 1 columns; regenerate the data")
    renamed = [c for c in header if c not in V1_GPU_FAMILIES and c != "comm_intensity"]
    return renamed + list(GPU_FEATURES) + ["comm_gb_per_hour"]


def _upgrade_v1(columns: dict[str, list[str]]) -> None:
    """Schema 1 rows as schema 2's, in place: a GPU-family flag becomes the capability of the product
    netsched's own v1 data meant by it (no flag: unknown), a level 1-3 the GB/h it stands for."""
    rows = len(columns["schema_version"])
    products = [next((p for f, p in V1_GPU_FAMILIES.items() if columns[f][i] == "1"), None)
                for i in range(rows)]
    capability = [gpu_features(p) for p in products]
    for name in GPU_FEATURES:
        columns[name] = [_text(c[name]) for c in capability]
    columns["comm_gb_per_hour"] = [_text(COMM_LEVELS.get(V1_COMM.get(v, ""), math.nan))
                                   for v in columns["comm_intensity"]]
    columns["schema_version"] = [str(SCHEMA_VERSION)] * rows


def _gpu_from_product(path: Path, columns: dict[str, list[str]], lines: list[int]) -> None:
    """The GPU_FEATURES columns, in place, where a row leaves them empty (or the file has none), from
    its gpu_product by the GPU table; an empty product is unknown (NaN)."""
    products = columns.pop(GPU_PRODUCT)
    gpu = table()
    for name in GPU_FEATURES:
        columns.setdefault(name, [""] * len(products))
    for i, product in enumerate(products):
        if not product.strip() or all(columns[name][i] for name in GPU_FEATURES):
            continue
        if gpu.exact(product) is None:
            raise SchemaError(f"{path}: line {lines[i]}: gpu_product {product!r} is not in the GPU "
                              f"capability table ({gpu.source}); add it to a table file given by --gpu-table "
                              f"or {TABLE_ENV} (tflops16, tflopsFp32, memoryBandwidthGBps, memoryGiB), or "
                              f"write the columns {', '.join(GPU_FEATURES)} instead")
        for name, value in gpu_features(product).items():
            if not columns[name][i]:
                columns[name][i] = _text(value)


def _text(value: float) -> str:
    return "" if math.isnan(value) else repr(value)


def _check_header(path: Path, header: list[str]) -> None:
    by_product = GPU_PRODUCT in header
    missing = [c for c in COLUMNS if c not in header and not (by_product and c in GPU_FEATURES)]
    extra = [c for c in header if c not in COLUMNS and c != GPU_PRODUCT]
    if missing or extra or len(set(header)) != len(header):
        raise SchemaError(f"{path}: header does not match schema v{SCHEMA_VERSION}: "
                          f"missing {missing or 'none'}, unexpected {extra or 'none'} "
                          f"(columns: netsched.training.dataset.COLUMNS; {GPU_PRODUCT} may stand for "
                          f"{', '.join(GPU_FEATURES)})")


def _arrays(path: Path, columns: dict[str, list[str]], lines: list[int]) -> Dataset:
    X = np.column_stack([_numbers(path, name, columns[name], lines) for name in FEATURE_NAMES])
    y = _numbers(path, TARGET, columns[TARGET], lines)
    start = _numbers(path, "start_unix", columns["start_unix"], lines)
    for name, bad, want in ((TARGET, ~(y > 0) | ~np.isfinite(y), "a positive finite number"),
                            ("start_unix", ~np.isfinite(start), "a finite number")):
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise SchemaError(f"{path}: line {lines[i]}: column {name}: {columns[name][i]!r} must be {want}")
    chosen = np.array(columns["chosen"])
    bad = np.flatnonzero((chosen != "0") & (chosen != "1"))
    if len(bad):
        raise SchemaError(f"{path}: line {lines[bad[0]]}: column chosen: {columns['chosen'][bad[0]]!r} "
                          "must be 0 or 1")
    text = {c: np.array(columns[c], dtype=object) for c in TEXT_COLUMNS}
    return Dataset(X=X, y=y, start=start, chosen=chosen == "1", cluster=np.full(len(y), "", dtype=object),
                   **text)


def _numbers(path: Path, name: str, cells: list[str], lines: list[int]) -> np.ndarray:
    try:
        return np.array([float(c) if c else math.nan for c in cells])
    except ValueError:
        for c, line in zip(cells, lines, strict=True):
            try:
                float(c or "nan")
            except ValueError:
                raise SchemaError(f"{path}: line {line}: column {name}: {c!r} is not a number "
                                  "(leave the cell empty for unknown)") from None
        raise


def read_datasets(paths: Sequence[Path], clusters_by_file: bool = False) -> Dataset:
    """The files' rows; with `clusters_by_file`, each file is one cluster's records, named by the file."""
    parts = [read_dataset(p) for p in paths]
    if clusters_by_file:
        parts = [replace(d, cluster=np.full(len(d), Path(p).name, dtype=object))
                 for d, p in zip(parts, paths, strict=True)]
    return concat(parts)


def data_sha256(paths: Sequence[Path]) -> str:
    """One digest over the files' bytes in the order given: which data trained a model."""
    digest = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()
