"""Errors raised by autodiff, each naming the op or callback and the user's own code."""
from __future__ import annotations


class ShapeError(ValueError, RuntimeError):
    """Operand shapes do not fit an op. Raised at trace time.

    A ``ValueError`` and, like PyTorch's error for incompatible shapes, a ``RuntimeError``.

    The message names the op, every operand shape and the ``file:line`` of the user's code
    that traced the op.
    """

    def __init__(self, op: str, shapes, site: str, why: str = "") -> None:
        self.op, self.shapes, self.site = op, [tuple(s) for s in shapes], site
        shown = ", ".join(str(list(s)) for s in self.shapes)
        super().__init__(f"{op}: incompatible shapes {shown}{': ' + why if why else ''} "
                         f"(traced at {site})")


class DTypeError(TypeError, NotImplementedError):
    """An op does not take operands of these dtypes (bitwise ops on floats, negation of
    bool, a non-bool ``where`` condition...). Raised at trace time; the message names the
    op, the dtypes and the user's ``file:line``. A ``TypeError``, and a
    ``NotImplementedError`` (so a ``RuntimeError``) as PyTorch raises for these."""


class DimError(ShapeError, IndexError):
    """A dim argument out of range for a tensor's rank: an ``IndexError`` as in PyTorch,
    and a :class:`ShapeError` naming the op, the shape and the user's ``file:line``."""


class FeederError(RuntimeError):
    """A Feeder callback raised or returned a value of the wrong type, shape or dtype.

    ``iteration`` is the loop index tuple (outermost first), ``()`` outside loops.
    """

    def __init__(self, name: str, iteration: tuple, msg: str) -> None:
        self.name, self.iteration = name, iteration
        where = f" in iteration {_it(iteration)}" if iteration else ""
        super().__init__(f"Feeder '{name}'{where}: {msg}")


class ReceiverError(RuntimeError):
    """A Receiver callback raised; the original exception is chained as ``__cause__``."""

    def __init__(self, name: str, iteration: tuple, msg: str) -> None:
        self.name, self.iteration = name, iteration
        where = f" in iteration {_it(iteration)}" if iteration else ""
        super().__init__(f"Receiver '{name}'{where}: {msg}")


class TracedValueError(TypeError):
    """A traced tensor was used as a Python value (``bool``, ``int``, ``float``, an index)
    while the program is being traced: its value does not exist yet. Raised at trace time,
    naming the conversion and the user's ``file:line``."""

    def __init__(self, conversion: str, what: str, site: str, instead: str) -> None:
        self.conversion, self.site = conversion, site
        super().__init__(
            f"{conversion}() of {what}: a traced tensor has no value while tracing (the "
            f"program runs later, in execute()) (at {site}). {instead} To see values on "
            "the host, hand the tensor to a Receiver.")


class DeviceOutOfMemory(MemoryError):
    """A value of the program does not fit the memory a device can allocate; raised before
    the program runs (nothing allocated, variables untouched).

    Attributes:
        needed: bytes of the value; ``available``: bytes the device has.
    """

    def __init__(self, device: str, what: str, needed: int, available: int) -> None:
        self.needed, self.available = needed, available
        super().__init__(f"{device} device: {what} needs {_size(needed)} ({needed} bytes); "
                         f"{_size(available)} ({available} bytes) of memory available")


def _size(nbytes: int) -> str:
    return f"{nbytes / 2 ** 30:.1f} GiB" if nbytes >= 2 ** 30 else f"{nbytes / 2 ** 20:.1f} MiB"


def _it(iteration: tuple) -> str:
    return str(iteration[0]) if len(iteration) == 1 else str(list(iteration))
