"""The CLI's commands: one module per command, discovered like the rules.

A module here exposes ``COMMAND = Command(...)``; ``tb-diagnostics`` lists the
commands in ``order``, then name order. Adding a command touches nothing else.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    order: int = 50


@cache
def all_commands() -> tuple[Command, ...]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        cmd = getattr(importlib.import_module(f"{__name__}.{info.name}"), "COMMAND", None)
        if isinstance(cmd, Command):
            found.append(cmd)
    return tuple(sorted(found, key=lambda c: (c.order, c.name)))
