"""One helper that checks an op forward and backward, like tinygrad's ``helper_test_op``.

:func:`check_op` runs the same function on autodiff tensors (numpy device) and on torch
tensors, then compares

* the forward value and every input gradient with torch in float32, and
* every input gradient with central finite differences of ``(out * G).sum()`` computed in
  float64 on torch (no autograd involved), so a wrong gradient rule in both libraries, or
  in a torch function written differently from ours, is still caught.

The backward pass is seeded with ``G`` (``out.backward(G)`` in both libraries), a random
upstream gradient of the output's shape (:func:`upstream`): with ones, the gradient of an op
whose outputs sum to a constant (softmax, a normalisation without affine parameters) is
zero in exact arithmetic, and only rounding noise would be compared.

On a device other than numpy (``device=`` or :data:`DEVICE`, which ``tests/conftest.py``
sets per test to run the op suite on every available device), the forward value and every
gradient must also agree with the numpy reference device within :data:`DEVICE_RTOL`.
"""
from __future__ import annotations

import numpy as np
import torch

import autodiff as ad
from autodiff.graph import dtypes

FWD_RTOL, FWD_ATOL = 1e-4, 1e-5      # float32 against float32: a few ulps, summed
GRAD_RTOL, GRAD_ATOL = 1e-4, 1e-5
FD_EPS = 1e-6                        # float64 central differences: error ~eps^2, ~1e-10
FD_RTOL, FD_ATOL = 1e-3, 1e-4        # float32 gradients against the float64 reference
DEVICE_RTOL = 1e-5                   # another device against the numpy reference device

#: the device check_op runs on when not given one (tests/conftest.py sets it per test)
DEVICE = "numpy"


def rand_inputs(shapes, seed: int = 0, low: float = -2.0, high: float = 2.0,
                avoid=(0.0,), margin: float = 0.1) -> list[np.ndarray]:
    """float32 arrays of ``shapes`` uniform in ``[low, high)``, none within ``margin`` of a
    point in ``avoid`` (zeros, kinks such as relu/abs at 0, clamp bounds)."""
    rng = np.random.default_rng(seed)
    out = []
    for shape in shapes:
        x = np.asarray(rng.uniform(low, high, shape), np.float64)
        for _ in range(1000):
            bad = np.zeros(x.shape, bool)
            for p in avoid:
                bad |= np.abs(x - p) < margin
            if not bad.any():
                break
            x[bad] = rng.uniform(low, high, int(bad.sum()))
        else:
            raise ValueError("could not draw inputs away from the avoided points")
        out.append(x.astype(np.float32))
    return out


def _is_float(a: np.ndarray) -> bool:
    return np.issubdtype(a.dtype, np.floating)


def _torch_in(a: np.ndarray, dtype, grad: bool) -> torch.Tensor:
    if not _is_float(a):
        return torch.from_numpy(a.astype(np.int64))
    return torch.tensor(a, dtype=dtype, requires_grad=grad)


def upstream(shape, seed: int) -> np.ndarray:
    """The upstream gradient ``G`` check_op seeds the backward pass with: float32 of
    ``shape``, uniform in [0.5, 1.5) (not constant, away from zero so that no input's
    gradient vanishes)."""
    return np.random.default_rng(seed + 7919).uniform(0.5, 1.5, shape).astype(np.float32)


def finite_difference_grads(torch_fn, arrays, eps: float = FD_EPS,
                            weight: np.ndarray | None = None) -> list[np.ndarray | None]:
    """d sum(weight * torch_fn(*arrays)) / d array by central differences in float64
    (``weight`` None: ones; None for integer inputs)."""
    base = [_torch_in(a, torch.float64, False) for a in arrays]
    w = None if weight is None else torch.from_numpy(np.asarray(weight, np.float64))
    grads = []
    with torch.no_grad():
        for i, a in enumerate(arrays):
            if not _is_float(a):
                grads.append(None)
                continue
            g = np.zeros(a.shape, np.float64)
            flat = base[i].view(-1)
            for j in range(flat.numel()):
                x0 = flat[j].item()
                flat[j] = x0 + eps
                hi = _weighted(torch_fn(*base), w)
                flat[j] = x0 - eps
                lo = _weighted(torch_fn(*base), w)
                flat[j] = x0
                g.reshape(-1)[j] = (hi - lo) / (2 * eps)
            grads.append(g)
    return grads


def _weighted(y: torch.Tensor, w: torch.Tensor | None) -> float:
    y = y.double()
    return (y if w is None else y * w).sum().item()


def _run(ad_fn, arrays, forward_only: bool, device: str, seed: int):
    """Trace ``ad_fn``, seed the backward pass with :func:`upstream`, execute once on
    ``device``. Returns the forward value and the input gradients (None where an input
    has none)."""
    xs = [ad.Tensor(a, requires_grad=_is_float(a) and not forward_only) for a in arrays]
    out = ad_fn(*xs)
    if not forward_only:
        out.backward(ad.Tensor(upstream(out.shape, seed)))
    grads = [x.grad for x in xs]           # keep the traced gradients referenced
    ad.execute(device=device)
    return out.numpy(), [None if g is None else g.numpy() for g in grads]


def _agree(got: np.ndarray, ref: np.ndarray, msg: str) -> None:
    """``got`` equals the numpy device's ``ref`` within DEVICE_RTOL relative to each value,
    or to the tensor's largest magnitude for values near zero (cancellation: a sum
    rounded in a different order)."""
    ref = np.asarray(ref)
    assert got.dtype == ref.dtype and got.shape == ref.shape, msg
    scale = float(np.abs(ref[np.isfinite(ref)]).max(initial=0.0))
    np.testing.assert_allclose(got, ref, rtol=DEVICE_RTOL, atol=DEVICE_RTOL * scale,
                               err_msg=msg)


def check_op(shapes, torch_fn, ad_fn=None, *, inputs=None, seed: int = 0, low: float = -2.0,
             high: float = 2.0, avoid=(0.0,), margin: float = 0.1,
             forward_only: bool = False,
             fwd_rtol: float = FWD_RTOL, fwd_atol: float = FWD_ATOL,
             grad_rtol: float = GRAD_RTOL, grad_atol: float = GRAD_ATOL,
             fd: bool = True, device: str | None = None,
             torch_dtype=torch.float32) -> np.ndarray:
    """Check ``ad_fn`` (default: ``torch_fn``) against torch, forward and backward.

    Args:
        shapes: input shapes (ignored when ``inputs`` is given).
        torch_fn: the function on torch tensors.
        ad_fn: the same function on autodiff tensors.
        inputs: explicit numpy inputs; integer arrays are index inputs (int32 for autodiff,
            int64 for torch) and take no gradient.
        seed, low, high, avoid, margin: how random float32 inputs are drawn (:func:`rand_inputs`).
        forward_only: skip gradients (comparisons, integer outputs).
        fd: also compare gradients with float64 central finite differences.
        device: the autodiff device that runs the traced program (default :data:`DEVICE`);
            other than ``"numpy"``, its values and gradients are also compared with the
            numpy device's at ``rtol=DEVICE_RTOL``.
        torch_dtype: the dtype torch computes the reference value and gradients in
            (``torch.float64`` compares with the exact result of the float32 inputs).

    Returns:
        Our forward value.
    """
    ad_fn = ad_fn or torch_fn
    arrays = inputs if inputs is not None else rand_inputs(shapes, seed, low, high, avoid, margin)
    arrays = [np.asarray(a, np.int32) if not _is_float(np.asarray(a))
              else np.asarray(a, np.float32) for a in arrays]

    device = device or DEVICE
    ours, our_grads = _run(ad_fn, arrays, forward_only, device, seed)
    if device != "numpy":
        ref, ref_grads = _run(ad_fn, arrays, forward_only, "numpy", seed)
        _agree(ours, ref, f"forward value on {device} differs from the numpy device")
        for i, (g, r) in enumerate(zip(our_grads, ref_grads)):
            if g is not None and r is not None:
                _agree(g, r, f"gradient of input {i} on {device} differs from the numpy "
                             "device")

    # torch, float32 (or torch_dtype).
    ts = [_torch_in(a, torch_dtype, not forward_only) for a in arrays]
    ref = torch_fn(*ts)
    G = None if forward_only else upstream(tuple(ref.shape), seed)
    if G is not None:
        ref.backward(torch.from_numpy(G).to(ref.dtype))
    want = np.dtype(np.float32 if ref.dtype == torch.float64 else dtypes.host(ref.dtype))
    # integer inputs are int32 here and int64 for torch (its index ops need int64)
    assert ours.dtype == want or (want == np.int64 and ours.dtype == np.int32), \
        f"forward dtype {ours.dtype}, torch {ref.dtype}"
    ref_np = ref.detach().float().numpy() if ref.dtype == torch.bfloat16 else ref.detach().numpy()
    assert ours.shape == ref_np.shape, f"forward shape {ours.shape} vs torch {ref_np.shape}"
    if ref_np.dtype.kind in "biu":                  # indices and masks: exact
        np.testing.assert_array_equal(ours, ref_np, err_msg="forward value differs from torch")
        return ours
    np.testing.assert_allclose(ours.astype(np.float64), ref_np.astype(np.float64),
                               rtol=fwd_rtol, atol=fwd_atol,
                               err_msg="forward value differs from torch")
    if forward_only:
        return ours

    fds = finite_difference_grads(torch_fn, arrays, weight=G) if fd else [None] * len(arrays)
    for i, (a, g, t, f) in enumerate(zip(arrays, our_grads, ts, fds)):
        if not _is_float(a):
            continue
        mine = np.zeros(a.shape, np.float32) if g is None else g
        theirs = np.zeros(a.shape, np.float32) if t.grad is None else \
            t.grad.numpy().astype(np.float32)
        assert mine.dtype == np.float32 and mine.shape == a.shape, \
            f"grad {i}: {mine.dtype}{list(mine.shape)} for input {list(a.shape)}"
        np.testing.assert_allclose(mine, theirs, rtol=grad_rtol, atol=grad_atol,
                                   err_msg=f"gradient of input {i} differs from torch")
        if f is not None:
            np.testing.assert_allclose(mine, f, rtol=FD_RTOL, atol=FD_ATOL,
                                       err_msg=f"gradient of input {i} differs from "
                                               "float64 finite differences")
    return ours


def check_program(program, *args, device: str = "numpy", rtol: float = 1e-6,
                  atol: float = 1e-6) -> None:
    """Run ``program(lib, *args) -> (outputs, leaf)`` with ``lib`` autodiff (on ``device``)
    and torch; every output and the leaf's gradient must agree (programs that mix in-place
    updates, views and ``backward()``, which :func:`check_op`'s one function cannot)."""
    got, leaf = program(ad, *args)
    ad.execute(device=device)
    want, tleaf = program(torch, *args)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=rtol, atol=atol)
    np.testing.assert_allclose(leaf.grad.numpy(), tleaf.grad.numpy(), rtol=rtol, atol=atol)


def assert_like_torch(fn, torch_x, ad_x, site: str | None = None) -> None:
    """``fn`` on a torch tensor and on ours: where torch raises, ours raises an exception
    of that type (ours may be a subclass; a :class:`autodiff.ShapeError` names ``site``,
    the test file, where given); else both results (a tensor or a tuple of them) have the
    same shapes. For edge cases of shapes (0-d, empty dims) that trace no values."""
    def run(x):
        try:
            out = fn(x)
        except Exception as e:      # noqa: BLE001 -- compared below
            return e
        return tuple(tuple(o.shape) for o in out) if isinstance(out, tuple) \
            else tuple(out.shape)
    ref, got = run(torch_x), run(ad_x)
    if isinstance(ref, Exception):
        assert isinstance(got, type(ref)), (ref, got)
        assert site is None or not isinstance(got, ad.ShapeError) or site in str(got), got
    else:
        assert got == ref, (ref, got)

