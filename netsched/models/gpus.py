"""GPU capability as numbers: what a node's GPU can do, from its `nvidia.com/gpu.product` label.

The completion-time model sees a node's GPU as four numbers (GPU_FEATURES): dense 16-bit
(bf16/fp16) tensor TFLOPS, fp32 TFLOPS, memory bandwidth (GB/s) and memory (GiB), not as
a fixed list of families, so a GPU it never trained on still tells it how fast it is.
One table maps product names, as NVIDIA GPU feature discovery writes them, to those
numbers: BUILTIN (vendor data-sheet figures, dense, no sparsity), extended or corrected
by the cluster admin with a file (`--gpu-table FILE`, the Helm value `gpuCapabilities`,
or NETSCHED_GPU_TABLE for the training commands):

    {"NVIDIA-RTX-PRO-6000": {"tflops16": 500, "tflopsFp32": 120, "memoryBandwidthGBps": 1790,
                             "memoryGiB": 96}}

(JSON or YAML; an entry may give only some fields, the rest coming from the built-in entry
of the same name). A node's labels override its product's values one by one
(OVERRIDE_LABELS, e.g. `netsched.io/gpu-tflops`; `nvidia.com/gpu.memory` in MiB as GPU feature
discovery sets it). A product the table does not hold gets the nearest known product's
numbers (same family first, e.g. an H100 variant gets an H100, then by name similarity) and
one warning per product naming it and the fix; a node without a product label or overrides
gets NaN (unknown), never zeros.

The simulator, the operator's records (through netsched.training.record_rows) and the extender's
node table all call `gpu_features`, so training and serving see the same numbers.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path

from netsched.api.labels import (
    GPU_MEMORY_BANDWIDTH_LABEL,
    GPU_MEMORY_GIB_LABEL,
    GPU_MEMORY_MIB_LABEL,
    GPU_TFLOPS_FP32_LABEL,
    GPU_TFLOPS_LABEL,
)

log = logging.getLogger(__name__)

TABLE_ENV = "NETSCHED_GPU_TABLE"  # a table file for commands without a --gpu-table flag


@dataclass(frozen=True)
class GpuCapability:
    tflops16: float  # dense bf16/fp16 tensor TFLOPS
    tflopsFp32: float  # noqa: N815 - the names are the table file's keys
    memoryBandwidthGBps: float  # noqa: N815
    memoryGiB: float  # noqa: N815


FIELDS = tuple(f.name for f in fields(GpuCapability))
# feature name (netsched.models.features) -> the capability field it holds, and what it means
GPU_FEATURES = {
    "gpu_tflops16": ("tflops16", "the node's GPU: dense bf16/fp16 tensor TFLOPS"),
    "gpu_tflops_fp32": ("tflopsFp32", "the node's GPU: fp32 TFLOPS"),
    "gpu_mem_bw_gbps": ("memoryBandwidthGBps", "the node's GPU: memory bandwidth, GB/s"),
    "gpu_memory_gib": ("memoryGiB", "the node's GPU: memory, GiB"),
}
OVERRIDE_LABELS = {GPU_TFLOPS_LABEL: "tflops16", GPU_TFLOPS_FP32_LABEL: "tflopsFp32",
                   GPU_MEMORY_BANDWIDTH_LABEL: "memoryBandwidthGBps", GPU_MEMORY_GIB_LABEL: "memoryGiB"}

BUILTIN: dict[str, GpuCapability] = {
    name: GpuCapability(*values) for name, values in {
        "NVIDIA-B200": (2250, 80, 8000, 180),
        "NVIDIA-H200": (989, 67, 4800, 141),
        "NVIDIA-H100-80GB-HBM3": (989, 67, 3350, 80),
        "NVIDIA-H100-NVL": (835, 60, 3900, 94),
        "NVIDIA-H100-PCIe": (756, 51, 2000, 80),
        "NVIDIA-A100-SXM4-80GB": (312, 19.5, 2039, 80),
        "NVIDIA-A100-SXM4-40GB": (312, 19.5, 1555, 40),
        "NVIDIA-A100-80GB-PCIe": (312, 19.5, 1935, 80),
        "NVIDIA-A100-PCIE-40GB": (312, 19.5, 1555, 40),
        "NVIDIA-L40S": (362, 91.6, 864, 48),
        "NVIDIA-L40": (181, 90.5, 864, 48),
        "NVIDIA-L4": (121, 30.3, 300, 24),
        "NVIDIA-A40": (150, 37.4, 696, 48),
        "NVIDIA-A10": (125, 31.2, 600, 24),
        "NVIDIA-RTX-A6000": (155, 38.7, 768, 48),
        "Tesla-V100-SXM2-32GB": (125, 15.7, 900, 32),
        "Tesla-V100-SXM2-16GB": (125, 15.7, 900, 16),
        "Tesla-V100-PCIE-32GB": (112, 14, 900, 32),
        "Tesla-V100-PCIE-16GB": (112, 14, 900, 16),
        "Tesla-T4": (65, 8.1, 320, 16),
    }.items()
}


class GpuTableError(ValueError):
    """A GPU table file cannot be used; the message names the file, the entry and the fix."""


def _key(product: str) -> str:
    return re.sub(r"[\s_]+", "-", product.strip()).upper()


def _family(product: str) -> str | None:
    """The model token of a product name: H100 in NVIDIA-H100-80GB-HBM3, T4 in Tesla-T4."""
    for token in _key(product).split("-"):
        if re.fullmatch(r"[A-Z]+[0-9]+[A-Z]*", token) and not re.fullmatch(r"[0-9]+GB", token):
            return token
    return None


class GpuTable:
    """Product name -> capability, looked up case- and separator-insensitively."""

    def __init__(self, entries: Mapping[str, GpuCapability], source: str = "built-in"):
        self.entries = dict(entries)
        self.source = source
        self._by_key = {_key(name): name for name in self.entries}
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: Path | str | None) -> GpuTable:
        """BUILTIN, extended (or corrected) by the table file at `path`, if any."""
        if not path:
            return cls(BUILTIN)
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise GpuTableError(f"GPU table {path}: cannot be read ({exc}); fix the path given by "
                                f"--gpu-table or {TABLE_ENV}") from None
        return cls({**BUILTIN, **parse_table(text, str(path))}, source=f"built-in + {path}")

    def lookup(self, product: str) -> tuple[str, GpuCapability] | None:
        """(the table's product name, its capability): the product itself, else the nearest known one
        (warned once per product); None for an empty name."""
        if not product.strip():
            return None
        exact = self._by_key.get(_key(product))
        if exact:
            return exact, self.entries[exact]
        nearest = self.nearest(product)
        with self._lock:
            warn = product not in self._warned
            self._warned.add(product)
        if warn:
            log.warning("GPU product %r is not in netsched's GPU capability table (%s); the completion-time "
                        "model uses the nearest known product, %r, instead. Fix: add %r to the table (Helm "
                        "value gpuCapabilities, or the file --gpu-table/%s names) or label its nodes %s",
                        product, self.source, nearest, product, TABLE_ENV, ", ".join(OVERRIDE_LABELS))
        return nearest, self.entries[nearest]

    def exact(self, product: str) -> GpuCapability | None:
        """The product's own entry (case- and separator-insensitive), never a nearest one."""
        name = self._by_key.get(_key(product))
        return None if name is None else self.entries[name]

    def nearest(self, product: str) -> str:
        """The known product most like `product`: of its family if the table has one, by name similarity."""
        family = _family(product)
        pool = [name for name in self.entries if family and _family(name) == family] or list(self.entries)
        key = _key(product)
        return max(pool, key=lambda name: (difflib.SequenceMatcher(None, key, _key(name)).ratio(), name))

    def features(self, product: str | None, labels: Mapping[str, str] | None = None) -> dict[str, float]:
        """The GPU_FEATURES of a node with this product label and these node labels."""
        found = self.lookup(product or "")
        values = {f: math.nan for f in FIELDS} if found is None else _as_dict(found[1])
        labels = labels or {}
        mib = _label_number(labels, GPU_MEMORY_MIB_LABEL)
        if not math.isnan(mib):
            values["memoryGiB"] = mib / 1024
        for label, field_name in OVERRIDE_LABELS.items():
            number = _label_number(labels, label)
            if not math.isnan(number):
                values[field_name] = number
        return {feature: float(values[field_name]) for feature, (field_name, _) in GPU_FEATURES.items()}


def _as_dict(capability: GpuCapability) -> dict[str, float]:
    return {f: float(getattr(capability, f)) for f in FIELDS}


def _label_number(labels: Mapping[str, str], label: str) -> float:
    value = labels.get(label)
    if value is None:
        return math.nan
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        log.warning("node label %s=%r is not a positive number; ignored", label, value)
        return math.nan
    return number


def parse_table(text: str, where: str) -> dict[str, GpuCapability]:
    """A table file's entries: a mapping product -> {field: number}; a partial entry of a built-in
    product keeps the built-in's other fields."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise GpuTableError(f"GPU table {where}: neither JSON nor YAML ({exc})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise GpuTableError(f"GPU table {where}: want a mapping of GPU product name to "
                            f"{{{', '.join(FIELDS)}}}, got {type(data).__name__}")
    out = {}
    for product, entry in data.items():
        base = BUILTIN.get(str(product))
        if not isinstance(entry, dict):
            raise GpuTableError(f"GPU table {where}: {product}: want a mapping with {', '.join(FIELDS)}")
        unknown = sorted(set(entry) - set(FIELDS))
        missing = [f for f in FIELDS if f not in entry] if base is None else []
        if unknown or missing:
            raise GpuTableError(f"GPU table {where}: {product}: " + "; ".join(
                [f"unknown field(s) {', '.join(unknown)}"] * bool(unknown)
                + [f"missing {', '.join(missing)} (a product not built in needs all of {', '.join(FIELDS)})"]
                * bool(missing)))
        for name, value in entry.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise GpuTableError(f"GPU table {where}: {product}.{name}: {value!r} must be a positive "
                                    "number")
        values = {k: float(v) for k, v in entry.items()}
        out[str(product)] = replace(base, **values) if base else GpuCapability(**values)
    return out


_table: GpuTable | None = None


def configure(path: Path | str | None) -> GpuTable:
    """Use BUILTIN plus the table file at `path` from now on, in this process."""
    global _table
    _table = GpuTable.load(path)
    return _table


def table() -> GpuTable:
    """The table in use: as `configure` set it, else BUILTIN plus the file NETSCHED_GPU_TABLE names."""
    global _table
    if _table is None:
        _table = GpuTable.load(os.environ.get(TABLE_ENV))
    return _table


def gpu_features(product: str | None, labels: Mapping[str, str] | None = None) -> dict[str, float]:
    """GPU_FEATURES of a node, from its product label and its other labels, by the table in use."""
    return table().features(product, labels)
