"""OpTest and InplaceOpChek: run an op on musa and on its reference (CPU, or musa at another
precision) from the same inputs, and assert the results, gradients and tensor addresses agree."""
import contextlib
import copy
import inspect
import random

import numpy as np
import torch

from .comparators import DefaultComparator

_LOW_FLOATS = (torch.bfloat16, torch.float16, torch.float32)  # what precision tests may recast


def _copy(value):
    """Tensors cloned (a leaf keeps requires_grad), dicts recursed, generators shared, rest deep-copied."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, torch.Generator):
        return value
    return copy.deepcopy(value)


def _comparable(t):
    return t.float() if isinstance(t, torch.Tensor) and t.dtype in (torch.float16, torch.bfloat16) else t


def _assert_match(comparators, result, golden, where=""):
    if isinstance(result, bool) or isinstance(golden, bool):
        assert result == golden, f"{result} != reference {golden}{where}"
        return
    result, golden = _comparable(result.cpu()), _comparable(golden.cpu())
    assert result.shape == golden.shape, f"shape {tuple(result.shape)} != reference {tuple(golden.shape)}{where}"
    assert result.dtype == golden.dtype, f"dtype {result.dtype} != reference {golden.dtype}{where}"
    for comparator in comparators:
        assert comparator(result, golden), comparator.describe(result, golden) + where


def _tensor_ptrs(args):
    """data_ptr of each tensor argument except ``out`` (which an op may resize)."""
    items = args.items() if isinstance(args, dict) else enumerate(args)
    return [v.data_ptr() for k, v in items if k != "out" and isinstance(v, torch.Tensor)]


class OpTest:
    """Runs ``func`` on musa and ``refer_func`` (default: ``func``) as the reference.

    Args:
        func: the op: a function, an nn.Module, or an nn.Module class (built from ``input_args``
            with the same seed on each device).
        refer_func: the reference op, taking the same arguments.
        input_args (dict): keyword arguments of the op.
        comparators: a comparator or a list of them (default: allclose, NaNs equal).
        ignored_result_indices: result positions not compared.
        seed: the seed set before building a module class.
        test_dtype: the dtype inputs (and module weights) are cast to on both sides.
    """

    def __init__(self, func=None, refer_func=None, input_args=None, comparators=None,
                 ignored_result_indices=None, seed=42, test_dtype=None):
        if func is None:
            raise ValueError("OpTest needs func: the op (function, nn.Module or its class) to test")
        if input_args is not None and not isinstance(input_args, dict):
            raise TypeError(f"input_args must be a dict of keyword arguments, got {type(input_args).__name__}")
        self._func, self._refer_func = func, refer_func
        self._input_args = input_args or {}
        if comparators is None:
            comparators = DefaultComparator(equal_nan=True)
        self._comparators = list(comparators) if isinstance(comparators, (list, tuple)) else [comparators]
        self._ignored_result_indices = set(ignored_result_indices or ())
        self._seed = seed
        self._test_dtype = test_dtype
        self._test_low_vs_high = False  # inputs first rounded to _test_dtype, then computed in compute_dtype
        self._input_args_for_out_check = _copy(self._input_args)

    def set_random_seed(self):
        random.seed(self._seed)
        np.random.seed(self._seed)
        torch.manual_seed(self._seed)

    def deep_copy_dict(self, args):
        return _copy(dict(args or {}))

    def wrap_everything(self, x, device, compute_dtype=None, dtype_nocast=False):
        """A tensor (cloned) or module (copied) on ``device`` in the dtype the test asks for;
        anything else as is."""
        if isinstance(x, np.ndarray):
            x = torch.from_numpy(x)
        if not isinstance(x, (torch.Tensor, torch.nn.Module)):
            return x
        if isinstance(x, torch.Tensor):
            requires_grad = x.requires_grad
            x, recastable = x.detach().clone(), x.dtype in _LOW_FLOATS
        else:
            requires_grad, x, recastable = False, copy.deepcopy(x), True
        if not (isinstance(x, torch.Tensor) and x.is_complex()):
            if self._test_dtype is not None and (recastable if self._test_low_vs_high else not dtype_nocast):
                x = x.to(self._test_dtype)
            if compute_dtype is not None and recastable:
                x = x.to(compute_dtype)
        x = x.to(device)
        return x.requires_grad_() if requires_grad and x.is_floating_point() else x

    def _place_all(self, values, device, compute_dtype, nocast):
        items = values.items() if isinstance(values, dict) else enumerate(values)
        placed = {k: self.wrap_everything(v, device, compute_dtype, nocast.get(k, False)) for k, v in items}
        return placed if isinstance(values, dict) else list(placed.values())

    @staticmethod
    def _gradients(args, grads):
        for v in (args.values() if isinstance(args, dict) else args):
            if isinstance(v, torch.Tensor) and v.requires_grad and v.grad is not None:
                grads.append(v.grad.cpu())

    def _call_func(self, inputs, device, train=False, test_out=False, compute_dtype=None, refer=False,
                   dtype_nocast_map=None, onednn_flag=False):
        """Runs the op on ``device``; returns its results on CPU, then the gradients of tensor
        inputs and module parameters (``train``), then whether ``out`` kept its storage (``test_out``)."""
        if test_out and "out" not in self._input_args:
            raise ValueError("test_out=True needs an 'out' tensor in input_args")
        nocast = dtype_nocast_map or {}
        func = self._refer_func if refer and self._refer_func is not None else self._func
        input_args = self._place_all(self._input_args, device, compute_dtype, nocast)
        grads = []
        with contextlib.nullcontext() if train else torch.no_grad():
            if inspect.isclass(func):
                if not isinstance(inputs, dict):
                    raise TypeError("an nn.Module class as func is built from input_args and called "
                                    "with a dict of inputs")
                self.set_random_seed()  # the same weights on each device
                func = func(**input_args)
            func = self.wrap_everything(func, device, compute_dtype)
            if inputs is None:
                args, call = input_args, lambda a: func(**a)
            elif isinstance(inputs, dict):
                args, call = self._place_all(inputs, device, compute_dtype, nocast), lambda a: func(**a)
            elif isinstance(inputs, (list, tuple)):
                args, call = self._place_all(list(inputs), device, compute_dtype, nocast), lambda a: func(*a)
            else:
                args, call = [self.wrap_everything(inputs, device, compute_dtype, nocast.get(0, False))], \
                    lambda a: func(a[0])
            before = _tensor_ptrs(args)
            out_ptr = args["out"].data_ptr() if test_out else None
            result = call(args)
            if not onednn_flag:
                assert _tensor_ptrs(args) == before, "the op moved an input tensor to new storage"
            if test_out:
                assert isinstance(result, torch.Tensor) and result.data_ptr() == args["out"].data_ptr(), \
                    "the op's result is not the out tensor"
            if train:
                (result[0] if isinstance(result, (list, tuple)) else result).sum().backward()
                self._gradients(args, grads)
                if isinstance(func, torch.nn.Module):
                    self._gradients([p for _, p in func.named_parameters()], grads)
        results = [r.cpu() for r in result if r is not None] if isinstance(result, (list, tuple)) else \
            [result if isinstance(result, bool) else result.cpu()]
        results += grads
        if test_out:
            results.append(out_ptr == args["out"].data_ptr())
        return results

    def compare_res(self, res1, res2):
        """Asserts each result of ``res1`` matches ``res2``'s with every comparator."""
        if isinstance(res1, torch.Tensor):
            res1, res2 = [res1], [res2]
        assert len(res1) == len(res2), f"{len(res1)} results != {len(res2)} reference results"
        for i, (r, g) in enumerate(zip(res1, res2)):
            if i not in self._ignored_result_indices:
                _assert_match(self._comparators, r, g, f" (result {i})")

    dim_0_tensor_compare = compare_res

    @contextlib.contextmanager
    def _low_precision(self, dtype):
        saved = self._test_dtype, self._test_low_vs_high
        self._test_dtype, self._test_low_vs_high = dtype, True
        try:
            yield
        finally:
            self._test_dtype, self._test_low_vs_high = saved

    def _compare_runs(self, reference, tested, inputs, train, test_out, **kwargs):
        """reference/tested: (device, compute dtype); the reference runs refer_func."""
        ref = self._call_func(inputs, reference[0], train, test_out, compute_dtype=reference[1], refer=True, **kwargs)
        res = self._call_func(inputs, tested[0], train, test_out, compute_dtype=tested[1], **kwargs)
        self.compare_res(res, ref)

    def check_result(self, inputs=None, train=False, test_out=False, **kwargs):
        """musa against CPU, same dtype."""
        self._compare_runs(("cpu", None), ("musa", None), inputs, train, test_out, **kwargs)

    def check_musafp16_vs_musafp16(self, inputs=None, train=False, test_out=False, **kwargs):
        """func against refer_func, both on musa in float16 (ops validated by a composition)."""
        self._compare_runs(("musa", torch.float16), ("musa", torch.float16), inputs, train, test_out, **kwargs)

    def check_musafp16_vs_musafp32(self, inputs=None, train=False, test_out=False, **kwargs):
        with self._low_precision(torch.float16):
            self._compare_runs(("musa", torch.float32), ("musa", torch.float16), inputs, train, test_out, **kwargs)

    def check_musabf16_vs_musafp16(self, inputs=None, train=False, test_out=False, **kwargs):
        with self._low_precision(torch.bfloat16):
            self._compare_runs(("musa", torch.float16), ("musa", torch.bfloat16), inputs, train, test_out, **kwargs)

    def check_musafp16_vs_cpufp32(self, inputs=None, train=False, test_out=False, **kwargs):
        with self._low_precision(torch.float16):
            self._compare_runs(("cpu", torch.float32), ("musa", torch.float16), inputs, train, test_out, **kwargs)

    def get_addr_list_of_args(self, args):
        return _tensor_ptrs(args)

    def args_to_device(self, args, device, requires_grad=False):
        for k, v in args.items():
            if isinstance(v, torch.Tensor):
                args[k] = v.to(device)
                if requires_grad and args[k].dtype in _LOW_FLOATS:
                    args[k] = args[k].detach().requires_grad_()
        return args

    def args_to_dtype(self, args, dtype):
        for k, v in args.items():
            if isinstance(v, torch.Tensor):
                args[k] = v.to(dtype)
        return args

    def _musa_args(self, bf16, fp16, requires_grad=False):
        args = {k: v.detach() if isinstance(v, torch.Tensor) else v  # out= forms take no grad inputs
                for k, v in self.args_to_device(_copy(self._input_args_for_out_check), "musa").items()}
        if bf16 or fp16:
            args = self.args_to_dtype(args, torch.bfloat16 if bf16 else torch.float16)
        return self.args_to_device(args, "musa", requires_grad)

    def check_out_ops(self, bf16=False, fp16=False):
        """The op's ``out=`` form on musa writes into ``out`` (same storage) the plain form's result.
        Skipped for modules and in-place ops (no out form)."""
        name = getattr(self._func, "__name__", None)
        if name is None or name.endswith("_"):
            return
        expected = self._func(**self._musa_args(bf16, fp16))
        if not isinstance(expected, torch.Tensor):
            return
        args = self._musa_args(bf16, fp16)
        out = args["out"] = torch.empty_like(expected)
        ptr = out.data_ptr()
        returned = self._func(**args)
        assert args["out"].data_ptr() == ptr and returned.data_ptr() == ptr, \
            "the out= form moved the out tensor to new storage"
        self.compare_res(returned.cpu(), out.cpu())
        self.compare_res(expected.cpu(), out.cpu())

    def check_grad_fn(self, bf16=False, fp16=False):
        """The musa result's grad_fn is the same autograd node class as the CPU result's
        (CPU computes in float32). Skipped for in-place ops and out= calls."""
        if getattr(self._func, "__name__", "").endswith("_") or "out" in self._input_args_for_out_check:
            return
        musa_args = self._musa_args(bf16, fp16, requires_grad=True)
        cpu_args = self.args_to_device(_copy(self._input_args_for_out_check), "cpu", requires_grad=True)
        for k, v in cpu_args.items():
            if isinstance(v, torch.Tensor) and v.dtype in (torch.float16, torch.bfloat16):
                cpu_args[k] = v.detach().float().requires_grad_()
        musa_out = self.wrap_everything(self._func, "musa")(**musa_args)
        cpu_out = self.wrap_everything(self._func, "cpu", torch.float32)(**cpu_args)
        if getattr(musa_out, "grad_fn", None) is not None or getattr(cpu_out, "grad_fn", None) is not None:
            assert type(musa_out.grad_fn) is type(cpu_out.grad_fn), \
                f"grad_fn of the musa result ({musa_out.grad_fn}) is not the CPU result's ({cpu_out.grad_fn})"


class InplaceOpChek:
    """Checks a Tensor in-place method (``func_name``, e.g. "add_") on musa: it keeps the storage
    of self and of tensor arguments (check_address), and matches CPU (check_res)."""

    def __init__(self, func_name: str, self_tensor, input_args: dict = None, comparators=None):
        self._func_name = func_name
        if not isinstance(self_tensor, torch.Tensor):
            self_tensor = torch.tensor(self_tensor)
        self._musa_self_tensor = self_tensor.detach().clone().to("musa")
        self._cpu_self_tensor = self_tensor.detach().clone().cpu()
        self._musa_input_args = self.args_to_device(_copy(input_args or {}), "musa")
        self._cpu_input_args = self.args_to_device(_copy(input_args or {}), "cpu")
        self._comparators = list(comparators) if comparators else [DefaultComparator(equal_nan=True)]

    def args_to_device(self, args, device):
        return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in args.items()}

    def args_to_float32(self, args):
        return {k: v.float() if isinstance(v, torch.Tensor) and v.dtype in (torch.float16, torch.bfloat16) else v
                for k, v in args.items()}

    def check_address(self):
        target = self._musa_self_tensor.clone()
        args = _copy(self._musa_input_args)
        before = [target.data_ptr()] + _tensor_ptrs(args)
        getattr(target, self._func_name)(**args)
        assert [target.data_ptr()] + _tensor_ptrs(args) == before, \
            f"Tensor.{self._func_name} moved self or an argument to new storage"

    def compare_res(self, m_r, c_r):
        _assert_match(self._comparators, m_r, c_r)

    def compare_list(self, list1, list2):
        assert len(list1) == len(list2), f"{len(list1)} values != {len(list2)} reference values"
        for a, b in zip(list1, list2):
            self._compare_value(a, b)

    def compare_dict(self, dict1, dict2):
        assert dict1.keys() == dict2.keys(), f"keys {sorted(dict1)} != reference keys {sorted(dict2)}"
        for k in dict1:
            self._compare_value(dict1[k], dict2[k])

    def _compare_value(self, a, b):
        assert type(a) is type(b), f"{type(a).__name__} != reference {type(b).__name__}"
        if isinstance(a, torch.Tensor):
            self.compare_res(a.cpu(), b.cpu())
        elif isinstance(a, dict):
            self.compare_dict(a, b)
        elif isinstance(a, list):
            self.compare_list(a, b)
        else:
            assert a == b, f"{a!r} != reference {b!r}"

    def check_res(self, cpu_to_fp32=False):
        """musa's in-place result (self and the arguments after the call) against CPU's;
        ``cpu_to_fp32`` runs CPU in float32 for ops CPU lacks in half precision."""
        musa_self, musa_args = self._musa_self_tensor.clone(), _copy(self._musa_input_args)
        getattr(musa_self, self._func_name)(**musa_args)
        cpu_self, cpu_args = self._cpu_self_tensor.clone(), _copy(self._cpu_input_args)
        if cpu_to_fp32:
            cpu_self, cpu_args = _comparable(cpu_self), self.args_to_float32(cpu_args)
        getattr(cpu_self, self._func_name)(**cpu_args)
        self.compare_res(musa_self.cpu(), cpu_self)
        self.compare_dict(musa_args, cpu_args)
