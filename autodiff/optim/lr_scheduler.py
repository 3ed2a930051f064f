"""Learning-rate schedules inside the compiled loop, spelled like ``torch.optim.lr_scheduler``.

A scheduler replaces each parameter group's ``lr`` by a float32 0-d variable and keeps its
step count (PyTorch's ``last_epoch``) in another. ``scheduler.step()`` traced in an
``ir_for`` body adds 1 to the count and writes every group's new learning rate, computed on
the device from the count: no host work per iteration. The optimizer's update reads the
``lr`` variable like any other value, so the usual order (``optimizer.step()`` then
``scheduler.step()``) gives PyTorch's sequence of learning rates.

Each schedule is its closed form in the step ``t``. PyTorch's schedules that are
*chainable* (``StepLR``, ``MultiStepLR``, ``ConstantLR``, ``LinearLR``, ``ExponentialLR``,
``PolynomialLR``, ``CosineAnnealingLR``) compute the next rate from the current one, so a
rate set by hand (``group["lr"] = 0.003``) or a scheduler state loaded at another step
carries on; a step here does the same with ``closed(t) * lr / closed(t - 1)`` (about
``eta_min`` for the cosine, whose trough step adds ``closed(t) - closed(t - 1)`` as
PyTorch's does). Left alone, the ratio is exactly 1 and the rate is the closed form itself.
Construction performs
PyTorch's initial step on the host, so ``get_last_lr()`` is right before anything runs and,
after ``execute()``, returns the values the loop ended with. To see the learning rate of
every iteration, hand ``optimizer.param_groups[i]["lr"]`` to a ``Receiver``.
"""
from __future__ import annotations

import math

import numpy as np

from ..graph.tensor import Tensor, where
from ..graph.trace import no_grad

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR",
           "LinearLR", "ExponentialLR", "PolynomialLR", "CosineAnnealingLR", "OneCycleLR",
           "SequentialLR", "CosineAnnealingWarmRestarts", "ReduceLROnPlateau",
           "ChainedScheduler", "CyclicLR"]


# -- arithmetic on a step that is a Python float (host) or a 0-d tensor (device) --------------
def _floor(x):
    """``floor(x)`` of a non-negative value (a tensor: truncation by an int32 cast)."""
    return x.int().float() if isinstance(x, Tensor) else float(math.floor(x))


def _cos(x):
    return x.cos() if isinstance(x, Tensor) else math.cos(x)


def _min(x, c: float):
    return x.minimum(c) if isinstance(x, Tensor) else min(x, c)


def _if(cond_t, a, b):
    """``a if cond else b``; ``cond_t`` a bool or a 0/1 tensor."""
    if isinstance(cond_t, Tensor):
        return where(cond_t, a, b)
    return a if cond_t else b


def _ge(t, c):
    return t >= c if isinstance(t, Tensor) else t >= c


def _value(x) -> float:
    return float(x.numpy()) if isinstance(x, Tensor) else float(x)


def _rate_variables(optimizer) -> list:
    """Every group's ``lr`` as a float32 0-d variable (made from its value where it is a
    number), which a schedule rewrites on the device and the updates read."""
    out = []
    for g in optimizer.param_groups:
        lr = g["lr"]
        if not (isinstance(lr, Tensor) and lr._var is not None):
            lr = Tensor(np.float32(_value(lr)))
            g["lr"] = lr
        out.append(lr)
    return out


def _cycled_momentum(optimizer, start) -> tuple[bool, list]:
    """Every group's momentum (``betas[0]`` for Adam-like optimizers) replaced by a 0-d
    variable holding ``start[i]``, for a schedule that cycles it on the device (OneCycleLR,
    CyclicLR). Returns ``(use_beta1, variables)``.

    Raises:
        ValueError: the optimizer has neither momentum nor betas (PyTorch's message).
    """
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` "
                         "option enabled")
    use_beta1, moms = "betas" in optimizer.defaults, []
    for g, hi in zip(optimizer.param_groups, start):
        mom = Tensor(np.float32(hi))
        if use_beta1:
            g["betas"] = (mom, *g["betas"][1:])
        else:
            g["momentum"] = mom
        moms.append(mom)
    return use_beta1, moms


class LRScheduler:
    """Base class (``torch.optim.lr_scheduler.LRScheduler``).

    Args:
        optimizer: an :class:`~autodiff.optim.Optimizer`; each group gets ``initial_lr``
            (its learning rate) unless resuming.
        last_epoch: ``-1`` to start; else the step to resume from (groups must hold
            ``initial_lr``).

    Attributes:
        base_lrs: every group's ``initial_lr``.

    Subclasses define :meth:`lr_at`, the learning rate of group ``i`` at step ``t``; a
    chainable one (PyTorch's ``get_lr`` reads the current rate) sets :attr:`chainable`, and
    :attr:`offset` when its recursion is about a floor other than 0.

    Raises:
        KeyError: resuming without ``initial_lr`` in a group.
    """

    chainable = False
    offset = 0.0

    def __init__(self, optimizer, last_epoch: int = -1):
        self.optimizer = optimizer
        for i, g in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                g.setdefault("initial_lr", _value(g["lr"]))
            elif "initial_lr" not in g:
                raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                               "when resuming an optimizer")
        self.base_lrs = [float(g["initial_lr"]) for g in optimizer.param_groups]
        self._step_t = Tensor(np.float32(last_epoch + 1))
        self._lrs = _rate_variables(optimizer)
        self._initial_step(last_epoch + 1)

    def _initial_step(self, t: int) -> None:
        """PyTorch's step at construction: the rates at step ``t``, set on the host; a
        chainable schedule starting (``t`` 0) scales the current rate by its closed form's
        start over ``base_lr`` (so a second scheduler on the same optimizer composes with
        the first, as PyTorch's ``get_lr`` at step 0 does)."""
        for i, v in enumerate(self._lrs):
            new = float(self.lr_at(float(t), i))
            base, o = self.base_lrs[i], self.offset
            if self.chainable and t == 0 and base != o:
                new = (float(v._var.value) - o) * (new - o) / (base - o) + o
            v._var.value = np.asarray(new, np.float32).reshape(())

    def lr_at(self, t, i: int):
        """Learning rate of group ``i`` at step ``t`` (float or 0-d tensor)."""
        raise NotImplementedError

    def step(self, epoch: int | None = None) -> None:
        """Trace one schedule step: the count becomes ``t + 1`` (or ``epoch``, deprecated
        in PyTorch) and every group's learning rate is rewritten from it, on the device."""
        with no_grad():
            t = self._step_t.add_(1.0) if epoch is None else self._step_t.fill_(float(epoch))
            for i, v in enumerate(self._lrs):
                new = self.lr_at(t, i)
                if self.chainable and epoch is None:
                    new = self._chained(v, new, self.lr_at(t - 1.0, i))
                v.copy_(new)

    def _chained(self, lr, new, prev):
        """PyTorch's recursive step from the current rate ``lr``: the closed form's change
        from ``prev`` (step ``t - 1``) to ``new``, as a ratio about :attr:`offset`, or added
        where ``prev`` is at the offset (the ratio's 0/0)."""
        o = self.offset
        at_floor = prev == o
        ratio = (lr - o) / where(at_floor, 1.0, prev - o)
        return where(at_floor, lr + (new - prev), (new - o) * ratio + o)

    @property
    def last_epoch(self) -> int:
        """The step count's current host value (updated when ``execute()`` ends)."""
        return int(self._step_t.numpy())

    @last_epoch.setter
    def last_epoch(self, value: int) -> None:
        self._step_t._var.value = np.asarray(value, np.float32)

    def get_last_lr(self) -> list[float]:
        """Every group's learning rate (host values: after construction, or as the last
        ``execute()`` left them)."""
        return [_value(v) for v in self._lrs]

    def lr_tensors(self) -> list[Tensor]:
        """Every group's learning-rate variable (hand them to a ``Receiver``)."""
        return list(self._lrs)

    def state_dict(self) -> dict:
        """Plain attributes (PyTorch's keys where they exist: ``last_epoch``,
        ``base_lrs``, ``_last_lr``, the schedule's own arguments)."""
        skip = {"optimizer", "_step_t", "_lrs", "_moms", "lr_lambdas", "_schedulers"}
        out = {k: v for k, v in self.__dict__.items() if k not in skip}
        out.update(last_epoch=self.last_epoch, _last_lr=self.get_last_lr())
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore :meth:`state_dict`'s attributes (the step count included)."""
        for k, v in state_dict.items():
            if k == "last_epoch":
                self.last_epoch = v
            elif k != "_last_lr":
                setattr(self, k, v)


class LambdaLR(LRScheduler):
    """``base_lr * lr_lambda(t)``; the lambda (one, or one per group) is traced on the step
    tensor, so it must use tensor arithmetic (``0.95 ** t``, ``(t / 100).clamp(max=1)``,
    ``autodiff.where``), not Python control flow on ``t``."""

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        n = len(optimizer.param_groups)
        lams = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if len(lams) != n:
            raise ValueError(f"Expected {n} lr_lambdas, but got {len(lams)}")
        self.lr_lambdas = lams
        super().__init__(optimizer, last_epoch)

    def _initial_step(self, t: int) -> None:
        try:
            super()._initial_step(t)
        except (TypeError, AttributeError):     # the lambda needs a tensor: trace it
            with no_grad():
                for i, v in enumerate(self._lrs):
                    v.copy_(self.lr_at(self._step_t, i))

    def lr_at(self, t, i):
        return self.lr_lambdas[i](t) * self.base_lrs[i]


class MultiplicativeLR(LambdaLR):
    """The learning rate times ``lr_lambda(t)`` at every step after the first (recursive,
    as PyTorch's)."""

    def _initial_step(self, t: int) -> None:
        pass                                              # PyTorch keeps lr at step 0

    def step(self, epoch: int | None = None) -> None:
        with no_grad():
            t = self._step_t.add_(1.0) if epoch is None else self._step_t.fill_(float(epoch))
            for i, v in enumerate(self._lrs):
                v.copy_(v * where(t > 0.0, self.lr_lambdas[i](t), 1.0))


class StepLR(LRScheduler):
    """``base_lr * gamma ** floor(t / step_size)``."""

    chainable = True

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, t, i):
        return self.gamma ** _floor(t / self.step_size) * self.base_lrs[i]


class MultiStepLR(LRScheduler):
    """``base_lr * gamma ** (number of milestones <= t)`` (repeated milestones count
    repeatedly, as in PyTorch)."""

    chainable = True

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        self.milestones, self.gamma = sorted(int(m) for m in milestones), float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, t, i):
        n = 0.0
        for m in self.milestones:
            n = n + _if(_ge(t, m), 1.0, 0.0)
        return self.gamma ** n * self.base_lrs[i]


class ConstantLR(LRScheduler):
    """``base_lr * factor`` before step ``total_iters``, ``base_lr`` after."""

    chainable = True

    def __init__(self, optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1):
        if not 0 <= factor <= 1:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = float(factor), int(total_iters)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, t, i):
        return _if(_ge(t, self.total_iters), 1.0, self.factor) * self.base_lrs[i]


class LinearLR(LRScheduler):
    """``base_lr * (start + (end - start) * min(t, total_iters) / total_iters)``: a linear
    warmup (or decay) over ``total_iters`` steps."""

    chainable = True

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1):
        if not 0 < start_factor <= 1:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 "
                             "and less or equal to 1.")
        if not 0 <= end_factor <= 1:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor = float(start_factor), float(end_factor)
        self.total_iters = int(total_iters)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, t, i):
        frac = _min(t, float(self.total_iters)) * (1.0 / self.total_iters)
        return (frac * (self.end_factor - self.start_factor) + self.start_factor) \
            * self.base_lrs[i]


class ExponentialLR(LRScheduler):
    """``base_lr * gamma ** t``."""

    chainable = True

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, t, i):
        return self.gamma ** t * self.base_lrs[i]


class PolynomialLR(LRScheduler):
    """``base_lr * (1 - min(t, total_iters) / total_iters) ** power``."""

    chainable = True

    def __init__(self, optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1):
        self.total_iters, self.power = int(total_iters), float(power)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, t, i):
        return (1.0 - _min(t, float(self.total_iters)) * (1.0 / self.total_iters)) \
            ** self.power * self.base_lrs[i]


class CosineAnnealingLR(LRScheduler):
    """``eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2`` (Loshchilov and
    Hutter, 2017, without restarts; past ``T_max`` it rises again, as PyTorch's)."""

    chainable = True

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer, last_epoch)

    @property
    def offset(self) -> float:
        return self.eta_min

    def lr_at(self, t, i):
        c = _cos(t * (math.pi / self.T_max))
        return (c + 1.0) * ((self.base_lrs[i] - self.eta_min) / 2.0) + self.eta_min


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith and Topin, 2018), as ``torch.optim.lr_scheduler.OneCycleLR``.

    The learning rate rises from ``max_lr / div_factor`` to ``max_lr`` over the first
    ``pct_start`` of ``total_steps`` and anneals to ``initial_lr / final_div_factor`` (three
    phases with ``three_phase``); with ``cycle_momentum`` the momentum (``betas[0]`` for
    Adam-like optimizers) moves inversely between ``max_momentum`` and ``base_momentum`` and
    becomes a device value too. Steps past ``total_steps`` continue the last phase's curve
    (PyTorch raises on the host; a compiled loop cannot).

    Raises:
        ValueError: bad ``total_steps``/``epochs``, ``pct_start``, ``anneal_strategy``, or
            momentum cycling on an optimizer without momentum.
    """

    def __init__(self, optimizer, max_lr, total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1):
        if total_steps is not None:
            if total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = int(total_steps)
        elif epochs is not None and steps_per_epoch is not None:
            if epochs <= 0 or steps_per_epoch <= 0:
                raise ValueError("Expected positive integer epochs and steps_per_epoch")
            self.total_steps = int(epochs) * int(steps_per_epoch)
        else:
            raise ValueError("You must define either total_steps OR (epochs AND "
                             "steps_per_epoch)")
        if not 0 <= pct_start <= 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        n = self.total_steps
        if three_phase:
            self._phases = [
                (float(pct_start * n) - 1, "initial_lr", "max_lr", "max_momentum",
                 "base_momentum"),
                (float(2 * pct_start * n) - 2, "max_lr", "initial_lr", "base_momentum",
                 "max_momentum"),
                (n - 1.0, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
        else:
            self._phases = [
                (float(pct_start * n) - 1, "initial_lr", "max_lr", "max_momentum",
                 "base_momentum"),
                (n - 1.0, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        self.anneal_strategy, self.cycle_momentum = anneal_strategy, cycle_momentum
        groups = optimizer.param_groups
        per = lambda v: list(v) if isinstance(v, (list, tuple)) else [v] * len(groups)
        max_lrs = per(max_lr)
        if last_epoch == -1:
            for g, m in zip(groups, max_lrs):
                g["initial_lr"] = m / div_factor
                g["max_lr"] = m
                g["min_lr"] = g["initial_lr"] / final_div_factor
        self._moms = []
        if cycle_momentum:
            if last_epoch == -1:
                for g, lo, hi in zip(groups, per(base_momentum), per(max_momentum)):
                    g["base_momentum"], g["max_momentum"] = float(lo), float(hi)
            self.use_beta1, self._moms = _cycled_momentum(optimizer, per(max_momentum))
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct):
        if self.anneal_strategy == "cos":
            return (_cos(pct * math.pi) + 1.0) * ((start - end) / 2.0) + end
        return pct * (end - start) + start

    def _at(self, t, i: int, lr: bool):
        """Learning rate (``lr``) or momentum of group ``i`` at step ``t``: phase ``k``
        applies while ``t <= end_k`` and no earlier phase does (the last one after)."""
        g = self.optimizer.param_groups[i]
        vals, start = [], 0.0
        for end, a, b, ma, mb in self._phases:
            pct = (t - start) * (1.0 / (end - start))
            vals.append(self._anneal(g[a], g[b], pct) if lr else
                        self._anneal(g[ma], g[mb], pct))
            start = end
        out = vals[-1]
        for (end, *_), v in zip(reversed(self._phases[:-1]), reversed(vals[:-1])):
            out = _if(t <= end, v, out)
        return out

    def lr_at(self, t, i):
        return self._at(t, i, True)

    def _initial_step(self, t: int) -> None:
        super()._initial_step(t)
        for i, m in enumerate(self._moms):
            m._var.value = np.asarray(self._at(float(t), i, False), np.float32).reshape(())

    def step(self, epoch: int | None = None) -> None:
        super().step(epoch)
        with no_grad():
            for i, m in enumerate(self._moms):
                m.copy_(self._at(self._step_t, i, False))


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR (Loshchilov and Hutter, 2017): cosine annealing from ``base_lr`` to ``eta_min``
    over ``T_i`` steps, restarted at every cycle's end, cycles ``T_0``, ``T_0 * T_mult``, ...
    Closed form in the step (the cycle from the boundaries it passed: exact for counts
    below ``2**24``, the only boundaries compared; 40 cycles at most).

    Raises:
        ValueError: ``T_0`` not a positive int, ``T_mult`` not an int >= 1.
    """
    MAX_CYCLES = 40

    def __init__(self, optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        self.T_0, self.T_mult, self.eta_min = T_0, T_mult, float(eta_min)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, t, i):
        if self.T_mult == 1:
            start, length = _floor(t * (1.0 / self.T_0)) * float(self.T_0), float(self.T_0)
        else:
            start, length, edge, span = 0.0, float(self.T_0), 0.0, float(self.T_0)
            for _ in range(self.MAX_CYCLES):        # the cycles whose start t has passed
                edge, span = edge + span, span * self.T_mult
                if edge >= 2.0 ** 24:                # beyond any exact float32 step count
                    break
                past = _ge(t, edge)
                start, length = _if(past, edge, start), _if(past, span, length)
        frac = (t - start) * (1.0 / length) if isinstance(length, float) else \
            (t - start) / length
        return (_cos(frac * math.pi) + 1.0) * ((self.base_lrs[i] - self.eta_min) / 2.0) \
            + self.eta_min


class CyclicLR(LRScheduler):
    """Cyclical learning rates (Smith, 2017), as ``torch.optim.lr_scheduler.CyclicLR``:
    the rate goes from ``base_lr`` up to ``max_lr`` in ``step_size_up`` steps and back in
    ``step_size_down``; ``mode`` ``"triangular"`` (constant amplitude), ``"triangular2"``
    (halved every cycle) or ``"exp_range"`` (times ``gamma ** t``), or a ``scale_fn`` traced
    on the cycle (or step) tensor. With ``cycle_momentum`` the momentum (``betas[0]``)
    moves inversely between ``max_momentum`` and ``base_momentum`` on the device.

    Raises:
        ValueError: an unknown ``mode``, or momentum cycling on an optimizer without one.
    """

    def __init__(self, optimizer, base_lr, max_lr, step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn=None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum=0.8, max_momentum=0.9,
                 last_epoch: int = -1):
        groups = optimizer.param_groups
        per = lambda v: list(v) if isinstance(v, (list, tuple)) else [v] * len(groups)  # noqa
        base_lrs = [float(b) for b in per(base_lr)]
        if last_epoch == -1:
            for g, b in zip(groups, base_lrs):
                g["lr"] = b
                g["initial_lr"] = b
        self.max_lrs = [float(m) for m in per(max_lr)]
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size, self.step_ratio = up + down, up / (up + down)
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma = mode, float(gamma)
        if scale_fn is None:
            self.scale_mode = "iterations" if mode == "exp_range" else "cycle"
            self._scale = {"triangular": lambda x: 1.0,
                           "triangular2": lambda x: 0.5 ** (x - 1.0),
                           "exp_range": lambda x: self.gamma ** x}[mode]
        else:
            self.scale_mode, self._scale = scale_mode, scale_fn
        self.cycle_momentum, self._moms = cycle_momentum, []
        if cycle_momentum:
            self.base_momentums = [float(m) for m in per(base_momentum)]
            self.max_momentums = [float(m) for m in per(max_momentum)]
            self.use_beta1, self._moms = _cycled_momentum(optimizer, self.max_momentums)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _height(self, t, lo: float, hi: float):
        """``(hi - lo) * scale_factor * scale_fn(...)`` at step ``t``."""
        cycle = _floor(t * (1.0 / self.total_size) + 1.0)
        x = t * (1.0 / self.total_size) + 1.0 - cycle
        r = self.step_ratio
        factor = _if(x <= r, x * (1.0 / r), (x - 1.0) * (1.0 / (r - 1.0)))
        return factor * (hi - lo) * self._scale(cycle if self.scale_mode == "cycle" else t)

    def lr_at(self, t, i):
        base = float(self.optimizer.param_groups[i]["initial_lr"])
        return self._height(t, base, self.max_lrs[i]) + base

    def _initial_step(self, t: int) -> None:
        super()._initial_step(t)
        for i, m in enumerate(self._moms):
            hi = self.max_momentums[i]
            v = hi - self._height(float(t), self.base_momentums[i], hi)
            m._var.value = np.asarray(v, np.float32).reshape(())

    def step(self, epoch: int | None = None) -> None:
        super().step(epoch)
        with no_grad():
            for i, m in enumerate(self._moms):
                hi = self.max_momentums[i]
                m.copy_(hi - self._height(self._step_t, self.base_momentums[i], hi))


class ReduceLROnPlateau:
    """``torch.optim.lr_scheduler.ReduceLROnPlateau`` on the device: ``step(metric)`` (a
    0-d tensor computed in the loop, e.g. a validation loss) multiplies every group's rate
    by ``factor`` (not below ``min_lr``; changes under ``eps`` are skipped) after more than
    ``patience`` steps without improving on the best value (``threshold``, ``rel`` or
    ``abs``), then waits ``cooldown`` steps. The best value, the step counters and the
    rates are variables: no host work per step.

    Raises:
        ValueError: bad ``mode``, ``threshold_mode`` or ``factor >= 1``, or ``min_lr`` of
            another length than the groups.
    """

    def __init__(self, optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
                 min_lr=0.0, eps: float = 1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown!")
        groups = optimizer.param_groups
        mins = list(min_lr) if isinstance(min_lr, (list, tuple)) else [min_lr] * len(groups)
        if len(mins) != len(groups):
            raise ValueError(f"expected {len(groups)} min_lrs, got {len(mins)}")
        self.optimizer, self.mode, self.factor = optimizer, mode, float(factor)
        self.patience, self.cooldown, self.eps = int(patience), int(cooldown), float(eps)
        self.threshold, self.threshold_mode = float(threshold), threshold_mode
        self.min_lrs = [float(m) for m in mins]
        worst = math.inf if mode == "min" else -math.inf
        self._best = Tensor(np.float32(worst))
        self._bad = Tensor(np.float32(0.0))            # num_bad_epochs
        self._cool = Tensor(np.float32(0.0))           # cooldown_counter
        self._step_t = Tensor(np.float32(0.0))
        self._lrs = _rate_variables(optimizer)

    def _better(self, a, best):
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if rel else best - self.threshold)
        return a > (best * (self.threshold + 1.0) if rel else best + self.threshold)

    def step(self, metrics, epoch=None) -> None:
        """Trace one step with ``metrics`` (a 0-d tensor or a number)."""
        with no_grad():
            m = metrics if isinstance(metrics, Tensor) else Tensor(np.float32(metrics))
            m = m.float().reshape(())
            self._step_t.add_(1.0)
            better = self._better(m, self._best)
            self._best.copy_(where(better, m, self._best))
            bad = where(better, 0.0, self._bad + 1.0)
            cooling = self._cool > 0
            self._cool.copy_(where(cooling, self._cool - 1.0, self._cool))
            bad = where(cooling, 0.0, bad)                 # ignored during the cooldown
            reduce = bad > float(self.patience)
            for lr, lo in zip(self._lrs, self.min_lrs):
                new = (lr * self.factor).maximum(lo)
                lr.copy_(where(reduce & (lr - new > self.eps), new, lr))
            self._cool.copy_(where(reduce, float(self.cooldown), self._cool))
            self._bad.copy_(where(reduce, 0.0, bad))

    @property
    def best(self) -> float:
        return _value(self._best)

    @property
    def num_bad_epochs(self) -> int:
        return int(_value(self._bad))

    @property
    def last_epoch(self) -> int:
        return int(_value(self._step_t))

    def get_last_lr(self) -> list[float]:
        return [_value(v) for v in self._lrs]

    def state_dict(self) -> dict:
        skip = {"optimizer", "_best", "_bad", "_cool", "_step_t", "_lrs"}
        out = {k: v for k, v in self.__dict__.items() if k not in skip}
        out.update(best=self.best, num_bad_epochs=self.num_bad_epochs,
                   cooldown_counter=int(_value(self._cool)), last_epoch=self.last_epoch,
                   _last_lr=self.get_last_lr())
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        for k, v in state_dict.items():
            var = {"best": self._best, "num_bad_epochs": self._bad,
                   "cooldown_counter": self._cool, "last_epoch": self._step_t}.get(k)
            if var is not None:
                var._var.value = np.asarray(v, np.float32).reshape(())
            elif k != "_last_lr":
                setattr(self, k, v)


class SequentialLR(LRScheduler):
    """Schedulers one after another (``torch.optim.lr_scheduler.SequentialLR``): the
    ``k``-th runs from ``milestones[k-1]``, restarted at its own step 0, e.g. a
    ``LinearLR`` warmup then ``CosineAnnealingLR``. The children's own ``step()`` is never
    called; this scheduler's step picks the child on the device.

    Raises:
        ValueError: not one milestone fewer than schedulers, or a child bound to another
            optimizer.
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1):
        schedulers = list(schedulers)
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to "
                             "be one more than the number of milestone points, but got number "
                             f"of schedulers {len(schedulers)} and the number of milestones "
                             f"{len(milestones)}")
        for k, s in enumerate(schedulers):
            if s.optimizer is not optimizer:
                raise ValueError(f"Sequential Schedulers expects all schedulers to belong to "
                                 f"the same optimizer, but got scheduler at index {k} to be "
                                 "different")
        self._schedulers, self._milestones = schedulers, [int(m) for m in milestones]
        for g in optimizer.param_groups:          # PyTorch resets to the initial rates
            if isinstance(g["lr"], Tensor) and g["lr"]._var is not None:
                g["lr"]._var.value = np.asarray(g["initial_lr"], np.float32)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, t, i):
        out = self._schedulers[0].lr_at(t, i)
        for m, s in zip(self._milestones, self._schedulers[1:]):
            out = _if(_ge(t, m), s.lr_at(t - float(m), i), out)
        return out


class ChainedScheduler:
    """``torch.optim.lr_scheduler.ChainedScheduler``: every scheduler's ``step()`` in turn
    (chainable schedules multiply into the same rate variable), e.g. a ``ConstantLR``
    warmup with an ``ExponentialLR`` decay.

    Raises:
        ValueError: schedulers of different optimizers.
    """

    def __init__(self, schedulers, optimizer=None):
        self._schedulers = list(schedulers)
        if not self._schedulers:
            raise ValueError("ChainedScheduler expects at least one scheduler")
        self.optimizer = optimizer or self._schedulers[0].optimizer
        for k, sch in enumerate(self._schedulers):
            if sch.optimizer is not self.optimizer:
                raise ValueError(f"ChainedScheduler expects all schedulers to belong to the "
                                 f"same optimizer, but got scheduler {type(sch).__name__} at "
                                 f"index {k} to be different")

    def step(self) -> None:
        for sch in self._schedulers:
            sch.step()

    def get_last_lr(self) -> list[float]:
        return self._schedulers[-1].get_last_lr()

    def state_dict(self) -> dict:
        return {"_schedulers": [sch.state_dict() for sch in self._schedulers]}

    def load_state_dict(self, state_dict: dict) -> None:
        for sch, st in zip(self._schedulers, state_dict["_schedulers"]):
            sch.load_state_dict(st)
