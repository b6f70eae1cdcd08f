"""What an image build needs, checked without building one (hack/image/build.sh builds it)."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def copied_sources() -> list[str]:
    """Sources of the Dockerfile's COPY lines that read the build context (not another stage)."""
    sources = []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            sources += words[1:-1]
    return sources


def test_every_copied_path_exists_and_is_let_through_by_dockerignore():
    allowed = [line[1:].rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.startswith("!")]
    sources = copied_sources()
    assert {"netsched", "models", "requirements.lock", "requirements-train.lock"} <= set(sources)
    for source in sources:
        assert (ROOT / source).exists(), f"Dockerfile copies {source}, which is not in the repository"
        assert source in allowed, f".dockerignore keeps {source} out of the build context; add !{source}"


def locked(name: str) -> set[str]:
    lines = (ROOT / name).read_text().splitlines()
    return {normalized(line.split("==")[0]) for line in lines if line and not line.startswith("#")}


def normalized(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_the_serving_lock_pins_every_dependency_and_nothing_of_the_train_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    serving, train = locked("requirements.lock"), locked("requirements-train.lock")
    assert {normalized(r) for r in project["dependencies"]} <= serving
    assert {"scikit-learn", "skl2onnx"} <= train
    assert not {"scikit-learn", "skl2onnx", "scipy", "matplotlib"} & serving
    assert not serving & train, "a package pinned in both locks"
