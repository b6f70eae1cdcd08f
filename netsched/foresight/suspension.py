"""What keeps a workload's pods from being made at all, before any gang waits: a `suspend` the user set,
or Kueue's queue. Kueue's webhook suspends every workload labelled `kueue.x-k8s.io/queue-name` at
creation and lifts the suspension when its ClusterQueue admits it; with no Kueue in the cluster the label
does nothing, and a workload written suspended (as Kueue's samples are) stays suspended forever.

Where each kind keeps its switch: a batch Job and a JobSet in `spec.suspend`, a Kubeflow training job in
`spec.runPolicy.suspend`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_GROUP = "kueue.x-k8s.io"
# kind -> the path of its suspend switch
SUSPEND_FIELD = {"Job": ("spec", "suspend"), "JobSet": ("spec", "suspend"),
                 **dict.fromkeys(("PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob"),
                                 ("spec", "runPolicy", "suspend"))}


@dataclass(frozen=True)
class Held:
    """Why the workload's pods would not be made now; `never`: nothing in the cluster would lift it."""
    message: str
    never: bool
    queue: str | None = None


def suspend_field(kind: str) -> str | None:
    path = SUSPEND_FIELD.get(kind)
    return ".".join(path) if path else None


def _suspended(manifest: dict[str, Any]) -> bool:
    value: Any = manifest
    for key in SUSPEND_FIELD.get(str(manifest.get("kind")), ("-",)):
        value = value.get(key) if isinstance(value, dict) else None
    return value is True


def held(manifest: dict[str, Any], kueue_installed: bool | None) -> tuple[Held | None, str | None]:
    """What holds `manifest` (None: nothing) and a note to add to its answer (None: none);
    `kueue_installed`: does the API server serve Kueue's API (None: not known)."""
    labels = (manifest.get("metadata") or {}).get("labels") or {}
    queue, suspended = labels.get(QUEUE_LABEL), _suspended(manifest)
    where = suspend_field(str(manifest.get("kind"))) or "spec.suspend"
    if queue:
        if kueue_installed is False:
            if not suspended:
                return None, (f"label {QUEUE_LABEL}: {queue} does nothing here: Kueue is not installed "
                              f"(the API server serves no {KUEUE_GROUP} API), so nothing queues it")
            return Held(f"waits for Kueue to admit it (queue {queue}), but Kueue is not installed (the API "
                        f"server serves no {KUEUE_GROUP} API): nothing will admit it, and it stays "
                        f"suspended; install Kueue, or remove the label and set {where}: false",
                        True, queue), None
        unknown = " (whether Kueue is installed could not be read)" if kueue_installed is None else ""
        return Held(f"waits for Kueue to admit it (queue {queue}){unknown}: Kueue lifts its suspension when "
                    "its ClusterQueue has quota; netsched places its pods after that", False, queue), None
    if suspended:
        return Held(f"suspended ({where}: true): nothing starts its pods until {where} is set to false",
                    True), None
    return None, None
