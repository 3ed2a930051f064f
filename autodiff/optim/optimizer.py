"""Optimizer base: parameter groups, lazily created state variables, ``step()`` tracing the
in-place updates, and ``state_dict()``/``load_state_dict()`` in PyTorch's layout.

An optimizer's state (moments, step counts) is made of variables updated in place under
``no_grad``, so inside ``ir_for`` it is loop-carried device state. A hyper-parameter of a
group (``lr``, ``momentum``, ``betas``) is a Python float or a float32 0-d tensor: an
:mod:`~autodiff.optim.lr_scheduler` replaces ``group["lr"]`` by a variable it updates on the
device, and the update reads it like any other value.
"""
from __future__ import annotations

import math
import numbers
import weakref

import numpy as np

from ..graph import ops
from ..graph.tensor import Tensor, _as_array, where
from ..graph.trace import OWNERS, TRACER, no_grad, user_site


class _ParamState(dict):
    """``optimizer.state``: per-parameter state dicts, indexed by the parameter (as in
    PyTorch) or by its ``id``; a missing entry reads as a new empty dict (PyTorch's
    ``defaultdict(dict)``)."""

    @staticmethod
    def _key(k):
        return id(k) if isinstance(k, Tensor) else k

    def __getitem__(self, k): return dict.__getitem__(self, self._key(k))
    def __setitem__(self, k, v): dict.__setitem__(self, self._key(k), v)
    def __contains__(self, k): return dict.__contains__(self, self._key(k))
    def get(self, k, default=None): return dict.get(self, self._key(k), default)

    def __missing__(self, k):
        v = {}
        dict.__setitem__(self, k, v)
        return v


def _loop_scopes() -> list:
    """The loop bodies (``ir_for``/``ir_while``) being traced, innermost first."""
    out, s = [], TRACER.scope
    while s is not None:
        if s.loop:
            out.append(s)
        s = s.parent
    return out


def _in_branch() -> bool:
    """Whether code is being traced inside an ``ir_if`` branch (at any depth)."""
    from ..graph.control import BodyScope
    s = TRACER.scope
    while s is not None:
        if isinstance(s, BodyScope) and not (s.loop or s.hoist):
            return True
        s = s.parent
    return False


def zero_grads(params, set_to_none: bool) -> None:
    """``p.grad = None`` for each of ``params``, or zeros of its shape where it has one
    and not ``set_to_none`` (``Optimizer.zero_grad``, ``Module.zero_grad``)."""
    for p in params:
        if set_to_none or p.grad is None:
            p.grad = None
        else:
            p.grad = Tensor._wrap(ops.const(0.0, p.shape, p.dtype.name))


class ParamGroup(dict):
    """One of ``optimizer.param_groups``: a dict, where a hyper-parameter a scheduler keeps
    on the device (a float32 variable: ``lr``, OneCycleLR's momentum) takes a value set
    here instead of being replaced, as PyTorch's ``group["lr"] = 0.003`` changes the rate
    the next update uses and the one the scheduler's next step starts from. Set while
    tracing (in a loop body, or after top-level code that already used it) it is a device
    assignment at that point of the program; otherwise the variable's host value. A plain
    number ``lr`` set inside an ``ir_if`` branch becomes such a variable first (else the
    Python value would be the rate of every iteration, the branch taken or not).

    Raises:
        RuntimeError: a plain value set in a loop body after the update read it there:
            the body is traced once, so later iterations would still use the old value.
    """

    def __getitem__(self, key):
        loops = _loop_scopes()
        if loops:                                 # remembered for __setitem__'s check
            reads = self.__dict__.setdefault("_reads", {})
            reads.setdefault(key, weakref.WeakSet()).update(loops)
        return dict.__getitem__(self, key)

    def __setitem__(self, key, value) -> None:
        cur = self.get(key)
        device = isinstance(cur, Tensor) and cur._var is not None
        if key != "params" and not device and value is not cur \
                and any(s in self.__dict__.get("_reads", {}).get(key, ()) for s in _loop_scopes()):
            raise RuntimeError(
                f"param_groups[...][{key!r}] is set at {user_site()} after the optimizer read it "
                f"earlier in this loop body: the body is traced once, so the next iterations "
                f"would still use the value it had then. Set it before optimizer.step(), or "
                f"use a scheduler (autodiff.optim.lr_scheduler, e.g. LambdaLR)")
        if key == "lr" and isinstance(cur, numbers.Real) and _in_branch():
            # a branch taken on the device: the rate becomes a variable the branch
            # assigns (the Python value would hold for every iteration, taken or not)
            cur = Tensor(np.float32(cur))
            dict.__setitem__(self, key, cur)
        if key == "params" or not (isinstance(cur, Tensor) and cur._var is not None) \
                or value is cur or (isinstance(value, Tensor) and value._var is not None):
            dict.__setitem__(self, key, value)
            return
        if TRACER.scope is TRACER.root and cur._var not in TRACER.root.current \
                and not isinstance(value, Tensor):
            OWNERS.check(cur._var, write=True)
            cur._var.value = np.asarray(value, np.float32).reshape(cur.shape)
            return
        with no_grad():
            cur.copy_(value if isinstance(value, Tensor) else float(value))


def _scalar(v):
    """A group value for ``state_dict``: tensors become Python floats (their current
    value), tuples element-wise."""
    if isinstance(v, Tensor):
        return float(v.numpy())
    if isinstance(v, tuple):
        return tuple(_scalar(x) for x in v)
    return v


def _keep_device_values(cur, new):
    """The group value to store when loading ``new`` over ``cur``: a device-valued
    hyper-parameter (a scheduler's variable, alone or in a tuple such as ``betas``) keeps
    its variable, which takes the loaded value."""
    if isinstance(cur, Tensor) and cur._var is not None:
        cur._var.value = np.asarray(_as_array(new, "float32")).reshape(cur.shape)
        return cur
    if isinstance(cur, tuple) and isinstance(new, (tuple, list)) and len(cur) == len(new):
        return tuple(_keep_device_values(c, n) for c, n in zip(cur, new))
    return tuple(new) if isinstance(new, list) else new


def check(cond: bool, msg: str) -> None:
    """Raise ``ValueError(msg)`` unless ``cond`` (PyTorch's hyper-parameter checks)."""
    if not cond:
        raise ValueError(msg)


def number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def nonzero(v) -> bool:
    """Whether a hyper-parameter is in use: a device value (tensor) always is."""
    return isinstance(v, Tensor) or bool(v)


def pow_(beta, step: Tensor):
    """``beta ** step`` on the device; a Python ``beta`` as ``exp(step * log(beta))`` with
    the log taken in float64 on the host (accurate to a few float32 ulps for any step)."""
    if isinstance(beta, Tensor):
        return beta ** step
    if beta <= 0:
        return Tensor(np.float32(beta)) ** step
    return (step * math.log(beta)).exp()


def one_minus_pow(beta, step: Tensor):
    """``1 - beta ** step`` without cancellation for a Python ``beta`` near 1:
    ``-expm1(step * log(beta))``, a Taylor series where ``|step * log(beta)| < 0.1`` (the
    bias corrections of Adam-like optimizers and RAdam's ``rho_t`` need this to match a
    float64 host computation)."""
    if isinstance(beta, Tensor) or beta <= 0:
        return 1.0 - pow_(beta, step)
    x = step * math.log(beta)
    taylor = x * (1.0 + x * (1 / 2 + x * (1 / 6 + x * (1 / 24 + x * (1 / 120 + x / 720)))))
    return -where(x.abs() < 0.1, taylor, x.exp() - 1.0)


def decay(p: Tensor, g: Tensor, group: dict) -> Tensor:
    """The gradient after ``weight_decay``: ``g + wd * p`` (L2), or with
    ``decoupled_weight_decay`` ``p *= 1 - lr * wd`` first and ``g`` unchanged (AdamW,
    Loshchilov & Hutter, "Decoupled Weight Decay Regularization", 2019)."""
    wd = group["weight_decay"]
    if not wd:
        return g
    if group.get("decoupled_weight_decay"):
        p.mul_(1.0 - group["lr"] * wd)
        return g
    return g + p * wd


def adam_moments(g: Tensor, st: dict, beta1, beta2) -> tuple[Tensor, Tensor]:
    """Adam's moment updates in place (Kingma & Ba, 2015): ``exp_avg`` moves toward ``g``
    by ``1 - beta1``, ``exp_avg_sq`` toward ``g * g`` by ``1 - beta2``. Returns both."""
    m = st["exp_avg"].add_((g - st["exp_avg"]) * (1.0 - beta1))
    v = st["exp_avg_sq"].mul_(beta2).add_(g * g * (1.0 - beta2))
    return m, v


class Optimizer:
    """Base class, as ``torch.optim.Optimizer``.

    Args:
        params: parameters (variables that require grad), or a list of dicts
            ``{"params": [...], **hyper-parameters}`` (parameter groups; missing keys take
            ``defaults``).
        defaults: every hyper-parameter's default, PyTorch's keys (also the performance
            flags ``foreach``/``fused``/``capturable``, accepted and without effect here).

    Attributes:
        param_groups: list of dicts, PyTorch's layout.
        state: per-parameter dicts of state tensors (``optimizer.state[p]["exp_avg"]``),
            created at the first traced ``step()`` (or by ``load_state_dict``).

    Raises:
        ValueError: an empty parameter list, or a parameter in two groups.
        TypeError: a parameter that is not a float32 tensor made from data.
    """

    #: state keys created by :meth:`init_state`, in PyTorch's order
    state_keys: tuple = ()
    #: 0-d state entries that advance alike for every parameter of a group (the step
    #: count, NAdam's ``mu_product``): parameters whose state starts together share one
    #: tensor, advanced once per :meth:`step` (:meth:`once`), so the traced update computes
    #: the scalar work that depends on it (bias corrections) once per group instead of
    #: once per parameter. ``state[p]["step"]`` and ``state_dict()`` read as in PyTorch.
    shared_state: tuple = ("step",)

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        if self.defaults.get("differentiable"):
            raise NotImplementedError(f"{type(self).__name__}: differentiable=True is not "
                                      "supported (updates are traced without gradients)")
        self.state = _ParamState()
        self._advanced: dict = {}       # shared state advanced in this step() (once)
        self._traced: set = set()       # ids of shared state tensors some update advanced
        self.param_groups: list[dict] = []
        params = list(params) if not isinstance(params, Tensor) else [params]
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        for g in params:
            self.add_param_group(g)

    def add_param_group(self, param_group: dict) -> None:
        """Add a group (``{"params": ..., **hyper-parameters}``), defaults filled in.

        Raises:
            ValueError: a parameter already in another group. TypeError: a bad parameter.
        """
        group = ParamGroup(param_group)
        ps = group.get("params")
        ps = [ps] if isinstance(ps, Tensor) else list(ps or ())
        for p in ps:
            if not isinstance(p, Tensor) or p._var is None:
                raise TypeError("optimizer can only optimize tensors made from data "
                                f"(parameters), got {type(p).__name__}")
            if p.dtype != "float32":
                raise TypeError(f"optimizer parameters must be float32, got {p.dtype}")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in ps}) != len(ps) or any(id(p) in seen for p in ps):
            raise ValueError("some parameters appear in more than one parameter group")
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        group["params"] = ps
        self.param_groups.append(group)

    @property
    def params(self) -> list:
        """Every parameter, group by group."""
        return [p for g in self.param_groups for p in g["params"]]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients: ``.grad = None``, or zeros where there was one with
        ``set_to_none=False`` (PyTorch's: an update before the next ``backward()`` then
        steps with a zero gradient instead of skipping the parameter)."""
        zero_grads(self.params, set_to_none)

    # -- the update --------------------------------------------------------------------
    def init_state(self, p: Tensor, group: dict) -> dict:
        """The state of ``p`` before its first step (variables). Subclasses override."""
        return {}

    def update(self, p: Tensor, grad: Tensor, group: dict, state: dict) -> None:
        """Trace one update of ``p`` (``grad`` already negated for ``maximize``)."""
        raise NotImplementedError

    def new_state(self, p: Tensor, group: dict, started: dict) -> dict:
        """:meth:`init_state` of ``p``, its :attr:`shared_state` entries replaced by those
        of the group's parameters started in the same call (``started``, one dict per
        call: ``(id(group), key) -> tensor``)."""
        st = self.init_state(p, group)
        for k in self.shared_state:
            if k in st:
                st[k] = started.setdefault((id(group), k), st[k])
        return st

    def once(self, state: dict, key: str, advance) -> Tensor:
        """``advance(state[key])`` traced once per :meth:`step` for a tensor that several
        parameters share (:attr:`shared_state`); later callers get the first result."""
        t = state[key]
        done = self._advanced.get(id(t))
        if done is None:
            done = self._advanced[id(t)] = advance(t)
            self._traced.add(id(t))
        return done

    def one_minus_pow(self, beta, step: Tensor) -> Tensor:
        """:func:`one_minus_pow` traced once per :meth:`step` for each ``beta`` and shared
        ``step`` tensor (the bias corrections every parameter of a group computes alike):
        later parameters reuse the first result instead of tracing a copy for the graph's
        CSE to merge (the main job traces 2,561 nodes instead of 4,127). ``beta``: a
        Python float or a Tensor; ``step``: the float32 0-d step tensor. Returns a float32
        0-d Tensor; raises nothing of its own."""
        key = ("1 - beta ** step", beta if isinstance(beta, (int, float)) else id(beta),
               id(step))
        done = self._advanced.get(key)
        if done is None:
            done = self._advanced[key] = (one_minus_pow(beta, step), beta, step)
        return done[0]

    def step(self, closure=None):
        """Trace one update of every parameter that has a gradient (others are skipped,
        frozen parameters among them), group by group.

        Args:
            closure: optional callable re-evaluating the model and returning the loss
                (traced before the update); its result is returned.
        """
        loss = closure() if closure is not None else None
        started: dict = {}
        self._advanced = {}
        try:
            with no_grad():
                for group in self.param_groups:
                    for p in group["params"]:
                        if p.grad is None:
                            continue
                        st = self.state[p]
                        if not st:
                            st.update(self.new_state(p, group, started))
                        g = -p.grad if group.get("maximize") else p.grad
                        self.update(p, g, group, st)
        finally:
            self._advanced = {}
        return loss

    # -- state dicts ---------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"state": {index: {key: array}}, "param_groups": [{..., "params": [index]}]}``
        as PyTorch's: parameters numbered across groups in order, state values numpy
        copies (``step`` a float32 0-d array), device-valued hyper-parameters (a
        scheduler's ``lr``) as their current Python floats. ``torch.optim`` loads it after
        converting the arrays with ``torch.as_tensor``."""
        index: dict[int, int] = {}
        groups = []
        for g in self.param_groups:
            packed = {k: _scalar(v) for k, v in g.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in g["params"]]
            groups.append(packed)
        state = {}
        for pid, i in index.items():
            st = dict.get(self.state, pid)
            if st:
                state[i] = {k: (None if v is None else v.numpy()) for k, v in st.items()
                            if not k.startswith("_")}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a state dict from :meth:`state_dict` or from a ``torch.optim`` optimizer of
        the same kind (values may be torch tensors). Hyper-parameters held by a scheduler
        on the device are set in place.

        Parameters of a group loaded at the same step share one step tensor
        (:attr:`shared_state`); loaded at different steps, each gets its own.

        Raises:
            ValueError: a different number of groups, or of parameters in a group; a state
                tensor of the wrong shape; different values for a :attr:`shared_state`
                tensor that a traced update already advances for several parameters.
        """
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        id_map = {}
        for g, sg in zip(self.param_groups, saved):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group")
            id_map.update(zip(sg["params"], g["params"]))
            for k, v in sg.items():
                if k in ("params", "param_names"):
                    continue
                g[k] = _keep_device_values(g.get(k), v)
        group_of = {id(p): g for g in self.param_groups for p in g["params"]}
        loaded: dict = {}       # id of a tensor set here -> (its value, parameter index)
        shared: dict = {}       # (id(group), key, value bytes) -> tensor made here
        for i, st in state_dict["state"].items():
            p = id_map[int(i)]
            ours = self.state[p]
            for k, v in st.items():
                if v is None:
                    continue
                arr = _as_array(v, "float32")
                t = ours.get(k)
                if t is not None and k in self.shared_state and id(t) not in self._traced:
                    t = None    # no update reads it yet: remade, shared where values agree
                if t is not None:
                    if tuple(arr.shape) != t.shape:
                        raise ValueError(f"load_state_dict: state {k!r} has shape "
                                         f"{list(arr.shape)}, expected {list(t.shape)}")
                    if id(t) in loaded and not np.array_equal(loaded[id(t)][0], arr):
                        raise ValueError(
                            f"load_state_dict: state {k!r} of parameters {loaded[id(t)][1]} "
                            f"and {i} differs, but their traced updates share one {k!r} "
                            "tensor (its parameters started together); load the state "
                            "before the first traced step()")
                    loaded[id(t)] = (arr, i)
                    t._var.value = arr.copy()
                elif k in self.shared_state and arr.ndim == 0:
                    key = (id(group_of[id(p)]), k, arr.tobytes())
                    if key not in shared:
                        shared[key] = Tensor(arr.copy())
                    ours[k] = shared[key]
                else:
                    ours[k] = Tensor(arr.copy())
            self.loaded_state(p, ours)

    def loaded_state(self, p: Tensor, state: dict) -> None:
        """Hook: fix internal state after ``load_state_dict`` (e.g. SGD's started flag)."""

    def state_tensors(self) -> list[Tensor]:
        """Every state variable (for checkpointing or inspection), each once (a shared
        step count included once)."""
        out = {id(t): t for st in self.state.values() for t in st.values() if t is not None}
        return list(out.values())

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {_scalar(v)}" for k, v in sorted(g.items()) if k != "params"]
        return "\n".join(lines + [")"])
