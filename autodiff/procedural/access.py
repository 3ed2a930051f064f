"""Access expressions: integer index algebra over loop and work-item index variables.

Every kernel operand and result of the procedural IR is a buffer plus an access expression
giving the flat element offset as a function of the kernel's index variables. View ops of the
graph IR (reshape, permute, expand, slice, pad, concat) become arithmetic here instead of
copies. Nodes are small frozen dataclasses (structural equality, hashable); the Python
operators ``+ - * // %`` build raw nodes and :func:`simplify` canonicalizes them.

Semantics: all values are Python ints (or numpy int64 arrays in :func:`evaluate`); ``//`` and
``%`` are floor division and floor modulo with a positive constant divisor (as in Python and
numpy; equal to C's ``/`` and ``%`` for the non-negative operands lowering produces outside
guarded branches). Conditions (:class:`Lt`, :class:`And`) evaluate to 0 or 1.

The printed form keeps the original project's readability: ``((Y * 255) + X)``.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from functools import reduce as _reduce

import numpy as np


class Expr:
    """Base class of access expressions. Operators build raw (unsimplified) nodes."""

    __slots__ = ()

    def __add__(self, o): return Add(self, _e(o))
    def __radd__(self, o): return Add(_e(o), self)
    def __sub__(self, o): return Add(self, Mul(_e(o), Num(-1)))
    def __rsub__(self, o): return Add(_e(o), Mul(self, Num(-1)))
    def __mul__(self, o): return Mul(self, _e(o))
    def __rmul__(self, o): return Mul(_e(o), self)
    def __neg__(self): return Mul(self, Num(-1))
    def __floordiv__(self, o): return Div(self, _e(o))
    def __mod__(self, o): return Mod(self, _e(o))

    def __str__(self) -> str:
        return render(self)


@dataclass(frozen=True, eq=True, repr=False)
class Num(Expr):
    """An integer constant."""
    value: int

    def __repr__(self): return f"Num({self.value})"


@dataclass(frozen=True, eq=True, repr=False)
class Var(Expr):
    """An index variable with ``0 <= var < extent`` (a work-item index or a loop counter)."""
    name: str
    extent: int

    def __repr__(self): return f"Var({self.name}<{self.extent})"


@dataclass(frozen=True, eq=True, repr=False)
class Add(Expr):
    a: Expr
    b: Expr

    def __repr__(self): return f"Add({self.a!r}, {self.b!r})"


@dataclass(frozen=True, eq=True, repr=False)
class Mul(Expr):
    a: Expr
    b: Expr

    def __repr__(self): return f"Mul({self.a!r}, {self.b!r})"


@dataclass(frozen=True, eq=True, repr=False)
class Div(Expr):
    """Floor division by a positive constant."""
    a: Expr
    b: Expr

    def __repr__(self): return f"Div({self.a!r}, {self.b!r})"


@dataclass(frozen=True, eq=True, repr=False)
class Mod(Expr):
    """Floor modulo by a positive constant (result in ``[0, b)``)."""
    a: Expr
    b: Expr

    def __repr__(self): return f"Mod({self.a!r}, {self.b!r})"


@dataclass(frozen=True, eq=True, repr=False)
class Lt(Expr):
    """Condition ``a < b`` (1 or 0)."""
    a: Expr
    b: Expr

    def __repr__(self): return f"Lt({self.a!r}, {self.b!r})"


@dataclass(frozen=True, eq=True, repr=False)
class And(Expr):
    """Condition ``a and b`` of two conditions (1 or 0)."""
    a: Expr
    b: Expr

    def __repr__(self): return f"And({self.a!r}, {self.b!r})"


def cached_hash(cls: type):
    """A ``__hash__`` for frozen dataclass ``cls`` that hashes its fields once and keeps the
    value on the object: the generated ``__hash__`` of a tree of such nodes walks the whole
    tree at every lookup (quadratic in the tree's size when the nodes of one tree go into a
    set). The fields are read by one ``operator.attrgetter`` (the per-field ``getattr`` of
    a generator was a third of the rendering's hashing)."""
    tag = cls.__name__
    fields = operator.attrgetter(*cls.__dataclass_fields__)
    single = len(cls.__dataclass_fields__) == 1

    def __hash__(self) -> int:
        try:
            return self._h
        except AttributeError:
            h = hash((tag, fields(self)) if single else (tag,) + fields(self))
            object.__setattr__(self, "_h", h)
            return h
    return __hash__


for _cls in (Num, Var, Add, Mul, Div, Mod, Lt, And):   # hash once per node, not per lookup
    _cls.__hash__ = cached_hash(_cls)


def _e(x) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, (int, np.integer)):
        return Num(int(x))
    raise TypeError(f"not an access expression: {x!r}")


def ge(a, b) -> Expr:
    """Condition ``a >= b`` for integer expressions (built as ``b < a + 1``)."""
    return Lt(_e(b), _e(a) + 1)


# -- queries --------------------------------------------------------------------------
def variables(e: Expr) -> set[Var]:
    """The index variables ``e`` depends on."""
    if isinstance(e, Var):
        return {e}
    if isinstance(e, Num):
        return set()
    return variables(e.a) | variables(e.b)


def bounds(e: Expr) -> tuple[int, int]:
    """Inclusive ``(lo, hi)`` of ``e`` over all variable values in range (conservative)."""
    if isinstance(e, Num):
        return e.value, e.value
    if isinstance(e, Var):
        return 0, e.extent - 1
    if isinstance(e, (Lt, And)):
        return 0, 1
    alo, ahi = bounds(e.a)
    blo, bhi = bounds(e.b)
    if isinstance(e, Add):
        return alo + blo, ahi + bhi
    if isinstance(e, Mul):
        c = (alo * blo, alo * bhi, ahi * blo, ahi * bhi)
        return min(c), max(c)
    if isinstance(e, Div):
        if blo == bhi and blo > 0:
            return alo // blo, ahi // blo
        raise ValueError(f"division by a non-constant or non-positive divisor: {e!r}")
    if isinstance(e, Mod):
        if blo == bhi and blo > 0:
            if alo >= 0 and ahi < blo:
                return alo, ahi
            if alo // blo == ahi // blo:
                return alo % blo, ahi % blo
            return 0, blo - 1
        raise ValueError(f"modulo by a non-constant or non-positive divisor: {e!r}")
    raise TypeError(f"not an access expression: {e!r}")


def evaluate(e: Expr, env: dict):
    """Value of ``e`` with ``env``: Var (or var name) -> int or numpy integer array.

    Arrays broadcast; the result is an int or an int64 array.
    """
    if isinstance(e, Num):
        return e.value
    if isinstance(e, Var):
        return env[e] if e in env else env[e.name]
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    if isinstance(e, Add):
        return a + b
    if isinstance(e, Mul):
        return a * b
    if isinstance(e, Div):
        return a // b
    if isinstance(e, Mod):
        return a % b
    if isinstance(e, Lt):
        r = a < b
        return r.astype(np.int64) if isinstance(r, np.ndarray) else int(r)
    if isinstance(e, And):
        r = np.logical_and(a != 0, b != 0)
        return r.astype(np.int64) if isinstance(r, np.ndarray) else int(r)
    raise TypeError(f"not an access expression: {e!r}")


def substitute(e: Expr, mapping: dict) -> Expr:
    """``e`` with each Var in ``mapping`` replaced by the mapped expression (not simplified)."""
    if isinstance(e, Var):
        return _e(mapping[e]) if e in mapping else e
    if isinstance(e, Num):
        return e
    return type(e)(substitute(e.a, mapping), substitute(e.b, mapping))


_OPS = {Add: "+", Mul: "*", Div: "//", Mod: "%", Lt: "<", And: "&&"}


def render(e: Expr, div: str = "//") -> str:
    """Text form, fully parenthesized: ``((Y * 255) + X)``; ``div="/"`` gives C syntax."""
    if isinstance(e, Num):
        return str(e.value)
    if isinstance(e, Var):
        return e.name
    op = div if isinstance(e, Div) else _OPS[type(e)]
    return f"({render(e.a, div)} {op} {render(e.b, div)})"


# -- simplifier -----------------------------------------------------------------------
# A linear form is (dict atom -> int coefficient, int constant); atoms are Var, Div, Mod,
# Lt, And or non-linear Mul nodes, already simplified.
def _lin(e: Expr) -> tuple[dict, int]:
    if isinstance(e, Num):
        return {}, e.value
    if isinstance(e, Add):
        ta, ca = _lin(e.a)
        tb, cb = _lin(e.b)
        t = dict(ta)
        for k, v in tb.items():
            t[k] = t.get(k, 0) + v
        return _fold_divmod({k: v for k, v in t.items() if v}, ca + cb)
    if isinstance(e, Mul):
        ta, ca = _lin(e.a)
        tb, cb = _lin(e.b)
        if not tb:
            return {k: v * cb for k, v in ta.items() if v * cb}, ca * cb
        if not ta:
            return {k: v * ca for k, v in tb.items() if v * ca}, ca * cb
        return {Mul(_build(ta, ca), _build(tb, cb)): 1}, 0
    atom = _simplify_atom(e)
    if isinstance(atom, Num):
        return {}, atom.value
    if isinstance(atom, (Add, Mul)):
        return _lin(atom)
    return {atom: 1}, 0


def _fold_divmod(terms: dict, const: int) -> tuple[dict, int]:
    """``(y // k) * (a*k) + (y % k) * a -> y * a`` (the identity ``y = (y//k)*k + y%k``)."""
    while True:
        for atom, a in terms.items():
            if isinstance(atom, Mod) and isinstance(atom.b, Num):
                k = atom.b.value
                d = Div(atom.a, atom.b)
                if d not in terms and isinstance(atom.a, Div) and isinstance(atom.a.b, Num):
                    d = Div(atom.a.a, Num(atom.a.b.value * k))    # (z // m) // k = z // (m*k)
                if terms.get(d) == a * k:
                    rest = {x: c for x, c in terms.items() if x != atom and x != d}
                    yt, yc = _lin(atom.a)
                    for x, c in yt.items():
                        rest[x] = rest.get(x, 0) + c * a
                    terms, const = {x: c for x, c in rest.items() if c}, const + yc * a
                    break
        else:
            return terms, const


def _drop_small(terms: dict, const: int, c: int):
    """Split off terms too small to matter for ``// c`` and ``% c``.

    Returns ``(big, bconst, small, g)`` with ``x = big + bconst + small``, every coefficient
    of ``big`` and ``bconst`` a multiple of ``g``, ``g`` dividing ``c`` and
    ``0 <= small < g``; or None when no such split with ``g > 1`` exists.
    """
    items = sorted(terms.items(), key=lambda kv: abs(kv[1]))
    for cut in range(len(items), -1, -1):
        big, small = dict(items[cut:]), dict(items[:cut])
        g = _reduce(math.gcd, list(big.values()) + [c])
        if g <= 1:
            continue
        bconst, sconst = (const // g) * g, const % g
        lo, hi = _lin_bounds(small, sconst)
        if lo >= 0 and hi < g:
            return big, bconst, small, sconst, g
    return None


def _order(item):
    atom, coef = item
    return (-abs(coef), render(atom))


def _build(terms: dict, const: int) -> Expr:
    out: Expr | None = None
    for atom, coef in sorted(terms.items(), key=_order):
        t = atom if coef == 1 else Mul(atom, Num(coef))
        out = t if out is None else Add(out, t)
    if out is None:
        return Num(const)
    return Add(out, Num(const)) if const else out


def _lin_bounds(terms: dict, const: int) -> tuple[int, int]:
    lo = hi = const
    for atom, coef in terms.items():
        a, b = bounds(atom)
        lo += min(a * coef, b * coef)
        hi += max(a * coef, b * coef)
    return lo, hi


def _divmod(terms: dict, const: int, c: int):
    """Split ``x = Q*c + R``: returns (Q terms, Q const, R terms, R const), with ``R >= 0``
    for every variable value in range (a multiple of ``c`` moves from ``R`` to ``Q`` when
    negative coefficients would let ``R`` go below 0), so that C's truncating ``/`` and
    ``%`` agree with floor semantics on what the renderers emit."""
    q = {k: v // c for k, v in terms.items() if v % c == 0}
    r = {k: v for k, v in terms.items() if v % c != 0}
    qc, rc = const // c, const % c
    lo, _ = _lin_bounds(r, rc)
    if lo < 0:
        k = -(lo // c)
        qc, rc = qc - k, rc + k * c
    return q, qc, r, rc


def _simplify_atom(e: Expr) -> Expr:
    if isinstance(e, Var):
        return e
    out = _ATOMS.get(e)
    if out is None:
        out = _simplify_atom_uncached(e)
        if len(_ATOMS) >= _CACHE_MAX:
            _ATOMS.clear()
        _ATOMS[e] = out
    return out


_ATOMS: dict = {}


def _simplify_atom_uncached(e: Expr) -> Expr:
    if isinstance(e, (Lt, And)):
        a, b = simplify(e.a), simplify(e.b)
        if isinstance(e, Lt):
            lo, hi = bounds(simplify(a - b))
            if hi < 0:
                return Num(1)
            if lo >= 0:
                return Num(0)
            return Lt(a, b)
        if isinstance(a, Num) and isinstance(b, Num):
            return Num(int(bool(a.value) and bool(b.value)))
        if isinstance(a, Num):
            return b if a.value else Num(0)
        if isinstance(b, Num):
            return a if b.value else Num(0)
        return And(a, b)
    c = simplify(e.b)
    if not isinstance(c, Num) or c.value <= 0:
        raise ValueError(f"divisor must be a positive constant: {e!r}")
    c = c.value
    x = simplify(e.a)
    terms, const = _lin(x)
    if isinstance(e, Div):
        if c == 1:
            return x
        split = _drop_small(terms, const, c)
        if split is not None and (split[2] or split[3]):  # (R + S) // c = R // c
            big, bconst, _, _, g = split
            return simplify(Div(_build(big, bconst), Num(c)))
        q, qc, r, rc = _divmod(terms, const, c)
        lo, hi = _lin_bounds(r, rc)
        if lo // c == hi // c:
            return _build(q, qc + lo // c)
        g = _reduce(math.gcd, list(r.values()) + [rc, c])
        if g > 1:
            rest = _simplify_atom(Div(_build({k: v // g for k, v in r.items()}, rc // g),
                                      Num(c // g)))
        elif len(r) == 1 and rc == 0 and isinstance(next(iter(r)), Div) \
                and r[next(iter(r))] == 1 and isinstance(next(iter(r)).b, Num):
            inner = next(iter(r))          # (y // a) // c -> y // (a * c)
            rest = _simplify_atom(Div(inner.a, Num(inner.b.value * c)))
        else:
            rest = Div(_build(r, rc), Num(c))
        if q or qc:
            return simplify(Add(_build(q, qc), rest))
        return rest
    # Mod
    if c == 1:
        return Num(0)
    split = _drop_small(terms, const, c)
    if split is not None and (split[2] or split[3]):      # (R + S) % c = R % c + S
        big, bconst, small, sconst, g = split
        return simplify(Add(Mod(_build(big, bconst), Num(c)), _build(small, sconst)))
    _, _, r, rc = _divmod(terms, const, c)
    lo, hi = _lin_bounds(r, rc)
    if lo // c == hi // c:
        return _build(r, rc - (lo // c) * c)
    if len(r) == 1 and rc == 0:
        atom, coef = next(iter(r.items()))
        if coef == 1 and isinstance(atom, Mod) and isinstance(atom.b, Num) \
                and atom.b.value % c == 0:
            return _simplify_atom(Mod(atom.a, Num(c)))   # (y % (k*c)) % c -> y % c
    g = _reduce(math.gcd, list(r.values()) + [rc, c])
    if g > 1:
        inner = _simplify_atom(Mod(_build({k: v // g for k, v in r.items()}, rc // g),
                                   Num(c // g)))
        return simplify(Mul(inner, Num(g)))
    return Mod(_build(r, rc), Num(c))


_CACHE: dict = {}
_CACHE_MAX = 1 << 17


def simplify(e) -> Expr:
    """Canonical, equivalent form of ``e`` for every variable value in range.

    Rules: constants fold; sums collect into ``coef * atom`` terms (largest coefficient
    first); ``(Q*c + R) // c -> Q + R // c`` and ``(Q*c + R) % c -> R % c``, dropping the
    ``// c`` or ``% c`` when the bounds of ``R`` show it lies in one multiple of ``c``;
    common factors cancel; ``(y // a) // b -> y // (a*b)``; ``(y % (k*c)) % c -> y % c``;
    conditions decided by bounds fold to 0 or 1.

    Raises:
        ValueError: a ``//`` or ``%`` whose divisor is not a positive constant.
    """
    e = _e(e)
    if isinstance(e, (Num, Var)):
        return e
    out = _CACHE.get(e)
    if out is None:
        terms, const = _lin(e)
        out = _build(terms, const)
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[e] = out
        _CACHE[out] = out
    return out


# -- helpers for lowering ---------------------------------------------------------------
def strides(shape) -> tuple[int, ...]:
    """Row-major (C order) element strides of ``shape``."""
    out, s = [], 1
    for d in reversed(tuple(shape)):
        out.append(s)
        s *= int(d)
    return tuple(reversed(out))


def flat(idx, shape) -> Expr:
    """Row-major flat offset of the multi-index ``idx`` (expressions) into ``shape``.

    The same expression as ``simplify(sum(idx[d] * stride[d]))``, built from the linear
    forms of the (simplified) indices directly instead of a raw tree: lowering calls this
    once per operand, so it must not rebuild and rehash whole expressions.
    """
    terms: dict = {}
    const = 0
    for i, s, d in zip(idx, strides(shape), shape):
        if d == 1:
            continue
        i = _e(i)
        if isinstance(i, Var):
            ti, ci = {i: 1}, 0
        elif isinstance(i, Num):
            ti, ci = {}, i.value
        else:
            ti, ci = _lin(simplify(i))
        if not ti:
            const += ci * s
            continue
        merged = dict(terms)
        for k, v in ti.items():
            merged[k] = merged.get(k, 0) + v * s
        terms, const = _fold_divmod({k: v for k, v in merged.items() if v}, const + ci * s)
    return _build(terms, const)


def unflat(offset, shape) -> list[Expr]:
    """Multi-index (simplified expressions) of the row-major flat ``offset`` into ``shape``."""
    offset = _e(offset)
    return [Num(0) if d == 1 else simplify((offset // s) % d)
            for s, d in zip(strides(shape), shape)]


_NAMES = "XYZWVUTS"


def space_vars(shape, prefix: str = "") -> tuple[Var, ...]:
    """One index variable per dim of ``shape``: the innermost is ``X``, then ``Y``, ``Z``, ...

    Dims past eight are named ``i8``, ``i9``, ...; ``prefix`` is prepended to each name.
    """
    n = len(shape)
    names = [_NAMES[n - 1 - i] if n - 1 - i < len(_NAMES) else f"i{n - 1 - i}"
             for i in range(n)]
    return tuple(Var(prefix + nm, int(d)) for nm, d in zip(names, shape))
