"""``torch_musa._ext``: the multi-tensor kernels torch_musa programs load by name
(``torch_musa.utils.ext_loader.load_ext("_ext", [...])``), in Apex's calling convention
``op(chunk_size, noop_flag, tensor_lists, *args)``, on torch's _foreach ops."""
import torch

from .multi_tensor_apply import multi_tensor_l2norm, multi_tensor_scale  # noqa: F401


def multi_tensor_lamb(chunk_size, noop_flag, tensor_lists, lr, beta1, beta2, epsilon, step, bias_correction,
                      weight_decay, grad_averaging, mode, global_grad_norm, max_grad_norm, use_nvlamb=False):
    """One LAMB step over ``tensor_lists = [grads, params, exp_avgs, exp_avg_sqs]`` (updated in
    place). Gradients are divided by ``global_grad_norm / max_grad_norm`` when it exceeds 1;
    ``mode`` 0 adds ``weight_decay * p`` to the gradient (L2), 1 to the update (decoupled);
    the trust ratio ||p|| / ||update|| applies when weight decay is on or ``use_nvlamb``.
    Nothing changes while ``noop_flag`` is set (an earlier overflow)."""
    grads, params, m, v = tensor_lists
    if not (len(grads) == len(params) == len(m) == len(v)):
        raise ValueError("multi_tensor_lamb: tensor_lists must be [grads, params, exp_avgs, exp_avg_sqs] "
                         f"of one length, got lengths {[len(t) for t in tensor_lists]}")
    if mode not in (0, 1):
        raise ValueError(f"multi_tensor_lamb: mode is 0 (L2 decay) or 1 (decoupled decay), got {mode}")
    if not grads or bool(noop_flag.item()):
        return
    g = [t.float() for t in grads]
    norm = float(global_grad_norm)
    if max_grad_norm > 0 and norm > max_grad_norm:
        g = torch._foreach_div(g, norm / max_grad_norm)
    w = [p.float() for p in params]
    if mode == 0 and weight_decay:
        g = torch._foreach_add(g, w, alpha=weight_decay)
    torch._foreach_mul_(m, beta1)
    torch._foreach_add_(m, g, alpha=(1 - beta1) if grad_averaging else 1.0)
    torch._foreach_mul_(v, beta2)
    torch._foreach_addcmul_(v, g, g, value=1 - beta2)
    c1, c2 = (1 - beta1 ** step, 1 - beta2 ** step) if bias_correction else (1.0, 1.0)
    denom = torch._foreach_add(torch._foreach_sqrt(torch._foreach_div(v, c2)), epsilon)
    update = torch._foreach_div(torch._foreach_div(m, c1), denom)
    if mode == 1 and weight_decay:
        torch._foreach_add_(update, w, alpha=weight_decay)
    if weight_decay or use_nvlamb:
        w_norm, u_norm = torch.stack(torch._foreach_norm(w)), torch.stack(torch._foreach_norm(update))
        ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
        update = torch._foreach_mul(update, list(ratio.unbind()))
    torch._foreach_add_(w, update, alpha=-lr)
    torch._foreach_copy_(list(params), w)
