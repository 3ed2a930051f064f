"""The programs the test suite builds for the other devices, collected for the CUDA compile
checks (tests/device/test_cuda_compile.py) as optimized graph IR programs.

* :func:`op_suite`: every test of tests/graph/test_ops.py (each parametrization), its
  ``check_op`` reduced to tracing forward and backward and running once on the numpy device
  (no torch, no finite differences): the graphs ``execute()`` hands a device.
* :func:`random_programs`: the random-program generator of the OpenCL device test, same
  derandomized examples, optimized as ``execute()`` does.
* :func:`recorded`: the graphs of whatever ``fn()`` executes (examples, workloads), run on
  the numpy device with the programs recorded on their way to it.

* :func:`control_programs`: the programs of the control-flow and host-callback tests
  (:func:`control_cases`, run on the CUDA device by tests/device/test_cuda_control.py).

And the programs the CUDA execution tests share (host emulation and GPU): :func:`sweep`,
:func:`loop_program` (an SGD loop with a Feeder and a Receiver), :func:`state_after`.
"""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "graph"))
sys.path.insert(0, str(HERE.parent / "opt"))

import autodiff as ad  # noqa: E402
from host_contract import feeder, loop_program, state_after  # noqa: E402,F401


def recorded(fn) -> list:
    """The optimized graphs of every ``execute()`` that ``fn()`` runs (on the numpy device,
    whatever device ``fn`` names)."""
    from autodiff import runtime
    from autodiff.device import numpy as npdev
    graphs, real_compile, real_execute = [], npdev.compile, runtime.execute

    def compile(graph, report=None, **options):
        graphs.append(graph)
        return real_compile(graph, report=report, **options)

    def execute(device=None, **options):
        return real_execute(device="numpy", **options)
    npdev.compile, runtime.execute, ad.execute = compile, execute, execute
    try:
        fn()
    finally:
        npdev.compile, runtime.execute, ad.execute = real_compile, real_execute, real_execute
    return graphs


def _cases(fn):
    """Keyword arguments of every parametrization of test function ``fn``."""
    axes = []
    for mark in getattr(fn, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names = mark.args[0]
        names = [s.strip() for s in names.split(",")] if isinstance(names, str) else list(names)
        axis = []
        for v in mark.args[1]:
            v = getattr(v, "values", v)            # pytest.param(...)
            axis.append(dict(zip(names, v)) if len(names) > 1 else {names[0]: v})
        axes.append(axis)
    for combo in itertools.product(*axes):
        kw: dict = {}
        for part in combo:
            kw.update(part)
        yield kw


def op_suite_cases() -> list:
    """``(id, test function, keyword arguments)`` of every op-suite test case."""
    import test_ops
    out = []
    for name, fn in sorted(vars(test_ops).items()):
        if name.startswith("test_") and callable(fn):
            for i, kw in enumerate(_cases(fn)):
                out.append((f"{name}[{i}]", fn, kw))
    return out


def op_suite() -> list:
    """The graphs of every op-suite test case (see the module docstring)."""
    import op_helper
    import test_ops

    def check_op(shapes, torch_fn, ad_fn=None, *, inputs=None, seed=0, low=-2.0, high=2.0,
                 avoid=(0.0,), margin=0.1, forward_only=False, **_):
        arrays = inputs if inputs is not None else op_helper.rand_inputs(
            shapes, seed, low, high, avoid, margin)
        arrays = [np.asarray(a, np.float32) if np.issubdtype(np.asarray(a).dtype, np.floating)
                  else np.asarray(a, np.int32) for a in arrays]
        return op_helper._run(ad_fn or torch_fn, arrays, forward_only, "numpy", seed)[0]

    def run_all():
        saved = test_ops.check_op
        test_ops.check_op = check_op
        try:
            for _, fn, kw in op_suite_cases():
                ad.reset()
                fn(**kw)
        finally:
            test_ops.check_op = saved
            ad.reset()
    return recorded(run_all)


#: the control-flow and host-callback test modules (tests/graph) whose programs run on the
#: CUDA device (tests/device/test_cuda_control.py)
MODULES = ["test_control_if", "test_control_index", "test_control_while",
           "test_control_scan", "test_control_checkpoint", "test_host_callback"]
#: how a test function names the device it runs on: argument -> its CUDA value
DEVICE_ARGS = {"path": ("cuda", {}), "options": {"device": "cuda"}}


def control_cases() -> list:
    """``(id, function, keyword arguments)`` of every test of :data:`MODULES` that takes a
    device (a ``path``, ``options`` or ``device`` argument), the device set to CUDA, one per
    parametrization of its other arguments."""
    import importlib
    import inspect
    out = []
    for mod in MODULES:
        m = importlib.import_module(mod)
        for name, fn in sorted(vars(m).items()):
            if not name.startswith("test_") or not callable(fn):
                continue
            args = inspect.signature(fn).parameters
            if not any(a in args for a in ("path", "options", "device")):
                continue
            seen = set()
            for kw in _cases(fn):
                if "device" in args:
                    kw.update(device="cuda", ir="graph")
                for a, v in DEVICE_ARGS.items():
                    if a in args:
                        kw[a] = v
                key = repr(sorted(kw.items()))
                if key not in seen:
                    seen.add(key)
                    out.append((f"{mod[5:]}.{name}[{len(seen) - 1}]", fn, kw))
    return out


def control_programs() -> list:
    """The graphs of every :func:`control_cases` program (recorded on the numpy device)."""
    def run_all():
        for _, fn, kw in control_cases():
            ad.reset()
            fn(**kw)
        ad.reset()
    return recorded(run_all)


def random_programs(n: int) -> list:
    """``n`` derandomized programs of the random-program generator, optimized."""
    from hypothesis import HealthCheck, given, settings
    from opt_programs import build, specs

    from autodiff.opt import optimize
    out = []

    @settings(max_examples=n, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(specs())
    def collect(spec):
        out.append(optimize(build(spec).graph))
        ad.reset()
    collect()
    return out


def sweep(dev):
    """Many ops forward and backward in one program on ``dev`` (the OpenCL device test's
    sweep, plus a transposed-and-packed matmul operand): every value and gradient, and
    the report."""
    rng = np.random.default_rng(3)
    a = ad.Tensor(rng.uniform(0.5, 2.0, (3, 5)), requires_grad=True)
    b = ad.Tensor(rng.uniform(-1.0, 1.0, (5, 19)), requires_grad=True)
    c = ad.Tensor(rng.uniform(-1.0, 1.0, (19,)), requires_grad=True)
    h = (a @ b + c)
    outs = [h.relu(), h.sigmoid(), h.tanh(), h.exp() * 0.1, a.log(), a.sqrt(),
            a.rsqrt(), a.reciprocal(), h.sin(), h.cos(), h.abs(), h.erf(),
            h.maximum(h * 0.5), h.minimum(h.T.T * 0.25), (h > 0.1).float() * h,
            ad.where(h > 0, h, h * 0.01), a ** 2, a.pow(1.5), h.softmax(-1),
            h.log_softmax(-1), h.sum(0), h.amax(-1), h.mean(), h.permute(1, 0) * 2.0,
            h[:, 2:11] * 3.0, ad.concat([h, a], dim=1), h.reshape(19, 3).sum(1),
            ad.matmul(h.T, h), ad.matmul(h.reshape(1, 3, 19), h.reshape(1, 19, 3)),
            ad.Tensor(rng.standard_normal((80, 19))) @ h.T]     # B packed (transposed)
    loss = sum((o * o).sum() if i % 2 else o.sum() for i, o in enumerate(outs))
    loss.backward()
    report = ad.execute(device=dev)
    return [o.numpy() for o in outs] + [loss.numpy(), a.grad.numpy(), b.grad.numpy(),
                                        c.grad.numpy()], report
