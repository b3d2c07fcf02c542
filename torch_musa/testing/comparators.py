"""Comparators: does a musa result match its reference (usually the CPU result)?

Each is a callable ``comparator(result, golden) -> bool`` (shapes must match too) with
``get_tolerance()`` and ``describe(result, golden)`` for the failure message."""
import torch


class Comparator:
    """Base class: subclasses set ``self._comparator(result_cpu, golden_cpu) -> bool``."""

    def __init__(self):
        self._comparator = None
        self._atol, self._rtol, self._equal_nan = 1e-5, 1e-5, False

    def __call__(self, result, golden) -> bool:
        if self._comparator is None:
            raise NotImplementedError(f"{type(self).__name__} sets no comparison: subclass Comparator and "
                                      "assign self._comparator(result, golden) -> bool")
        if not callable(self._comparator):
            raise TypeError(f"{type(self).__name__}._comparator must be callable, got {self._comparator!r}")
        result, golden = result.cpu(), golden.cpu()
        return result.shape == golden.shape and bool(self._comparator(result, golden))

    def get_tolerance(self):
        return self._atol, self._rtol, self._equal_nan

    def describe(self, result, golden) -> str:
        """Where the two differ, for an assertion message."""
        result, golden = result.cpu(), golden.cpu()
        if result.shape != golden.shape:
            return f"shape {tuple(result.shape)} != reference shape {tuple(golden.shape)}"
        if result.dtype == torch.bool or golden.dtype == torch.bool or result.numel() == 0:
            return f"{int((result != golden).sum())} of {result.numel()} elements differ"
        diff = (result.double() - golden.double()).abs()
        return (f"{int((~torch.isclose(result.double(), golden.double(), self._rtol, self._atol, self._equal_nan)).sum())}"
                f" of {result.numel()} elements differ; max abs error {diff.nan_to_num(float('inf')).max().item()}")


class DefaultComparator(Comparator):
    """torch.allclose with both tolerances."""

    def __init__(self, abs_diff=1e-7, rel_diff=1e-5, equal_nan=False):
        super().__init__()
        self._atol, self._rtol, self._equal_nan = abs_diff, rel_diff, equal_nan
        self._comparator = lambda r, g: torch.allclose(r, g, rtol=rel_diff, atol=abs_diff, equal_nan=equal_nan)


class BooleanComparator(Comparator):
    """Exact element-wise equality."""

    def __init__(self):
        super().__init__()
        self._comparator = lambda r, g: bool(torch.eq(r, g).all())


def _max_or_zero(t):
    return t.max() if t.numel() else torch.zeros((), dtype=t.dtype)


class AbsDiffComparator(Comparator):
    """max |golden - result| below ``abs_diff``."""

    def __init__(self, abs_diff=1e-3):
        super().__init__()
        self._atol, self._rtol = abs_diff, 0.0
        self._comparator = lambda r, g: bool(_max_or_zero((g - r).abs()) < abs_diff)


class RelDiffComparator(Comparator):
    """max |(golden - result) / golden| below ``rel_diff``."""

    def __init__(self, rel_diff=1e-5):
        super().__init__()
        self._atol, self._rtol = 0.0, rel_diff
        self._comparator = lambda r, g: bool(_max_or_zero(((g - r) / g).abs()) < rel_diff)


class QuantizedComparator(Comparator):
    """Quantized tensors: dequantized values and integer representations within the tolerances,
    and the same quantization parameters (per tensor or per channel)."""

    def __init__(self, abs_diff=1e-6, rel_diff=1e-5, equal_nan=False, is_per_tensor=True):
        super().__init__()
        self._atol, self._rtol, self._equal_nan = abs_diff, rel_diff, equal_nan
        self._per_tensor = is_per_tensor
        self._comparator = self._compare

    def _close(self, a, b):
        return torch.allclose(a, b, rtol=self._rtol, atol=self._atol, equal_nan=self._equal_nan)

    def _compare(self, r, g):
        if not (self._close(r.dequantize(), g.dequantize()) and self._close(r.int_repr(), g.int_repr())):
            return False
        if self._per_tensor:
            return (abs(r.q_scale() - g.q_scale()) <= self._atol + self._rtol * g.q_scale()
                    and r.q_zero_point() == g.q_zero_point())
        return (torch.allclose(r.q_per_channel_scales(), g.q_per_channel_scales())
                and torch.equal(r.q_per_channel_zero_points(), g.q_per_channel_zero_points())
                and r.q_per_channel_axis() == g.q_per_channel_axis())

    def describe(self, result, golden) -> str:
        return super().describe(result.dequantize(), golden.dequantize())
