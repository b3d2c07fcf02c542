"""OpInfo sweep: PyTorch's own ``op_db`` sample inputs on musa, compared with CPU.

For every OpInfo entry of ``torch.testing._internal.common_methods_invocations.op_db``:

* the entry is skipped (with a written reason) only where a float32 comparison is
  meaningless: the op has no float32 CPU kernel, or its float32 samples cannot even
  be generated on CPU;
* otherwise the first ``--samples`` (default 5) float32 sample inputs are generated
  (fixed seed: OpInfo seeds every sample; requires_grad=False) on musa, as the issue
  asks ("made on musa"; the sample functions keep the tensors that must be on CPU,
  e.g. ``tensor_split`` indices, on CPU), and every tensor in ``input``/``args``/
  ``kwargs`` (nested lists/tuples/dicts, TensorLists, 0-dim tensors) is copied to CPU
  for the reference; ``torch.device``/``"musa"`` device arguments (factory ops) are
  mapped as well.  ``--make-on cpu`` does it the other way round: samples made on CPU,
  every tensor copied to musa as a CUDA user would.  Copies keep the storage, offset
  and strides (``--layout preserve``; ``--layout to`` uses plain ``.to()``) so views
  and non-contiguous samples reach the kernels unchanged;
* the op runs on the CPU copy and on the musa copy (``requires_grad=False``), and the
  outputs are compared recursively: tensors with ``torch.testing.assert_close``
  (float32 defaults rtol=1.3e-6, atol=1e-5, ``equal_nan=True``), non-tensors with ``==``;
  every tensor produced by the musa run must be on musa where the CPU run produced a
  CPU tensor (a result on the wrong device is a failure);
* random ops (and samples with dropout_p > 0 of attention ops) and ops whose output
  is uninitialised by definition (``empty*``) are compared on metadata only -- shape,
  dtype, device, not values -- and counted as ``pass`` with a note;
* operands are compared after the call as well (in-place / out-argument writes);
* a sample that raises on CPU passes if the musa run raises the same exception type;
* an entry passes if all its tested samples pass; a per-entry timeout (``--timeout``,
  default 20 s, via ``signal.alarm``) counts as a failure, and so does a crash of the
  interpreter (the sweep runs the entries in a worker process and restarts it after
  a crash, attributing the crash to the entry that was running).

Usage::

    python -m tests.ops.opinfo_sweep [--json out.json] [--ops name,...] [--device musa]
                                 [--samples N] [--make-on device|cpu] [--layout preserve|to]
                                 [--timeout S]

``--device cpu`` runs the harness against itself (CPU vs CPU copies): every entry
must pass, which checks the sweep rather than the backend.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

# Random ops: values depend on the generator (musa has its own Philox generator), so
# only shape / dtype / device of the outputs are compared.
RANDOM_OPS = {
    "bernoulli", "normal", "normal.number_mean", "normal.in_place", "rand_like",
    "randn", "randn_like", "randint", "randint_like", "multinomial", "cauchy",
    "exponential", "geometric", "log_normal", "uniform", "nn.functional.rrelu",
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout.with_train",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "randperm", "poisson",
}
# Outputs are uninitialised memory by definition: metadata only.
UNINITIALISED_OPS = {
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty",
    "new_empty_strided",
}
# Entries that are random only for some samples (dropout inside): those samples are
# compared on metadata only.
RANDOM_SAMPLES = {
    "nn.functional.scaled_dot_product_attention":
        lambda s: s.kwargs.get("dropout_p", 0.0) > 0,
    "nn.functional.multi_head_attention_forward":
        lambda s: (s.kwargs.get("training", True) and len(s.args) > 9 and s.args[9] > 0),
}
# Ops that draw random numbers internally (random projection of the low-rank SVD).
RANDOM_INSIDE_OPS = {"svd_lowrank", "pca_lowrank"}
METADATA_ONLY_REASON = {
    **{n: "draws a random projection (torch.randn on the input's device) internally; "
          "shape/dtype/device compared" for n in RANDOM_INSIDE_OPS},
    **{n: "random op: values come from the device generator; shape/dtype/device compared"
       for n in RANDOM_OPS},
    **{n: "output is uninitialised memory by definition; shape/dtype/device compared"
       for n in UNINITIALISED_OPS},
}

# float32 defaults of torch.testing.assert_close (the OpInfo tests use them too).
RTOL, ATOL = 1.3e-6, 1e-5
# --dtype float16/bfloat16: half-precision tolerances (the reference may compute in float32).
TOLERANCES = {"float32": (RTOL, ATOL), "float16": (1e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2)}
TOL = {"rtol": RTOL, "atol": ATOL}


def entry_name(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


# --------------------------------------------------------------------------- moving


def _map_device(dev, target):
    """A device argument of the source side, as the other side sees it."""
    import torch
    if isinstance(dev, torch.device):
        return torch.device(target) if dev.type != target.split(":")[0] else dev
    if isinstance(dev, str) and re.fullmatch(r"(cpu|musa)(:\d+)?", dev):
        return target
    return dev


LAYOUT = {"mode": "preserve"}


def copy_tensor(t, target):
    """A copy of ``t`` on ``target``.

    mode "to": ``t.to(target)`` as a user would (views become compact tensors).
    mode "preserve" (default): the whole storage is copied and the copy is a view of it
    with the same offset, sizes and strides, so partial views (``as_strided`` samples),
    expanded and non-contiguous inputs reach the device kernels exactly as on CPU.
    """
    import torch
    t = t.detach()
    if (LAYOUT["mode"] == "to" or t.layout != torch.strided or t.is_quantized
            or type(t) is not torch.Tensor or t.dtype.is_complex and t.is_conj()):
        out = t.to(target, copy=True)
    else:
        st = t.untyped_storage()
        raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(st, 0, (st.nbytes(),), (1,))
        raw = raw.to(target, copy=True)
        out = torch.empty(0, dtype=t.dtype, device=target).set_(
            raw.untyped_storage(), t.storage_offset(), t.size(), t.stride())
    return out.requires_grad_(t.requires_grad)


def move(obj, target, key=None):
    """Recursively copies every tensor in ``obj`` to ``target``; maps device args."""
    import torch
    if isinstance(obj, torch.Tensor):
        return copy_tensor(obj, target)
    if isinstance(obj, (torch.device, str)):
        return _map_device(obj, target)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(move(o, target) for o in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(move(o, target) for o in obj)
    if isinstance(obj, dict):
        return {k: move(v, target, key=k) for k, v in obj.items()}
    return obj


# ----------------------------------------------------------------------- comparing


class Mismatch(Exception):
    def __init__(self, kind, msg):
        super().__init__(msg)
        self.kind = kind


def _first_line(s, n=300):
    s = str(s).strip()
    return (s.splitlines()[0] if s else "")[:n]


def compare(ref, out, target_type, metadata_only, path="out", check_device=True):
    import torch
    if isinstance(ref, torch.Tensor):
        if not isinstance(out, torch.Tensor):
            raise Mismatch("mismatch", f"{path}: expected a tensor, got {type(out).__name__}")
        want_type = target_type if ref.device.type == "cpu" else ref.device.type
        if check_device == "cpu-ok" and out.device.type == "cpu":
            pass  # the sample asked for CPU explicitly, or has nothing on the device
        elif check_device and out.device.type != want_type:
            raise Mismatch("wrong device", f"{path}: result on {out.device}, expected {want_type}")
        if ref.shape != out.shape or ref.dtype != out.dtype:
            raise Mismatch("mismatch", f"{path}: shape/dtype {tuple(out.shape)}/{out.dtype}"
                                       f" != cpu {tuple(ref.shape)}/{ref.dtype}")
        if ref.layout != out.layout:
            raise Mismatch("mismatch", f"{path}: layout {out.layout} != cpu {ref.layout}")
        if metadata_only:
            return
        if ref.layout != torch.strided:
            ref, out = ref.to_dense(), out.to_dense()
        try:
            torch.testing.assert_close(out.cpu(), ref, rtol=TOL["rtol"], atol=TOL["atol"], equal_nan=True,
                                       check_device=False, check_stride=False)
        except AssertionError as e:
            msg = " ".join(l.strip() for l in str(e).splitlines() if l.strip())
            raise Mismatch("mismatch", f"{path}: {msg[:300]}")
        return
    if isinstance(ref, (list, tuple)):
        if not isinstance(out, (list, tuple)) or len(ref) != len(out):
            raise Mismatch("mismatch", f"{path}: structure {type(out).__name__} != {type(ref).__name__}")
        for i, (r, o) in enumerate(zip(ref, out)):
            compare(r, o, target_type, metadata_only, f"{path}[{i}]", check_device)
        return
    if isinstance(ref, dict):
        if not isinstance(out, dict) or ref.keys() != out.keys():
            raise Mismatch("mismatch", f"{path}: dict keys differ")
        for k in ref:
            compare(ref[k], out[k], target_type, metadata_only, f"{path}[{k!r}]", check_device)
        return
    if isinstance(ref, torch.device):
        want = _map_device(ref, target_type)
        if getattr(out, "type", None) != getattr(want, "type", want):
            raise Mismatch("wrong device", f"{path}: device {out} != {want}")
        return
    if isinstance(ref, float) and isinstance(out, float):
        if math.isnan(ref) and math.isnan(out):
            return
        if metadata_only or math.isclose(ref, out, rel_tol=TOL["rtol"], abs_tol=TOL["atol"]):
            return
        raise Mismatch("mismatch", f"{path}: {out!r} != cpu {ref!r}")
    if metadata_only and type(ref) is type(out):
        return
    if isinstance(ref, str) and isinstance(out, str) and _map_device(ref, target_type) == out:
        return
    try:
        equal = bool(ref == out)
    except Exception:
        equal = ref is out
    if not equal:
        raise Mismatch("mismatch", f"{path}: {out!r:.100} != cpu {ref!r:.100}")


# ------------------------------------------------------------------------ running


def _sync(device):
    import torch
    if device.startswith("musa"):
        torch.musa.synchronize()


def _leaves(obj):
    if isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _leaves(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _leaves(o)
    else:
        yield obj


def _device_rule(sample, target_type):
    """How strictly to check the devices of the device-side outputs.

    A CPU output is right (as on CUDA) when the sample asks for CPU explicitly (a
    ``device="cpu"`` argument, e.g. ``zeros_like(x, device="cpu")``) or when nothing in
    it is on the device (``arange(2)``: the default device is CPU); otherwise every
    output tensor must be on the device.
    """
    import torch
    leaves = list(_leaves((sample.input, sample.args, sample.kwargs)))
    devs = [torch.device(l) for l in leaves if isinstance(l, torch.device) or (
        isinstance(l, str) and re.fullmatch(r"(cpu|musa)(:\d+)?", l))]
    on_dev = any(d.type == target_type for d in devs) or any(
        isinstance(l, torch.Tensor) and l.device.type == target_type for l in leaves)
    if target_type == "cpu":
        return True
    if any(d.type == "cpu" for d in devs) or not on_dev:
        return "cpu-ok"
    return True


def _recast(obj, src, dst):
    """obj with every tensor of dtype src cast to dst (nested lists, tuples, dicts)."""
    import torch
    if isinstance(obj, torch.Tensor):
        return obj.to(dst) if obj.dtype == src else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_recast(o, src, dst) for o in obj) if not hasattr(obj, "_fields") else obj
    if isinstance(obj, dict):
        return {k: _recast(v, src, dst) for k, v in obj.items()}
    return obj


def _run_sample(op, cpu_sample, dev_sample, device, metadata_only, upcast=None):
    """Returns None on pass, or (kind, message). ``upcast`` (a half dtype): the CPU has no kernel
    for it, so the reference runs in float32 and its results are cast back."""
    import torch
    target_type = device.split(":")[0]
    ref_exc = None
    if upcast is not None:
        cpu_sample = cpu_sample.transform(lambda t: t)
        cpu_sample.input, cpu_sample.args, cpu_sample.kwargs = (
            _recast(cpu_sample.input, upcast, torch.float32), _recast(cpu_sample.args, upcast, torch.float32),
            _recast(cpu_sample.kwargs, upcast, torch.float32))
    try:
        ref = op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs)
        if upcast is not None:
            ref = _recast(ref, torch.float32, upcast)
            if upcast == torch.float16:  # half-precision FFTs give complex32, as on GPUs
                ref = _recast(ref, torch.complex64, torch.complex32)
    except _Timeout:
        raise
    except Exception as e:  # noqa: BLE001
        ref_exc = e
    try:
        out = op(dev_sample.input, *dev_sample.args, **dev_sample.kwargs)
        _sync(device)
    except _Timeout:
        raise
    except Exception as e:  # noqa: BLE001
        if ref_exc is not None:
            if type(e) is type(ref_exc):
                return None
            return ("exception type differs",
                    f"cpu raised {type(ref_exc).__name__}: {_first_line(ref_exc, 120)}; "
                    f"{target_type} raised {type(e).__name__}: {_first_line(e, 160)}")
        return ("raises", f"{type(e).__name__}: {_first_line(e)}")
    if ref_exc is not None:
        return ("no error", f"cpu raised {type(ref_exc).__name__}: {_first_line(ref_exc, 160)}; "
                            f"{target_type} did not")
    try:
        compare(ref, out, target_type, metadata_only, check_device=_device_rule(dev_sample, target_type))
    except Mismatch as m:
        return (m.kind, str(m))
    # In-place ops (and ops writing into args) mutate their operands: compare those too.
    try:
        before = (cpu_sample.input, cpu_sample.args, cpu_sample.kwargs)
        compare(before if upcast is None else _recast(before, torch.float32, upcast),
                (dev_sample.input, dev_sample.args, dev_sample.kwargs), target_type,
                metadata_only, path="operands-after", check_device=False)
    except Mismatch as m:
        return (m.kind, str(m))
    return None


def _describe_sample(s):
    import torch

    def d(x):
        if isinstance(x, torch.Tensor):
            if x.layout != torch.strided:
                return f"T{tuple(x.shape)}:{str(x.layout).replace('torch.', '')}"
            return f"T{tuple(x.shape)}" + ("" if x.is_contiguous() else "nc")
        if isinstance(x, (list, tuple)):
            return "[" + ",".join(d(i) for i in x[:4]) + (",..." if len(x) > 4 else "") + "]"
        return repr(x)[:40]
    args = ", ".join([d(s.input)] + [d(a) for a in s.args] +
                     [f"{k}={d(v)}" for k, v in s.kwargs.items()])
    return args[:200]


def run_entry(op, device, n_samples, make_on, timeout, dtype_name="float32"):
    """Runs one OpInfo entry; returns a result dict."""
    import itertools
    import torch

    name = entry_name(op)
    res = {"op": name, "status": None, "samples": 0}
    dtype = getattr(torch, dtype_name)
    upcast = None
    if dtype_name != "float32":
        # Half precision: the entries with a kernel for the dtype on CUDA (what a GPU runs).
        if not op.supports_dtype(dtype, "cuda"):
            res.update(status="skip", reason=f"no {dtype_name} kernel on CUDA")
            return res
        if not op.supports_dtype(dtype, "cpu"):
            upcast = dtype  # the CPU reference computes in float32
            res["reference"] = "cpu float32"
    elif not op.supports_dtype(torch.float32, "cpu"):
        res.update(status="skip", reason="no float32 CPU kernel (OpInfo CPU dtypes: "
                   + ",".join(sorted(str(t).replace("torch.", "") for t in op.supported_dtypes("cpu")))
                   + ")")
        return res
    metadata_only = name in METADATA_ONLY_REASON
    gen_dev = "cpu" if make_on == "cpu" else device
    other = device if make_on == "cpu" else "cpu"
    t0 = time.time()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        torch.manual_seed(0)
        try:
            samples = list(itertools.islice(
                op.sample_inputs(gen_dev, dtype, requires_grad=False), n_samples))
            _sync(device)
        except _Timeout:
            raise
        except Exception as e:  # noqa: BLE001
            cpu_ok = make_on != "cpu"
            if cpu_ok:  # is it musa's fault? try the same samples on CPU
                try:
                    torch.manual_seed(0)
                    list(itertools.islice(op.sample_inputs("cpu", dtype), n_samples))
                except _Timeout:
                    raise
                except Exception:  # noqa: BLE001
                    cpu_ok = False
            if not cpu_ok:
                res.update(status="skip", reason=f"{dtype_name} samples cannot be generated on CPU: "
                           f"{type(e).__name__}: {_first_line(e, 160)}")
            else:
                res.update(status="fail", kind="sample generation raises",
                           reason=f"sample generation on {device}: {type(e).__name__}: {_first_line(e)}")
            return res
        if not samples:
            res.update(status="skip", reason=f"OpInfo yields no {dtype_name} sample inputs")
            return res
        for i, s in enumerate(samples):
            try:
                moved = s.transform(lambda t: t)  # shallow copy holder
                moved_input = move(s.input, other)
                moved_args = move(s.args, other)
                moved_kwargs = move(s.kwargs, other)
            except _Timeout:
                raise
            except Exception as e:  # noqa: BLE001
                res.update(status="fail", kind="copy raises",
                           reason=f"sample {i}: moving to {other}: {type(e).__name__}: {_first_line(e)}",
                           sample=_describe_sample(s))
                return res
            moved.input, moved.args, moved.kwargs = moved_input, moved_args, moved_kwargs
            cpu_s, dev_s = (s, moved) if make_on == "cpu" else (moved, s)
            random_sample = name in RANDOM_SAMPLES and RANDOM_SAMPLES[name](s)
            if random_sample:
                res["note"] = "samples with dropout compared on shape/dtype/device only"
            r = _run_sample(op, cpu_s, dev_s, device, metadata_only or random_sample, upcast)
            res["samples"] = i + 1
            if r is not None:
                res.update(status="fail", kind=r[0], reason=f"sample {i}: {r[1]}",
                           sample=_describe_sample(s))
                return res
        res["status"] = "pass"
        if metadata_only or "note" in res:
            res["metadata_only"] = True
        if metadata_only:
            res["note"] = METADATA_ONLY_REASON[name]
        return res
    except _Timeout:
        res.update(status="fail", kind="timeout", reason=f"timeout after {timeout}s "
                   f"(sample {res['samples']})")
        return res
    except Exception as e:  # noqa: BLE001 - a bug in the harness must not end the sweep
        res.update(status="fail", kind="harness error",
                   reason=f"{type(e).__name__}: {_first_line(e)} | {traceback.format_exc(limit=2)[-300:]}")
        return res
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        res["seconds"] = round(time.time() - t0, 3)


def _load_ops(names=None):
    warnings.filterwarnings("ignore")
    from torch.testing._internal.common_methods_invocations import op_db
    if not names:
        return list(op_db)
    wanted = set(names)
    ops = [op for op in op_db if entry_name(op) in wanted or op.name in wanted]
    unknown = wanted - {entry_name(o) for o in ops} - {o.name for o in ops}
    if unknown:
        raise SystemExit(f"unknown OpInfo entries: {sorted(unknown)}")
    return ops


def _worker(args):
    """Runs the entries named in args.worker_ops, one JSON line per entry to args.worker_out."""
    import torch
    torch.set_num_threads(max(1, min(torch.get_num_threads(), 4)))
    names = [n for n in open(args.worker_ops).read().split("\n") if n]
    LAYOUT["mode"] = args.layout
    TOL["rtol"], TOL["atol"] = TOLERANCES[args.dtype]
    by_name = {entry_name(o): o for o in _load_ops()}
    with open(args.worker_out, "a") as f:
        for n in names:
            f.write(json.dumps({"start": n}) + "\n")
            f.flush()
            r = run_entry(by_name[n], args.device, args.samples, args.make_on, args.timeout, args.dtype)
            f.write(json.dumps(r) + "\n")
            f.flush()


def sweep(names=None, device="musa", samples=5, make_on="device", timeout=20, progress=False,
          layout="preserve", dtype="float32"):
    """Runs the sweep in worker processes (restarted after a crash); returns the results."""
    ops = _load_ops(names)
    order = [entry_name(o) for o in ops]
    results = {}
    tmp = tempfile.mkdtemp(prefix="opinfo_sweep_")
    out_path = os.path.join(tmp, "results.jsonl")
    restarts = 0
    while True:
        todo = [n for n in order if n not in results]
        if not todo:
            break
        ops_path = os.path.join(tmp, "ops.txt")
        with open(ops_path, "w") as f:
            f.write("\n".join(todo))
        open(out_path, "w").close()
        cmd = [sys.executable, "-m", "tests.ops.opinfo_sweep", "--_worker", "--_worker-ops", ops_path,
               "--_worker-out", out_path, "--device", device, "--samples", str(samples),
               "--make-on", make_on, "--timeout", str(timeout), "--layout", layout, "--dtype", dtype]
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        # Hard limit: a kernel stuck in C++ never returns to Python for signal.alarm.
        proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        stderr_tail = collections.deque(maxlen=40)
        import threading
        t = threading.Thread(target=lambda: [stderr_tail.append(l) for l in proc.stderr], daemon=True)
        t.start()
        seen = 0
        started = None
        start_time = None
        while True:
            rc = proc.poll()
            lines = open(out_path).read().splitlines()
            for line in lines[seen:]:
                try:
                    d = json.loads(line)
                except ValueError:
                    break
                seen += 1
                if "start" in d:
                    started, start_time = d["start"], time.time()
                else:
                    results[d["op"]] = d
                    started = None
                    if progress:
                        st = d["status"].upper()
                        print(f"[{len(results):4d}/{len(order)}] {st:4s} {d['op']}"
                              + (f"  -- {d.get('kind', '')}: {d.get('reason', '')[:150]}"
                                 if d["status"] != "pass" else ""), flush=True)
            if rc is not None:
                break
            if started and time.time() - start_time > timeout * 3 + 30:
                proc.kill()
                proc.wait()
                results[started] = {"op": started, "status": "fail", "kind": "timeout",
                                    "reason": f"hung in native code for > {timeout * 3 + 30}s (killed)"}
                started = None
                break
            time.sleep(0.05)
        t.join(timeout=2)
        if started is not None and started not in results:
            results[started] = {"op": started, "status": "fail", "kind": "crash",
                                "reason": f"worker died (rc={proc.returncode}): "
                                          + " | ".join(l.strip() for l in list(stderr_tail)[-3:])[:400]}
            restarts += 1
            if progress:
                print(f"[{len(results):4d}/{len(order)}] FAIL {started}  -- crash: "
                      f"{results[started]['reason'][:150]}", flush=True)
        elif proc.returncode not in (0, None) and not [n for n in order if n not in results] == []:
            # died outside an entry (e.g. import error): give up on the rest
            for n in order:
                results.setdefault(n, {"op": n, "status": "fail", "kind": "crash",
                                       "reason": "worker failed before the entry: "
                                                 + "".join(list(stderr_tail)[-5:])[:400]})
            break
        if restarts > 50:
            for n in order:
                results.setdefault(n, {"op": n, "status": "fail", "kind": "crash",
                                       "reason": "too many worker crashes; not run"})
            break
    return [results[n] for n in order]


def summarize(results):
    c = collections.Counter(r["status"] for r in results)
    tested = c["pass"] + c["fail"]
    by_kind = collections.Counter(r.get("kind") for r in results if r["status"] == "fail")
    meta = sum(1 for r in results if r["status"] == "pass" and r.get("metadata_only"))
    return {
        "entries": len(results), "pass": c["pass"], "fail": c["fail"], "skip": c["skip"],
        "pass_metadata_only": meta,
        "pass_rate": (c["pass"] / tested) if tested else 1.0,
        "failure_kinds": dict(by_kind.most_common()),
        "skips_without_reason": [r["op"] for r in results if r["status"] == "skip" and not r.get("reason")],
    }


def print_report(results, summary, out=sys.stdout):
    w = max([len(r["op"]) for r in results] + [10])
    print(f"{'OpInfo entry':{w}}  result  detail", file=out)
    print("-" * (w + 60), file=out)
    for r in results:
        if r["status"] == "pass" and "note" not in r:
            continue
        detail = (r.get("note", "") if r["status"] == "pass"
                  else r.get("reason", "") if r["status"] == "skip"
                  else f"[{r.get('kind')}] {r.get('reason', '')}")
        print(f"{r['op']:{w}}  {r['status']:6s}  {detail[:240]}", file=out)
    print("-" * (w + 60), file=out)
    s = summary
    print(f"entries {s['entries']}: pass {s['pass']} (of which metadata-only {s['pass_metadata_only']}), "
          f"fail {s['fail']}, skip {s['skip']}; pass rate over non-skipped "
          f"{s['pass_rate'] * 100:.2f}%", file=out)
    if s["failure_kinds"]:
        print("failures by kind: " + ", ".join(f"{k}: {v}" for k, v in s["failure_kinds"].items()),
              file=out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", help="write the results here")
    p.add_argument("--ops", help="comma-separated OpInfo entries (name or name.variant)")
    p.add_argument("--device", default="musa")
    p.add_argument("--samples", type=int, default=5, help="sample inputs per entry (first N)")
    p.add_argument("--make-on", choices=["device", "cpu"], default="device",
                   help="generate the samples on the device and copy them to CPU (default: the "
                        "sample functions place tensors that must stay on CPU themselves), or "
                        "on CPU and copy every tensor to the device")
    p.add_argument("--layout", choices=["preserve", "to"], default="preserve",
                   help="copy tensors keeping storage/offset/strides (default) or with .to()")
    p.add_argument("--timeout", type=int, default=20, help="seconds per entry")
    p.add_argument("--dtype", choices=sorted(TOLERANCES), default="float32",
                   help="sample dtype; float16/bfloat16 test the entries with that kernel on CUDA, against "
                        "the CPU in that dtype or, where the CPU has no kernel for it, in float32")
    p.add_argument("--quiet", action="store_true", help="no per-entry progress lines")
    p.add_argument("--_worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--_worker-ops", dest="worker_ops", help=argparse.SUPPRESS)
    p.add_argument("--_worker-out", dest="worker_out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args._worker:
        _worker(args)
        return 0
    t0 = time.time()
    results = sweep(args.ops.split(",") if args.ops else None, args.device, args.samples,
                    args.make_on, args.timeout, progress=not args.quiet, layout=args.layout, dtype=args.dtype)
    summary = summarize(results)
    summary.update(device=args.device, dtype=args.dtype, samples_per_entry=args.samples, make_on=args.make_on,
                   layout=args.layout,
                   seconds=round(time.time() - t0, 1))
    import torch
    summary["torch"] = torch.__version__
    print_report(results, summary)
    print(f"({summary['seconds']}s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
