"""Our decode and builder against columnar JSON readers, on the same events (issue 28, point 2).

    python bench/run_json_readers.py [FILE ...] [--mb 64] [--windows 8] [--repeat 3]
                                     [--json bench/out/json_readers.json]

With no FILE, the 500 MB ``deep`` and ``large`` traces that ``bench/run_scale.py --keep``
leaves under ``bench/data/`` are used (made when missing, as that script makes them).

The issue asks for the builder and the stream at the speed of the msgspec decode, and for a
columnar or SIMD JSON reader where a well-kept one does the job faster. This script measures
whether one does. From each file it takes ``--windows`` stretches of whole events spread
over the file, ``--mb`` MB in all, and times on exactly those bytes, best of ``--repeat``,
wall and CPU seconds:

- ``ours``: the product's path, one core: 256 KiB pieces (``trace/stream.py``'s block size)
  decoded by msgspec into the typed structs (``trace/decode.py``), each batch added to a
  :class:`ModelBuilder` (``trace/build.py``: numpy columns, interned strings, side events),
  then freed; the three parts are timed apart (``decode``, ``build``, ``free``);
- ``orjson``: ``orjson.loads`` of each window as one array (dicts, no columns): the floor of a
  general parser;
- ``pyarrow``: ``pyarrow.json.read_json`` with an explicit schema of the fields the model
  reads (the rest ignored). It reads newline-delimited objects only, so the window is first
  rewritten that way (``to_ndjson``, timed and counted);
- ``polars``: ``polars.read_json`` of the window as an array, with the same schema but
  ``pid`` and ``tid`` as text (it reads a number into a text column; pyarrow does not);
- ``duckdb``: ``read_json(format='array')`` with the same columns (the list-valued ones as
  raw JSON text, as ours keeps them) into an Arrow table; the window is written to a
  temporary file first, not timed (DuckDB reads files).

Then each reads whole files (``--whole``; by default the 50 MB ``deep`` and ``large``
traces) in a fresh process, one core for ours (``TB_DIAGNOSTICS_LOAD_WORKERS=1``): ours is
``load_trace`` (the model, streamed); DuckDB is ``read_json`` of the file as it is, one
object whose ``traceEvents`` it unnests. Wall and CPU seconds, and the peak RSS.

The readers get every advantage ours does not: whole windows in one call (ours works in 256
KiB pieces, for bounded memory), the cores they want (ours: one), and their time stops at
their own columns (strings not interned, nothing joined, no model). A reader that fails on a
window says why (one type per field: traces mix ints and strings in ``pid`` and ``stream``).

The readers are never dependencies of ours: the script makes its own venv once,
``bench/.venv-readers`` (git-ignored), with them and the versions of numpy and msgspec the
package uses, and runs its measuring half there with ``plugin/`` on the path.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV = HERE / ".venv-readers"
sys.path.insert(0, str(HERE))

from readers_report import cut_windows, pieces_of, ratio_table, to_ndjson, whole_table  # noqa: E402

PEERS = ("orjson==3.13.0", "pyarrow==26.0.1", "polars==2.1.0", "duckdb==2.0.1")


# ---------------------------------------------------------------- the measuring half (venv)

def _best(fn: Callable[[], int], repeat: int) -> dict[str, Any]:
    best: dict[str, Any] | None = None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        rows = fn()
        res = {"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0, "rows": rows}
        if best is None or res["wall"] < best["wall"]:
            best = res
    assert best is not None
    return best


def _try(fn: Callable[[], int], repeat: int) -> dict[str, Any]:
    try:
        return _best(fn, repeat)
    except Exception as exc:  # a reader that cannot read the window says why
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"}


def _ours(windows: list[bytes], cut: Callable[[bytes, int], int],
          repeat: int) -> dict[str, dict[str, Any]]:
    import msgspec

    from tb_diagnostics.trace.build import ModelBuilder
    from tb_diagnostics.trace.decode import Event

    pieces = [p for w in windows for p in pieces_of(w, cut)]
    decoder = msgspec.json.Decoder(list[Event])
    best: dict[str, dict[str, Any]] = {}
    for _ in range(repeat):
        parts = {"decode": [0.0, 0.0], "build": [0.0, 0.0], "free": [0.0, 0.0]}
        builder = ModelBuilder("bench")
        rows = 0

        for piece in pieces:
            t0 = time.perf_counter(), time.process_time()
            events = decoder.decode(piece)
            t1 = time.perf_counter(), time.process_time()
            builder.add(events)
            t2 = time.perf_counter(), time.process_time()
            rows += len(events)
            del events
            t3 = time.perf_counter(), time.process_time()
            for part, (a, b) in (("decode", (t0, t1)), ("build", (t1, t2)), ("free", (t2, t3))):
                parts[part][0] += b[0] - a[0]
                parts[part][1] += b[1] - a[1]
        whole = sum(w for w, _ in parts.values())
        if not best or whole < best["ours"]["wall"]:
            best = {f"ours: {k}": {"wall": w, "cpu": c, "rows": rows}
                    for k, (w, c) in parts.items()}
            best["ours"] = {"wall": whole, "cpu": sum(c for _, c in parts.values()),
                            "rows": rows}
    return best


def _arrow_schema() -> Any:
    import pyarrow as pa

    i64, f64, s = pa.int64(), pa.float64(), pa.string()
    args = pa.struct([
        ("Python parent id", i64), ("Python id", i64), ("External id", i64),
        ("device", i64), ("stream", i64), ("correlation", i64), ("external id", i64),
        ("registers per thread", i64), ("shared memory", i64), ("grid", pa.list_(i64)),
        ("block", pa.list_(i64)), ("est. achieved occupancy %", f64), ("bytes", f64),
        ("Concrete Inputs", pa.list_(s)), ("Input type", pa.list_(s)),
        ("Input Dims", pa.list_(pa.list_(i64))), ("Call stack", s),
        ("Total Reserved", f64), ("Total Allocated", f64), ("Bytes", f64),
        ("Addr", pa.uint64()), ("Device Id", i64), ("Device Type", i64), ("name", s)])
    return pa.schema([("ph", s), ("cat", s), ("name", s), ("pid", i64), ("tid", i64),
                      ("ts", f64), ("dur", f64), ("id", i64), ("args", args)])


#: DuckDB's columns: pid and tid as raw JSON (traces mix numbers and strings in them), the
#: list-valued args as raw JSON text (as ours keeps them). Its struct keys ignore case, so
#: two of the model's keys cannot be read beside their namesakes: ``external id`` (some
#: generations' spelling of ``External id``) and ``bytes`` (a copy's size; ``Bytes`` is a
#: memory event's). That is less work for it than for the others.
_DUCKDB_ARGS = (
    ("Python parent id", "BIGINT"), ("Python id", "BIGINT"), ("External id", "BIGINT"),
    ("device", "BIGINT"), ("stream", "BIGINT"), ("correlation", "BIGINT"),
    ("registers per thread", "BIGINT"), ("shared memory", "BIGINT"), ("grid", "JSON"),
    ("block", "JSON"), ("est. achieved occupancy %", "DOUBLE"), ("Concrete Inputs", "JSON"),
    ("Input type", "JSON"), ("Input Dims", "JSON"), ("Call stack", "VARCHAR"),
    ("Total Reserved", "DOUBLE"), ("Total Allocated", "DOUBLE"), ("Bytes", "DOUBLE"),
    ("Addr", "UBIGINT"), ("Device Id", "BIGINT"), ("Device Type", "BIGINT"),
    ("name", "VARCHAR"))
_DUCKDB_FIELDS = (
    ("ph", "VARCHAR"), ("cat", "VARCHAR"), ("name", "VARCHAR"), ("pid", "JSON"),
    ("tid", "JSON"), ("ts", "DOUBLE"), ("dur", "DOUBLE"), ("id", "BIGINT"),
    ("args", "STRUCT(" + ", ".join(f'"{k}" {t}' for k, t in _DUCKDB_ARGS) + ")"))
#: ``read_json``'s columns of an array of events, and the type of one event.
_DUCKDB_COLUMNS = "{" + ", ".join(f"{k}: '{t}'" for k, t in _DUCKDB_FIELDS) + "}"
_DUCKDB_EVENT = "STRUCT(" + ", ".join(f'"{k}" {t}' for k, t in _DUCKDB_FIELDS) + ")"


def _peers(windows: list[bytes], repeat: int) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    arrays = [b"[" + w + b"]" for w in windows]
    try:
        import orjson
        out["orjson"] = _try(lambda: sum(len(orjson.loads(a)) for a in arrays), repeat)
    except ImportError:
        pass
    try:
        import pyarrow.json as pj
    except ImportError:
        pj = None
    if pj is not None:
        schema = _arrow_schema()
        out["pyarrow: to_ndjson"] = _try(lambda: len([to_ndjson(w) for w in windows]), repeat)
        lines = [to_ndjson(w) for w in windows]
        # Objects over several lines (pretty-printed) need the slower mode; one per line not.
        spread = any(b"\n" in w[: w.find(b"}")] for w in windows)
        options = pj.ParseOptions(explicit_schema=schema, newlines_in_values=spread,
                                  unexpected_field_behavior="ignore")

        def arrow() -> int:
            return sum(pj.read_json(io.BytesIO(x), parse_options=options,
                                    read_options=pj.ReadOptions(block_size=16 << 20)).num_rows
                       for x in lines)

        out["pyarrow: read_json"] = read = _try(arrow, repeat)
        if "error" not in read:
            conv = out["pyarrow: to_ndjson"]
            out["pyarrow"] = {"wall": read["wall"] + conv["wall"],
                              "cpu": read["cpu"] + conv["cpu"], "rows": read["rows"]}
    try:
        import polars as pl
    except ImportError:
        pl = None
    if pl is not None:
        # The same fields and types, as polars names them; pid and tid as text, which
        # polars makes of numbers too (traces mix numbers and strings in them).
        schema = dict(pl.from_arrow(_arrow_schema().empty_table()).schema)
        schema.update(pid=pl.String, tid=pl.String)

        def polars() -> int:
            return sum(pl.read_json(io.BytesIO(a), schema=schema).height for a in arrays)

        out["polars"] = _try(polars, repeat)
    try:
        import duckdb
    except ImportError:
        duckdb = None
    if duckdb is not None:
        with tempfile.TemporaryDirectory(prefix="json-readers-") as tmp:
            files = []
            for i, a in enumerate(arrays):
                f = Path(tmp) / f"w{i}.json"
                f.write_bytes(a)
                files.append(f)
            con = duckdb.connect()
            con.execute(f"SET threads={os.cpu_count() or 1}")

            def tables() -> list[Any]:
                return [con.sql(f"SELECT * FROM read_json('{f}', format='array', "
                                f"maximum_object_size=67108864, columns={_DUCKDB_COLUMNS})"
                                ).to_arrow_table() for f in files]

            out["duckdb"] = _try(lambda: sum(t.num_rows for t in tables()), repeat)
            out["duckdb → columns"] = _try(lambda: sum(map(_as_columns, tables())), repeat)
    return out


#: DuckDB's text columns (top level, then in args): made string ids as ours are.
_TEXT_COLUMNS = ("ph", "cat", "name", "pid", "tid")
_TEXT_ARGS = ("Call stack", "Concrete Inputs", "Input type", "Input Dims", "grid", "block")


def _as_columns(table: Any) -> int:
    """The least work that turns DuckDB's table into columns like the model's: each text
    column dictionary-encoded (string ids and a table of strings, as ours interns them),
    each number a numpy array with absent values filled. Ours does more (kinds, lanes,
    memory samples and flows apart); this is the readers' best case."""
    import pyarrow as pa
    import pyarrow.compute as pc

    args = table.column("args").combine_chunks()
    for name in _TEXT_COLUMNS:
        pc.dictionary_encode(table.column(name))
    for name in ("ts", "dur", "id"):
        table.column(name).to_numpy()
    for i in range(args.type.num_fields):
        field = args.type.field(i)
        values = args.field(i)
        if field.name in _TEXT_ARGS or field.name == "name":
            pc.dictionary_encode(values)
        else:
            absent = 0 if pa.types.is_unsigned_integer(field.type) else -1
            pc.fill_null(values, absent).to_numpy()
    return table.num_rows


def measure(files: list[Path], mb: float, count: int, repeat: int) -> list[dict[str, Any]]:
    from tb_diagnostics.trace.stream import _cut

    rows = []
    for path in files:
        windows = cut_windows(path, mb, count, lambda b, limit: _cut(b, limit))
        size = sum(map(len, windows)) / 1e6
        print(f"{path.name}: {len(windows)} windows, {size:.1f} MB", file=sys.stderr)
        readers = _ours(windows, lambda b, limit: _cut(b, limit), repeat)
        readers.update(_peers(windows, repeat))
        rows.append({"file": path.parent.name, "mb": size, "ours_wall": readers["ours"]["wall"],
                     "readers": readers})
    return rows


def whole_file(reader: str, path: Path) -> dict[str, Any]:
    """One reader on the whole file, in this fresh process: its wall and CPU seconds (imports
    excluded), the rows it gives (DuckDB: every event; ours: the model's complete events,
    the rest being side columns), and the process's peak RSS (imports included)."""
    import resource

    if reader == "duckdb":
        import duckdb

        con = duckdb.connect()
        con.execute(f"SET threads={os.cpu_count() or 1}")
        # The file is one object: DuckDB reads it as one row whose traceEvents is a list,
        # then unnests it (its size must be allowed as one object).
        query = (f"SELECT unnest(traceEvents, recursive := false) FROM read_json('{path}', "
                 f"format='auto', maximum_object_size={path.stat().st_size + (1 << 20)}, "
                 f"columns={{traceEvents: '{_DUCKDB_EVENT}[]'}})")

        def read() -> int:
            return con.sql(query).to_arrow_table().num_rows
    else:
        from tb_diagnostics.trace.load import load_trace

        def read() -> int:
            return int(load_trace(str(path)).kind.shape[0])

    w0, c0 = time.perf_counter(), time.process_time()
    rows = read()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0, "rows": rows,
            "peak_mb": peak / 1e6}


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for name in ("msgspec", "numpy", "orjson", "pyarrow", "polars", "duckdb"):
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    return out


# ---------------------------------------------------------------- driver

def ensure_venv() -> Path:
    """The readers' venv, made once: its python (numpy and msgspec as in this interpreter)."""
    from importlib.metadata import version

    py = VENV / "bin" / "python"
    ours = [f"numpy=={version('numpy')}", f"msgspec=={version('msgspec')}"]
    want = " ".join(ours + list(PEERS))
    marker = VENV / ".installed"
    if not marker.exists() or marker.read_text().strip() != want:
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *ours, *PEERS], check=True)
        marker.write_text(want + "\n")
    return py


def run_whole(py: Path, env: dict[str, str], files: list[Path],
              repeat: int) -> list[dict[str, Any]]:
    """Each reader on each whole file, ``repeat`` fresh processes each: the best run."""
    out = []
    for path in files:
        readers = {}
        for reader in ("ours", "duckdb"):
            runs = []
            for _ in range(repeat):
                one = subprocess.run([str(py), __file__, "--whole-worker", reader, str(path)],
                                     env=dict(env, TB_DIAGNOSTICS_LOAD_WORKERS="1"),
                                     capture_output=True, text=True)
                if one.returncode != 0:
                    tail = (one.stderr.strip().splitlines() or [f"exit {one.returncode}"])[-1]
                    runs = [{"error": tail[:160]}]
                    break
                runs.append(json.loads(one.stdout.strip().splitlines()[-1]))
            readers[reader] = min(runs, key=lambda r: r.get("wall", 0))
        out.append({"file": path.parent.name, "mb": path.stat().st_size / 1e6,
                    "readers": readers})
    return out


def default_files(mb: int = 500) -> list[Path]:
    """The ``deep`` and ``large`` traces of about ``mb`` MB that ``run_scale.py`` makes."""
    from run_scale import make_trace

    return [make_trace("deep", mb), make_trace("large", mb)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--mb", type=float, default=64.0, help="MB of events per file (64)")
    ap.add_argument("--windows", type=int, default=8, help="stretches per file (8)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=HERE / "out" / "json_readers.json")
    ap.add_argument("--whole", nargs="*", type=Path, default=None,
                    help="files each reader reads whole, in a fresh process (default: the "
                         "50 MB deep and large traces; none: skip)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--whole-worker", choices=("ours", "duckdb"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.whole_worker:
        print(json.dumps(whole_file(args.whole_worker, args.files[0])))
        return 0
    if args.worker:
        rows = measure(args.files, args.mb, args.windows, args.repeat)
        print(json.dumps({"rows": rows, "versions": versions()}))
        return 0
    files = args.files or default_files()
    py = ensure_venv()
    env = dict(os.environ, PYTHONPATH=str(REPO / "plugin"), OMP_NUM_THREADS="1")
    cmd = [str(py), __file__, "--worker", "--mb", str(args.mb), "--windows",
           str(args.windows), "--repeat", str(args.repeat), *map(str, files)]
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=True)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    whole = default_files(50) if args.whole is None else args.whole
    result["whole"] = run_whole(py, env, whole, args.repeat)
    print(", ".join(f"{k} {v}" for k, v in result["versions"].items()))
    print(ratio_table(result["rows"]))
    if result["whole"]:
        print()
        print(whole_table(result["whole"]))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
