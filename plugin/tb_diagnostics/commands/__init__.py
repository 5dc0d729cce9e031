"""The CLI's commands: one module per command, discovered like the rules.

A module here exposes ``COMMAND = Command(...)``; ``tb-diagnostics`` lists the
commands in ``order``, then name order. Adding a command touches nothing else.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from tb_diagnostics.discovery import discover


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    order: int = 50


@cache
def all_commands() -> tuple[Command, ...]:
    found = [cmd for _, cmd in discover(__name__, __path__, "COMMAND", Command)]
    return tuple(sorted(found, key=lambda c: (c.order, c.name)))
