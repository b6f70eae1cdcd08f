"""`netsched predict`: a model's predicted seconds for candidate rows, ranked as the extender ranks them.

A candidates file is CSV (a header, one row per candidate node) or JSON (a list of objects,
or {"candidates": [...]}) holding every feature of netsched.models.features by name (an
empty cell or null: unknown), with optional `candidate_set` (rows of one placement decision;
without it, all rows are one), `node`, `job_id` and any other columns, which are copied to
the output. Instead of the four GPU capability columns a row may name its node's GPU in
`gpu_product` (the `nvidia.com/gpu.product` label), looked up in the GPU table
(netsched.models.gpus) as the extender does; a dataset CSV (docs/record-format.md) is a
candidates file as it is.

Each candidate set is scored by `Predictor.predict_candidates`, the extender's own call, so
over SCREEN_ROWS candidates the linear screen ranks first, as it does in the extender. Out:
the input's rows with `predicted_seconds` and `rank` (1: predicted fastest in its set; ties
to the earlier row, as the extender breaks ties by order).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from netsched.models.features import FEATURE_NAMES, FEATURES, SchemaError
from netsched.models.gpus import GPU_FEATURES, gpu_features
from netsched.models.predictor import Predictor
from netsched.training.onnx_export import compiled

JOB_FEATURES = tuple(f.name for f in FEATURES if f.group == "job")
OUTPUT = ("predicted_seconds", "rank")
Row = dict[str, Any]


def read_candidates(path: Path) -> list[Row]:
    """The rows of a candidates file (CSV or JSON), each a mapping column -> value."""
    path = Path(path)
    if not path.is_file():
        raise SchemaError(f"{path}: no such candidates file")
    text = path.read_text()
    if path.suffix == ".json" or text.lstrip().startswith(("[", "{")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"{path}: not valid JSON ({exc})") from None
        rows = data.get("candidates") if isinstance(data, dict) else data
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise SchemaError(f"{path}: want a JSON list of candidate objects (or {{\"candidates\": [...]}})")
        return [dict(r) for r in rows]
    return list(csv.DictReader(io.StringIO(text)))


def feature_values(path: Path, rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """(rows, features) in schema order; a row's gpu_product fills the GPU columns it lacks."""
    if not rows:
        raise SchemaError(f"{path}: no candidate rows")
    columns = set().union(*rows)
    by_product = "gpu_product" in columns
    missing = [n for n in FEATURE_NAMES if n not in columns and not (by_product and n in GPU_FEATURES)]
    if missing:
        raise SchemaError(f"{path}: no column for feature(s) {', '.join(missing)} (schema: "
                          "netsched.models.features, docs/record-format.md); leave a cell empty for unknown")
    X = np.empty((len(rows), len(FEATURE_NAMES)))
    for i, row in enumerate(rows):
        gpu = gpu_features(row.get("gpu_product") or None) if by_product else {}
        for j, name in enumerate(FEATURE_NAMES):
            value = row.get(name)
            X[i, j] = gpu[name] if name in gpu and _empty(value) else _number(path, i, name, value)
    return X


def _empty(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def _number(path: Path, i: int, name: str, value: Any) -> float:
    if _empty(value):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        raise SchemaError(f"{path}: candidate row {i + 1}: {name} = {value!r} is not a number "
                          "(leave it empty for unknown)") from None


def predict_rows(model: Path, path: Path) -> list[Row]:
    """The candidates file's rows with the model's predicted seconds and their rank in their set."""
    predictor = Predictor.load(model, convert=compiled)
    rows = read_candidates(path)
    X = feature_values(path, rows)
    sets: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        sets.setdefault(str(row.get("candidate_set", "")), []).append(i)
    seconds, rank = np.empty(len(rows)), np.empty(len(rows), dtype=int)
    for key, members in sets.items():
        at = np.array(members)
        values = _job_constant(path, key, X[at])
        seconds[at] = predictor.predict_candidates(values, len(at))
        rank[at[np.argsort(seconds[at], kind="stable")]] = np.arange(1, len(at) + 1)
    return [{**row, "predicted_seconds": round(float(s), 3), "rank": int(r)}
            for row, s, r in zip(rows, seconds, rank, strict=True)]


def _job_constant(path: Path, key: str, X: np.ndarray) -> dict[str, float | np.ndarray]:
    """Feature values of one set as the extender passes them: job features as one scalar (they must
    agree across the set's rows), the others as arrays."""
    values: dict[str, float | np.ndarray] = {}
    for j, name in enumerate(FEATURE_NAMES):
        column = X[:, j]
        if name in JOB_FEATURES:
            first = column[0]
            if not np.all((column == first) | (np.isnan(column) & np.isnan(first))):
                where = f"candidate set {key!r}" if key else "the rows (no candidate_set column: one set)"
                raise SchemaError(f"{path}: {where} differ in the job feature {name}; rows of one "
                                  "candidate set describe one job (give each job its own candidate_set)")
            values[name] = float(first)
        else:
            values[name] = column
    return values


def write_predictions(rows: list[Row], out: io.TextIOBase | Any, fmt: str) -> None:
    if fmt == "json":
        json.dump([{k: _json_value(v) for k, v in r.items()} for r in rows], out, indent=1)
        out.write("\n")
        return
    columns = list(dict.fromkeys(k for r in rows for k in r if k not in OUTPUT)) + list(OUTPUT)
    writer = csv.DictWriter(out, columns, lineterminator="\n", restval="")
    writer.writeheader()
    writer.writerows(rows)


def _json_value(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value
