"""Shared machinery of the dtype tests: inputs of every dtype, and running many small
programs as ONE traced program per device, each compared with PyTorch.

A case is ``(name, fn, arrays)``: ``fn`` takes tensors (``autodiff`` or ``torch``, made
from ``arrays``) and returns one tensor. :func:`check_cases` traces every case into one
program, executes it once on the device, runs the same functions on torch (CPU), and
compares dtype and values; a case torch rejects (it raises) must raise here too, at trace
time.
"""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import torch

import autodiff as ad

DTYPES = ["bool", "int32", "int64", "float32", "float16", "bfloat16"]
TORCH = {"bool": torch.bool, "int32": torch.int32, "int64": torch.int64,
         "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
NUMPY = {"bool": np.bool_, "int32": np.int32, "int64": np.int64, "float32": np.float32,
         "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
#: relative tolerance per result dtype: a few ulps where torch computes a transcendental
#: differently (both compute 16-bit floats in float32 and round once)
RTOL = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


def sample(dtype: str, shape, rng, nonzero: bool = False, positive: bool = False):
    """Random values of ``dtype``: bools, integers in [-9, 9], floats in [-3, 3] (rounded
    to the dtype; with fractional parts, so casts truncate and round)."""
    if dtype == "bool":
        return np.ones(shape, bool) if nonzero else rng.random(shape) < 0.5
    if dtype in ("int32", "int64"):
        lo = 1 if positive else -9
        v = rng.integers(lo, 10, shape)
        if nonzero:
            v[v == 0] = 3
        return v.astype(NUMPY[dtype])
    v = rng.uniform(0.1 if positive else -3, 3, shape)
    if nonzero:
        v[np.abs(v) < 0.1] = 0.5
    return v.astype(np.float32).astype(NUMPY[dtype])


def torch_tensor(a: np.ndarray) -> torch.Tensor:
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.astype(np.float32)).bfloat16()
    return torch.from_numpy(np.array(a))


def torch_numpy(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.float().numpy().astype(ml_dtypes.bfloat16)
    return t.numpy()


def _ours(cases, device, pack: bool = False):
    outs = {}
    for name, fn, arrays in cases:
        try:
            outs[name] = fn(*[ad.Tensor(a) for a in arrays])
        except (TypeError, RuntimeError, OverflowError) as e:
            outs[name] = e
    groups: dict = {}
    if pack:        # one output (and so one fused kernel) per result dtype
        for name, t in outs.items():
            if not isinstance(t, Exception) and t.numel():
                groups.setdefault(t.dtype, []).append(name)
        packed = {dt: ad.cat([outs[n].reshape(-1) for n in names])
                  for dt, names in groups.items()}
        shapes = {n: outs.pop(n).shape for names in groups.values() for n in names}
    ad.execute(device=device)       # the packed cases are no outputs of their own
    res = {k: v if isinstance(v, Exception) else v.numpy() for k, v in outs.items()}
    for dt, names in groups.items():
        flat, at = packed[dt].numpy(), 0
        for n in names:
            size = int(np.prod(shapes[n]))
            res[n] = flat[at:at + size].reshape(shapes[n])
            at += size
    return res


def check_cases(cases, device: str = "numpy", exact: bool = False, pack: bool = False) -> int:
    """Run ``cases`` on ``device`` in one program and compare each with torch.

    ``pack``: concatenate the (flattened) results of one dtype into one output, so that a
    device compiles one fused kernel per result dtype instead of one kernel per case (cold
    OpenCL builds cost about 0.1 s per kernel).

    Returns the number of cases torch accepts (so callers can assert the table is not
    all errors).
    """
    ours = _ours(cases, device, pack)
    ran = 0
    for name, fn, arrays in cases:
        try:
            with torch.no_grad():
                ref = fn(*[torch_tensor(a) for a in arrays])
        except (TypeError, RuntimeError) as e:
            assert isinstance(ours[name], Exception), \
                f"{name}: torch raises {type(e).__name__} ({e}), autodiff does not"
            continue
        got = ours[name]
        if isinstance(got, Exception):
            raise AssertionError(f"{name}: autodiff raises {got!r}, torch gives {ref.dtype}")
        want = torch_numpy(ref)
        assert got.dtype == want.dtype, f"{name}: dtype {got.dtype}, torch {want.dtype}"
        assert got.shape == want.shape, f"{name}: shape {got.shape}, torch {want.shape}"
        if got.dtype.kind in "biu" or exact:
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=RTOL[str(got.dtype)], atol=1e-6, err_msg=name)
        ran += 1
    return ran


# -- case tables (each runs as one program; the devices run them too) ---------------------
BINARY = {
    "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
    "truediv": lambda x, y: x / y, "floordiv": lambda x, y: x // y,
    "mod": lambda x, y: x % y, "pow": lambda x, y: x ** y,
    "maximum": lambda x, y: x.maximum(y), "minimum": lambda x, y: x.minimum(y),
    "lt": lambda x, y: x < y, "le": lambda x, y: x <= y, "gt": lambda x, y: x > y,
    "ge": lambda x, y: x >= y, "eq": lambda x, y: x == y, "ne": lambda x, y: x != y,
    "and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y,
    "lshift": lambda x, y: x << y, "rshift": lambda x, y: x >> y,
    "fmod": lambda x, y: x.fmod(y),
}
UNARY = {
    "neg": lambda x: -x, "abs": lambda x: x.abs(), "sign": lambda x: x.sign(),
    "relu": lambda x: x.relu(), "exp": lambda x: x.exp(), "log": lambda x: x.abs().log(),
    "sqrt": lambda x: x.abs().sqrt(), "sigmoid": lambda x: x.sigmoid(),
    "tanh": lambda x: x.tanh(), "sin": lambda x: x.sin(), "erf": lambda x: x.erf(),
    "reciprocal": lambda x: x.reciprocal(), "square": lambda x: x.square(),
    "invert": lambda x: ~x, "float": lambda x: x.float(), "long": lambda x: x.long(),
    "bool": lambda x: x.bool(), "half": lambda x: x.half(), "bf16": lambda x: x.bfloat16(),
    "floor": lambda x: x.floor(), "round": lambda x: x.round(), "trunc": lambda x: x.trunc(),
}
#: dtype pairs that take every promotion path once (same dtype, bool/int, int/int,
#: int/float, half/float, half/bfloat16)
PAIRS = [(d, d) for d in DTYPES] + [("int32", "int64"), ("bool", "int32"),
                                    ("int32", "float32"), ("float16", "float32"),
                                    ("bfloat16", "float16"), ("int64", "bfloat16")]


def _lib(x):
    return ad if isinstance(x, ad.Tensor) else torch


def _dt(x, name):
    return getattr(ad, name) if isinstance(x, ad.Tensor) else TORCH[name]


def binary_cases(pairs, ops=BINARY, shape=(2, 5), seed=0):
    """Every op of ``ops`` on every dtype pair; divisors and shift counts kept where
    PyTorch does not raise (no integer division by zero) or is undefined, exponents >= 0
    (negative integer exponents: :func:`int_pow_cases`)."""
    rng = np.random.default_rng(seed)
    cases = []
    for (da, db), (name, fn) in itertools.product(pairs, ops.items()):
        x = sample(da, shape, rng)
        y = sample(db, shape[-1:], rng, nonzero=name in ("floordiv", "mod", "fmod", "truediv"),
                   positive=name in ("pow", "lshift", "rshift"))
        if name in ("lshift", "rshift") and y.dtype.kind in "iu":
            y = (y % 8).astype(y.dtype)
        cases.append((f"{name}:{da},{db}", fn, [x, y]))
    return cases


def unary_cases(dts=DTYPES, seed=2):
    rng = np.random.default_rng(seed)
    return [(f"{name}:{d}", fn, [sample(d, (3, 4), rng)])
            for d in dts for name, fn in UNARY.items()]


def scalar_cases(seed=1):
    """Weak operands: 0-d tensors and Python scalars against tensors of every dtype."""
    rng = np.random.default_rng(seed)
    cases = []
    for a, b in itertools.product(DTYPES, repeat=2):
        x, z = sample(a, (3,), rng), sample(b, (), rng, nonzero=True)
        cases.append((f"add0d:{a},{b}", lambda x, z: x + z, [x, z]))
        cases.append((f"mul0d:{a},{b}", lambda x, z: z * x, [x, z]))
        cases.append((f"lt0d:{a},{b}", lambda x, z: x < z, [x, z]))
    for a, s in itertools.product(DTYPES, [True, 2, 2.5, 3.1]):
        x = sample(a, (4,), rng)
        cases += [(f"radd:{a},{s}", lambda x, s=s: s + x, [x]),
                  (f"mul:{a},{s}", lambda x, s=s: x * s, [x]),
                  (f"div:{a},{s}", lambda x, s=s: x / s, [x]),
                  (f"rsub:{a},{s}", lambda x, s=s: s - x, [x]),
                  (f"ge:{a},{s}", lambda x, s=s: x >= s, [x]),
                  (f"where:{a},{s}", lambda x, s=s: _lib(x).where(x > 0, x, s), [x])]
    return cases


def int_division_cases():
    a = np.array([7, -7, 7, -7, 0, 1, -1, 9, -9, 2**31 - 1, -2**31], np.int32)
    b = np.array([2, 2, -2, -2, 3, -3, 3, -4, 4, 7, 5], np.int32)
    return [("floordiv", lambda x, y: x // y, [a, b]), ("mod", lambda x, y: x % y, [a, b]),
            ("floordiv_scalar", lambda x: x // -3, [a]), ("rmod", lambda x: 100 % x, [b]),
            ("floordiv_i64", lambda x, y: x.long() // y, [a, b]),
            ("float_floordiv", lambda x, y: x.float() // (y.float() * 0.75), [a[:9], b[:9]]),
            ("float_mod", lambda x, y: x.float() % (y.float() * 0.75), [a[:9], b[:9]])]


def bitwise_cases():
    a = np.array([1, -7, 5, -1, 2**30, 12345], np.int32)
    n = np.array([0, 1, 31, 32, 40, -1], np.int32)
    return [("shl", lambda x, y: x << y, [a, n]), ("shr", lambda x, y: x >> y, [a, n]),
            ("and", lambda x: x & 6, [a]), ("or", lambda x: 6 | x, [a]),
            ("xor", lambda x: x ^ -1, [a]), ("not", lambda x: ~x, [a]),
            ("bool_not", lambda x: ~(x > 0), [a]), ("bool_xor", lambda x: (x > 0) ^ True, [a]),
            ("logical", lambda x: x.logical_and(x > 1) | x.logical_not(), [a])]


def int_pow_cases():
    a = np.array([2, -3, 1, -1, -1, 0, 7, 3, 3], np.int32)
    b = np.array([-1, -2, -5, -3, -4, 3, 2, 19, 21], np.int32)     # 3**21 wraps
    return [("pow", lambda x, y: x ** y, [a, b]), ("rpow", lambda x: 3 ** x, [b % 5])]


def cast_cases():
    """Every dtype pair on random values, and float values where truncation and rounding
    to nearest even decide."""
    half_ulp, bf_ulp = 2.0 ** -11, 2.0 ** -8          # half an ulp at 1
    f = np.array([2.7, -2.7, 0.5, -0.5, 1.0 + half_ulp, 1.0 + 3 * half_ulp, 1.0 + bf_ulp,
                  1.0 + 3 * bf_ulp, 65519.0, 65520.0, 1e-8, -0.0, np.inf, -np.inf],
                 np.float32)
    cases = [(f"f32->{d}", lambda x, d=d: x.to(_dt(x, d)),
              [f[:4] if d in ("int32", "int64") else f]) for d in DTYPES]
    rng = np.random.default_rng(5)
    cases += [(f"{a}->{b}", lambda x, b=b: x.to(_dt(x, b)), [sample(a, (6,), rng)])
              for a, b in itertools.product(DTYPES, repeat=2)]
    return cases


def reduction_cases(seed=6):
    rng = np.random.default_rng(seed)
    cases = []
    for d in DTYPES:
        x = sample(d, (3, 4), rng)
        cases += [(f"sum:{d}", lambda x: x.sum(), [x]), (f"sum0:{d}", lambda x: x.sum(0), [x]),
                  (f"amax:{d}", lambda x: x.amax(1), [x]),
                  (f"amin:{d}", lambda x: x.amin(0), [x]),
                  (f"max_dim:{d}", lambda x: x.max(1).values, [x]),
                  (f"min_dim:{d}", lambda x: x.min(0).values, [x]),
                  (f"argmax:{d}", lambda x: x.max(1).indices, [x]),
                  (f"argmin:{d}", lambda x: x.min(1).indices, [x])]
        if d != "bool":
            cases.append((f"max_all:{d}", lambda x: x.max(), [x]))
            cases.append((f"matmul:{d}", lambda x: x @ x.T, [x]))
    ints = np.array([[2**31 - 1, -2**31, 5], [-2**31, 0, 7]], np.int32)
    cases.append(("amin_extremes", lambda x: x.amin(1), [ints]))
    return cases


def where_cases(dts=DTYPES, seed=7):
    rng = np.random.default_rng(seed)
    c = rng.random((3, 4)) < 0.5
    return [(f"where:{a},{b}", lambda m, x, y: _lib(m).where(m, x, y),
             [c, sample(a, (3, 4), rng), sample(b, (4,), rng)])
            for a, b in itertools.product(dts, repeat=2)]


def zero_size_cases(seed=8):
    rng = np.random.default_rng(seed)
    cases = []
    for d in DTYPES:
        for shape in [(0,), (2, 0), ()]:
            x = sample(d, shape, rng)
            cases += [(f"cast:{d}{shape}", lambda x: x.float() + 1, [x]),
                      (f"eq:{d}{shape}", lambda x: x == x, [x]),
                      (f"sum:{d}{shape}", lambda x: x.sum(), [x])]
    return cases


def grad_case(fn, device="numpy"):
    """``(our d sum(fn(x)) / dx, torch's)`` for a fixed float32 ``x``."""
    x_np = np.array([0.3, -1.7, 2.2, 0.9], np.float32)
    x = ad.tensor(x_np, requires_grad=True)
    fn(x).sum().backward()
    g = x.grad
    ad.execute(device=device)
    xt = torch.tensor(x_np, requires_grad=True)
    fn(xt).sum().backward()
    return g.numpy(), xt.grad.numpy()


GRADS = {
    "half_roundtrip": lambda x: (x.half() * 3.1).float() * x,
    "bf16_roundtrip": lambda x: (x.bfloat16() * 3.1).float() * x,
    "to_half_and_back": lambda x: x.to(_dt(x, "float16")).exp().float(),
    "int_cut": lambda x: x.int().float() * x + x.long().float(),
    "mask_from_compare": lambda x: (x > 0) * x + (x < 1).float() * x * x,
    "mixed_promotion": lambda x: x.half() + x,
}
