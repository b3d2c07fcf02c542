"""Markers for tests that need a package the GPU image may lack.

torch's OpInfo machinery (torch.testing._internal.common_methods_invocations) imports
expecttest; where it is missing those tests skip with that reason instead of failing.
"""
import importlib.util

import pytest

needs_expecttest = pytest.mark.skipif(
    importlib.util.find_spec("expecttest") is None,
    reason="needs expecttest (torch's OpInfo machinery imports it): pip install expecttest",
)
