"""Short names for demangled C++ kernel and function names.

A CUDA kernel's demangled name can run to hundreds of characters of return
type, template arguments and parameter list::

    void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float,
        at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)

What a person reads is the function's own name with its namespaces:
``at::native::cunn_SoftMaxForward``. The parse counts brackets (``<>``,
``()``, ``{}``, ``[]``), so the parentheses of ``(anonymous namespace)``
or of a lambda inside a template argument never cut the name short, and
names that are no C++ signature ("Memcpy HtoD (Pageable -> Device)",
``aten::add``, ``volta_sgemm_128x64_nn``) are kept as they are.
"""

from __future__ import annotations

_OPEN = {"<": ">", "(": ")", "{": "}", "[": "]"}
_CLOSE = {v: k for k, v in _OPEN.items()}
_ANON = "(anonymous namespace)::"
#: Own names that say nothing without their first template argument
#: (``cutlass::Kernel<cutlass_80_tensorop_s1688gemm_…>``).
_GENERIC = frozenset({"Kernel", "Kernel2", "kernel", "device_kernel", "kernel_entry"})


def _ident(c: str) -> bool:
    return c.isalnum() or c in "_$~"


def _match_back(s: str, end: int) -> int:
    """Index of the bracket opening the one that closes at ``s[end]``, or -1."""
    depth: list[str] = []
    for i in range(end, -1, -1):
        c = s[i]
        if c in _CLOSE:
            depth.append(c)
        elif c in _OPEN:
            if not depth or _OPEN[c] != depth[-1]:
                # "->" inside a template argument, say: not a bracket pair we can trust.
                if c == "<":
                    continue
                return -1
            depth.pop()
            if not depth:
                return i
    return -1


def _top_level(s: str) -> list[tuple[int, str]]:
    """(index, char) of the characters of ``s`` outside every bracket pair."""
    out = []
    stack: list[str] = []
    for i, c in enumerate(s):
        if c in _OPEN:
            stack.append(_OPEN[c])
            continue
        if stack and c == stack[-1]:
            stack.pop()
            continue
        if not stack:
            out.append((i, c))
    return out


def _strip_templates(s: str) -> str | None:
    """``s`` without its bracketed template arguments, or None when they do not balance."""
    out = []
    depth = 0
    for c in s:
        if c == "<":
            depth += 1
        elif c == ">":
            if depth == 0:
                return None
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out) if depth == 0 else None


def _first_template_arg(s: str) -> str | None:
    """The first top-level template argument of ``s`` (a name), shortened."""
    i = s.find("<")
    if i < 0:
        return None
    depth = 0
    for j in range(i + 1, len(s)):
        c = s[j]
        if c in "<({[":
            depth += 1
        elif c in ">)}]":
            if depth == 0:
                arg = s[i + 1:j]
                break
            depth -= 1
        elif c == "," and depth == 0:
            arg = s[i + 1:j]
            break
    else:
        return None
    arg = shorten_name(arg.strip(), width=0)
    # "int", "float", "4": a plain type or number names nothing.
    return arg if len(arg) > 8 and any(c.isalpha() for c in arg) else None


def shorten_name(name: str, width: int = 60) -> str:
    """The function's own name with its namespaces (see the module doc); ``width`` > 0
    drops leading namespaces until it fits, never the own name."""
    s = name.strip()
    if not s:
        return name
    core = s
    # The parameter list: a bracket pair at the end, opened right after a name or '>'.
    tail = core.removesuffix(" const")
    is_sig = False
    if tail.endswith(")"):
        j = _match_back(tail, len(tail) - 1)
        if j > 0 and (_ident(tail[j - 1]) or tail[j - 1] == ">"):
            core, is_sig = tail[:j], True
    if not is_sig and ("<" not in core or not core.rstrip().endswith(">")):
        return name
    # The return type: everything before the last space outside every bracket.
    spaces = [i for i, c in _top_level(core) if c == " "]
    if spaces:
        core = core[spaces[-1] + 1:]
    generic_arg = None
    bare = _strip_templates(core)
    if bare is None:
        return name
    bare = bare.replace(_ANON, "").strip()
    own = bare.rsplit("::", 1)[-1]
    if own in _GENERIC:
        generic_arg = _first_template_arg(core)
    if not own or bare.endswith("::") or not _ident(own[-1]):
        return name
    short = f"{bare}<{generic_arg}>" if generic_arg else bare
    if width > 0:
        parts = short.split("::")
        while len(parts) > 1 and len("::".join(parts)) > width:
            parts.pop(0)
        short = "::".join(parts)
    return short


def cut(s: str, width: int) -> str:
    """``s`` cut to ``width`` characters with an ellipsis (a table cell's cap)."""
    return s if len(s) <= width else s[: width - 1] + "…"


def short_name(name: str, width: int = 80) -> str:
    """A long (templated kernel) name as its own name with namespaces, cut to ``width``
    characters if still longer: what a message or a table cell shows."""
    return cut(shorten_name(name, width), width)
