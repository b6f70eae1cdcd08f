"""Write one benchmark's section of docs/benchmarks-history.md, keeping the others; stop a bench cleanly.
The headline table in docs/benchmarks-history.md quotes the newest sections and is updated by hand."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks-history.md"
HEADER = "# Benchmarks: history\n\nFigures measured on this project's 2-core machines, one run each.\n\n"


def publish(section: str) -> None:
    """Print a benchmark's section and write it into docs/benchmarks-history.md, replacing the section
    with the same title (its first line, "## ...") or appending it."""
    print(section)
    title = "\n" + section.splitlines()[0] + "\n"  # a whole line: "## Packer" is not "## Packer at scale"
    text = DOC.read_text() if DOC.exists() else HEADER
    if title in text:
        head, _, rest = text.partition(title)
        tail = rest[rest.find("\n## ") + 1:] if "\n## " in rest else ""
        text = head + "\n" + section + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    DOC.write_text(text)


def publish_unless(no_publish: bool, section: str) -> int:
    """A bench's last step: print its section (--no-publish) or publish it; the exit code, 0."""
    if no_publish:
        print(section)
    else:
        publish(section)
    return 0


def exit_on_sigterm() -> None:
    """Let SIGTERM (`kill`, `pkill`, `timeout`) end a bench like Ctrl-C does: through its `finally`
    blocks, so the dev-cluster it started goes down with it instead of running on unseen."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
