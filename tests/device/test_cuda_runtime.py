"""The CUDA device's logic that needs no GPU: launch geometry, graph segmentation around
Feeders, Receivers and loops, what an iteration launches, NVRTC targets, build errors and
resource reports, the mapping of driver results to errors, and a clear
:class:`CUDAUnavailable` when the extra, the driver or a GPU is missing."""
from __future__ import annotations

import builtins
import sys
from pathlib import Path

import numpy as np
import pytest

import autodiff as ad
from autodiff.device.cuda import driver, launch, nvrtc, program
from autodiff.device.cuda.errors import CUDABuildError, CUDAError, CUDAUnavailable
from autodiff.device.cuda.launch import ARCH, Geometry, LaunchError, Limits
from autodiff.device.cstyle.kernels import Source

sys.path.insert(0, str(Path(__file__).resolve().parent))
H100 = ARCH["sm_90"]


# -- launch geometry ----------------------------------------------------------------------
@pytest.mark.parametrize("extent", [(1,), (7,), (100,), (5000,), (1 << 20,), (3, 5, 2),
                                    (64, 8, 1), (1, 300, 4), (40000, 1, 1)])
def test_block_for_fits_the_device_and_covers_the_space(extent):
    geo = launch.geometry(Source("k", "", extent, (64,)), H100)
    assert geo.threads <= min(launch.MAX_BLOCK, H100.max_threads)
    g = launch._pad3(extent)
    assert all(gr * b >= e for gr, b, e in zip(geo.grid, geo.block, g))      # covered
    assert all((gr - 1) * b < e for gr, b, e in zip(geo.grid, geo.block, g))  # no empty block
    assert geo.extent == g
    if np.prod(g) >= launch.MAX_BLOCK * H100.multiprocessors:
        assert geo.threads == launch.MAX_BLOCK


def test_small_spaces_spread_over_multiprocessors():
    """A 2048-point kernel gets 64 blocks of 32 on a 132-SM GPU, not 8 blocks of 256."""
    geo = launch.geometry(Source("k", "", (2048,), (64,)), H100)
    assert geo.block == (32, 1, 1) and geo.grid == (64, 1, 1)
    few = Limits("small", (8, 6), multiprocessors=2)
    assert launch.geometry(Source("k", "", (2048,), (64,)), few).block == (256, 1, 1)


def test_work_group_kernels_keep_their_block():
    geo = launch.geometry(Source("t", "", (10 * 128,), (128,), whole=True), H100)
    assert geo == Geometry((10, 1, 1), (128, 1, 1), None)
    tiny = Limits("tiny", (7, 5), max_threads=64)
    with pytest.raises(LaunchError, match="needs 128 threads"):
        launch.geometry(Source("t", "", (128,), (128,), whole=True), tiny)


def test_grid_beyond_the_device_is_a_clear_error():
    with pytest.raises(LaunchError, match="exceeds"):
        launch.geometry(Source("k", "", (1, 70000 * 256, 1), (1, 1)), H100)


def test_wrapper_guards_the_padded_space_and_bounds_the_block():
    src = Source("k3_elw", "", (300, 7, 1), (64,))
    geo = launch.geometry(src, H100)
    text = launch.wrapper(src, geo, program.BODY)
    assert f"__launch_bounds__({geo.threads})" in text
    assert "if (g0 >= 300 || g1 >= 7) return;" in text and "const int g2 = 0;" in text
    assert "k3_elw_body(buf, g0, g1, g2);" in text


# -- host steps and graph segments ---------------------------------------------------------
def _launch(name):
    return program.Launch(name, Geometry((1, 1, 1), (32, 1, 1), (32, 1, 1)))


def test_segments_split_only_at_nested_loops():
    """Feeder and Receiver copies stay inside a segment (device-side copies in the graph);
    nested loops are the only boundaries."""
    P = program
    feed = P.Feed(None, 0, (2,), "float32")
    feed2 = P.Feed(None, 8, (2,), "float32")
    recv = P.Receive(None, [(0, (2,), "float32"), (8, (2,), "float32")])
    inner = P.Loop(range(3), [feed, _launch("c"), _launch("d")], [feed])
    body = [feed2, _launch("a"), recv, _launch("b"), inner, _launch("e")]
    steps = P.segments([_launch("x"), P.Loop(range(10), body, [feed2]), _launch("y")])
    assert [type(s).__name__ for s in steps] == ["Segment", "Loop", "Segment"]
    loop = steps[1]
    assert [type(s).__name__ for s in loop.body] == ["Segment", "Loop", "Segment"]
    first = loop.body[0]
    assert first.items == [feed2, first.launches[0], recv, first.launches[1]]
    assert first.feeds == [feed2] and first.receives == [recv] and loop.feeds == [feed2]
    assert loop.body[1].feeds == [feed] and len(loop.body[1].body) == 1
    assert P.launches_per_iteration(steps) == {"graph_launches": 2 + 3, "kernels": 3 + 6,
                                               "copies": 3 + 3}


def test_a_training_loop_is_one_graph_launch_per_iteration():
    """examples/linear.py's loop (a Feeder, the loss Receiver between the forward and the
    backward kernels): the whole iteration is one graph."""
    from example_loader import load_example
    from cuda_programs import recorded
    linear = load_example("linear")
    g, = recorded(lambda: linear.train(linear.build(), 2, "cuda"))
    r = program.render(g, H100)
    per = r.stats["per_iteration"]
    assert per == {"graph_launches": 1, "kernels": r.stats["kernels"], "copies": 2}
    assert "__syncthreads();" in r.source and "__launch_bounds__" in r.source


# -- NVRTC --------------------------------------------------------------------------------
nvrtc_missing = pytest.mark.skipif(
    __import__("importlib").util.find_spec("cuda") is None, reason="needs the [cuda] extra")


@nvrtc_missing
def test_target_is_cubin_when_known_else_ptx_of_the_newest_older(monkeypatch):
    monkeypatch.setattr(nvrtc, "supported", lambda: [75, 80, 86, 90, 100, 120])
    assert nvrtc.target((9, 0)) == ("cubin", "sm_90")
    assert nvrtc.target((12, 1)) == ("ptx", "compute_120")
    assert nvrtc.target((8, 9)) == ("ptx", "compute_86")
    with pytest.raises(CUDAUnavailable, match="older than every"):
        nvrtc.target((5, 0))


@nvrtc_missing
def test_build_error_holds_the_source_path_and_the_log():
    with pytest.raises(CUDABuildError) as e:
        nvrtc.compile('extern "C" __global__ void k(float* b) { b[0] = undefined_name; }',
                      "sm_90")
    assert Path(e.value.path).read_text().startswith('extern "C"')
    assert "undefined_name" in e.value.log and e.value.path in str(e.value)


@nvrtc_missing
def test_ptx_for_newer_gpus_and_resource_report():
    src = program.program([])        # the prelude: Philox's iteration-word kernel
    ptx = nvrtc.compile(src, "compute_90")
    assert ptx.kind == "ptx" and b".entry _ad_set_iteration_words" in ptx.image
    cubin = nvrtc.compile(src, "sm_80")
    res = cubin.resources["_ad_set_iteration_words"]
    assert 0 < res.registers <= 255 and res.spill_stores == 0 and not cubin.warnings
    again = nvrtc.compile(src, "sm_80")
    assert again.cached and again.image == cubin.image


@nvrtc_missing
def test_aligned_row_loads_become_float4_transactions():
    """The wrapper tells NVVM the arena is 256-byte aligned, so the lane loads of a matmul
    row (``vload16`` at 16-float offsets) compile to 128-bit ``ld.global.v4`` loads."""
    from cuda_programs import recorded
    rng = np.random.default_rng(0)

    def prog():
        a = ad.Tensor(rng.standard_normal((64, 128)).astype(np.float32))
        b = ad.Tensor(rng.standard_normal((128, 64)).astype(np.float32))
        y = (a @ b).relu()
        ad.execute(device="numpy")
        return y
    g, = recorded(prog)
    ptx = nvrtc.compile(program.render(g, H100).source, "compute_90").image.decode()
    assert ptx.count("ld.global.v4.f32") + ptx.count("ld.global.nc.v4.f32") >= 4


def test_resources_are_parsed_from_the_ptxas_report():
    log = ("ptxas info    : Compiling entry function 'k7_reduce' for 'sm_90'\n"
           "ptxas info    : Function properties for k7_reduce\n"
           "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
           "ptxas info    : Used 30 registers, used 1 barriers, 512 bytes smem\n")
    r = nvrtc.resources(log)["k7_reduce"]
    assert (r.registers, r.shared, r.barriers, r.stack, r.spill_stores) == (30, 512, 1, 8, 4)


# -- errors and availability --------------------------------------------------------------
def test_driver_results_map_to_clear_errors():
    assert isinstance(driver.error("cuMemAlloc", "CUDA_ERROR_OUT_OF_MEMORY"),
                      driver.CUDAOutOfMemory)
    e = driver.error("cuDeviceGetCount", "CUDA_ERROR_NO_DEVICE")
    assert isinstance(e, CUDAUnavailable) and "no CUDA-capable GPU" in str(e)
    e = driver.error("cuLaunchKernel", "CUDA_ERROR_ILLEGAL_ADDRESS")
    assert isinstance(e, CUDAError) and e.code == "CUDA_ERROR_ILLEGAL_ADDRESS"
    e = driver.error("cuGraphLaunch", "CUDA_ERROR_SOMETHING_NEW")
    assert isinstance(e, CUDAError) and e.call == "cuGraphLaunch"


@pytest.fixture
def fresh_driver():
    driver.init.cache_clear()
    driver.devices.cache_clear()
    yield
    driver.init.cache_clear()
    driver.devices.cache_clear()


def _traced():
    x = ad.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    return x.sum(-1) * 2.0


def test_execute_without_a_driver_says_so_and_keeps_the_program(fresh_driver):
    if driver.missing() is None:
        pytest.skip("this machine has a usable GPU")
    y = _traced()
    with pytest.raises(CUDAUnavailable) as e:
        ad.execute(device="cuda")
    msg = str(e.value)
    assert any(s in msg for s in ("libcuda", "[cuda] extra", "no GPU", "GPU is visible"))
    ad.execute(device="numpy")                  # the traced program was not consumed
    np.testing.assert_allclose(y.numpy(), [6.0, 24.0])


def test_execute_without_the_extra_names_the_install_command(fresh_driver, monkeypatch):
    real = builtins.__import__

    def no_cuda(name, *a, **k):
        if name.startswith("cuda"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_cuda)
    _traced()
    with pytest.raises(CUDAUnavailable, match=r"pip install 'autodiff\[cuda\]'"):
        ad.execute(device="cuda")


def test_no_gpu_and_no_matching_gpu_are_clear_errors(fresh_driver, monkeypatch):
    pytest.importorskip("cuda.bindings.driver", reason="needs the [cuda] extra")
    from cuda_host import HostDriver
    monkeypatch.setattr(driver, "bindings", lambda: HostDriver(gpus=0))
    with pytest.raises(CUDAUnavailable, match="sees no GPU"):
        driver.select()
    driver.devices.cache_clear()
    monkeypatch.setattr(driver, "bindings", lambda: HostDriver(name="Fake A100"))
    assert driver.select("a100").limits.cc == (9, 0)
    monkeypatch.setenv("AUTODIFF_CUDA_DEVICE", "H200")
    with pytest.raises(CUDAUnavailable, match="no CUDA device matches 'H200'; found: 0: Fake"):
        driver.select()
