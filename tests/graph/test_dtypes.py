"""Dtypes: dtype objects, PyTorch's type promotion, every op on bool/int/half/bfloat16
against PyTorch, casts, reductions, Feeders and Receivers of every dtype, the int64 range
check, gradients through casts (numpy reference device; the other devices run the same
tables in tests/device/test_*_dtypes.py)."""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
import torch

import autodiff as ad
from dtype_cases import (DTYPES, GRADS, NUMPY, TORCH, binary_cases, bitwise_cases,
                         cast_cases, check_cases, grad_case, int_division_cases,
                         int_pow_cases, reduction_cases, sample, scalar_cases, unary_cases,
                         where_cases, zero_size_cases)

def test_dtype_objects_behave_like_torch_dtypes():
    assert repr(ad.float32) == "autodiff.float32" and str(ad.int64) == "autodiff.int64"
    assert ad.float is ad.float32 and ad.long is ad.int64 and ad.int is ad.int32
    assert ad.half is ad.float16 and ad.bool.is_floating_point is False
    assert ad.float32 == "float32" and ad.float32 != ad.float16 and ad.float32 != "int32"
    assert {ad.float32: 1}["float32"] == 1          # hashes like its name
    x = ad.tensor([1.5, 2.0])
    assert x.dtype == ad.float32 and x.dtype == "float32" and x.dtype is ad.float32
    assert ad.tensor([1, 2]).dtype == ad.int64 and ad.tensor([True]).dtype == ad.bool
    assert ad.tensor(np.array([1], np.int32)).dtype == ad.int32
    assert ad.tensor(np.array([1.0], np.float64)).dtype == ad.float32   # no float64
    assert ad.tensor(np.ones(2, np.float16)).dtype == ad.float16
    assert ad.tensor(torch.ones(2, dtype=torch.bfloat16)).dtype == ad.bfloat16
    for name in DTYPES:
        d = getattr(ad, name)
        assert d.is_floating_point == TORCH[name].is_floating_point
        assert d.is_signed == TORCH[name].is_signed and d.itemsize == TORCH[name].itemsize
        assert ad.tensor(np.zeros(2, NUMPY[name])).element_size() == TORCH[name].itemsize
    assert ad.tensor([1.0]).is_floating_point() and not ad.tensor([1]).is_floating_point()
    assert ad.is_floating_point(ad.tensor([1.0], dtype=ad.bfloat16))
    assert ad.tensor([1]).type() == "autodiff.LongTensor"
    assert ad.finfo(ad.float16).max == torch.finfo(torch.float16).max
    assert ad.finfo(ad.bfloat16).eps == torch.finfo(torch.bfloat16).eps
    assert ad.iinfo(ad.int32).min == torch.iinfo(torch.int32).min
    assert ad.get_default_dtype() is ad.float32


@pytest.mark.parametrize("bad", ["float64", "complex64", "uint8", torch.float64, np.int8])
def test_unknown_dtypes_raise(bad):
    with pytest.raises(TypeError, match="unsupported dtype"):
        ad.tensor([1, 2], dtype=bad)


def test_promote_types_matches_torch_on_every_pair():
    for a, b in itertools.product(DTYPES, repeat=2):
        want = str(torch.promote_types(TORCH[a], TORCH[b])).removeprefix("torch.")
        assert ad.promote_types(a, b) == want, (a, b)
        assert ad.promote_types(getattr(ad, a), getattr(ad, b)) is getattr(ad, want)


SCALARS = [True, 3, -2.5]


def test_result_type_matches_torch_for_tensors_0d_tensors_and_scalars():
    """Every pair of (dim tensor, 0-d tensor, Python scalar) operands of every dtype."""
    def ours(kind, dt):
        return {"dim": ad.Tensor(np.zeros(2, NUMPY[dt])),
                "0d": ad.Tensor(np.zeros((), NUMPY[dt]))}[kind]

    def theirs(kind, dt):
        return {"dim": torch.zeros(2, dtype=TORCH[dt]),
                "0d": torch.zeros((), dtype=TORCH[dt])}[kind]

    operands = [("dim", d) for d in DTYPES] + [("0d", d) for d in DTYPES]
    checked = 0
    for (ka, da), (kb, db) in itertools.product(operands, repeat=2):
        want = torch.result_type(theirs(ka, da), theirs(kb, db))
        assert ad.result_type(ours(ka, da), ours(kb, db)) == str(want)[6:], (ka, da, kb, db)
        checked += 1
    for (k, d), s in itertools.product(operands, SCALARS):
        assert ad.result_type(ours(k, d), s) == str(torch.result_type(theirs(k, d), s))[6:]
        assert ad.result_type(s, ours(k, d)) == str(torch.result_type(s, theirs(k, d)))[6:]
        checked += 2
    assert checked == 144 + 72


def test_traced_ops_promote_like_torch():
    """The dtype of real ops, including weak Python scalars and 0-d tensors."""
    assert check_cases(scalar_cases()) > 230      # of 252: torch rejects bool subtraction


def test_every_binary_op_on_every_dtype_pair():
    pairs = list(itertools.product(DTYPES, repeat=2))
    assert check_cases(binary_cases(pairs)) > 450          # of 720: the rest torch rejects


def test_every_unary_op_on_every_dtype():
    assert check_cases(unary_cases()) > 90


def test_integer_floor_division_and_modulo_with_negative_operands():
    check_cases(int_division_cases(), exact=True)


def test_integer_division_by_zero_gives_zero():
    """PyTorch raises ZeroDivisionError, and so do we where the zero is known while tracing
    (a number, a tensor made from data: tests/graph/test_dtype_parity.py); a traced
    divisor's values exist on the device only, which cannot raise and gives 0 (README)."""
    x = ad.tensor(np.array([5, -5, 0], np.int32))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        x // 0
    zero = ad.tensor(np.zeros(3, np.int32)) * 1            # traced
    q, r = x // zero, x % zero
    ad.execute()
    assert q.numpy().tolist() == [0, 0, 0] and r.numpy().tolist() == [0, 0, 0]


def test_bitwise_ops_and_shifts_out_of_range():
    check_cases(bitwise_cases())


def test_integer_power_with_negative_exponents():
    check_cases(int_pow_cases())


def test_casts_truncate_and_round_to_nearest_even():
    check_cases(cast_cases(), exact=True)


def test_to_and_type_accept_pytorch_spellings():
    x = ad.tensor([1.5, -2.5])
    outs = [x.to(ad.int64), x.to(torch.int32), x.to("float16"), x.to("cpu", ad.bool),
            x.to(dtype=ad.bfloat16), x.type(ad.long), x.type("torch.IntTensor"),
            x.to(ad.tensor([1])), x.long().float()]
    assert x.to(ad.float32) is x and x.to("cpu") is x
    ad.execute()
    assert [o.numpy().dtype for o in outs] == [np.int64, np.int32, np.float16, np.bool_,
                                               ml_dtypes.bfloat16, np.int64, np.int32,
                                               np.int64, np.float32]
    assert outs[0].numpy().tolist() == [1, -2] and outs[-1].numpy().tolist() == [1.0, -2.0]


def test_reductions_on_every_dtype():
    check_cases(reduction_cases())


def test_sum_of_bool_counts_as_int64():
    x = ad.tensor(np.array([[True, False, True], [True, True, True]]))
    s, s0, n = x.sum(), x.sum(1), (ad.tensor([1.0, -2.0, 3.0]) > 0).sum()
    ad.execute()
    assert s.numpy().dtype == np.int64 and s.numpy() == 5 and s0.numpy().tolist() == [2, 3]
    assert n.numpy() == 2


def test_where_with_mixed_dtypes_and_bool_condition_required():
    check_cases(where_cases())
    with pytest.raises(ad.DTypeError, match="condition must be a bool"):
        ad.where(ad.tensor([1.0, 0.0]), 1.0, 2.0)


def test_dtype_errors_name_the_op_and_the_site():
    with pytest.raises(ad.DTypeError, match=r"and: needs integer or bool.*test_dtypes.py:\d+"):
        ad.tensor([1.5]) & ad.tensor([1])
    with pytest.raises(RuntimeError, match="neg: not supported on bool"):
        -ad.tensor([True])
    with pytest.raises(RuntimeError, match="can't be cast"):
        t = ad.tensor([1, 2])
        t += 1.5


def test_zero_size_and_0d_tensors_of_every_dtype():
    check_cases(zero_size_cases())


# -- the int64 range check ---------------------------------------------------------------
def test_int64_values_outside_int32_raise_where_they_enter():
    with pytest.raises(OverflowError, match="stored as int32"):
        ad.tensor([2**31])
    with pytest.raises(OverflowError, match="int32 storage"):
        ad.tensor([1, 2]) + 2**40
    big = np.array([1, -2**33], np.int64)
    ad.Receiver(lambda v: None, [ad.Feeder(lambda: big, (2,), ad.int64, name="ids")])
    with pytest.raises(ad.FeederError, match=r"Feeder 'ids'.*outside \[-2147483648"):
        ad.execute()


def test_int64_results_wrap_at_32_bits():
    x = ad.tensor([2**31 - 1], dtype=ad.int64)
    y = x + 1
    ad.execute()
    assert y.numpy().dtype == np.int64 and y.numpy().tolist() == [-2**31]


# -- Feeders and Receivers ----------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
def test_feeders_and_receivers_of_every_dtype(dt):
    rng = np.random.default_rng(9)
    data = [sample(dt, (2, 3), rng) for _ in range(3)]
    it, got = iter(data), []

    def body():
        x = ad.Feeder(lambda: next(it), (2, 3), getattr(ad, dt), name="x")
        ad.Receiver(lambda a, b: got.append((a, b)), [x, x == x])
    ad.ir_for(3, body)
    ad.execute()
    for (a, b), ref in zip(got, data):
        assert a.dtype == NUMPY[dt] and b.dtype == np.bool_
        np.testing.assert_array_equal(a, ref)


def test_feeder_checks_its_dtype():
    ad.Receiver(lambda v: None, [ad.Feeder(lambda: np.zeros(2, np.int32), (2,), "int64",
                                           name="f")])
    with pytest.raises(ad.FeederError, match="Feeder 'f'.*int64.*int32"):
        ad.execute()


# -- gradients ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", GRADS)
def test_gradients_through_casts_match_torch(name):
    ours, theirs = grad_case(GRADS[name])
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-4)


def test_integer_and_bool_tensors_never_require_grad():
    x = ad.tensor([1.5, 2.5], requires_grad=True)
    assert not (x > 1).requires_grad and not x.int().requires_grad
    assert x.half().requires_grad and (x.int() + x).requires_grad
    with pytest.raises(TypeError, match="floating point"):
        ad.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match="does not require grad"):
        x.long().sum().backward()


def test_half_gradient_has_the_leaf_dtype():
    x = ad.tensor(np.array([0.5, 1.5], np.float16), requires_grad=True)
    (x * x).sum().backward()
    g = x.grad
    ad.execute()
    assert g.numpy().dtype == np.float16 and g.numpy().tolist() == [1.0, 3.0]
