"""Coverage-guided fuzzing of the trace parser and the step analysis (atheris / libFuzzer).

    python fuzz/fuzz_trace.py -atheris_runs=20000 fuzz/corpus

Any exception other than :class:`TraceLoadError` is a bug: atheris reports it with the input
that caused it. The seed corpus (``fuzz/corpus/``) holds small valid traces of each format
generation; CI runs a short, bounded session.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from tb_diagnostics.analysis import SpanAnalysis
    from tb_diagnostics.errors import TraceLoadError
    from tb_diagnostics.trace import load_trace_bytes


def test_one_input(data: bytes) -> None:
    try:
        model = load_trace_bytes(data, "fuzz.json")
    except TraceLoadError:
        return
    for w in SpanAnalysis(model).windows:
        if not (w.device_busy_us <= w.wall_us + 1e-6):
            raise AssertionError(f"busy {w.device_busy_us} > wall {w.wall_us}")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
