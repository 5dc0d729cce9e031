"""A large with_stack trace, made on demand: a real profile of a small CNN training loop on
the CPU, its steps replicated to the size asked for.

    python bench/gen_deep.py --mb 500 [--out bench/data/deep_500mb] [--accum 8] [--wrap 12]

The probe is a real ``torch.profiler`` run with ``record_shapes``, ``profile_memory`` and
``with_stack`` (deep ``python_function`` nesting: every module call adds its frames), each
profiler step running ``--accum`` mini-batches, as a gradient-accumulation loop does. One
recorded step is then written again and again, its times shifted by one step's period and
its ids (``External id``, ``Python id``/``Python parent id``, flow ids, ``Ev Idx``) offset
so that every copy is a distinct step; the frames around the loop (``<module>``, ``main``,
the loop itself) are stretched to cover every copy. The result has the probe's structure,
event mix and nesting depth, at any size, in a minute rather than the hours a real profile
of that length takes. Never run in CI: sizes of 500 MB and more are for the benchmark.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"

#: Wrapper modules around each conv block: the probe's Python frames nest about as deep
#: as a large model's (each module call is two to three frames).
WRAP = 12
#: Args that are ids, offset per copy so that copies do not share them.
_ID_ARGS = ("External id", "Python id", "Ev Idx", "Sequence number", "correlation")


def _probe_trace(workdir: Path, accum: int, wrap: int, steps: int, seed: int) -> Path:
    """Profile ``steps`` steps of the loop (after a warm-up) and return the trace file."""
    import torch
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    torch.manual_seed(seed)
    torch.set_num_threads(1)

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int) -> None:
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, 3, padding=1)
            self.norm = nn.BatchNorm2d(cout)
            self.act = nn.ReLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.act(self.norm(self.conv(x)))

    class Wrap(nn.Module):
        """A module around a module: Python frames deeper by one module call."""

        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x)

    def wrapped(module: nn.Module) -> nn.Module:
        for _ in range(wrap):
            module = Wrap(module)
        return module

    class Stage(nn.Module):
        def __init__(self, cin: int, cout: int) -> None:
            super().__init__()
            self.blocks = nn.Sequential(wrapped(Block(cin, cout)), wrapped(Block(cout, cout)))
            self.pool = nn.MaxPool2d(2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.pool(self.blocks(x))

    model = nn.Sequential(Stage(3, 8), Stage(8, 16), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(16, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(8, 3, 16, 16)
    y = torch.randint(0, 10, (8,))

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        for _ in range(accum):
            with record_function("forward"):
                loss = loss_fn(model(x), y)
            with record_function("backward"):
                loss.backward()
        with record_function("optimizer"):
            opt.step()

    path = workdir / "probe.pt.trace.json"
    step()  # warm-up outside the profiler
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True,
                 with_stack=True, schedule=schedule(wait=0, warmup=1, active=steps),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(steps + 1):
            step()
            prof.step()
    return path


def _steps(events: list[dict]) -> list[dict]:
    return sorted((e for e in events if e.get("ph") == "X"
                   and str(e.get("name", "")).startswith("ProfilerStep#")),
                  key=lambda e: e["ts"])


def replicate(doc: dict, out: Path, target_bytes: int) -> dict:
    """Write ``doc`` with its last whole step copied until the file holds ``target_bytes``."""
    import orjson

    events = doc["traceEvents"]
    steps = _steps(events)
    if len(steps) < 2:
        raise SystemExit("the probe recorded fewer than two steps")
    # The second-to-last step: the last one is closed by the profiler's exit.
    step = steps[-2]
    t0, t1 = step["ts"], step["ts"] + step["dur"]
    period = steps[-1]["ts"] - t0  # step start to the next step's start
    tid = (step["pid"], step["tid"])
    inner, outer, head = [], [], []
    for e in events:
        ph = e.get("ph")
        if ph == "M":
            head.append(e)
            continue
        ts = e.get("ts")
        if ts is None:
            continue
        end = ts + (e.get("dur") or 0)
        if t0 <= ts and end <= t1 + 1e-3:
            inner.append(e)
        elif ph == "X" and ts < t0 and end > t1 and (e["pid"], e["tid"]) == tid:
            outer.append(e)  # frames around the loop: stretched over every copy
    inner.sort(key=lambda e: e["ts"])
    # Python ids of frames inside the step; parents outside it keep their id.
    inner_py = {e["args"]["Python id"] for e in inner
                if "Python id" in e.get("args", {})}
    span = 1 + max(int(v) for e in events for k, v in (e.get("args") or {}).items()
                   if k in _ID_ARGS and isinstance(v, int | float))
    span = max(span, 1 + max((int(e["id"]) for e in events if isinstance(e.get("id"), int)),
                             default=0))
    first = int(str(step["name"]).split("#")[1])
    top = {k: v for k, v in doc.items() if k != "traceEvents"}
    per_copy = len(orjson.dumps(inner)) + len(inner)
    copies = max(1, round(target_bytes / max(per_copy, 1)))
    total_dur = copies * period
    written = 0
    with open(out, "wb") as fh:
        fh.write(b'{"traceEvents": [\n')
        sep = b""
        for e in head:
            fh.write(sep + orjson.dumps(e))
            sep = b",\n"
        for e in outer:
            e = {**e, "dur": e["dur"] + total_dur}
            fh.write(sep + orjson.dumps(e))
        for k in range(copies):
            shift = k * period
            off = k * span
            batch = []
            for e in inner:
                c = {**e, "ts": round(e["ts"] + shift, 3)}
                a = e.get("args")
                if a:
                    a = dict(a)
                    for key in _ID_ARGS:
                        v = a.get(key)
                        if isinstance(v, int) and v >= 0:
                            a[key] = v + off
                    par = a.get("Python parent id")
                    if isinstance(par, int) and par in inner_py:
                        a["Python parent id"] = par + off
                    c["args"] = a
                if isinstance(e.get("id"), int):
                    c["id"] = e["id"] + off
                if c.get("name") == step["name"]:
                    c["name"] = f"ProfilerStep#{first + k}"
                batch.append(c)
            chunk = b",\n".join(map(orjson.dumps, batch))
            fh.write(sep + chunk)
            written += len(chunk)
        fh.write(b"\n],\n" + orjson.dumps(top)[1:])
    return {"copies": copies, "events": len(head) + len(outer) + copies * len(inner),
            "bytes": out.stat().st_size}


def generate(mb: float, out_dir: Path, accum: int = 8, wrap: int = WRAP,
             seed: int = 0) -> Path:
    """The trace of about ``mb`` MB in ``out_dir`` (made when missing); returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "worker0.deep.pt.trace.json"
    if path.exists():
        return path
    probe = DATA / f"deep_probe_accum{accum}_wrap{wrap}" / "probe.pt.trace.json"
    if not probe.exists():
        probe.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            made = _probe_trace(Path(tmp), accum, wrap, steps=3, seed=seed)
            made.replace(probe)
    doc = json.loads(probe.read_bytes())
    tmp_path = path.with_suffix(".part")
    info = replicate(doc, tmp_path, int(mb * 1e6))
    tmp_path.replace(path)
    print(f"wrote {path}: {info['bytes'] / 1e6:.0f} MB, {info['events']} events, "
          f"{info['copies']} steps", file=sys.stderr)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=float, required=True)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--accum", type=int, default=8, help="mini-batches per profiler step")
    p.add_argument("--wrap", type=int, default=WRAP,
                   help="modules wrapped around each conv block (deeper Python stacks)")
    args = p.parse_args(argv)
    out = args.out or DATA / f"deep_{args.mb:g}mb"
    print(generate(args.mb, out, args.accum, args.wrap))
    return 0


if __name__ == "__main__":
    sys.exit(main())
