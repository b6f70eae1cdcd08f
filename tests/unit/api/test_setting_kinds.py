"""Every kind of argument a settings class declares, parsed back into the same object."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pytest

from netsched.api.settings import NOT_IN_CHART, add_flags, flag_of, from_args, option, settings_fields


def positive(text: str) -> int:
    if int(text) <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not positive")
    return int(text)


@dataclass(frozen=True, kw_only=True)
class Tool:
    data: tuple[Path, ...] = option(flag="data", required=True, help="files")
    out: str = option(flag="--out", short="-o", required=True, help="where")
    peer: tuple[str, ...] = option((), flag="--peer", metavar="NODE", help="repeatable")
    format: str = option("csv", flag="--format", choices=("csv", "json"), help="how")
    count: int = option(1, flag="--count", parse=positive, help="how many")
    dry_run: bool = option(False, flag="--dry-run", help="change nothing")


def parse(*argv: str) -> Tool:
    parser = argparse.ArgumentParser()
    add_flags(parser, Tool)
    return from_args(Tool, parser.parse_args(argv))


def test_each_kind_of_argument_parses_into_its_field():
    assert parse("a", "b", "-o", "x", "--peer", "n1", "--peer=n2", "--format=json", "--count=3",
                 "--dry-run") == Tool(data=(Path("a"), Path("b")), out="x", peer=("n1", "n2"), format="json",
                                     count=3, dry_run=True)
    assert parse("a", "--out=x") == Tool(data=(Path("a"),), out="x")


@pytest.mark.parametrize("argv", [["--out=x"], ["a"], ["a", "--out=x", "--format=xml"],
                                  ["a", "--out=x", "--count=0"]])
def test_a_missing_required_argument_or_a_bad_value_is_refused(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse(*argv)
    assert exit_.value.code == 2 and "error:" in capsys.readouterr().err


def test_a_command_line_option_says_the_chart_never_runs_it():
    assert {flag_of(f).fixed for _, f, _ in settings_fields(Tool)} == {NOT_IN_CHART}
