"""Find or build the control-plane binaries (hack/controlplane/build.sh) and, for
`dev-cluster up --kueue`, Kueue's manager (hack/kueue/build.sh).

The build scripts cache binaries outside git, keyed by version, so a warm
call returns in well under a second. Set NETSCHED_BIN_DIR to use control-plane
binaries built elsewhere.

Each Kubernetes minor netsched is tested on has its own pinned module (hack/controlplane/v1.MM/);
the dev-cluster runs KUBERNETES_DEFAULT of hack/controlplane/versions.env unless NETSCHED_KUBERNETES
or `dev-cluster up --kubernetes` names another, and each minor's binaries are cached side by side.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

BINARIES = (
    "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
    "kubectl", "kwok", "helm",
)
NODE_BINARIES = ("kubelet", "kube-proxy", "pause")  # `build.sh --node`, for the real node


class BuildError(RuntimeError):
    """The control-plane build failed; the message carries the build output's tail."""


def controlplane_dir() -> Path:
    """hack/controlplane of the source tree this package runs from."""
    override = os.environ.get("NETSCHED_CONTROLPLANE_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "hack" / "controlplane"


def read_versions(directory: Path | None = None, kubernetes: str | None = None) -> dict[str, str]:
    """KEY=VALUE pairs of `directory`/versions.env; without a directory, hack/controlplane's shared
    versions merged with those of the Kubernetes minor (`kubernetes`, else kubernetes_minor())."""
    if directory is not None:
        return _parse_env(directory / "versions.env")
    versions = _parse_env(controlplane_dir() / "versions.env")
    minor = kubernetes or kubernetes_minor()
    versions.update(_parse_env(minor_dir(minor) / "versions.env"))
    return versions


def known_minors() -> tuple[str, ...]:
    """The Kubernetes minors pinned in hack/controlplane, the default first ("1.37", "1.34")."""
    return tuple(_parse_env(controlplane_dir() / "versions.env")["KUBERNETES_MINORS"].split())


def kubernetes_minor() -> str:
    """The Kubernetes minor the dev-cluster runs: NETSCHED_KUBERNETES, else default_minor()."""
    return normalise_minor(os.environ.get("NETSCHED_KUBERNETES") or default_minor())


def default_minor() -> str:
    """KUBERNETES_DEFAULT of hack/controlplane/versions.env: the minor the chart names as tested."""
    return _parse_env(controlplane_dir() / "versions.env")["KUBERNETES_DEFAULT"]


def normalise_minor(text: str) -> str:
    """"v1.34", "1.34" or "1.34.10" → "1.34"; a minor not pinned here raises BuildError naming the pinned
    ones."""
    parts = text.strip().removeprefix("v").split(".")
    minor = ".".join(parts[:2])
    if not minor_dir(minor).is_dir():
        known = ", ".join(known_minors())
        raise BuildError(f"Kubernetes {text!r} is not pinned in hack/controlplane; use one of {known} "
                         "(--kubernetes or NETSCHED_KUBERNETES)")
    return minor


def minor_dir(minor: str) -> Path:
    """hack/controlplane/v1.MM: the Go module that pins one Kubernetes minor."""
    return controlplane_dir() / f"v{minor}"


def minor_number(kubernetes: str | None = None) -> int:
    """The minor as a number (37 for "1.37"), for version-dependent flags and test skips."""
    return int((kubernetes or kubernetes_minor()).split(".")[1])


def _parse_env(path: Path) -> dict[str, str]:
    versions = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            versions[key] = value.strip('"')
    return versions


def ensure_binaries(quiet: bool = False, node: bool = False, kubernetes: str | None = None) -> Path:
    """Return the directory holding every control-plane binary of one Kubernetes minor (`kubernetes`,
    else kubernetes_minor()), building on a cold cache.

    Build progress goes to stderr unless `quiet`; a failed build raises BuildError
    with the last lines of its output so the caller can show what broke.
    """
    override = os.environ.get("NETSCHED_BIN_DIR")
    if override:
        return _check(Path(override), node)
    minor = normalise_minor(kubernetes) if kubernetes else kubernetes_minor()
    args = ["--kubernetes", minor, *(["--node"] if node else [])]
    bin_dir = _build(controlplane_dir() / "build.sh", args, "[controlplane]", quiet)
    return _check(bin_dir, node)


def ensure_kueue(quiet: bool = False) -> Path:
    """Return Kueue's directory (hack/kueue/build.sh): the `kueue` manager, and `crds/`, `webhooks.yaml`
    and `conversion/` of the same module. Builds on a cold cache; a failed build raises BuildError."""
    kueue_dir = _build(controlplane_dir().parent / "kueue" / "build.sh", [], "[kueue]", quiet)
    missing = [p for p in ("kueue", "crds", "webhooks.yaml", "conversion") if not (kueue_dir / p).exists()]
    if missing:
        raise BuildError(f"{kueue_dir} lacks {', '.join(missing)}; rebuild with hack/kueue/build.sh")
    return kueue_dir


def kueue_cached() -> Path | None:
    """Kueue's directory when hack/kueue/build.sh has built it already (the path and marker that script
    writes), else None; never starts the build (14 minutes cold)."""
    version = read_versions(controlplane_dir().parent / "kueue")["KUEUE_VERSION"]
    cache = os.environ.get("NETSCHED_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "netsched")
    kueue_dir = Path(cache) / "bin" / f"kueue-{version}"
    return kueue_dir if (kueue_dir / ".complete").is_file() else None


def _build(script: Path, args: list[str], prefix: str, quiet: bool) -> Path:
    """Run a build script, showing its `prefix` lines unless `quiet`; the directory it prints last."""
    if not script.exists():
        raise BuildError(
            f"{script} not found: netsched dev-cluster needs a source checkout "
            "(or NETSCHED_BIN_DIR pointing at prebuilt binaries)"
        )
    started = time.monotonic()
    tail: deque[str] = deque(maxlen=40)
    proc = subprocess.Popen(["bash", str(script), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        tail.append(line.rstrip())
        if not quiet and line.startswith(prefix):
            print(line.rstrip(), file=sys.stderr, flush=True)
    if proc.wait() != 0:
        output = "\n".join(tail)
        raise BuildError(f"{script} failed (exit {proc.returncode}):\n{output}")
    out = Path(tail[-1])
    if not quiet and time.monotonic() - started > 5:
        print(f"{prefix} binaries in {out}", file=sys.stderr)
    return out


def _check(bin_dir: Path, node: bool = False) -> Path:
    missing = [b for b in BINARIES + (NODE_BINARIES if node else ()) if not (bin_dir / b).is_file()]
    if missing:
        raise BuildError(f"{bin_dir} lacks {', '.join(missing)}; rebuild with hack/controlplane/build.sh")
    return bin_dir
