"""The unfused compositions the fused LLM op tests compare with, computed in float64 on the CPU
(Megatron's rotary embedding, silu * gate, x * rsqrt(mean(x^2) + eps) * w, log_softmax + nll)."""
import torch
import torch.nn.functional as F

TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (4e-3, 4e-3), torch.bfloat16: (3e-2, 3e-2)}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _rotate(t, interleaved):
    if not interleaved:
        t1, t2 = torch.chunk(t, 2, dim=-1)
        return torch.cat((-t2, t1), dim=-1)
    x1, x2 = t[..., ::2], t[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).reshape(t.shape)


def rope(x, freq, interleaved=False, batch_first=False, mla=False):
    S, R = freq.shape[0], freq.shape[-1]
    f = freq.reshape(S, R).double()
    f = f.reshape(1, S, 1, R) if batch_first else f.reshape(S, 1, 1, R)
    t, t_pass = x[..., :R], x[..., R:]
    if mla:
        t = torch.cat([t[..., 0::2], t[..., 1::2]], dim=-1)
    t = t * f.cos().to(x.dtype) + _rotate(t, interleaved) * f.sin().to(x.dtype)
    return torch.cat((t, t_pass), dim=-1)


def swish_glu(x):
    a, b = torch.chunk(x, 2, dim=-1)
    return F.silu(a) * b


def rms_norm(x, shape, w=None, eps=1e-6):
    dims = tuple(range(x.dim() - len(shape), x.dim()))
    y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
    return y * w if w is not None else y


def cross_entropy(x, t, w=None, reduction="mean", ignore_index=-100):
    return F.nll_loss(torch.log_softmax(x, -1), t, w, reduction=reduction, ignore_index=ignore_index)


def check_fwd_bwd(fused, reference, inputs, dtype, device="musa", grad_of=None):
    """fused(*musa inputs in dtype) against reference(*float64 CPU inputs): the output and the
    gradient of each floating input (index in grad_of, default all) for one random cotangent."""
    grad_of = range(len(inputs)) if grad_of is None else grad_of
    ref_in = [t.double().requires_grad_(i in grad_of) if t.is_floating_point() else t for i, t in enumerate(inputs)]
    dev_in = [(t.to(device, dtype).requires_grad_(i in grad_of) if t.is_floating_point() else t.to(device))
              for i, t in enumerate(inputs)]
    ref = reference(*ref_in)
    out = fused(*dev_in)
    assert out.device.type == torch.device(device).type and out.dtype == dtype and out.shape == ref.shape
    atol, rtol = TOL[dtype]
    scale = ref.detach().abs().max().clamp(min=1)
    torch.testing.assert_close(out.detach().cpu().double(), ref.detach(), atol=atol * scale, rtol=rtol)
    cot = torch.randn_like(ref)
    ref.backward(cot)
    out.backward(cot.to(device, dtype))
    for i in grad_of:
        g_ref = ref_in[i].grad
        g = dev_in[i].grad
        assert g is not None and g.device.type == torch.device(device).type and g.dtype == dtype
        gs = g_ref.abs().max().clamp(min=1)
        torch.testing.assert_close(g.cpu().double(), g_ref, atol=atol * gs * 2, rtol=rtol * 2)


def ops_outside_fused_ops(fn):
    """Names of the ops fn runs (under the profiler) that no musa_fused op called: those the
    autograd engine runs itself, such as zeros made for a gradient nobody passed."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()

    def inside_fused(e):
        while e is not None and not e.name.startswith("musa_fused::"):
            e = e.cpu_parent
        return e is not None
    return {e.name for e in prof.events() if e.name.startswith("aten::") and not inside_fused(e)}
