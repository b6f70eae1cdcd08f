"""The kubectl plugin as a user has it: a `kubectl-netsched` executable on PATH, the console script pip
writes for the package's `[project.scripts]` entry, here bound to this checkout's netsched."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import netsched

SCRIPT = """#!{python}
import sys
sys.path.insert(0, {root!r})
from netsched.cli import plugin_main
sys.exit(plugin_main())
"""


def install_plugin(bin_dir: Path) -> Path:
    """Write `bin_dir/kubectl-netsched` (executable); its path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "kubectl-netsched"
    script.write_text(SCRIPT.format(python=sys.executable, root=str(Path(netsched.__file__).parents[1])))
    script.chmod(0o755)
    return script


def path_with(*directories: Path) -> str:
    """$PATH with `directories` first, as a user's shell has the plugin's and kubectl's folders."""
    return os.pathsep.join([*map(str, directories), os.environ.get("PATH", "")])
