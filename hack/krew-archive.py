"""Build the krew archive of the kubectl plugin, byte for byte the same on every run, and print its sha256
(the value plugins/krew/netsched.yaml must carry; a unit test checks that it does).

    .venv/bin/python hack/krew-archive.py [OUT.tar.gz]   # default: kubectl-netsched.tar.gz here

The archive holds plugins/krew/kubectl-netsched, the launcher of the pip-installed plugin.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import sys
import tarfile
from pathlib import Path

LAUNCHER = Path(__file__).resolve().parents[1] / "plugins" / "krew" / "kubectl-netsched"


def archive() -> bytes:
    """The .tar.gz: fixed owner, mode and times, so its sha256 follows the launcher's text only."""
    entry = tarfile.TarInfo("kubectl-netsched")
    data = LAUNCHER.read_bytes()
    entry.size, entry.mode, entry.mtime = len(data), 0o755, 0
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w", format=tarfile.USTAR_FORMAT) as out:
        out.addfile(entry, io.BytesIO(data))
    return gzip.compress(tar.getvalue(), mtime=0)


if __name__ == "__main__":
    built = archive()
    Path(sys.argv[1] if len(sys.argv) > 1 else "kubectl-netsched.tar.gz").write_bytes(built)
    print(hashlib.sha256(built).hexdigest())
