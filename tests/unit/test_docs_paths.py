"""Every repository path the docs name exists, so a file moved or renamed cannot leave its guide
pointing at nothing.

What counts as a path:
- a markdown link's target (`[text](target)`, images too), resolved against the doc's folder, its
  `#anchor` dropped; web addresses and in-page anchors are not paths;
- a word of inline code (`` `...` ``, split on spaces so a command's script is checked) that starts
  with one of the repository's top-level folders and has a `/` in it, with a `::test` or `:line`
  suffix dropped, found from the repository's root or from the doc's folder (a package README's
  `plugins/__init__.py` is its own); a glob must match something;
- the same outside code and links, in plain prose, when it ends in a file's extension
  (`netsched/datagen/simulator.py`): a bare folder name there may be an example's output.
Absolute, home and variable paths (`/tmp/...`, `~/.cache/...`, `$VENV/...`) are made at run time,
not paths of the repository, and words with placeholders (`<package>`, `{name}`) stand for many
files; neither is checked. Fenced code blocks are commands and output, not references: skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The docs whose paths are checked, as globs under the repository's root.
DOCS = ("README.md", "docs/*.md", "netsched/**/README.md", "charts/**/README.md")

# A word of inline code or prose is a repository path when its first folder is one of these.
TOP_FOLDERS = ("netsched", "tests", "bench", "docs", "charts", "manifests", "hack", "models", "data",
               "plugins", ".ci")

FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"`([^`]+)`")  # a span may wrap onto the next line
PLACEHOLDER = re.compile(r"[<>{}\[\]$]|\.\.\.")
NOT_A_LINK = re.compile(r"^([a-z][a-z0-9+.-]*:|#)", re.IGNORECASE)  # https:, mailto:, #anchor
TOP_FOLDER = "|".join(re.escape(folder) for folder in TOP_FOLDERS)
PROSE_FILE = re.compile(rf"(?<![\w./~$-])((?:{TOP_FOLDER})/[\w./-]*\.(?:py|md|ya?ml|json|sh|csv|png|toml))\b")


def link_paths(text: str) -> list[str]:
    """Link targets that name a file or folder, without their anchor."""
    targets = (match.group(1) for match in LINK.finditer(text))
    return [target.split("#")[0].split("?")[0] for target in targets if not NOT_A_LINK.match(target)]


def code_paths(text: str) -> list[str]:
    """Words of inline code that name a path from the repository's root."""
    paths = []
    for match in INLINE_CODE.finditer(text):
        for word in match.group(1).split():
            word = word.split("=", 1)[-1] if word.startswith("-") else word
            word = word.strip("'\"(),;").rstrip(".:")
            word = re.sub(r"(::\S*|:\d+)$", "", word)
            if "/" in word and word.split("/")[0] in TOP_FOLDERS and not PLACEHOLDER.search(word):
                paths.append(word)
    return paths


def prose_paths(text: str) -> list[str]:
    """Files named in plain prose, outside inline code and links."""
    prose = LINK.sub(" ", INLINE_CODE.sub(" ", text))
    return [match.group(1) for match in PROSE_FILE.finditer(prose)]


def named_paths(doc: Path) -> list[tuple[str, tuple[Path, ...]]]:
    """(path as written, where it may be) for every path a doc names."""
    text = FENCE.sub("", doc.read_text())
    return ([(path, (doc.parent / path,)) for path in link_paths(text) if path]
            + [(path, (ROOT / path, doc.parent / path)) for path in code_paths(text) + prose_paths(text)])


def exists(path: Path) -> bool:
    if any(char in path.name for char in "*?"):
        return any(path.parent.glob(path.name))
    return path.exists()


def docs() -> list[Path]:
    return sorted({doc for pattern in DOCS for doc in ROOT.glob(pattern)})


@pytest.mark.parametrize(("text", "links", "code", "prose"), [
    ("[guide](../../docs/packer.md#near-the-optimum)", ["../../docs/packer.md"], [], []),
    ("![plot](img/telemetry-scale.png)", ["img/telemetry-scale.png"], [], []),
    ("[site](https://example.com/a/b) and [here](#layout)", [], [], []),
    ("`netsched/jobs/capacity.py`", [], ["netsched/jobs/capacity.py"], []),
    ("`python bench/loco.py --jobs 600`", [], ["bench/loco.py"], []),
    ("`netsched train data/testbed-runs*.csv --out /tmp/tbmodels4`", [], ["data/testbed-runs*.csv"], []),
    ("`--model=models/current.json`", [], ["models/current.json"], []),
    ("`tests/unit/jobs/test_capacity.py::test_fits`", [], ["tests/unit/jobs/test_capacity.py"], []),
    ("`tests/unit/<package>/`, `~/.cache/netsched`, `/tmp/x.csv`", [], [], []),
    ("`netsched.jobs.capacity`, `controller.py`, `zone/rack`", [], [], []),
    ("(a factor, netsched/datagen/simulator.py) into models/mine", [], [], ["netsched/datagen/simulator.py"]),
    ("`bench/loco.py` and [it](../bench/loco.py), not in prose", ["../bench/loco.py"], ["bench/loco.py"], []),
], ids=["relative link with anchor", "image", "web and in-page links", "module path", "command's script",
        "glob", "flag value", "test id", "placeholders and run-time paths", "not paths",
        "a file in prose, a folder not", "code and links are not prose"])
def test_the_rule_finds_repository_paths_and_nothing_else(text, links, code, prose):
    assert (link_paths(text), code_paths(text), prose_paths(text)) == (links, code, prose)


def test_every_path_the_docs_name_exists():
    checked = [(doc, written, places) for doc in docs() for written, places in named_paths(doc)]
    missing = [f"{doc.relative_to(ROOT)}: {written}" for doc, written, places in checked
               if not any(exists(place) for place in places)]
    assert len(checked) > 100, "the rule found almost no paths: has the docs' markup changed?"
    assert missing == [], "paths named in the docs that do not exist:\n" + "\n".join(missing)
