"""FusedAdam / FusedAdamW: torch.optim.Adam / AdamW with ``fused=True``.

ATen's fused Adam kernels update every parameter of a dtype and device group in one launch per
group, and they take GradScaler's ``grad_scale`` / ``found_inf`` directly, so a scaled step
never leaves the device. On musa those kernels run through the op layer (ATen's CPU kernel on the
host driver, its CUDA kernel on the cuda driver). FP16, BF16 and FP32 parameters are supported,
and so are DTensor parameters, as torch.optim's fused path allows them.
"""
import torch


class _FusedStep:
    """The step of torch.optim's fused Adam/AdamW without its per-step Python bookkeeping.

    torch's step rebuilds its tensor lists parameter by parameter (``_init_group``) and regroups
    them by device and dtype every step: on a GPT-2-sized model that host work is longer than the
    two kernel launches it prepares, and the device waits for it. Once every parameter of a group
    has its state, the lists are read straight from the state here, checked, and passed to the same
    kernels (``_foreach_add_`` of the steps, ``_fused_adam(w)_``) with the same arguments. Anything
    torch's step handles differently (a closure, compiling, a parameter without a gradient or
    state, a sparse gradient, mixed dtypes or devices, tensor lr or betas, differentiable) takes
    torch's step unchanged."""

    def step(self, closure=None):
        if closure is not None or torch.compiler.is_compiling():
            return self._torch_step(closure)
        grad_scale, found_inf = getattr(self, "grad_scale", None), getattr(self, "found_inf", None)
        calls = []
        for group in self.param_groups:
            call = self._direct_call(group)
            if call is None:
                return self._torch_step(closure)
            calls.append(call)
        with torch.no_grad():
            for group, lists, device in calls:
                if not lists[0]:
                    continue
                steps = lists[5]
                scale = grad_scale if grad_scale is None or grad_scale.device == device \
                    else grad_scale.to(device, non_blocking=True)
                inf = found_inf if found_inf is None or found_inf.device == device \
                    else found_inf.to(device, non_blocking=True)
                torch._foreach_add_(steps, 1)
                fused = torch._fused_adamw_ if self._decoupled(group) else torch._fused_adam_
                beta1, beta2 = group["betas"]
                fused(*lists, amsgrad=group["amsgrad"], lr=group["lr"], beta1=beta1, beta2=beta2,
                      weight_decay=group["weight_decay"], eps=group["eps"], maximize=group["maximize"],
                      grad_scale=scale, found_inf=inf)
                if inf is not None:
                    torch._foreach_sub_(steps, [inf] * len(steps))
        return None

    def _torch_step(self, closure):
        # torch's step as it is defined, not as Optimizer's hook wrapper may have replaced it on
        # torch's class (that wrapper already runs around this step: hooks would run twice)
        step = super().step.__func__
        step = step.__wrapped__ if getattr(step, "hooked", False) else step
        return step(self, closure)

    def _decoupled(self, group) -> bool:
        return isinstance(self, torch.optim.AdamW) or bool(group.get("decoupled_weight_decay", False))

    def _direct_call(self, group):
        """(group, the six kernel lists, device) where the direct step applies to `group`, else None."""
        params = group["params"]
        if group.get("differentiable") or torch.is_tensor(group["lr"]) or \
                any(torch.is_tensor(b) for b in group["betas"]):
            return None
        if not params:
            return group, ([],) * 6, None
        first = params[0]
        dtype, device = first.dtype, first.device
        grads = [p.grad for p in params]
        for g in grads:
            if g is None or g.is_sparse:
                return None
        if any(p.dtype != dtype or p.device != device for p in params):
            return None
        get = self.state.get
        try:
            states = [get(p) for p in params]
            exp_avgs = [s["exp_avg"] for s in states]
            exp_avg_sqs = [s["exp_avg_sq"] for s in states]
            steps = [s["step"] for s in states]
            max_sqs = [s["max_exp_avg_sq"] for s in states] if group["amsgrad"] else []
        except (KeyError, TypeError):  # a parameter without state yet: torch's step makes it
            return None
        return group, (params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps), device


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


class FusedAdam(_FusedStep, torch.optim.Adam):
    """Adam with every update in ATen's fused multi-tensor kernel; ``adam_w_mode=True`` decays
    the weights decoupled (AdamW), as torch_musa/Apex's FusedAdam."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                 adam_w_mode=False, *, maximize=False, capturable=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         maximize=maximize, capturable=capturable, fused=True,
                         decoupled_weight_decay=adam_w_mode)

    def state_dict(self):
        return _steps_on_host(super().state_dict())


class FusedAdamW(_FusedStep, torch.optim.AdamW):
    """AdamW with every update in ATen's fused multi-tensor kernel."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, capturable=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         maximize=maximize, capturable=capturable, fused=True)

    def state_dict(self):
        return _steps_on_host(super().state_dict())
