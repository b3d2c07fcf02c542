"""The host rewriter of .mu sources: launches with templates, nested parentheses and
multi-line arguments become musa_simt::launch calls, shared memory becomes per-block
storage, lines are kept, and what the emulation cannot compile is an error naming it."""
import textwrap

import pytest

from torch_musa.utils.musa_extension import host_rewrite
from torch_musa.utils.musa_extension.host_rewrite import MusaSourceError, rewrite_source


def rw(src):
    return rewrite_source("k.mu", textwrap.dedent(src))


def test_launch_forms():
    out = rw("""\
    void f(float* x, int n, musaStream_t s) {
      k<<<g, b>>>(x);
      ns::k2<float, (4 > 2 ? 8 : 4)><<<dim3((n + 255) / 256), 256,
                                       0, s>>>(x,
                                               std::min<int>(n, 3));
      ::k3<<<1, 1, 0>>>();
    }
    """)
    assert ('::musa_simt::launch(::musa_simt::config(g, b), "k", [=](auto&&... musa_simt_a_) '
            '{ k(musa_simt_a_...); }, x);') in out
    assert '"ns::k2<float, (4 > 2 ? 8 : 4)>"' in out
    assert "{ ns::k2<float, (4 > 2 ? 8 : 4)>(musa_simt_a_...); }, x,\n" in out
    assert "std::min<int>(n, 3));" in out
    assert '::musa_simt::launch(::musa_simt::config(1, 1, 0), "::k3", [=](auto&&... musa_simt_a_) { ::k3(musa_simt_a_...); })' in out
    assert out.count("\n") == textwrap.dedent("""\
    void f(float* x, int n, musaStream_t s) {
      k<<<g, b>>>(x);
      a
      a
      a
      ::k3<<<1, 1, 0>>>();
    }
    """).count("\n")  # line numbers are kept


def test_comments_and_strings_are_left_alone():
    src = 'const char* s = "k<<<1,1>>>()"; // k<<<1,1>>>()\n/* k<<<2,2>>>() */ char c = \'<\';\n'
    assert rw(src) == src


def test_shared_memory():
    out = rw("""\
    template <int N> __global__ void k(float* x) {
      __shared__ float tile[N];
      static __shared__ int flag;
      extern __shared__ __align__(16) unsigned char smem[];
    }
    """)
    assert "static thread_local float tile[N];" in out
    assert "static thread_local int flag;" in out
    assert ("static thread_local unsigned char* const smem = "
            "reinterpret_cast<unsigned char*>(::musa_simt::dynamic_shared());") in out


@pytest.mark.parametrize("construct", ["__match_any_sync(0xffffffff, v)", 'asm volatile("trap;")',
                                        "cooperative_groups::this_grid()"])
def test_unsupported_constructs_are_named(construct):
    src = f"__global__ void k(int v) {{\n  {construct};\n}}\n"
    with pytest.raises(MusaSourceError, match=r"k\.mu:2: `\w+` \(.*\) is not supported by the host SIMT emulation"):
        rw(src)


def test_unsupported_construct_under_a_simt_guard_is_left_to_the_preprocessor():
    src = "#ifndef __MUSA_SIMT__\n__device__ void f() { asm(\"trap;\"); }\n#endif\n"
    assert rw(src) == src


def test_launch_inside_a_macro_is_an_error():
    with pytest.raises(MusaSourceError, match=r"k\.mu:1: a kernel launch .* inside a preprocessor directive"):
        rw("#define LAUNCH(k) k<<<1, 1>>>()\n")


def test_malformed_launches():
    with pytest.raises(MusaSourceError, match="no `>>>` closes"):
        rw("void f() { k<<<1, 1(); }\n")
    with pytest.raises(MusaSourceError, match="must be followed by the kernel's argument list"):
        rw("void f() { k<<<1, 1>>>; }\n")


def test_kernel_headers_are_rewritten_too(tmp_path):
    (tmp_path / "helpers.muh").write_text("__device__ float twice(float v) { __shared__ float s; return 2 * v; }\n")
    (tmp_path / "k.mu").write_text('#include "helpers.muh"\n__global__ void k(float* x) { x[0] = twice(x[0]); }\n')
    gen = host_rewrite.rewrite_file(str(tmp_path / "k.mu"), str(tmp_path / "gen"))
    text = open(gen).read()
    assert text.startswith("#include <musa_simt/device.h>\n#line 1 ")
    header = text.split('#include "')[1].split('"')[0]
    assert header.endswith("helpers.muh.h") and "static thread_local float s;" in open(header).read()
