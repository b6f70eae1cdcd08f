"""A subcommand of `netsched` as its package declares it, beside its settings and main: the CLI
(netsched.cli) builds its parser from a table of these and runs the main of the one given."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    settings: type  # a frozen dataclass of `netsched.api.settings` fields: the command's arguments
    main: Callable[[Any], int]  # its exit code
    description: str | None = None


@dataclass(frozen=True)
class Group:  # a command of commands: `netsched dev-cluster up`
    name: str
    help: str
    description: str
    commands: tuple[Command, ...]
