"""Sweep of ``out=`` variants on musa: finds the ops whose ``out=`` form fails where the functional one works.

ATen gives some ``out=`` overloads one composite kernel for every device that checks the device
type itself (``mode.values``: "mode only supports CPU, CUDA and XPU device type"). Such a kernel
is what PrivateUse1 gets unless the op layer delegates the overload. This sweep finds them:

* every OpInfo entry of ``op_db`` that supports ``out=``: its first ``--samples`` float32 samples
  run functionally on the CPU and on musa; where both work, the same call with ``out=`` (empty
  tensors of the CPU result's dtypes, on each side) must give the CPU's values, or raise where the
  CPU raises;
* every aten ``out=`` overload (a kwarg-only written tensor) is listed with the kernel PrivateUse1
  gets for it (``--list-composites``): the overloads left to a composite are the candidates.

Usage: ``python3 -m tests.ops.out_variant_sweep [--ops a,b] [--samples N] [--list-composites]``.
Prints one line per failing entry and a summary; exit status 1 if any entry fails.
"""
from __future__ import annotations

import argparse
import sys
import traceback

from tests.ops.opinfo_sweep import RANDOM_OPS, UNINITIALISED_OPS, Mismatch, compare, entry_name, move


def _exact(obj):
    """float8 results as float32 (lossless), which assert_close compares with tolerances."""
    import torch
    if isinstance(obj, torch.Tensor) and obj.dtype.itemsize == 1 and obj.dtype.is_floating_point:
        return obj.float()
    if isinstance(obj, (tuple, list)):
        return tuple(_exact(o) for o in obj)
    return obj


def _empty_like_result(ref, device):
    import torch
    if isinstance(ref, torch.Tensor):
        return torch.empty(0, dtype=ref.dtype, device=device)
    if isinstance(ref, (tuple, list)):
        return tuple(_empty_like_result(r, device) for r in ref)
    raise TypeError(f"result of type {type(ref).__name__} has no out= form")


def _call(op, sample, out=None):
    """``sample`` is (input, args, kwargs)."""
    inp, args, kwargs = sample
    kwargs = dict(kwargs)
    if out is not None:
        kwargs["out"] = out
    return op(inp, *args, **kwargs)


def check_entry(op, samples: int) -> tuple[str, str]:
    """("pass"|"fail"|"skip", detail) for one OpInfo entry."""
    import torch
    tested = 0
    metadata_only = entry_name(op) in RANDOM_OPS | UNINITIALISED_OPS
    for i, sample in enumerate(op.sample_inputs("cpu", torch.float32, requires_grad=False)):
        if i >= samples:
            break
        sample = (sample.input, sample.args, sample.kwargs)
        musa_sample = move(sample, "musa")
        try:
            ref = _call(op, sample)
            _call(op, musa_sample)
        except Exception:  # functional form fails somewhere: not this sweep's question
            continue
        try:
            cpu_out, musa_out = _empty_like_result(ref, "cpu"), _empty_like_result(ref, "musa")
        except TypeError:
            continue
        if not isinstance(ref, torch.Tensor) and len(cpu_out) == 1:
            cpu_out, musa_out = cpu_out[0], musa_out[0]
        tested += 1
        try:
            want = _call(op, sample, cpu_out)
        except Exception as e:  # the CPU refuses the out= call: musa must refuse it too
            try:
                _call(op, musa_sample, musa_out)
            except Exception as m:
                if type(m) is not type(e):
                    return "fail", f"sample {i}: cpu raised {type(e).__name__}, musa {type(m).__name__}: {m}"
                continue
            return "fail", f"sample {i}: cpu raised {type(e).__name__} ({e}), musa did not"
        try:
            got = _call(op, musa_sample, musa_out)
            compare(_exact(want), _exact(got), "musa", metadata_only)
            compare(_exact(cpu_out), _exact(musa_out), "musa", metadata_only, path="out")
        except Mismatch as e:
            return "fail", f"sample {i}: {e.kind}: {e}"
        except Exception as e:
            return "fail", f"sample {i}: {type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"
    return ("pass", f"{tested} samples") if tested else ("skip", "no sample whose functional form works on both")


def composite_out_overloads() -> list[tuple[str, str]]:
    """(overload, kernel PrivateUse1 gets) for every aten out= overload without a musa kernel of its own."""
    import torch
    rows = []
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::"):
            continue
        if not any(a.kwarg_only and a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
            continue
        name = schema.name + ("." + schema.overload_name if schema.overload_name else "")
        has = lambda key: torch._C._dispatch_has_kernel_for_dispatch_key(name, key)  # noqa: E731
        if has("PrivateUse1"):
            continue
        for key in ("CompositeExplicitAutograd", "CompositeImplicitAutograd"):
            if has(key):
                rows.append((name, key))
                break
    return sorted(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", default="", help="comma-separated OpInfo names (default: all with out=)")
    p.add_argument("--samples", type=int, default=3)
    p.add_argument("--list-composites", action="store_true")
    args = p.parse_args(argv)
    import warnings

    import torch  # noqa: F401  (autoloads torch_musa)
    from torch.testing._internal.common_methods_invocations import op_db
    warnings.filterwarnings("ignore")
    if args.list_composites:
        for name, key in composite_out_overloads():
            print(f"{name:60s} {key}")
    wanted = set(filter(None, args.ops.split(",")))
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for op in op_db:
        if not op.supports_out or (wanted and op.name not in wanted):
            continue
        try:
            status, detail = check_entry(op, args.samples)
        except Exception as e:  # the sample generator itself
            status, detail = "skip", f"samples: {type(e).__name__}: {e}"
            traceback.print_exc(limit=0)
        counts[status] += 1
        if status == "fail":
            print(f"FAIL {entry_name(op)}: {detail}")
    print(f"out= sweep: {counts['pass']} pass, {counts['fail']} fail, {counts['skip']} skip")
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
