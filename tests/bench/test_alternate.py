"""bench.alternate: its settings parse and fail clearly, apply only while program B
compiles, and the alternation counts each round's winner."""
import pytest

from autodiff.device.cstyle import kernels
from bench import alternate


def test_a_setting_parses_to_module_attribute_and_literal():
    module, name, value = alternate.parse_set("autodiff.device.cstyle.kernels.MICRO_UNROLL={}")
    assert module is kernels and name == "MICRO_UNROLL" and value == {}


@pytest.mark.parametrize("spec,match", [
    ("autodiff.device.cstyle.kernels.MICRO_UNROLL", "module.attribute=value"),
    ("autodiff.device.cstyle.kernels.NO_SUCH=1", "no attribute 'NO_SUCH'"),
    ("autodiff.device.cstyle.kernels.MICRO_UNROLL=dict()", "not a Python literal"),
])
def test_bad_settings_are_refused(spec, match):
    with pytest.raises(ValueError, match=match):
        alternate.parse_set(spec)


def test_settings_hold_while_b_compiles_and_are_restored(monkeypatch):
    seen = []
    monkeypatch.setattr(alternate, "capture",
                        lambda w, steps: seen.append(dict(kernels.MICRO_UNROLL)) or "exe")
    before = kernels.MICRO_UNROLL
    assert alternate.build("W4", ["autodiff.device.cstyle.kernels.MICRO_UNROLL={8: 2}"]) \
        == "exe"
    assert seen == [{8: 2}] and kernels.MICRO_UNROLL is before

    def fail(w, steps):
        raise RuntimeError("build failed")
    monkeypatch.setattr(alternate, "capture", fail)
    with pytest.raises(RuntimeError):
        alternate.build("W4", ["autodiff.device.cstyle.kernels.MICRO_UNROLL={}"])
    assert kernels.MICRO_UNROLL is before


def test_each_round_times_both_and_counts_the_faster(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(alternate.time, "perf_counter", lambda: now[0])
    calls = []

    def replay(name, seconds):
        def run():
            calls.append(name)
            now[0] += seconds
        return run
    runs = {"a": (replay("a", 2.0), 3), "b": (replay("b", 1.0), 4)}
    res = alternate.alternate(runs, rounds=4, best=2)
    # a warm-up replay each, then per round two of a, two of b
    assert calls == ["a", "b"] + ["a", "a", "b", "b"] * 4
    assert [len(res[k][0]) for k in "ab"] == [4, 4]
    assert res["a"][1] + res["b"][1] == 4
    assert res["a"] == ([2.0] * 4, 0) and res["b"] == ([1.0] * 4, 4)
