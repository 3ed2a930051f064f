"""Random fills on a tensor (``uniform_``, ``normal_``, ``bernoulli``/``bernoulli_``,
``exponential_``, ``log_normal_``, ``cauchy_``, ``geometric_``, ``random_``).

Every draw is an ``Op.RAND`` node (counter-based Philox, :mod:`autodiff.graph.rng`), like
:meth:`~.creation.CreationMixin.rand_like` and ``nn.functional.dropout``: new values in every
loop iteration, the same on every device. Each call takes a fresh Philox key from the
global generator (:func:`autodiff.manual_seed`) when it is traced, or from ``seed=`` (an int,
autodiff's own keyword) or ``generator=`` (a ``numpy.random.Generator``). The in-place forms
write the tensor like ``fill_``: a variable (a parameter) gets the draw as its new value
(inside ``no_grad`` when it requires grad, as in PyTorch), a traced tensor names it.

The uniform draws are multiples of ``2**-24`` in ``[0, 1 - 2**-24]``: the other
distributions are transforms of them (inverse CDFs, Box-Muller), so their far tails are
cut where ``u`` has no more resolution (``|normal| < 5.8``, ``exponential < 16.7 / lambd``).
"""
from __future__ import annotations

import math
import numbers

from .. import ops
from ..trace import no_grad
from .creation import default_rng

#: ``random_()``'s default upper bound (inclusive) per floating dtype: ``2**mantissa``
_FLOAT_TOP = {"float32": 2 ** 24, "float16": 2 ** 11, "bfloat16": 2 ** 8}
_INT_TOP = 2 ** 31 - 1         # int32 storage (int64 too)


def _check_scalar(name: str, value, what: str) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{name}(): argument '{what}' must be a number, not "
                        f"{type(value).__name__}")
    return float(value)


class RandomMixin:
    # -- draws ------------------------------------------------------------------------------
    @staticmethod
    def _key(seed, generator) -> int:
        """The Philox key of one call: ``seed``, else drawn from ``generator`` (a numpy
        Generator), else from the global generator."""
        if seed is not None:
            return int(seed) % 2 ** 32
        if generator is None:
            return int(default_rng().integers(0, 2 ** 32))
        if hasattr(generator, "integers"):
            return int(generator.integers(0, 2 ** 32))
        raise TypeError(f"generator: expected a numpy.random.Generator (the device draws; "
                        f"the key is taken from it), got {type(generator).__name__}")

    def _u(self, key: int, stream: int = 0):
        """Uniform float32 draws in ``[0, 1)`` of this shape (new every loop iteration)."""
        return self._wrap(ops.rand(self.shape, key, stream))

    def _gaussian(self, key: int):
        """Standard normal draws (Box-Muller on streams 0 and 1)."""
        return self.randn_like(seed=key)

    def _floating_only(self, name: str, error=NotImplementedError) -> None:
        if not self.is_floating_point():
            raise error(f"\"{name}\" not implemented for '{self.dtype.name}': a continuous "
                        f"distribution needs a floating dtype")

    def _fill_with(self, value):
        """The in-place write of a random fill (cast to this dtype; outside ``no_grad``, a
        variable that requires grad raises, as in PyTorch)."""
        return self._set(ops.cast(value.node, self.dtype))

    # -- continuous ------------------------------------------------------------------------
    def uniform_(self, from_: float = 0.0, to: float = 1.0, *, generator=None,
                 seed: int | None = None, **kwargs):
        """Fill with samples from ``U[from, to)`` (``from`` by keyword as in PyTorch:
        ``x.uniform_(**{"from": -1, "to": 1})``, or positionally).

        Raises:
            NotImplementedError: a non-floating tensor.
            RuntimeError: ``from > to``.
        """
        lo = _check_scalar("uniform_", kwargs.pop("from", from_), "from")
        hi = _check_scalar("uniform_", to, "to")
        if kwargs:
            raise TypeError(f"uniform_() got an unexpected keyword argument {next(iter(kwargs))!r}")
        self._floating_only("check_uniform_bounds")
        if lo > hi:
            raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                               f"from={lo} > to={hi}")
        with no_grad():
            value = self._u(self._key(seed, generator)) * (hi - lo) + lo
        return self._fill_with(value)

    def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator=None,
                seed: int | None = None):
        """Fill with samples from ``N(mean, std**2)`` (Box-Muller).

        Raises:
            NotImplementedError: a non-floating tensor.
            RuntimeError: ``std < 0``.
        """
        mean, std = _check_scalar("normal_", mean, "mean"), _check_scalar("normal_", std, "std")
        self._floating_only("normal_kernel_cpu")
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        with no_grad():
            value = self._gaussian(self._key(seed, generator)) * std + mean
        return self._fill_with(value)

    def log_normal_(self, mean: float = 1.0, std: float = 2.0, *, generator=None,
                    seed: int | None = None):
        """Fill with ``exp(N(mean, std**2))`` samples (the log-normal distribution).

        Raises:
            NotImplementedError: a non-floating tensor.
            RuntimeError: ``std <= 0``.
        """
        mean = _check_scalar("log_normal_", mean, "mean")
        std = _check_scalar("log_normal_", std, "std")
        self._floating_only("log_normal_cpu")
        if not std > 0:
            raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
        with no_grad():
            value = (self._gaussian(self._key(seed, generator)) * std + mean).exp()
        return self._fill_with(value)

    def exponential_(self, lambd: float = 1.0, *, generator=None, seed: int | None = None):
        """Fill with samples from the exponential distribution of rate ``lambd``:
        ``-log(1 - u) / lambd`` (``1 - u`` is exact, in ``(0, 1]``).

        Raises:
            RuntimeError: a non-floating tensor, or ``lambd <= 0``.
        """
        lambd = _check_scalar("exponential_", lambd, "lambd")
        self._floating_only("exponential_", RuntimeError)
        if not lambd > 0:
            raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
        with no_grad():
            value = (1.0 - self._u(self._key(seed, generator))).log() * (-1.0 / lambd)
        return self._fill_with(value)

    def cauchy_(self, median: float = 0.0, sigma: float = 1.0, *, generator=None,
                seed: int | None = None):
        """Fill with samples from the Cauchy distribution: ``median + sigma tan(pi (u -
        1/2))``.

        Raises:
            RuntimeError: a non-floating tensor, or ``sigma <= 0``.
        """
        median = _check_scalar("cauchy_", median, "median")
        sigma = _check_scalar("cauchy_", sigma, "sigma")
        self._floating_only("cauchy_", RuntimeError)
        if not sigma > 0:
            raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
        with no_grad():
            u = self._u(self._key(seed, generator))
            value = ((u - 0.5) * math.pi).tan() * sigma + median
        return self._fill_with(value)

    # -- discrete ----------------------------------------------------------------------------
    def bernoulli(self, p=None, *, generator=None, seed: int | None = None):
        """A new tensor of this shape and dtype with 1 where a uniform draw is below the
        probability, else 0: ``p`` a float, or (``p=None``) this tensor's values as the
        probabilities (``torch.bernoulli``). No gradient (PyTorch's is zero).

        Raises:
            NotImplementedError: ``p=None`` on a non-floating tensor.
            RuntimeError: ``p`` (or the values, when known while tracing) outside
                ``[0, 1]``; traced probabilities are not checked (values above 1 always
                give 1, below 0 never).
        """
        from .scan import known_values
        if p is None:
            self._floating_only("bernoulli_tensor_cpu_p_")
            known = known_values(self)
            if known is not None and not ((known >= 0) & (known <= 1)).all():
                raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
            prob = self.detach()
        else:
            prob = _check_scalar("bernoulli", p, "p")
            if not 0 <= prob <= 1:
                raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={prob}")
        with no_grad():
            return (self._u(self._key(seed, generator)) < prob).to(self.dtype)

    def bernoulli_(self, p=0.5, *, generator=None, seed: int | None = None):
        """Fill with 1 with probability ``p`` (a float, or a tensor of probabilities
        broadcast to this shape), else 0; any dtype.

        Raises:
            RuntimeError: a float ``p`` (or a tensor ``p`` known while tracing) outside
                ``[0, 1]``.
        """
        from .scan import known_values
        if hasattr(p, "node"):
            known = known_values(p)
            if known is not None and not ((known >= 0) & (known <= 1)).all():
                raise RuntimeError("bernoulli_ expects all p values to be in [0, 1]")
            prob = p.detach().float().broadcast_to(self.shape)
        else:
            prob = _check_scalar("bernoulli_", p, "p")
            if not 0 <= prob <= 1:
                raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={prob}")
        with no_grad():
            value = self._u(self._key(seed, generator)) < prob
        return self._fill_with(value)

    def geometric_(self, p: float, *, generator=None, seed: int | None = None):
        """Fill with the number of Bernoulli(``p``) trials up to the first success (1, 2,
        ...): ``ceil(log(1 - u) / log(1 - p))``, at least 1 (PyTorch's transform); integer
        tensors take values up to the int32 storage's maximum.

        Raises:
            NotImplementedError: a bool tensor.
            RuntimeError: ``p`` outside ``(0, 1)``.
        """
        p = _check_scalar("geometric_", p, "p")
        if self.dtype == "bool":
            raise NotImplementedError("\"geometric_cpu\" not implemented for 'Bool'")
        if not 0 < p < 1:
            raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
        with no_grad():
            u = self._u(self._key(seed, generator))
            k = ((1.0 - u).log() * (1.0 / math.log1p(-p))).ceil().clamp_min(1.0)
            if not self.is_floating_point():
                k = k.clamp_max(float(2 ** 31 - 128))     # the largest float32 below 2**31
        return self._fill_with(k)

    def random_(self, *args, generator=None, seed: int | None = None, **kwargs):
        """Fill with integers drawn uniformly from ``[from, to - 1]``, as PyTorch:
        ``random_()`` (from 0 to ``2**mantissa`` for floats, to the dtype's maximum for
        integers: int64 stops at ``2**31 - 1``, its int32 storage's maximum; bool 0 or 1),
        ``random_(to)``, ``random_(from, to)`` (``from``/``to`` also by keyword, ``to=None``
        meaning that maximum).

        Each element is 31 random bits (two draws) reduced modulo ``to - from`` in int32: a
        range that does not divide ``2**31`` leaves a relative bias of at most
        ``(to - from) / 2**31`` (below 1e-4 for ranges up to 2**17).

        Raises:
            TypeError: a non-integer bound, or more than two bounds.
            RuntimeError: ``from >= to``; bounds outside the dtype's range (int64: the int32
                storage's), or a range of more than ``2**31`` values.
        """
        frm, to = kwargs.pop("from", None), kwargs.pop("to", None)
        if kwargs:
            raise TypeError(f"random_() got an unexpected keyword argument {next(iter(kwargs))!r}")
        if len(args) > 2 or (len(args) == 2 and (frm is not None or to is not None)) or \
                (len(args) == 1 and to is not None):
            raise TypeError("random_() takes the bounds (from, to), (to) or ()")
        if len(args) == 2:
            frm, to = args
        elif len(args) == 1:
            to = args[0]
        for name, v in (("from", frm), ("to", to)):
            if v is not None and (not isinstance(v, numbers.Integral) or isinstance(v, bool)):
                raise TypeError(f"random_(): argument '{name}' must be int, not "
                                f"{type(v).__name__}")
        dt = self.dtype.name
        top = 1 if dt == "bool" else _FLOAT_TOP.get(dt, _INT_TOP)   # inclusive maximum
        lo = 0 if frm is None else int(frm)
        hi = top + 1 if to is None else int(to)
        if lo >= hi:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got "
                               f"from={lo} >= to={hi}")
        low = 0 if dt == "bool" else -top - 1 if dt in ("int32", "int64") else -top
        if lo < low or hi - 1 > top:
            raise RuntimeError(f"random_: [{lo}, {hi - 1}] is out of bounds for {dt} "
                               f"([{low}, {top}]" + (", its int32 storage)" if dt == "int64"
                                                     else ")"))
        span = hi - lo
        if span > 2 ** 31:
            raise RuntimeError(f"random_: a range of {span} values is more than the 2**31 "
                               f"autodiff draws from (31 random bits per element)")
        key = self._key(seed, generator)
        with no_grad():
            low24 = (self._u(key, 0) * float(2 ** 24)).int()          # exact: u = j 2**-24
            high7 = (self._u(key, 1) * 128.0).int()
            bits = low24 + high7 * (2 ** 24)                          # [0, 2**31)
            v = bits if span == 2 ** 31 else bits % span
            if lo:
                v = v.float() + float(lo) if self.is_floating_point() else v + lo
        return self._fill_with(v)
