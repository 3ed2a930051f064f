"""The dialect as data: the base class's methods over each device's table, and the body
form of a kernel derived from its device's dialect."""
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
