"""The dialect as data: the base class's methods over each device's table, the body form
of a kernel derived from its device's dialect, and the warp-shuffle hook of the work-group
tree reduction."""
from autodiff.device.cstyle import kernels as K
from autodiff.device.cstyle.dialect import Body, Dialect, body_name
from autodiff.device.cuda.dialect import BODY as CUDA_BODY, CUDA_WHOLE
from autodiff.device.opencl.dialect import BODY, OPENCL


def test_opencl_table():
    assert OPENCL.signature("k", [OPENCL.pointer() + " buf"]) == \
        "__kernel void k(__global float* buf)"
    assert OPENCL.pointer(const=True) == "__global const float*"
    assert OPENCL.index("global", 1) == "(int)get_global_id(1)"
    assert OPENCL.index("group", 0) == "(int)get_group_id(0)"
    assert OPENCL.warp == 0 and OPENCL.whole is OPENCL


def test_cuda_table():
    assert CUDA_WHOLE.signature("k", [CUDA_WHOLE.pointer() + " buf"]) == \
        'extern "C" __global__ void k(float* buf)'
    assert CUDA_WHOLE.index("global", 0) == "(int)(blockIdx.x*blockDim.x+threadIdx.x)"
    assert CUDA_WHOLE.index("local", 2) == "(int)threadIdx.z"
    assert CUDA_WHOLE.warp == 32 and CUDA_BODY.warp == 32
    assert CUDA_WHOLE.shuffle_down.format(x="s", o=4) == "__shfl_down_sync(0xffffffffu, s, 4)"


def test_body_takes_its_kernel_dialect_fields():
    """A body is ``static <inline> void NAME_body(params..., g0, g1, g2)``, its global
    index the arguments, every other field its kernel dialect's."""
    assert BODY.signature("k", ["__global float* buf"]) == \
        "static inline void k_body(__global float* buf, const int g0, const int g1, const int g2)"
    assert BODY.index("global", 2) == "(int)g2" and BODY.whole is OPENCL
    assert (BODY.name, BODY.buffer, BODY.barrier) == ("opencl-body", "__global", OPENCL.barrier)
    assert CUDA_BODY.signature("k", [CUDA_BODY.pointer() + " buf"]) == \
        "static __forceinline__ void k_body(float* buf, const int g0, const int g1, const int g2)"
    assert CUDA_BODY.whole is CUDA_WHOLE and CUDA_BODY.name == "cuda-body"
    assert body_name("k") == "k_body"


def test_a_new_dialect_is_a_table():
    class Metal(Dialect):
        name = "metal"
        kernel = "kernel void"
        buffer = "device"
        inline = "inline"
        ids = {"global": "gid.{d}"}

    m = Metal()
    assert m.signature("k", [m.pointer() + " buf"]) == "kernel void k(device float* buf)"
    assert m.index("global", 1) == "(int)gid.y"
    assert Body(m).signature("k", ["int a"]) == \
        "static inline void k_body(int a, const int g0, const int g1, const int g2)"


def _tree(d, group=K.TREE_GROUP):
    return K.tree_reduce("t", 4, 300, lambda w, j: f"buf[r*300 + {j}]",
                         lambda s: [f"buf[9000 + r] = {s};"], "max", group=group, d=d).src


def test_tree_reduce_finishes_with_warp_shuffles_where_the_dialect_has_them():
    """CUDA: shared-memory steps down to two warps' partials, then the first warp adds
    them and shuffles (no barrier); OpenCL (no warp field): the tree in local memory to
    the end, as PoCL runs it (tests/device/cstyle/test_kernels.py)."""
    cu, cl = _tree(CUDA_WHOLE), _tree(OPENCL)
    assert "for (int h = 64; h > 32; h >>= 1)" in cu
    assert "s = _ad_max(part[lid], part[lid + 32]);" in cu
    assert ("for (int o = 16; o > 0; o >>= 1) "
            "s = _ad_max(s, __shfl_down_sync(0xffffffffu, s, o));") in cu
    assert cu.count("__syncthreads();") == 2 and "__syncthreads" not in cu.split("__shfl")[1]
    assert "for (int h = 64; h > 0; h >>= 1)" in cl and "shfl" not in cl
    assert cl.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2
    two_warps = _tree(CUDA_WHOLE, group=64)      # no shared-memory loop left
    assert "for (int h" not in two_warps and "part[lid + 32]" in two_warps
    assert "shfl" not in _tree(CUDA_WHOLE, group=32)      # one warp: the shared form
