"""Split one program's sources into parts that PoCL builds in parallel.

``clBuildProgram`` on PoCL 3.1 runs Clang's front end and -O2 pipeline over the whole
source on one core (the main job's training program: 1.5 s for 300 KB of OpenCL C), and
its kernels are compiled one after the other under one lock per process
(:mod:`.prejit`). Two programs built in two processes take half the time. A part holds the
kernels given to it and every function they call (their *closure*), found by name in the
sources; a function two parts call is in both. The parts balance their sources' sizes:
build and JIT time both grow with the code a part holds.
"""
from __future__ import annotations

import re

from ..cstyle.dialect import body_name
from ..cstyle.kernels import Source

#: an identifier followed by an opening parenthesis: a call, or the name of a definition
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


#: JIT seconds per character of a kernel's closure over build seconds per character of a
#: part (PoCL 3.1, the main job's training program: 0.29-0.70 s for dispatch kernels of
#: 27-61 thousand characters, about 9.5 ms per thousand; a part of ~150 thousand builds in
#: 0.55 s, 3.6 ms per thousand). With the parts balanced by their code alone, and the
#: shared tile loops and transposes the kernels call not counted (they are not sources of
#: the split: the caller adds them for the count, :func:`~.render.shared_functions`), the
#: helper's part held three kernels calling them: 1.6 s of JIT against this process's
#: 1.3; now 1.5 against 1.6
JIT_WEIGHT = 2.6


def callees(sources: list[Source]) -> dict[str, set[str]]:
    """For each source's name, the names of the other sources its text calls (a body's
    function is named ``<name>_body``: :func:`~autodiff.device.cstyle.dialect.body_name`)."""
    found = [[(m.start(), m[1]) for m in _CALL.finditer(s.src)] for s in sources]
    by_function = {}
    for s, calls in zip(sources, found):
        own = (s.name, body_name(s.name))
        by_function[next((f for _, f in calls if f in own), s.name)] = s.name
    out = {}
    for s, calls in zip(sources, found):
        brace = s.src.find("{")             # calls in the code, after the signature
        names = {by_function[f] for at, f in calls if at > brace and f in by_function}
        out[s.name] = names - {s.name}
    return out


def closure(name: str, calls: dict[str, set[str]]) -> set[str]:
    """``name`` and every source it calls, directly or not."""
    seen, todo = {name}, [name]
    while todo:
        for c in calls[todo.pop()]:
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


def split(sources: list[Source], kernels: list[str], parts: int) -> list[list[Source]]:
    """``sources`` (functions and kernels of one program, in program order) as ``parts``
    lists, each in program order: every kernel named in ``kernels`` is in exactly one part
    with its :func:`closure`; kernels go, largest closure first, to the part whose work
    grows least (greedy balancing). A part's work: the code it holds (its build) plus
    :data:`JIT_WEIGHT` times its kernels' closures (their JIT, which compiles a function
    that several kernels call once per kernel). A source no kernel reaches stays out; with
    ``parts == 1`` the list is ``sources`` itself.

    Raises:
        ValueError: ``parts`` < 1, or a kernel name that is not a source's.
    """
    if parts < 1:
        raise ValueError(f"split: parts must be at least 1, not {parts}")
    if parts == 1:
        return [list(sources)]
    size = {s.name: len(s.src) for s in sources}
    missing = [k for k in kernels if k not in size]
    if missing:
        raise ValueError(f"split: no source for kernels {missing}")
    calls = callees(sources)
    reach = {k: closure(k, calls) for k in kernels}
    code = {k: sum(size[n] for n in reach[k]) for k in kernels}
    held: list[set] = [set() for _ in range(parts)]
    jit = [0] * parts

    def cost(i: int, k: str) -> float:     # part i's build + JIT work with kernel k added
        return sum(size[n] for n in held[i] | reach[k]) + JIT_WEIGHT * (jit[i] + code[k])
    for k in sorted(kernels, key=lambda k: -code[k]):
        i = min(range(parts), key=lambda i: cost(i, k))
        held[i] |= reach[k]
        jit[i] += code[k]
    return [[s for s in sources if s.name in h] for h in held]
