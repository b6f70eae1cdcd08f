"""`-f` read as kubectl reads it: every bad input becomes a document with an error naming where and
why, never an exception; good documents come back as JSON would carry them."""

from __future__ import annotations

import io
import json

import pytest

from netsched.foresight.manifests import Document, ManifestError, read_documents

ONE_EACH = ("not an object; write one object per document (separate them with ---), each with apiVersion, "
            "kind, metadata and spec")
JOB = "apiVersion: netsched.io/v1alpha1\nkind: GPUJob\nmetadata: {name: %s}\nspec: {replicas: 1}\n"


@pytest.mark.parametrize(("data", "said"), [
    pytest.param(b"", [(0, "no objects in it (empty)")], id="empty"),
    pytest.param(b"---\n# only a comment\n---\n", [(0, "no objects in it (empty)")], id="only-separators"),
    pytest.param(b"\xff\xfe\x00garbage", [(0, "not UTF-8 text (byte 0); is it a YAML or JSON file?")],
                 id="binary"),
    pytest.param(b"a: [", [(1, "not valid YAML: line 1, column 5: expected the node content, but found "
                               "'<stream end>'")], id="syntax"),
    pytest.param(b"kind: GPUJob\nkind: Pod\n",
                 [(1, "not valid YAML: line 2, column 1: duplicate field 'kind'")], id="duplicate-field"),
    pytest.param(b"\x00kind: A", [(1, "not valid YAML: unacceptable character #x0000: special characters are "
                                      "not allowed at position 0")], id="control-character"),
    pytest.param(b"- a\n- b\n", [(1, f"a list, {ONE_EACH}")], id="list"),
    pytest.param(b"GPUJob\n", [(1, f"just 'GPUJob', {ONE_EACH}")], id="word"),
    pytest.param(b"a: .nan\n", [(1, "cannot be written as JSON: Out of range float values are not JSON "
                                    "compliant")], id="nan"),
    pytest.param(b"? [a]\n: 1\n", [(1, "not valid YAML: line 1, column 3: found unhashable key")],
                 id="list-key"),
])
def test_what_cannot_be_read_is_said_once_with_where(data, said):
    found = read_from(data)
    assert [(d.index, d.error) for d in found] == said and all(d.body is None for d in found)


def test_documents_before_a_syntax_error_are_kept_and_the_error_names_its_document():
    found = read_from((JOB % "a" + "---\n---\n" + JOB % "b" + "x: [\n").encode())
    assert [(d.index, d.label) for d in found] == [(1, "GPUJob/a (document 1 of f.yaml)"),
                                                  (3, "document 3 of f.yaml")]
    assert found[1].error.startswith("not valid YAML: line 12")  # the end of the file: `[` never closes


def test_json_yaml_lists_and_merges_read_as_kubectl_reads_them():
    tabbed = b'{\n\t"kind": "GPUJob",\n\t"metadata": {"name": "t"}\n}'  # YAML refuses the tabs; JSON does not
    assert read_from(tabbed)[0].body == {"kind": "GPUJob", "metadata": {"name": "t"}}
    listed = read_from(b"kind: List\nitems: [{kind: GPUJob, metadata: {name: a}}, {kind: Pod}]\n")
    assert [d.label for d in listed] == ["GPUJob/a (document 1 of f.yaml)",
                                         "Pod/(no name) (document 1 of f.yaml)"]
    merged = read_from(b"base: &b {x: 1, y: 1}\nkind: K\nm:\n  <<: *b\n  x: 2\n")[0].body
    assert merged["m"] == {"x": 2, "y": 1}  # a merged key may be overridden: not a duplicate
    assert read_from(b"kind: K\nwhen: 2024-01-01\n1: one\n")[0].body == {"kind": "K", "when": "2024-01-01",
                                                                       "1": "one"}
    generated = read_from(b"kind: K\nmetadata: {generateName: job-}\n")[0]
    assert generated.label == "K/job-* (document 1 of f.yaml)"


def test_stdin_and_a_directory_of_manifests_sorted(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO((JOB % "s").encode())))
    assert [d.label for d in read_documents("-")] == ["GPUJob/s (document 1 of stdin)"]
    (tmp_path / "b.yml").write_text(JOB % "b" + "---\n" + JOB % "c")
    (tmp_path / "a.json").write_text(json.dumps({"kind": "GPUJob", "metadata": {"name": "a"}}))
    (tmp_path / "notes.txt").write_text("not read")
    (tmp_path / "sub.yaml").mkdir()  # not a file: not read
    assert [d.label for d in read_documents(str(tmp_path))] == [
        f"GPUJob/a (document 1 of {tmp_path / 'a.json'})", f"GPUJob/b (document 1 of {tmp_path / 'b.yml'})",
        f"GPUJob/c (document 2 of {tmp_path / 'b.yml'})"]


def test_a_path_with_nothing_to_read_is_one_error(tmp_path):
    with pytest.raises(ManifestError, match=r"nope.yaml: No such file or directory$"):
        read_documents(str(tmp_path / "nope.yaml"))
    with pytest.raises(ManifestError, match=r": a directory with no .yaml, .yml, .json files$"):
        read_documents(str(tmp_path))


def read_from(data: bytes) -> list[Document]:
    from netsched.foresight.manifests import _documents

    return _documents("f.yaml", data)
