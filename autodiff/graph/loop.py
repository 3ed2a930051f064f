"""Host boundaries and loops of the traced program: ``Feeder``, ``Receiver``,
``host_callback``, ``ir_for``."""
from __future__ import annotations

import itertools

from . import control, dtypes, grad_state, ops
from .ir import FeederSpec, Node, Op, ReceiverSpec
from .tensor import Tensor, _wrap
from .trace import TRACER, user_site

_names = itertools.count()


def Feeder(fn, shape, dtype: str = "float32", name: str | None = None) -> Tensor:
    """A tensor whose value the host produces by calling ``fn()`` each time the node runs.

    Inside ``ir_for`` that is once per iteration, in iteration order. ``fn`` must return a
    numpy array of exactly ``shape`` and ``dtype``: any autodiff dtype (``autodiff.float32``,
    ``"int64"``, ``torch.bool``...; the array's numpy dtype is the host dtype of
    :mod:`autodiff.graph.dtypes`: ``np.int64`` for int64, ``ml_dtypes.bfloat16`` for
    bfloat16). Anything else, and int64 values outside the int32 storage, stops
    ``execute()`` with :class:`autodiff.FeederError` naming the Feeder and the iteration. A
    Feeder is always called, even when its value turns out unused. The array is copied
    before ``fn`` is called again, so ``fn`` may refill and return one buffer.

    Order (``execute(prefetch=n)``, the same on every device): Feeders run in program
    order among themselves. With ``prefetch=0`` every Feeder runs after every Receiver
    before it in program order (the Feeder of iteration ``k + 1`` sees what the Receivers
    of iteration ``k`` saw). With ``prefetch=n > 0``, in a loop whose body holds no nested
    loop, the Feeders of iteration ``k + n`` are called before the Receivers of iteration
    ``k`` run, and those of ``k + n + 1`` only after they returned. After an error, the
    error states how many Feeder calls were made beyond the completed iterations.

    Raises:
        TypeError: ``fn`` is not callable, or an unknown dtype.
    """
    dtype = dtypes.name(dtype)
    if not callable(fn):
        raise TypeError(f"Feeder needs a callable, got {type(fn).__name__}")
    shape = tuple(int(d) for d in shape)
    name = name or f"feeder{next(_names)}"
    node = TRACER.emit(Node(Op.FEEDER, (), shape, dtype, FeederSpec(fn, shape, dtype, name),
                            user_site()))
    return _wrap(node)


def Receiver(fn, tensors, name: str | None = None) -> None:
    """Call ``fn(*arrays)`` on the host with the values of ``tensors`` each time it runs.

    Inside ``ir_for``: once per iteration, in iteration order; every call has returned before
    ``execute()`` returns. Arrays are fresh numpy copies the callback may keep. A callback
    that raises stops ``execute()`` with :class:`autodiff.ReceiverError` naming the
    iteration (a ``KeyboardInterrupt`` stops it too, re-raised as
    :class:`autodiff.errors.ExecutionInterrupted`); variables then keep the values after
    the iterations before it.

    Order: Receivers run in program order among themselves; relative to Feeders see
    :func:`Feeder` (``prefetch=0``: program order; ``prefetch=n``: the Receivers of
    iteration ``k`` run after the Feeders of iteration ``k + n`` were called). The
    callback must not read the running program's variables on the host (``.numpy()``,
    ``state_dict()``): that raises, since their host values are from before the run;
    pass the tensors themselves (e.g. ``list(model.parameters())``) to see their current
    values.
    """
    if not callable(fn):
        raise TypeError(f"Receiver needs a callable, got {type(fn).__name__}")
    tensors = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
    srcs = tuple(t.node for t in tensors)
    TRACER.emit(Node(Op.RECEIVER, srcs, (), "float32",
                     ReceiverSpec(fn, name or f"receiver{next(_names)}",
                                  tuple(s.dtype for s in srcs)), user_site()))


def host_callback(fn, tensors, shape, dtype="float32", name: str | None = None,
                  vjp=None) -> Tensor:
    """A value computed on the host in the middle of the program (``jax.pure_callback``).

    When the program reaches the node, the device hands ``fn`` the values of ``tensors``
    (fresh numpy arrays in their host dtypes) and continues with the array ``fn`` returns,
    which must have ``shape`` and ``dtype``: a host boundary inside a compiled loop (inside
    ``ir_for``: once per iteration, in program order with the other callbacks). It is an
    effect: never removed, merged or repeated. A callback that raises or returns a wrong
    value stops ``execute()`` with :class:`autodiff.CallbackError` naming it and the
    iteration; variables keep the values of the last completed iteration.

    Args:
        fn: ``fn(*arrays) -> np.ndarray``.
        tensors: a tensor or a list of tensors (at least one).
        shape, dtype: of the result.
        name: shown in printers and errors.
        vjp: makes the result differentiable: ``vjp(grad, out, *tensors)`` returns one
            gradient tensor (or None) per input, traced like any other tensor code.

    Raises:
        TypeError: ``fn`` is not callable, no tensors, or an unknown dtype.
    """
    tensors = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
    rule = None
    if vjp is not None:
        def rule(g, out, *srcs):
            gs = vjp(_wrap(g), _wrap(out), *[_wrap(s) for s in srcs])
            return tuple(None if x is None else x.node for x in gs)
    return _wrap(ops.callback(fn, [t.node for t in tensors], shape, dtype,
                              name or f"callback{next(_names)}", rule))


def ir_for(rng, body) -> None:
    """Trace ``body()`` once into a rolled loop over ``rng`` (a ``range`` or an int).

    Loop-carried state is the set of variables the body updates in place (parameters,
    optimizer state); every other value lives for one iteration. Loops nest. If ``body``
    takes an argument it gets the loop index: an int32 0-d tensor (``rng``'s value this
    iteration) usable in arithmetic, comparisons and indexing (``data[i]``).
    """
    if isinstance(rng, int):
        rng = range(rng)
    if not isinstance(rng, range):
        raise TypeError(f"ir_for needs a range or an int, got {type(rng).__name__}")
    site = user_site()
    scope = TRACER.open_loop()
    key = control.new_key()
    try:
        indexed = control.call_body(body, key, rng)
        grad_state.close_loop(scope)
    except BaseException:
        TRACER.scope = scope.parent
        raise
    node = TRACER.close_loop(scope, rng, site)
    if indexed:
        node.arg.index = key
