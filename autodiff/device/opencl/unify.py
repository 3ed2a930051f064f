"""Kernel bodies that differ only in int literals become one body with those literals as
arguments (anti-unification, Plotkin 1970: the most specific body both are instances of).

Rendering already shares a body between statements of one structure (their offsets are
arguments, :class:`~autodiff.device.cstyle.codegen.Args`), and between kernels of one code
over spaces of other extents (:meth:`~autodiff.device.cstyle.codegen.Args.size`). What
stays distinct are bodies whose sizes reach into their code: a weight gradient's row
stride in its epilogue (``rr * 128`` against ``rr * 512``), the last row a transposing
pack clamps to, the id a checked gather records. Each distinct body costs PoCL its build
and its work-group compile (~20-50 ms of JIT per body on the main job: :mod:`.prejit`).

A literal becomes an argument only where that costs nothing measurable: outside every
loop (a loop bound or an index stride inside a loop is what vectorisation and unrolling
feed on), not a divisor (a division by a variable is a real division), not an array
length, not in a preprocessor line. A group whose differing literals are not all of that
kind stays as it is. The arguments are appended to each body's own (``p<n>_`` before
``g0``), each launch's values after its own.
"""
from __future__ import annotations

import dataclasses
import re

#: a token of a body: numbers (float literals whole, ints with a suffix as one token),
#: identifiers, white space, any other character
TOKEN = re.compile(r"\d+\.\d*(?:[eE][-+]?\d+)?f?|\d+[eE][-+]?\d+f?|0[xX][0-9a-fA-F]+\w*"
                   r"|\d+\w*|[A-Za-z_]\w*|\s+|.")

_DIGITS = re.compile(r"\d+")

#: most int parameters a unified body may have (each is a kernel argument of its dispatch
#: kernel and a word of each team-run table row)
MAX_PARAMS = 64


def unify(bodies: list, launches: dict) -> list:
    """``bodies`` (the distinct, non-work-group :class:`~.kernels.Source` s of a program,
    named, with ``params``) with each group differing only in liftable int literals merged
    into its first member; every Source in ``launches`` (``{launch: (small, [sources])}``)
    naming a merged body is rewritten in place to name the first, with the literals' values
    appended to its ``args``. Returns the bodies that remain, in order."""
    # candidates first, by the text with each run of digits blanked (one regex pass;
    # coarser than the token skeleton below, which then splits what differs elsewhere).
    # The local size does not matter: each launch's block function has its own, around
    # the one body (chain.block_name)
    near: dict = {}
    for b in bodies:
        if not b.whole:
            text = b.src.replace(b.name, "@")
            near.setdefault((_DIGITS.sub("#", text), len(b.global_size)), []) \
                .append((b, text))
    groups: dict = {}
    for key, found in near.items():
        if len(found) < 2:
            continue
        for b, text in found:
            toks = TOKEN.findall(text)
            skeleton = tuple("#" if t.isdigit() else t for t in toks)
            groups.setdefault((skeleton, key[1]), []).append((b, toks))
    into: dict = {}                     # merged body's name -> (new Source, its values)
    for members in groups.values():
        if len(members) < 2:
            continue
        toks = members[0][1]
        at = [i for i, t in enumerate(toks)
              if t.isdigit() and any(m[1][i] != t for m in members[1:])]
        first = members[0][0]
        if len(first.params) + len(at) > MAX_PARAMS or not liftable(toks, at):
            continue
        names = [f"p{len(first.params) + k}_" for k in range(len(at))]
        new = list(toks)
        for i, n in zip(at, names):
            new[i] = n
        head, brace, rest = "".join(new).replace("@", first.name).partition("{")
        head = head.replace("const int g0", ", ".join(
            [f"const int {n}" for n in names] + ["const int g0"]), 1)
        merged = dataclasses.replace(first, src=head + brace + rest,
                                     params=first.params + tuple(f"const int {n}"
                                                                 for n in names))
        for b, bt in members:
            into[b.name] = (merged, tuple(int(bt[i]) for i in at))
    if not into:
        return bodies
    for _, srcs in launches.values():
        for k, s in enumerate(srcs):
            hit = into.get(s.name)
            if hit is not None:
                m, values = hit
                # (the launch's own guard, touched ranges and sizes stay its own)
                srcs[k] = dataclasses.replace(s, name=m.name, src=m.src, params=m.params,
                                              args=tuple(s.args) + values)
    out, seen = [], set()
    for b in bodies:
        b = into[b.name][0] if b.name in into else b
        if b.name not in seen:
            seen.add(b.name)
            out.append(b)
    return out


def liftable(toks: list[str], at: list[int]) -> bool:
    """Whether every int literal at token positions ``at`` may become an argument: outside
    any ``for`` loop (header or body), not the right operand of ``/`` or ``%``, not an
    array length in a declaration nor a bare index (``c_[3]``: a private array indexed by
    a variable leaves the registers), not an argument of a ``__builtin_`` call (whose
    operands may have to be constants, as ``__builtin_shufflevector`` 's), not in a
    preprocessor line."""
    inside, calls = _in_loops(toks), _calls(toks)
    for i in at:
        if inside[i] or (calls[i] or "").startswith("__builtin_"):
            return False
        j, k = i - 1, i + 1
        while j >= 0 and toks[j].isspace():
            j -= 1
        while k < len(toks) and toks[k].isspace():
            k += 1
        if j >= 0 and toks[j] in ("/", "%"):
            return False
        if j >= 0 and k < len(toks) and toks[j] == "[" and toks[k] == "]":
            return False
        line = _line_before(toks, i)
        if line.lstrip().startswith("#") or re.search(r"\b\w+\s+\w+\s*\[\s*$", line):
            return False
    return True


def _line_before(toks: list[str], i: int) -> str:
    """The text of token ``i`` 's line before it (back to the last newline)."""
    j = i
    while j > 0 and "\n" not in toks[j - 1]:
        j -= 1
    return (toks[j - 1].rpartition("\n")[2] if j > 0 else "") + "".join(toks[j:i])


def _calls(toks: list[str]) -> list[str | None]:
    """Per token: the name of the innermost call whose parentheses hold it, or None."""
    out: list = [None] * len(toks)
    stack: list = []                    # per open parenthesis: the name called, or None
    last = None                         # the previous non-space token
    for i, t in enumerate(toks):
        if t == "(":
            name = last if last and (last[0].isalpha() or last[0] == "_") else None
            stack.append(name)
        elif t == ")" and stack:
            stack.pop()
        out[i] = next((n for n in reversed(stack) if n), None) if stack else None
        if not t.isspace():
            last = t
    return out


def _in_loops(toks: list[str]) -> list[bool]:
    """Per token: whether it is in a ``for`` or ``while`` header, or in the statement or
    block the loop runs (braces counted; a loop without braces runs to its ``;``)."""
    out = [False] * len(toks)
    scopes: list[bool] = []             # per open brace: whether a loop opened it
    header = 0                          # parentheses open in a loop header (-1: before)
    pending = False                     # a for header ended, its statement not yet
    for i, t in enumerate(toks):
        if t in ("for", "while") and not header:
            header, pending = -1, False
        if header:
            out[i] = True
            if t == "(":
                header = 1 if header < 0 else header + 1
            elif t == ")":
                header -= 1
                if header == 0:
                    pending = True
            continue
        if t == "{":
            scopes.append(pending)
            pending = False
        elif t == "}" and scopes:
            scopes.pop()
        out[i] = pending or any(scopes)
        if t == ";" and pending:
            pending = False
    return out
