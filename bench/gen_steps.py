"""A GPU span of very many tiny steps, made on demand (issue 28, item 3).

    python bench/gen_steps.py --steps 1000000 [--out bench/data/steps_1000000]

Each step is 10 µs: a ``ProfilerStep#k`` annotation, one ``aten::add`` that launches one
3 µs elementwise kernel through ``cudaLaunchKernel`` (correlation and External id linked,
the kernel on stream 7 of device 0), as a loop of one small op per step looks under the
profiler. Four events a step: 10⁶ steps are 4 M events, about 530 MB. The file is written
as text, one step's four events formatted at a time, so that 10⁶ steps take seconds and
little memory; it lands under ``bench/data/`` (gitignored), never in CI.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"

#: One step's period and where in it the op, the launch and the kernel fall (µs).
PERIOD_US = 10
_KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float> >"
_DEVICE = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85_899_345_920,
           "computeMajor": 8, "computeMinor": 0, "maxThreadsPerBlock": 1024,
           "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536,
           "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
           "sharedMemPerMultiprocessor": 167936, "numSms": 108,
           "sharedMemPerBlockOptin": 166912}
_STEP = (
    '{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{k}","pid":1,"tid":1,'
    '"ts":{t0},"dur":{period}}},\n'
    '{{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":{t1},"dur":6,'
    '"args":{{"External id":{e1}}}}},\n'
    '{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":{t2},'
    '"dur":3,"args":{{"External id":{e1},"correlation":{c}}}}},\n'
    '{{"ph":"X","cat":"kernel","name":"' + _KERNEL.replace("{", "{{").replace("}", "}}")
    + '","pid":0,"tid":7,"ts":{t3},"dur":3,"args":{{"External id":{e1},"device":0,'
    '"stream":7,"correlation":{c},"grid":[4,1,1],"block":[128,1,1]}}}}')


def write_steps(path: Path, steps: int, t0_us: int = 1_000_000) -> Path:
    """Write a trace of ``steps`` steps to ``path`` (a ``*.pt.trace.json``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    head = json.dumps({"schemaVersion": 1, "deviceProperties": [_DEVICE]})[:-1]
    with path.open("w") as out:
        out.write(head + ', "traceEvents": [\n')
        chunk: list[str] = []
        for k in range(steps):
            t = t0_us + k * PERIOD_US
            chunk.append(_STEP.format(k=k, t0=t, period=PERIOD_US, t1=t + 1, t2=t + 2,
                                      t3=t + 5, e1=k + 1, c=k + 1))
            if len(chunk) == 10_000 or k == steps - 1:
                out.write(",\n".join(chunk))
                if k != steps - 1:
                    out.write(",\n")
                chunk = []
        out.write("\n]}\n")
    return path


def generate(steps: int, out: Path | None = None) -> Path:
    """The trace of ``steps`` steps in its own log dir (run ``steps``, one worker), made
    once and reused."""
    root = out or DATA / f"steps_{steps}"
    path = root / "run" / "worker0.1.pt.trace.json"
    if not path.exists() or path.stat().st_size == 0:
        tmp = path.with_suffix(".partial")
        write_steps(tmp, steps)
        tmp.rename(path)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1_000_000)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    path = generate(args.steps, args.out)
    print(f"{path}  {path.stat().st_size / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
