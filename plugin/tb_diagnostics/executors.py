"""Where per-file analysis runs: a bounded local process pool, or a Dask cluster.

Per-file analysis is independent and returns a compact summary, so any
:class:`concurrent.futures.Executor` will do. ``local`` (the default) lets
:func:`tb_diagnostics.engine.summarise_files` use its own bounded process pool;
``dask://HOST:PORT`` (or ``tcp://…``) connects to a Dask scheduler and uses its
executor, for log dirs larger than one machine can analyse. The workers must
see the same paths (or fsspec URLs) as the client, and have tb-diagnostics installed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from concurrent.futures import Executor

#: Environment variable read when ``--executor`` is not given.
ENV = "TB_DIAGNOSTICS_EXECUTOR"


class ExecutorError(ValueError):
    """An executor spec that cannot be used (unknown scheme, Dask missing, unreachable)."""


def executor_spec(given: str | None) -> str:
    return (given or os.environ.get(ENV) or "local").strip()


@contextlib.contextmanager
def open_executor(spec: str | None) -> Iterator[Executor | None]:
    """The executor for ``spec`` (None for the local pool), closed on exit."""
    spec = executor_spec(spec)
    if spec == "local":
        yield None
        return
    if not spec.startswith(("dask://", "tcp://", "tls://")):
        raise ExecutorError(f"unknown executor {spec!r}: use 'local' or 'dask://HOST:PORT'")
    try:
        from distributed import Client
    except ImportError:
        raise ExecutorError(
            "the Dask executor needs dask[distributed]: pip install 'tb-diagnostics[dask]'"
        ) from None
    address = "tcp://" + spec[len("dask://"):] if spec.startswith("dask://") else spec
    try:
        client = Client(address, timeout="10s")
    except OSError as exc:
        raise ExecutorError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    try:
        yield client.get_executor()
    finally:
        client.close()
