"""torch_musa.testing.common_fsdp: FSDPTest runs each test method in its ranks (an mccl group, one
musa device each), check_sharded_parity compares fully_shard's parameters and gradients with a
replicated model's, and one failing rank fails the test instead of hanging the others."""
import os
import unittest

import pytest
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

from torch_musa.testing.common_fsdp import FSDPTest, check_sharded_parity, skip_if_lt_x_gpu

WORLD = 2
# One rank per musa device, as torch's FSDP tests (NCCL refuses two ranks on one GPU).
needs_world = pytest.mark.skipif(torch.musa.device_count() < WORLD, reason=f"needs {WORLD} musa devices")


class _Ranks(FSDPTest):
    __test__ = False  # run by the tests below, not collected by pytest

    @property
    def world_size(self):
        return WORLD

    def test_sharded_training(self):
        self.run_subtests({"bias": [True, False]}, self._sharded_training)

    def _sharded_training(self, bias):
        assert dist.get_backend() == "mccl" and dist.get_world_size() == WORLD
        assert torch.musa.current_device() == self.rank
        torch.manual_seed(0)
        ref = torch.nn.Sequential(torch.nn.Linear(6, 4, bias=bias), torch.nn.Linear(4, 2, bias=bias)).to("musa")
        sharded = torch.nn.Sequential(*(torch.nn.Linear(m.in_features, m.out_features, bias=bias) for m in ref))
        sharded.load_state_dict(ref.state_dict())
        fully_shard(sharded.to("musa"))
        x = torch.randn(3, 6, device="musa")  # the same on every rank: the replicated grads are the mean
        ref(x).square().sum().backward()
        sharded(x).square().sum().backward()
        check_sharded_parity(self, ref, sharded)
        with torch.no_grad():  # a shard that differs is found
            ref[0].weight.add_(1)
        with self.assertRaisesRegex(AssertionError, "0.weight's parameter"):
            check_sharded_parity(self, ref, sharded)
        with open(os.path.join(os.environ["FSDP_TEST_OUT"], f"{self.rank}-{bias}"), "w"):
            pass

    def test_one_rank_fails(self):
        if self.rank == 1:
            raise AssertionError("rank 1 fails")
        dist.barrier()  # rank 0 waits for rank 1 here until the test process stops it


def _run(name):
    result = unittest.TestResult()
    _Ranks(name).run(result)
    return result


@needs_world
def test_each_rank_runs_the_method_and_checks_parity(tmp_path, monkeypatch):
    monkeypatch.setenv("FSDP_TEST_OUT", str(tmp_path))
    result = _run("test_sharded_training")
    assert result.wasSuccessful(), result.failures + result.errors
    assert sorted(os.listdir(tmp_path)) == ["0-False", "0-True", "1-False", "1-True"]


@needs_world
def test_a_failing_rank_fails_the_test_without_waiting_for_the_others():
    result = _run("test_one_rank_fails")
    assert len(result.failures) == 1
    assert "test_one_rank_fails failed in " in result.failures[0][1]
    assert "rank 1 (exit code 10)" in result.failures[0][1]  # (rank 0 may fail too: its peer is gone)


def test_skip_if_lt_x_gpu_skips_with_too_few_devices():
    count = torch.musa.device_count()
    result = unittest.TestResult()
    for needed, skipped in ((count, False), (count + 1, True)):
        case = skip_if_lt_x_gpu(needed)(type("_Needs", (unittest.TestCase,), {"test_x": lambda self: None}))("test_x")
        case.run(result)
        assert (len(result.skipped) == 1) == skipped
    assert result.skipped[0][1] == f"Need at least {count + 1} MUSA devices"
