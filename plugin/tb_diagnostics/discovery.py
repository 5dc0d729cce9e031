"""Registries by discovery: every module of a package that defines an attribute of a given
type is registered. Rules, run-level rules and CLI commands all work this way, so adding one
is adding one module."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def discover(package: str, path: Iterable[str], attribute: str, kind: type[T],
             skip: frozenset[str] = frozenset({"base"})) -> list[tuple[str, T]]:
    """``(module name, object)`` for each module of ``package`` whose ``attribute`` is a
    ``kind``; modules starting with ``_`` and those in ``skip`` are not imported."""
    found = []
    for info in pkgutil.iter_modules(path):
        if info.name in skip or info.name.startswith("_"):
            continue
        obj = getattr(importlib.import_module(f"{package}.{info.name}"), attribute, None)
        if isinstance(obj, kind):
            found.append((info.name, obj))
    return found


def by_unique_id(found: list[tuple[str, T]], what: str) -> tuple[T, ...]:
    """The objects ordered by their ``id``, refusing two with the same id."""
    seen: dict[str, T] = {}
    for module, obj in found:
        key = obj.id  # type: ignore[attr-defined]
        if key in seen:
            raise ValueError(f"duplicate {what} id {key!r} in {module}")
        seen[key] = obj
    return tuple(seen[k] for k in sorted(seen))
