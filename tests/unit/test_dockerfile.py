"""The image cannot be built here (no Docker engine), so check what a build would need."""

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
    assert {"netsched", "models", "requirements.lock"} <= set(sources)
    for source in sources:
        assert (ROOT / source).exists(), f"Dockerfile copies {source}, which is not in the repository"
        assert source in allowed, f".dockerignore keeps {source} out of the build context; add !{source}"
