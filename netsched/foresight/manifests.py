"""The objects `-f` names, as kubectl reads them: a file (YAML, JSON, several YAML documents), a
directory (its *.yaml, *.yml and *.json files, sorted, not recursive) or `-` (stdin); a `kind: List`
stands for its items.

Nothing here raises for a bad input: a document that cannot be read becomes a `Document` with an
`error` saying where and why, so the caller refuses it in one line and goes on with the others.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"


class ManifestError(ValueError):
    """`-f` names nothing readable at all (no such file, an empty directory); the message says what."""


@dataclass(frozen=True)
class Document:
    source: str  # the file's path, or "stdin"
    index: int  # 1-based, in its file; 0: the whole file
    body: dict[str, Any] | None = None  # the object, as JSON would carry it
    error: str | None = None  # why it is not an object (body is None)

    @property
    def where(self) -> str:
        return f"document {self.index} of {self.source}" if self.index else self.source

    @property
    def label(self) -> str:
        """How a message names it: kind/name and where it is."""
        if self.body is None:
            return self.where
        meta = self.body.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        name = meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else "(no name)")
        return f"{self.body.get('kind') or '(no kind)'}/{name} ({self.where})"


def read_documents(filename: str) -> list[Document]:
    """Every document `filename` names, empty ones left out (as kubectl does)."""
    if filename == STDIN:
        return _documents("stdin", sys.stdin.buffer.read())
    path = Path(filename)
    try:
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())
            if not files:
                raise ManifestError(f"{filename}: a directory with no {', '.join(SUFFIXES)} files")
            return [d for f in files for d in _documents(str(f), f.read_bytes())]
        return _documents(filename, path.read_bytes())
    except OSError as exc:
        raise ManifestError(f"{filename}: {exc.strerror or exc}") from None


def _documents(source: str, data: bytes) -> list[Document]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return [Document(source, 0, error=f"not UTF-8 text (byte {exc.start}); is it a YAML or JSON file?")]
    values, broken = _parsed(text)
    found = [d for index, value in values for d in _objects(source, index, value)]
    if broken:
        found.append(Document(source, broken[0], error=broken[1]))
    return found or [Document(source, 0, error="no objects in it (empty)")]


def _parsed(text: str) -> tuple[list[tuple[int, Any]], tuple[int, str] | None]:
    """(1-based index, value) of each non-empty document before any syntax error, and the error:
    (the index of the document it is in, the message)."""
    if text.lstrip().startswith(("{", "[")):  # JSON (which YAML reads too, except a tab-indented one)
        try:
            return [(1, json.loads(text))], None
        except ValueError:
            pass  # flow-style YAML, or broken JSON: YAML's message says where
    found: list[tuple[int, Any]] = []
    index = 0
    try:
        for index, value in enumerate(yaml.load_all(text, Loader=_StrictLoader), 1):
            if value is not None:
                found.append((index, value))
    except yaml.YAMLError as exc:
        return found, (index + 1, f"not valid YAML: {_one_line(exc)}")
    return found, None


def _objects(source: str, index: int, value: Any) -> list[Document]:
    if not isinstance(value, dict):
        what = "a list" if isinstance(value, list) else f"just {str(value)[:40]!r}"
        return [Document(source, index, error=f"{what}, not an object; write one object per document "
                                              "(separate them with ---), each with apiVersion, kind, "
                                              "metadata and spec")]
    try:  # as it travels to the API server: keys as strings, dates as text, no NaN
        body = json.loads(json.dumps(value, default=str, allow_nan=False))
    except (TypeError, ValueError) as exc:
        return [Document(source, index, error=f"cannot be written as JSON: {exc}")]
    if body.get("kind") == "List" and isinstance(body.get("items"), list):
        return [d for item in body["items"] for d in _objects(source, index, item)]
    return [Document(source, index, body)]


def _one_line(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"
    return " ".join(str(exc).replace('in "<unicode string>", ', "at ").split())


class _StrictLoader(yaml.SafeLoader):
    """A YAML reader that refuses a key written twice in one mapping, as the API server's strict field
    validation does (a plain YAML reader keeps the last one silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue  # keys merged in with `<<:` may be overridden, by YAML's rules
            if key.value in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate field {key.value!r}",
                                                        key.start_mark)
            seen.add(key.value)
        return super().construct_mapping(node, deep=deep)
