"""A small Llama-style decoder written with nn.RoPE, nn.SwishGLU, nn.RMSNorm and F.cross_entropy
(the fused ops on musa) trains under torch.compile (fullgraph) with the same losses as its
unfused form in eager, and under FSDP2 (mccl ranks: 2 on the host driver, 1 on a GPU); the same
ranks check F.rms_norm on a row-sharded DTensor (the fused op's sharding rules)."""
import pytest
import torch

from tests.distributed.launcher import assert_no_failures, run_ranks, worlds
from tests.nn import fused_llama


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_compiled_fused_model_trains_as_the_unfused_one(device):
    fused, unfused = fused_llama.pair(device)
    data = fused_llama.batches(4)
    ref = fused_llama.train(unfused, data, device)
    got = fused_llama.train(fused, data, device, step_fn=torch.compile(fused, fullgraph=True))
    assert ref[-1] < ref[0]  # it trains
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("world", worlds(2))
def test_fsdp2_fused_model_trains_as_the_unfused_one(world):
    assert_no_failures(run_ranks("fsdp_fused_llama", world, timeout=240, module="tests.nn.fused_fsdp_scenarios"))
