"""FusedAdam / FusedAdamW: torch.optim.Adam / AdamW with ``fused=True``.

ATen's fused Adam kernels update every parameter of a dtype and device group in one launch per
group, and they take GradScaler's ``grad_scale`` / ``found_inf`` directly, so a scaled step
never leaves the device. On musa those kernels run through the op layer (ATen's CPU kernel on the
host driver, its CUDA kernel on the cuda driver). FP16, BF16 and FP32 parameters are supported,
and so are DTensor parameters, as torch.optim's fused path allows them.
"""
import torch


def _steps_on_host(state_dict: dict) -> dict:
    """torch_musa's FusedAdam keeps ``step`` on the host in its state dict (torch's fused Adam keeps
    it beside the parameters, where its kernel reads it). The optimizer's own steps stay on the
    device; the state dict gets host copies, and loading moves them back (fused: float32 on the
    parameter's device), so a checkpoint round-trips either way."""
    for key, param_state in state_dict["state"].items():
        step = param_state.get("step")
        if torch.is_tensor(step) and step.device.type != "cpu":
            # (a new per-parameter dict: torch's state dict shares them with the live state)
            state_dict["state"][key] = {**param_state, "step": step.detach().to("cpu", copy=True)}
    return state_dict


class FusedAdam(torch.optim.Adam):
    """Adam with every update in ATen's fused multi-tensor kernel; ``adam_w_mode=True`` decays
    the weights decoupled (AdamW), as torch_musa/Apex's FusedAdam."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                 adam_w_mode=False, *, maximize=False, capturable=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         maximize=maximize, capturable=capturable, fused=True,
                         decoupled_weight_decay=adam_w_mode)

    def state_dict(self):
        return _steps_on_host(super().state_dict())


class FusedAdamW(torch.optim.AdamW):
    """AdamW with every update in ATen's fused multi-tensor kernel."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, capturable=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         maximize=maximize, capturable=capturable, fused=True)

    def state_dict(self):
        return _steps_on_host(super().state_dict())
