"""Reading the `netsched.io/*` pod annotations: one reader per annotation (READERS), returning its
typed value, None when the annotation is absent, or raising BadAnnotation, whose one-line message names
the annotation, the value and what is allowed.

The rules are the extender's: a pod whose annotation it cannot use is refused with that message. The
other components read the same annotations more leniently (the gang rules carry them as written and
let netsched.jobs.validation say what is wrong; the packer, the telemetry agent and the model pass over
what the extender would refuse). Those readings catch BadAnnotation; where a component has always read
a value by a rule of its own, that rule is here too, named for it (`data_source_as_written`,
`hint_number`, `number_as_written`), so every rule of every reader sits in this module.

`evicted-by` (JSON, netsched.api.plans.Eviction.of), `released-by`, `pinned-node`, `room-freed-by` and the
`predicted-*` times are written by netsched itself and read back as they are: they have no reader here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from netsched.api.labels import (
    COMMUNICATION,
    COMMUNICATION_GB_PER_HOUR,
    DATA_SOURCE,
    EXPECTED_SECONDS,
    INPUT_SIZE_GB,
    JOB_GPUS,
    MAX_DATA_DISTANCE,
    MAX_DATA_RTT_MS,
    MAX_PEER_DISTANCE,
    MAX_PEER_RTT_MS,
    MIN_DATA_BANDWIDTH_MBPS,
    MIN_PEER_BANDWIDTH_MBPS,
    PROTECTED,
    REPLICAS,
    WORKLOAD_KIND,
    whole_number,
)
from netsched.api.topology import DEFAULT, NODE, Topology

ENDPOINT = "endpoint"  # a data source's kind for data at host:port, not in a topology domain
NETWORK_LIMITS = (MAX_PEER_RTT_MS, MIN_PEER_BANDWIDTH_MBPS, MAX_DATA_RTT_MS, MIN_DATA_BANDWIDTH_MBPS)
HINT_NUMBERS = (INPUT_SIZE_GB, COMMUNICATION_GB_PER_HOUR, EXPECTED_SECONDS)  # besides replicas, for the model
# a positive decimal as the extender reads it: float() also takes "1_0", " 5", "nan" and "١"
DECIMAL = re.compile(r"[0-9]*\.?[0-9]+")
T = TypeVar("T")


class BadAnnotation(ValueError):
    """An annotation value netsched cannot use. `allowed` is what may be written, in words."""

    def __init__(self, key: str, value: str, allowed: str, message: str):
        super().__init__(message)
        self.key, self.value, self.allowed = key, value, allowed


class Communication(StrEnum):
    """`communication-intensity`: how much a job's replicas exchange."""
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


@dataclass(frozen=True)
class DataSource:
    """`data-source`: where the job's input lives: a node, a topology level's domain, or an endpoint."""
    kind: str  # node, a topology level's name, or endpoint
    name: str

    @property
    def endpoint(self) -> str | None:
        return self.name if self.kind == ENDPOINT else None


# ---- where the job may go (the extender refuses a pod with a bad one) ---------------------------
def max_peer_distance(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> str | None:
    """`max-peer-distance`: node or a topology level; every pod of the job that close to the others."""
    return _distance(annotations, MAX_PEER_DISTANCE, topology)


def max_data_distance(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> str | None:
    """`max-data-distance`: node or a topology level; every pod that close to the data source."""
    return _distance(annotations, MAX_DATA_DISTANCE, topology)


def _distance(annotations: Mapping[str, str], key: str, topology: Topology) -> str | None:
    value = annotations.get(key)
    if value is not None and value not in topology.limits:
        raise BadAnnotation(key, value, ", ".join(topology.limits),
                            f"{key}={value}: {topology.unknown(value)}")
    return value


def data_source(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> DataSource | None:
    """`data-source`: `<kind>:<name>`, kind node, a level of the topology or endpoint, a name after it."""
    written = data_source_as_written(annotations)
    if written is None:
        return None
    kind, name = written
    kinds = (NODE, *reversed(topology.names), ENDPOINT)
    if kind not in kinds or not name:
        value = annotations[DATA_SOURCE]
        unknown = f" ({kind!r} is not a topology level of this cluster)" if name and kind not in kinds else ""
        raise BadAnnotation(
            DATA_SOURCE, value, f"<kind>:<name> with kind one of {', '.join(kinds)}",
            f"annotation {DATA_SOURCE}={value!r} must be <kind>:<name> with kind one of {', '.join(kinds)}"
            f"{unknown}, e.g. {topology.names[0]}:{topology.names[0]}-a or endpoint:10.0.0.5:9000")
    return DataSource(kind, name)


def data_source_as_written(annotations: Mapping[str, str]) -> tuple[str, str] | None:
    """`data-source` split at its first ':' into (kind, name), neither checked (the name may be empty);
    None when absent. The gang rules carry it so and validation judges it; the telemetry agent probes
    the nodes and endpoints it names and passes over the rest."""
    value = annotations.get(DATA_SOURCE)
    if value is None:
        return None
    kind, _, name = value.partition(":")
    return kind, name


def job_gpus(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> int | None:
    """`job-gpus`: the GPUs the whole job needs, a whole number, at least 1."""
    return _count(annotations, JOB_GPUS, "GPUs")


def _count(annotations: Mapping[str, str], key: str, of: str) -> int | None:
    value = annotations.get(key)
    if value is None:
        return None
    number = whole_number(value)
    if number is None or number < 1:
        raise BadAnnotation(key, value, "a whole number, at least 1",
                            f"annotation {key}={value!r} must be a whole number of {of}, at least 1")
    return number


def network_limit(annotations: Mapping[str, str], key: str, *, any_size: bool = False) -> float | None:
    """One of NETWORK_LIMITS (`max-peer-rtt-ms`, `min-peer-bandwidth-mbps`, `max-data-rtt-ms`,
    `min-data-bandwidth-mbps`): a positive decimal number. `any_size`: one too large for a float (read as
    inf) passes too, as netsched.jobs.validation has always let it (the extender refuses it)."""
    value = annotations.get(key)
    if value is None:
        return None
    number = float(value) if DECIMAL.fullmatch(value) else math.nan
    if not (math.isfinite(number) or (any_size and number == math.inf)) or number <= 0:
        raise BadAnnotation(key, value, "a positive number",
                            f"annotation {key}={value!r} must be a positive number")
    return number






# ---- hints for the completion-time model and the forecast (never a reason to refuse a pod) ------
def replicas(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> int | None:
    """`replicas`: the job's replicas, a whole number, at least 1 (its size is that times the pod's GPUs)."""
    return _count(annotations, REPLICAS, "replicas")


def hint_number(annotations: Mapping[str, str], key: str) -> float | None:
    """A numeric hint (`replicas`, `input-size-gb`, `communication-gb-per-hour`,
    `expected-duration-seconds`) as the model reads it: what float() reads, finite and not negative."""
    value = annotations.get(key)
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise BadAnnotation(key, value, "a number, 0 or more",
                            f"annotation {key}={value!r} must be a number, 0 or more")
    return number


def number_as_written(annotations: Mapping[str, str], key: str) -> float | None:
    """What float() reads of an annotation, whatever its sign (inf and nan too); None when absent, empty
    or unreadable: a pod gang's `expected-duration-seconds`, as the forecast has always taken it."""
    value = annotations.get(key)
    try:
        return float(value) if value else None
    except ValueError:
        return None





def workload_kind(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> str | None:
    """`workload-kind`: any word (the model knows training, inference, etl and batch, and reads another
    as none of them; the forecast learns run times per kind); None when absent or empty."""
    return annotations.get(WORKLOAD_KIND) or None


def communication(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> Communication | None:
    """`communication-intensity`: low, medium or high."""
    value = annotations.get(COMMUNICATION)
    if value is None:
        return None
    try:
        return Communication(value)
    except ValueError:
        allowed = ", ".join(Communication)
        raise BadAnnotation(COMMUNICATION, value, allowed,
                            f"annotation {COMMUNICATION}={value!r} must be one of {allowed}") from None


# ---- what the packer may do ---------------------------------------------------------------------
def protected(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> bool | None:
    """`protected`: "true" (the packer never moves the pod) or "false"."""
    value = annotations.get(PROTECTED)
    if value is None:
        return None
    if value not in ("true", "false"):
        raise BadAnnotation(PROTECTED, value, "true, false",
                            f"annotation {PROTECTED}={value!r} must be true or false")
    return value == "true"


def ignoring_bad(reader: Callable[[Mapping[str, str], Topology], T | None], annotations: Mapping[str, str],
                 topology: Topology = DEFAULT) -> T | None:
    """What `reader` reads, None when the value is bad: for a reader that passes over what the extender
    would refuse."""
    try:
        return reader(annotations, topology)
    except BadAnnotation:
        return None


Reader = Callable[[Mapping[str, str], Topology], object]


def _of_key(parse: Callable[[Mapping[str, str], str], object], key: str) -> Reader:
    """The reader of annotation `key` by a rule several annotations share."""
    def reader(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> object:
        return parse(annotations, key)
    return reader


READERS: dict[str, Reader] = {  # every annotation netsched parses -> its reader
    MAX_PEER_DISTANCE: max_peer_distance,
    MAX_DATA_DISTANCE: max_data_distance,
    DATA_SOURCE: data_source,
    JOB_GPUS: job_gpus,
    **{key: _of_key(network_limit, key) for key in NETWORK_LIMITS},
    REPLICAS: replicas,
    **{key: _of_key(hint_number, key) for key in HINT_NUMBERS},
    WORKLOAD_KIND: workload_kind,
    COMMUNICATION: communication,
    PROTECTED: protected,
}


def read(annotations: Mapping[str, str], key: str, topology: Topology = DEFAULT) -> object:
    """The value of annotation `key` as READERS reads it (None when absent); BadAnnotation if bad."""
    return READERS[key](annotations, topology)
