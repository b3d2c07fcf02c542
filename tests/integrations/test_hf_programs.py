"""Hugging Face programs (transformers Trainer, accelerate bf16, generate with a static cache,
pipeline, peft LoRA merge, a diffusers UNet + DDPM loop) give on musa what they give on the CPU.

On a GPU (TORCH_MUSA_DRIVER=cuda) the same programs are compared with native CUDA in a
separate process: ``python3 -m tests.integrations.hf_programs --device cuda`` with
TORCH_DEVICE_BACKEND_AUTOLOAD=0, then ``--device musa --compare-with`` its output.
"""
import pytest
import torch

from tests.integrations import hf_programs

for _lib in ("transformers", "accelerate", "peft", "diffusers"):
    pytest.importorskip(_lib, reason=f"{_lib} is not installed (scripts/setup.sh installs it)")


@pytest.mark.parametrize("name", sorted(hf_programs.PROGRAMS))
def test_program_on_musa_matches_cpu(name):
    if name == "accelerate_bf16" and torch.musa.get_driver_name() != "host":
        pytest.skip("bf16 autocast rules differ between CUDA and the CPU; compared with native CUDA instead")
    program = hf_programs.PROGRAMS[name]
    reference, result = program("cpu"), program("musa")
    assert result.get("device", "musa") == "musa", result
    assert hf_programs.mismatches({name: result}, {name: reference}) == []
