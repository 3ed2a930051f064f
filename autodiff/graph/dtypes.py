"""Element types (``autodiff.float32``, ``autodiff.int64``, ...) and PyTorch's type promotion.

Six dtypes, each a :class:`DType` object that behaves like ``torch.dtype`` (``t.dtype ==
autodiff.float32``, ``repr`` ``autodiff.float32``) and also compares equal to its name
(``t.dtype == "float32"``). The graph IR stores the plain name (``Node.dtype`` is a ``str``).

======== =================== ============================= =====================
dtype    host value (numpy)  device storage                arithmetic
======== =================== ============================= =====================
bool     ``bool``            1 byte, 0 or 1                int 0/1
int32    ``int32``           int32                         int32 (wraps)
int64    ``int64``           **int32**, range-checked      int32 (wraps)
float32  ``float32``         float32                       float32
float16  ``float16``         IEEE half (2 bytes)           float32, rounded to half
bfloat16 ``ml_dtypes``       bfloat16 (2 bytes)            float32, rounded to bfloat16
======== =================== ============================= =====================

``int64`` is stored as int32 on every device (the numpy reference included, so devices agree
bit for bit): values entering the program (tensor creation, Feeders, Python constants) must
lie in ``[-2**31, 2**31)`` or raise :class:`OverflowError`, and results wrap at 32 bits.
``float16``/``bfloat16`` are storage types: every op computes in float32 and rounds its
result to the storage type (to nearest, ties to even), as PyTorch does on the CPU.

Promotion follows ``torch.result_type`` (PyTorch's ``c10/core/ScalarType.h`` table and
``ATen/native/TypeProperties.cpp``): operands are ranked as tensors with dims, 0-d tensors,
and Python scalars ("wrapped numbers"); a lower rank only matters when its category
(bool < integer < floating) is higher. A Python float counts as the default dtype
(float32), a Python int as int64, a Python bool as bool.
"""
from __future__ import annotations

import numbers

import ml_dtypes
import numpy as np


class DType:
    """A tensor element type, like ``torch.dtype``.

    Attributes:
        name: ``"float32"``, ``"int64"``, ... (equal to ``str`` comparisons with it).
        is_floating_point: float32, float16, bfloat16.
        is_signed: every dtype but bool.
        itemsize: bytes per element as PyTorch counts them (8 for int64, whatever the
            device stores).
    """
    __slots__ = ("name", "is_floating_point", "is_signed", "itemsize", "is_complex")

    def __init__(self, name: str, floating: bool, signed: bool, itemsize: int):
        self.name, self.is_floating_point, self.is_signed = name, floating, signed
        self.itemsize, self.is_complex = itemsize, False

    def __repr__(self) -> str:
        return f"autodiff.{self.name}"

    __str__ = __repr__

    def __eq__(self, other) -> bool:
        if isinstance(other, DType):
            return other.name == self.name
        if isinstance(other, str):
            return other == self.name
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)

    def __reduce__(self):
        return (get, (self.name,))

    def to_real(self) -> "DType":
        return self


bool_ = DType("bool", False, False, 1)
int32 = DType("int32", False, True, 4)
int64 = DType("int64", False, True, 8)
float32 = DType("float32", True, True, 4)
float16 = DType("float16", True, True, 2)
bfloat16 = DType("bfloat16", True, True, 2)

DTYPES = {d.name: d for d in (bool_, int32, int64, float32, float16, bfloat16)}

#: names PyTorch and numpy also use for ours (torch.float, torch.long, torch.int, torch.half)
ALIASES = {"float": "float32", "long": "int64", "int": "int32", "half": "float16",
           "bool_": "bool"}

#: numpy dtype of a host value (what ``Tensor.numpy()``, Feeders and Receivers use)
HOST = {"bool": np.dtype(np.bool_), "int32": np.dtype(np.int32), "int64": np.dtype(np.int64),
        "float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
        "bfloat16": np.dtype(ml_dtypes.bfloat16)}

#: numpy dtype of the device storage (every device: numpy, OpenCL, TVM)
STORAGE = {**HOST, "int64": np.dtype(np.int32)}

#: numpy dtype arithmetic is done in
COMPUTE = {**STORAGE, "float16": np.dtype(np.float32), "bfloat16": np.dtype(np.float32)}

INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1


def get(spec) -> DType:
    """The :class:`DType` named by ``spec``: a DType, a name or alias (``"float"``,
    ``"long"``...), ``"torch.float32"``/``torch.float32``, a numpy dtype or type, or the
    Python types ``float``/``int``/``bool``.

    Raises:
        TypeError: no such dtype here (float64, complex, uint8, ...).
    """
    if isinstance(spec, DType):
        return spec
    if spec is float:
        return float32
    if spec is int:
        return int64
    if spec is bool:
        return bool_
    if not isinstance(spec, str):
        try:
            spec = np.dtype(spec).name
        except TypeError:
            spec = str(spec)
    name = spec.removeprefix("torch.").removeprefix("autodiff.").removeprefix("numpy.")
    name = ALIASES.get(name, name)
    if name not in DTYPES:
        raise TypeError(f"unsupported dtype {spec!r}; autodiff has "
                        f"{', '.join(DTYPES)}")
    return DTYPES[name]


def name(spec) -> str:
    """The plain name (``"float32"``) of a dtype spec (see :func:`get`)."""
    return get(spec).name


def is_floating(dt) -> bool:
    return get(dt).is_floating_point


def is_integral(dt, include_bool: bool = False) -> bool:
    """int32/int64 (and bool with ``include_bool``), as ``torch.is_integral``-like checks."""
    n = name(dt)
    return n in ("int32", "int64") or (include_bool and n == "bool")


def category(dt) -> int:
    """0 bool, 1 integer, 2 floating."""
    n = name(dt)
    return 0 if n == "bool" else 1 if n in ("int32", "int64") else 2


def storage(dt) -> np.dtype:
    """numpy dtype of ``dt`` in device memory."""
    return STORAGE[name(dt)]


def host(dt) -> np.dtype:
    """numpy dtype of ``dt`` on the host."""
    return HOST[name(dt)]


def compute(dt) -> np.dtype:
    """numpy dtype arithmetic on ``dt`` runs in (float32 for the 16-bit floats)."""
    return COMPUTE[name(dt)]


def itemsize(dt) -> int:
    """Bytes per element in device memory."""
    return STORAGE[name(dt)].itemsize


# -- promotion ---------------------------------------------------------------------------
_FLOAT_RANK = {"float16": 1, "bfloat16": 1, "float32": 2}


def promote_types(a, b) -> DType:
    """``torch.promote_types``: the smallest dtype both ``a`` and ``b`` convert to
    without losing their category (bool < integer < floating); float16 with bfloat16
    gives float32."""
    a, b = get(a), get(b)
    if a == b:
        return a
    ca, cb = category(a), category(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 1:
        return int64
    if _FLOAT_RANK[a.name] == _FLOAT_RANK[b.name]:
        return float32
    return a if _FLOAT_RANK[a.name] > _FLOAT_RANK[b.name] else b


def _combine(higher: DType | None, lower: DType | None) -> DType | None:
    """``combine_categories`` of ATen's TypeProperties.cpp."""
    if higher is None:
        return lower
    if higher.is_floating_point:
        return higher
    if higher == bool_ or (lower is not None and lower.is_floating_point):
        return promote_types(higher, lower) if lower is not None else higher
    return higher


def scalar_dtype(x) -> DType:
    """The dtype a Python (or numpy) scalar counts as: bool, int64, or float32."""
    if isinstance(x, (bool, np.bool_)):
        return bool_
    if isinstance(x, numbers.Integral):
        return int64
    if isinstance(x, numbers.Real):
        return float32
    raise TypeError(f"expected a Tensor or a real number, got {type(x).__name__}")


def is_scalar(x) -> bool:
    """A Python/numpy number (or 0-d numpy array): a "wrapped number" for promotion."""
    return isinstance(x, (numbers.Number, np.number, np.bool_)) or (
        isinstance(x, np.ndarray) and x.ndim == 0)


def result_type(*operands) -> DType:
    """``torch.result_type`` over any number of operands: tensors (anything with ``dtype``
    and ``shape``: Tensors, numpy arrays), Python scalars, or dtypes (which count as
    tensors with dims).

    Raises:
        TypeError: an operand that is none of these.
    """
    dim = zero = wrapped = None

    def up(state, dt):
        return dt if state is None else promote_types(state, dt)

    for x in operands:
        if isinstance(x, (DType, str)):
            dim = up(dim, get(x))
        elif is_scalar(x):
            wrapped = up(wrapped, scalar_dtype(x.item() if isinstance(x, np.ndarray) else x))
        elif hasattr(x, "dtype") and hasattr(x, "shape"):
            dt = get(x.dtype)
            if len(x.shape) == 0:
                zero = up(zero, dt)
            else:
                dim = up(dim, dt)
        else:
            raise TypeError(f"result_type: expected Tensors or numbers, got {type(x).__name__}")
    out = _combine(dim, _combine(zero, wrapped))
    if out is None:
        raise TypeError("result_type: no operands")
    return out


def can_cast(from_, to) -> bool:
    """``torch.can_cast``: whether the casting is allowed by PyTorch's in-place rules
    (no floating -> integral, no non-bool -> bool)."""
    f, t = get(from_), get(to)
    return not ((f.is_floating_point and not t.is_floating_point)
                or (f != bool_ and t == bool_))


# -- host values -------------------------------------------------------------------------
def check_range(arr: np.ndarray, dt, what: str = "value") -> None:
    """Raise :class:`OverflowError` if an int64 (or wider) array does not fit the int32
    storage of ``dt``."""
    if name(dt) not in ("int32", "int64") or arr.size == 0:
        return
    a = np.asarray(arr)
    if a.dtype.kind not in "iu" or a.dtype.itemsize < 4 or a.dtype == np.int32:
        return
    lo, hi = int(a.min()), int(a.max())
    if lo < INT32_MIN or hi > INT32_MAX:
        raise OverflowError(
            f"{what}: {name(dt)} values are stored as int32 on every device; got values in "
            f"[{lo}, {hi}], outside [{INT32_MIN}, {INT32_MAX}]")


def check_scalar(value, dt, what: str = "constant"):
    """``value`` converted to the Python type of ``dt`` (bool, int or float, floats rounded
    to the storage type).

    Raises:
        OverflowError: an integer constant outside the int32 storage.
        ValueError: a non-finite value for an integer dtype.
    """
    n = name(dt)
    if n == "bool":
        return bool(value)
    if n in ("int32", "int64"):
        if isinstance(value, float) and not np.isfinite(value):
            raise ValueError(f"{what}: cannot convert {value} to {n}")
        v = int(value)
        if not INT32_MIN <= v <= INT32_MAX:
            raise OverflowError(f"{what}: {v} does not fit the int32 storage of {n} "
                                f"([{INT32_MIN}, {INT32_MAX}])")
        return v
    with np.errstate(over="ignore"):
        return float(np.asarray(float(value), dtype=STORAGE[n]).astype(np.float32))


def default_for(arr: np.ndarray) -> DType:
    """The dtype a tensor made from numpy data gets: its own where we have it, bool for
    bool, int64 for other integers wider than 32 bits, int32 for narrower ones, float32
    for other floats (float64 included: there is no float64 here)."""
    k, n = arr.dtype.kind, arr.dtype.name
    if k == "b":
        return bool_
    if n in DTYPES:
        return DTYPES[n]
    if k in "iu":
        return int64 if arr.dtype.itemsize >= 4 else int32
    if k == "f" or k == "V" or n == "bfloat16":
        return float32
    raise TypeError(f"cannot make a tensor from numpy data of dtype {arr.dtype}")


def to_host(arr, dt) -> np.ndarray:
    """``arr`` as a C-contiguous numpy array of the host dtype of ``dt`` (0-d stays 0-d)."""
    return np.asarray(arr, dtype=host(dt), order="C")


def to_storage(arr, dt) -> np.ndarray:
    """``arr`` in the device storage dtype of ``dt`` (int64 range-checked)."""
    a = np.asarray(arr)
    check_range(a, dt)
    st = storage(dt)
    return a if a.dtype == st else a.astype(st)
