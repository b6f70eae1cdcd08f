"""Model artifacts on disk: `<dir>/model.joblib` + `<dir>/meta.json`, a `current.json` manifest, a log.

meta.json carries the schema version, the feature lists, the training data's sha256 and
window, per-model cross-validation metrics, the chosen model, library versions and the
sha256 of model.joblib, which loading checks before unpickling. Beside them, the serving
files (`serving.json` with the linear screen's parameters, and the trees as ONNX graphs),
listed with their sha256 under meta.json's `serving`: what the extender loads, ready to run,
without unpickling anything. The manifest names the
artifact directory in service (relative to the manifest), so promotion is one atomic file
replace, no symlinks. Every promotion decision is appended to a JSON Lines log.

joblib files are pickles: load only artifacts you or your pipeline wrote.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import joblib

from netsched.api.events import now_rfc3339
from netsched.models.features import SchemaError

MODEL_FILE, META_FILE, MANIFEST = "model.joblib", "meta.json", "current.json"
SERVING, SERVING_SPEC = "serving", "serving.json"  # meta.json's key for the serving files; their index


class ArtifactError(SchemaError):
    """A model artifact cannot be used; the message names the file and what would fix it."""


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_artifact(directory: Path, bundle: dict[str, Any], meta: dict[str, Any],
                   serving: dict[str, bytes] | None = None) -> Path:
    """The bundle, its meta and (when the model can be served without its pickle) the serving files."""
    directory.mkdir(parents=True, exist_ok=True)
    joblib.dump(bundle, directory / MODEL_FILE, compress=3)
    meta = {**meta, "artifact_sha256": file_sha256(directory / MODEL_FILE)}
    if serving:
        for name, content in serving.items():
            (directory / name).write_bytes(content)
        meta[SERVING] = {name: hashlib.sha256(content).hexdigest() for name, content in serving.items()}
    (directory / META_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return directory


def artifact_dir(path: Path) -> Path:
    """The artifact directory `path` names: the directory itself, or the one a manifest points at."""
    path = Path(path)
    if path.is_dir():
        return path
    if not path.is_file():
        raise ArtifactError(f"{path}: no such model artifact or manifest; train one with `netsched train`")
    try:
        target: str = json.loads(path.read_text())["artifact"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ArtifactError(f"{path}: not a model manifest (want JSON with an \"artifact\" field): "
                            f"{exc}") from None
    return path.parent / target


def read_meta(directory: Path) -> dict[str, Any]:
    path = directory / META_FILE
    try:
        meta: dict[str, Any] = json.loads(path.read_text())
        return meta
    except FileNotFoundError:
        raise ArtifactError(f"{path}: missing; an artifact is a directory written by "
                            "`netsched train`") from None
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{path}: not valid JSON ({exc}); retrain the model") from None


def load_bundle(directory: Path, meta: dict[str, Any]) -> dict[str, Any]:
    path = directory / MODEL_FILE
    if not path.is_file():
        raise ArtifactError(f"{path}: missing; retrain the model")
    if file_sha256(path) != meta.get("artifact_sha256"):
        raise ArtifactError(f"{path}: sha256 differs from {META_FILE}'s artifact_sha256: the file is corrupt "
                            "or was replaced; retrain or restore the artifact")
    try:
        bundle = joblib.load(path)
    except ModuleNotFoundError as exc:  # a pickled scikit-learn model where only serving is installed
        raise ArtifactError(f"{path}: cannot be loaded without {exc.name} (this artifact has no ONNX "
                            "serving files): install netsched[train], or retrain it with `netsched train`, "
                            "which writes them") from None
    except Exception as exc:  # an unpickling failure can raise almost anything
        raise ArtifactError(f"{path}: cannot be loaded ({type(exc).__name__}: {exc}); "
                            "retrain the model") from None
    if not isinstance(bundle, dict) or "estimator" not in bundle:
        raise ArtifactError(f"{path}: not a netsched model bundle; retrain the model")
    return bundle


def read_serving(directory: Path, meta: dict[str, Any]) -> dict[str, bytes]:
    """The serving files meta.json lists, each checked against its sha256."""
    out = {}
    for name, digest in meta[SERVING].items():
        path = directory / name
        if not path.is_file():
            raise ArtifactError(f"{path}: missing (listed in {META_FILE}'s {SERVING}); retrain the model")
        content = path.read_bytes()
        if hashlib.sha256(content).hexdigest() != digest:
            raise ArtifactError(f"{path}: sha256 differs from {META_FILE}'s {SERVING}: the file is corrupt "
                                "or was replaced; retrain or restore the artifact")
        out[name] = content
    if SERVING_SPEC not in out:
        raise ArtifactError(f"{directory}: {META_FILE}'s {SERVING} lists no {SERVING_SPEC}; "
                            "retrain the model")
    return out


def promote(manifest: Path, directory: Path, log: Path, decision: dict[str, Any]) -> None:
    """Point the manifest at `directory` (atomically) and log the decision."""
    manifest.parent.mkdir(parents=True, exist_ok=True)
    record = {"artifact": os.path.relpath(directory, manifest.parent), "promoted_at": now_rfc3339(),
              "schema_version": decision.get("schema_version")}
    tmp = manifest.with_name(manifest.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp, manifest)
    append_log(log, decision)


def append_log(log: Path, decision: dict[str, Any]) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as f:
        f.write(json.dumps({"at": now_rfc3339(), **decision}, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


Stamp = tuple[tuple[str, int | None, int | None], ...]  # (file, mtime ns, size) of each file served


def artifact_stamp(path: Path) -> Stamp:
    """What changes when the manifest is repointed or an artifact's files are rewritten."""
    files = [path]
    try:
        directory = artifact_dir(path)
        files += [directory / META_FILE, directory / MODEL_FILE]
        files += sorted(f for f in directory.iterdir() if f not in files)  # the serving files
    except Exception:  # noqa: BLE001 - an unreadable manifest is itself the state to record
        pass
    out: list[tuple[str, int | None, int | None]] = []
    for f in files:
        try:
            st = f.stat()
            out.append((str(f), st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((str(f), None, None))
    return tuple(out)
