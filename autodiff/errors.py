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


class IndexOutOfRange(IndexError):
    """An index read at run time (a ``gather``/``embedding`` index, a ``cross_entropy``
    class target) is outside ``[0, rows)``. Raised by every device in the iteration where
    it happens, before any later Receiver of that iteration; variables keep the values of
    the completed iterations (see :func:`describe_stop`).

    Attributes:
        op: what the user called (``"gather"``, ``"cross_entropy"``).
        site: the user's ``file:line`` that traced it.
        iteration: loop indices, outermost first (``()`` outside loops).
        rows: the valid range is ``[0, rows)``.
        count: how many indices were out of range.
        low, high: the smallest and largest of them.
        value: the bad value reported: ``high`` if it is ``>= rows``, else ``low``.
    """

    #: the noun for an index of each op
    NOUNS = {"cross_entropy": "target"}

    def __init__(self, op: str, site: str, iteration: tuple, rows: int, count: int,
                 low: int, high: int) -> None:
        self.op, self.site, self.iteration, self.rows = op, site, iteration, int(rows)
        self.count, self.low, self.high = int(count), int(low), int(high)
        self.value = self.high if self.high >= self.rows else self.low
        noun = self.NOUNS.get(op, "index")
        where = f" in iteration {_it(iteration)}" if iteration else ""
        if self.count == 1:
            what = f"{noun} {self.value} is out of range [0, {self.rows}){where}"
        else:
            plural = "indices" if noun == "index" else noun + "s"
            what = (f"{self.count} {plural} out of range [0, {self.rows}){where}, from "
                    f"{self.low} to {self.high}")
        super().__init__(f"{op}: {what} (traced at {site})")


class ExecutionInterrupted(KeyboardInterrupt):
    """``KeyboardInterrupt`` (Ctrl-C, or raised by a callback) during ``execute()``,
    re-raised once the variables hold one consistent completed iteration, which the message
    names (see :func:`describe_stop`). The original is chained as ``__cause__``."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.completed: int | None = None
        self.feeder_calls = 0


def describe_stop(err: BaseException, site: str | None, completed: int | None,
                  calls: int, first: int | None = None, last: int | None = None) -> None:
    """Add to ``err`` (attributes ``completed``, ``feeder_calls`` and its message) where a
    stopped run left the variables: the values after ``completed`` iterations of the
    outermost loop at ``site`` (None: outside loops), and how many Feeder calls were made
    for the iterations ``first .. last`` beyond them (to skip or replay on a resume)."""
    err.completed, err.feeder_calls = completed, calls
    if site is None or completed is None:
        return
    s = "" if completed == 1 else "s"
    text = (f"; variables hold the values after {completed} completed iteration{s} of the "
            f"loop at {site}")
    if calls:
        span = f"iteration {first}" if first == last else f"iterations {first}-{last}"
        text += (f"; {calls} Feeder call{'' if calls == 1 else 's'} made beyond them "
                 f"(for {span})")
    else:
        text += "; no Feeder call made beyond them"
    if err.args and isinstance(err.args[0], str):
        err.args = (err.args[0] + text,) + err.args[1:]
    else:
        err.args = (text[2:],)


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
