"""Settings of a long-running component, declared once: a frozen dataclass whose every field carries its
command-line flag, help, default and the Helm value that sets it in charts/netsched.

The CLI builds a subcommand's flags from the class (`add_flags`) and parses them into one object
(`from_args`); a unit test checks the same fields against the chart's values, schema, templates and the
rendered manifests, so a flag cannot be added in one place and forgotten in another.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any

_KEY = "netsched.flag"


@dataclass(frozen=True)
class Flag:
    name: str  # "--max-cache-age"; a bool field defaulting to True is turned off by its "--no-..." flag
    help: str
    helm: str | None  # the dotted values.yaml path the chart sets this flag from
    fixed: str  # when helm is None: why the chart has no value for it
    metavar: str | None


def setting(default: Any = None, *, flag: str, help: str, helm: str | None = None, fixed: str = "",
            metavar: str | None = None) -> Any:
    """A settings field: `helm` names its chart value, or `fixed` says why there is none."""
    return dataclasses.field(default=default, metadata={_KEY: Flag(flag, help, helm, fixed, metavar)})


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
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            out += settings_fields(kind, f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, f, kind))
    return out


def add_flags(parser: argparse.ArgumentParser, cls: type) -> None:
    for dest, f, kind in settings_fields(cls):
        spec = flag_of(f)
        if spec is None:
            raise TypeError(f"{cls.__name__}.{dest} has no flag: declare it with setting()")
        if kind is bool:
            parser.add_argument(spec.name, dest=dest, action="store_false" if f.default else "store_true",
                                help=spec.help)
        else:
            parser.add_argument(spec.name, dest=dest, type=kind, default=f.default, help=spec.help,
                                metavar=spec.metavar or spec.name.lstrip("-").replace("-", "_").upper())


def from_args(cls: type, args: argparse.Namespace, prefix: str = "") -> Any:
    """The settings object the parsed flags describe."""
    values, hints = {}, typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            values[f.name] = from_args(kind, args, f"{prefix}{f.name}.")
        else:
            values[f.name] = getattr(args, prefix + f.name)
    return cls(**values)


def summary(settings: Any) -> str:
    """One line for the start-up log: every setting as name=value."""
    def flat(obj: Any, prefix: str = "") -> list[str]:
        out = []
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                out += flat(value, f"{prefix}{f.name}.")
            else:
                out.append(f"{prefix}{f.name}={value}")
        return out

    return " ".join(flat(settings))
