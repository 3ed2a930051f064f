"""Errors raised by autodiff, each naming the op or callback and the user's own code."""
from __future__ import annotations


class ShapeError(ValueError):
    """Operand shapes do not fit an op. Raised at trace time.

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


def _it(iteration: tuple) -> str:
    return str(iteration[0]) if len(iteration) == 1 else str(list(iteration))
