"""``torch_musa.testing.common_fsdp``: the multi-process base torch_musa's FSDP and DTensor tests use.

An :class:`FSDPTest` test method runs once per rank: the test process spawns ``world_size``
processes, each joins an mccl process group (one musa device per rank) and runs the method; the
test fails when any rank fails, and the first failure stops the other ranks (which would otherwise
wait in a collective forever).
"""
from __future__ import annotations

import functools
import itertools
import os
import sys
import tempfile
import time
import traceback
import unittest
from typing import Any, Callable, Dict, List, Tuple

import torch
import torch.distributed as dist

from .._core import device as _device

__all__ = ["FSDPTest", "check_sharded_parity", "run_subtests", "skip_if_lt_x_gpu"]


def skip_if_lt_x_gpu(x: int):
    """Skips a test (function or class) on machines with fewer than ``x`` musa devices."""
    return unittest.skipIf(_device.device_count() < x, f"Need at least {x} MUSA devices")


def run_subtests(test_case: unittest.TestCase, subtest_config: Dict[str, List[Any]], test_fn: Callable,
                 *test_args, **test_kwargs) -> None:
    """Runs ``test_fn`` once per combination of the values in ``subtest_config`` (keyword -> values),
    in the ranks' process group: one spawn and rendezvous for all the combinations."""
    names = list(subtest_config)
    for values in itertools.product(*(subtest_config[n] for n in names)):
        kwargs = dict(zip(names, values))
        with test_case.subTest(**kwargs):
            test_fn(*test_args, **test_kwargs, **kwargs)
        dist.barrier()  # no rank starts the next combination's collectives early


def check_sharded_parity(test_case: unittest.TestCase, replicated_module: torch.nn.Module,
                         sharded_module: torch.nn.Module, prefixes_to_ignore: Tuple[str, ...] = ()) -> None:
    """Asserts each of ``sharded_module``'s DTensor parameters (and gradients) holds, on this rank, the
    shard of ``replicated_module``'s that ``distribute_tensor`` gives for the same mesh and placements.
    ``prefixes_to_ignore`` are removed from the sharded names (wrappers' prefixes) before comparing."""
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor

    replicated, sharded = list(replicated_module.named_parameters()), list(sharded_module.named_parameters())
    test_case.assertEqual(len(replicated), len(sharded), "the modules have different numbers of parameters")
    for (name, ref), (sharded_name, param) in zip(replicated, sharded):
        for prefix in prefixes_to_ignore:
            sharded_name = sharded_name.replace(prefix, "")
        test_case.assertEqual(name, sharded_name)
        test_case.assertIsInstance(param, DTensor, f"{sharded_name} is not sharded (not a DTensor)")
        if tuple(param.placements) == (Shard(0), Shard(0)):
            raise AssertionError(f"{sharded_name}: FSDP's (Shard(0), Shard(0)) layout is not distribute_tensor's; "
                                 "compare full tensors (full_tensor()) instead")
        for what, got, want in (("parameter", param, ref), ("gradient", param.grad, ref.grad)):
            if want is None:
                test_case.assertIsNone(got, f"{sharded_name} has a {what}, the replicated module has none")
                continue
            test_case.assertIsInstance(got, DTensor, f"{sharded_name}'s {what} is not a DTensor")
            expected = distribute_tensor(want.detach(), param.device_mesh, param.placements).to_local()
            torch.testing.assert_close(got.to_local(), expected, msg=lambda m: f"{sharded_name}'s {what}: {m}")


class FSDPTest(unittest.TestCase):
    """A test case whose test methods run in ``world_size`` ranks (default: the musa devices, at most 8)."""

    MAIN_PROCESS_RANK = -1
    TEST_ERROR_EXIT_CODE = 10
    #: seconds the test process waits for its ranks before it stops them and fails
    TIMEOUT = 300

    def __init__(self, method_name: str = "runTest") -> None:
        super().__init__(method_name)
        self.rank = self.MAIN_PROCESS_RANK
        self.processes = []
        if method_name != "runTest":
            fn = getattr(self, method_name)
            # In the test process the method spawns the ranks and waits for them; in a rank it runs.
            setattr(self, method_name, functools.wraps(fn)(lambda: self._join_or_run(fn)))

    def runTest(self) -> None:  # the instance each rank builds before it picks its method
        pass

    @property
    def world_size(self) -> int:
        return min(_device.device_count(), 8)

    @property
    def process_group(self):
        return dist.distributed_c10d._get_default_group()

    def run_subtests(self, *args, **kwargs) -> None:
        run_subtests(self, *args, **kwargs)

    def _join_or_run(self, fn: Callable) -> None:
        if self.rank != self.MAIN_PROCESS_RANK:
            fn()
            return
        with tempfile.TemporaryDirectory(prefix="fsdp_test_") as tmp:
            store = os.path.join(tmp, "store")  # a file rendezvous: no port to pick or collide on
            ctx = torch.multiprocessing.get_context("spawn")
            self.processes = [ctx.Process(target=type(self)._run, name=f"rank {rank}",
                                          args=(rank, self._testMethodName, self.world_size, store))
                              for rank in range(self.world_size)]
            for p in self.processes:
                p.start()
            try:
                failed = self._join_processes()
            finally:
                for p in self.processes:
                    p.kill()
                    p.join()
        if failed:
            self.fail(f"{self._testMethodName} failed in {', '.join(failed)} (see the ranks' output above)")

    def _join_processes(self) -> List[str]:
        """Waits for the ranks; returns the failed ones' descriptions (at the first failure, at once)."""
        deadline = time.monotonic() + self.TIMEOUT
        while time.monotonic() < deadline:
            failed = [f"{p.name} (exit code {p.exitcode})" for p in self.processes if p.exitcode not in (None, 0)]
            if failed or all(p.exitcode == 0 for p in self.processes):
                return failed
            time.sleep(0.1)
        return [f"{p.name} (still running after {self.TIMEOUT}s)" for p in self.processes if p.exitcode is None]

    @classmethod
    def _run(cls, rank: int, test_name: str, world_size: int, store: str) -> None:
        self = cls(test_name)
        self.rank = rank
        dist.init_process_group("mccl", init_method=f"file://{store}", rank=rank, world_size=world_size)
        _device.set_device(rank % _device.device_count())
        try:
            dist.barrier()
            getattr(self, test_name)()
            dist.barrier()
        except BaseException:  # noqa: BLE001 - any failure of the rank fails the test
            print(f"rank {rank} of {test_name} failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
            os._exit(cls.TEST_ERROR_EXIT_CODE)  # the others may be blocked in a collective: no clean shutdown
        dist.destroy_process_group()
