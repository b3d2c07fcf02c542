"""torch_musa.optim's fused optimizers against references: FusedAdam/FusedAdamW against
torch.optim's Adam/AdamW on the CPU, FusedLAMB against a per-parameter float64 LAMB written out
here; fp16/bf16 parameters, GradScaler steps (skipped on inf), and bad input."""
import pytest
import torch

from torch_musa.optim import FusedAdam, FusedAdamW, FusedLAMB


def _params(dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(16, 8), (8,), (3, 4, 5)]
    return [torch.randn(s, generator=g).to(dtype) for s in shapes]


def _run(make_opt, init, device, steps=5, seed=1):
    params = [torch.nn.Parameter(p.clone().to(device)) for p in init]
    opt = make_opt(params)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g).to(p.dtype).to(device)
        opt.step()
    return [p.detach().cpu() for p in params], opt


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_fused_adamw_matches_torch_adamw(device, wd):
    init = _params()
    got, opt = _run(lambda p: FusedAdamW(p, lr=1e-2, weight_decay=wd), init, device)
    ref, _ = _run(lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=wd, foreach=False), init, "cpu")
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert all(g["fused"] for g in opt.param_groups)


@pytest.mark.parametrize("adam_w_mode,ref_cls", [(False, torch.optim.Adam), (True, torch.optim.AdamW)])
def test_fused_adam_matches_adam_or_adamw(device, adam_w_mode, ref_cls):
    init = _params()
    got, _ = _run(lambda p: FusedAdam(p, lr=1e-2, weight_decay=0.05, adam_w_mode=adam_w_mode), init, device)
    ref, _ = _run(lambda p: ref_cls(p, lr=1e-2, weight_decay=0.05, foreach=False), init, "cpu")
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_params(device, dtype):
    init = _params(dtype)
    got, _ = _run(lambda p: FusedAdamW(p, lr=1e-2), init, device)
    ref, _ = _run(lambda p: torch.optim.AdamW(p, lr=1e-2, fused=True), init, "cpu")
    for a, b in zip(got, ref):
        assert a.dtype == dtype
        torch.testing.assert_close(a, b)


def test_grad_scaler_step_and_skip_on_inf(device):
    model = torch.nn.Linear(8, 4).to(device)
    opt = FusedAdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("musa", init_scale=1024.0)
    x = torch.randn(16, 8, device=device)
    before = [p.detach().clone() for p in model.parameters()]
    scaler.scale(model(x).square().mean()).backward()
    scaler.step(opt)
    scaler.update()
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters()))
    # Same step without scaling, on a copy: the scaled fused step unscaled the gradients itself.
    ref = torch.nn.Linear(8, 4)
    ref.load_state_dict({k: v.cpu() for k, v in zip(model.state_dict(), before)})
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, foreach=False)
    ref(x.cpu()).square().mean().backward()
    ref_opt.step()
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-4, atol=1e-5)
    # An inf gradient: the step is skipped and the scale shrinks.
    after = [p.detach().clone() for p in model.parameters()]
    opt.zero_grad()
    scaler.scale(model(x).square().mean() * float("inf")).backward()
    scale = scaler.get_scale()
    scaler.step(opt)
    scaler.update()
    assert all(torch.equal(a, p) for a, p in zip(after, model.parameters()))
    assert scaler.get_scale() < scale


@pytest.mark.parametrize("where", ["musa", "cpu"])
@pytest.mark.parametrize("amsgrad", [False, True])
def test_direct_step_matches_torchs_fused_step(where, amsgrad):
    # FusedAdam(W) skips torch's per-step list building once every parameter has state; each step
    # must equal torch's own fused AdamW on the same device, also across what hands the step back to
    # torch (a parameter without a gradient, mixed dtypes) and after a state dict is loaded.
    device = torch.device(where)
    torch.optim.AdamW([torch.nn.Parameter(torch.ones(1))])  # torch's step gets Optimizer's hook wrapper

    def run(make_opt):
        init = _params() + [_params(torch.bfloat16)[0]]
        params = [torch.nn.Parameter(p.clone().to(device)) for p in init[:3]]
        opt = make_opt(params)
        built, pre_hooks = [0], [0]
        init_group = opt._init_group
        opt._init_group = lambda *a: (built.__setitem__(0, built[0] + 1), init_group(*a))[1]
        opt.register_step_pre_hook(lambda *a: pre_hooks.__setitem__(0, pre_hooks[0] + 1))
        g = torch.Generator().manual_seed(5)
        counts = []
        for step in range(8):
            for p in params:
                p.grad = torch.randn(p.shape, generator=g).to(p.dtype).to(device)
            if step == 2:
                opt.param_groups[0]["lr"] = 5e-3
            if step == 3:
                params[1].grad = None  # torch's step: this parameter is left as it is
            if step == 4:
                extra = torch.nn.Parameter(init[3].clone().to(device))
                extra.grad = torch.randn(extra.shape, generator=g).to(extra.dtype).to(device)
                opt.add_param_group({"params": [extra]})
                params.append(extra)
            if step == 6:
                opt.load_state_dict(opt.state_dict())
            opt.step()
            counts.append(built[0])
        return [p.detach().cpu() for p in params], counts, pre_hooks[0]

    got, counts, hooks = run(lambda p: FusedAdamW(p, lr=1e-2, amsgrad=amsgrad))
    ref, _, ref_hooks = run(lambda p: torch.optim.AdamW(p, lr=1e-2, amsgrad=amsgrad, fused=True))
    for a, b in zip(got, ref):
        assert torch.equal(a, b)
    assert hooks == ref_hooks == 8
    # torch's list building ran for the first step, the one without a gradient and the new group's
    # first step (once per group); every other step went straight to the kernels
    assert counts == [1, 1, 1, 2, 4, 4, 4, 4]


def _reference_lamb(params, grads_per_step, lr, betas, eps, wd, max_grad_norm):
    """LAMB written out per parameter in float64 (Apex/torch_musa FusedLAMB's update)."""
    p = [t.double().clone() for t in params]
    m = [torch.zeros_like(t) for t in p]
    v = [torch.zeros_like(t) for t in p]
    for step, grads in enumerate(grads_per_step, start=1):
        grads = [g.double() for g in grads]
        norm = torch.sqrt(sum((g * g).sum() for g in grads))
        clip = max(norm.item() / max_grad_norm, 1.0)
        for i, g in enumerate(grads):
            g = g / clip
            m[i] = betas[0] * m[i] + (1 - betas[0]) * g
            v[i] = betas[1] * v[i] + (1 - betas[1]) * g * g
            u = (m[i] / (1 - betas[0] ** step)) / ((v[i] / (1 - betas[1] ** step)).sqrt() + eps) + wd * p[i]
            wn, un = p[i].norm(), u.norm()
            ratio = (wn / un).item() if wn > 0 and un > 0 else 1.0
            p[i] = p[i] - lr * ratio * u
    return p


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2)])
def test_fused_lamb_matches_reference(device, dtype, tol):
    init = _params(dtype)
    g = torch.Generator().manual_seed(3)
    grads = [[torch.randn(t.shape, generator=g) * 3 for t in init] for _ in range(4)]  # norms > 1: clipping
    params = [torch.nn.Parameter(t.clone().to(device)) for t in init]
    opt = FusedLAMB(params, lr=1e-2, weight_decay=0.01, max_grad_norm=1.0)
    for step in grads:
        for p, gr in zip(params, step):
            p.grad = gr.to(dtype).to(device)
        opt.step()
    ref = _reference_lamb([t.float() for t in init], [[gr.to(dtype) for gr in s] for s in grads],
                          1e-2, (0.9, 0.999), 1e-6, 0.01, 1.0)
    for a, b in zip(params, ref):
        assert a.dtype == dtype
        torch.testing.assert_close(a.detach().cpu().double(), b, rtol=tol, atol=tol)


def test_fused_lamb_leaves_gradients_alone_and_rejects_bad_input(device):
    p = torch.nn.Parameter(torch.randn(8, device=device))
    p.grad = torch.full((8,), 10.0, device=device)
    FusedLAMB([p]).step()
    assert torch.equal(p.grad.cpu(), torch.full((8,), 10.0))  # clipping worked on a copy
    with pytest.raises(ValueError, match="betas"):
        FusedLAMB([p], betas=(1.0, 0.999))
    with pytest.raises(ValueError, match="lr"):
        FusedLAMB([p], lr=-1.0)


@pytest.mark.parametrize("cls", [FusedAdam, FusedAdamW])
def test_state_dict_holds_step_on_the_host_and_round_trips(device, cls, tmp_path):
    # torch_musa's FusedAdam checkpoints keep `step` on the CPU; the optimizer's own stays on musa
    init = _params()
    _, opt = _run(lambda p: cls(p, lr=1e-2), init, device, steps=3)
    torch.save(opt.state_dict(), tmp_path / "opt.pt")
    saved = torch.load(tmp_path / "opt.pt")
    for param_state in saved["state"].values():
        assert param_state["step"].device.type == "cpu" and param_state["step"].item() == 3
        assert param_state["exp_avg"].device == device
    assert all(s["step"].device == device for s in opt.state.values())  # the live state is untouched
    # loading it back gives the same next step as continuing without the checkpoint
    params = [torch.nn.Parameter(p.clone().to(device)) for p in init]
    resumed = cls(params, lr=1e-2)
    resumed.load_state_dict(saved)
    assert all(s["step"].device == device for s in resumed.state.values())
    for p_live, p_new in zip(opt.param_groups[0]["params"], params):
        p_new.data.copy_(p_live.data)
        p_live.grad = torch.ones_like(p_live)
        p_new.grad = torch.ones_like(p_new)
    opt.step()
    resumed.step()
    for a, b in zip(opt.param_groups[0]["params"], params):
        assert torch.equal(a.detach().cpu(), b.detach().cpu())


def test_fused_steps_follow_tensors_that_change_between_steps(device):
    # The op layer keeps a list op's kernel-device aliases from one step to the next: a parameter
    # given new memory, a replaced state tensor and new gradient tensors must each be seen.
    init = _params()

    def run(dev, make_opt):
        params = [torch.nn.Parameter(p.clone().to(dev)) for p in init]
        opt = make_opt(params)
        g = torch.Generator().manual_seed(3)
        for step in range(5):
            for p in params:
                p.grad = torch.randn(p.shape, generator=g).to(dev)
            if step == 2:
                params[0].data = params[0].data.clone() * 2  # same parameter, new memory
                state = opt.state[params[1]]
                state["exp_avg"] = state["exp_avg"].clone()  # a replaced moment
            opt.step()
        return [p.detach().cpu() for p in params], params, opt

    got, params, opt = run(device, lambda p: FusedAdamW(p, lr=1e-2))
    ref, _, _ = run("cpu", lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=False))
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # A tensor on the wrong device in the step's lists is a clear error, and the next step runs.
    ps = [p.detach() for p in params]
    grads = [torch.ones_like(p) for p in ps]
    moments = [torch.zeros_like(p) for p in ps]
    steps = [torch.ones((), device=device) for _ in ps]

    def fused(exp_avgs):
        torch._fused_adamw_(ps, grads, exp_avgs, [m.clone() for m in moments], [], steps, lr=1e-2, beta1=0.9,
                            beta2=0.999, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)

    with pytest.raises(RuntimeError, match="device"):
        fused([m.clone() for m in moments[:-1]] + [moments[-1].cpu()])
    before = ps[0].clone()
    fused([m.clone() for m in moments])
    assert not torch.equal(ps[0], before)


def test_list_op_that_fails_part_way_leaves_what_the_cpu_leaves(device):
    # The foreach add of the step counts writes tensor by tensor where it cannot fuse: when a
    # later tensor fails, the earlier ones keep one update, as on the CPU (never a second one).
    results = []
    for dev in ("cpu", device):
        a = torch.zeros(4, device=dev)
        b = torch.zeros(1, device=dev).expand(4)  # in-place add into an expanded tensor fails
        for _ in range(2):  # (the second call takes the kept alias lists)
            with pytest.raises(RuntimeError):
                torch._foreach_add_([a, b], 1)
        results.append(a.cpu())
    torch.testing.assert_close(results[1], results[0])
