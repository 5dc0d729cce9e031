"""trace.name_match: the ids a pattern finds in one pass are those of a search per string."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from tb_diagnostics.trace.name_match import ids_matching, pattern_needles


class _Strings:
    """What ids_matching reads of a model: its string table (and a weak reference)."""

    def __init__(self, strings: list[str]) -> None:
        self.strings = strings


def _plain(strings: list[str], pattern: re.Pattern[str]) -> list[int]:
    return [i for i, s in enumerate(strings) if pattern.search(s)]


STRINGS = ["ProfilerStep#1", "ProfilerStep#12", "xProfilerStep#3", "ProfilerStep#4 ", "",
           "aten::mm", "aten::addmm", "Memcpy DtoH (Device -> Pageable)", "copy_kernel",
           "void at::native::CopyKernel", "two\nlines ProfilerStep#5", "ab", "a b", "b",
           "ncclKernel_AllReduce", "cudaLaunchKernel", "cuLaunchKernel", "  ", "\n", "é",
           "torch/cuda/__init__.py(12): synchronize"]

PATTERNS = [r"^ProfilerStep#(\d+)$", r"ProfilerStep", r"copy", r"^$", r"$", r"^", r"x*",
            r"\bb", r"\Bb", r"b\b", r"^a|b$", r"(?:cuda|cu)LaunchKernel", r"lines",
            r"^two", r"\s", r"[^a]", r"a\s*b", r"(?<=a)b", r"(?s)a.b", r"a.b", r"\Ab",
            r"b\Z", r"[a-c]+", r"(a)\1", r"^Memcpy DtoH \(Device -> Pageable\)",
            r"torch/cuda/__init__\.py\(\d+\): synchronize$", r"^nccl|ncclKernel", r"é"]


@pytest.mark.parametrize("text", PATTERNS)
@pytest.mark.parametrize("flags", [0, re.IGNORECASE])
def test_same_ids_as_a_search_per_string(text: str, flags: int) -> None:
    pattern = re.compile(text, flags)
    got = ids_matching(_Strings(STRINGS), pattern)
    assert got.dtype == np.int32 and not got.flags.writeable
    assert got.tolist() == _plain(STRINGS, pattern)


def test_the_literals_every_match_holds() -> None:
    def of(text: str, flags: int = 0) -> list[str] | None:
        return pattern_needles(re.compile(text, flags))

    assert of(r"^ProfilerStep#(\d+)$") == ["ProfilerStep#"]
    assert of(r"^nccl|^rccl|ncclKernel|ncclDevKernel") == ["nccl", "rccl"]
    assert of(r"^(?:cuda|hip)(?:Device|Stream|Event)Synchronize$|^(?:cuda|hip)Memcpy(?:2D)?$"
              ) == ["Memcpy", "Synchronize"]
    assert of(r"copy", re.IGNORECASE) == ["copy"]
    assert of(r"(?:ab)+c") == ["ab"]
    assert of(r"x\ny") == ["x"]  # no newline in a needle: it could span two strings
    for text in (r"\d+", r"a|\s", r"(?:ab)?", r"(?i:ab)", r"[ab]", r"(?=ab)", r"a*", r""):
        assert of(text) is None, text


def test_random_strings_and_patterns() -> None:
    rng = random.Random(7)
    alphabet = "ab #\n1:"
    strings = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 6)))
               for _ in range(400)]
    model = _Strings(strings)
    for text in (r"a", r"^a", r"a$", r"^$", r"b+#", r"\d", r"\bb", r"a|^1", r"#?",
                 r"(?:ab)+", r"[ab]{2}", r"1:$", r"\s", r"[^#]b", r"a\nb", r"b\n", r"ab|a#",
                 r"(?i)A B", r"(?:a|b)#1"):
        pattern = re.compile(text)
        assert ids_matching(model, pattern).tolist() == _plain(strings, pattern), text


def test_kept_per_model_and_pattern() -> None:
    model = _Strings(["aten::mm", "aten::bmm"])
    first = ids_matching(model, re.compile("bmm"))
    assert ids_matching(model, re.compile("bmm")) is first
    assert ids_matching(_Strings([]), re.compile("bmm")).tolist() == []
