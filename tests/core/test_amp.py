"""Autocast and GradScaler on musa follow torch.cuda's documented AMP policy.

Reference: https://pytorch.org/docs/stable/amp.html#cuda-ops-that-can-autocast-to-float16
(ops that autocast to the lower dtype; ops that autocast to float32; ops that promote to the widest input type).
"""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

LOW = [torch.float16, torch.bfloat16]


def _r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# CUDA's "autocast to lower precision" list (a sample)
LOWER_OPS = {
    "matmul": lambda a, b, c: a @ b,
    "mm": lambda a, b, c: torch.mm(a, b),
    "addmm": lambda a, b, c: torch.addmm(c, a, b),
    "bmm": lambda a, b, c: torch.bmm(a.unsqueeze(0), b.unsqueeze(0)),
    "baddbmm": lambda a, b, c: torch.baddbmm(c.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0)),
    "linear": lambda a, b, c: F.linear(a, b.t(), c[0]),
    "conv2d": lambda a, b, c: F.conv2d(a.view(1, 1, 8, 8), b[:3, :3].reshape(1, 1, 3, 3)),
    "addbmm": lambda a, b, c: torch.addbmm(c, a.unsqueeze(0), b.unsqueeze(0)),
    "prelu": lambda a, b, c: F.prelu(a, torch.tensor([0.25], device=a.device)),
}

# CUDA's "autocast to float32" list (a sample)
FP32_OPS = {
    "softmax": lambda x, t: F.softmax(x, dim=-1),
    "log_softmax": lambda x, t: F.log_softmax(x, dim=-1),
    "cross_entropy": lambda x, t: F.cross_entropy(x, t),
    "nll_loss": lambda x, t: F.nll_loss(x, t),
    "mse_loss": lambda x, t: F.mse_loss(x, x.flip(0)),
    "layer_norm": lambda x, t: F.layer_norm(x, (8,)),
    "group_norm": lambda x, t: F.group_norm(x, 2),
    "exp": lambda x, t: torch.exp(x),
    "log": lambda x, t: torch.log(x.abs() + 1),
    "sum": lambda x, t: torch.sum(x),
    "cumsum": lambda x, t: torch.cumsum(x, 0),
    "pow": lambda x, t: torch.pow(x, 2),
    "norm": lambda x, t: torch.norm(x),
    "binary_cross_entropy_with_logits": lambda x, t: F.binary_cross_entropy_with_logits(x, x.sigmoid()),
    "smooth_l1_loss": lambda x, t: F.smooth_l1_loss(x, x.flip(0)),
    "kl_div": lambda x, t: F.kl_div(x, x.softmax(-1), reduction="batchmean"),
}


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name", sorted(LOWER_OPS))
def test_autocast_lowers_like_cuda(name, dtype):
    fn = LOWER_OPS[name]
    a, b, c = _r(8, 8), _r(8, 8, seed=1), _r(8, 8, seed=2)
    with torch.autocast("musa", dtype=dtype):
        out = fn(a.musa(), b.musa(), c.musa())
    assert out.dtype == dtype, f"{name} under musa autocast gave {out.dtype}, CUDA gives {dtype}"
    # numerically: the same op on CPU with inputs cast to the low dtype, computed in float32
    ref = fn(a.to(dtype).float(), b.to(dtype).float(), c.to(dtype).float())
    tol = 2e-2 if dtype == torch.bfloat16 else 5e-3
    torch.testing.assert_close(out.float().cpu(), ref, rtol=tol, atol=tol * 4)


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("name", sorted(FP32_OPS))
def test_autocast_keeps_fp32_like_cuda(name, dtype):
    fn = FP32_OPS[name]
    x = _r(4, 8)
    t = torch.tensor([1, 0, 7, 3])
    # inputs arrive in the low dtype (e.g. from a lowered matmul); CUDA autocast runs these in float32
    with torch.autocast("musa", dtype=dtype):
        out = fn(x.musa().to(dtype), t.musa())
    assert out.dtype == torch.float32, f"{name} under musa autocast gave {out.dtype}, CUDA gives float32"
    ref = fn(x.to(dtype).float(), t)
    # composites may keep low-precision intermediates, exactly as on CUDA (cross_entropy calls
    # log_softmax(x, dtype=x.dtype)); so compare within the low dtype's precision
    tol = 1e-2 if dtype == torch.bfloat16 else 2e-3
    torch.testing.assert_close(out.cpu(), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_autocast_promote_ops(dtype):
    a = torch.randn(3, 4, device="musa")
    b = torch.randn(3, 4, device="musa").to(dtype)
    with torch.autocast("musa", dtype=dtype):
        assert torch.cat([a, b]).dtype == torch.float32
        assert torch.stack([a, b]).dtype == torch.float32
        assert torch.addcmul(a, b, b).dtype == torch.float32
        # ops outside every list run in the input dtype
        assert torch.relu(b).dtype == dtype
        assert (a + 1).dtype == torch.float32


def test_autocast_state_and_default_dtype():
    assert not torch.is_autocast_enabled("musa")
    # like CUDA, the default autocast dtype is float16
    assert torch.get_autocast_dtype("musa") == torch.float16
    with torch.autocast("musa"):
        assert torch.is_autocast_enabled("musa")
        assert not torch.is_autocast_enabled("cpu")
        assert (torch.randn(2, 2, device="musa") @ torch.randn(2, 2, device="musa")).dtype == torch.float16
    with torch.autocast("musa", dtype=torch.bfloat16):
        assert torch.get_autocast_dtype("musa") == torch.bfloat16
    assert not torch.is_autocast_enabled("musa")


def test_autocast_disabled_and_nested():
    a = torch.randn(4, 4, device="musa")
    with torch.autocast("musa", dtype=torch.bfloat16):
        with torch.autocast("musa", enabled=False):
            assert (a @ a).dtype == torch.float32
        assert (a @ a).dtype == torch.bfloat16


def test_musa_autocast_does_not_touch_cpu_tensors():
    a = torch.randn(4, 4)
    with torch.autocast("musa", dtype=torch.float16):
        assert (a @ a).dtype == torch.float32


def test_torch_musa_amp_autocast_alias():
    a = torch.randn(4, 4, device="musa")
    with torch.musa.amp.autocast(dtype=torch.bfloat16):
        assert (a @ a).dtype == torch.bfloat16
    with torch.musa.amp.autocast():
        assert (a @ a).dtype == torch.float16


def test_autocast_backward_grads_fp32_and_match_cpu():
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    m = copy.deepcopy(ref).musa()
    x, t = _r(6, 8), torch.tensor([0, 1, 2, 3, 0, 1])
    with torch.autocast("musa", dtype=torch.bfloat16):
        out = m(x.musa())
        loss = F.cross_entropy(out, t.musa())
    assert out.dtype == torch.bfloat16 and loss.dtype == torch.float32
    loss.backward()
    # reference: CPU autocast with bfloat16 lowers linear too (CPU's bf16 list includes linear/addmm)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lref = F.cross_entropy(ref(x), t)
    lref.backward()
    torch.testing.assert_close(loss.cpu(), lref.float(), rtol=2e-2, atol=2e-2)
    for pr, pm in zip(ref.parameters(), m.parameters()):
        assert pm.grad.dtype == torch.float32
        torch.testing.assert_close(pm.grad.cpu(), pr.grad, rtol=5e-2, atol=5e-2)


def test_custom_fwd_cast_inputs():
    class F32Op(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="musa", cast_inputs=torch.float32)
        def forward(ctx, a):
            return a @ a

        @staticmethod
        @torch.amp.custom_bwd(device_type="musa")
        def backward(ctx, g):
            return g

    a = torch.randn(3, 3, device="musa", dtype=torch.float16)
    with torch.autocast("musa", dtype=torch.float16):
        assert F32Op.apply(a).dtype == torch.float32


# ---------------------------------------------------------------- GradScaler


def _scaler_run(device, grads_inf_at=(), steps=4, init_scale=2.0 ** 8, growth_interval=2):
    torch.manual_seed(0)
    model = nn.Linear(4, 2).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device, init_scale=init_scale, growth_interval=growth_interval)
    g = torch.Generator().manual_seed(5)
    scales, weights = [], []
    for i in range(steps):
        x = torch.randn(3, 4, generator=g).to(device)
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        scaler.scale(loss).backward()
        if i in grads_inf_at:
            model.weight.grad[0, 0] = float("inf")
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        weights.append(model.weight.detach().cpu().clone())
    return scales, weights, model


def test_grad_scaler_matches_cpu_scaler():
    scales_c, w_c, _ = _scaler_run("cpu")
    scales_m, w_m, model = _scaler_run("musa")
    assert model.weight.is_musa
    assert scales_m == scales_c
    for a, b in zip(w_m, w_c):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_grad_scaler_inf_skips_step_and_backs_off():
    init = 2.0 ** 8
    scales, weights, _ = _scaler_run("musa", grads_inf_at=(1,), init_scale=init, growth_interval=100)
    ref_scales, ref_weights, _ = _scaler_run("cpu", grads_inf_at=(1,), init_scale=init, growth_interval=100)
    # documented: an inf/NaN step is skipped and the scale is multiplied by backoff_factor (0.5)
    assert scales[1] == scales[0] * 0.5
    assert torch.equal(weights[1], weights[0])
    assert scales == ref_scales
    for a, b in zip(weights, ref_weights):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_grad_scaler_growth():
    scales, _, _ = _scaler_run("musa", steps=4, init_scale=4.0, growth_interval=2)
    # documented: after growth_interval consecutive finite steps the scale is multiplied by growth_factor (2)
    assert scales == [4.0, 8.0, 8.0, 16.0]


def test_grad_scaler_unscale_and_clip():
    model = nn.Linear(4, 2).musa()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.musa.amp.GradScaler(init_scale=1024.0)
    loss = model(torch.randn(3, 4, device="musa")).sum()
    scaler.scale(loss).backward()
    scaled = model.weight.grad.clone()
    scaler.unscale_(opt)
    torch.testing.assert_close(model.weight.grad.cpu(), scaled.cpu() / 1024.0)
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 1024.0


def test_grad_scaler_fp16_autocast_training():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1)).musa()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("musa")
    x, y = torch.randn(32, 8, device="musa"), torch.randn(32, 1, device="musa")
    losses = []
    for _ in range(20):
        opt.zero_grad()
        with torch.autocast("musa", dtype=torch.float16):
            loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert losses[-1] < losses[0]


def test_autocast_op_lists_equal_cuda_registrations():
    # The reference is torch's own AutocastCUDA registrations (compiled into every wheel).
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    names = torch._C._dispatch_get_all_op_names()
    cuda = {n for n in names if has(n, "AutocastCUDA")}
    musa = {n for n in names if has(n, "AutocastPrivateUse1")}
    cuda_only_backend_ops = {n for n in cuda if "cudnn" in n or "miopen" in n}
    assert len(cuda) > 50
    assert cuda - cuda_only_backend_ops == musa - cuda_only_backend_ops


def test_binary_cross_entropy_banned_under_autocast_like_cuda():
    p = torch.rand(4, device="musa")
    with torch.autocast("musa", dtype=torch.float16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(p, p)
