"""``torch_musa.testing``: helpers for tests of musa ops and programs, with the API torch_musa's
test suites import (``OpTest``, comparators, markers, dtype lists, ``get_musa_arch``, ...)."""
import os

import torch

from .base_test_tool import (  # noqa: F401
    MULTIGPU_AVAILABLE, AbsDiffComparator, BooleanComparator, DefaultComparator, InplaceOpChek, OpTest,
    QuantizedComparator, RelDiffComparator, _complex_cpu_to_musa_adjust, _complex_musa_to_cpu_adjust, gen_ip_port,
    get_all_support_types, get_all_support_types_withfp16, get_all_types, get_float_types, get_raw_data,
    skip_if_musa_unavailable, skip_if_not_multiple_musa_device, test_on_nonzero_card_if_multiple_musa_device)
from .common_utils import (  # noqa: F401
    assert_equal, cpu_and_musa, freeze_rng_state, get_cycles_per_ms, get_musa_arch, needs_musa)

# Test suites set this to compare float32 convolutions without TF32.
if os.environ.get("TORCH_MUSA_TESTING_NO_TF32"):
    torch.backends.mudnn.set_flags(_allow_tf32=False)
