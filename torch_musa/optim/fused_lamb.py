"""FusedLAMB: LAMB (You et al., "Large Batch Optimization for Deep Learning") with the update
of every parameter group done by torch's multi-tensor (_foreach) ops, a handful of launches per
group instead of several per parameter, in the form Apex's and torch_musa's FusedLAMB use:
global gradient-norm clipping to ``max_grad_norm``, Adam moments with optional bias correction,
decoupled weight decay inside the update, and a per-parameter trust ratio ||p|| / ||update||.
"""
import torch


class FusedLAMB(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01, bias_correction=True,
                 max_grad_norm=1.0, grad_averaging=True):
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"FusedLAMB needs lr, eps and weight_decay >= 0, got {lr}, {eps}, {weight_decay}")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"FusedLAMB betas must lie in [0, 1), got {betas}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, bias_correction=bias_correction,
                        max_grad_norm=max_grad_norm, grad_averaging=grad_averaging)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        groups = [(g, [p for p in g["params"] if p.grad is not None]) for g in self.param_groups]
        grads = [p.grad for _, ps in groups for p in ps]
        if not grads:
            return loss
        for g in grads:
            if g.is_sparse:
                raise RuntimeError("FusedLAMB does not support sparse gradients; use dense gradients")
        # One clipping factor over all gradients (in float32, whatever the parameters' dtype).
        max_norm = self.defaults["max_grad_norm"]
        global_norm = torch.linalg.vector_norm(torch.stack([n.float() for n in torch._foreach_norm(grads)]))
        clip = torch.clamp(global_norm / max_norm, min=1.0) if max_norm and max_norm > 0 else None
        for group, params in groups:
            if params:
                self._update(group, params, clip)
        return loss

    def _update(self, group, params, clip):
        beta1, beta2 = group["betas"]
        m, v, steps = [], [], []
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = torch.zeros((), dtype=torch.float32)
                state["exp_avg"] = torch.zeros_like(p, dtype=torch.float32, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.float32, memory_format=torch.preserve_format)
            m.append(state["exp_avg"])
            v.append(state["exp_avg_sq"])
            steps.append(state["step"])
        torch._foreach_add_(steps, 1.0)
        step = steps[0].item()
        grads = [p.grad.float() for p in params]  # (float32 grads are the grads themselves: never written)
        if clip is not None:
            grads = torch._foreach_div(grads, clip)
        # Moments (float32 master statistics for fp16/bf16 parameters).
        torch._foreach_mul_(m, beta1)
        torch._foreach_add_(m, grads, alpha=1 - beta1 if group["grad_averaging"] else 1.0)
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
        c1 = 1 - beta1 ** step if group["bias_correction"] else 1.0
        c2 = 1 - beta2 ** step if group["bias_correction"] else 1.0
        denom = torch._foreach_sqrt(torch._foreach_div(v, c2))
        torch._foreach_add_(denom, group["eps"])
        update = torch._foreach_div(torch._foreach_div(m, c1), denom)
        weights = [p.float() for p in params]  # float32 master copies of fp16/bf16 parameters
        if group["weight_decay"]:
            torch._foreach_add_(update, weights, alpha=group["weight_decay"])
        # Trust ratio per parameter: ||p|| / ||update||, 1 where either norm is 0.
        w_norm = torch.stack(torch._foreach_norm(weights))
        u_norm = torch.stack(torch._foreach_norm(update))
        ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
        scaled = torch._foreach_mul(update, list((-group["lr"] * ratio).unbind()))
        torch._foreach_add_(weights, scaled)
        low = [(p, w) for p, w in zip(params, weights) if p.dtype != torch.float32]
        if low:
            torch._foreach_copy_([p for p, _ in low], [w for _, w in low])
