"""Run ``python -m MODULE …`` or ``python -c CODE …`` in this process and write its peak RSS.

    python bench/_peak.py -m tb_diagnostics.cli report LOGDIR
    python bench/_peak.py -c "print(1)" ARG

The benchmarks start their cases through this wrapper, because the peak RSS the kernel
reports for a child (``wait4``) includes the memory of the process that started it, at the
moment it started it: a harness that has built large traces would show in every case. Here
the figure is this process's own high-water mark (``VmHWM``, counted from its ``exec``)
together with that of the processes it waited for (the pool's workers, a TensorBoard it
started), written in MiB to the file named by ``$TB_DIAGNOSTICS_PEAK_FILE`` at exit, even an
``os._exit``.
"""

from __future__ import annotations

import atexit
import os
import resource
import runpy
import sys


def peak_mib() -> float:
    own = 0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                own = int(line.split()[1])
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024


def _write_peak() -> None:
    path = os.environ.get("TB_DIAGNOSTICS_PEAK_FILE")
    if path:
        with open(path, "w") as fh:
            fh.write(f"{peak_mib():.1f}\n")


def main() -> None:
    atexit.register(_write_peak)
    real_exit = os._exit

    def exit_with_peak(code: int) -> None:
        _write_peak()
        real_exit(code)

    os._exit = exit_with_peak
    mode, target, *rest = sys.argv[1:]
    if mode == "-m":
        sys.argv = [target, *rest]
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    elif mode == "-c":
        sys.argv = ["-c", *rest]
        exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})
    else:
        raise SystemExit(f"usage: _peak.py -m MODULE ARGS | -c CODE ARGS (not {mode!r})")


if __name__ == "__main__":
    main()
