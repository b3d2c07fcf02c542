"""FSDP2 (plain, reshard_after_forward=False, bf16 mixed precision, CPU offload), FSDP1, DTensor,
tensor parallelism and a torch.distributed.checkpoint round trip on a musa DeviceMesh, each against
single-process training or the tensor it came from."""
import pytest

from tests.distributed.launcher import assert_no_failures, run_ranks, worlds


@pytest.mark.parametrize("world", worlds(2))
def test_fsdp_tp_dcp_match_single_process(world, tmp_path):
    results = run_ranks("fsdp_tp", world, timeout=300, env={"MCCL_CKPT": str(tmp_path / "ckpt")})
    assert_no_failures(results)
