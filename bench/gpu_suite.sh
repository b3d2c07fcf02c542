#!/usr/bin/env bash
# One device call: build torch_musa with the cuda driver, run the test suite
# on the GPU (TORCH_MUSA_DRIVER=cuda), then the benchmarks. Logs go to $OUT.
#   bash bench/gpu_suite.sh [build|tests|dist|graphs|compile|profiler|optim|fp8|fused|bench|opinfo|overhead|alloc|vmm|all]...
#   (and, outside "all": onesuite = `pytest tests` in one process, both directory orders; hf = HF programs vs native;
#    crash = the drain-test crash of the one-process run, alone, paired, under gdb)
set -u
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16}
steps=${*:-all}
summary=()
has() { [[ " $steps " == *" $1 "* || " $steps " == *" all "* ]]; }

if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

if has build; then
  t0=$SECONDS
  # An editable install registers the torch.backends entry point (autoload).
  if python3 -m pip install --no-build-isolation --no-deps --no-index -v -e . >"$OUT/build.log" 2>&1; then
    summary+=("build: ok ($((SECONDS - t0)) s)")
  else
    grep -E "error|Error" "$OUT/build.log" | head -40
    echo "BUILD FAILED (see build.log)"; exit 1
  fi
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export TORCH_MUSA_DRIVER=cuda

python3 -c "import torch; print(\"driver\", torch.musa.get_driver_name(), torch.musa.get_device_properties(0))" >"$OUT/probe.log" 2>&1; tail -2 "$OUT/probe.log"

if has tests; then
  t0=$SECONDS
  timeout ${TESTS_TIMEOUT:-900} python3 -m pytest tests -q -rs -p no:cacheprovider --ignore=tests/ops/test_opinfo_sweep.py --ignore=tests/tools --ignore=tests/distributed --timeout=300 \
    >"$OUT/tests.log" 2>&1
  summary+=("tests (cuda driver): $(tail -1 "$OUT/tests.log") ($((SECONDS - t0)) s)")
fi
if has dist; then
  # mccl over NCCL at world 1 (one GPU): the distributed suite, then the per-call cost against NCCL.
  t0=$SECONDS
  TORCH_MUSA_DIST_DRIVER=cuda NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 timeout ${DIST_TIMEOUT:-300} \
    python3 -m pytest tests/distributed -q -rs -p no:cacheprovider >"$OUT/dist.log" 2>&1
  summary+=("distributed (cuda driver, world 1): $(tail -1 "$OUT/dist.log") ($((SECONDS - t0)) s)")
  TORCH_MUSA_DIST_DRIVER=cuda NCCL_NVLS_ENABLE=0 timeout ${DIST_BENCH_TIMEOUT:-200} \
    python3 bench/dist_bench.py ${DIST_BENCH_ARGS:---rounds 3 --max-mib 256} 2>&1 | tee "$OUT/dist_bench.log" | tail -30
fi
if has graphs; then
  # MUSA Graph on the cuda driver: the graph tests, then replay/eager against native torch.cuda graphs.
  t0=$SECONDS
  timeout ${GRAPHS_TIMEOUT:-400} python3 -m pytest tests/graphs -q -rs -p no:cacheprovider --timeout=300 >"$OUT/graphs.log" 2>&1
  summary+=("graphs (cuda driver): $(tail -1 "$OUT/graphs.log") ($((SECONDS - t0)) s)")
  timeout ${GRAPH_BENCH_TIMEOUT:-300} python3 bench/graph_bench.py ${GRAPH_BENCH_ARGS:---rounds 3} 2>&1 | tee "$OUT/graph_bench.log" | tail -12
fi
if has compile; then
  # torch.compile on the cuda driver (Triton kernels on musa streams), then compiled musa against native compiled cuda.
  t0=$SECONDS
  timeout ${COMPILE_TIMEOUT:-400} python3 -m pytest tests/inductor -q -rs -p no:cacheprovider --timeout=300 ${COMPILE_TEST_ARGS:-} >"$OUT/compile.log" 2>&1
  summary+=("compile (cuda driver): $(tail -1 "$OUT/compile.log") ($((SECONDS - t0)) s)")
  if [[ -f bench/compile_bench.py ]]; then
    timeout ${COMPILE_BENCH_TIMEOUT:-400} python3 bench/compile_bench.py ${COMPILE_BENCH_ARGS:-} 2>&1 | tee "$OUT/compile_bench.log" | tail -12
  fi
fi
if has profiler; then
  # torch.profiler on the cuda driver (device events on CUDA events), then its cost against CUPTI's on native cuda.
  t0=$SECONDS
  timeout ${PROFILER_TIMEOUT:-300} python3 -m pytest tests/profiler -q -rs -p no:cacheprovider --timeout=200 >"$OUT/profiler.log" 2>&1
  summary+=("profiler (cuda driver): $(tail -1 "$OUT/profiler.log") ($((SECONDS - t0)) s)")
  timeout ${PROFILER_BENCH_TIMEOUT:-300} python3 bench/profiler_bench.py ${PROFILER_BENCH_ARGS:-} 2>&1 | tee "$OUT/profiler_bench.log" | tail -7
  [[ -n ${PROFILER_TRACE:-} ]] && python3 docs/profiler_example.py --out "$OUT/musa_trace.json" 2>&1 | tail -3
  # PROFILER_BREAKDOWN="--size launch": where the profiler's cost goes, musa next to CUPTI (bench/profiler_breakdown.py).
  [[ -n ${PROFILER_BREAKDOWN:-} ]] && timeout 300 python3 bench/profiler_breakdown.py $PROFILER_BREAKDOWN 2>&1 | tee "$OUT/profiler_breakdown.log" | tail -60
fi
if has optim; then
  # torch_musa.optim on the cuda driver, then FusedAdamW against foreach and native fused AdamW.
  t0=$SECONDS
  timeout ${OPTIM_TIMEOUT:-200} python3 -m pytest tests/optim tests/core/test_cuda_api_parity.py tests/ops/test_dtype_widening.py \
    tests/core/test_multiprocessing.py tests/ops/test_cuda_driver_reports.py tests/core/test_external_stream.py \
    tests/memory/test_pluggable_allocator.py tests/memory/test_mempool_context.py tests/ops/test_op_layer.py -q -rs -p no:cacheprovider --timeout=150 >"$OUT/optim.log" 2>&1
  summary+=("optim/API/widening (cuda driver): $(tail -1 "$OUT/optim.log") ($((SECONDS - t0)) s)")
  timeout ${OPTIM_BENCH_TIMEOUT:-300} python3 bench/optim_bench.py ${OPTIM_BENCH_ARGS:-} 2>&1 | tee "$OUT/optim_bench.log" | tail -10
fi
if has fp8; then
  # FP8 on the cuda driver (Triton fused casts, cuBLASLt _scaled_mm, the recipe, FSDP2 at world 1),
  # then the FP8 benchmark against bf16 and native cuda.
  t0=$SECONDS
  TORCH_MUSA_DIST_DRIVER=cuda NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 timeout ${FP8_TIMEOUT:-400} \
    python3 -m pytest tests/fp8 -q -rs -p no:cacheprovider --timeout=300 >"$OUT/fp8.log" 2>&1
  summary+=("fp8 (cuda driver): $(tail -1 "$OUT/fp8.log") ($((SECONDS - t0)) s)")
  timeout ${FP8_BENCH_TIMEOUT:-400} python3 bench/fp8_bench.py ${FP8_BENCH_ARGS:-} 2>&1 | tee "$OUT/fp8_bench.log" | tail -12
fi
if has fused; then
  # The fused LLM ops on the cuda driver (Triton kernels; the Llama-style model compiled and under FSDP2
  # at world 1), then each op against the same computation in native torch ops on cuda.
  t0=$SECONDS
  TORCH_MUSA_DIST_DRIVER=cuda NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 timeout ${FUSED_TIMEOUT:-600} \
    python3 -m pytest tests/nn/test_fused_rope.py tests/nn/test_fused_swish_glu.py tests/nn/test_fused_rms_norm.py \
    tests/nn/test_fused_cross_entropy.py tests/nn/test_fused_compile.py tests/nn/test_fused_llama.py \
    -q -rs -p no:cacheprovider --timeout=400 >"$OUT/fused.log" 2>&1
  summary+=("fused LLM ops (cuda driver): $(tail -1 "$OUT/fused.log") ($((SECONDS - t0)) s)")
  timeout ${FUSED_BENCH_TIMEOUT:-400} python3 bench/fused_ops_bench.py ${FUSED_BENCH_ARGS:---rounds 3} 2>&1 \
    | tee "$OUT/fused_bench.log" | tail -10
fi
if has extensions; then
  # .mu kernel extensions on the cuda driver (nvcc; setup.py and load_inline builds, the converted CUDA
  # extension, mcc), then the softmax kernel against a native CUDA extension, then the host emulation's
  # throughput on this machine's cores.
  t0=$SECONDS
  timeout ${EXT_TIMEOUT:-900} python3 -m pytest tests/extensions -q -rs -p no:cacheprovider --timeout=800 >"$OUT/extensions.log" 2>&1
  summary+=("extensions (cuda driver): $(tail -1 "$OUT/extensions.log") ($((SECONDS - t0)) s)")
  timeout ${EXT_BENCH_TIMEOUT:-600} python3 bench/ext_bench.py ${EXT_BENCH_ARGS:-} 2>&1 | tee "$OUT/ext_bench.log" | tail -6
  TORCH_MUSA_DRIVER=host timeout ${EXT_BENCH_TIMEOUT:-600} python3 bench/ext_bench.py --rounds 3 2>&1 | tee "$OUT/ext_bench_host.log" | tail -5
  summary+=("extensions bench: $(grep -h 'worst shape' "$OUT/ext_bench.log")")
fi
if has opinfo; then
  t0=$SECONDS
  timeout ${OPINFO_TIMEOUT:-400} python3 -m tests.ops.opinfo_sweep --json "$OUT/opinfo.json" >"$OUT/opinfo.log" 2>&1
  summary+=("opinfo (cuda driver): $(grep -iE 'pass rate|pass ' "$OUT/opinfo.log" | tail -2 | tr '\n' ' ') ($((SECONDS - t0)) s)")
fi
if has bench; then
  timeout ${BENCH_TIMEOUT:-400} python3 bench/gpu_bench.py ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" | tail -10
fi
if has overhead; then
  timeout ${OVERHEAD_TIMEOUT:-120} python3 bench/op_overhead.py ${OVERHEAD_ARGS:-} 2>&1 | tee "$OUT/overhead.log" | tail -10
fi
if has alloc; then
  timeout ${ALLOC_TIMEOUT:-200} python3 bench/alloc_bench.py --quick 2>&1 | tee "$OUT/alloc.log" | tail -12
fi
if has vmm; then
  timeout ${VMM_TIMEOUT:-60} python3 bench/vmm_cost.py ${VMM_ARGS:-} 2>&1 | tee "$OUT/vmm.log" | tail -10
fi
if [[ " $steps " == *" onesuite "* ]]; then
  # `pytest tests` as ONE process on the GPU, in CI's directory order and reversed, side by side (each
  # with its own temporary, Inductor-cache and extension folders). Not part of "all": it takes longer
  # than one device call; ONESUITE_TIMEOUT bounds it.
  t0=$SECONDS
  one_suite() {  # name, test dirs...
    local name=$1; shift; local dir=/tmp/onesuite_$name; mkdir -p "$dir"
    TMPDIR=$dir TORCHINDUCTOR_CACHE_DIR=$dir/inductor TORCH_EXTENSIONS_DIR=$dir/ext TORCH_MUSA_EXT_TEST_CACHE=$dir/extc \
      TORCH_MUSA_DIST_DRIVER=cuda NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 timeout ${ONESUITE_TIMEOUT:-560} \
      python3 -m pytest "$@" -q -rfEs -p no:cacheprovider --timeout=300 >"$OUT/onesuite_$name.log" 2>&1
  }
  one_suite ci_order tests & one_suite reversed $(ls -d tests/*/ | sort -r) & wait
  summary+=("one process, CI order: $(tail -1 "$OUT/onesuite_ci_order.log")")
  summary+=("one process, reversed: $(tail -1 "$OUT/onesuite_reversed.log") ($((SECONDS - t0)) s)")
fi
if [[ " $steps " == *" crash "* ]]; then
  # The one-process GPU run of 2026-12-07 crashed (SIGSEGV) in tests/core/test_autograd_threads.py's
  # drain test right after test_accelerator.py's capability test failed: each file alone, then the
  # pair in CI's order, with Python's fault handler, and the pair under gdb (all threads' C++
  # stacks) where the image has it.
  t0=$SECONDS
  for f in tests/core/test_autograd_threads.py tests/core/test_accelerator.py; do
    PYTHONFAULTHANDLER=1 timeout 120 python3 -m pytest -q -rfE -p no:cacheprovider "$f" >"$OUT/crash_$(basename "$f" .py).log" 2>&1
  done
  PYTHONFAULTHANDLER=1 timeout 150 python3 -m pytest -q -rfE -p no:cacheprovider tests/core/test_accelerator.py \
    tests/core/test_autograd_threads.py >"$OUT/crash_pair.log" 2>&1
  if command -v gdb >/dev/null; then
    timeout 200 gdb -q -batch -ex run -ex "thread apply all bt 30" --args python3 -m pytest -q -p no:cacheprovider \
      tests/core/test_accelerator.py tests/core/test_autograd_threads.py >"$OUT/crash_gdb.log" 2>&1
  fi
  summary+=("crash probe: pair $(tail -1 "$OUT/crash_pair.log" | cut -c1-200) ($((SECONDS - t0)) s)")
fi
if has hf; then
  # The Hugging Face programs on musa against native CUDA (torch_musa hidden in native's process).
  (cd /tmp && PYTHONPATH=$OLDPWD${PYTHONPATH:+:$PYTHONPATH} timeout 300 python3 -m tests.integrations.hf_programs \
    --device cuda --hide-torch-musa >"$OUT/hf_native.json" 2>"$OUT/hf_native.err")
  timeout 300 python3 -m tests.integrations.hf_programs --device musa --compare-with "$OUT/hf_native.json" \
    >"$OUT/hf_musa.log" 2>&1
  summary+=("HF programs vs native CUDA: $(tail -1 "$OUT/hf_musa.log" | cut -c1-300)")
fi
printf '%s\n' "${summary[@]}"
