"""The public Alibaba GPU-cluster trace `cluster-trace-gpu-v2023` ("openb"), read from its CSV files.

Two files: the GPU node list (sn, cpu_milli, memory_mib, gpu, model) and a pod list (name,
cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time, deletion_time,
scheduled_time). `gpu_milli` is per GPU: below 1000 (with num_gpu 1) the pod shares one GPU. The
trace's terms: research or study use, citing Weng et al., "Beware of Fragmentation" (USENIX ATC '23).
The project commits no copy of it: read it from where it was put (`../shared/openb/` beside the
project's root, or `--trace-dir`).

Any malformed row, missing column or missing file raises `TraceError`, one line naming the file,
the row and the column.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

NODE_FILE = "openb_node_list_gpu_node.csv"
POD_FILE = "openb_pod_list_default.csv"
MILLI = 1000  # gpu_milli of one whole GPU
DEFAULT_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "openb"


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file, the row and the column."""


@dataclass(frozen=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU; below 1000 the pod shares one GPU
    gpu_spec: tuple[str, ...]  # GPU models it may use; empty: any
    qos: str
    creation_time: int
    deletion_time: int | None  # None: still running when the trace ends
    scheduled_time: int | None

    @property
    def gpu_request(self) -> float:
        """GPUs asked for, a fraction for a shared GPU."""
        return self.num_gpu * self.gpu_milli / MILLI

    @property
    def shares_gpu(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < MILLI


_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos",
                "creation_time", "deletion_time", "scheduled_time")


def read_nodes(path: Path) -> list[TraceNode]:
    """The node list; a node with no GPU is kept (the replay counts only GPUs, CPU still fills)."""
    out = []
    for _, cell in _rows(path, _NODE_COLUMNS):
        gpus = cell.whole("gpu")
        out.append(TraceNode(cell.text("sn"), cell.whole("cpu_milli"), cell.whole("memory_mib"), gpus,
                             cell.text("model", empty=gpus == 0)))
    return out


def read_pods(path: Path) -> list[TracePod]:
    out = []
    for row, cell in _rows(path, _POD_COLUMNS):
        num_gpu, gpu_milli = cell.whole("num_gpu"), cell.whole("gpu_milli")
        if num_gpu > 0 and not 0 < gpu_milli <= MILLI:
            raise TraceError(f"{path}: row {row}: column gpu_milli: {gpu_milli} is not a share of one GPU "
                             f"(1..{MILLI}) for a pod with num_gpu {num_gpu}")
        if num_gpu > 1 and gpu_milli != MILLI:
            raise TraceError(f"{path}: row {row}: column gpu_milli: a pod of {num_gpu} GPUs must ask whole "
                             f"GPUs ({MILLI}), got {gpu_milli}")
        spec = cell.text("gpu_spec", empty=True)
        out.append(TracePod(cell.text("name"), cell.whole("cpu_milli"), cell.whole("memory_mib"), num_gpu,
                            gpu_milli if num_gpu else 0, tuple(s for s in spec.split("|") if s),
                            cell.text("qos", empty=True) or "BE", cell.whole("creation_time"),
                            cell.maybe("deletion_time"), cell.maybe("scheduled_time")))
    return out


def read_trace(directory: Path = DEFAULT_DIR,
               pod_file: str = POD_FILE) -> tuple[list[TraceNode], list[TracePod]]:
    return read_nodes(directory / NODE_FILE), read_pods(directory / pod_file)


class _Cells:
    """One row's cells, each read with the error naming file, row and column."""

    def __init__(self, path: Path, row: int, values: dict[str, str]) -> None:
        self.path, self.row, self.values = path, row, values

    def text(self, column: str, empty: bool = False) -> str:
        value = (self.values.get(column) or "").strip()
        if not value and not empty:
            raise TraceError(f"{self.path}: row {self.row}: column {column} is empty")
        return value

    def maybe(self, column: str) -> int | None:
        """A whole number, or None where the cell is empty (a time that has not come)."""
        return self.whole(column) if self.text(column, empty=True) else None

    def whole(self, column: str) -> int:
        value = self.text(column)
        try:
            number = int(value)
        except ValueError:
            raise TraceError(f"{self.path}: row {self.row}: column {column}: {value!r} is not a whole "
                             "number") from None
        if number < 0:
            raise TraceError(f"{self.path}: row {self.row}: column {column}: {number} is negative")
        return number


def _rows(path: Path, columns: tuple[str, ...]) -> list[tuple[int, _Cells]]:
    """(row number as an editor shows it, the header being row 1; its cells)."""
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise TraceError(f"{path}: row 1: missing column(s) {', '.join(missing)} "
                                 f"(expected {', '.join(columns)})")
            out = []
            for values in reader:
                row = reader.line_num
                if None in values or any(v is None for v in values.values()):
                    raise TraceError(f"{path}: row {row}: expected {len(reader.fieldnames or [])} cells")
                out.append((row, _Cells(path, row, values)))
            return out
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file; put the openb trace's CSV files there (alibaba/clusterdata, "
                         "cluster-trace-gpu-v2023) or give --trace-dir") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TraceError(f"{path}: cannot read it: {exc}") from None
