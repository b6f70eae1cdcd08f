"""Settings of a command, declared once: a frozen dataclass whose every field carries its command-line
flag, help, default and the Helm value that sets it in charts/netsched (or why the chart has none).

The CLI builds a subcommand's arguments from the class (`add_flags`) and parses them into one object
(`from_args`); a unit test checks the same fields against the chart's values, schema, templates and the
rendered manifests, so a flag cannot be added in one place and forgotten in another.

A field's type says how it parses: `bool` is a switch, `tuple[X, ...]` a repeatable flag (or, for a
positional, one or more values), `X | None` without a default an optional value. A `flag` without
leading dashes is a positional argument named as its field; one with a default of None is optional.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import operator
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from netsched.api.topology import DEFAULT, DEFAULT_PRESET, PRESETS, BadTopology, Topology

_KEY = "netsched.flag"

NOT_IN_CHART = "a command people or tests run: the chart never runs it"


@dataclass(frozen=True)
class Flag:
    name: str  # "--max-cache-age"; a bool field defaulting to True is turned off by its "--no-..." flag
    help: str
    helm: str | None  # the dotted values.yaml path the chart sets this flag from
    fixed: str  # when helm is None: why the chart has no value for it
    metavar: str | None
    short: str | None = None  # "-f" beside "--filename"
    parse: Callable[[str], Any] | None = None  # instead of the field's type, e.g. a checked share
    choices: tuple[str, ...] | None = None
    required: bool = False


def setting(default: Any = None, *, flag: str, help: str, helm: str | None = None, fixed: str = "",
            metavar: str | None = None, short: str | None = None, parse: Callable[[str], Any] | None = None,
            choices: tuple[str, ...] | None = None, required: bool = False) -> Any:
    """A settings field: `helm` names its chart value, or `fixed` says why there is none. A required one
    has no default (declare its class `kw_only`)."""
    spec = Flag(flag, help, helm, fixed, metavar, short, parse, choices, required)
    if required:
        return dataclasses.field(metadata={_KEY: spec})
    return dataclasses.field(default=default, metadata={_KEY: spec})


def option(default: Any = None, **flag: Any) -> Any:
    """A setting of a command the chart never runs, so without a Helm value."""
    return setting(default, fixed=NOT_IN_CHART, **flag)


def topology_setting() -> Any:
    """`--topology`, the network levels nodes are placed by: every component that reads them declares this
    one setting, from the chart's top-level `topology` value (the `netsched.topology` template helper)."""
    return setting(DEFAULT, flag="--topology", parse=parse_topology, metavar="LEVELS", helm="topology",
                   help=f"topology levels, widest first: a preset ({', '.join(PRESETS)}) or NAME=LABEL,... "
                   f"e.g. block=example.com/block,rack=example.com/rack (default {DEFAULT_PRESET})")


def dra_gpu_drivers_setting() -> Any:
    """`--dra-gpu-driver`, the DRA drivers whose devices count as GPUs (netsched.api.dra): every component
    that counts GPUs declares this one setting, from the chart's `dra.gpuDrivers` value."""
    return setting((), flag="--dra-gpu-driver", metavar="DRIVER", helm="dra.gpuDrivers",
                   help="a DRA driver (a ResourceSlice's spec.driver, e.g. gpu.nvidia.com) whose devices "
                   "count as a node's nvidia.com/gpu; repeat for more (default: none, only allocatable "
                   "nvidia.com/gpu)")


def parse_topology(text: str) -> Topology:
    """A --topology value; argparse's one-line error naming the fix if it is none."""
    try:
        return Topology.parse(text)
    except BadTopology as exc:  # argparse then says it in one line and exits 2
        raise argparse.ArgumentTypeError(str(exc)) from None


def number(*, above: float | None = None, at_least: float | None = None, below: float | None = None,
           at_most: float | None = None, kind: type[int] | type[float] = float) -> Callable[[str], Any]:
    """A numeric flag's parser that keeps the range the chart's values-check keeps: a value outside it is
    argparse's one-line error naming the range, not a process that starts and misbehaves."""
    rules = [(bound, words, test) for bound, words, test in (
        (above, "more than", operator.gt), (at_least, "at least", operator.ge),
        (below, "less than", operator.lt), (at_most, "at most", operator.le)) if bound is not None]
    wanted = " and ".join(f"{words} {bound:g}" for bound, words, _ in rules)

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            whole = "whole " if kind is int else ""
            raise argparse.ArgumentTypeError(f"{text!r} is not a {whole}number") from None
        if not math.isfinite(value) or not all(test(value, bound) for bound, _, test in rules):
            raise argparse.ArgumentTypeError(f"{text} is out of range: it must be {wanted}")
        return value
    return parse


PORT = number(at_least=1, at_most=65535, kind=int)
SECONDS = number(above=0)
SECONDS_OR_ZERO = number(at_least=0)


def flag_of(field: dataclasses.Field[Any]) -> Flag | None:
    return field.metadata.get(_KEY)


def settings_fields(cls: type, prefix: str = "") -> list[tuple[str, dataclasses.Field[Any], type]]:
    """(dotted name, field, value type) of every flag-carrying field, nested settings classes flattened."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        if isinstance(kind, types.UnionType):  # `X | None`
            kind = next(k for k in typing.get_args(kind) if k is not type(None))
        if _nested(f, kind):
            out += settings_fields(kind, f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, f, kind))
    return out


def _nested(f: dataclasses.Field[Any], kind: Any) -> bool:
    """Whether a field is a settings class of its own (a value with a flag, like a Topology, is not)."""
    return flag_of(f) is None and isinstance(kind, type) and dataclasses.is_dataclass(kind)


def _item(kind: Any) -> Any:
    """X of `tuple[X, ...]`, else None."""
    return typing.get_args(kind)[0] if typing.get_origin(kind) is tuple else None


def add_flags(parser: argparse.ArgumentParser, cls: type) -> None:
    for dest, f, kind in settings_fields(cls):
        spec = flag_of(f)
        if spec is None:
            raise TypeError(f"{cls.__name__}.{dest} has no flag: declare it with setting()")
        names = [n for n in (spec.short, spec.name) if n]
        if kind is bool:
            parser.add_argument(*names, dest=dest, action="store_false" if f.default else "store_true",
                                help=spec.help)
            continue
        item = _item(kind)
        options: dict[str, Any] = {"type": spec.parse or item or kind, "help": spec.help}
        if spec.choices:
            options["choices"] = spec.choices
        if not spec.name.startswith("-"):  # a positional: argparse names it by its field
            if item:
                options["nargs"] = "+"
            elif not spec.required:
                options.update(nargs="?", default=f.default)
            parser.add_argument(spec.name, **options)
            continue
        options.update(dest=dest, required=spec.required)
        if item:
            repeated: Any = f.default
            options.update(action="append", default=list(repeated))
        elif not spec.required:
            options["default"] = f.default
        if not spec.choices:
            options["metavar"] = spec.metavar or spec.name.lstrip("-").replace("-", "_").upper()
        parser.add_argument(*names, **options)


def from_args(cls: type, args: argparse.Namespace, prefix: str = "") -> Any:
    """The settings object the parsed flags describe."""
    values, hints = {}, typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        if _nested(f, kind):
            values[f.name] = from_args(kind, args, f"{prefix}{f.name}.")
        else:
            value = getattr(args, prefix + f.name)
            values[f.name] = tuple(value) if _item(kind) else value
    return cls(**values)


def summary(settings: Any) -> str:
    """One line for the start-up log: every setting as name=value."""
    def flat(obj: Any, prefix: str = "") -> list[str]:
        out = []
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if flag_of(f) is None and dataclasses.is_dataclass(value):
                out += flat(value, f"{prefix}{f.name}.")
            else:
                out.append(f"{prefix}{f.name}={value}")
        return out

    return " ".join(flat(settings))
