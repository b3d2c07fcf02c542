"""Device-kernel extensions: the warp-shuffle row softmax built as a musa extension
(torch_musa.utils.musa_extension.load_inline) against the same kernel built as a native
CUDA extension on cuda tensors, and the host SIMT emulation's throughput.

    python3 bench/ext_bench.py [--rounds 7] [--iters 200]
    TORCH_MUSA_DRIVER=host python3 bench/ext_bench.py   # the emulation on a GPU machine

cuda driver: the musa kernel runs here on musa tensors; the native one in a worker
process with TORCH_DEVICE_BACKEND_AUTOLOAD=0 (plain torch.cuda). Rounds alternate
between the two; each times `--iters` launches with device events; the ratio is
native time / musa time (>= 1 means musa is as fast), median over rounds.
host driver: the emulated kernels' throughput (elements/s, effective GB/s) with torch's
CPU ops on the same data for scale.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

KERNEL = r"""
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
  const int warps = blockDim.x / 32;
  const int row = blockIdx.x * warps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* in = x + (long long)row * cols;
  float m = -INFINITY;
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, in[c]);
  m = warp_max(m);
  float s = 0.f;
  for (int c = lane; c < cols; c += 32) s += __expf(in[c] - m);
  s = warp_sum(s);
  const float inv = 1.f / s;
  float* o = out + (long long)row * cols;
  for (int c = lane; c < cols; c += 32) o[c] = __expf(in[c] - m) * inv;
}
__global__ void axpy_kernel(const float* x, const float* y, float* out, float a, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x)
    out[i] = a * x[i] + y[i];
}
__global__ void row_sum_kernel(const float* x, float* out, int cols) {
  __shared__ float partial[256];
  const float* row = x + (long long)blockIdx.x * cols;
  float v = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) v += row[c];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}
void launch_softmax(const float* x, float* out, int rows, int cols, STREAM_T stream) {
  softmax_kernel<<<(rows + 3) / 4, 128, 0, stream>>>(x, out, rows, cols);
}
void launch_axpy(const float* x, const float* y, float* out, float a, long long n, STREAM_T stream) {
  long long blocks = (n + 255) / 256;
  axpy_kernel<<<blocks < 4096 ? blocks : 4096, 256, 0, stream>>>(x, y, out, a, n);
}
void launch_row_sum(const float* x, float* out, int rows, int cols, STREAM_T stream) {
  row_sum_kernel<<<rows, 256, 0, stream>>>(x, out, cols);
}
"""

BINDINGS = r"""
void launch_softmax(const float*, float*, int, int, STREAM_T);
void launch_axpy(const float*, const float*, float*, float, long long, STREAM_T);
void launch_row_sum(const float*, float*, int, int, STREAM_T);
torch::Tensor softmax(torch::Tensor x) {
  auto out = torch::empty_like(x);
  launch_softmax(x.data_ptr<float>(), out.data_ptr<float>(), x.size(0), x.size(1), CURRENT_STREAM);
  return out;
}
torch::Tensor axpy(torch::Tensor x, torch::Tensor y, double a) {
  auto out = torch::empty_like(x);
  launch_axpy(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), a, x.numel(), CURRENT_STREAM);
  return out;
}
torch::Tensor row_sum(torch::Tensor x) {
  auto out = torch::empty({x.size(0)}, x.options());
  launch_row_sum(x.data_ptr<float>(), out.data_ptr<float>(), x.size(0), x.size(1), CURRENT_STREAM);
  return out;
}
"""

MUSA_PRE = '#include "torch_musa/csrc/core/MUSAStream.h"\n#define STREAM_T musaStream_t\n'
MUSA_CPP = MUSA_PRE + "#define CURRENT_STREAM c10::musa::getCurrentMUSAStream().stream()\n"
CUDA_PRE = "#include <cuda_runtime.h>\n#define STREAM_T cudaStream_t\n"
CUDA_CPP = CUDA_PRE + "#include <ATen/cuda/CUDAContext.h>\n#define CURRENT_STREAM at::cuda::getCurrentCUDAStream().stream()\n"
FUNCS = ["softmax", "axpy", "row_sum"]
SHAPES = [(16384, 1024), (4096, 4096), (65536, 256)]


def build(native, build_dir):
    os.makedirs(build_dir, exist_ok=True)  # torch's load_inline writes into it, it does not make it
    if native:
        from torch.utils.cpp_extension import load_inline

        return load_inline("ext_bench_native", CUDA_CPP + BINDINGS, cuda_sources=CUDA_PRE + KERNEL, functions=FUNCS,
                           extra_cuda_cflags=["-O3"], build_directory=build_dir)
    from torch_musa.utils.musa_extension import load_inline

    return load_inline("ext_bench_musa", MUSA_CPP + BINDINGS, musa_sources=MUSA_PRE + KERNEL, functions=FUNCS,
                       extra_cflags=["-O2"], extra_musa_cflags=["-O3"], build_directory=build_dir)


def time_softmax(mod, device, mod_torch, rows, cols, iters):
    """Median per-launch microseconds over `iters` launches, timed with device events."""
    x = mod_torch.randn(rows, cols, device=device)
    api = getattr(mod_torch, device)
    mod.softmax(x)
    api.synchronize()
    start, end = api.Event(enable_timing=True), api.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        mod.softmax(x)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters


def native_worker(build_dir):
    import torch

    mod = build(True, build_dir)
    x = torch.randn(64, 100, device="cuda")
    torch.testing.assert_close(mod.softmax(x), torch.softmax(x, 1))
    print("ready", flush=True)
    for line in sys.stdin:
        rows, cols, iters = map(int, line.split())
        print(json.dumps(time_softmax(mod, "cuda", torch, rows, cols, iters)), flush=True)


def gpu_bench(args, build_dir):
    import torch

    mod = build(False, os.path.join(build_dir, "musa"))
    x = torch.randn(64, 100, device="musa")
    torch.testing.assert_close(mod.softmax(x), torch.softmax(x, 1))
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    worker = subprocess.Popen([sys.executable, __file__, "--native-worker", os.path.join(build_dir, "native")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert worker.stdout.readline().strip() == "ready", "native worker failed to start"
    print(f"softmax kernel, musa extension (cuda driver) vs native CUDA extension; median of {args.rounds} "
          f"alternating rounds of {args.iters} launches")
    results = {}
    for rows, cols in SHAPES:
        musa_t, native_t = [], []
        for _ in range(args.rounds):
            musa_t.append(time_softmax(mod, "musa", torch, rows, cols, args.iters))
            worker.stdin.write(f"{rows} {cols} {args.iters}\n")
            worker.stdin.flush()
            native_t.append(json.loads(worker.stdout.readline()))
        ratio = statistics.median(n / m for n, m in zip(native_t, musa_t))
        gbs = 2 * rows * cols * 4 / (statistics.median(musa_t) * 1e3)
        results[f"{rows}x{cols}"] = ratio
        print(f"  {rows:>6} x {cols:<5} musa {statistics.median(musa_t):8.2f} us  native {statistics.median(native_t):8.2f} us"
              f"  ratio {ratio:.3f}x  ({gbs:.0f} GB/s)")
    worker.stdin.close()
    worker.wait(timeout=60)
    print(f"softmax ratio (native/musa time), worst shape: {min(results.values()):.3f}x")


def host_bench(args, build_dir):
    import torch

    mod = build(False, os.path.join(build_dir, "musa"))
    threads = os.environ.get("MUSA_SIMT_THREADS", str(os.cpu_count()))
    print(f"host SIMT emulation throughput ({threads} threads; torch's CPU op on the same data for scale; "
          f"median of {args.rounds})")

    def med(fn, reps):
        ts = []
        for _ in range(args.rounds):
            torch.musa.synchronize()
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            torch.musa.synchronize()
            ts.append((time.perf_counter() - t0) / reps)
        return statistics.median(ts)

    cases = [
        ("softmax 1024x1024 (warp shuffles)", 1024 * 1024, lambda x, xc: (lambda: mod.softmax(x), lambda: torch.softmax(xc, 1)),
         (1024, 1024)),
        ("row_sum 1024x1024 (shared memory, __syncthreads)", 1024 * 1024,
         lambda x, xc: (lambda: mod.row_sum(x), lambda: xc.sum(1)), (1024, 1024)),
        ("axpy 4M (elementwise)", 4 << 20, lambda x, xc: (lambda: mod.axpy(x, x, 2.0), lambda: 2.0 * xc + xc), (4 << 20,)),
    ]
    for name, n, make, shape in cases:
        x = torch.randn(*shape, device="musa")
        xc = x.cpu()
        emu, ref = make(x, xc)
        t_emu, t_ref = med(emu, 2), med(ref, 5)
        print(f"  {name:<48} emulated {t_emu * 1e3:8.2f} ms ({n / t_emu / 1e6:7.1f} M elem/s)   "
              f"torch CPU {t_ref * 1e3:7.2f} ms   ({t_emu / t_ref:5.1f}x slower)")
    torch.testing.assert_close(mod.softmax(x.view(2048, 2048)), torch.softmax(x.view(2048, 2048), 1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--native-worker", metavar="BUILD_DIR")
    args = p.parse_args()
    if args.native_worker:
        return native_worker(args.native_worker)
    import torch

    build_dir = tempfile.mkdtemp(prefix="ext_bench_")
    try:
        if torch.musa.get_driver_name() == "cuda":
            gpu_bench(args, build_dir)
        else:
            host_bench(args, build_dir)
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
