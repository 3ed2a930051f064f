"""Module backward hooks (:meth:`~autodiff.nn.Module.register_full_backward_hook` and
``register_full_backward_pre_hook``) on the tensor hooks of the graph IR, as PyTorch's
``torch.utils.hooks.BackwardHook``: a module's positional tensor arguments and output
tensors pass through identity nodes whose gradient hooks call the module's hooks while
``backward()`` is traced."""
from __future__ import annotations

import warnings

from ..graph import ops
from ..graph.ir import Op
from ..graph.tensor import Tensor, _wrap, concat
from ..graph.trace import TRACER, user_site


def _identity(t: Tensor) -> Tensor:
    """A node equal to ``t`` (a same-shape ``RESHAPE``, free at run time) that requires
    grad, so that a gradient hook on it sees exactly the gradient of this use of ``t``."""
    n = t.node
    return _wrap(TRACER.emit(n.replace(op=Op.RESHAPE, srcs=(n,), arg=n.shape,
                                       requires_grad=True, site=user_site())))


def _watch(tensors: list, on_grads, record=None) -> list:
    """Identity views of ``tensors`` (all requiring grad) for the caller to use instead.

    ``record``: ``record(i, grad)`` is called with the gradient of each view that
    ``backward()`` reaches. Else ``on_grads(grads)`` is called once per ``backward()``
    reaching any view, when all their gradients are known (``grads``: a list, None for a
    view not reached); it returns None or a list of replacements (tensors or None: zeros)
    that flow on to ``tensors``. A single tensor: one hooked identity; several: they are
    packed into one vector whose gradient hook runs after those of every view (it comes
    first in the graph, so the reverse sweep reaches it last). Each view is wrapped once
    more, so that hooks the user puts on the returned tensors run first, as in PyTorch.
    """
    if record is not None or len(tensors) == 1:
        inner = [_identity(t) for t in tensors]
        if record is not None:
            for i, y in enumerate(inner):
                y.register_hook(lambda g, i=i: record(i, g))
        else:
            def one(g):
                new = on_grads([g])
                return None if new is None else _or_zeros(new[0], tensors[0])
            inner[0].register_hook(one)
        return [_identity(y) for y in inner]
    dts = {t.dtype for t in tensors}
    dt = dts.pop() if len(dts) == 1 else "float32"
    packed = concat([t.reshape(-1).to(dt) for t in tensors], 0)
    seen, views, start = {}, [], 0
    for i, t in enumerate(tensors):
        v = packed[start:start + t.numel()].reshape(t.shape).to(t.dtype)
        start += t.numel()
        v = _identity(v)
        v.register_hook(lambda g, i=i: seen.__setitem__(i, g))
        views.append(v)

    def all_at_once(g):
        grads = [seen.pop(i, None) for i in range(len(tensors))]
        new = on_grads(grads)
        if new is None:
            return None
        return concat([_or_zeros(r, t).reshape(-1).to(dt) for r, t in zip(new, tensors)], 0)
    packed.register_hook(all_at_once)
    return [_identity(v) for v in views]


def _zeros(shape, dtype) -> Tensor:
    return _wrap(ops.const(0, tuple(shape), dtype))


def _or_zeros(g, like: Tensor) -> Tensor:
    return _zeros(like.shape, like.dtype) if g is None else g


class BackwardHook:
    """The backward hooks of one call of a module (``torch.utils.hooks.BackwardHook``):
    the full backward hooks ``full`` and the pre-hooks ``pre``, called with PyTorch's
    arguments when ``backward()`` is traced through the identity views that
    :meth:`setup_input` / :meth:`setup_output` put around the call."""

    def __init__(self, module, full: list, pre: list) -> None:
        self.module, self.full, self.pre = module, full, pre
        self.grad_outputs = None
        self.recorded: dict = {}            # output position -> gradient (no pre-hooks)
        self.n_inputs = self.n_outputs = -1
        self.input_idx = self.output_idx = None
        self.inputs: dict = {}              # input position -> (shape, dtype)
        self.outputs: dict = {}             # output position -> (shape, dtype)
        self.grad_in: list = []             # positions of the inputs that require grad

    def setup_input(self, args: tuple) -> tuple:
        self.n_inputs = len(args)
        idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not (TRACER.grad_enabled and any(args[i].requires_grad for i in idx)):
            return args
        self.input_idx = idx
        self.inputs = {i: (args[i].shape, args[i].dtype) for i in idx}
        if not self.full:                   # nothing to call at the inputs
            return args
        self.grad_in = [i for i in idx if args[i].requires_grad]
        views = _watch([args[i] for i in self.grad_in], self._on_inputs)
        out = list(args)
        for i, v in zip(self.grad_in, views):
            out[i] = v
        return tuple(out)

    def setup_output(self, result):
        is_tuple = isinstance(result, tuple)
        outs = result if is_tuple else (result,)
        self.n_outputs = len(outs)
        idx = [i for i, o in enumerate(outs) if isinstance(o, Tensor)]
        if not (TRACER.grad_enabled and any(outs[i].requires_grad for i in idx)):
            return result
        self.output_idx = idx
        self.outputs = {i: (outs[i].shape, outs[i].dtype) for i in idx}
        rg = [i for i in idx if outs[i].requires_grad]
        if self.pre or self.input_idx is None:
            views = _watch([outs[i] for i in rg], lambda gs: self._on_outputs(rg, gs))
        else:                               # the input hook reads them: record only
            views = _watch([outs[i] for i in rg], None,
                           lambda k, g: self.recorded.__setitem__(rg[k], g))
        new = list(outs)
        for i, v in zip(rg, views):
            new[i] = v
        if not is_tuple:
            return new[0]
        return tuple(new) if type(outs) is tuple else type(outs)(*new)   # a named tuple

    def _on_outputs(self, rg: list, grads: list):
        """The output gradients are known: the pre-hooks, and the full hooks when no input
        requires grad; the replaced output gradients (None: unchanged)."""
        go = [None] * self.n_outputs
        for i, g in zip(rg, grads):
            go[i] = g
        go = orig = tuple(go)
        last = None
        for pre in self.pre:
            new = pre(self.module, go)
            if new is None:
                continue
            if len(new) != len(go):
                raise RuntimeError("Backward pre hook returned an invalid number of "
                                   f"grad_output, got {len(new)}, but expected {len(go)}")
            go, last = new, pre
        self.grad_outputs = go
        if self.input_idx is None:
            warnings.warn("Full backward hook is firing when gradients are computed with "
                          "respect to module outputs since no inputs require gradients.",
                          stacklevel=2)
            gi = (None,) * self.n_inputs
            for hook in self.full:
                res = hook(self.module, gi, go)
                if res is not None and not (isinstance(res, tuple)
                                            and all(e is None for e in res)):
                    raise RuntimeError("Backward hook for Modules where no input requires "
                                       "gradient should always return None or None for all "
                                       "gradients.")
            self.grad_outputs = None
        if go is orig:
            return None
        return [_checked(go[i], *self.outputs[i], last, "grad_output", i) for i in rg]

    def _on_inputs(self, grads: list):
        """The input gradients are known: the full hooks; the replaced input gradients
        (None: unchanged)."""
        go = self.grad_outputs
        if go is None and self.recorded:
            go = tuple(self.recorded.get(i) for i in range(self.n_outputs))
        self.recorded = {}
        if go is None:                      # the outputs' gradients never came (PyTorch)
            return None
        gi = [None] * self.n_inputs
        for i, (shape, dtype) in self.inputs.items():
            gi[i] = _zeros(shape, dtype)
        for i, g in zip(self.grad_in, grads):
            if g is not None:
                gi[i] = g
        gi = orig = tuple(gi)
        last = None
        for hook in self.full:
            new = hook(self.module, gi, go)
            if new is None:
                continue
            if len(new) != len(gi):
                raise RuntimeError("Backward hook returned an invalid number of grad_input, "
                                   f"got {len(new)}, but expected {len(gi)}")
            gi, last = new, hook
        self.grad_outputs = None
        if gi is orig:
            return None
        return [_checked(gi[i], *self.inputs[i], last, "grad_input", i)
                for i in self.grad_in]


def _checked(new, shape, dtype, hook, what: str, i: int):
    """A hook's replacement ``new`` for the gradient of a tensor of ``shape`` and
    ``dtype`` (None stays None: zeros, made by the caller).

    Raises:
        TypeError: not a tensor or None.
        RuntimeError: another shape or dtype (PyTorch: "hook ... has changed the size of
            value").
    """
    if new is None:
        return None
    name = getattr(hook, "__name__", type(hook).__name__)
    if not isinstance(new, Tensor):
        raise TypeError(f"expected Tensor or None, but backward hook '{name}' returned "
                        f"'{type(new).__name__}' for {what}[{i}]")
    if tuple(new.shape) != tuple(shape):
        raise RuntimeError(f"backward hook '{name}' has changed the size of value: "
                           f"{what}[{i}] has shape {list(shape)}, the hook returned shape "
                           f"{list(new.shape)}")
    if new.dtype != dtype:
        raise RuntimeError(f"backward hook '{name}' has changed the type of value: "
                           f"{what}[{i}] was {dtype} got {new.dtype}")
    return new
